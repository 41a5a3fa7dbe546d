/* The worker model of sim/pd_world_worker.c on real sockets: the same states, fault
 * picks, transitions and bytes, with HTTP output (pd_mock_output_*) instead of scheduled messages
 * and the bootstrap rendezvous over TCP (pd_bootstrap.c) instead of a shared room table. Keep the
 * two in step; docs/mock.md lists what real sockets change. Everything runs under m->mu. */
#include <stdio.h>
#include <string.h>

#include "pd_mock_int.h"
#include "pd_worker_step.h"

static int has_fault(const pd_mock_leg_t *leg, pd_fault_kind_t k) { return leg->fault == (int)k; }

static uint64_t ms_ns(const pd_mock_t *m, uint64_t ms) { return pd_mock_scaled_ns(m, ms); }

static void slot_take(pd_mock_t *m, pd_mock_leg_t *leg) {
  if (leg->slot_taken) return;
  leg->slot_taken = 1;
  m->live_slots++;
  pd_mock_log(m, "slot_taken", leg);
}

/* The worker is done with this request: slot freed, room forgotten, truth fixed, bootstrap
 * connection closed (the partner sees it as its peer leaving). */
static void finish(pd_mock_t *m, pd_mock_leg_t *leg, pd_truth_t truth) {
  if (leg->wstate == PD_WORKER_LEG_DONE) return;
  leg->wstate = PD_WORKER_LEG_DONE;
  leg->tgen++;
  if (leg->truth == PD_TRUTH_PENDING) leg->truth = truth;
  if (leg->slot_taken) {
    m->live_slots--;
    pd_mock_log_str(m, "slot_freed", leg, "truth", pd_mock_log_truth(leg->truth));
  }
  leg->room_seq = 0;
  if (leg->boot >= 0) pd_mock_bootstrap_close(m, leg->boot);
  leg->boot = -1;
}

/* An error answer: non-stream a status + JSON error body; stream (head already sent) an SSE
 * error event and [DONE] (W6.3). */
static void answer_error(pd_mock_t *m, pd_mock_leg_t *leg, int status) {
  if (leg->is_stream) {
    pd_mock_output_render(m, leg, PD_WIRE_ERROR_EVENT, (uint32_t)status);
    pd_mock_output_render(m, leg, PD_WIRE_DONE_EVENT, 0);
  } else {
    pd_mock_output_head(m, leg, status, 0);
    pd_mock_output_render(m, leg, PD_WIRE_ERROR_BODY, (uint32_t)status);
  }
  pd_mock_output_end(m, leg, PD_MOCK_OUTPUT_END_CLEAN);
  finish(m, leg, PD_TRUTH_FAILED);
}

static void uperr(pd_mock_t *m, pd_mock_leg_t *leg, pd_upstream_error_t e, pd_truth_t t) {
  pd_mock_output_end(m, leg, e == PD_UPSTREAM_ERROR_RESET ? PD_MOCK_OUTPUT_END_RESET
                    : e == PD_UPSTREAM_ERROR_READ ? PD_MOCK_OUTPUT_END_READ
                                         : PD_MOCK_OUTPUT_END_REFUSED);
  finish(m, leg, t);
}

