/* pd_dispatch: the sans-IO PD dispatch core. A gateway object owns the worker table
 * (breakers, loads, policies) and one state machine per client request. A driver (the
 * simulator, or the real-socket gateway) feeds it events with the current time and carries
 * out the actions it emits; the core never touches a socket, a clock or a global. The core
 * owns its deadlines: the driver asks for the next one (pd_gw_get_expiry) and calls
 * pd_gw_handle_expiry when its clock passes it, as ngtcp2's get_expiry / handle_expiry.
 *
 * Modes: `joined` (smg HEAD), `pr1150` (the seed), `minilb` (SGLang mini_lb) and `reference`
 * (pdref's rules, docs/spec.md) speak SGLang's destination-first protocol; `vllm-toy-proxy`,
 * `mooncake-proxy` and `llmd-sidecar` model vLLM-family proxies (source-first: prefill first,
 * its kv_transfer_params then go to decode, docs/spec.md 7.4-7.6), and `reference` speaks
 * source-first too when its configuration says protocol vllm (R-SF-*). See docs/spec.md for
 * the state diagram. */
#ifndef PD_DISPATCH_H
#define PD_DISPATCH_H
#include <stddef.h>
#include <stdint.h>

#include "pd_alloc.h"
#include "pd_breaker.h"
#include "pd_policy.h"
#include "pd_prng.h"
#include "pd_request.h"
#include "pd_retry.h"

/* Workers per role. Named limit: the simulator's worlds use a handful; 256 keeps the
 * per-request exclusion sets in a fixed bitmap. */
#define PD_MAX_WORKERS 256u
/* Attempts per request (retry max_attempts is clamped to it). */
#define PD_MAX_ATTEMPTS 16u
/* Legs a request may have open at once: two per attempt, and pr1150's detached prefills. */
#define PD_MAX_LEGS (2u * PD_MAX_ATTEMPTS)
/* Bytes of one leg's body the core buffers (prefill drain, non-stream decode, held events). */
#define PD_MAX_LEG_BUFFER_BYTES (8u * 1024u * 1024u)
/* Actions one step may produce (one event, or one request's expiry within
 * pd_gw_handle_expiry): bounded by legs x (close, outcome, load) + client output. */
#define PD_MAX_ACTIONS_PER_EVENT 256u

typedef enum {
  PD_MODE_JOINED = 0,
  PD_MODE_PR1150 = 1,
  PD_MODE_MINILB = 2,
  PD_MODE_REFERENCE = 3,
  PD_MODE_VLLM_TOY_PROXY = 4, /* vLLM's NIXL toy proxy (V1.1, V1.24) */
  PD_MODE_MOONCAKE_PROXY = 5, /* vLLM's Mooncake connector proxy (V1.25) */
  PD_MODE_LLMD_SIDECAR = 6,   /* llm-d's routing sidecar, NIXL v2 connector (V1.2, V1.27) */
} pd_mode_t;

/* Seeded bugs (docs/mutation.md, "Seeded bugs"): one known defect switched on in the
 * reference, so the library shows that the checker catches what no modelled gateway does
 * (I4's partner blame, I5, I6, I7, I8 within a batch, I9, I24, I25). A test facility, never a
 * behaviour: every other mode ignores it, and the reference with PD_BUG_NONE is the
 * reference. */
typedef enum pd_seeded_bug {
  PD_BUG_NONE = 0,
  PD_BUG_BLAME_PARTNER = 1,  /* a first-token/idle deadline blames every open leg (I4) */
  PD_BUG_CLEAN_END_ON_FAILURE = 2, /* decode failing mid-stream ends in a clean [DONE],
                                      no SSE error event (I5; smg G10/G13) */
  PD_BUG_REPEAT_FIRST_EVENT = 3,   /* decode's first event reaches the client twice (I6; G9) */
  PD_BUG_EXTRA_ATTEMPT = 4,        /* one attempt more than max_attempts (I7) */
  PD_BUG_LEAK_DECODE_LOAD = 5,     /* decode's load is never released (I9; R3.11 guards) */
  PD_BUG_SHARED_BATCH_ROOM = 6,    /* batch items 0 and 1 get one bootstrap room (I8; G18) */
  PD_BUG_LATE_SHED = 7,            /* the queue deadline fires 5 s late (I24) */
  PD_BUG_RETRY_STORM = 8,          /* the retry budget is never consulted (I25) */
  PD_BUG_FOREIGN_KV = 9,           /* source-first: a decode gets the previous request's
                                      kv_transfer_params, from the same prefill (I20) */
  PD_BUG_COUNT
} pd_seeded_bug_t;
extern const char *const pd_seeded_bug_names[PD_BUG_COUNT]; /* the scenario key's values */
const char *pd_seeded_bug_name(pd_seeded_bug_t b);
int pd_seeded_bug_parse(const char *name, pd_seeded_bug_t *out); /* 0, or PD_ERR_INVAL */
#define PD_MODE_COUNT 7

