/* Internal to sim/ and mock_workers/: the world object shared by the driver (pd_world.c)
 * and the worker models (sim/pd_world_worker.c). The checker (pd_check.h) does not see
 * it: the driver hands it a judge context filled from the world (pd_world_judge). */
#ifndef PD_WORLD_INT_H
#define PD_WORLD_INT_H
#include <stdatomic.h>

#include "pd_check.h"
#include "pd_heap.h"
#include "pd_map.h"
#include "pd_trace.h"
#include "pd_world.h"
#include "pd_wengine.h"
#include "pd_worker_body.h"
#include "pd_worker_shared.h"

/* Heap event kinds. */
enum {
  EV_ARRIVE = 1,  /* a = request index */
  EV_GONE,        /* b = req id */
  EV_G2W_OPEN,    /* b = leg id */
  EV_G2W_CLOSE,   /* b = leg id */
  EV_G2W_ABORT,   /* b = leg id */
  EV_W2G,         /* a = message kind | arg << 8, b = leg id */
  EV_WWAKE,       /* a = worker node: its engine's deadline (pd_wengine_next_expiry) */
  EV_CRASH,       /* a = worker */
  EV_RESTART,     /* a = worker */
  EV_CLIENT_BLOCK, /* a = 1 the client stops reading, 0 it reads again; b = req id */
  EV_SEND,        /* a client sends: a = user + 1 (0 open loop), b = job (UINT64_MAX: the
                     user's next job), c = try (0 first) */
  EV_ALLOC_FAIL,  /* a = 1: the gateway's allocations start failing, 0: they succeed again */
};

/* Worker -> gateway messages (rendered at delivery from the leg's state). */
enum {
  W2G_HEAD = 1,     /* arg = status */
  W2G_TOKEN,        /* arg = token index << 2 | part (0 whole, 1 first half, 2 second half,
                       3 this and the next token) */
  W2G_DONE_EVENT,
  W2G_ERROR_EVENT,  /* arg = code */
  W2G_PREFILL_BODY, /* arg = 1: only the first event (body error follows) */
  W2G_DECODE_BODY,
  W2G_ERROR_BODY,   /* arg = status */
  W2G_END,
  W2G_UPERR,        /* arg = pd_upstream_error_t */
};

typedef struct pd_worker_node {
  const pd_scenario_worker_t *spec;
  pd_role_t role;
  uint32_t role_index;
  uint32_t received;   /* requests received (nth for faults) */
  int is_down;         /* crashed, not restarted */
  uint32_t live_slots; /* slots held now */
  uint32_t faulted_held; /* legs with a fault, lag or drip holding its slot or a running place */
  uint32_t faulted_idle; /* of which holding the slot only (hung before its head): a gateway
                            that counts what it sent sees them as places taken */
  int is_full;           /* no place free (running + faulted_idle >= max_running_requests), at
                            the end of its last step */
  uint64_t t_slot_freed_last; /* when it last freed a slot (admission's I15 excuse) */
  uint64_t n_freed_at;        /* the instant of n_freed_recent */
  uint32_t n_freed_recent;    /* slots freed in that instant */
  pd_wengine_t *eng;   /* the worker engine (sim/pd_world_worker.c drives it) */
  uint64_t wake_at;    /* the EV_WWAKE queued for its next deadline (UINT64_MAX: none) */
  /* breaker timeline as the core reports it, for I12 */
  int breaker_state;
  uint32_t half_open_inflight; /* probes of the current half-open period still open */
  uint32_t half_open_period;   /* half-open periods entered so far: a probe is tagged with its
                                  own, and only a probe of the current one frees its slot */
  pd_check_breaker_t bmodel;   /* the checker's breaker model, fed from worker truth (I12) */
  int is_breaker_unjust;       /* its breaker left Closed without cause (the model): the node
                                  stays healthy (I15) and eligible (I16) until it closes */
} pd_worker_node_t;

/* A vLLM prefill leg's KV still pinned when its request retired: when the engine frees the
 * pin (or the run ends) I18 is judged on the real release time, if the checker could not
 * decide it at retirement, and the rest of its hold goes to the metrics. */
