/* Internal to core/: the gateway and request structures shared by pd_gw.c (plumbing,
 * selection, accounting), pd_rqstate.c (the two state machines) and the mode files
 * (pd_mode_smg.c, pd_mode_minilb.c, pd_mode_ref.c; source-first: pd_mode_sf.c for the
 * vLLM-family models, pd_mode_sfref.c for the reference, pd_sf.c for what they share). */
#ifndef PD_GW_INT_H
#define PD_GW_INT_H
#include "pd_buf.h"
#include "pd_dispatch.h"
#include "pd_heap.h"
#include "pd_map.h"
#include "pd_merge.h"
#include "pd_rqstate.h"
#include "pd_sse.h"

typedef struct pd_worker {
  char *name;
  char *host;
  int port;
  uint32_t load;
  uint32_t limit; /* reference admission: requests in flight it admits (R-ADMIT-LIMIT);
                     0 = no limit */
  uint32_t group; /* KV transfer group (R-PAIR-GROUP), default 0 */
  int is_abort_ignored; /* declared: an abort after its KV commit is a no-op (R-ABORT-COMMITTED) */
  pd_breaker_t breaker;
  uint64_t t_progress_ns; /* reference: when a leg of it last made progress, a data event
                             under a 2xx head or a success (R-BREAKER-BUSY) */
  int has_progress;        /* t_progress_ns is set */
  uint64_t t_progress_open_ns; /* reference: the latest open time of a leg of it that made
                                  progress (R-BREAKER-BUSY: a later leg overtook) */
} pd_worker_t;

/* A leg's transport state. Moves only through PD_LEG_SET (pd_rqstate.c: legal moves,
 * docs/spec.md 4.2). Being given up (reference, R-CANCEL) is the is_doomed flag, not a state:
 * a given-up leg still moves OPEN -> HEAD -> ENDED and its events are judged. */
typedef enum {
  LEG_OPEN = 0,    /* sent; no head yet */
  LEG_HEAD = 1,    /* head received; body streaming */
  LEG_ENDED = 2,   /* body ended cleanly (judged by the mode) */
  LEG_FAILED = 3,  /* transport error, or a per-leg deadline (closed by the core) */
  LEG_REMOVED = 4, /* closed or forgotten: about to be freed (terminal, entered once) */
} pd_leg_state_t;
#define PD_LEG_STATE_COUNT 5

/* A leg's held bytes grow to the buffer's default limit (no leg sets its own). */
_Static_assert(PD_MAX_LEG_BUFFER_BYTES == PD_BUF_DEFAULT_MAX_BYTES, "leg buffer limit");

typedef struct pd_leg {
  uint64_t id;
  pd_role_t role;
  uint32_t worker;
  uint32_t attempt;
  pd_leg_state_t state;
  int status;
  int is_detached;     /* pr1150: nobody waits on it */
  uint32_t probe;      /* the half-open period whose probe slot it took, 0 none */
  int has_outcome;     /* an outcome was recorded for it */
  int saw_done;        /* SSE [DONE] seen */
  int saw_error_event; /* SSE error event seen */
  int is_suspect;      /* reference: blamed when a deadline passes (see ref_on_deadline) */
  int is_drain;        /* source-first reference: opened only to have prefill's pin freed
                          (R-SF-KV-DRAIN); never current, never served, closed at its head */
  int is_abort_owed;   /* its transport failed after the request may have gone out (reset,
                          read error, timeout; not a refused connect): the worker may still
                          hold the request, so its close posts /abort_request (R-CANCEL) */
  int is_collect;      /* reference: the client left after a possible KV commit on a prefill
                          declared to ignore aborts; kept open, read and discarded, until the
                          KV reached decode (R-ABORT-COMMITTED) */
  int is_doomed;       /* reference: given up; closed at the end of this instant (DL_SETTLE)
                          unless it reports its own result first (R-CANCEL, R-OUTCOME) */
  uint32_t events;     /* SSE data events seen */
  uint64_t deadline_ns; /* smg/minilb per-leg total deadline (0 = none) */
  uint64_t t_open_ns;   /* when it was opened (R-BREAKER-BUSY) */
  pd_sse_t sse;
  pd_buf_t body; /* drained / held bytes */
} pd_leg_t;