static void pick_fault(pd_mock_t *m, pd_mock_leg_t *leg) {
  pd_fault_choice_t pk = {-1, leg->fp, leg->lag_ms, leg->drip_ms};
  pd_traffic_view_t t = {m->tfaults, m->cfg.n_tfaults, leg->req_index, m->cfg.role, 0,
                     m->cfg.worker_index, m->ledger.owner};
  if (m->cfg.n_tfaults) t.leg_no = pd_mock_ledger_next_leg(&m->ledger, leg->req_index, m->cfg.role);
  if (!t.leg_no) t.request = PD_TRAFFIC_FAULT_ANY; /* unknown request: no traffic fault */
  int tf =
      pd_worker_pick_fault(&m->worker, ++m->received, m->cfg.fault_rate, &t, &m->fault_rng, &pk);
  leg->fault = pk.fault;
  leg->fp = pk.fp;
  leg->lag_ms = pk.lag_ms;
  leg->drip_ms = pk.drip_ms;
  if (leg->lag_ms)
    pd_mock_log_str(m, "fault", leg, "kind", pd_fault_kind_name(PD_FAULT_PREFILL_LAG));
  if (leg->drip_ms)
    pd_mock_log_str(m, "fault", leg, "kind", pd_fault_kind_name(PD_FAULT_SLOW_DRIP));
  if (leg->fault >= 0)
    pd_mock_log_str(m, "fault", leg, "kind", pd_fault_kind_name((pd_fault_kind_t)leg->fault));
  if (tf >= 0) pd_mock_log_int(m, "traffic_fault", leg, "index", tf);
}

/* ---------- pairing and KV ---------- */

/* The prefill leg waiting in bootstrap for a room (the first registered), or NULL. */
static pd_mock_leg_t *room_prefill(pd_mock_t *m, uint64_t room) {
  pd_mock_leg_t *best = NULL;
  for (uint32_t i = 0; i < m->n_live; i++) {
    pd_mock_leg_t *l = m->live[i];
    if (l->room_seq && l->room == room && (!best || l->room_seq < best->room_seq)) best = l;
  }
  return best;
}

static void pair(pd_mock_t *m, pd_mock_leg_t *p, int bc) {
  pd_mock_bootstrap_conn_t *b = pd_mock_bootstrap_get(m, bc);
  b->state = BOOTSTRAP_CONN_PAIRED;
  b->leg = p;
  p->boot = bc;
  p->room_seq = 0;
  p->wstate = PD_WORKER_LEG_FORWARD;
  pd_mock_timer(m, p, MT_TRANSFER_DONE, ms_ns(m, m->worker.forward_ms + m->worker.kv_ms));
  pd_mock_bootstrap_send(m, bc, "PAIR",
                         p->room); /* a failure only unpairs: transfer_done sees it */
}

/* Prefill: a decode registered a room on our bootstrap server. */
void pd_mock_model_registered(pd_mock_t *m, int bc) {
  pd_mock_bootstrap_conn_t *b = pd_mock_bootstrap_get(m, bc);
  pd_mock_leg_t *p = room_prefill(m, b->room);
  pd_mock_log_room(m, "room_registered", p, b->room);
  if (p && p->wstate == PD_WORKER_LEG_BOOTSTRAP && p->rooms_hash == b->hash &&
      !has_fault(p, PD_FAULT_BOOTSTRAP_NEVER_SERVED)) {
    pair(m, p, bc);
    return;
  }
  /* the first decode to register a room keeps it (a second one never pairs: a collision) */
  b->state = pd_mock_bootstrap_find_registered(m, b->room) >= 0 ? BOOTSTRAP_CONN_IGNORED
                                                                : BOOTSTRAP_CONN_REGISTERED;
  b->seq = ++m->next_seq;
  if (b->state == BOOTSTRAP_CONN_IGNORED) pd_mock_log_room(m, "room_collision", NULL, b->room);
}

static void prefill_register(pd_mock_t *m, pd_mock_leg_t *p) {
  pd_mock_leg_t *other = room_prefill(m, p->room);
  int bc = pd_mock_bootstrap_find_registered(m, p->room);
  if (bc >= 0 && pd_mock_bootstrap_get(m, bc)->hash == p->rooms_hash &&
      !has_fault(p, PD_FAULT_BOOTSTRAP_NEVER_SERVED)) {
    pair(m, p, bc);
    return;
  }
  if (!other) p->room_seq = ++m->next_seq;
  else if (p->has_room) pd_mock_log(m, "room_collision", p); /* another request holds it */
}

static uint64_t token_gap_ns(const pd_mock_t *m, const pd_mock_leg_t *d) {
  return ms_ns(m, d->drip_ms ? d->drip_ms : m->worker.token_ms);
}

