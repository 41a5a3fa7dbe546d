/* pd_world: one simulated run. A virtual clock and event queue drive the dispatch core
 * against SGLang-like worker models (sim/pd_world_worker.c) and a client model; every
 * leg and request keeps the ground truth the invariant checker (pd_check.c) judges from.
 * No wall clock, no global state: everything random comes from the run's seed. */
#ifndef PD_WORLD_H
#define PD_WORLD_H
#include <stdint.h>
#include <stdio.h>

#include "pd_buf.h"
#include "pd_dispatch.h"
#include "pd_metrics.h"
#include "pd_scenario.h"
#include "pd_sse.h"
#include "pd_worker_shared.h"

/* A client's non-stream body as the simulator keeps it: the core relays at most one leg's
 * buffer (PD_MAX_LEG_BUFFER_BYTES) of it, with room to spare. */
#define PD_WORLD_MAX_BODY_BYTES (4u * PD_MAX_LEG_BUFFER_BYTES)


typedef struct pd_worker_leg {
  uint64_t leg_id;
  uint64_t req_id;
  uint32_t attempt;
  pd_role_t role;
  uint32_t worker;      /* index into the scenario's workers */
  uint32_t role_index;  /* index within role (the core's worker index) */
  /* parsed from the body the worker received */
  int is_stream, has_rid, n_rooms, has_logprob;
  int is_room_scalar;   /* bootstrap_room came as one number, not an array (a record built
                           from logs may know only n_rooms: 0 there) */
  uint64_t room;        /* first room */
  uint64_t *rooms;      /* every room when n_rooms > 1 (malloc'd, freed with the leg), else NULL */
  uint64_t rooms_hash;  /* hash over all rooms, host and port (leg equality) */
  char rid[48];
  uint32_t tokens;
  /* SGLang DP ranks as the body gave them (S2.14; I22): routed_dp_rank and, on decode,
   * disagg_prefill_dp_rank */
  int has_routed_rank, has_prefill_rank;
  uint32_t routed_rank, prefill_rank;
  pd_wire_api_t api;    /* the route and what OpenAI's shapes echo (pd_wire_render) */
  /* worker side */
  pd_worker_leg_state_t wstate;
  pd_worker_leg_state_t wstate_at_end; /* the state it was in when its worker ended it */
  int fault;            /* pd_fault_kind_t or -1 */
  int tfault;           /* index of the traffic fault that struck it, or -1 */
  const pd_fault_t *fp;
  uint64_t lag_ms, drip_ms;
  uint32_t sent_tokens;
  int slot_taken;
  int is_slot_freed;    /* the worker freed the slot (a time of 0 is a time, not "never"); a
                           record built from logs (pdref conform) may set only t_slot_freed */
  uint64_t t_slot_taken, t_slot_freed;
  pd_truth_t truth;
  /* capacity (pd_wengine.h): KV pages this leg holds now, and its history */
  uint32_t prompt_tokens;
  uint64_t kv_pages;        /* held now */
  uint64_t kv_pages_max;    /* the most it held */
  uint64_t t_kv_changed;    /* when kv_pages last changed */
  uint64_t kv_page_ns;      /* integral of kv_pages over time so far (page-ns) */
  int is_running;           /* holds a running slot now */
  uint64_t t_kv_freed;      /* when kv_pages last fell to 0 after being > 0 */
  uint64_t t_kv_taken;      /* when kv_pages last rose from 0 (I18: pages taken and freed in
                               one instant were held for no time) */
  /* vLLM (sim/pd_world_worker.c): kv_transfer_params as read, and where decode's KV came from */
  int kv_mode;              /* pd_kv_mode_t */
  uint64_t kv_key;          /* pd_wengine_req_t.kv_key */
  int kv_node;              /* decode: the prefill node remote_engine_id names, or -1 */
  int is_kv_unknown;        /* decode: its read failed because its params named no prefill
                               node (V1.22; kv_params unknown_engine): no decode could read
                               them, so the request could not succeed disaggregated (I15) */
  uint32_t max_tokens;      /* 0: none */
  int kv_from;              /* decode: pd_wengine_kv_from_t (STALE: served from freed blocks,
                               V1.15), 0 none yet */
  int injected_status;  /* STATUS fault status sent, else 0 */
  int worker_conn_open; /* the worker still writes to this connection */
  uint32_t aborts;
  uint32_t aborts_in_flight; /* /abort_request sent by the gateway, not yet at the worker: the
                                request waits for them, so the worker's log has every abort */
  int is_abort_early;   /* an abort came before the request: applied when it arrives (Q7) */
  int is_closed_early;  /* the close came before the request (same instant): applied after it */
  int boot_node;        /* the prefill node the body's bootstrap_host names, or -1 */
  uint64_t t_open_arrive; /* when the request reaches the worker (net_us + open_delay_ms) */
  /* gateway side */
  uint64_t t_open, t_gw_closed; /* t_gw_closed is meaningful only once gw_open is 0 */
  int gw_open;
  int outcomes;          /* number recorded */
  pd_outcome_t outcome;
  int is_failed_at_close; /* the worker's failure report (error status, error event, transport
                             error, truncated end) reached the gateway no later than the
                             instant the gateway closed the leg: `cancelled` would hide it (I4) */
  /* for I16 and the exercised count */
  int is_crash_hit;        /* its worker crashed while it was live there */
  int is_reached;          /* the request reached the worker (not refused, node not down) */
  int is_own_stall;        /* closed or aborted while hung by its own fault or slow-dripping */
  int is_fault_fired;      /* its injected fault took effect (set by the worker model where it
                              acts: at open, at the KV transfer, at the response, mid-stream) */
  int is_path_fault;       /* a network fault (net_reset, response_lost) cut the path between
                              gateway and worker: the gateway saw a reset or nothing more, while
                              the worker ran on (its truth is its own; it never failed) */
  int is_held_faulted;     /* counted in its node's faulted_held (pd_world_worker.c) */
  int is_own_faulted;      /* its own fault, lag or drip picked and it is not done: its
                              partners are held by it (I15's fault block) */
  int is_idle_faulted;     /* and in its faulted_idle: it holds its slot but no running place */
  int is_capacity_failed;  /* its worker failed it by its own timeout (prefill's bootstrap,
                              decode's waiting) while its partner sat in its worker's queue
                              for capacity (decode's prealloc, prefill's waiting queue): a
                              worker short of room, not a healthy world (I15) */
  int is_lag_fired;        /* its prefill_lag began: the prefill entered its lag (a cancel may
                              cut it short; one before it began leaves it unfired) */
  int is_drip_fired;       /* its slow_drip began: the decode started streaming under it */
  uint32_t nth;            /* its worker's count of requests received, this one included (the
                              `nth` its scripted faults were matched against); 0: refused */
  int has_eligible;        /* eligible_nodes was filled when the gateway opened it (a record
                              from logs has no breaker view: I16 is not judged for it) */
  int is_kv_from_pair;      /* decode: the KV it was served from came from a prefill leg of its
                              own request (SGLang: that prefill's transfer; vLLM: a read of
                              the node its params name, on which the request has a prefill
                              leg: a decode retry may read an earlier attempt's pin) (I20) */
  int has_streamed;         /* decode: it began generating (its KV was there), whatever came
                              after (I20) */
  int is_kv_pinned;         /* vLLM prefill: it pinned its KV for decode to read (its answer
                              carried usable parameters) */
  int is_partner_blamed;    /* the gateway recorded failure/timeout for it while its worker
                              only waited on its partner (a prefill in bootstrap for decode's
                              room, a decode waiting for the KV), with no fault or failure
                              report of its own: I4 in `reference` */
  int is_own_fail_noted;    /* its own failure was fed to the breaker model (once) */
  uint32_t probe_period;    /* a probe: its worker's half_open_period when opened; 0: not one */
  uint64_t eligible_nodes; /* bit per node: breaker Closed (as the core reported) at the open */
  /* bookkeeping */
  struct pd_worker_leg *next_in_req;
} pd_worker_leg_t;

