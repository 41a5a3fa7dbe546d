/* The simulator's driver of the worker engine (mock_workers/pd_wengine.h): one engine per
 * worker node, fed the gateway's opens, closes and aborts as they reach the worker, woken at
 * its own deadlines; its actions become scheduled messages to the gateway (rendered at
 * delivery), the rendezvous between engines (a decode's room reaches the prefill node its
 * body names, the KV goes back at once), and the leg's record the invariants judge (state,
 * truth, slot, KV pages, fault). vLLM workers (source first): a decode's read, notifications
 * and heartbeats reach the prefill node its kv_transfer_params name, the read's answer comes
 * back at once, and pinned KV stays on the finished prefill leg's record until it is freed.
 * The socket mock drives the same engine (mock_workers/server/). */
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_world_int.h"
#include "pd_worker_body.h"
#include "pd_worker_shared.h"

#define MS_NS 1000000ull
#define VLLM_SIDE_CHANNEL_PORT 5600 /* VLLM_NIXL_SIDE_CHANNEL_PORT's default (V1.5) */

static pd_wengine_config_t engine_config(struct pd_world *w, uint32_t i) {
  pd_wengine_config_t c = {0};
  c.spec = w->nodes[i].spec;
  c.worker_index = i;
  c.bootstrap_timeout_ms = w->s->config.bootstrap_timeout_ms;
  c.waiting_timeout_ms = w->s->config.waiting_timeout_ms;
  c.fault_rate = w->s->workload.fault_rate;
  c.tfaults = w->s->tfaults;
  c.n_tfaults = w->s->n_tfaults;
  c.tf_owner = w->tf_owner;
  c.fault_rng = &w->fault_rng;
  c.time_scale = 1.0;
  return c;
}

int pd_world_workers_init(struct pd_world *w) {
  pd_wact_buf_init(&w->wacts, NULL);
  for (uint32_t i = 0; i < PD_WORLD_SUB_BUFS; i++) pd_wact_buf_init(&w->sub[i], NULL);
  w->n_sub = 0;
  for (uint32_t i = 0; i < w->n_nodes; i++) {
    pd_wengine_config_t c = engine_config(w, i);
    w->nodes[i].eng = pd_wengine_new(&c, NULL);
    w->nodes[i].wake_at = UINT64_MAX;
    if (!w->nodes[i].eng) return PD_ERR_NOMEM;
  }
  return 0;
}

void pd_world_workers_reconfigure(struct pd_world *w) {
  for (uint32_t i = 0; i < w->n_nodes; i++) {
    pd_wengine_config_t c = engine_config(w, i);
    if (w->nodes[i].eng) pd_wengine_reconfigure(w->nodes[i].eng, &c);
  }
}

void pd_world_workers_free(struct pd_world *w) {
  for (uint32_t i = 0; i < w->n_nodes; i++) pd_wengine_del(w->nodes[i].eng);
  pd_wact_buf_free(&w->wacts);
  for (uint32_t i = 0; i < PD_WORLD_SUB_BUFS; i++) pd_wact_buf_free(&w->sub[i]);
  void *p;
  for (size_t slot = 0; pd_map_next(&w->late_pins, &slot, NULL, &p);) free(p);
  pd_map_free(&w->late_pins);
}

/* ---------- KV pinned past its request ---------- */

void pd_world_pin_retired(struct pd_world *w, const pd_client_request_t *rq,
                          const pd_worker_leg_t *l) {
  int has_end = rq->ended || rq->gone;
  uint64_t grace = w->s->config.grace_ms * MS_NS;
  pd_world_late_pin_t *p = malloc(sizeof *p);
  int rc = p ? 0 : PD_ERR_NOMEM;
  if (p) { /* undecided at retirement: pd_check's is_kv_deferred case */
    *p = (pd_world_late_pin_t){.worker = l->worker, .has_end = has_end, .role = l->role,
                               .is_judged = !has_end || w->now > rq->t_end + grace,
                               .is_rq_violating = rq->violations != 0, .pages = l->kv_pages,
                               .since = w->now, .t_end = rq->t_end};
    rc = pd_map_put(&w->late_pins, l->leg_id, p);
  }
  if (rc < 0) {
    free(p);
    if (!w->push_err) w->push_err = PD_ERR_NOMEM; /* I18 could not be judged: the verdict is void */
  }
}