static void kv_arrived(pd_mock_t *m, pd_mock_leg_t *d) {
  d->wstate = PD_WORKER_LEG_STREAM;
  pd_mock_timer(m, d, MT_TOKEN, ms_ns(m, m->worker.first_token_ms));
}

static void transfer_done(pd_mock_t *m, pd_mock_leg_t *p) {
  pd_mock_bootstrap_conn_t *b = p->boot >= 0 ? pd_mock_bootstrap_get(m, p->boot) : NULL;
  int is_kv_failed =
      has_fault(p, PD_FAULT_KV_FAIL) || (b && (b->flags & PD_MOCK_BOOTSTRAP_F_KV_FAIL));
  if (!b || is_kv_failed) {
    if (b) pd_mock_bootstrap_send(m, p->boot, "FAIL", p->room); /* KVPoll.Failed both sides */
    answer_error(m, p, 500);                           /* S5.3 */
    return;
  }
  if (pd_mock_bootstrap_send(m, p->boot, "KV", p->room) < 0) { /* decode left meanwhile */
    answer_error(m, p, 500);
    return;
  }
  if (p->boot >= 0) pd_mock_bootstrap_close(m, p->boot);
  p->boot = -1;
  p->wstate = PD_WORKER_LEG_LAG;
  if (has_fault(p, PD_FAULT_HANG_MID_STREAM)) { p->wstate = PD_WORKER_LEG_HUNG; return; }
  pd_mock_timer(m, p, MT_RESPOND, ms_ns(m, p->lag_ms + pd_worker_late_error_ms(p->fault, p->fp)));
}

static void prefill_respond(pd_mock_t *m, pd_mock_leg_t *p) {
  pd_worker_step_t step = pd_worker_respond_step(p->fault);
  if (step == PD_WORKER_STEP_RESET) { uperr(m, p, PD_UPSTREAM_ERROR_RESET, PD_TRUTH_FAILED); return; }
  if (step == PD_WORKER_STEP_ERROR_500) { answer_error(m, p, 500); return; }
  if (!p->is_stream) pd_mock_output_head(m, p, 200, 0);
  if (step == PD_WORKER_STEP_READ_ERROR) {
    pd_mock_output_render(m, p, PD_WIRE_PREFILL_BODY, 1);
    uperr(m, p, PD_UPSTREAM_ERROR_READ, PD_TRUTH_FAILED);
    return;
  }
  if (step == PD_WORKER_STEP_GO) pd_mock_output_render(m, p, PD_WIRE_PREFILL_BODY, 0);
  pd_mock_output_end(m, p, PD_MOCK_OUTPUT_END_CLEAN);
  finish(m, p, step == PD_WORKER_STEP_TRUNCATE ? PD_TRUTH_FAILED : PD_TRUTH_OK);
}

/* A `status` fault's answer: the status head, SGLang's JSON error body, the end. */
static void answer_status(pd_mock_t *m, pd_mock_leg_t *leg) {
  pd_mock_output_head(m, leg, leg->fp->status, 0);
  pd_mock_output_render(m, leg, PD_WIRE_ERROR_BODY, (uint32_t)leg->fp->status);
  pd_mock_output_end(m, leg, PD_MOCK_OUTPUT_END_CLEAN);
  finish(m, leg, pd_worker_status_is_healthy(leg->fp->status) ? PD_TRUTH_OK : PD_TRUTH_FAILED);
}

