/* The worker engine (pd_wengine.h): one SGLang-like worker's requests, S5.x. Prefill blocks
 * in bootstrap until its decode partner registers the room (bootstrap timeout, then 500), goes
 * through the waiting queue and a forward pass (pd_wengine_cap.c), transfers the KV, and only
 * then writes its response (stream mode: 200 head at once, body after the transfer); decode
 * waits in prealloc for capacity, tells prefill its room, waits for the KV (waiting timeout),
 * then streams tokens and [DONE]. Fault scripts from the scenario change each step. Every
 * leg's truth is reported as it is fixed. */
#include <assert.h>
#include <string.h>

#include "pd_wengine_int.h"
#include "pd_worker_shared.h"
#include "pd_worker_step.h"

/* ---------- actions, deadlines ---------- */

void pd_wact_buf_init(pd_wact_buf_t *b, const pd_alloc_t *alloc) {
  memset(b, 0, sizeof *b);
  b->alloc = alloc ? alloc : pd_alloc_default();
}
void pd_wact_buf_reset(pd_wact_buf_t *b) {
  b->n = 0;
  b->err = 0;
}
void pd_wact_buf_free(pd_wact_buf_t *b) {
  pd_free(b->alloc, b->v);
  b->v = NULL;
  b->n = b->cap = 0;
}

void pd_wengine_act(pd_wengine_t *e, pd_wact_buf_t *out, uint32_t kind, const pd_wengine_leg_t *l,
                    uint32_t a, uint64_t b, uint64_t c) {
  if (out->n == out->cap) {
    size_t cap = out->cap ? out->cap * 2 : 32;
    pd_wact_t *v = pd_realloc(out->alloc, out->v, cap * sizeof *v);
    if (!v) {
      out->err = e->err = PD_ERR_NOMEM;
      return;
    }
    out->v = v;
    out->cap = cap;
  }
  pd_wact_t *x = &out->v[out->n++];
  x->kind = kind;
  x->a = a;
  x->id = l ? l->id : 0;
  x->b = b;
  x->c = c;
  x->room = l ? l->rq.room : 0;
  x->fp = kind == PD_WACT_FAULT && l ? l->fp : NULL;
}

uint64_t pd_wengine_ms(const pd_wengine_t *e, uint64_t ms) {
  if (e->cfg.time_scale == 0.0 || e->cfg.time_scale == 1.0) return ms * 1000000ull;
  double ns = (double)ms * 1e6 * e->cfg.time_scale;
  return ns >= 9.2e18 ? (uint64_t)9.2e18 : ns <= 0 ? 0 : (uint64_t)ns;
}

int pd_wengine_timer_is_live(const pd_wengine_t *e, const pd_heap_item_t *it) {
  if (it->kind == WE_FORWARD_END) return 1; /* pd_wengine_forward_end checks its number */
  if (it->kind == WE_PIN_EXPIRY) return pd_wengine_pin_timer_is_live(e, it);
  const pd_wengine_leg_t *l = pd_map_get(&e->legs, it->b);
  if (it->kind == WE_NET_CUT) return l && !l->is_path_cut; /* whatever state it moved to */
  return l && l->gen == it->c;
}

static int keep_timer(void *ud, const pd_heap_item_t *it) { return pd_wengine_timer_is_live(ud, it); }

void pd_wengine_arm(pd_wengine_t *e, pd_wengine_leg_t *l, int kind, uint64_t at) {
  /* A moot timer (a timeout its leg got past, a leg that ended) would stay queued until its
   * deadline, 300 s by default: at a steady rate the queue would hold rate x timeout of them.
   * Dropping them whenever the queue has doubled keeps it within twice its live timers. */
  pd_heap_item_t it = {.t_ns = at, .kind = (uint32_t)kind};
  it.b = l ? l->id : 0;
  it.c = l ? l->gen : e->forward_no;
  pd_wengine_arm_item(e, &it);
}