/* I18 for a pin the checker left undecided: freed (or still held at the run's end) after
 * t_end + grace. */
static void pin_judge(struct pd_world *w, const pd_world_late_pin_t *p, int is_end) {
  uint64_t grace = w->s->config.grace_ms * MS_NS;
  if (p->is_judged || w->now <= p->t_end + grace) return;
  pd_world_stats_t *st = w->stats;
  w->violations |= 1u << (PD_INVARIANT_STRANDED_KV - 1);
  st->inv_count[PD_INVARIANT_STRANDED_KV]++;
  if (!p->is_rq_violating) st->violations_total++;
  if (st->first_violating_req_valid) return;
  st->first_violating_req_valid = 1;
  snprintf(st->first_reason, sizeof st->first_reason,
           "I18 %llu KV pages of a %s leg on %s %s %.1f ms after the client's end",
           (unsigned long long)p->pages, pd_role_name(p->role), w->s->workers[p->worker].name,
           is_end ? "still pinned at the run's end," : "pinned until",
           (double)(w->now - p->t_end) / 1e6);
}

static void pin_settle(struct pd_world *w, uint64_t leg_id, int is_end) {
  pd_world_late_pin_t *p = pd_map_get(&w->late_pins, leg_id);
  if (!p) return;
  pin_judge(w, p, is_end);
  if (w->metrics)
    pd_metrics_kv_late(w->metrics, p->worker, p->pages, p->since, w->now, p->has_end, p->t_end);
  pd_map_remove(&w->late_pins, leg_id);
  free(p);
}

void pd_world_pins_settle(struct pd_world *w) {
  uint64_t id;
  for (size_t slot = 0; pd_map_next(&w->late_pins, &slot, &id, NULL);) {
    pin_settle(w, id, 1);
    slot = 0; /* the map changed: start over (each pass removes one) */
  }
}

uint32_t pd_world_workers_collisions(const struct pd_world *w) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < w->n_nodes; i++) {
    pd_wengine_stats_t st;
    if (!w->nodes[i].eng) continue;
    pd_wengine_stats(w->nodes[i].eng, &st);
    n += st.collisions;
  }
  return n;
}

/* ---------- actions ---------- */

static void run_engine(struct pd_world *w, uint32_t node, int rc, pd_wact_buf_t *out);

static void kv_held(struct pd_world *w, pd_worker_leg_t *leg, uint64_t pages) {
  leg->kv_page_ns += leg->kv_pages * (w->now - leg->t_kv_changed);
  if (!pages && leg->kv_pages) leg->t_kv_freed = w->now;
  if (pages && !leg->kv_pages) leg->t_kv_taken = w->now;
  leg->kv_pages = pages;
  leg->t_kv_changed = w->now;
  if (pages > leg->kv_pages_max) leg->kv_pages_max = pages;
}

static void slot(struct pd_world *w, pd_worker_leg_t *leg, int taken) {
  pd_worker_node_t *n = &w->nodes[leg->worker];
  if (taken) {
    leg->slot_taken = 1;
    leg->t_slot_taken = w->now;
    n->live_slots++;
  } else if (leg->slot_taken && !leg->is_slot_freed) {
    leg->is_slot_freed = 1;
    leg->t_slot_freed = w->now;
    n->live_slots--;
    n->t_slot_freed_last = w->now;
    n->n_freed_recent = n->n_freed_at == w->now ? n->n_freed_recent + 1 : 1;
    n->n_freed_at = w->now;
  }
}

/* ---------- I15's excuse: waiting behind a faulted leg ---------- */