/* A worker message held back while its client reads nothing (R-BACKPRESSURE). */
typedef struct pd_world_held {
  uint64_t leg_id;
  uint32_t kind, arg;
  uint64_t part;
} pd_world_held_t;

typedef struct pd_client_request {
  uint64_t id;
  uint64_t t_arrival, t_disconnect;
  int is_stream, wants_logprob;
  /* the client that sent it (workload.users, client_retries): user + 1 (0: open loop), its
   * job (the open loop's jobs are its arrivals), which try of the job it is (0: the first) */
  uint32_t user;
  uint64_t job;
  uint32_t try_no;
  int is_client_timeout; /* the client gave up on it (client_timeout_ms) */
  int is_shed_at_capacity; /* its head was a 503 while every worker of a role held as many
                              requests as it can run (worker truth): an admission shed there
                              is not a failure to serve (I15, R-ADMIT-SHED) */
  uint32_t tokens;
  int prio; /* its priority class (pd_prio_t, pd_scenario_prio; R-ADMIT-PRIO) */
  uint32_t prompt_tokens; /* words in its prompt (pd_scenario_prompt_tokens); 0: the short
                             default prompt */
  /* client view */
  int head_status;
  int is_sse_head;
  int has_head, has_first_data; /* flags, not times: virtual time 0 is a real instant */
  uint64_t t_head, t_first_data, t_end;
  int ended, aborted, gone;
  pd_sse_t sse;
  pd_buf_t body; /* a non-stream body, at most PD_WORLD_MAX_BODY_BYTES */
  uint32_t next_token;
  int token_error, saw_done, saw_error_event, events_after_done, first_event_seen;
  int saw_finish_only; /* a /generate finish event with no token came (R-ZERO-TOKENS) */
  int logprob_state;     /* 0 unchecked, 1 ok, -1 wrong */
  int is_record_lost;    /* the checker ran out of memory keeping the body (pd_check.h) */
  int is_clean;          /* the checker's verdict: the client got a clean, complete answer */
  int is_parse_only;     /* tests: read every client event with cJSON, never by comparing its
                            bytes with the decode leg's rendering (pd_check.c known_event) */
  uint32_t known_events;  /* client events read by that byte comparison (no parse) */
  pd_metrics_req_t metrics; /* its stream's chunk gaps, for pd_metrics (ITL) */
  /* I15: the world was healthy (no worker down, every breaker Closed as the core reported)
   * from arrival to the client's end; set by the driver (a socket run sets it from its crash
   * windows). 0: I15 is not judged for this request. */
  int was_healthy;
  int is_unselectable_at_arrival; /* a role had no worker up with its breaker Closed or
                                     half-open when it arrived: its first attempt could only
                                     fail at selection, no admission wait (I24) */
  int is_waited_behind_fault; /* at some instant it had no leg running on a worker while a role
                                 was fault-blocked (pd_world_int.h): its wait was the fault's */
  int is_client_blocked; /* the client reads nothing now: decode's messages are held */
  struct pd_world_held *held; /* decode messages held while blocked, in arrival order */
  uint32_t n_held, cap_held;
  int is_breaker_unjust; /* I12: a breaker report it carried opened a worker without cause
                            (that worker's index + 1; 0: none) */
  uint64_t health_epoch; /* the world's unhealthy_epoch at arrival; UINT64_MAX if unhealthy */
  uint32_t legs_seen[2]; /* ledger of the traffic faults: legs per role that reached a worker */
  /* gateway view */
  uint32_t attempts;
  int core_done;
  int retry_after_commit;
  uint64_t room_hist[PD_MAX_ATTEMPTS];
  int load_bal[2][8];    /* per role: balance on up to 8 distinct workers (worker slot map) */
  uint32_t load_w[2][8];
  uint64_t load_t_rel[2][8];
  int load_neg;
  pd_worker_leg_t *legs;       /* list */
  uint32_t n_legs;
  uint32_t violations;
  int is_judged;         /* judged at the safety horizon, still running (healed phase) */
  char reason[160];
  struct pd_client_request *next_live;
} pd_client_request_t;

