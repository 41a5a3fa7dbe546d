/* SGLang-like worker models (S5.x): prefill blocks in bootstrap until its decode partner
 * connects to the room (bootstrap timeout, then 500), runs the forward pass and the KV
 * transfer, and only then writes its response (stream mode: 200 head at once, body after the
 * transfer); decode waits for the KV (waiting timeout), then streams tokens and [DONE].
 * Fault scripts from the scenario change each step. Every leg keeps its ground truth. */
#include <stdio.h>
#include <string.h>

#include "pd_world_int.h"
#include "pd_worker_shared.h"
#include "pd_worker_step.h"

#define MS_NS 1000000ull

static pd_worker_node_t *node_of(struct pd_world *w, const pd_worker_leg_t *leg) {
  return &w->nodes[leg->worker];
}

static void slot_take(struct pd_world *w, pd_worker_leg_t *leg) {
  if (leg->slot_taken) return;
  leg->slot_taken = 1;
  leg->t_slot_taken = w->now;
  node_of(w, leg)->live_slots++;
}

static void room_unregister(struct pd_world *w, pd_worker_leg_t *leg) {
  if (!leg->is_in_room_table) return;
  pd_map_t *m = leg->role == PD_ROLE_PREFILL ? &w->rooms : &w->droom;
  if (pd_map_get(m, leg->room) == leg) pd_map_remove(m, leg->room);
  leg->is_in_room_table = 0;
}

/* The worker is done with this request: slot freed, room forgotten, truth fixed. */
static void finish(struct pd_world *w, pd_worker_leg_t *leg, pd_truth_t truth) {
  if (leg->wstate == PD_WORKER_LEG_DONE) return;
  leg->wstate = PD_WORKER_LEG_DONE;
  leg->tgen++;
  if (leg->truth == PD_TRUTH_PENDING) leg->truth = truth;
  if (leg->slot_taken && !leg->is_slot_freed) {
    leg->is_slot_freed = 1;
    leg->t_slot_freed = w->now;
    node_of(w, leg)->live_slots--;
  }
  room_unregister(w, leg);
  if (leg->partner && leg->partner->partner == leg) leg->partner->partner = NULL;
  leg->partner = NULL;
  pd_world_leg_changed(w, leg);
}

static void send(struct pd_world *w, pd_worker_leg_t *leg, int kind, uint32_t arg) {
  if (leg->worker_conn_open) pd_world_to_gw(w, leg, kind, arg, 0);
}

/* One message as split_parts chunks ("chunking": "split"). */
static void send_split(struct pd_world *w, pd_worker_leg_t *leg, int kind, uint32_t arg) {
  uint32_t n = node_of(w, leg)->spec->split_parts;
  for (uint32_t i = 0; leg->worker_conn_open && i < (n >= 2 ? n : 2); i++)
    pd_world_to_gw_part(w, leg, kind, arg, i, n >= 2 ? n : 2);
}

/* An error answer: non-stream a status + JSON error body; stream (head already sent) an SSE
 * error event and [DONE] (W6.3). */
static void answer_error(struct pd_world *w, pd_worker_leg_t *leg, int status) {
  if (leg->is_stream) {
    send(w, leg, W2G_ERROR_EVENT, (uint32_t)status);
    send(w, leg, W2G_DONE_EVENT, 0);
  } else {
    send(w, leg, W2G_HEAD, (uint32_t)status);
    send(w, leg, W2G_ERROR_BODY, (uint32_t)status);
  }
  send(w, leg, W2G_END, 0);
  finish(w, leg, PD_TRUTH_FAILED);
}

static void uperr(struct pd_world *w, pd_worker_leg_t *leg, pd_upstream_error_t e, pd_truth_t t) {
  send(w, leg, W2G_UPERR, (uint32_t)e);
  leg->worker_conn_open = 0;
  finish(w, leg, t);
}

