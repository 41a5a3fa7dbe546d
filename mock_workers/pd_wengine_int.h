/* Internal to mock_workers/pd_wengine*.c: the engine's legs, queues and the calls its two
 * halves (pd_wengine.c: the request's life; pd_wengine_cap.c: capacity, queues, the forward
 * pass) make on each other. */
#ifndef PD_WENGINE_INT_H
#define PD_WENGINE_INT_H
#include "pd_err.h"
#include "pd_heap.h"
#include "pd_map.h"
#include "pd_wengine.h"

/* Engine deadlines (heap item kind; b = leg id, c = the leg's generation when armed). */
enum {
  WE_BOOTSTRAP_TIMEOUT = 1,
  WE_WAIT_TIMEOUT,
  WE_TRANSFER_DONE,
  WE_RESPOND,
  WE_TOKEN,
  WE_RECONNECT,
  WE_FORWARD_END, /* b = 0, c = the forward pass's number */
  /* vLLM (pd_wengine_vllm.c) */
  WE_PIN_EXPIRY,  /* b = the pin's serial, c = its generation */
  WE_HEARTBEAT,   /* decode, lease mode */
  WE_READ_DONE,   /* decode: its read of the prefill's KV is over */
  WE_LOCAL_DONE,  /* decode: its local prefill is over */
  WE_NET_CUT,     /* a network fault's cut, `ms` after arrival (live while the leg is) */
};

#define PD_WENGINE_MAX_RANKS 64u /* dp_size's bound (sim/pd_scenario.c) */

/* vLLM decode's progress towards its KV (pd_wengine_vllm.c). */
enum { WV_NONE = 0, WV_PULLING, WV_READING, WV_SETTLED };

typedef struct pd_wengine_leg pd_wengine_leg_t;
typedef struct pd_wengine_queue {
  pd_wengine_leg_t *head, *tail;
  uint32_t n;
} pd_wengine_queue_t;

struct pd_wengine_leg {
  uint64_t id;
  pd_wengine_req_t rq;
  pd_worker_leg_state_t st;
  uint64_t gen;          /* bumped when a state's deadlines become moot */
  int fault;             /* pd_fault_kind_t or -1 */
  const pd_fault_t *fp;
  uint64_t lag_ms, drip_ms;
  uint32_t sent_tokens;
  int is_conn_open;      /* the worker still writes to this exchange */
  int has_slot, is_running;
  uint64_t kv_pages;
  uint32_t rank;         /* the DP rank whose capacity share it counts against (R-CAP-RANK;
                            0 when the ranks share one pool) */
  int is_stalled_closed; /* its client left while it waits in bootstrap (kept until timeout) */
  /* prefill: the decode it pairs with */
  int has_partner, is_partner_lost;
  int is_committed;      /* SGLang prefill: forward pass over, KV moving to its partner */
  int is_orphaned;       /* ...and its receiver left: held to the transfer timeout */
  uint64_t commit_at;
  uint64_t partner;      /* registration token */
  uint32_t partner_flags;
  int is_in_rooms;       /* in e->rooms under rq.room */
  /* decode */
  int is_connected, is_paired;
  /* vLLM */
  int vstage;            /* decode: WV_* */
  int is_stale;          /* decode: its read found nothing pinned (V1.15) */
  int is_tracked;        /* decode: past the arrival faults (its prefill may hear of it) */
  int is_rejected;       /* answered an error status at arrival (V1.18) */
  int is_path_cut;       /* a network fault cut its path: writes lost, close never heard */
  /* queue links (waiting / prealloc / forward batch) */
  pd_wengine_queue_t *queue;
  pd_wengine_leg_t *qprev, *qnext;
};

/* vLLM: a finished prefill's KV pinned for a remote read (V1.5, V1.12-V1.16). */
typedef struct pd_wengine_pinned {
  uint64_t serial, key, leg_id, pages;
  uint64_t expiry, gen;
  int is_kv_fail; /* the leg had a kv_fail fault: reads of it fail (V1.22) */
} pd_wengine_pinned_t;

/* A decode's room registered on this prefill before its prefill leg arrived. */
typedef struct pd_wengine_reg {
  uint64_t token, room, hash;
  uint32_t flags;
  int is_pending; /* still waiting in e->regs (else paired or ignored) */
} pd_wengine_reg_t;

