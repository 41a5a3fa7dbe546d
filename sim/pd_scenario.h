/* pd_scenario: the scenario file format (docs/scenarios.md) and its loader. A scenario is a
 * world (workers and their fault scripts), a client workload, gateway settings, and the
 * expected verdict per mode. The loader rejects unknown keys and wrong types, naming the
 * file and the JSON path (e.g. "scenarios/x.json: $.workers[1].faults[0].kind: unknown fault
 * kind \"hang\""). Fuzzed (fuzz/fuzz_scenario.c). */
#ifndef PD_SCENARIO_H
#define PD_SCENARIO_H
#include <stddef.h>
#include <stdint.h>

#include "pd_dispatch.h"
#include "pd_prng.h"
#include "pd_worker.h" /* faults, a worker's spec: the worker engine's types */

#define PD_SCENARIO_MAX_WORKERS 64u     /* per scenario, both roles together */
#define PD_SCENARIO_MAX_TRAFFIC_FAULTS 16u     /* scenario-level faults that follow the traffic */
#define PD_SCENARIO_MAX_BURSTS 64u      /* workload.bursts entries */
#define PD_SCENARIO_MAX_STEPS 16u       /* workload.steps entries: a ramp and a spike or two */
#define PD_SCENARIO_MAX_USERS 100000u   /* workload.users: closed-loop clients */
#define PD_SCENARIO_MAX_CLIENT_RETRIES 16u /* workload.client_retries */
#define PD_SCENARIO_MIN_FACTOR 0.01     /* a step's factor: 1/100 of the base load ... */
#define PD_SCENARIO_MAX_FACTOR 100.0    /* ... to 100 times it */
#define PD_SCENARIO_MAX_REQUESTS 10000000u /* an hour at 2,000/s (sim bench) */
#define PD_SCENARIO_MAX_FILE_BYTES (1u << 20)
/* Largest value of any *_ms (and net_us) field, and of requests * interval_ms: about 11.6
 * days, so times converted to ns (x 1e6) and summed over a run stay far below 2^64. */
#define PD_SCENARIO_MAX_MS 1000000000u

/* Invariant IDs, bit i-1 of a mask is invariant Ii (docs/spec.md). */
typedef enum {
  PD_INVARIANT_TERMINATION = 1,    /* I1 */
  PD_INVARIANT_ORPHAN_LEG = 2,     /* I2 */
  PD_INVARIANT_STRANDED_SLOT = 3,  /* I3 */
  PD_INVARIANT_OUTCOME = 4,        /* I4 */
  PD_INVARIANT_FALSE_SUCCESS = 5,  /* I5 */
  PD_INVARIANT_COMMIT = 6,         /* I6: no retry after commit; no duplicated or lost tokens */
  PD_INVARIANT_ATTEMPTS = 7,       /* I7 */
  PD_INVARIANT_ROOMS = 8,          /* I8 */
  PD_INVARIANT_LOAD_BALANCE = 9,   /* I9 */
  PD_INVARIANT_LOAD_TRUTH = 10,    /* I10 */
  PD_INVARIANT_LOGPROBS = 11,      /* I11 */
  PD_INVARIANT_BREAKER = 12,       /* I12 */
  PD_INVARIANT_DETERMINISM = 13,   /* I13 */
  PD_INVARIANT_ERROR_VISIBLE = 14, /* I14 */
  PD_INVARIANT_SERVED = 15, /* I15: a request expected to succeed is served while all is healthy */
  PD_INVARIANT_RETRY_FAILED = 16, /* I16: no retry onto a worker that failed the request while an
                               untried eligible one existed */
  PD_INVARIANT_QUIESCENCE = 17,   /* I17: after the healed phase, nothing is left held anywhere */
  PD_INVARIANT_STRANDED_KV = 18,  /* I18: KV pages freed within grace of the client's end */
  PD_INVARIANT_FREED_BLOCKS = 19, /* I19: no decode answers 200 from KV read off freed blocks */
  PD_INVARIANT_DISAGGREGATED = 20, /* I20: no request served without KV from its own prefill */
  PD_INVARIANT_PAIR_GROUP = 21,    /* I21: a decode pairs only with a prefill of its group */
  PD_INVARIANT_RANK_AGREEMENT = 22, /* I22: decode looks its room up on the prefill's DP rank */
  PD_INVARIANT_GOODPUT_FLOOR = 23, /* I23: a load step's goodput stays above the stated share */
  PD_INVARIANT_QUEUE_DEADLINE = 24, /* I24: a queued request leaves the queue by its deadline */
  PD_INVARIANT_RETRY_BUDGET = 25,  /* I25: retries that reached workers stay within the budget */
  PD_INVARIANT_RECOVERY = 26,      /* I26: goodput is back within the bound after the trigger */
} pd_invariant_t;
#define PD_INVARIANT_COUNT 26