/* ---------- fault selection (shared with the socket mock: pd_worker_shared.c) ---------- */

static void pick_fault(struct pd_world *w, pd_worker_leg_t *leg) {
  pd_worker_node_t *n = node_of(w, leg);
  pd_fault_choice_t pk = {-1, leg->fp, leg->lag_ms, leg->drip_ms};
  pd_client_request_t *rq = pd_map_get(&w->reqs, leg->req_id);
  pd_traffic_view_t t = {w->s->tfaults,
                         w->s->n_tfaults,
                         rq ? (uint32_t)rq->id : PD_TRAFFIC_FAULT_ANY,
                         leg->role,
                         rq ? ++rq->legs_seen[leg->role] : 0,
                         leg->worker,
                         w->tf_owner};
  leg->tfault = pd_worker_pick_fault(n->spec, ++n->received, w->s->workload.fault_rate, &t,
                               &w->fault_rng, &pk);
  leg->fault = pk.fault;
  leg->fp = pk.fp;
  leg->lag_ms = pk.lag_ms;
  leg->drip_ms = pk.drip_ms;
}

static int has_fault(const pd_worker_leg_t *leg, pd_fault_kind_t k) { return leg->fault == (int)k; }

/* ---------- pairing and KV ---------- */

static void pair(struct pd_world *w, pd_worker_leg_t *p, pd_worker_leg_t *d) {
  p->partner = d;
  d->partner = p;
  room_unregister(w, p);
  room_unregister(w, d);
  p->wstate = PD_WORKER_LEG_FORWARD;
  pd_world_wtimer(w, p, WT_TRANSFER_DONE, (node_of(w, p)->spec->forward_ms +
                                           node_of(w, p)->spec->kv_ms) * MS_NS);
}

/* Decode connects to the bootstrap server of the prefill worker named in its body. */
static void decode_connect(struct pd_world *w, pd_worker_leg_t *d) {
  if (has_fault(d, PD_FAULT_NEVER_CONNECT)) { d->is_fault_fired = 1; return; }
  pd_worker_leg_t *p = pd_map_get(&w->rooms, d->room);
  if (p && p->wstate == PD_WORKER_LEG_BOOTSTRAP && p->rooms_hash == d->rooms_hash &&
      !has_fault(p, PD_FAULT_BOOTSTRAP_NEVER_SERVED) && !node_of(w, p)->is_down) {
    pair(w, p, d);
    return;
  }
  pd_worker_leg_t *other = pd_map_get(&w->droom, d->room);
  if (other && other != d) w->room_collisions++;
  if (!other && pd_map_put(&w->droom, d->room, d) == 0) d->is_in_room_table = 1;
}

static void prefill_register(struct pd_world *w, pd_worker_leg_t *p) {
  if (has_fault(p, PD_FAULT_BOOTSTRAP_NEVER_SERVED)) p->is_fault_fired = 1;
  pd_worker_leg_t *other = pd_map_get(&w->rooms, p->room);
  if (other && other != p) w->room_collisions++;
  pd_worker_leg_t *d = pd_map_get(&w->droom, p->room);
  if (d && d->wstate == PD_WORKER_LEG_WAIT_KV && !d->partner && d->rooms_hash == p->rooms_hash &&
      !has_fault(p, PD_FAULT_BOOTSTRAP_NEVER_SERVED)) {
    pair(w, p, d);
    return;
  }
  if (!other && pd_map_put(&w->rooms, p->room, p) == 0) p->is_in_room_table = 1;
}

static uint64_t token_gap_ns(struct pd_world *w, const pd_worker_leg_t *d) {
  return (d->drip_ms ? d->drip_ms : node_of(w, d)->spec->token_ms) * MS_NS;
}