void pd_world_fault_block_note(const struct pd_world *w, pd_client_request_t *rq) {
  if (!w->is_fault_blocked || rq->is_waited_behind_fault) return;
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req)
    if (l->is_running && l->wstate != PD_WORKER_LEG_DONE) return;
  rq->is_waited_behind_fault = 1;
}

/* A node with no place free: its running places all taken, counting as taken the slots of
 * faulted legs that hold no running place (hung before their head: a gateway that counts
 * what it sent sees them as places taken). */
static int node_full(const pd_worker_node_t *n) {
  return pd_wengine_room(n->eng) <= n->faulted_idle;
}

/* Is some role fault-blocked: a full up worker of it holds a faulted leg, and no up worker
 * of that role has a place free? */
static int fault_blocked(const struct pd_world *w) {
  int faulted_full[2] = {0, 0}, free_place[2] = {0, 0};
  for (uint32_t k = 0; k < w->n_nodes; k++) {
    const pd_worker_node_t *n = &w->nodes[k];
    int r = n->role == PD_ROLE_DECODE;
    if (n->is_down) continue;
    if (!node_full(n)) free_place[r] = 1; /* a gateway could use it */
    else if (n->faulted_held) faulted_full[r] = 1;
  }
  return (faulted_full[0] && !free_place[0]) || (faulted_full[1] && !free_place[1]);
}

void pd_world_fault_block_update(struct pd_world *w) {
  int was = w->is_fault_blocked;
  w->is_fault_blocked = w->faulted_held && fault_blocked(w);
  if (!w->is_fault_blocked || was) return;
  void *v;
  for (size_t slot = 0; pd_map_next(&w->reqs, &slot, NULL, &v);) pd_world_fault_block_note(w, v);
}

static int has_own_fault(const pd_worker_leg_t *l) {
  return l->wstate != PD_WORKER_LEG_DONE && (l->fault >= 0 || l->lag_ms || l->drip_ms);
}

/* l is a partner of leg: the other role's leg of the same attempt. */
static int is_partner(const pd_worker_leg_t *l, const pd_worker_leg_t *leg) {
  return l != leg && l->attempt == leg->attempt && l->role != leg->role;
}

/* A partner leg, still open at its worker, with a fault, lag or drip of its own: this leg is
 * held by it (a decode waiting in bootstrap for a prefill whose bootstrap is never served;
 * explore seed 696157). */
static int has_faulted_partner(const struct pd_world *w, const pd_worker_leg_t *leg) {
  const pd_client_request_t *rq = pd_map_get(&w->reqs, leg->req_id);
  for (const pd_worker_leg_t *l = rq ? rq->legs : NULL; l; l = l->next_in_req)
    if (is_partner(l, leg) && has_own_fault(l)) return 1;
  return 0;
}

static void track_leg_fault(struct pd_world *w, pd_worker_leg_t *leg);

/* Keep the node's faulted counts true for this leg: it counts while it holds its slot or a
 * running place with a fault, a lag or a drip picked (its own, or its attempt's partner's:
 * then it waits on that fault), and as idle while it holds no running place. A change of its
 * own fault status re-tracks its partners. run_engine recomputes the block at the end of the
 * step. */
static void track_running_fault(struct pd_world *w, pd_worker_leg_t *leg) {
  int own = has_own_fault(leg);
  if (own != leg->is_own_faulted) { /* its partners' view of it changed */
    leg->is_own_faulted = own;
    const pd_client_request_t *rq = pd_map_get(&w->reqs, leg->req_id);
    for (pd_worker_leg_t *l = rq ? rq->legs : NULL; l; l = l->next_in_req)
      if (is_partner(l, leg)) track_leg_fault(w, l);
  }
  track_leg_fault(w, leg);
}