void pd_wengine_arm_item(pd_wengine_t *e, const pd_heap_item_t *it) {
  if (pd_heap_len(&e->timers) >= e->timers_compact_at) {
    pd_heap_filter(&e->timers, keep_timer, e);
    e->timers_compact_at = 2 * pd_heap_len(&e->timers) + 1024;
  }
  if (pd_heap_push(&e->timers, it) < 0 && !e->err) e->err = PD_ERR_NOMEM;
}

void pd_wengine_set_state(pd_wengine_t *e, pd_wengine_leg_t *l, pd_worker_leg_state_t st,
                          pd_wact_buf_t *out) {
  if (l->st == st) return;
  l->st = st;
  pd_wengine_act(e, out, PD_WACT_STATE, l, (uint32_t)st, 0, 0);
}

static void fired(pd_wengine_t *e, pd_wengine_leg_t *l, pd_wact_buf_t *out) {
  pd_wengine_act(e, out, PD_WACT_FIRED, l, 0, 0, 0);
}

static int has_fault(const pd_wengine_leg_t *l, pd_fault_kind_t k) { return l->fault == (int)k; }

/* ---------- network faults: the path to the gateway is cut ---------- */

/* The cut strikes only while the exchange is still open: one the worker (or the gateway's
 * close) already ended has no path left to cut, and the fault did not fire. */
static void net_cut(pd_wengine_t *e, pd_wengine_leg_t *l, pd_wact_buf_t *out) {
  if (!l->is_conn_open || l->is_path_cut) return;
  l->is_conn_open = 0; /* what the worker writes from now on is lost */
  l->is_path_cut = 1;
  fired(e, l, out);
  pd_wengine_act(e, out, PD_WACT_NET, l,
                 has_fault(l, PD_FAULT_NET_RESET) ? PD_WENGINE_NET_RESET : PD_WENGINE_NET_LOST, 0, 0);
}

/* At arrival (slot taken): cut at once (ms 0), or arm the cut `ms` later; a cut after
 * `after_tokens` events waits for decode_token. */
static void net_arm(pd_wengine_t *e, pd_wengine_leg_t *l, uint64_t now, pd_wact_buf_t *out) {
  if (!pd_fault_is_net(l->fault) || !l->fp || l->fp->after_tokens) return;
  if (!l->fp->ms) net_cut(e, l, out);
  else pd_wengine_arm(e, l, WE_NET_CUT, now + pd_wengine_ms(e, l->fp->ms));
}

/* ---------- the end of a request ---------- */

static void room_forget(pd_wengine_t *e, pd_wengine_leg_t *l) {
  if (!l->is_in_rooms) return;
  if (pd_map_get(&e->rooms, l->rq.room) == l) pd_map_remove(&e->rooms, l->rq.room);
  l->is_in_rooms = 0;
}

static void token_forget(pd_wengine_t *e, uint64_t token) {
  pd_wengine_reg_t *r = pd_map_remove(&e->tokens, token);
  if (!r) return;
  if (r->is_pending && pd_map_get(&e->regs, r->room) == r) pd_map_remove(&e->regs, r->room);
  pd_free(e->alloc, r);
}

/* The worker is done with this request: capacity freed, room forgotten, truth fixed, the
 * leg forgotten. */
void pd_wengine_finish(pd_wengine_t *e, pd_wengine_leg_t *l, pd_truth_t truth, uint64_t now,
                   pd_wact_buf_t *out) {
  if (l->is_stalled_closed) truth = PD_TRUTH_STALLED; /* fixed when its client left */
  if (e->is_vllm) pd_wengine_vllm_finish(e, l, out);
  pd_wengine_release(e, l, out);
  room_forget(e, l);
  if (l->has_partner) { /* prefill: the link to its decode goes */
    pd_wengine_act(e, out, PD_WACT_UNPAIR, l, 0, l->partner, 0);
    token_forget(e, l->partner);
  } else if (l->is_connected && l->st != PD_WORKER_LEG_STREAM) {
    pd_wengine_act(e, out, PD_WACT_UNPAIR, l, 0, 0, 0); /* decode: before its KV came */
  }
  if (l->has_slot) pd_wengine_act(e, out, PD_WACT_SLOT, l, 0, 0, 0);
  l->st = PD_WORKER_LEG_DONE;
  pd_wengine_act(e, out, PD_WACT_STATE, l, PD_WORKER_LEG_DONE, 0, 0);
  pd_wengine_act(e, out, PD_WACT_DONE, l, (uint32_t)truth, 0, 0);
  pd_map_remove(&e->legs, l->id);
  pd_free(e->alloc, l);
  pd_wengine_schedule(e, now, out); /* what waited for that capacity */
}

