#include "pd_err.h"

const char *pd_strerror(int err) {
  switch (err) {
  case 0: return "ok";
#define PD_ERR_CASE(name, val, msg) case (val): return msg;
    PD_ERR_TABLE(PD_ERR_CASE)
#undef PD_ERR_CASE
  default: return "unknown error";
  }
}