struct pd_wengine {
  pd_wengine_config_t cfg;
  const pd_scenario_worker_t *spec;
  pd_role_t role;
  const pd_alloc_t *alloc;
  pd_map_t legs;   /* id -> pd_wengine_leg_t */
  pd_map_t rooms;  /* prefill: room -> its bootstrapping leg (the first to register it) */
  pd_map_t regs;   /* prefill: room -> pd_wengine_reg_t pending (the first decode to register it) */
  pd_map_t tokens; /* prefill: token -> pd_wengine_reg_t (pending or not) */
  pd_heap_t timers;
  size_t timers_compact_at; /* drop the moot timers when that many are queued (pd_wengine_arm) */
  pd_wengine_queue_t waiting;  /* prefill: paired, waiting for a forward pass */
  pd_wengine_queue_t prealloc; /* decode: waiting for a running slot and KV */
  pd_wengine_queue_t batch;    /* prefill: in the forward pass now */
  uint64_t forward_no;  /* the current forward pass's number; 0 none yet */
  int is_forwarding;
  uint32_t running, max_running;
  uint64_t kv_used, kv_total, page_tokens, reserve_pages;
  uint32_t received;    /* requests received (nth for faults) */
  uint32_t collisions;
  int is_down;
  int is_vllm;          /* spec->protocol == PD_PROTOCOL_VLLM */
  int is_crashing;      /* pd_wengine_crash is finishing the legs: no notifications */
  pd_map_t pins;        /* vLLM prefill: serial -> pd_wengine_pinned_t */
  pd_map_t pin_keys;    /* vLLM prefill: key -> the first pin under it */
  uint64_t pin_serial;
  uint64_t kv_pinned;   /* pages the pins hold (part of kv_used) */
  int err;              /* the first refused push of this step (NOMEM) */
  /* R-CAP-RANK: with capacity_per_rank, `ranks` (dp_size) schedulers, each with its share of
   * the running slots and the KV pool; ranks 1: one shared pool (the counters stay 0) */
  uint32_t ranks, rank_max_running;
  uint64_t rank_kv_total;
  uint32_t rank_running[PD_WENGINE_MAX_RANKS];
  uint64_t rank_kv_used[PD_WENGINE_MAX_RANKS];
};

/* pd_wengine.c */
void pd_wengine_act(pd_wengine_t *e, pd_wact_buf_t *out, uint32_t kind, const pd_wengine_leg_t *l,
                    uint32_t a, uint64_t b, uint64_t c);
void pd_wengine_arm(pd_wengine_t *e, pd_wengine_leg_t *l, int kind, uint64_t at);
void pd_wengine_arm_item(pd_wengine_t *e, const pd_heap_item_t *it);
/* A queued timer still means something: its leg is live and has not moved past it (gen). */
int pd_wengine_timer_is_live(const pd_wengine_t *e, const pd_heap_item_t *it);
uint64_t pd_wengine_ms(const pd_wengine_t *e, uint64_t ms);
void pd_wengine_set_state(pd_wengine_t *e, pd_wengine_leg_t *l, pd_worker_leg_state_t st,
                          pd_wact_buf_t *out);
/* Decode admitted: waits for the KV; tells the prefill. */
void pd_wengine_decode_admitted(pd_wengine_t *e, pd_wengine_leg_t *d, uint64_t now, pd_wact_buf_t *out);
void pd_wengine_finish(pd_wengine_t *e, pd_wengine_leg_t *l, pd_truth_t truth, uint64_t now,
                       pd_wact_buf_t *out);
void pd_wengine_answer_error(pd_wengine_t *e, pd_wengine_leg_t *l, int status, uint64_t now,
                             pd_wact_buf_t *out);
void pd_wengine_cut(pd_wengine_t *e, pd_wengine_leg_t *l, pd_wengine_end_t how, pd_truth_t t,
                    uint64_t now, pd_wact_buf_t *out);
void pd_wengine_open_leg(pd_wengine_t *e, pd_wengine_leg_t *l, uint64_t now, pd_wact_buf_t *out);
void pd_wengine_step_timer(pd_wengine_t *e, pd_wengine_leg_t *l, int kind, uint64_t now,
                           pd_wact_buf_t *out);
void pd_wengine_pair_with(pd_wengine_t *e, pd_wengine_leg_t *p, pd_wengine_reg_t *r, uint64_t now,
                          pd_wact_buf_t *out);
