/* pd_worker_step: the worker engine's decision rules (mock_workers/pd_wengine.c, driven by
 * the simulator and by the real mock, mock_workers/server/pd_mock_drive.c): what a
 * leg's fault does when the request arrives and at each decode token, the truth of a leg cut
 * off by its client, and when two tokens go out as one chunk. Pure functions: the callers do
 * the I/O the answer names. */
#ifndef PD_WORKER_STEP_H
#define PD_WORKER_STEP_H
#include <stdint.h>

#include "pd_worker.h"

typedef enum {
  PD_WORKER_STEP_GO = 0,     /* no fault acts here: carry on */
  PD_WORKER_STEP_HANG,       /* no more output, connection kept open */
  PD_WORKER_STEP_REFUSE,     /* connection refused before any byte (truth never) */
  PD_WORKER_STEP_RESET,      /* connection reset (failed) */
  PD_WORKER_STEP_READ_ERROR, /* body cut mid-way (failed) */
  PD_WORKER_STEP_ERROR_500,  /* error answer 500 (stream: error event and [DONE]) */
  PD_WORKER_STEP_STATUS,     /* the fault's status, SGLang's JSON error body */
  PD_WORKER_STEP_TRUNCATE,   /* clean end without the rest (failed) */
} pd_worker_step_t;

/* Before the worker takes a slot for a new request: refused, reset, or a status answered at
 * once (not one deferred until after the KV, pd_worker_status_is_deferred); else GO. */
pd_worker_step_t pd_worker_open_step(int fault, const pd_fault_t *fp, pd_role_t role,
                                     int is_stream);

/* At decode token k (0-based; k == tokens is the end): what the leg's fault does, GO when it
 * does not act (yet). A truncate on a non-stream answer is a body read error. */
pd_worker_step_t pd_worker_token_step(int fault, const pd_fault_t *fp, uint32_t k, int is_stream);

/* When a prefill answers after its KV transfer: RESET, ERROR_500 (error_after_kv),
 * READ_ERROR (the 200 head, half the body, then the cut), TRUNCATE (the head and a clean end
 * without the body), or GO (the whole answer). */
pd_worker_step_t pd_worker_respond_step(int fault);

/* A leg whose client closed or which was aborted: stalled when it was hung, waiting on its
 * partner or slow-dripping (cut off for its slowness), else cancelled mid-progress. */
pd_truth_t pd_worker_interrupted_truth(pd_worker_leg_state_t st, uint64_t drip_ms);

/* "chunking": "coalesce" sends tokens k and k+1 as one chunk, unless k is the last token or
 * a fault acts at k+1. */
int pd_worker_token_coalesces(pd_chunking_t c, uint32_t k, uint32_t tokens, int fault,
                              const pd_fault_t *fp);

#endif