typedef struct pd_world_late_pin {
  uint32_t worker;
  int has_end;
  int is_judged;       /* I18 was decided at retirement (is_kv_deferred did not apply) */
  int is_rq_violating; /* its request violated something already (counted once) */
  pd_role_t role;
  uint64_t pages, since, t_end;
} pd_world_late_pin_t;

struct pd_world {
  const pd_scenario_t *s;
  pd_mode_t mode;
  pd_gw_config_t gcfg;
  pd_prng_t gw_rng, world_rng, fault_rng;
  pd_prng_t client_rng; /* the clients' retry jitter (its own stream: no other draw moves) */
  uint8_t *user_busy;   /* closed loop: a user's request (or its next send) is pending */
  uint32_t n_users;     /* entries of user_busy: users x the largest step factor */
  uint64_t next_job;    /* closed loop: jobs handed out */
  int is_sending_over;  /* the healed phase: no new sends, no retries */
  pd_goodput_t goodput; /* I23: the load step's goodput against the floor (pd_check_goodput.c) */
  pd_retry_budget_t rbudget; /* I25: retries that reached workers against the declared budget */
  pd_recovery_check_t recovery; /* I26: goodput back after the trigger (pd_check_goodput.c) */
  pd_gw_t *gw;
  pd_alloc_t gw_alloc;      /* config.alloc_fail_*: the core's allocator, failing in the window */
  int is_alloc_failing;     /* inside the window: every allocation of the core fails */
  uint64_t alloc_refused;   /* allocations refused (the fault fired) */
  uint64_t alloc_in_window; /* allocations asked for in the window (alloc_fail_every) */
  pd_actbuf_t acts;
  pd_heap_t heap;
  uint64_t now;
  uint64_t net_ns;
  pd_worker_node_t nodes[PD_SCENARIO_MAX_WORKERS];
  uint32_t n_nodes;
  uint32_t role_node[2][PD_SCENARIO_MAX_WORKERS]; /* core worker index -> node */
  pd_map_t legs;  /* leg id -> pd_worker_leg_t */
  pd_map_t late_pins; /* leg id -> pd_world_late_pin_t: KV a retired leg left pinned (vLLM):
                         judged (I18) and its page-seconds counted when freed */
  pd_map_t reqs;  /* req id -> pd_client_request_t */
  pd_wact_buf_t wacts; /* the worker engines' actions of one step */
  /* a rendezvous' actions (a call on another node's engine inside a step), kept between
   * calls so their storage is not allocated each time; one per nesting depth */
#define PD_WORLD_SUB_BUFS 8
  pd_wact_buf_t sub[PD_WORLD_SUB_BUFS];
  uint32_t n_sub;
  uint32_t next_req;
  pd_trace_t trace;
  pd_world_stats_t *stats;
  uint32_t violations;
  uint32_t room_collisions;
  /* I15: nodes down plus breakers not Closed now; epoch bumps whenever that count rises */
  uint32_t n_unhealthy;
  uint64_t unhealthy_epoch;
  /* exercised: which scenario fault entries fired (pd_world_note_open, pd_world_mark_crash) */
  uint8_t fault_fired[PD_SCENARIO_MAX_WORKERS][PD_SCENARIO_MAX_FAULTS];
  uint8_t crash_fired[PD_SCENARIO_MAX_WORKERS];
  uint8_t tfault_fired[PD_SCENARIO_MAX_TRAFFIC_FAULTS]; /* the scenario-level (traffic) faults */
  pd_scenario_t *healed; /* the scenario without faults, crashes or disconnects (I17 phase) */
  const pd_scenario_t *orig; /* the scenario as given (w->s points to healed once healed) */
  _Atomic uint32_t tf_owner[PD_SCENARIO_MAX_TRAFFIC_FAULTS]; /* sticky traffic faults: worker + 1 */
  pd_metrics_t *metrics; /* pd_world_opts_t.metrics */
  uint64_t tie_seed; /* order of same-instant events (0: insertion order) */
  int is_traced;      /* a trace file or its hash was asked for: else no trace is built */
  /* I15's excuse: a role is fault-blocked while no up worker of it has a place free and a
   * leg with a fault, lag or drip holds a place on one of them, so no gateway could start a
   * request's leg of that role until the faulted leg ends. A place is a running place, or the
   * slot of a faulted leg that never took one (hung before its head: the gateway sees it
   * taken) */
  uint32_t faulted_held; /* such legs, all workers */
  int is_fault_blocked;
  int is_fault_block_dirty; /* faulted_held moved since is_fault_blocked was computed */
  uint64_t seed;     /* the run's seed (prompt lengths: pd_scenario_prompt_tokens) */
  int push_err; /* the first push the event queue (or the list of changed legs) refused:
                   pd_world_run_opts returns it */
  uint64_t *dirty; /* requests whose legs changed during this step: retire-checked after it */
  size_t n_dirty, cap_dirty;
  pd_world_leg_fn on_leg; /* pd_world_opts_t.on_leg */
  void *leg_ud;
  /* The last leg body read and what it read (pd_worker_body_read is pure): an attempt opens
   * prefill and decode with the same bytes, so the second is not parsed again. */
  char *body_seen;
  size_t body_seen_len, body_seen_cap;
  int has_body_read;
  pd_worker_body_t body_read; /* its rooms array (n_rooms > 1) is owned here */
};

