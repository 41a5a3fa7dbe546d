/* The worker engine's decision rules (see pd_worker_step.h). */
#include "pd_worker_step.h"

#include "pd_worker_shared.h"

pd_worker_step_t pd_worker_open_step(int fault, const pd_fault_t *fp, pd_role_t role,
                                     int is_stream) {
  switch (fault) {
  case PD_FAULT_CONNECT_REFUSED: return PD_WORKER_STEP_REFUSE;
  case PD_FAULT_RESET_BEFORE_HEAD: return PD_WORKER_STEP_RESET;
  case PD_FAULT_STATUS:
    return pd_worker_status_is_deferred(fp, role == PD_ROLE_DECODE, is_stream)
               ? PD_WORKER_STEP_GO
               : PD_WORKER_STEP_STATUS;
  default: return PD_WORKER_STEP_GO;
  }
}

pd_worker_step_t pd_worker_token_step(int fault, const pd_fault_t *fp, uint32_t k, int is_stream) {
  if (fault < 0 || k < (fp ? fp->after_tokens : 0)) return PD_WORKER_STEP_GO;
  switch ((pd_fault_kind_t)fault) {
  case PD_FAULT_HANG_MID_STREAM: return PD_WORKER_STEP_HANG;
  case PD_FAULT_RESET_MID_STREAM: return PD_WORKER_STEP_RESET;
  case PD_FAULT_BODY_ERROR: return PD_WORKER_STEP_READ_ERROR;
  case PD_FAULT_SSE_ERROR:
  case PD_FAULT_ERROR_AFTER_KV: return PD_WORKER_STEP_ERROR_500;
  case PD_FAULT_TRUNCATE: return is_stream ? PD_WORKER_STEP_TRUNCATE : PD_WORKER_STEP_READ_ERROR;
  case PD_FAULT_STATUS: return PD_WORKER_STEP_STATUS; /* deferred: after the KV */
  default: return PD_WORKER_STEP_GO;
  }
}

pd_worker_step_t pd_worker_respond_step(int fault) {
  switch (fault) {
  case PD_FAULT_RESET_MID_STREAM: return PD_WORKER_STEP_RESET;
  case PD_FAULT_ERROR_AFTER_KV: return PD_WORKER_STEP_ERROR_500;
  case PD_FAULT_BODY_ERROR: return PD_WORKER_STEP_READ_ERROR;
  case PD_FAULT_TRUNCATE: return PD_WORKER_STEP_TRUNCATE;
  default: return PD_WORKER_STEP_GO;
  }
}

pd_truth_t pd_worker_interrupted_truth(pd_worker_leg_state_t st, uint64_t drip_ms) {
  return (st == PD_WORKER_LEG_HUNG || st == PD_WORKER_LEG_WAIT_KV ||
          st == PD_WORKER_LEG_BOOTSTRAP || st == PD_WORKER_LEG_NEW || st == PD_WORKER_LEG_QUEUED ||
          (drip_ms && st == PD_WORKER_LEG_STREAM))
             ? PD_TRUTH_STALLED
             : PD_TRUTH_CANCELLED;
}

int pd_worker_token_coalesces(pd_chunking_t c, uint32_t k, uint32_t tokens, int fault,
                              const pd_fault_t *fp) {
  uint32_t after = fp ? fp->after_tokens : 0;
  return c == PD_CHUNK_COALESCE && k + 1 < tokens && !(fault >= 0 && k + 1 >= after);
}