static void send(pd_wengine_t *e, pd_wengine_leg_t *l, int kind, uint32_t arg, uint32_t parts,
                 pd_wact_buf_t *out) {
  if (l->is_conn_open) pd_wengine_act(e, out, PD_WACT_SEND, l, (uint32_t)kind, arg, parts);
}
static void head(pd_wengine_t *e, pd_wengine_leg_t *l, int status, pd_wact_buf_t *out) {
  if (l->is_conn_open)
    pd_wengine_act(e, out, PD_WACT_HEAD, l, (uint32_t)status,
                   (uint64_t)(l->rq.is_stream && status == 200), 0);
}
static void end(pd_wengine_t *e, pd_wengine_leg_t *l, pd_wengine_end_t how, pd_wact_buf_t *out) {
  if (l->is_conn_open) pd_wengine_act(e, out, PD_WACT_END, l, (uint32_t)how, 0, 0);
  l->is_conn_open = 0;
}

static uint32_t split_parts(const pd_wengine_t *e) {
  return e->spec->split_parts >= 2 ? e->spec->split_parts : 2;
}

/* An error answer: non-stream a status + JSON error body; stream (head already sent) an SSE
 * error event and [DONE] (W6.3). */
void pd_wengine_answer_error(pd_wengine_t *e, pd_wengine_leg_t *l, int status, uint64_t now,
                         pd_wact_buf_t *out) {
  if (l->rq.is_stream) {
    send(e, l, PD_WIRE_ERROR_EVENT, (uint32_t)status, 1, out);
    send(e, l, PD_WIRE_DONE_EVENT, 0, 1, out);
  } else {
    head(e, l, status, out);
    send(e, l, PD_WIRE_ERROR_BODY, (uint32_t)status, 1, out);
  }
  end(e, l, PD_WENGINE_END_CLEAN, out);
  pd_wengine_finish(e, l, PD_TRUTH_FAILED, now, out);
}

void pd_wengine_cut(pd_wengine_t *e, pd_wengine_leg_t *l, pd_wengine_end_t how, pd_truth_t t, uint64_t now,
                pd_wact_buf_t *out) {
  end(e, l, how, out);
  pd_wengine_finish(e, l, t, now, out);
}

/* A `status` fault's answer (or the 400 of a request too large for the pool). */
static void answer_status(pd_wengine_t *e, pd_wengine_leg_t *l, int status, uint64_t now,
                          pd_wact_buf_t *out) {
  pd_wengine_act(e, out, PD_WACT_STATUS, l, (uint32_t)status, 0, 0);
  head(e, l, status, out);
  send(e, l, PD_WIRE_ERROR_BODY, (uint32_t)status, 1, out);
  end(e, l, PD_WENGINE_END_CLEAN, out);
  pd_wengine_finish(e, l, pd_worker_status_is_healthy(status) ? PD_TRUTH_OK : PD_TRUTH_FAILED, now, out);
}

/* ---------- fault selection (pd_worker_shared.c) ---------- */

static void pick_fault(pd_wengine_t *e, pd_wengine_leg_t *l, pd_wact_buf_t *out) {
  pd_fault_choice_t pk = {-1, NULL, 0, 0};
  pd_traffic_view_t t = {e->cfg.tfaults, e->cfg.n_tfaults, l->rq.request,   e->role,
                         l->rq.leg_no,   e->cfg.worker_index, e->cfg.tf_owner};
  if (!l->rq.leg_no) t.request = PD_TRAFFIC_FAULT_ANY; /* unknown: no traffic fault */
  int tf = pd_worker_pick_fault(e->spec, ++e->received, e->cfg.fault_rate, &t, e->cfg.fault_rng,
                                &pk);
  l->fault = pk.fault;
  l->fp = pk.fp;
  l->lag_ms = pk.lag_ms;
  l->drip_ms = pk.drip_ms;
  uint64_t lag = l->lag_ms > UINT32_MAX ? UINT32_MAX : l->lag_ms;
  uint64_t drip = l->drip_ms > UINT32_MAX ? UINT32_MAX : l->drip_ms;
  pd_wengine_act(e, out, PD_WACT_FAULT, l, (uint32_t)(l->fault + 1), (uint64_t)(tf + 1),
                 lag << 32 | drip);
}