typedef struct pd_world_stats {
  uint64_t events, requests_done, violations_total;
  uint32_t inv_count[PD_INVARIANT_COUNT + 1];
  uint64_t ttft_sum_ns, ttft_n, ttft_max_ns;
  uint64_t clean_success, client_errors, aborted;
  uint64_t records_lost; /* requests judged on a record the checker could not keep whole
                            (out of memory): the run is an error (pd_check.h) */
  uint64_t peak_live;
  /* what the run really exercised (docs/scenarios.md "exercised"): scenario fault entries
   * (each worker's faults, and its crash) that fired, and requests that reached a worker */
  uint32_t faults_total, faults_exercised;
  uint64_t requests_served;
  char unexercised[96]; /* the first fault entry that never fired, e.g. "d0 faults[0] status" */
  uint32_t first_violating_req_valid;
  uint64_t first_violating_req;
  char first_reason[200];
  /* R-ADMIT-PRIO, per class (pd_prio_t) from the client's side: requests judged, answered
   * clean, and answered 503 (shed) */
  uint64_t class_n[PD_PRIO_COUNT], class_clean[PD_PRIO_COUNT], class_shed[PD_PRIO_COUNT];
} pd_world_stats_t;

typedef struct pd_world pd_world_t;

/* The client's request body for rq under the workload (route, stream, logprob, batch,
 * tokens); shared with the socket runner (net/conform/pd_conform_client.c), which puts its
 * request id (tag, [a-z0-9-] only) at the start of every prompt; the simulator passes NULL.
 * With rq->prompt_tokens > 0 every prompt is padded with words "t " to that many words (the
 * tag counts as one); 0 leaves today's short prompts. Returns its length or 0 (no room). */