typedef struct pd_scenario_burst {
  uint64_t at_ms;    /* arrival time of the burst, from the start of the run */
  uint32_t requests; /* requests arriving at that instant */
} pd_scenario_burst_t;

/* A load step (workload.steps): from at_ms on, the load is `factor` times the base (the open
 * loop's arrival rate, or the closed loop's number of users), reached linearly over ramp_ms
 * from the factor before it (1 before the first step). */
typedef struct pd_scenario_step {
  uint64_t at_ms;
  double factor;
  uint64_t ramp_ms;
} pd_scenario_step_t;

typedef struct pd_scenario_workload {
  uint32_t requests;       /* default 1 */
  pd_route_t route;        /* "route": "/generate" (default) | "/v1/completions" | ... */
  double stream;           /* fraction of streaming requests (true=1, false=0), default 1 */
  double logprob;          /* fraction asking for logprobs, default 0 */
  double critical_share;   /* R-ADMIT-PRIO: share of requests of class critical, default 0 */
  double sheddable_share;  /* ... of class sheddable (the rest standard), default 0 */
  uint32_t batch;          /* batch size, 0 = no batch */
  uint32_t tokens;         /* output tokens, default 8 */
  uint64_t interval_ms;    /* arrival spacing, default 0 (all at t=0... plus index ns) */
  double poisson;          /* 1: exponential inter-arrivals with mean interval_ms */
  uint64_t interval_ns;    /* not a scenario key: when > 0, the spacing in ns instead of
                              interval_ms (`sim bench --rate`, which keeps interval_ms its floor) */
  uint64_t disconnect_at_ms; /* client disconnects this long after arrival (0 never) */
  double disconnect_prob;  /* of requests that disconnect, default 1 if disconnect_at_ms */
  uint64_t client_blocked_at_ms; /* a slow client: it stops reading this long after arrival
                                    (0 never), and the gateway holds decode back (R-BACKPRESSURE) */
  uint64_t client_blocked_ms;    /* ... for this long, then reads again */
  double fault_rate;       /* random faults: probability per leg of one random fault kind */
  uint32_t prompt_tokens;  /* prompt length in tokens (words in the prompt; 0: the short
                              default prompt); with prompt_tokens_max, uniform between them */
  uint32_t prompt_tokens_max;
  pd_scenario_burst_t bursts[PD_SCENARIO_MAX_BURSTS]; /* arrival instants; replace interval_ms */
  uint32_t n_bursts;
  /* closed loop (O5.1): `users` clients, each sending its next request think_ms after its last
   * one ended; `requests` then counts the users' jobs (a job's retries are more requests) */
  uint32_t users;                /* 0: open loop (the arrival keys above) */
  uint64_t think_ms;
  /* every client, open or closed loop: it gives up client_timeout_ms after sending (0 never)
   * and re-sends a failed request (timed out, no answer, 408/429/5xx, a cut stream) up to
   * client_retries times, after retry_backoff_ms doubling per retry up to
   * retry_backoff_max_ms, shortened by up to retry_jitter of itself (the seeded PRNG) */
  uint64_t client_timeout_ms;
  uint32_t client_retries;
  uint64_t retry_backoff_ms;     /* default 100 */
  uint64_t retry_backoff_max_ms; /* default 10000 */
  double retry_jitter;
  pd_scenario_step_t steps[PD_SCENARIO_MAX_STEPS]; /* load steps, at_ms increasing */
  uint32_t n_steps;
  uint32_t routed_dp_rank1; /* "routed_dp_rank" + 1: /generate bodies carry that DP rank, as
                               a client or an upstream router may (S2.14); 0: none */
} pd_scenario_workload_t;