/* A request's phase. Moves only through PD_RQ_SET (pd_rqstate.c: legal moves and entry
 * actions, docs/spec.md 4.1). TAIL, GONE and END are "the client is done" (pd_rq_client_done). */
typedef enum {
  RQ_NEW = 0,          /* parsed; no attempt started yet (never outlives its feed step) */
  RQ_HEADS = 1,        /* smg/minilb: waiting for both heads */
  RQ_DRAIN = 2,        /* joined; minilb stream with logprob: decode 2xx, draining prefill */
  RQ_READ = 3,         /* smg/minilb non-stream: reading bodies */
  RQ_FIRST = 4,        /* reference: legs open, nothing committed */
  RQ_PREFILL_LOST = 5, /* reference: prefill broke after its 200 head, decode is up and has
                          the tail budget to show its first event (R-FAIL-PRECOMMIT) */
  RQ_STREAM = 6,       /* committed: relaying decode to the client */
  RQ_BACKOFF = 7,      /* waiting to start the next attempt */
  RQ_TAIL = 8,         /* client response ended; legs left are supervised (reference, R-TAIL)
                          or detached (pr1150) */
  RQ_GONE = 9,         /* the client went away first; legs left are being given up
                          (reference) or linger until their next chunk (smg, G7) */
  RQ_END = 10,         /* terminal: loads released, DONE emitted, freed on the way out */
  RQ_PREFILL = 11,     /* source-first: prefill alone is open; its whole answer (and its
                          kv_transfer_params) is awaited before decode is sent */
} pd_rq_state_t;
#define PD_RQ_STATE_COUNT 12

/* Named deadlines of a request; the one armed in gw->deadlines is the least non-zero one.
 * DL_SETTLE is not stored in dl[]: it is the end of the instant in which legs were given up
 * (rq->is_settle_due), handled before every other deadline, so a retry due at the same time
 * starts only after they are settled. */
enum { DL_BACKOFF = 0, DL_FIRST = 1, DL_IDLE = 2, DL_TOTAL = 3, DL_TAIL = 4, DL_COMMIT = 5,
       DL_QUEUE = 6, /* reference admission: the absolute queue deadline (R-ADMIT-QUEUE) */
       DL_COUNT = 7, DL_SETTLE = 8 };

