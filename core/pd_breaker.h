/* pd_breaker: per-worker circuit breakers. Two kinds: smg's (R3.4-R3.6: consecutive counts,
 * window unused, lazy Open->HalfOpen, unlimited half-open traffic) for the smg-derived modes,
 * and pdref's (a bucketed sliding window with a failure-rate test and a bounded number of
 * half-open probes, fixing G12) for `reference`. Time is an input (ns). */
#ifndef PD_BREAKER_H
#define PD_BREAKER_H
#include <stdint.h>

/* Buckets in the sliding window: the window moves in steps of window/PD_BREAKER_BUCKETS. */
#define PD_BREAKER_BUCKETS 10

typedef enum {
  PD_BREAKER_CLOSED = 0,
  PD_BREAKER_OPEN = 1,
  PD_BREAKER_HALF_OPEN = 2,
} pd_breaker_state_t;

typedef enum {
  PD_BREAKER_KIND_SMG = 0,
  PD_BREAKER_KIND_WINDOW = 1,
} pd_breaker_kind_t;

typedef enum {
  PD_BREAKER_SUCCESS = 0,
  PD_BREAKER_FAILURE = 1,
  PD_BREAKER_NEUTRAL = 2, /* cancelled: releases a probe slot, counts nothing */
} pd_breaker_result_t;

typedef struct pd_breaker_config {
  pd_breaker_kind_t kind;
  uint32_t failure_threshold; /* SMG: consecutive failures to open; WINDOW: min failures in
                                 window to open. UINT32_MAX disables the breaker. */
  uint32_t success_threshold; /* successes in half-open to close */
  uint64_t open_ns;           /* time open before half-open (timeout_duration) */
  uint64_t window_ns;         /* WINDOW only: window length */
  uint32_t failure_rate_pct;  /* WINDOW only: also need failures*100 >= rate*total */
  uint32_t half_open_max_probes; /* WINDOW only: concurrent probes admitted in half-open */
} pd_breaker_config_t;

/* smg router defaults: 10 / 3 / 60 s / window 120 s (unused) (R3.4). */
void pd_breaker_config_smg(pd_breaker_config_t *c);
/* pdref reference defaults: window 120 s, >= 10 failures and >= 50 % of outcomes in window,
 * open 60 s, 1 probe at a time, 3 successes to close. */
void pd_breaker_config_window(pd_breaker_config_t *c);

typedef struct pd_breaker {
  pd_breaker_config_t cfg;
  pd_breaker_state_t state;
  uint32_t consecutive_failures;
  uint32_t consecutive_successes;
  uint64_t last_change_ns;
  uint32_t probes_in_flight;   /* probes of the current half-open period not yet recorded */
  uint32_t half_open_period;   /* half-open periods entered so far (never 0 once entered): the
                                  tag of the probes admitted in the current one */
  uint64_t bucket_start_ns[PD_BREAKER_BUCKETS];
  uint32_t bucket_fail[PD_BREAKER_BUCKETS];
  uint32_t bucket_total[PD_BREAKER_BUCKETS];
  uint32_t transitions; /* count of state changes, for traces and tests */
} pd_breaker_t;

void pd_breaker_init(pd_breaker_t *b, const pd_breaker_config_t *cfg);

/* Current state; applies the lazy Open->HalfOpen move when open_ns has passed (R3.6). */
pd_breaker_state_t pd_breaker_state(pd_breaker_t *b, uint64_t now_ns);

/* May a request go to this worker now? SMG: closed or half-open. WINDOW: closed, or half-open
 * with fewer than half_open_max_probes probes in flight. Does not take a probe slot. */
int pd_breaker_can_execute(pd_breaker_t *b, uint64_t now_ns);

/* Admit one request (call after choosing the worker). Sets *probe to the half-open period
 * whose probe slot it took (WINDOW only, never 0), or 0 when it took none; pass it back to
 * pd_breaker_record. */
void pd_breaker_admit(pd_breaker_t *b, uint64_t now_ns, uint32_t *probe);

/* Record an outcome; probe is what pd_breaker_admit set. A probe frees a slot only of the
 * half-open period it was admitted in: one from an earlier period (the breaker re-opened and
 * turned half-open again meanwhile) frees nothing, so no two probes of a period with one slot
 * are ever in flight. Returns 1 if the state changed. */
int pd_breaker_record(pd_breaker_t *b, uint64_t now_ns, pd_breaker_result_t r, uint32_t probe);

/* pd_breaker_record with the Closed -> Open move allowed only when may_open is set: a failure
 * that would open the breaker is still counted, but the breaker stays Closed (the reference's
 * bounded ejection, R-BREAKER-BOUND: the caller knows how many of the role are already out).
 * HalfOpen -> Open is never held: that worker is already out. */
int pd_breaker_record_bounded(pd_breaker_t *b, uint64_t now_ns, pd_breaker_result_t r,
                              uint32_t probe, int may_open);

const char *pd_breaker_state_name(pd_breaker_state_t s);

/* Start a breaker in state st at now_ns, as if it had just moved there (a scenario's
 * workers[].breaker_initial: a run that begins with a worker's breaker open or half-open). */
void pd_breaker_start_in(pd_breaker_t *b, pd_breaker_state_t st, uint64_t now_ns);

#endif