typedef struct pd_scenario_config {
  char prefill_policy[16]; /* default "round_robin" */
  char decode_policy[16];
  uint32_t max_attempts;   /* 0 = mode default */
  /* 0 = mode default; apply to the modes that model them */
  uint64_t request_timeout_ms, first_token_timeout_ms, idle_timeout_ms, total_timeout_ms,
      tail_timeout_ms, head_timeout_ms;
  uint64_t commit_timeout_ms, token_budget_ms; /* reference, 0 = default (R-PROGRESS) */
  uint32_t breaker_failure_threshold; /* 0 = mode default */
  uint64_t breaker_open_ms;           /* 0 = mode default */
  uint32_t breaker_half_open_probes;  /* reference: probes admitted in half-open; 0 = default */
  uint64_t bootstrap_timeout_ms;      /* SGLang prefill, default 300000 (S5.4) */
  uint64_t waiting_timeout_ms;        /* SGLang decode, default 300000 (S5.5) */
  uint64_t deadline_ms;               /* I1 bound from arrival, default 120000 */
  uint64_t grace_ms;                  /* I2/I3/I10 bound after the client's end, default 1000 */
  /* memory pressure on the gateway (docs/scenarios.md): from alloc_fail_from_ms for
   * alloc_fail_for_ms of virtual time every alloc_fail_every-th allocation of the core fails
   * (default 1: each one); for_ms 0: none */
  uint64_t alloc_fail_from_ms, alloc_fail_for_ms;
  uint32_t alloc_fail_every;
  uint64_t net_us;                    /* one-way network latency, default 100 */
  uint64_t seed;                      /* default 1; "seed" may be a string for 64-bit */
  uint64_t tie_seed;                  /* order of same-instant events; 0 = insertion order */
  /* cost figures (sim/pd_metrics.h): a request counts towards goodput when it completed
   * cleanly within both SLOs; goodput_window_ms is the recovery window after a fault burst */
  uint64_t slo_ttft_ms;               /* default 1000 */
  uint64_t slo_e2e_ms;                /* default 10000 */
  uint64_t goodput_window_ms;         /* default 10000, at least 10 */
  double decode_only_ok;   /* 1 (true): a request served by decode alone is acceptable here
                            (I20 not judged); 0 (default): disaggregation is required */
  /* reference admission (docs/spec.md R-ADMIT-*): on (1, default) or off (0); the queue's
   * bound and its per-request deadline from arrival (0 = the mode's defaults: 1024, 20 s) */
  double admission;
  uint32_t admit_queue;
  uint64_t admit_queue_ms;
  uint64_t recover_within_ms; /* I26: goodput back within this long after the trigger ends;
                                 0 (default): not judged */
  double goodput_floor;    /* I23: share (0..1) of min(offered, capacity) a load step's goodput
                              must keep; 0 (default): not judged */
  double socket_min_scale; /* pdref conform: the smallest --timeout-scale this workload's
                            * arrival rate survives on real sockets (0 = any) */
  int seeded_bug;          /* pd_seeded_bug_t: a known defect switched on in the reference
                            * (docs/mutation.md "Seeded bugs"); 0 = none */
} pd_scenario_config_t;

typedef struct pd_scenario_expect {
  int is_set;             /* the file gave an expectation for this mode */
  uint32_t violated_mask; /* exact set of invariants that must be violated; 0 = PASS */
  uint32_t limit_mask;    /* {"deployment_limit": [...], "why": ...}: the same set, declared a
                           * property of the deployment no gateway can pass (docs/spec.md
                           * "Deployment limits"); 0 for "pass" and a plain list */
  char limit_why[240];    /* its "why" */
} pd_scenario_expect_t;

typedef struct pd_scenario {
  char path[256];
  char name[96];
  char description[512];
  char tags[8][24];       /* free labels, e.g. "seed-1", "G6", "ttft" */
  uint32_t n_tags;
  pd_scenario_config_t config;
  pd_scenario_worker_t workers[PD_SCENARIO_MAX_WORKERS];
  uint32_t n_workers;
  pd_scenario_workload_t workload;
  pd_traffic_fault_t tfaults[PD_SCENARIO_MAX_TRAFFIC_FAULTS]; /* top-level "faults" */
  uint32_t n_tfaults;
  pd_scenario_expect_t expect[PD_MODE_COUNT];
  /* "unexercised": {mode: reason}: in that mode some fault entry cannot fire (e.g. mini_lb
   * never retries, so a fault on the retry's worker is never reached); the row is then judged
   * as usual instead of NOT EXERCISED, and must really be unexercised. "" = not declared. */
  char unexercised[PD_MODE_COUNT][160];
} pd_scenario_t;

/* A scenario's PD protocol: vllm when any of its workers speaks it, else sglang. `--mode all`
 * runs the modes that speak it (pd_mode_speaks), and the reference speaks it. */
static inline pd_protocol_t pd_scenario_protocol(const pd_scenario_t *s) {
  for (uint32_t i = 0; i < s->n_workers; i++)
    if (s->workers[i].protocol == PD_PROTOCOL_VLLM) return PD_PROTOCOL_VLLM;
  return PD_PROTOCOL_SGLANG;
}

/* Fill *s with every default (one prefill "p0" and one decode "d0", no faults). */
void pd_scenario_defaults(pd_scenario_t *s);
/* A worker as the loader makes one before reading its keys: every default (timings,
 * chunking, breaker, capacity, protocol, KV expiry), with this name and role. */
void pd_scenario_worker_defaults(pd_scenario_worker_t *w, const char *name, pd_role_t role);
/* The gateway configuration a scenario asks for in a mode: the mode's defaults
 * (pd_gw_config_default) with the scenario's config overrides applied where the mode models
 * them. One definition for the simulator and for `pdref conform`'s {pdref_gateway_args}. */