/* ---------- prefill: rooms, transfer, answer ---------- */

void pd_wengine_pair_with(pd_wengine_t *e, pd_wengine_leg_t *p, pd_wengine_reg_t *r, uint64_t now, pd_wact_buf_t *out) {
  if (r->is_pending && pd_map_get(&e->regs, r->room) == r) pd_map_remove(&e->regs, r->room);
  r->is_pending = 0;
  room_forget(e, p);
  p->has_partner = 1;
  p->partner = r->token;
  p->partner_flags = r->flags;
  pd_wengine_act(e, out, PD_WACT_PAIRED, p, 0, r->token, 0);
  pd_wengine_set_state(e, p, PD_WORKER_LEG_QUEUED, out);
  p->gen++; /* the bootstrap timeout is moot */
  pd_wqueue_push(&e->waiting, p);
  pd_wengine_schedule(e, now, out);
}

/* S2.14: the DP rank a prefill leg runs on: its body's routed_dp_rank, else its room's. */
static uint32_t leg_dp_rank(const pd_wengine_t *e, const pd_wengine_leg_t *p) {
  uint32_t dp = e->spec->dp_size ? e->spec->dp_size : 1;
  return p->rq.has_routed_rank ? p->rq.routed_rank : (uint32_t)(p->rq.room % dp);
}

uint32_t pd_wengine_leg_rank(const pd_wengine_t *e, const pd_wengine_leg_t *l) {
  if (e->ranks <= 1) return 0;
  return (uint32_t)((l->rq.has_routed_rank ? l->rq.routed_rank : l->rq.room) % e->ranks);
}

int pd_wengine_can_pair(const pd_wengine_t *e, const pd_wengine_leg_t *p, const pd_wengine_reg_t *r) {
  /* S2.14: decode registered on the rank it looked the room up on; another rank's leg of the
   * same room never hears of it (both wait for their timeouts, sglang #40731) */
  uint32_t dp = e->spec->dp_size ? e->spec->dp_size : 1;
  uint32_t looked = r->flags & PD_WENGINE_REG_HAS_RANK ? PD_WENGINE_REG_RANK(r->flags)
                                                       : (uint32_t)(r->room % dp);
  return p->st == PD_WORKER_LEG_BOOTSTRAP && p->rq.rooms_hash == r->hash &&
         looked == leg_dp_rank(e, p) && !has_fault(p, PD_FAULT_BOOTSTRAP_NEVER_SERVED);
}

static void prefill_register(pd_wengine_t *e, pd_wengine_leg_t *p, uint64_t now, pd_wact_buf_t *out) {
  if (has_fault(p, PD_FAULT_BOOTSTRAP_NEVER_SERVED)) fired(e, p, out);
  pd_wengine_leg_t *other = pd_map_get(&e->rooms, p->rq.room);
  if (other) e->collisions++;
  pd_wengine_reg_t *r = pd_map_get(&e->regs, p->rq.room);
  if (r && pd_wengine_can_pair(e, p, r)) {
    pd_wengine_pair_with(e, p, r, now, out);
    return;
  }
  if (!other && pd_map_put(&e->rooms, p->rq.room, p) == 0) p->is_in_rooms = 1;
}

void pd_wengine_forward_done(pd_wengine_t *e, pd_wengine_leg_t *p, uint64_t now, pd_wact_buf_t *out) {
  if (e->is_vllm) { /* no transfer during prefill (V1.3): decode reads later */
    pd_wengine_vllm_forward_done(e, p, now, out);
    return;
  }
  pd_wengine_set_state(e, p, PD_WORKER_LEG_FORWARD, out);
  p->is_committed = 1; /* the KV is written and moves to the paired decode: the commit */
  p->commit_at = now;
  pd_wengine_arm(e, p, WE_TRANSFER_DONE, now + pd_wengine_ms(e, e->spec->kv_ms));
}