typedef struct pd_rq {
  uint64_t id;
  pd_rq_state_t state;
  pd_request_t req;
  int is_fast_path;  /* pr1150: stream && !logprob */
  uint32_t attempt;  /* attempts started */
  uint64_t t_start_ns;
  uint64_t t_commit_ns; /* reference: when the client head went out (0 too: see is_committed) */
  uint64_t cur_id[2]; /* current attempt's leg ids per role, 0 none */
  uint32_t load_w[2]; /* worker+1 holding this request's load per role, 0 none (smg keeps
                         loads with the response body, not the legs: R3.12) */
  pd_leg_t *legs[PD_MAX_LEGS];
  uint32_t n_legs;
  uint8_t excluded[2][PD_MAX_WORKERS / 8];
  int is_committed;  /* the client head went out (a flag, not a state: minilb sends a stream's
                        head in RQ_HEADS, reference a non-stream answer from RQ_FIRST) */
  int is_client_blocked; /* PD_EV_CLIENT_BLOCKED: decode not read because of the client */
  int is_bug_repeated;   /* PD_BUG_REPEAT_FIRST_EVENT: the first event went out twice */
  int last_status;   /* last attempt's failure status for the client (0 none) */
  uint64_t t_try_ns; /* when its current attempt started (pd_gw_begin) */
  int is_last_status_worker; /* last_status is a worker's own HTTP status (a 504 too), not the
                                gateway's timeout or transport verdict (R-ADMIT-SHED) */
  int is_status_from_head;   /* set just before failing an attempt on a worker's error head */
  const char *last_code;
  char *rid;
  uint64_t dl[DL_COUNT];
  int is_settle_due;   /* DL_SETTLE: given-up legs wait for the end of this instant */
  uint64_t settle_at;  /* when it ends: the giving-up step's time + cfg.settle_ns */
  uint64_t settle_seq; /* gw->feed_seq of the step that armed DL_SETTLE: it fires in a later
                          step (an expiry at the same instant), never in that one */
  size_t dl_index;     /* its entry in gw->deadlines, PD_HEAP_NONE when nothing is armed */
  pd_buf_t prefill_lp; /* prefill's logprob source (event payload or JSON body) */
  int prefill_lp_ready;
  int has_lp_read;           /* lp_read holds prefill_lp as read for merging (pd_merge.h) */
  pd_merge_prefill_t lp_read;
  /* source-first (protocol vllm) */
  void *sf_params;       /* cJSON*: what decode gets as kv_transfer_params (prefill's, copied
                            verbatim), owned; NULL: decode gets the client's body unchanged */
  uint32_t sf_dw;        /* decode worker + 1 chosen for the attempt, 0 not yet */
  uint32_t sf_pw;        /* prefill worker + 1 whose answer sf_params came from */
  uint64_t sf_params_at; /* when prefill answered them */
  int sf_reuse;          /* reference: the next attempt sends decode with sf_params again */
  int has_sf_slot;       /* R-ADMIT-SF: a decode slot is held for it until its decode opens */
  int sf_read_failed;    /* reference: decode said, in an error event under its 200 head and
                            before any token, that its work failed: its read (V1.22) */
  /* reference admission (pd_admit.c): waiting in the gateway's queue for a pair with room */
  int is_queued;
  struct pd_rq *q_prev, *q_next;
  pd_prio_t prio; /* R-ADMIT-PRIO: its class, from the arrival event */
  int is_retry_denied;   /* reference: the retry budget refused its last retry (R-RETRY-BUDGET) */
  char sf_xrid[40];      /* vllm-toy-proxy: its own X-Request-Id on both legs (a uuid4 drawn
                            from the gateway's PRNG, V1.1), "" none */
} pd_rq_t;

/* The client response is over (ended, or the client went away): no more client output. */
static inline int pd_rq_client_done(const pd_rq_t *rq) {
  return rq->state == RQ_TAIL || rq->state == RQ_GONE || rq->state == RQ_END;
}

/* One bucket of the reference retry budget's window (R-RETRY-BUDGET): client requests that
 * arrived and retries scheduled during its epoch (now / (window / PD_RB_BUCKETS)). */
#define PD_RB_BUCKETS 10
typedef struct pd_rb_bucket {
  uint64_t epoch;
  uint64_t requests, retries;
  int is_used;
} pd_rb_bucket_t;

struct pd_gw {
  const pd_alloc_t *alloc;
  pd_gw_config_t cfg;
  pd_prng_t *rng;
  pd_worker_t workers[2][PD_MAX_WORKERS];
  uint32_t n_workers[2];
  pd_policy_t policy[2];
  int is_pick_unlimited; /* R-ADMIT-SF: a source-first decode pick ignores the in-flight limits */
  int64_t pick_group; /* during an attempt's selection: pd_gw_pick takes only workers of this
                         transfer group (R-PAIR-GROUP); -1: any */
  pd_map_t map; /* live requests: id -> pd_rq_t */
  uint64_t next_leg_id;
  pd_actbuf_t *out; /* during feed */
  uint64_t now;     /* during feed */
  uint64_t feed_seq; /* steps fed so far (DL_SETTLE waits for a later one) */
  pd_heap_t deadlines; /* each live request's earliest deadline, at most one entry each,
                          keyed by (deadline, arming order); indexed by rq->dl_index */
  pd_action_t scratch; /* sink for an action the buffer had no memory for */
  pd_transition_fn on_transition; /* optional observer of every state change (NULL: none) */
  /* reference admission (pd_admit.c): the queue of requests waiting for a pair with room,
   * oldest first (late binding: the pair is picked when one frees) */
  struct pd_rq *q_head, *q_tail;
  uint32_t n_queued;
  uint32_t sf_slots_held; /* R-ADMIT-SF: source-first requests admitted whose decode is not open */
  struct cJSON *bug_kv_params; /* PD_BUG_FOREIGN_KV: the last prefill's own parameters */
  /* R-ADMIT-EARLY: when the queue's last departure left (0: the backlog ended since), and the
   * smoothed time between departures while a backlog lasts (0: not measured yet) */
  uint64_t q_last_start_ns, q_interval_ns;
  uint64_t svc_ns[2]; /* R-ADMIT-QUEUE: smoothed attempt start -> commit of requests served,
                         non-stream [0] and stream [1] (pd_admit_committed); 0 unmeasured */
  pd_admit_stats_t admit;
  void *transition_ctx;
  pd_rb_bucket_t rb[PD_RB_BUCKETS]; /* reference retry budget's window (R-RETRY-BUDGET) */
};