void pd_scenario_gw_config(const pd_scenario_t *s, pd_mode_t mode, pd_gw_config_t *c);

/* Replace the workers with n_prefill prefill workers p0.. and n_decode decode workers d0..,
 * all with default timings and no faults (n_prefill + n_decode <= PD_SCENARIO_MAX_WORKERS). */
void pd_scenario_set_workers(pd_scenario_t *s, uint32_t n_prefill, uint32_t n_decode);

/* Parse a scenario from text. `path` names it in messages. On error returns PD_ERR_JSON /
 * PD_ERR_FIELD / PD_ERR_LIMIT / PD_ERR_TOO_LARGE and writes "<path>: <json path>: <what>" to
 * err. Requires "name", "workers" (>= 1 prefill and >= 1 decode) and "expect"; unknown keys
 * anywhere are errors. */
int pd_scenario_parse(pd_scenario_t *s, const char *path, const char *text, size_t len,
                      char *err, size_t errlen);

/* Read and parse a file (PD_ERR_IO when unreadable). */
int pd_scenario_load(pd_scenario_t *s, const char *path, char *err, size_t errlen);

const char *pd_fault_kind_name(pd_fault_kind_t k);

/* The gap in ns before request i arrives: for i = 0 from the start of the run, else from
 * request i-1's arrival. bursts, or interval_ms (exponential with poisson, drawn from rng).
 * One definition for the simulator and for `pdref conform`'s client. */
uint64_t pd_scenario_arrival_gap_ns(const pd_scenario_workload_t *wl, uint32_t i, pd_prng_t *rng);
/* The load factor at t_ns from the start of the run (workload.steps; 1 without steps). */
double pd_scenario_load_factor(const pd_scenario_workload_t *wl, uint64_t t_ns);
/* The arrival time of open-loop request i (i > 0) after request i-1 arrived at t_prev_ns: the
 * gap of pd_scenario_arrival_gap_ns divided by the load factor at t_prev_ns (bursts ignore
 * steps: the loader forbids both). Request 0 arrives at pd_scenario_arrival_gap_ns(wl, 0). */
uint64_t pd_scenario_arrival_next_ns(const pd_scenario_workload_t *wl, uint32_t i,
                                     uint64_t t_prev_ns, pd_prng_t *rng);
/* Closed loop: users active at t_ns, round(users x load factor). */
uint32_t pd_scenario_users_at(const pd_scenario_workload_t *wl, uint64_t t_ns);
/* Closed loop: the first time user u (0-based) is active within step k's ramp, when the step
 * raises the load to include it (UINT64_MAX when it does not). */
uint64_t pd_scenario_user_start_ns(const pd_scenario_workload_t *wl, uint32_t k, uint32_t u);
/* The client's backoff before retry number `retry` (1 = the first): retry_backoff_ms x
 * 2^(retry-1) capped at retry_backoff_max_ms, less up to retry_jitter of it drawn from rng. */
uint64_t pd_scenario_retry_backoff_ns(const pd_scenario_workload_t *wl, uint32_t retry,
                                      pd_prng_t *rng);
/* Whether a client re-sends a request that ended so (retries left aside): timed out by the
 * client, no head, a status 408, 429 or 5xx, or a stream cut short. */
int pd_scenario_client_should_retry(int timed_out, int has_head, int status, int aborted);

/* Request i's prompt length in tokens: prompt_tokens, or with prompt_tokens_max uniform in
 * prompt_tokens..prompt_tokens_max (inclusive) from a hash of seed and i, not from any PRNG
 * stream, so no other draw moves (0: the short default prompt). Pure: the simulator and
 * `pdref conform`'s client give request i the same length for the same seed. */
uint32_t pd_scenario_prompt_tokens(const pd_scenario_workload_t *wl, uint64_t seed, uint64_t i);
/* The load steps' overload spans, one per call from *next (start with 0): a step above factor
 * 1 that follows none, until the later step that brings the load back to 1 or under. Fills
 * from_ms, to_ms (that step's at_ms) and ramp_ms (its ramp), advances *next and returns 1; 0
 * when no span is left (a rise that never comes back is none). */
int pd_scenario_step_span(const pd_scenario_workload_t *wl, uint32_t *next, uint64_t *from_ms,
                          uint64_t *to_ms, uint64_t *ramp_ms);
/* Request i's priority class (R-ADMIT-PRIO, a pd_prio_t): critical with critical_share,
 * sheddable with sheddable_share, else standard, from a hash of seed and i as above (no
 * stream moves: rows without the keys keep their traces). */
int pd_scenario_prio(const pd_scenario_workload_t *wl, uint64_t seed, uint64_t i);
/* "I1".."I20" -> 1..20; 0 when not an invariant ID. */
int pd_invariant_parse(const char *id);
const char *pd_invariant_name(int inv); /* short name, e.g. "termination" */

#endif