static void track_leg_fault(struct pd_world *w, pd_worker_leg_t *leg) {
  int holds = leg->is_running || (leg->slot_taken && !leg->is_slot_freed);
  int held = holds && (has_own_fault(leg) ||
                       (leg->wstate != PD_WORKER_LEG_DONE && has_faulted_partner(w, leg)));
  int idle = held && !leg->is_running;
  pd_worker_node_t *n = &w->nodes[leg->worker];
  if (held != leg->is_held_faulted) {
    leg->is_held_faulted = held;
    n->faulted_held += held ? 1u : (uint32_t)-1;
    w->faulted_held += held ? 1u : (uint32_t)-1;
    w->is_fault_block_dirty = 1;
  }
  if (idle != leg->is_idle_faulted) {
    leg->is_idle_faulted = idle;
    n->faulted_idle += idle ? 1u : (uint32_t)-1;
    w->is_fault_block_dirty = 1;
  }
}

static void send(struct pd_world *w, pd_worker_leg_t *leg, const pd_wact_t *a) {
  if (!leg->worker_conn_open) return;
  if (a->kind == PD_WACT_HEAD) {
    pd_world_to_gw(w, leg, W2G_HEAD, a->a, 0);
    return;
  }
  if (a->kind == PD_WACT_SEND && a->c >= 2) {
    for (uint32_t i = 0; i < a->c && leg->worker_conn_open; i++)
      pd_world_to_gw_part(w, leg, (int)a->a, (uint32_t)a->b, i, (uint32_t)a->c);
    return;
  }
  if (a->kind == PD_WACT_SEND) {
    pd_world_to_gw(w, leg, (int)a->a, (uint32_t)a->b, 0);
    return;
  }
  switch ((pd_wengine_end_t)a->a) { /* PD_WACT_END */
  case PD_WENGINE_END_CLEAN: pd_world_to_gw(w, leg, W2G_END, 0, 0); break;
  case PD_WENGINE_END_READ: pd_world_to_gw(w, leg, W2G_UPERR, PD_UPSTREAM_ERROR_READ, 0); break;
  case PD_WENGINE_END_RESET: pd_world_to_gw(w, leg, W2G_UPERR, PD_UPSTREAM_ERROR_RESET, 0); break;
  default: pd_world_to_gw(w, leg, W2G_UPERR, PD_UPSTREAM_ERROR_CONNECT, 0); break;
  }
  leg->worker_conn_open = 0;
}

/* A buffer for a nested engine call: the world's for this depth (emptied), or own (deeper
 * than PD_WORLD_SUB_BUFS, which no run reaches: then allocated and freed as before). */
static pd_wact_buf_t *sub_begin(struct pd_world *w, pd_wact_buf_t *own) {
  if (w->n_sub < PD_WORLD_SUB_BUFS) {
    pd_wact_buf_t *b = &w->sub[w->n_sub++];
    pd_wact_buf_reset(b);
    return b;
  }
  pd_wact_buf_init(own, NULL);
  return own;
}

static void sub_end(struct pd_world *w, pd_wact_buf_t *b, pd_wact_buf_t *own) {
  if (b == own) pd_wact_buf_free(own);
  else w->n_sub--;
}

/* The rendezvous: a call on another node's engine, its actions applied at once. */
static void on_partner(struct pd_world *w, pd_worker_leg_t *leg, const pd_wact_t *a) {
  pd_wact_buf_t own, *sub = sub_begin(w, &own);
  if (a->kind == PD_WACT_CONNECT || (a->kind == PD_WACT_UNPAIR && leg->role == PD_ROLE_DECODE)) {
    if (leg->boot_node < 0) goto out; /* the body names no prefill we know: nobody hears */
    uint32_t p = (uint32_t)leg->boot_node;
    int rc = a->kind == PD_WACT_CONNECT
                 ? pd_wengine_register(w->nodes[p].eng, w->now, leg->leg_id, a->room, a->b, a->a,
                                       sub)
                 : pd_wengine_unregister(w->nodes[p].eng, w->now, leg->leg_id, sub);
    run_engine(w, p, rc == PD_ERR_NOT_FOUND ? 0 : rc, sub);
    goto out;
  }
  pd_worker_leg_t *d = pd_map_get(&w->legs, a->b); /* PAIRED, KV_SEND: the decode leg */
  if (!d || d->wstate == PD_WORKER_LEG_DONE || d->wstate == PD_WORKER_LEG_NEW) goto out;
  if (a->kind == PD_WACT_KV_SEND && a->a == 1 && d->req_id == leg->req_id)
    d->is_kv_from_pair = 1; /* I20: its own prefill's KV */
  int rc = a->kind == PD_WACT_PAIRED ? pd_wengine_paired(w->nodes[d->worker].eng, w->now, d->leg_id, sub)
                                     : pd_wengine_kv(w->nodes[d->worker].eng, w->now, d->leg_id,
                                                     (int)a->a, sub);
  run_engine(w, d->worker, rc == PD_ERR_NOT_FOUND ? 0 : rc, sub);
out:
  sub_end(w, sub, &own);
}