int pd_wengine_ignores_abort(const pd_wengine_t *e, const pd_wengine_leg_t *l) {
  return e->spec->abort_after_commit_ignored != 0 && l->is_committed &&
         l->st == PD_WORKER_LEG_FORWARD;
}

static void transfer_done(pd_wengine_t *e, pd_wengine_leg_t *p, uint64_t now, pd_wact_buf_t *out) {
  if (p->is_partner_lost && pd_wengine_ignores_abort(e, p) && !p->is_orphaned) {
    /* abort_after_commit_ignored: no receiver collects the committed KV, and the engine does
     * not let go of it before its transfer timeout (dynamo PR #14507, TRT-LLM) */
    uint64_t until = p->commit_at + pd_wengine_ms(e, e->spec->kv_abort_timeout_ms);
    p->is_orphaned = 1;
    if (until > now) {
      pd_wengine_arm(e, p, WE_TRANSFER_DONE, until);
      return;
    }
  }
  int is_kv_failed = has_fault(p, PD_FAULT_KV_FAIL) ||
                     (p->partner_flags & PD_WENGINE_REG_KV_FAIL) || p->is_partner_lost ||
                     /* O5.2 (sglang #40606): no transfer across groups */
                     PD_WENGINE_REG_GROUP(p->partner_flags) != (e->spec->transfer_group & 0xffu);
  pd_wengine_release(e, p, out); /* S2.3: Success or Failed, the KV is released */
  if (has_fault(p, PD_FAULT_KV_FAIL)) fired(e, p, out);
  if (!p->has_partner || is_kv_failed) {
    if (p->has_partner && !p->is_partner_lost) /* KVPoll.Failed both sides */
      pd_wengine_act(e, out, PD_WACT_KV_SEND, p, 0, p->partner, 0);
    pd_wengine_answer_error(e, p, 500, now, out); /* S5.3 */
    return;
  }
  pd_wengine_act(e, out, PD_WACT_KV_SEND, p, 1, p->partner, 0);
  token_forget(e, p->partner);
  p->has_partner = 0;
  pd_wengine_set_state(e, p, PD_WORKER_LEG_LAG, out);
  if (has_fault(p, PD_FAULT_HANG_MID_STREAM)) {
    pd_wengine_set_state(e, p, PD_WORKER_LEG_HUNG, out);
    fired(e, p, out);
    return;
  }
  pd_wengine_arm(e, p, WE_RESPOND,
                 now + pd_wengine_ms(e, p->lag_ms + pd_worker_late_error_ms(p->fault, p->fp)));
}

static void prefill_respond(pd_wengine_t *e, pd_wengine_leg_t *p, uint64_t now, pd_wact_buf_t *out) {
  pd_worker_step_t step = pd_worker_respond_step(p->fault);
  if (step != PD_WORKER_STEP_GO) fired(e, p, out);
  if (step == PD_WORKER_STEP_RESET) {
    pd_wengine_cut(e, p, PD_WENGINE_END_RESET, PD_TRUTH_FAILED, now, out);
    return;
  }
  if (step == PD_WORKER_STEP_ERROR_500) {
    pd_wengine_answer_error(e, p, 500, now, out);
    return;
  }
  if (!p->rq.is_stream) head(e, p, 200, out);
  /* vLLM: the worker finished it; its bytes may still be cut on the way (a fault) */
  int kind = e->is_vllm ? PD_WIRE_VLLM_PREFILL_BODY : PD_WIRE_PREFILL_BODY;
  uint32_t arg = e->is_vllm ? pd_wengine_vllm_answer(e, p, now, out) : 0;
  if (step == PD_WORKER_STEP_READ_ERROR) {
    send(e, p, kind, e->is_vllm ? arg | PD_WIRE_CUT : 1, 1, out);
    pd_wengine_cut(e, p, PD_WENGINE_END_READ, PD_TRUTH_FAILED, now, out);
    return;
  }
  if (step == PD_WORKER_STEP_GO)
    send(e, p, kind, arg,
         p->rq.is_stream && e->spec->chunking == PD_CHUNK_SPLIT ? split_parts(e) : 1, out);
  end(e, p, PD_WENGINE_END_CLEAN, out);
  pd_wengine_finish(e, p, step == PD_WORKER_STEP_TRUNCATE ? PD_TRUTH_FAILED : PD_TRUTH_OK, now, out);
}