/* driver (pd_world.c, pd_world_loop.c) */
/* Recompute is_fault_blocked; when it starts to hold, mark every live request with no
 * running leg (pd_client_request_t.is_waited_behind_fault). */
void pd_world_fault_block_update(struct pd_world *w);
/* Mark rq if the world is fault-blocked and no leg of rq runs on a worker. */
void pd_world_fault_block_note(const struct pd_world *w, pd_client_request_t *rq);
void pd_world_push(struct pd_world *w, uint64_t t, uint32_t kind, uint32_t a, uint64_t b,
                   uint64_t c);
int pd_world_feed(struct pd_world *w, const pd_event_t *ev);
/* The core could not take request id (pd_gw_feed's error, out of memory): the gateway's HTTP
 * layer answers it 500 itself, as pdref gateway does (net/gateway/pd_gateway_http.c). */
void pd_world_refused(struct pd_world *w, uint64_t id);
void pd_world_apply(struct pd_world *w);
void pd_world_arrive(struct pd_world *w);
/* A client sends (EV_SEND): a closed-loop user's next job, or a retry of a job. */
void pd_world_send(struct pd_world *w, uint32_t user, uint64_t job, uint32_t try_no);
/* A client's request ended (its end, or the client gave up): retry it, or the user's next. */
void pd_world_client_after(struct pd_world *w, const pd_client_request_t *rq);
/* The closed loop's first sends and the load steps' later ones (setup). */
int pd_world_clients_start(struct pd_world *w);
/* EV_SEND's handler: c >> 32 set: a closed-loop user's wake-up (it joins the load if idle);
 * else c is the try number of the job's send. */
void pd_world_client_send_event(struct pd_world *w, uint32_t user, uint64_t job, uint64_t c);
void pd_world_try_retire(struct pd_world *w, pd_client_request_t *rq);
void pd_world_retire_now(struct pd_world *w, pd_client_request_t *rq); /* judge (once) + free */
/* Judge a request (once), keeping it alive: one cut off by the safety horizon runs on into
 * the healed phase, where only quiescence (I17) is still judged. */
void pd_world_judge(struct pd_world *w, pd_client_request_t *rq);
void pd_world_client_request_del(pd_client_request_t *rq); /* free a request and its legs */

/* exercised and health bookkeeping (pd_world.c) */
void pd_world_note_open(struct pd_world *w, pd_worker_leg_t *leg,
                        int was_down);                       /* after the model */
void pd_world_mark_crash(struct pd_world *w, uint32_t node); /* before the model's crash */
/* A leg a crash of node strikes: on that node, arrived and not yet done, or done with KV
 * still pinned there (a vLLM prefill's blocks waiting for decode's read die with it). */
static inline int pd_world_leg_crash_struck(const pd_worker_leg_t *l, uint32_t node) {
  return l->worker == node && l->wstate != PD_WORKER_LEG_NEW &&
         (l->wstate != PD_WORKER_LEG_DONE || l->kv_pages);
}
void pd_world_note_fired(struct pd_world *w,
                         const pd_worker_leg_t *leg); /* before a leg is freed */