/* vLLM (source first): a decode's read, notification or heartbeat goes to the prefill node
 * its remote_engine_id names (none: the read fails, as a failed handshake would, V1.22; a
 * notification or heartbeat is lost); the read's answer comes back to the decode at once. */
static void on_vllm(struct pd_world *w, pd_worker_leg_t *leg, const pd_wact_t *a) {
  pd_wact_buf_t own, *sub = sub_begin(w, &own);
  int rc = 0;
  uint32_t node = leg->worker;
  if (a->kind == PD_WACT_PULL && leg->kv_node < 0) {
    leg->is_kv_unknown = 1;
    rc = pd_wengine_pulled(w->nodes[node].eng, w->now, leg->leg_id, PD_WENGINE_READ_FAILED, sub);
  } else if (leg->kv_node >= 0) {
    node = (uint32_t)leg->kv_node;
    pd_wengine_t *p = w->nodes[node].eng;
    if (a->kind == PD_WACT_PULL) rc = pd_wengine_pull(p, w->now, leg->leg_id, a->b, sub);
    else if (a->kind == PD_WACT_NOTIFY) rc = pd_wengine_notify(p, w->now, a->b, (int)a->a, sub);
    else rc = pd_wengine_heartbeat(p, w->now, a->b, sub);
  }
  run_engine(w, node, rc == PD_ERR_NOT_FOUND ? 0 : rc, sub);
  sub_end(w, sub, &own);
}

/* The prefill's answer to a read, to the decode leg that asked (a->b). */
static void on_pulled(struct pd_world *w, const pd_wact_t *a) {
  pd_worker_leg_t *d = pd_map_get(&w->legs, a->b);
  if (!d || d->wstate == PD_WORKER_LEG_DONE || d->wstate == PD_WORKER_LEG_NEW) return;
  pd_wact_buf_t own, *sub = sub_begin(w, &own);
  int rc = pd_wengine_pulled(w->nodes[d->worker].eng, w->now, d->leg_id, (int)a->a, sub);
  run_engine(w, d->worker, rc == PD_ERR_NOT_FOUND ? 0 : rc, sub);
  sub_end(w, sub, &own);
}

/* A network fault cut the leg's path (docs/scenarios.md, network faults): what was already on
 * the wire still arrives; after it the gateway gets a reset (net_reset) or nothing at all
 * (response_lost). The worker is not told: its later writes and the gateway's close are lost
 * on the path (pd_worker_model_on_close), an /abort_request still reaches it. */
static void net_cut(struct pd_world *w, pd_worker_leg_t *leg, uint32_t how) {
  leg->is_path_fault = 1;
  if (leg->worker_conn_open && how == PD_WENGINE_NET_RESET)
    pd_world_to_gw(w, leg, W2G_UPERR, PD_UPSTREAM_ERROR_RESET, 0);
  leg->worker_conn_open = 0;
}