static void transfer_done(struct pd_world *w, pd_worker_leg_t *p) {
  pd_worker_leg_t *d = p->partner;
  if (!d || d->wstate != PD_WORKER_LEG_WAIT_KV || has_fault(p, PD_FAULT_KV_FAIL) ||
      has_fault(d, PD_FAULT_KV_FAIL)) {
    p->is_fault_fired |= has_fault(p, PD_FAULT_KV_FAIL);
    if (d) d->is_fault_fired |= has_fault(d, PD_FAULT_KV_FAIL);
    if (d && d->wstate == PD_WORKER_LEG_WAIT_KV)
      answer_error(w, d, 500);                                  /* KVPoll.Failed both sides */
    answer_error(w, p, 500);                                    /* S5.3 */
    return;
  }
  d->wstate = PD_WORKER_LEG_STREAM;
  pd_world_wtimer(w, d, WT_TOKEN, node_of(w, d)->spec->first_token_ms * MS_NS);
  p->wstate = PD_WORKER_LEG_LAG;
  if (has_fault(p, PD_FAULT_HANG_MID_STREAM)) {
    p->wstate = PD_WORKER_LEG_HUNG;
    p->is_fault_fired = 1;
    return;
  }
  pd_world_wtimer(w, p, WT_RESPOND, (p->lag_ms + pd_worker_late_error_ms(p->fault, p->fp)) * MS_NS);
}

static void prefill_respond(struct pd_world *w, pd_worker_leg_t *p) {
  pd_worker_step_t step = pd_worker_respond_step(p->fault);
  p->is_fault_fired |= step != PD_WORKER_STEP_GO;
  if (step == PD_WORKER_STEP_RESET) { uperr(w, p, PD_UPSTREAM_ERROR_RESET, PD_TRUTH_FAILED); return; }
  if (step == PD_WORKER_STEP_ERROR_500) { answer_error(w, p, 500); return; }
  if (!p->is_stream) send(w, p, W2G_HEAD, 200);
  if (step == PD_WORKER_STEP_READ_ERROR) {
    send(w, p, W2G_PREFILL_BODY, 1);
    uperr(w, p, PD_UPSTREAM_ERROR_READ, PD_TRUTH_FAILED);
    return;
  }
  if (step == PD_WORKER_STEP_GO && p->is_stream && node_of(w, p)->spec->chunking == PD_CHUNK_SPLIT)
    send_split(w, p, W2G_PREFILL_BODY, 0); /* the prefill's event and [DONE], in pieces */
  else if (step == PD_WORKER_STEP_GO)
    send(w, p, W2G_PREFILL_BODY, 0);
  send(w, p, W2G_END, 0);
  finish(w, p, step == PD_WORKER_STEP_TRUNCATE ? PD_TRUTH_FAILED : PD_TRUTH_OK);
}

/* A `status` fault's answer: the status head, SGLang's JSON error body, the end. */
static void answer_status(struct pd_world *w, pd_worker_leg_t *leg) {
  leg->is_fault_fired = 1;
  leg->injected_status = leg->fp->status;
  send(w, leg, W2G_HEAD, (uint32_t)leg->fp->status);
  send(w, leg, W2G_ERROR_BODY, (uint32_t)leg->fp->status);
  send(w, leg, W2G_END, 0);
  finish(w, leg, pd_worker_status_is_healthy(leg->fp->status) ? PD_TRUTH_OK : PD_TRUTH_FAILED);
}