size_t pd_world_client_body(const pd_client_request_t *rq, const pd_scenario_workload_t *wl,
                            const char *tag, char *buf, size_t cap);
/* A buffer size that holds that body (tag_len: strlen of the tag, 0 without one). */
size_t pd_world_client_body_cap(const pd_scenario_workload_t *wl, uint32_t prompt_tokens,
                                size_t tag_len);

/* Called every ~65536 events with the requests judged so far (for progress bars). */
typedef void (*pd_world_progress_fn)(void *ud, uint64_t requests_done, uint64_t requests_total);

/* A leg as the worker left it (truth, slot taken/freed, aborts seen), when its request is
 * retired or the run ends with it held: the per-leg worker log (tests/test_worker_parity.c). */
typedef void (*pd_world_leg_fn)(void *ud, const pd_worker_leg_t *leg, const char *worker);

typedef struct pd_world_opts {
  FILE *trace;                  /* NULL: no trace file (the run hash is kept anyway) */
  pd_world_progress_fn progress; /* NULL: none */
  void *progress_ud;
  int has_tie_seed;             /* 1: tie_seed below, else the scenario's config.tie_seed */
  uint64_t tie_seed;            /* order of same-instant events (0: insertion order) */
  pd_metrics_t *metrics;        /* NULL: none; else the run's cost is added (pd_metrics.h) */
} pd_world_opts_t;

int pd_world_run_opts(const pd_scenario_t *s, pd_mode_t mode, uint64_t seed,
                      const pd_world_opts_t *o, pd_world_stats_t *stats, uint32_t *violations,
                      uint64_t *trace_hash);
/* pd_world_run_opts, calling on_leg (may be NULL) with every leg as the worker left it. */
int pd_world_run_legs(const pd_scenario_t *s, pd_mode_t mode, uint64_t seed,
                      const pd_world_opts_t *o, pd_world_leg_fn on_leg, void *leg_ud,
                      pd_world_stats_t *stats, uint32_t *violations, uint64_t *trace_hash);

/* Run one scenario under one mode with the given seed. trace may be NULL (hash only kept).
 * Fills *stats; returns 0 or a negative error (setup failure). violations: mask of
 * invariants violated anywhere in the run. */
int pd_world_run(const pd_scenario_t *s, pd_mode_t mode, uint64_t seed, FILE *trace,
                 pd_world_stats_t *stats, uint32_t *violations, uint64_t *trace_hash);

#endif