void pd_worker_model_read_kvp(struct pd_world *w, pd_worker_leg_t *leg,
                              const struct pd_worker_body *b) {
  if (w->nodes[leg->worker].spec->protocol != PD_PROTOCOL_VLLM) return;
  int is_decode = leg->role == PD_ROLE_DECODE;
  leg->kv_mode = pd_worker_kvp_mode(&b->kvp, is_decode);
  leg->max_tokens = b->max_tokens;
  leg->kv_key = pd_worker_kv_key(is_decode ? b->kvp.request_id : leg->rid);
  /* a prefill's engine id and host are its node's name: the engine id first, else the host */
  for (int by_host = 0; is_decode && by_host < 2 && leg->kv_node < 0; by_host++)
    for (uint32_t i = 0; i < w->n_nodes && leg->kv_node < 0; i++)
      if (w->nodes[i].role == PD_ROLE_PREFILL &&
          strcmp(w->nodes[i].spec->name, by_host ? b->kvp.host : b->kvp.engine_id) == 0)
        leg->kv_node = (int)i;
}

/* I20: a vLLM decode read its KV off the node its params name; from its own request's prefill
 * when the request has a prefill leg there (this attempt or an earlier one: R-SF-DECODE-RETRY
 * resends the same parameters). */
static void note_kv_read(struct pd_world *w, pd_worker_leg_t *d) {
  const pd_client_request_t *rq = pd_map_get(&w->reqs, d->req_id);
  for (const pd_worker_leg_t *p = rq ? rq->legs : NULL; p; p = p->next_in_req)
    if (p->role == PD_ROLE_PREFILL && p->attempt <= d->attempt && d->kv_node >= 0 &&
        p->worker == (uint32_t)d->kv_node && p->kv_key == d->kv_key)
      d->is_kv_from_pair = 1; /* its own request's prefill's blocks: that node, that key */
}

static void apply_one(struct pd_world *w, pd_worker_leg_t *leg, const pd_wact_t *a) {
  switch ((pd_wact_kind_t)a->kind) {
  case PD_WACT_HEAD:
  case PD_WACT_SEND:
  case PD_WACT_END: send(w, leg, a); return;
  case PD_WACT_CONNECT:
  case PD_WACT_PAIRED:
  case PD_WACT_KV_SEND: on_partner(w, leg, a); return;
  case PD_WACT_UNPAIR:
    if (leg->role == PD_ROLE_DECODE) on_partner(w, leg, a);
    return; /* a prefill's decode learns nothing (S2.11): it waits for its own timeout */
  case PD_WACT_STATE:
    if (a->a == PD_WORKER_LEG_DONE && leg->wstate != PD_WORKER_LEG_DONE)
      leg->wstate_at_end = leg->wstate;
    leg->wstate = (pd_worker_leg_state_t)a->a;
    if (leg->wstate == PD_WORKER_LEG_LAG && leg->lag_ms) leg->is_lag_fired = 1;
    if (leg->wstate == PD_WORKER_LEG_STREAM && leg->drip_ms) leg->is_drip_fired = 1;
    if (leg->wstate == PD_WORKER_LEG_STREAM) leg->has_streamed = 1;
    return;
  case PD_WACT_FAULT:
    leg->fault = (int)a->a - 1;
    leg->tfault = (int)a->b - 1;
    leg->fp = a->fp;
    leg->lag_ms = a->c >> 32;
    leg->drip_ms = a->c & 0xffffffffu;
    track_running_fault(w, leg);
    return;
  case PD_WACT_FIRED: leg->is_fault_fired = 1; return;
  case PD_WACT_STATUS: leg->injected_status = (int)a->a; return;
  case PD_WACT_SLOT:
    slot(w, leg, (int)a->a);
    track_running_fault(w, leg);
    return;
  case PD_WACT_RUNNING:
    leg->is_running = (int)a->a;
    track_running_fault(w, leg);
    return;
  case PD_WACT_KV: kv_held(w, leg, a->b); return;
  case PD_WACT_DONE:
    if ((pd_truth_t)a->a == PD_TRUTH_FAILED && !leg->is_fault_fired &&
        (leg->wstate_at_end == PD_WORKER_LEG_BOOTSTRAP ||
         leg->wstate_at_end == PD_WORKER_LEG_WAIT_KV))
      pd_world_note_own_timeout(w, leg);
    leg->wstate = PD_WORKER_LEG_DONE;
    track_running_fault(w, leg);
    if (leg->truth == PD_TRUTH_PENDING) leg->truth = (pd_truth_t)a->a;
    pd_world_leg_changed(w, leg);
    return;
  case PD_WACT_REJECT: return;
  case PD_WACT_PIN:
    if (a->b) leg->is_kv_pinned = 1;
    kv_held(w, leg, a->b);
    return;
  case PD_WACT_PULL:
  case PD_WACT_NOTIFY:
  case PD_WACT_HEARTBEAT: on_vllm(w, leg, a); return;
  case PD_WACT_PULLED: return; /* run_engine delivers it */
  case PD_WACT_KV_FROM:
    leg->kv_from = (int)a->a;
    if (a->a == PD_WENGINE_KV_FROM_READ || a->a == PD_WENGINE_KV_FROM_STALE)
      note_kv_read(w, leg);
    return;
  case PD_WACT_NET: net_cut(w, leg, a->a); return;
  }
}