/* A mid-stream fault strikes at token k; returns 1 when it ended the token loop. */
static int token_fault(pd_mock_t *m, pd_mock_leg_t *d) {
  switch (pd_worker_token_step(d->fault, d->fp, d->sent_tokens, d->is_stream)) {
  case PD_WORKER_STEP_HANG: d->wstate = PD_WORKER_LEG_HUNG; return 1;
  case PD_WORKER_STEP_RESET: uperr(m, d, PD_UPSTREAM_ERROR_RESET, PD_TRUTH_FAILED); return 1;
  case PD_WORKER_STEP_READ_ERROR: uperr(m, d, PD_UPSTREAM_ERROR_READ, PD_TRUTH_FAILED); return 1;
  case PD_WORKER_STEP_ERROR_500: answer_error(m, d, 500); return 1;
  case PD_WORKER_STEP_STATUS: answer_status(m, d); return 1; /* deferred: after the KV */
  case PD_WORKER_STEP_TRUNCATE:
    pd_mock_output_end(m, d, PD_MOCK_OUTPUT_END_CLEAN);
    finish(m, d, PD_TRUTH_FAILED);
    return 1;
  default: return 0;
  }
}

static void decode_token(pd_mock_t *m, pd_mock_leg_t *d) {
  uint32_t k = d->sent_tokens;
  if (token_fault(m, d)) return;
  if (k >= d->tokens) { /* all tokens out */
    if (d->is_stream) pd_mock_output_render(m, d, PD_WIRE_DONE_EVENT, 0);
    else { pd_mock_output_head(m, d, 200, 0); pd_mock_output_render(m, d, PD_WIRE_DECODE_BODY, 0); }
    pd_mock_output_end(m, d, PD_MOCK_OUTPUT_END_CLEAN);
    finish(m, d, PD_TRUTH_OK);
    return;
  }
  if (d->is_stream) {
    pd_chunking_t c = m->worker.chunking;
    if (c == PD_CHUNK_SPLIT) {
      pd_mock_output_render(m, d, PD_WIRE_TOKEN, k << 2 | 1);
      pd_mock_output_render(m, d, PD_WIRE_TOKEN, k << 2 | 2);
    } else if (pd_worker_token_coalesces(c, k, d->tokens, d->fault, d->fp)) {
      pd_mock_output_render(m, d, PD_WIRE_TOKEN, k << 2 | 3);
      d->sent_tokens++;
    } else {
      pd_mock_output_render(m, d, PD_WIRE_TOKEN, k << 2);
    }
  }
  d->sent_tokens++;
  pd_mock_timer(m, d, MT_TOKEN, d->sent_tokens >= d->tokens ? 0 : token_gap_ns(m, d));
}

/* Decode connects to the bootstrap server named in its body. */
static void decode_connect(pd_mock_t *m, pd_mock_leg_t *d) {
  if (has_fault(d, PD_FAULT_NEVER_CONNECT)) return;
  if (!d->has_room && m->cfg.is_direct) { kv_arrived(m, d); return; }
  if (!d->boot_host[0] || d->boot_port <= 0) return; /* nowhere to go: waits (S5.5) */
  pd_mock_bootstrap_connect(m, d);
}

void pd_mock_model_kv(pd_mock_t *m, pd_mock_leg_t *d, int is_ok) {
  if (d->wstate != PD_WORKER_LEG_WAIT_KV) return;
  if (d->boot >= 0) pd_mock_bootstrap_close(m, d->boot);
  d->boot = -1;
  if (is_ok) kv_arrived(m, d);
  else answer_error(m, d, 500); /* KVPoll.Failed */
  pd_mock_leg_del_if_unused(m, d);
}

void pd_mock_model_boot_lost(pd_mock_t *m, pd_mock_leg_t *d) {
  d->boot = -1;
  if (d->wstate == PD_WORKER_LEG_WAIT_KV && !d->is_paired)
    pd_mock_timer(m, d, MT_RECONNECT, (uint64_t)PD_MOCK_BOOT_RETRY_MS * 1000000ull);
}

/* ---------- entry points ---------- */

