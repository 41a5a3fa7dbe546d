/* Internal to net/httpd/pd_httpd*.c. */
#ifndef PD_HTTPD_INT_H
#define PD_HTTPD_INT_H
#include "pd_httpd.h"

uint64_t pd_httpd_now_ns(void);
/* A whole JSON error response written straight to a socket nobody else writes to. */
void pd_httpd_raw_error(int fd, unsigned status, const char *code, const char *msg);
void pd_httpd_gate_sweep(pd_httpd_t *h, uint64_t now); /* h->mu held */
void pd_httpd_gate_free(pd_httpd_t *h);

#endif
