/* pd_check: the invariant checker (docs/spec.md I1-I26). It judges one finished request from
 * its records: the client's bytes (pd_client_request_t) and each leg's ground truth at the worker
 * (pd_worker_leg_t). Besides the records it reads only a judge context (pd_judge_t), which the
 * simulator fills from its world (pd_world.c) and pdref conform from its logs
 * (net/conform/pd_conform_verdict.c); it never sees a world or a socket run. */
#ifndef PD_CHECK_H
#define PD_CHECK_H
#include <stddef.h>
#include <stdint.h>

#include "pd_scenario.h"
#include "pd_world.h"

/* Everything the checker reads besides the request's records. */
typedef struct pd_judge {
  /* the scenario as judged: config.deadline_ms (I1) and config.grace_ms (I2, I3, I10), the
   * workload's route and batch (I8, I11), workers[i].name for the reasons; n_workers bounds
   * the eligible-node mask (I16) */
  const pd_scenario_t *s;
  pd_mode_t mode;            /* the reference must record an outcome for every leg (I4, Q10) */
  int is_outcome_blind;      /* the records carry no recorded outcomes (pdref conform reads
                                them from /metrics): I4 cannot require one */
  uint32_t max_attempts;     /* I7: attempts allowed per request, at least 1 */
  uint64_t now;              /* the judging instant: the end of whatever is still open */
  int is_kv_deferred;        /* I18: pages still held at now, with now within the grace, are
                                left to the caller, who judges them when they are freed (the
                                simulator: a vLLM pin outlives its request, pd_world_worker.c) */
  /* I2: how fast the mode promises to close a request's legs at the gateway once the client's
   * end is known, when it promises more than the grace (is_cancel_bound; 0: grace_ms for
   * both). The reference (R-DISCONNECT, R-TAIL): a client gone closes every leg in that same
   * virtual instant (cancel_gone_ns 0); a client response ended leaves legs supervised for
   * the tail at most (cancel_end_ns = the tail timeout; 0: none, the grace). Either bound
   * above the grace is the grace. A socket run cannot see an instant:
   * it leaves this unset. */
  int is_kv_source_known;    /* I20: the legs say where decode's KV came from (is_kv_from_pair,
                                kv_from, is_kv_pinned: the simulator); 0: not judged */
  int is_cancel_bound;
  uint64_t cancel_gone_ns, cancel_end_ns;
  uint64_t admit_queue_ns;    /* I24: the gateway's declared queue deadline after arrival (the
                                reference's R-ADMIT-QUEUE); 0: it declares none, not judged */
  int is_close_order_known;  /* I14: the legs' gateway close and worker arrival times are of
                                one time base (the simulator), so a status injected at a worker the
                                gateway had left before the request reached it is not asked of
                                the client's answer; 0 (a socket run): every one counts */
  pd_world_stats_t *stats;   /* out: clean_success, client_errors, aborted, TTFT and
                                records_lost are added to per judged request */
} pd_judge_t;

/* Judge one request (ended, gone, or cut off at j->now); returns the mask of violated
 * invariants (bit i - 1 for Ii) and writes the first finding into reason (cap bytes, "" when
 * none). Adds the request to j->stats (clean, error or aborted; TTFT of a clean stream; a
 * request whose record was lost, see pd_check_client_data, counts in records_lost). */
uint32_t pd_check_request(pd_judge_t *j, pd_client_request_t *rq, char *reason, size_t cap);

/* The client's observation of len bytes of response data (after its head): SSE events are
 * parsed as they come, a JSON body is kept whole. Returns 0, or PD_ERR_NOMEM (PD_ERR_TOO_LARGE
 * past PD_WORLD_MAX_BODY_BYTES) when the body could not be kept: the record is marked lost (rq->is_record_lost) and the request is
 * counted in records_lost when judged, which makes the run an error for its driver. */
int pd_check_client_data(pd_client_request_t *rq, const uint8_t *p, size_t len);

/* I19 (pd_check_sf.c): a decode leg served in full from KV read off freed blocks (V1.15).
 * Returns its bit, or 0; writes the finding into reason when reason is still "". */
uint32_t pd_check_freed_blocks(const pd_judge_t *j, const pd_client_request_t *rq, char *reason,
                               size_t cap);

/* I20 (pd_check_sf.c): a decode leg served in full without KV from the prefill of its own
 * attempt, unless the scenario allows decode alone (config.decode_only_ok). Returns its bit,
 * or 0; writes the finding into reason when reason is still "". */
uint32_t pd_check_disaggregated(const pd_judge_t *j, const pd_client_request_t *rq, char *reason,
                                size_t cap);

/* I21, I22 (pd_check_topo.c): a decode leg paired with a prefill of another transfer group;
 * a decode leg that looks its room up on a prefill DP rank other than the one its prefill leg
 * runs on. Each returns its bit, or 0; writes the finding into reason when still "". */
uint32_t pd_check_pair_group(const pd_judge_t *j, const pd_client_request_t *rq, char *reason,
                             size_t cap);
uint32_t pd_check_rank_agreement(const pd_judge_t *j, const pd_client_request_t *rq,
                                 char *reason, size_t cap);

/* Whether the bytes b holds contain needle (a client body the checker kept). */
int pd_check_has_bytes(const pd_buf_t *b, const char *needle);