/* ---------- decode: admission, KV, tokens ---------- */

void pd_wengine_kv_arrived(pd_wengine_t *e, pd_wengine_leg_t *d, uint64_t now, pd_wact_buf_t *out) {
  pd_wengine_set_state(e, d, PD_WORKER_LEG_STREAM, out);
  d->gen++; /* the waiting timeout is moot */
  pd_wengine_arm(e, d, WE_TOKEN, now + pd_wengine_ms(e, e->spec->first_token_ms));
}

static void decode_connect(pd_wengine_t *e, pd_wengine_leg_t *d, uint64_t now, pd_wact_buf_t *out) {
  if (!d->rq.has_room && d->rq.is_direct) {
    pd_wengine_kv_arrived(e, d, now, out);
    return;
  }
  if (!d->rq.can_connect) return; /* nowhere to go: waits (S5.5) */
  d->is_connected = 1;
  uint32_t flags = (has_fault(d, PD_FAULT_KV_FAIL) ? PD_WENGINE_REG_KV_FAIL : 0) |
                   (e->spec->transfer_group & 0xffu) << 8;
  if (d->rq.has_prefill_rank && d->rq.prefill_rank <= PD_WENGINE_REG_TOPO_MAX_RANK)
    flags |= PD_WENGINE_REG_HAS_RANK | d->rq.prefill_rank << 17;
  pd_wengine_act(e, out, PD_WACT_CONNECT, d, flags, d->rq.rooms_hash, 0);
}

void pd_wengine_decode_admitted(pd_wengine_t *e, pd_wengine_leg_t *d, uint64_t now, pd_wact_buf_t *out) {
  if (e->is_vllm) {
    pd_wengine_vllm_decode_admitted(e, d, now, out);
    return;
  }
  pd_wengine_set_state(e, d, PD_WORKER_LEG_WAIT_KV, out);
  pd_wengine_arm(e, d, WE_WAIT_TIMEOUT, now + pd_wengine_ms(e, e->cfg.waiting_timeout_ms));
  if (has_fault(d, PD_FAULT_NEVER_CONNECT)) {
    fired(e, d, out);
    return;
  }
  decode_connect(e, d, now, out);
}

static uint64_t token_gap(const pd_wengine_t *e, const pd_wengine_leg_t *d) {
  return pd_wengine_ms(e, d->drip_ms ? d->drip_ms : e->spec->token_ms);
}

/* A mid-stream fault strikes at token k; returns 1 when it ended the leg. */
static int token_fault(pd_wengine_t *e, pd_wengine_leg_t *d, uint64_t now, pd_wact_buf_t *out) {
  pd_worker_step_t step = pd_worker_token_step(d->fault, d->fp, d->sent_tokens, d->rq.is_stream);
  if (step != PD_WORKER_STEP_GO) fired(e, d, out);
  switch (step) {
  case PD_WORKER_STEP_HANG: pd_wengine_set_state(e, d, PD_WORKER_LEG_HUNG, out); return 1;
  case PD_WORKER_STEP_RESET: pd_wengine_cut(e, d, PD_WENGINE_END_RESET, PD_TRUTH_FAILED, now, out); return 1;
  case PD_WORKER_STEP_READ_ERROR:
    pd_wengine_cut(e, d, PD_WENGINE_END_READ, PD_TRUTH_FAILED, now, out);
    return 1;
  case PD_WORKER_STEP_ERROR_500: pd_wengine_answer_error(e, d, 500, now, out); return 1;
  case PD_WORKER_STEP_STATUS: answer_status(e, d, d->fp->status, now, out); return 1;
  case PD_WORKER_STEP_TRUNCATE: pd_wengine_cut(e, d, PD_WENGINE_END_CLEAN, PD_TRUTH_FAILED, now, out); return 1;
  default: return 0;
  }
}