static void decode_token(struct pd_world *w, pd_worker_leg_t *d) {
  uint32_t k = d->sent_tokens;
  pd_worker_step_t step = pd_worker_token_step(d->fault, d->fp, k, d->is_stream);
  if (d->fault >= 0 && k >= (d->fp ? d->fp->after_tokens : 0))
    d->is_fault_fired = step != PD_WORKER_STEP_GO;
  switch (step) {
  case PD_WORKER_STEP_HANG: d->wstate = PD_WORKER_LEG_HUNG; return;
  case PD_WORKER_STEP_RESET: uperr(w, d, PD_UPSTREAM_ERROR_RESET, PD_TRUTH_FAILED); return;
  case PD_WORKER_STEP_READ_ERROR: uperr(w, d, PD_UPSTREAM_ERROR_READ, PD_TRUTH_FAILED); return;
  case PD_WORKER_STEP_ERROR_500: answer_error(w, d, 500); return;
  case PD_WORKER_STEP_TRUNCATE:
    send(w, d, W2G_END, 0);
    finish(w, d, PD_TRUTH_FAILED);
    return;
  case PD_WORKER_STEP_STATUS: answer_status(w, d); return; /* deferred: after the KV */
  default: break;
  }
  if (k >= d->tokens) { /* all tokens out */
    if (d->is_stream) send(w, d, W2G_DONE_EVENT, 0);
    else { send(w, d, W2G_HEAD, 200); send(w, d, W2G_DECODE_BODY, 0); }
    send(w, d, W2G_END, 0);
    finish(w, d, PD_TRUTH_OK);
    return;
  }
  if (d->is_stream) {
    pd_chunking_t c = node_of(w, d)->spec->chunking;
    if (c == PD_CHUNK_SPLIT) {
      send_split(w, d, W2G_TOKEN, k << 2);
    } else if (pd_worker_token_coalesces(c, k, d->tokens, d->fault, d->fp)) {
      send(w, d, W2G_TOKEN, k << 2 | 3);
      d->sent_tokens++;
    } else {
      send(w, d, W2G_TOKEN, k << 2);
    }
  }
  d->sent_tokens++;
  pd_world_wtimer(w, d, WT_TOKEN, d->sent_tokens >= d->tokens ? 0 : token_gap_ns(w, d));
}

/* ---------- entry points ---------- */

static void open_leg(struct pd_world *w, pd_worker_leg_t *leg);
static pd_truth_t interrupted_truth(const pd_worker_leg_t *leg);

void pd_worker_model_on_open(struct pd_world *w, pd_worker_leg_t *leg) {
  open_leg(w, leg);
  if (leg->is_abort_early && leg->wstate != PD_WORKER_LEG_DONE)
    finish(w, leg, interrupted_truth(leg));
}

static void open_leg(struct pd_world *w, pd_worker_leg_t *leg) {
  pd_worker_node_t *n = node_of(w, leg);
  leg->worker_conn_open = 1;
  leg->truth = PD_TRUTH_PENDING;
  if (n->is_down) { uperr(w, leg, PD_UPSTREAM_ERROR_CONNECT, PD_TRUTH_NEVER); return; }
  pick_fault(w, leg);
  switch (pd_worker_open_step(leg->fault, leg->fp, leg->role, leg->is_stream)) {
  case PD_WORKER_STEP_REFUSE:
    leg->is_fault_fired = 1;
    uperr(w, leg, PD_UPSTREAM_ERROR_CONNECT, PD_TRUTH_NEVER);
    return;
  case PD_WORKER_STEP_RESET:
    leg->is_fault_fired = 1;
    uperr(w, leg, PD_UPSTREAM_ERROR_RESET, PD_TRUTH_FAILED);
    return;
  case PD_WORKER_STEP_STATUS: answer_status(w, leg); return;
  default: break;
  }
  slot_take(w, leg);
  if (has_fault(leg, PD_FAULT_HANG_BEFORE_HEAD)) {
    leg->wstate = PD_WORKER_LEG_HUNG;
    leg->is_fault_fired = 1;
    return;
  }
  if (leg->is_stream) send(w, leg, W2G_HEAD, 200); /* StreamingResponse: head at once (S5.3) */
  if (leg->role == PD_ROLE_PREFILL) {
    if (has_fault(leg, PD_FAULT_SSE_ERROR)) { /* S5.6 */
      leg->is_fault_fired = 1;
      answer_error(w, leg, 500);
      return;
    }
    leg->wstate = PD_WORKER_LEG_BOOTSTRAP;
    pd_world_wtimer(w, leg, WT_BOOTSTRAP_TIMEOUT, w->s->config.bootstrap_timeout_ms * MS_NS);
    prefill_register(w, leg);
  } else {
    leg->wstate = PD_WORKER_LEG_WAIT_KV;
    pd_world_wtimer(w, leg, WT_WAIT_TIMEOUT, w->s->config.waiting_timeout_ms * MS_NS);
    decode_connect(w, leg);
  }
}