/* The PD protocol a gateway speaks with its workers: SGLang's destination-first (both legs at
 * once, meeting at a bootstrap room) or vLLM's source-first (prefill answers with
 * kv_transfer_params, then decode is sent with them). */
typedef enum { PD_PROTOCOL_SGLANG = 0, PD_PROTOCOL_VLLM = 1 } pd_protocol_t;
#define PD_PROTOCOL_COUNT 2

typedef enum { PD_ROLE_PREFILL = 0, PD_ROLE_DECODE = 1 } pd_role_t;

typedef enum {
  PD_UPSTREAM_ERROR_CONNECT = 0, /* connection refused / failed / connect timeout */
  PD_UPSTREAM_ERROR_RESET = 1,   /* connection reset after it was established */
  PD_UPSTREAM_ERROR_TIMEOUT = 2, /* a driver-enforced transport timeout */
  PD_UPSTREAM_ERROR_READ = 3,    /* body read error (e.g. truncated chunked encoding) */
} pd_upstream_error_t;

typedef enum {
  PD_OUTCOME_SUCCESS = 0,
  PD_OUTCOME_FAILURE = 1,
  PD_OUTCOME_TIMEOUT = 2,
  PD_OUTCOME_CANCELLED = 3, /* neutral */
} pd_outcome_t;

typedef enum {
  PD_EV_CLIENT_REQUEST = 0, /* req_id (driver-chosen, unique), path, data/len = body */
  PD_EV_UP_HEAD = 1,        /* req_id, leg_id, status */
  PD_EV_UP_DATA = 2,        /* req_id, leg_id, data/len */
  PD_EV_UP_END = 3,         /* req_id, leg_id: body ended cleanly */
  PD_EV_UP_ERROR = 4,       /* req_id, leg_id, uperr */
  PD_EV_CLIENT_GONE = 5,    /* req_id: the client closed its connection */
  PD_EV_CLIENT_BLOCKED = 6, /* req_id, status 1: the client stopped taking the response and the
                               driver stopped reading decode (backpressure); status 0: it
                               reads again. The idle deadline waits meanwhile (R-BACKPRESSURE) */
} pd_event_kind_t;

/* A request's priority class (R-ADMIT-PRIO, after the Inference Extension's criticality,
 * O3.3). Standard is 0, the default: a driver that never sets it changes nothing. */
typedef enum {
  PD_PRIO_STANDARD = 0,
  PD_PRIO_CRITICAL = 1,
  PD_PRIO_SHEDDABLE = 2,
  PD_PRIO_COUNT = 3,
} pd_prio_t;

/* "critical" / "standard" / "sheddable"; NULL for a value out of range. */
const char *pd_prio_name(int prio);
/* The class named s (exactly one of the three names), or -1. */
int pd_prio_parse(const char *s);

typedef struct pd_event {
  pd_event_kind_t kind;
  uint64_t req_id;
  uint64_t leg_id;
  int status;
  pd_upstream_error_t uperr;
  const char *path;
  const uint8_t *data;
  size_t len;
  pd_prio_t prio; /* PD_EV_CLIENT_REQUEST: its class (R-ADMIT-PRIO); 0 standard */
} pd_event_t;