static void decode_token(pd_wengine_t *e, pd_wengine_leg_t *d, uint64_t now, pd_wact_buf_t *out) {
  uint32_t k = d->sent_tokens;
  if (pd_fault_is_net(d->fault) && d->fp && d->fp->after_tokens && k >= d->fp->after_tokens)
    net_cut(e, d, out); /* the worker goes on generating into the cut path */
  if (token_fault(e, d, now, out)) return;
  if (k >= d->rq.tokens) { /* all tokens out */
    if (d->rq.is_stream) /* a stated 0 (R-ZERO-TOKENS): one finish event, then [DONE] */
      send(e, d, PD_WIRE_DONE_EVENT, d->rq.tokens == 0, 1, out);
    else {
      head(e, d, 200, out);
      send(e, d, PD_WIRE_DECODE_BODY, 0, 1, out);
    }
    end(e, d, PD_WENGINE_END_CLEAN, out);
    pd_wengine_finish(e, d, PD_TRUTH_OK, now, out);
    return;
  }
  if (d->rq.is_stream) {
    pd_chunking_t c = e->spec->chunking;
    if (c == PD_CHUNK_SPLIT) {
      send(e, d, PD_WIRE_TOKEN, k << 2, split_parts(e), out);
    } else if (pd_worker_token_coalesces(c, k, d->rq.tokens, d->fault, d->fp)) {
      send(e, d, PD_WIRE_TOKEN, k << 2 | 3, 1, out);
      d->sent_tokens++;
    } else {
      send(e, d, PD_WIRE_TOKEN, k << 2, 1, out);
    }
  }
  d->sent_tokens++;
  /* one KV token per generated token (S2.5: decode's KV grows as it runs) */
  uint64_t held = (uint64_t)(d->rq.prompt_tokens ? d->rq.prompt_tokens : 1) + d->sent_tokens;
  pd_wengine_set_kv(e, d, pd_wengine_pages(e, held), out);
  pd_wengine_arm(e, d, WE_TOKEN, now + (d->sent_tokens >= d->rq.tokens ? 0 : token_gap(e, d)));
}

/* ---------- arrival, abort, deadlines ---------- */

void pd_wengine_open_leg(pd_wengine_t *e, pd_wengine_leg_t *l, uint64_t now, pd_wact_buf_t *out) {
  if (e->is_down) {
    pd_wengine_cut(e, l, PD_WENGINE_END_REFUSED, PD_TRUTH_NEVER, now, out);
    return;
  }
  pick_fault(e, l, out);
  switch (pd_worker_open_step(l->fault, l->fp, e->role, l->rq.is_stream)) {
  case PD_WORKER_STEP_REFUSE:
    fired(e, l, out);
    pd_wengine_cut(e, l, PD_WENGINE_END_REFUSED, PD_TRUTH_NEVER, now, out);
    return;
  case PD_WORKER_STEP_RESET:
    fired(e, l, out);
    pd_wengine_cut(e, l, PD_WENGINE_END_RESET, PD_TRUTH_FAILED, now, out);
    return;
  case PD_WORKER_STEP_STATUS:
    fired(e, l, out);
    l->is_rejected = 1;
    answer_status(e, l, l->fp->status, now, out);
    return;
  default: break;
  }
  l->rank = pd_wengine_leg_rank(e, l); /* R-CAP-RANK */
  if (pd_wengine_too_large(e, l)) { /* S2.5: it can never fit the pool */
    l->is_rejected = 1;
    pd_wengine_act(e, out, PD_WACT_REJECT, l, 400, 0, 0);
    answer_status(e, l, 400, now, out);
    return;
  }
  l->has_slot = 1;
  pd_wengine_act(e, out, PD_WACT_SLOT, l, 1, 0, 0);
  net_arm(e, l, now, out);
  if (has_fault(l, PD_FAULT_HANG_BEFORE_HEAD)) {
    pd_wengine_set_state(e, l, PD_WORKER_LEG_HUNG, out);
    fired(e, l, out);
    return;
  }
  if (l->rq.is_stream) head(e, l, 200, out); /* StreamingResponse: head at once (S5.3) */
  if (e->role == PD_ROLE_PREFILL) {
    if (has_fault(l, PD_FAULT_SSE_ERROR)) { /* S5.6 */
      fired(e, l, out);
      pd_wengine_answer_error(e, l, 500, now, out);
      return;
    }
    if (e->is_vllm) { /* source first: no partner to wait for (V1.3) */
      pd_wengine_set_state(e, l, PD_WORKER_LEG_QUEUED, out);
      pd_wqueue_push(&e->waiting, l);
      pd_wengine_schedule(e, now, out);
      return;
    }
    pd_wengine_set_state(e, l, PD_WORKER_LEG_BOOTSTRAP, out);
    pd_wengine_arm(e, l, WE_BOOTSTRAP_TIMEOUT, now + pd_wengine_ms(e, e->cfg.bootstrap_timeout_ms));
    prefill_register(e, l, now, out);
  } else {
    if (e->is_vllm) pd_wengine_vllm_decode_open(e, l, now);
    pd_wengine_set_state(e, l, PD_WORKER_LEG_QUEUED, out); /* prealloc queue */
    pd_wqueue_push(&e->prealloc, l);
    pd_wengine_schedule(e, now, out);
  }
}