/* The fault decides before anything else; 1 when the request is already answered. */
static int open_fault(pd_mock_t *m, pd_mock_leg_t *leg) {
  switch (pd_worker_open_step(leg->fault, leg->fp, m->cfg.role, leg->is_stream)) {
  case PD_WORKER_STEP_REFUSE: uperr(m, leg, PD_UPSTREAM_ERROR_CONNECT, PD_TRUTH_NEVER); return 1;
  case PD_WORKER_STEP_RESET: uperr(m, leg, PD_UPSTREAM_ERROR_RESET, PD_TRUTH_FAILED); return 1;
  case PD_WORKER_STEP_STATUS: answer_status(m, leg); return 1;
  default: return 0;
  }
}

void pd_mock_model_open(pd_mock_t *m, pd_mock_leg_t *leg) {
  leg->truth = PD_TRUTH_PENDING;
  leg->boot = -1;
  if (m->is_down) { uperr(m, leg, PD_UPSTREAM_ERROR_CONNECT, PD_TRUTH_NEVER); return; }
  pick_fault(m, leg);
  if (open_fault(m, leg)) return;
  slot_take(m, leg);
  if (has_fault(leg, PD_FAULT_HANG_BEFORE_HEAD)) { leg->wstate = PD_WORKER_LEG_HUNG; return; }
  if (leg->is_stream)
    pd_mock_output_head(m, leg, 200, 1); /* StreamingResponse: head at once (S5.3) */
  if (m->cfg.role == PD_ROLE_PREFILL) {
    if (has_fault(leg, PD_FAULT_SSE_ERROR)) { answer_error(m, leg, 500); return; } /* S5.6 */
    leg->wstate = PD_WORKER_LEG_BOOTSTRAP;
    pd_mock_timer(m, leg, MT_BOOTSTRAP_TIMEOUT, ms_ns(m, m->cfg.bootstrap_timeout_ms));
    prefill_register(m, leg);
  } else {
    leg->wstate = PD_WORKER_LEG_WAIT_KV;
    pd_mock_timer(m, leg, MT_WAIT_TIMEOUT, ms_ns(m, m->cfg.waiting_timeout_ms));
    decode_connect(m, leg);
  }
}

static pd_truth_t interrupted_truth(const pd_mock_leg_t *leg) {
  return pd_worker_interrupted_truth(leg->wstate, leg->drip_ms);
}

void pd_mock_model_close(pd_mock_t *m, pd_mock_leg_t *leg) {
  if (leg->wstate ==
      PD_WORKER_LEG_NEW) {      /* held back (open_delay_ms): the close follows its request */
    leg->is_closed_early = 1;   /* on the same connection, so it applies after MT_OPEN */
    return;
  }
  if (leg->wstate == PD_WORKER_LEG_DONE) return;
  if (leg->wstate == PD_WORKER_LEG_BOOTSTRAP) { /* still queued in bootstrap: a disconnect does not
                                        remove it; only /abort_request or the timeout does */
    leg->truth = PD_TRUTH_STALLED;
    return;
  }
  finish(m, leg, interrupted_truth(leg)); /* SGLang aborts a request whose client left */
}

void pd_mock_model_abort(pd_mock_t *m, pd_mock_leg_t *leg) {
  leg->aborts++;
  if (leg->wstate == PD_WORKER_LEG_DONE) return;
  if (pd_mock_output_can_send(leg)) { /* the client is still there: finish_reason abort */
    if (!leg->head_status) pd_mock_output_head(m, leg, 200, leg->is_stream);
    pd_mock_output_render(m, leg, leg->is_stream ? PD_WIRE_ABORT_EVENT : PD_WIRE_ABORT_BODY, 0);
    pd_mock_output_end(m, leg, PD_MOCK_OUTPUT_END_CLEAN);
  }
  finish(m, leg, interrupted_truth(leg));
}

void pd_mock_model_arrive(pd_mock_t *m, pd_mock_leg_t *leg) {
  pd_mock_model_open(m, leg);
  if (pd_mock_model_was_aborted(m, leg->rid)) { /* the abort overtook its request */
    pd_mock_log_str(m, "abort", leg, "prefix", "(remembered)");
    pd_mock_model_abort(m, leg);
  }
}