typedef enum {
  PD_ACT_OPEN_LEG = 0,    /* leg_id, role, worker, str = path, data/len = body,
                             deadline_ns = connect deadline (0 = none), xrid = the
                             X-Request-Id the gateway sets itself instead of forwarding the
                             client's headers (NULL: forward them) */
  PD_ACT_CLOSE_LEG = 1,   /* leg_id, role, worker; str = rid to POST /abort_request with,
                             or NULL for a plain connection close */
  PD_ACT_CLIENT_HEAD = 2, /* status, flag = 1 for text/event-stream, 0 for JSON;
                             deadline_ns > 0: a Retry-After of that many ns (a shed answer,
                             R-ADMIT-SHED; sent rounded up to whole seconds) */
  PD_ACT_CLIENT_DATA = 3, /* data/len */
  PD_ACT_CLIENT_END = 4,  /* flag = 1: abort the connection (no clean end); 0: clean end */
  PD_ACT_OUTCOME = 5,     /* role, worker, leg_id, flag = pd_outcome_t, status (HTTP status
                             recorded by status-based modes, else 0) */
  PD_ACT_LOAD = 6,        /* role, worker, flag = +1 acquire / -1 release */
  PD_ACT_BREAKER = 7,     /* role, worker, flag = new pd_breaker_state_t */
  PD_ACT_ATTEMPT = 8,     /* status = attempt number (1-based), flag = prefill worker,
                             worker = decode worker. An attempt that failed at selection
                             (breakers open, nobody eligible) is emitted too, with flag -1
                             and/or worker UINT32_MAX for the role that had nobody. Source-
                             first: emitted when the attempt's first leg opens; worker is
                             UINT32_MAX when decode is chosen only after prefill's answer
                             (vllm-toy-proxy, reference), and an attempt that reuses earlier
                             kv_transfer_params opens decode alone (flag = their prefill) */
  PD_ACT_DONE = 9,        /* the request object is gone: every leg closed */
} pd_action_kind_t;

typedef struct pd_action {
  pd_action_kind_t kind;
  uint64_t req_id;
  uint64_t leg_id;
  pd_role_t role;
  uint32_t worker;
  int status;
  int flag;
  uint64_t deadline_ns;
  const char *str;
  const uint8_t *data;
  size_t len;
  const char *xrid; /* PD_ACT_OPEN_LEG only (see there) */
} pd_action_t;

/* Caller-owned action list. Pointers in actions stay valid until pd_actbuf_reset. */
typedef struct pd_actbuf {
  const pd_alloc_t *alloc;
  pd_action_t *v;
  size_t n, cap;
  struct pd_actblock *blocks; /* byte arena for action payloads, never moved */
  size_t step_start;          /* first action of the step being produced */
  int is_overflow;            /* a step produced more than PD_MAX_ACTIONS_PER_EVENT */
} pd_actbuf_t;

void pd_actbuf_init(pd_actbuf_t *b, const pd_alloc_t *alloc);
void pd_actbuf_reset(pd_actbuf_t *b);
void pd_actbuf_free(pd_actbuf_t *b);

typedef struct pd_gw_config {
  pd_mode_t mode;
  pd_protocol_t protocol;      /* the workers' protocol: pd_mode_protocol(mode) by default;
                                  PD_PROTOCOL_VLLM with PD_MODE_REFERENCE: source-first
                                  reference (R-SF-*) */
  uint64_t sf_params_reuse_ns; /* reference, source-first: how long after prefill's answer its
                                  kv_transfer_params may be sent to another decode (R-SF-DECODE-
                                  RETRY); 0 = never */
  pd_policy_kind_t policy[2];  /* per role (R1.14) */
  pd_retry_config_t retry;     /* joined/pr1150/reference; minilb never retries */
  pd_breaker_config_t breaker; /* per worker */
  /* Timeouts in ns, 0 = none. smg models use request_timeout_ns only (R4.1). */
  uint64_t request_timeout_ns;     /* smg/minilb total per leg (reqwest/aiohttp total) */
  uint64_t connect_timeout_ns;     /* passed to the driver with each leg */
  uint64_t first_token_timeout_ns; /* reference: attempt start -> first decode event */
  uint64_t head_timeout_ns;        /* reference, streams: leg sent -> its 200 head (SGLang
                                      sends a stream's head at once, S5.3) */
  uint64_t idle_timeout_ns;        /* reference: gap between decode events */
  uint64_t total_timeout_ns;       /* reference: whole request, a user cap (R-TIMEOUT) */
  uint64_t commit_timeout_ns;      /* reference: arrival -> first byte to the client, across
                                      every retry and backoff (R-PROGRESS) */
  uint64_t token_budget_ns;        /* reference, non-stream: allowance per requested output
                                      token added to the idle and commit budgets (R-PROGRESS) */
  uint64_t prefill_tail_timeout_ns; /* reference: prefill supervised after client end */
  /* reference admission (R-ADMIT-*): with worker limits set (pd_gw_set_worker_limit), a
   * request that finds no pair with room waits in a queue of at most admit_queue_max
   * requests, until admit_queue_ns after its arrival; 0 = admission off */
  uint32_t admit_queue_max;
  uint64_t admit_queue_ns;
  uint64_t admit_retry_after_ns; /* the Retry-After of a shed answer */
  uint64_t settle_ns; /* reference: how long "the instant" lasts in which a given-up leg may
                         still report its own failure (R-CANCEL). 0 (default, simulator): the
                         settle deadline is due at once and fires after the events already
                         due (pd_gw_handle_expiry);
                         a socket driver, whose simultaneous answers arrive microseconds
                         apart, gives it a width */
  pd_seeded_bug_t seeded_bug; /* reference only (pd_gw_new clears it for the others) */
  /* reference retry budget (R-RETRY-BUDGET, O4.2): a retry is scheduled only while the
   * retries scheduled in the last retry_budget_window_ns are fewer than
   * max(retry_budget_min, retry_budget_pct % of the client requests that arrived in it);
   * retry_budget_pct 0 = no budget */
  uint32_t retry_budget_pct;
  uint32_t retry_budget_min;
  uint64_t retry_budget_window_ns;
} pd_gw_config_t;