void pd_world_health(struct pd_world *w, int delta); /* +1 a node down / breaker not Closed */
/* A leg its worker fails by its own timeout (bootstrap, waiting) without a fault: capacity
 * when its partner waits in its worker's queue (is_capacity_failed). */
void pd_world_note_own_timeout(struct pd_world *w, pd_worker_leg_t *leg);
void pd_world_exercised(struct pd_world *w); /* fill the stats at the end of the run */
/* I17: heal the world (crashed workers restarted, no fault on any later leg) before the
 * liveness phase, then check that nothing is left held in the workers or the core. */
void pd_world_heal(struct pd_world *w);
void pd_world_check_quiet(struct pd_world *w);

/* driver services used by the worker model */
void pd_world_to_gw(struct pd_world *w, pd_worker_leg_t *leg, int kind, uint32_t arg,
                    uint64_t delay_ns);
/* Part `part` (0-based) of n_parts of a message: its rendered bytes cut into n_parts chunks
 * of near-equal length, delivered one by one (the EV_W2G event's c = W2G_PART). */
void pd_world_to_gw_part(struct pd_world *w, pd_worker_leg_t *leg, int kind, uint32_t arg,
                         uint32_t part, uint32_t n_parts);
#define W2G_PART(part, n) ((uint64_t)(n) << 8 | (uint64_t)(part))
void pd_world_leg_changed(struct pd_world *w, pd_worker_leg_t *leg); /* checked after the step */

/* trace events (pd_world_trace.c): a judged request's spans (request, legs, slots); an
 * instant (name_id: PD_TRACE_ID_CLIENT_GONE..RESTART) on process pid (pd_trace.h) at now, on
 * the lane of key's span, with the request's and the leg's ids (0: none) in args; the
 * process and lane names */
void pd_world_trace_request(struct pd_world *w, const pd_client_request_t *rq);
void pd_world_trace_instant(struct pd_world *w, uint32_t pid, uint64_t key, uint32_t name_id,
                            uint64_t req_id, uint64_t leg_id);
void pd_world_trace_names(struct pd_world *w);

/* pd_metrics_report.c: add the requests still held at the run's end, the trace's counter
 * tracks, and end the run's figures */
void pd_metrics_world_end(struct pd_world *w);

/* worker engines (sim/pd_world_worker.c) */
int pd_world_workers_init(struct pd_world *w); /* one engine per node, after the nodes */
void pd_world_workers_reconfigure(struct pd_world *w); /* the nodes' specs changed (healed) */
void pd_world_workers_free(struct pd_world *w);
/* A retiring request's leg l still holds pinned KV: remember it, to judge I18 when the pin
 * is freed (if the checker left it undecided) and to count its page-seconds. */
void pd_world_pin_retired(struct pd_world *w, const pd_client_request_t *rq,
                          const pd_worker_leg_t *l);
/* The run ends: pins of retired legs still held are judged and counted up to now. */
void pd_world_pins_settle(struct pd_world *w);
uint32_t pd_world_workers_collisions(const struct pd_world *w);
void pd_worker_model_wake(struct pd_world *w, uint32_t node, uint64_t t);
void pd_worker_model_restart(struct pd_world *w, uint32_t node);
void pd_worker_model_on_open(struct pd_world *w, pd_worker_leg_t *leg);
/* The leg's vLLM fields from the body its worker received (kv_mode, kv_key, kv_node). */
struct pd_worker_body;
void pd_worker_model_read_kvp(struct pd_world *w, pd_worker_leg_t *leg,
                              const struct pd_worker_body *b);
void pd_worker_model_on_close(struct pd_world *w, pd_worker_leg_t *leg);
void pd_worker_model_on_abort(struct pd_world *w, pd_worker_leg_t *leg);
void pd_worker_model_crash(struct pd_world *w, uint32_t node);
/* Render a W2G message for delivery into buf; returns length (0: nothing to send). */
size_t pd_worker_model_render(struct pd_world *w, pd_worker_leg_t *leg, int kind, uint32_t arg,
                              char *buf, size_t cap);

#endif