void pd_mock_model_timer(pd_mock_t *m, pd_mock_leg_t *leg, int kind) {
  if (leg->wstate == PD_WORKER_LEG_DONE) return;
  switch (kind) {
  case MT_OPEN:
    if (leg->wstate != PD_WORKER_LEG_NEW) return;
    leg->is_held = 0;
    pd_mock_model_arrive(m, leg);
    if (leg->is_closed_early) pd_mock_model_close(m, leg);
    return;
  case MT_BOOTSTRAP_TIMEOUT:
    if (leg->wstate == PD_WORKER_LEG_BOOTSTRAP) answer_error(m, leg, 500); /* S5.4 */
    return;
  case MT_WAIT_TIMEOUT:
    if (leg->wstate == PD_WORKER_LEG_WAIT_KV) answer_error(m, leg, 500); /* S5.5 */
    return;
  case MT_TRANSFER_DONE:
    if (leg->wstate == PD_WORKER_LEG_FORWARD) transfer_done(m, leg);
    return;
  case MT_RESPOND:
    if (leg->wstate == PD_WORKER_LEG_LAG) prefill_respond(m, leg);
    return;
  case MT_TOKEN:
    if (leg->wstate == PD_WORKER_LEG_STREAM) decode_token(m, leg);
    return;
  case MT_RECONNECT:
    if (leg->wstate == PD_WORKER_LEG_WAIT_KV && leg->boot < 0 && !leg->is_paired)
      pd_mock_bootstrap_connect(m, leg);
    return;
  default: return;
  }
}

void pd_mock_model_crash(pd_mock_t *m) {
  m->is_down = 1;
  for (uint32_t i = m->n_live; i-- > 0;) { /* backwards: freeing swaps the last one in */
    pd_mock_leg_t *leg = m->live[i];
    if (leg->wstate == PD_WORKER_LEG_DONE || leg->wstate == PD_WORKER_LEG_NEW) continue;
    if (pd_mock_output_can_send(leg)) uperr(m, leg, PD_UPSTREAM_ERROR_RESET, PD_TRUTH_FAILED);
    else finish(m, leg, PD_TRUTH_FAILED);
    pd_mock_leg_del_if_unused(m, leg);
  }
}

/* ---------- /abort_request ---------- */

static int has_prefix(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

uint32_t pd_mock_model_abort_prefix(pd_mock_t *m, const char *prefix) {
  if (prefix[0]) { /* remember it, in case its request is still on the way */
    pd_aborted_t *a = &m->aborted[m->aborted_next++ % PD_MOCK_ABORT_MEMORY];
    snprintf(a->rid, sizeof a->rid, "%s", prefix);
    a->t_ns = pd_mock_now_ns();
  }
  uint32_t n = 0;
  for (uint32_t i = m->n_live; i-- > 0;) {
    pd_mock_leg_t *leg = m->live[i];
    if (!has_prefix(leg->rid, prefix) || leg->wstate == PD_WORKER_LEG_NEW)
      continue; /* not here yet */
    n++;
    pd_mock_log_str(m, "abort", leg, "prefix", prefix);
    pd_mock_model_abort(m, leg);
    pd_mock_leg_del_if_unused(m, leg);
  }
  if (!n) pd_mock_log_str(m, "abort", NULL, "prefix", prefix);
  return n;
}

int pd_mock_model_was_aborted(pd_mock_t *m, const char *rid) {
  uint64_t now = pd_mock_now_ns(), keep = (uint64_t)PD_MOCK_ABORT_MEMORY_MS * 1000000ull;
  for (uint32_t i = 0; i < PD_MOCK_ABORT_MEMORY; i++) {
    const pd_aborted_t *a = &m->aborted[i];
    if (a->t_ns && a->rid[0] && now - a->t_ns <= keep && has_prefix(rid, a->rid)) return 1;
  }
  return 0;
}