/* Apply an engine step's actions, then wake the node at its next deadline. */
static void run_engine(struct pd_world *w, uint32_t node, int rc, pd_wact_buf_t *out) {
  if ((rc < 0 || out->err) && !w->push_err) w->push_err = rc < 0 ? rc : out->err;
  pd_worker_leg_t *leg = NULL; /* actions come in runs of one leg: looked up once a run (a leg
                                  leaves the map only when its request retires, never in here) */
  for (size_t i = 0; i < out->n; i++) {
    if (out->v[i].kind == PD_WACT_PULLED) on_pulled(w, &out->v[i]);
    if (!i || out->v[i].id != out->v[i - 1].id) leg = pd_map_get(&w->legs, out->v[i].id);
    if (leg) apply_one(w, leg, &out->v[i]);
    else if (out->v[i].kind == PD_WACT_PIN && !out->v[i].b)
      pin_settle(w, out->v[i].id, 0); /* a retired leg's pin freed */
  }
  pd_worker_node_t *n = &w->nodes[node];
  int full = node_full(n); /* I15's fault-block: only a change can move it */
  if ((full != n->is_full || w->is_fault_block_dirty) &&
      (w->faulted_held || w->is_fault_blocked)) {
    w->is_fault_block_dirty = 0;
    pd_world_fault_block_update(w);
  }
  n->is_full = full;
  uint64_t t = pd_wengine_next_expiry(n->eng);
  if (t < n->wake_at) {
    n->wake_at = t;
    pd_world_push(w, t, EV_WWAKE, node, 0, 0);
  }
  if (w->metrics) {
    pd_wengine_stats_t st;
    pd_wengine_stats(n->eng, &st);
    pd_metrics_note_capacity(w->metrics, node, w->now, st.running, st.queued, st.kv_used_pages,
                             st.kv_total_pages);
  }
}

#define STEP(w, node, call)                                                                    \
  do {                                                                                         \
    pd_wact_buf_reset(&(w)->wacts);                                                            \
    int rc_ = (call);                                                                          \
    run_engine((w), (node), rc_ == PD_ERR_NOT_FOUND ? 0 : rc_, &(w)->wacts);                    \
  } while (0)

/* ---------- entry points ---------- */