/* R-ADMIT-SF: the decode slot a source-first request was admitted with goes (its decode leg
 * opened, or it ended); no-op when it holds none. */
void pd_admit_sf_release(pd_gw_t *gw, pd_rq_t *rq);

/* R-RETRY-BUDGET: a client request arrived now (counted in the retry budget's window). */
void pd_gw_budget_note_request(pd_gw_t *gw);
/* R-RETRY-BUDGET: may rq's failed attempt be retried? 0: refused (rq->is_retry_denied set).
 * 1 also when rq has no attempt left (the retry is refused by the schedule, not the budget). */
int pd_gw_retry_budget_allows(pd_gw_t *gw, pd_rq_t *rq);
/* R-RETRY-BUDGET: a retry of a failed attempt was scheduled now. */
void pd_gw_retry_budget_spend(pd_gw_t *gw);

/* R-BREAKER-BUSY: leg's worker made progress now (a data event under a 2xx head, a success). */
void pd_gw_note_progress(pd_gw_t *gw, const pd_leg_t *leg);

/* --- the state machines (pd_rqstate.c) --- */
/* The one place a request's state changes: asserts the move is legal, reports it to the
 * transition hook with the caller's file and line, then runs the entry action of `to`. */
void pd_rq_set_state(pd_gw_t *gw, pd_rq_t *rq, pd_rq_state_t to, const char *file, int line);
#define PD_RQ_SET(gw, rq, to) pd_rq_set_state((gw), (rq), (to), __FILE__, __LINE__)
/* The one place a leg's state changes (legal moves asserted, reported like the request's). */
void pd_leg_set_state(pd_gw_t *gw, const pd_rq_t *rq, pd_leg_t *leg, pd_leg_state_t to,
                      const char *file, int line);
#define PD_LEG_SET(gw, rq, leg, to) pd_leg_set_state((gw), (rq), (leg), (to), __FILE__, __LINE__)

/* --- admission (pd_admit.c, R-ADMIT-*) --- */
#define PD_ADMIT_WAIT 1 /* pd_gw_start_attempt: no pair has room now; queue the request */
#define PD_PICK_WAIT (-2) /* pd_gw_pick: the only untried workers are at their limit */
int pd_admit_is_on(const pd_gw_t *gw);
/* A worker can take one more request in flight (its limit, R-ADMIT-LIMIT). */
int pd_admit_has_room(const pd_gw_t *gw, pd_role_t role, uint32_t w);
/* Both roles have a worker with room (R-ADMIT-BOTH). */
int pd_admit_pair_has_room(const pd_gw_t *gw);
/* Queue the request (or shed it: the queue is full, or its deadline passed). */
void pd_admit_wait(pd_gw_t *gw, pd_rq_t *rq);
/* Take the request out of the queue (it started, was answered or went away) and wake the
 * next one, which starts if a pair has room. */