/* Per-mode defaults: smg's for joined/pr1150 (R2.1, R3.4, R4.1), mini_lb's (M8.x) and
 * pdref's reference defaults (docs/spec.md R-TIMEOUT). */
void pd_gw_config_default(pd_gw_config_t *c, pd_mode_t mode);
const char *pd_mode_name(pd_mode_t m);
int pd_mode_parse(const char *name, pd_mode_t *out);
/* The protocol a mode's model speaks: PD_PROTOCOL_VLLM for the vLLM-family models, SGLang for
 * the others. `reference` answers SGLang here but speaks both (pd_mode_speaks). */
pd_protocol_t pd_mode_protocol(pd_mode_t m);
/* 1 iff the mode can run against workers of protocol p (a scenario of that protocol): the
 * models speak their own protocol, `reference` both. What `--mode all` expands to per
 * protocol. */
int pd_mode_speaks(pd_mode_t m, pd_protocol_t p);
const char *pd_protocol_name(pd_protocol_t p);
int pd_protocol_parse(const char *name, pd_protocol_t *out);
const char *pd_outcome_name(pd_outcome_t o);
const char *pd_role_name(pd_role_t r);

typedef struct pd_gw pd_gw_t;

/* What admission did (reference, R-ADMIT-*): requests queued, started from the queue, shed
 * because the queue was full or their queue deadline passed, and their total queue wait. */
typedef struct pd_admit_stats {
  uint64_t queued, dequeued, shed_full, shed_timeout;
  uint64_t shed_wait; /* R-ADMIT-EARLY: shed at arrival, the queue ahead past its deadline */
  uint64_t wait_ns_sum, wait_ns_max;
  uint32_t peak_queued;
  uint32_t now_queued; /* waiting at the moment of the call */
  uint64_t retry_denied; /* retries the retry budget refused (R-RETRY-BUDGET) */
  /* R-ADMIT-PRIO: answers shed by admission per class (indexed by pd_prio_t; evictions
   * included), queued requests evicted by a higher class's arrival, and sheddable requests
   * shed at arrival at half the queue */
  uint64_t shed_by_class[PD_PRIO_COUNT];
  uint64_t evicted, shed_sheddable;
} pd_admit_stats_t;

/* Create a gateway. rng is borrowed for the gateway's lifetime (rooms, rids, policies,
 * jitter). A protocol the mode does not speak (pd_mode_speaks) is replaced by the mode's own.
 * Returns NULL on allocation failure. */
pd_gw_t *pd_gw_new(const pd_alloc_t *alloc, const pd_gw_config_t *cfg, pd_prng_t *rng);
void pd_gw_del(pd_gw_t *gw);

/* Register a worker. host/port are the bootstrap address injected for prefill workers
 * (port < 0: JSON null). Returns the worker index within its role, or PD_ERR_LIMIT,
 * PD_ERR_NOMEM. */
int pd_gw_add_worker(pd_gw_t *gw, pd_role_t role, const char *name, const char *host,
                     int bootstrap_port);
/* Reference admission (R-ADMIT-LIMIT): worker w of role admits at most `limit` requests in
 * flight (its capacity, e.g. SGLang's --max-running-requests); 0 = no limit. PD_ERR_INVAL
 * for an unknown worker. */
int pd_gw_set_worker_limit(pd_gw_t *gw, pd_role_t role, uint32_t w, uint32_t limit);
/* R-PAIR-GROUP: worker w of role belongs to KV transfer group `group` (default 0). The
 * reference pairs a prefill only with a decode of its group, and picks a prefill only from a
 * group that has a decode; the models ignore groups (minilb, smg: docs/spec.md 7). */