void pd_worker_model_on_open(struct pd_world *w, pd_worker_leg_t *leg) {
  pd_client_request_t *rq = pd_map_get(&w->reqs, leg->req_id);
  pd_wengine_req_t r = {0};
  r.is_stream = leg->is_stream;
  r.has_room = leg->n_rooms > 0;
  r.room = leg->room;
  r.rooms_hash = leg->rooms_hash;
  r.tokens = leg->tokens;
  r.prompt_tokens = leg->prompt_tokens;
  r.request = rq ? (uint32_t)rq->id : PD_TRAFFIC_FAULT_ANY;
  r.leg_no = rq ? ++rq->legs_seen[leg->role] : 0;
  r.can_connect = leg->boot_node >= 0;
  r.kv_mode = leg->kv_mode;
  r.kv_key = leg->kv_key;
  r.max_tokens = leg->max_tokens;
  r.has_routed_rank = leg->has_routed_rank;
  r.routed_rank = leg->routed_rank;
  r.has_prefill_rank = leg->has_prefill_rank;
  r.prefill_rank = leg->prefill_rank;
  leg->worker_conn_open = 1;
  leg->truth = PD_TRUTH_PENDING;
  leg->wstate = PD_WORKER_LEG_NEW;
  pd_worker_node_t *n = &w->nodes[leg->worker];
  STEP(w, leg->worker, pd_wengine_open(n->eng, w->now, leg->leg_id, &r, &w->wacts));
  if (leg->is_abort_early && leg->wstate != PD_WORKER_LEG_DONE) /* the abort overtook it (Q7) */
    STEP(w, leg->worker, pd_wengine_abort(n->eng, w->now, leg->leg_id, &w->wacts));
  if (leg->is_closed_early && leg->wstate != PD_WORKER_LEG_DONE) {
    leg->worker_conn_open = 0;
    STEP(w, leg->worker, pd_wengine_close(n->eng, w->now, leg->leg_id, &w->wacts));
  }
}

void pd_worker_model_on_close(struct pd_world *w, pd_worker_leg_t *leg) {
  if (leg->is_path_fault) return; /* the path is cut: the close never reaches the worker */
  leg->worker_conn_open = 0;
  if (leg->wstate == PD_WORKER_LEG_NEW) { /* the close came first at the same instant: it */
    leg->is_closed_early = 1;              /* applies once the request is there */
    return;
  }
  if (leg->wstate == PD_WORKER_LEG_DONE) return;
  if (leg->wstate == PD_WORKER_LEG_BOOTSTRAP) leg->truth = PD_TRUTH_STALLED;
  STEP(w, leg->worker, pd_wengine_close(w->nodes[leg->worker].eng, w->now, leg->leg_id, &w->wacts));
}

void pd_worker_model_on_abort(struct pd_world *w, pd_worker_leg_t *leg) {
  leg->aborts++;
  if (leg->wstate == PD_WORKER_LEG_NEW) { /* the abort overtook its request: remember it, as the */
    leg->is_abort_early = 1;              /* socket mock remembers aborted rids (Q7) */
    return;
  }
  if (leg->wstate == PD_WORKER_LEG_DONE) return;
  STEP(w, leg->worker, pd_wengine_abort(w->nodes[leg->worker].eng, w->now, leg->leg_id, &w->wacts));
}

void pd_worker_model_wake(struct pd_world *w, uint32_t node, uint64_t t) {
  pd_worker_node_t *n = &w->nodes[node];
  if (t != n->wake_at) return; /* superseded by an earlier wake */
  n->wake_at = UINT64_MAX;
  STEP(w, node, pd_wengine_expire(n->eng, w->now, &w->wacts));
}

void pd_worker_model_crash(struct pd_world *w, uint32_t node) {
  STEP(w, node, pd_wengine_crash(w->nodes[node].eng, w->now, &w->wacts));
}

void pd_worker_model_restart(struct pd_world *w, uint32_t node) {
  STEP(w, node, pd_wengine_restart(w->nodes[node].eng, w->now, &w->wacts));
}

/* ---------- wire rendering (W6.3, W6.4; shared with the socket mock: pd_worker_shared.c)
 * ---------- */

size_t pd_worker_model_render(struct pd_world *w, pd_worker_leg_t *leg, int kind, uint32_t arg,
                              char *buf, size_t cap) {
  pd_wire_leg_t r = {leg->rid, leg->is_stream, leg->has_logprob, leg->tokens, &leg->api};
  const pd_scenario_worker_t *spec = w->nodes[leg->worker].spec;
  if (spec->protocol != PD_PROTOCOL_VLLM) return pd_wire_render(&r, kind, arg, buf, cap);
  pd_wire_vllm_t v = {spec->name, spec->name, VLLM_SIDE_CHANNEL_PORT}; /* V1.5 */
  return pd_wire_render_vllm(&r, &v, kind, arg, buf, cap);
}