void pd_admit_unlink(pd_gw_t *gw, pd_rq_t *rq);
/* A load was released: wake the queue's head. */
void pd_admit_kick(pd_gw_t *gw);
/* A queued request starts: counted, and the backlog's departure interval measured. */
void pd_admit_started(pd_gw_t *gw);
/* The request's first byte went to the client (commit): how long its attempt took to get
 * there feeds the service estimate a queued request's deadline leaves room for. */
void pd_admit_committed(pd_gw_t *gw, pd_rq_t *rq);
/* A queued request whose turn came: if an attempt started now would reach its commit or total
 * deadline before the measured service time, it is unlinked and shed (503) instead; 1 then. */
int pd_admit_too_late(pd_gw_t *gw, pd_rq_t *rq);
/* DL_QUEUE passed: a request still queued is shed (503, R-ADMIT-SHED). */
void pd_admit_deadline(pd_gw_t *gw, pd_rq_t *rq);
/* Arm the request's earliest deadline again (pd_feed.c). */
void pd_gw_rearm(pd_gw_t *gw, pd_rq_t *rq);

/* --- plumbing (pd_gw.c) --- */
pd_action_t *pd_gw_emit(pd_gw_t *gw, pd_action_kind_t kind, pd_rq_t *rq);
/* Copy bytes into the action arena; NULL on allocation failure. */
const uint8_t *pd_gw_keep(pd_gw_t *gw, const void *p, size_t len);
void pd_gw_client_head(pd_gw_t *gw, pd_rq_t *rq, int status, int is_sse);
void pd_gw_client_data(pd_gw_t *gw, pd_rq_t *rq, const void *p, size_t len);
/* End the client response (moves the request to RQ_TAIL). The helpers that change a state
 * take the caller's file and line through their macro, for the transition trace. */
void pd_gw_client_end_at(pd_gw_t *gw, pd_rq_t *rq, int is_abort, const char *file, int line);
#define pd_gw_client_end(gw, rq, is_abort) \
  pd_gw_client_end_at((gw), (rq), (is_abort), __FILE__, __LINE__)
/* Whole JSON error response: head, {"error":{...}} body, end. */
void pd_gw_client_error_at(pd_gw_t *gw, pd_rq_t *rq, int status, const char *code,
                           const char *msg, const char *file, int line);
#define pd_gw_client_error(gw, rq, status, code, msg) \
  pd_gw_client_error_at((gw), (rq), (status), (code), (msg), __FILE__, __LINE__)
/* One SSE error frame `data: {"error":{"message":..,"code":..}}\n\n`. */
void pd_gw_sse_error(pd_gw_t *gw, pd_rq_t *rq, int status, const char *msg);

/* Start an attempt: select a pair (policy, breaker, exclusions for reference), draw rooms,
 * render the body, take loads and probes, open both legs. Returns 0, or an HTTP status
 * (503) when no pair could be selected, or a negative error. Source-first (protocol vllm):
 * pd_sf_start_attempt instead. */
int pd_gw_start_attempt(pd_gw_t *gw, pd_rq_t *rq);
/* Selection (breaker, policy, reference exclusions), a new current leg, its OPEN_LEG action
 * (body kept in the action arena by the caller). pick emits the breaker moves it makes. */
int32_t pd_gw_pick(pd_gw_t *gw, pd_rq_t *rq, pd_role_t role);
pd_leg_t *pd_gw_leg_new(pd_gw_t *gw, pd_rq_t *rq, pd_role_t role, uint32_t w);
void pd_gw_open_leg(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *body, size_t len);
pd_leg_t *pd_gw_leg(pd_rq_t *rq, uint64_t leg_id);
pd_leg_t *pd_gw_cur(pd_rq_t *rq, pd_role_t role);
/* Close a leg: emit CLOSE_LEG (with rid when abort), drop its load/probe, free it. */
void pd_gw_close_leg_at(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, int send_abort,
                        const char *file, int line);
#define pd_gw_close_leg(gw, rq, leg, send_abort) \
  pd_gw_close_leg_at((gw), (rq), (leg), (send_abort), __FILE__, __LINE__)