/* /abort_request (S2.10): a request still queued, waiting on its partner or moving its KV
 * fails down the 500 path; one generating tokens ends with finish_reason abort. Either is
 * written only while its client is still there. */
void pd_wengine_abort_leg(pd_wengine_t *e, pd_wengine_leg_t *l, uint64_t now, pd_wact_buf_t *out) {
  pd_truth_t t = pd_worker_interrupted_truth(l->st, l->drip_ms);
  if (l->is_conn_open && l->st == PD_WORKER_LEG_STREAM) {
    if (!l->rq.is_stream) head(e, l, 200, out);
    send(e, l, l->rq.is_stream ? PD_WIRE_ABORT_EVENT : PD_WIRE_ABORT_BODY, 0, 1, out);
    end(e, l, PD_WENGINE_END_CLEAN, out);
  } else if (l->is_conn_open && l->st != PD_WORKER_LEG_HUNG) {
    if (l->rq.is_stream) {
      send(e, l, PD_WIRE_ERROR_EVENT, 500, 1, out);
      send(e, l, PD_WIRE_DONE_EVENT, 0, 1, out);
    } else {
      head(e, l, 500, out);
      send(e, l, PD_WIRE_ERROR_BODY, 500, 1, out);
    }
    end(e, l, PD_WENGINE_END_CLEAN, out);
  }
  pd_wengine_finish(e, l, t, now, out);
}

void pd_wengine_step_timer(pd_wengine_t *e, pd_wengine_leg_t *l, int kind, uint64_t now,
                           pd_wact_buf_t *out) {
  switch (kind) {
  case WE_BOOTSTRAP_TIMEOUT:
    if (l->st == PD_WORKER_LEG_BOOTSTRAP) pd_wengine_answer_error(e, l, 500, now, out); /* S5.4 */
    return;
  case WE_WAIT_TIMEOUT:
    if (l->st == PD_WORKER_LEG_WAIT_KV) pd_wengine_answer_error(e, l, 500, now, out); /* S5.5 */
    return;
  case WE_TRANSFER_DONE:
    if (l->st == PD_WORKER_LEG_FORWARD) transfer_done(e, l, now, out);
    return;
  case WE_RESPOND:
    if (l->st == PD_WORKER_LEG_LAG) prefill_respond(e, l, now, out);
    return;
  case WE_TOKEN:
    if (l->st == PD_WORKER_LEG_STREAM) decode_token(e, l, now, out);
    return;
  case WE_RECONNECT:
    if (l->st == PD_WORKER_LEG_WAIT_KV && !l->is_connected && !l->is_paired)
      decode_connect(e, l, now, out);
    return;
  case WE_NET_CUT: net_cut(e, l, out); return;
  default: pd_wengine_vllm_timer(e, l, kind, now, out); return;
  }
}