static pd_truth_t interrupted_truth(const pd_worker_leg_t *leg) {
  return pd_worker_interrupted_truth(leg->wstate, leg->drip_ms);
}

void pd_worker_model_on_close(struct pd_world *w, pd_worker_leg_t *leg) {
  leg->worker_conn_open = 0;
  if (leg->wstate == PD_WORKER_LEG_DONE) return;
  if (leg->wstate == PD_WORKER_LEG_BOOTSTRAP) { /* still queued in bootstrap: a disconnect does not
                                        remove it; only /abort_request or the timeout does */
    leg->truth = PD_TRUTH_STALLED;
    return;
  }
  finish(w, leg, interrupted_truth(leg)); /* SGLang aborts a request whose client left */
}

void pd_worker_model_on_abort(struct pd_world *w, pd_worker_leg_t *leg) {
  leg->aborts++;
  if (leg->wstate == PD_WORKER_LEG_NEW) { /* the abort overtook its request: remember it, as the */
    leg->is_abort_early = 1;   /* socket mock remembers aborted rids (Q7) */
    return;
  }
  if (leg->wstate == PD_WORKER_LEG_DONE) return;
  finish(w, leg, interrupted_truth(leg));
}

void pd_worker_model_on_timer(struct pd_world *w, pd_worker_leg_t *leg, int kind) {
  if (leg->wstate == PD_WORKER_LEG_DONE) return;
  switch (kind) {
  case WT_BOOTSTRAP_TIMEOUT:
    if (leg->wstate == PD_WORKER_LEG_BOOTSTRAP) answer_error(w, leg, 500); /* S5.4 */
    return;
  case WT_WAIT_TIMEOUT:
    if (leg->wstate == PD_WORKER_LEG_WAIT_KV) answer_error(w, leg, 500); /* S5.5 */
    return;
  case WT_TRANSFER_DONE:
    if (leg->wstate == PD_WORKER_LEG_FORWARD) transfer_done(w, leg);
    return;
  case WT_RESPOND:
    if (leg->wstate == PD_WORKER_LEG_LAG) prefill_respond(w, leg);
    return;
  case WT_TOKEN:
    if (leg->wstate == PD_WORKER_LEG_STREAM) decode_token(w, leg);
    return;
  default: return;
  }
}

void pd_worker_model_crash(struct pd_world *w, uint32_t node) {
  /* every leg on the node fails with a reset (requests retire after the step, so the walk
   * sees each leg once) */
  void *v;
  for (size_t slot = 0; pd_map_next(&w->legs, &slot, NULL, &v);) {
    pd_worker_leg_t *leg = v;
    if (!pd_world_leg_crash_struck(leg, node)) continue;
    if (leg->worker_conn_open) uperr(w, leg, PD_UPSTREAM_ERROR_RESET, PD_TRUTH_FAILED);
    else finish(w, leg, PD_TRUTH_FAILED);
  }
}

/* ---------- wire rendering (W6.3, W6.4; shared with the socket mock: pd_worker_shared.c)
 * ---------- */

size_t pd_worker_model_render(struct pd_world *w, pd_worker_leg_t *leg, int kind, uint32_t arg,
                              char *buf, size_t cap) {
  (void)w;
  pd_wire_leg_t r = {leg->rid, leg->is_stream, leg->has_logprob, leg->tokens};
  return pd_wire_render(&r, kind, arg, buf, cap);
}