int pd_gw_set_worker_group(pd_gw_t *gw, pd_role_t role, uint32_t w, uint32_t group);
/* R-ABORT-COMMITTED: prefill worker w is declared (configuration, not observation) to ignore an
 * abort once its KV transfer committed. When the client leaves, the reference keeps the
 * receiving decode leg (and prefill's) open until the KV reached decode, bounded by the tail
 * deadline, instead of cancelling at once and stranding the sender to its transfer timeout. */
int pd_gw_set_worker_abort_ignored(pd_gw_t *gw, uint32_t w, int is_ignored);
/* What admission did so far (all zero when it is off). */
void pd_gw_admit_stats(const pd_gw_t *gw, pd_admit_stats_t *out);

/* Feed one event at time now_ns; append resulting actions to out. Unknown or stale ids
 * (closed legs, finished requests) are ignored and return 0. now_ns never goes back: a driver
 * passes the same clock to pd_gw_feed and pd_gw_handle_expiry.
 * Returns 0, PD_ERR_NOMEM (no room for the step's actions in out: nothing was done, the
 * event may be fed again; or the request concerned is failed with a 500 where possible),
 * PD_ERR_INVAL (malformed event). A bad client request is not an error of this call: it
 * produces a 4xx client response. Room for PD_MAX_ACTIONS_PER_EVENT actions is reserved in
 * out before anything changes, so no action (a CLOSE_LEG, an OUTCOME) is ever lost. */
int pd_gw_feed(pd_gw_t *gw, uint64_t now_ns, const pd_event_t *ev, pd_actbuf_t *out);

/* Deadlines. Each live request has at most one deadline armed in the core, the earliest of
 * its timeouts (docs/spec.md R-TIMEOUT), its backoff and its end-of-instant settle (R-CANCEL);
 * they are kept in one min-heap keyed by (deadline, seq), seq the order in which they were
 * armed, so the heap never holds more entries than live requests and a request's entry
 * leaves it when the request ends. A deadline that does not move keeps its place. Room for
 * the entry is taken when the request arrives (pd_gw_feed's PD_ERR_NOMEM), so arming one
 * never fails.
 *
 * pd_gw_get_expiry: the earliest armed deadline in ns, UINT64_MAX when none. It changes only
 * in pd_gw_feed and pd_gw_handle_expiry: ask again after each call.
 *
 * pd_gw_handle_expiry: fire, in (deadline, seq) order, every deadline <= now_ns armed before
 * the call, appending the actions each produces to out (the actions a request's expiry
 * produces are contiguous, as for one event). A deadline armed while firing, even one due at
 * once (the settle of legs given up now, R-CANCEL), waits for the next call, so the driver
 * delivers the I/O events of the instant it already holds first. Nothing is due when now_ns <
 * pd_gw_get_expiry: nothing is emitted. Returns 0, PD_ERR_INVAL (NULL argument), or
 * PD_ERR_NOMEM (no room in out for the next request's actions: what fired is in out, the
 * rest stays armed for the next call).
 *
 * A driver's loop: wait until min(pd_gw_get_expiry, its own I/O); feed what arrived; when the
 * clock reaches the expiry call pd_gw_handle_expiry(now); carry out the actions. */
uint64_t pd_gw_get_expiry(const pd_gw_t *gw);
int pd_gw_handle_expiry(pd_gw_t *gw, uint64_t now_ns, pd_actbuf_t *out);
/* Deadlines armed (one per request at most): for tests and drivers' metrics. */
size_t pd_gw_deadlines_armed(const pd_gw_t *gw);

/* Observability for drivers and tests. */
uint32_t pd_gw_worker_count(const pd_gw_t *gw, pd_role_t role);
uint32_t pd_gw_load(const pd_gw_t *gw, pd_role_t role, uint32_t worker);
/* The breaker's state at now_ns, without side effects (an Open breaker past its open time
 * reads HalfOpen; the move itself happens, and is reported, at the next selection). */
pd_breaker_state_t pd_gw_breaker_state(pd_gw_t *gw, pd_role_t role, uint32_t worker,
                                       uint64_t now_ns);
size_t pd_gw_requests_live(const pd_gw_t *gw);
/* Half-open probes admitted to the worker and not yet recorded (0 for an unknown worker). */
uint32_t pd_gw_breaker_probes(const pd_gw_t *gw, pd_role_t role, uint32_t worker);
/* Start worker's breaker in state st at now_ns (before any event: a scenario's initial
 * breaker state). PD_ERR_INVAL for an unknown worker or state. */
int pd_gw_breaker_start_in(pd_gw_t *gw, pd_role_t role, uint32_t worker, pd_breaker_state_t st,
                           uint64_t now_ns);

#endif