/* Forget a leg that ended on its own (no CLOSE action needed). */
void pd_gw_drop_leg_at(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const char *file, int line);
#define pd_gw_drop_leg(gw, rq, leg) pd_gw_drop_leg_at((gw), (rq), (leg), __FILE__, __LINE__)
void pd_gw_release_load(pd_gw_t *gw, pd_rq_t *rq, pd_role_t role);
/* Record an outcome for one leg's worker (breaker + OUTCOME action), once per leg. */
void pd_gw_outcome(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_outcome_t o, int status);
/* Close every leg of the request that is not detached; send_abort as pd_gw_close_leg. */
void pd_gw_close_all_at(pd_gw_t *gw, pd_rq_t *rq, int send_abort, const char *file, int line);
#define pd_gw_close_all(gw, rq, send_abort) \
  pd_gw_close_all_at((gw), (rq), (send_abort), __FILE__, __LINE__)
void pd_gw_set_deadline(pd_gw_t *gw, pd_rq_t *rq, int which, uint64_t t_ns);
/* Largest work allowance (about 31 years): deadlines built on it cannot wrap around. */
#define PD_MAX_ALLOWANCE_NS 1000000000000000000ull
/* R-PROGRESS: what a non-stream request's decode may take on top of the idle and commit
 * budgets: its requested output tokens (128 if unstated) x cfg.token_budget_ns, capped so a
 * deadline built on it cannot wrap (0 for a stream). */
uint64_t pd_gw_work_allowance_ns(const pd_gw_t *gw, const pd_rq_t *rq);
/* Schedule the next attempt after backoff, or return 0 if no attempt is left (attempts used
 * up, or the backoff would pass the total or the commit budget). */
int pd_gw_schedule_retry(pd_gw_t *gw, pd_rq_t *rq);

void pd_gw_rq_del(pd_gw_t *gw, pd_rq_t *rq);
void pd_gw_load_acquire(pd_gw_t *gw, pd_rq_t *rq, pd_role_t role, uint32_t w);
/* Start the request's next attempt and hand the result to the mode (pd_feed.c). */
void pd_gw_begin(pd_gw_t *gw, pd_rq_t *rq);
/* After an event: free the request if it is over, else re-arm its deadline. */
void pd_gw_finish(pd_gw_t *gw, size_t slot);
/* The deadline heap, indexed by rq->dl_index (pd_gw_new). */
void pd_gw_deadlines_init(pd_gw_t *gw);

/* --- modes --- */
typedef struct pd_mode_ops {
  void (*on_start)(pd_gw_t *gw, pd_rq_t *rq);           /* after a successful attempt start */
  void (*on_head)(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg);
  void (*on_data)(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *p, size_t len);
  void (*on_end)(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg);
  void (*on_error)(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_upstream_error_t e);
  void (*on_deadline)(pd_gw_t *gw, pd_rq_t *rq, int which); /* DL_* passed, or -1: a leg's */
  void (*on_client_gone)(pd_gw_t *gw, pd_rq_t *rq);
  void (*on_no_pair)(pd_gw_t *gw, pd_rq_t *rq, int status); /* selection failed */
} pd_mode_ops_t;

extern const pd_mode_ops_t pd_mode_smg_ops;    /* joined, pr1150 */
extern const pd_mode_ops_t pd_mode_minilb_ops; /* minilb */
extern const pd_mode_ops_t pd_mode_ref_ops;    /* reference */
extern const pd_mode_ops_t pd_mode_toy_ops;    /* vllm-toy-proxy */
extern const pd_mode_ops_t pd_mode_mooncake_ops; /* mooncake-proxy */
extern const pd_mode_ops_t pd_mode_llmd_ops;   /* llmd-sidecar */
extern const pd_mode_ops_t pd_mode_sfref_ops;  /* reference with protocol vllm */

/* --- source-first pieces (pd_sf.c) --- */
/* A source-first attempt: select, open prefill with the mode's rewritten body (or, when the
 * reference reuses kv_transfer_params, decode alone). Returns as pd_gw_start_attempt. */