/* I24 queue-deadline (pd_check_goodput.c): a request the gateway held at its door left it by
 * its queue deadline — its first attempt reached a worker, or the client had its answer. */
uint32_t pd_check_queue_deadline(const pd_judge_t *j, const pd_client_request_t *rq,
                                 char *reason, size_t cap);

/* I25 retry-budget (pd_check_goodput.c): a whole-run judgement for a gateway that declares a
 * retry budget (the reference's R-RETRY-BUDGET: pct % of the requests of a window of
 * window_ns, at least min a window). Per judged request the world notes its arrival and its
 * retries that reached a worker (attempts beyond the first that sent a leg a worker got:
 * worker truth); at the end the total must be within what any gateway keeping the budget can
 * have sent: n x (min + 1) + 3 x pct % of the requests, n the windows of 0.9 x window_ns
 * (the gateway counts in ten buckets) from the first arrival to the last retry. A necessary
 * condition: a budget kept never fails it; one ignored under a retry storm does. */
typedef struct pd_retry_budget {
  uint32_t pct, min;
  uint64_t window_ns;
  uint64_t requests, retries;
  uint64_t t_first, t_last;
  int has_first;
} pd_retry_budget_t;
void pd_retry_budget_begin(pd_retry_budget_t *b, uint32_t pct, uint32_t min, uint64_t window_ns);
void pd_retry_budget_note(pd_retry_budget_t *b, const pd_client_request_t *rq);
uint32_t pd_retry_budget_judge(const pd_retry_budget_t *b, char *reason, size_t cap);

/* I26 recovery (pd_check_goodput.c): a whole-run judgement. With config.recover_within_ms and a
 * trigger that ends (a load step back to 1, a crash with its restart), goodput (good answers
 * by the client's clock, binned by their end) is back within 5 % of its level before the
 * trigger no later than recover_within_ms after the trigger's end, measured as
 * pd_metrics_recovery does (windows of config.goodput_window_ms). Never back, or back late:
 * I26. No good answer before the trigger: nothing to be back to, not judged. */
typedef struct pd_recovery_check {
  int is_on, has_first;
  uint64_t bound_ns, bin_ns, from_ns, to_ns, t_first, t_last, slo_ttft_ns, slo_e2e_ns;
  uint32_t *bins;
  size_t n_bins, cap_bins;
  int is_cut; /* a bin could not be kept (memory): not judged */
} pd_recovery_check_t;
void pd_recovery_begin(pd_recovery_check_t *r, const pd_scenario_t *s);
void pd_recovery_note(pd_recovery_check_t *r, const pd_client_request_t *rq);
uint32_t pd_recovery_judge(const pd_recovery_check_t *r, char *reason, size_t cap);
void pd_recovery_free(pd_recovery_check_t *r);

/* I23 goodput-floor (pd_check_goodput.c): a whole-run judgement. The world notes every judged
 * request; at the run's end the load step's goodput (clean answers within both SLOs, by the
 * client's clock) must be at least config.goodput_floor x min(offered, capacity), capacity from
 * the worker model (pd_metrics_capacity_rps). Off without a floor or a load step that ends. */
typedef struct pd_goodput {
  int is_on;
  uint64_t from_ns, to_ns, slo_ttft_ns, slo_e2e_ns;
  double capacity_rps, floor;
  uint32_t arrivals, good;
} pd_goodput_t;
void pd_goodput_begin(pd_goodput_t *g, const pd_scenario_t *s);
void pd_goodput_note(pd_goodput_t *g, const pd_client_request_t *rq);
/* The I23 bit, with reason, when the floor was not kept; 0 otherwise. */
uint32_t pd_goodput_judge(const pd_goodput_t *g, char *reason, size_t cap);

/* The checker's own breaker model (pd_check_breaker.c, docs/spec.md I12): R-BREAKER replayed
 * per worker from the workers' ground truth of what failed — never from the gateway's
 * outcomes — so that an open the gateway reports can be judged: justified only when the
 * worker really failed often enough (Closed -> Open: at least failure_threshold of its own
 * failures since the breaker last closed, and within the window for a windowed breaker) or
 * once in the current half-open period (HalfOpen -> Open). A necessary condition: successes
 * that would have diluted the rate are not counted, so a justified open is never flagged. */
#define PD_CHECK_BREAKER_RING 64 /* own failures remembered per worker: a threshold above it
                                    is judged on the last 64 alone */
typedef struct pd_check_breaker {
  uint64_t fail_t[PD_CHECK_BREAKER_RING]; /* times the gateway learnt of an own failure */
  uint32_t n_fail;                        /* in the ring (at most the ring's size) */
  uint32_t next;                          /* ring position of the next one */
  uint64_t t_closed, t_half_open;         /* when the breaker last closed / turned half-open */
} pd_check_breaker_t;

/* The worker's own failure reached the gateway at now (each failed leg once). */
void pd_check_breaker_failure(pd_check_breaker_t *b, uint64_t now);
/* The gateway reported its breaker moving from `from` to `to` (pd_breaker_state_t) at now.
 * Returns 1 when that is an open the worker's failures do not justify, else 0; keeps the
 * times it measures from. */
int pd_check_breaker_move(pd_check_breaker_t *b, const pd_breaker_config_t *cfg, int from,
                          int to, uint64_t now);

#endif