/* R-CAP-RANK: the rank whose share l counts against: its body's routed_dp_rank, else its
 * room, modulo the ranks; 0 when the ranks share one pool. */
uint32_t pd_wengine_leg_rank(const pd_wengine_t *e, const pd_wengine_leg_t *l);
int pd_wengine_can_pair(const pd_wengine_t *e, const pd_wengine_leg_t *p, const pd_wengine_reg_t *r);
/* abort_after_commit_ignored: an abort of this leg is a no-op (SGLang prefill past commit). */
int pd_wengine_ignores_abort(const pd_wengine_t *e, const pd_wengine_leg_t *l);
void pd_wengine_abort_leg(pd_wengine_t *e, pd_wengine_leg_t *l, uint64_t now, pd_wact_buf_t *out);
void pd_wengine_kv_arrived(pd_wengine_t *e, pd_wengine_leg_t *d, uint64_t now, pd_wact_buf_t *out);
/* Prefill's forward pass is over for l: the transfer starts. */
void pd_wengine_forward_done(pd_wengine_t *e, pd_wengine_leg_t *l, uint64_t now, pd_wact_buf_t *out);

/* pd_wengine_cap.c */
uint64_t pd_wengine_pages(const pd_wengine_t *e, uint64_t tokens);
void pd_wqueue_push(pd_wengine_queue_t *q, pd_wengine_leg_t *l);
void pd_wqueue_remove(pd_wengine_leg_t *l);
void pd_wengine_set_kv(pd_wengine_t *e, pd_wengine_leg_t *l, uint64_t pages, pd_wact_buf_t *out);
void pd_wengine_set_running(pd_wengine_t *e, pd_wengine_leg_t *l, int on, pd_wact_buf_t *out);
/* 1 when the request can never fit this worker's pool (S2.5: 400). */
int pd_wengine_too_large(const pd_wengine_t *e, const pd_wengine_leg_t *l);
/* Admit what fits from the head of the queues (decode prealloc; prefill forward pass). */
void pd_wengine_schedule(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out);
void pd_wengine_forward_end(pd_wengine_t *e, uint64_t now, uint64_t no, pd_wact_buf_t *out);
/* Release every capacity the leg holds and take it off any queue. */
void pd_wengine_release(pd_wengine_t *e, pd_wengine_leg_t *l, pd_wact_buf_t *out);

/* pd_wengine_vllm.c */
void pd_wengine_act_id(pd_wengine_t *e, pd_wact_buf_t *out, uint32_t kind, uint64_t id,
                       uint32_t a, uint64_t b, uint64_t c);
int pd_wengine_pin_timer_is_live(const pd_wengine_t *e, const pd_heap_item_t *it);
void pd_wengine_pin_expired(pd_wengine_t *e, uint64_t serial, uint64_t now, pd_wact_buf_t *out);
/* Prefill: forward pass over; the answer follows after any lag (no transfer, V1.3). */
void pd_wengine_vllm_forward_done(pd_wengine_t *e, pd_wengine_leg_t *p, uint64_t now,
                                  pd_wact_buf_t *out);
/* Prefill answering (the worker finished it): pins the KV when it ended capped by length
 * (before the leg's DONE); returns PD_WIRE_VLLM_PREFILL_BODY's arg (blocks; 0: null params;
 * with PD_WIRE_NO_RID for kv_params invalid, PD_WIRE_UNKNOWN_ENGINE for unknown_engine). */
uint32_t pd_wengine_vllm_answer(pd_wengine_t *e, pd_wengine_leg_t *p, uint64_t now,
                                pd_wact_buf_t *out);
void pd_wengine_vllm_decode_open(pd_wengine_t *e, pd_wengine_leg_t *d, uint64_t now);
void pd_wengine_vllm_decode_admitted(pd_wengine_t *e, pd_wengine_leg_t *d, uint64_t now,
                                     pd_wact_buf_t *out);
void pd_wengine_vllm_timer(pd_wengine_t *e, pd_wengine_leg_t *l, int kind, uint64_t now,
                           pd_wact_buf_t *out);
/* A decode leg ends: tell its prefill what it can (V1.17, V1.18, V1.21). */
void pd_wengine_vllm_finish(pd_wengine_t *e, pd_wengine_leg_t *l, pd_wact_buf_t *out);
void pd_wengine_vllm_crash(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out);
void pd_wengine_vllm_free(pd_wengine_t *e);

#endif