int pd_sf_start_attempt(pd_gw_t *gw, pd_rq_t *rq);
/* Choose the attempt's decode worker (rq->sf_dw) unless chosen already: 0, or 503 when no
 * decode is admitted. */
int pd_sf_pick_decode(pd_gw_t *gw, pd_rq_t *rq);
/* Open the attempt's decode leg on rq->sf_dw: body = the client's body plus rq->sf_params as
 * kv_transfer_params (the client's body unchanged when NULL, V1.7). Loads and probes for the
 * reference. Returns the leg, or NULL (memory: the caller answers 500). */
pd_leg_t *pd_sf_open_decode(pd_gw_t *gw, pd_rq_t *rq);
/* R-SF-KV-DRAIN: open a drain leg on decode worker w with rq->sf_params (no load, no probe, no
 * attempt; the current decode leg stays what it was). Returns the leg, or NULL (memory). */
pd_leg_t *pd_sf_open_drain(pd_gw_t *gw, pd_rq_t *rq, uint32_t w);
/* Replace rq->sf_params (takes params, a cJSON*, or NULL). */
void pd_sf_set_params(pd_rq_t *rq, void *params);
/* Mooncake's decode parameters for the attempt's prefill (V1.25), or NULL (memory). */
void *pd_sf_mooncake_params(const pd_gw_t *gw, const pd_rq_t *rq);
/* Prefill's buffered answer: 0 and *params (owned, may be NULL when the answer had none or
 * null) when the body is one JSON object; PD_ERR_JSON when it is not (PD_ERR_NOMEM). */
int pd_sf_take_params(const pd_gw_t *gw, const pd_leg_t *p, void **params);
/* Is a cJSON value truthy as Python sees it (the toy proxy's `if kv_transfer_params:`)? */
int pd_sf_is_truthy(const void *json);

/* --- reference pieces the source-first reference reuses (pd_mode_ref.c) --- */
void pd_ref_fail_leg(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, int status, const char *msg);
/* R-OWN-FAILURE: the gateway lost a leg's bytes (out of memory): nothing blamed, 500. */
void pd_ref_own_failure(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const char *msg);
void pd_ref_doomed_result(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, int status);
/* R-ABORT-COMMITTED (pd_mode_ref.c): the client left; every leg but c1, c2 is given up, those
 * two collect the KV. pd_ref_collect_event: a collecting leg's head (kind 0), data (1), end
 * (2) or failure (3) with its status; returns 1 when it handled the event. */
void pd_ref_client_gone(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *c1, pd_leg_t *c2);
int pd_ref_collect_event(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, int kind, int status);
void pd_ref_leg_succeeded(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg);
/* Give a leg up (R-CANCEL): closed at the end of the instant unless it reports first. */
void pd_ref_leg_doom(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg);

/* --- the action buffer (pd_actbuf.c) --- */
/* Room for extra more actions, so the pushes of one step cannot fail for memory: 0 or
 * PD_ERR_NOMEM. Each step (a feed, one request's expiry) reserves PD_MAX_ACTIONS_PER_EVENT
 * before it changes anything, so a CLOSE_LEG is never lost to an allocation. */
int pd_actbuf_reserve(pd_actbuf_t *b, size_t extra);
/* The next action (zeroed), or NULL past PD_MAX_ACTIONS_PER_EVENT in this step (is_overflow). */
pd_action_t *pd_actbuf_push(pd_actbuf_t *b);
/* A copy of p[0..len) (NUL-terminated) that lives until pd_actbuf_reset, or NULL (memory). */
const uint8_t *pd_actbuf_keep(pd_actbuf_t *b, const void *p, size_t len);
/* Append len bytes of p to prev (prev_len bytes), the newest payload kept, in place when its
 * block has room: 1 (prev now holds prev_len + len bytes, NUL-terminated), else 0 (nothing
 * changed: keep the bytes as a payload of their own). */
int pd_actbuf_extend(pd_actbuf_t *b, const uint8_t *prev, size_t prev_len, const void *p,
                     size_t len);

#endif
