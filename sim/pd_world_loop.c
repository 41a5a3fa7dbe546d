/* The run loop and the action side of the driver: core actions become scheduled deliveries
 * and ledger entries; heap events become core events and worker-model calls; the core's
 * deadlines fire when the clock reaches pd_gw_get_expiry. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_hash.h"
#include "pd_rqstate.h"
#include "pd_world_int.h"
#include "pd_worker_body.h"
#include "pd_worker_shared.h"

_Static_assert((int)PD_WIRE_TOKEN == (int)W2G_TOKEN, "render kinds follow W2G_*");
_Static_assert((int)PD_WIRE_DONE_EVENT == (int)W2G_DONE_EVENT, "render kinds follow W2G_*");
_Static_assert((int)PD_WIRE_ERROR_EVENT == (int)W2G_ERROR_EVENT, "render kinds follow W2G_*");
_Static_assert((int)PD_WIRE_PREFILL_BODY == (int)W2G_PREFILL_BODY, "render kinds follow W2G_*");
_Static_assert((int)PD_WIRE_DECODE_BODY == (int)W2G_DECODE_BODY, "render kinds follow W2G_*");
_Static_assert((int)PD_WIRE_ERROR_BODY == (int)W2G_ERROR_BODY, "render kinds follow W2G_*");

#define MS_NS 1000000ull
#define RENDER_CAP (256u * 1024u)

#define push pd_world_push

/* The leg's fields from the body the worker received (mock_workers/pd_worker_body.c, the
 * parser the socket mock uses too). A wrong field is kept as read: the gateway's bug is for
 * the invariants to judge; a body that is not JSON leaves the fields empty. */
/* Read a leg body, or take the last read when the bytes are the same; 0 if not JSON. */
static int read_body(struct pd_world *w, pd_worker_body_t *b, const uint8_t *body, size_t len) {
  if (w->has_body_read && len == w->body_seen_len && memcmp(body, w->body_seen, len) == 0) {
    *b = w->body_read;
    if (b->n_rooms <= 1 || !b->rooms) return 1;
    b->rooms = malloc((size_t)b->n_rooms * sizeof *b->rooms); /* the leg owns its copy */
    if (b->rooms) {
      memcpy(b->rooms, w->body_read.rooms, (size_t)b->n_rooms * sizeof *b->rooms);
      return 1;
    } /* else read again, as the first time */
  }
  cJSON *j = cJSON_ParseWithLength((const char *)body, len);
  if (!j) return 0;
  (void)pd_worker_body_read(b, j, (const char *)body, len, NULL, NULL, 0);
  cJSON_Delete(j);
  free(w->has_body_read ? w->body_read.rooms : NULL);
  w->has_body_read = 0;
  if (len > w->body_seen_cap) {
    char *nb = realloc(w->body_seen, len);
    if (!nb) return 1; /* nothing kept: the next body is parsed */
    w->body_seen = nb;
    w->body_seen_cap = len;
  }
  w->body_read = *b;
  w->body_read.rooms = NULL;
  if (b->n_rooms > 1 && b->rooms) {
    w->body_read.rooms = malloc((size_t)b->n_rooms * sizeof *b->rooms);
    if (!w->body_read.rooms) return 1;
    memcpy(w->body_read.rooms, b->rooms, (size_t)b->n_rooms * sizeof *b->rooms);
  }
  if (len) memcpy(w->body_seen, body, len);
  w->body_seen_len = len;
  w->has_body_read = 1;
  return 1;
}

static void parse_leg_body(struct pd_world *w, pd_worker_leg_t *leg, const char *path,
                           const uint8_t *body, size_t len) {
  pd_worker_body_t b;
  if (!read_body(w, &b, body, len)) return;
  pd_worker_body_route(&b, path);
  leg->api = b.api;
  leg->is_stream = b.is_stream;
  leg->has_logprob = b.has_logprob;
  leg->rooms_hash = b.rooms_hash;
  leg->n_rooms = b.n_rooms;
  leg->is_room_scalar = b.has_room_key && !b.is_room_array;
  leg->room = b.room;
  leg->rooms = b.rooms;
  leg->has_rid = b.has_rid;
  leg->prompt_tokens = b.prompt_tokens;
  leg->has_routed_rank = b.routed_dp_rank >= 0;
  leg->routed_rank = b.routed_dp_rank >= 0 ? (uint32_t)b.routed_dp_rank : 0;
  leg->has_prefill_rank = b.prefill_dp_rank >= 0;
  leg->prefill_rank = b.prefill_dp_rank >= 0 ? (uint32_t)b.prefill_dp_rank : 0;
  for (uint32_t i = 0; i < w->n_nodes; i++) /* the sim names a prefill's bootstrap host after it */
    if (w->nodes[i].role == PD_ROLE_PREFILL && b.boot_port > 0 &&
        strcmp(w->nodes[i].spec->name, b.boot_host) == 0)
      leg->boot_node = (int)i;
  if (b.has_rid) { /* at most sizeof leg->rid - 1 bytes of it */
    const char *nul = memchr(b.rid, 0, sizeof leg->rid - 1);
    size_t n = nul ? (size_t)(nul - b.rid) : sizeof leg->rid - 1;
    memcpy(leg->rid, b.rid, n);
    leg->rid[n] = '\0';
  } else snprintf(leg->rid, sizeof leg->rid, "leg-%llu", (unsigned long long)leg->leg_id);
  pd_worker_model_read_kvp(w, leg, &b);
}

/* A decode whose own never_connect fault fired and that still waits for the KV it will never
 * take: under vLLM's protocol it never reads (pd_wengine_vllm_decode_admitted), so the
 * gateway sees a decode that says nothing, as from a hang (I12's model counts it so). */
static int is_never_reading(const pd_worker_leg_t *leg) {
  return leg->fault == (int)PD_FAULT_NEVER_CONNECT && leg->is_fault_fired &&
         leg->wstate == PD_WORKER_LEG_WAIT_KV;
}

/* I12's model: the worker's own failure reached the gateway (each leg once). */
static void note_own_failure(struct pd_world *w, pd_worker_leg_t *leg) {
  if (leg->is_own_fail_noted) return;
  leg->is_own_fail_noted = 1;
  pd_check_breaker_failure(&w->nodes[leg->worker].bmodel, w->now);
}

static void on_open_leg(struct pd_world *w, pd_client_request_t *rq, const pd_action_t *a) {
  pd_worker_leg_t *leg = calloc(1, sizeof *leg);
  if (!leg) return;
  leg->leg_id = a->leg_id;
  leg->req_id = rq->id;
  leg->attempt = rq->attempts;
  leg->role = a->role;
  leg->role_index = a->worker;
  leg->worker = w->role_node[a->role][a->worker];
  leg->tokens = rq->tokens;
  leg->fault = -1;
  leg->tfault = -1;
  leg->gw_open = 1;
  leg->t_open = w->now;
  leg->boot_node = -1;
  leg->kv_node = -1;
  parse_leg_body(w, leg, a->str, a->data, a->len);
  leg->next_in_req = rq->legs;
  rq->legs = leg;
  rq->n_legs++;
  if (rq->has_first_data) rq->retry_after_commit = 1;
  pd_map_put(&w->legs, leg->leg_id, leg);
  leg->has_eligible = 1;
  for (uint32_t i = 0; i < w->n_nodes && i < 64; i++) /* a breaker opened without cause */
    if (w->nodes[i].role == leg->role && (w->nodes[i].breaker_state == PD_BREAKER_CLOSED ||
                                          w->nodes[i].is_breaker_unjust))   /* excuses nothing */
      leg->eligible_nodes |= 1ull << i;
  pd_worker_node_t *n = &w->nodes[leg->worker];
  if (n->breaker_state == PD_BREAKER_OPEN) rq->violations |= 1u << (PD_INVARIANT_BREAKER - 1);
  uint32_t probes = w->s->config.breaker_half_open_probes; /* the allowed count, default 1 */
  if (n->breaker_state == PD_BREAKER_HALF_OPEN) { /* a probe of this period */
    leg->probe_period = n->half_open_period;
    if (++n->half_open_inflight > (probes ? probes : 1))
      rq->violations |= 1u << (PD_INVARIANT_BREAKER - 1);
  }
  leg->t_open_arrive = w->now + w->net_ns + n->spec->open_delay_ms * MS_NS; /* may be late */
  push(w, leg->t_open_arrive, EV_G2W_OPEN, 0, leg->leg_id, 0);
}

/* A probe frees its half-open slot once: when the gateway closes the leg, or earlier when the
 * last of the worker's answer reached the gateway (worker truth: its [DONE], whole body, error
 * event or error body was delivered; is_answer_end): the probe's result is known then, and in
 * the same instant a closed-loop client may send its next request before the connection's end
 * arrives (explore seed 235715, I12). A leg still streaming holds its slot, whatever outcome
 * the gateway recorded at its head. Only a probe of the current half-open period frees one of
 * its slots: one left over from an earlier period (the breaker reopened meanwhile) was never
 * counted in this one. */
static void probe_done(struct pd_world *w, pd_worker_leg_t *leg) {
  pd_worker_node_t *n = &w->nodes[leg->worker];
  if (n->breaker_state == PD_BREAKER_HALF_OPEN && leg->probe_period &&
      leg->probe_period == n->half_open_period && n->half_open_inflight)
    n->half_open_inflight--;
  leg->probe_period = 0;
}

/* The message that completes a worker's answer: the stream's [DONE] or error event, a whole
 * body, an error body (a prefill body followed by a body error, arg 1, is not whole). */
static int is_answer_end(uint32_t kind, uint32_t arg) {
  return kind == W2G_DONE_EVENT || kind == W2G_ERROR_EVENT || kind == W2G_DECODE_BODY ||
         kind == W2G_ERROR_BODY || (kind == W2G_PREFILL_BODY && arg != 1);
}

static void leg_gw_closed(struct pd_world *w, pd_worker_leg_t *leg) {
  if (!leg->gw_open) return;
  leg->gw_open = 0;
  leg->t_gw_closed = w->now;
  probe_done(w, leg);
}

static void on_load(pd_client_request_t *rq, const pd_action_t *a) {
  int r = a->role;
  for (int i = 0; i < 8; i++) {
    if (rq->load_bal[r][i] == 0 && a->flag > 0 && rq->load_w[r][i] == 0) {
      rq->load_w[r][i] = a->worker + 1;
      rq->load_bal[r][i] = 1;
      return;
    }
    if (rq->load_w[r][i] == a->worker + 1) {
      rq->load_bal[r][i] += a->flag;
      if (rq->load_bal[r][i] < 0 || rq->load_bal[r][i] > 1) rq->load_neg = 1;
      return;
    }
  }
}

static void on_load_release_time(struct pd_world *w, pd_client_request_t *rq,
                                 const pd_action_t *a) {
  for (int i = 0; i < 8; i++)
    if (rq->load_w[a->role][i] == a->worker + 1) rq->load_t_rel[a->role][i] = w->now;
}

/* Worker truth: every worker of some role is up and holds as many requests as it can run;
 * or the clients have more requests waiting for an answer than some role's workers can run
 * together (the cluster cannot hold them, whatever is still on its way to a worker). */
static int role_at_capacity(const struct pd_world *w) {
  uint64_t waiting = 0;
  void *v;
  for (size_t slot = 0; pd_map_next(&w->reqs, &slot, NULL, &v);) {
    const pd_client_request_t *q = v;
    waiting += !q->ended && !q->gone;
  }
  for (int r = 0; r < 2; r++) {
    uint64_t cap = 0;
    for (uint32_t i = 0; i < w->n_nodes; i++)
      if (w->nodes[i].role == (pd_role_t)r && !w->nodes[i].is_down) cap += w->nodes[i].spec->max_running;
    if (waiting > cap) return 1;
  }
  for (int r = 0; r < 2; r++) {
    int n = 0, full = 0;
    for (uint32_t i = 0; i < w->n_nodes; i++) {
      const pd_worker_node_t *nd = &w->nodes[i];
      if (nd->role != (pd_role_t)r) continue;
      n++;
      /* a slot freed less than a round trip ago is not yet known to the gateway */
      uint32_t known = nd->live_slots;
      if (nd->n_freed_at + 2 * w->net_ns + 1000000ull >= w->now) known += nd->n_freed_recent;
      full += !nd->is_down && known >= nd->spec->max_running;
    }
    if (n && full == n) return 1;
  }
  return 0;
}

static void on_client(struct pd_world *w, pd_client_request_t *rq, const pd_action_t *a) {
  switch (a->kind) {
  case PD_ACT_CLIENT_HEAD:
    if (rq->has_head) { rq->token_error = 1; return; } /* two heads */
    rq->has_head = 1;
    rq->head_status = a->status;
    if (a->status == 503) rq->is_shed_at_capacity = role_at_capacity(w);
    rq->is_sse_head = a->flag;
    rq->t_head = w->now;
    return;
  case PD_ACT_CLIENT_DATA:
    if (!rq->has_first_data) rq->t_first_data = w->now;
    if (w->metrics) pd_metrics_on_data(w->metrics, rq, w->now);
    rq->has_first_data = 1;
    if (!rq->gone) (void)pd_check_client_data(rq, a->data, a->len); /* counted if lost */
    return;
  case PD_ACT_CLIENT_END:
    if (rq->gone || rq->ended) return;
    rq->ended = 1;
    rq->aborted = a->flag;
    rq->t_end = w->now;
    rq->was_healthy = rq->health_epoch == w->unhealthy_epoch && !w->n_unhealthy;
    pd_world_client_after(w, rq); /* its client retries it, or sends its next */
    return;
  default: return;
  }
}

static void apply_one(struct pd_world *w, const pd_action_t *a) {
  pd_client_request_t *rq = pd_map_get(&w->reqs, a->req_id);
  if (!rq) return;
  pd_worker_leg_t *leg;
  switch (a->kind) {
  case PD_ACT_OPEN_LEG: on_open_leg(w, rq, a); break;
  case PD_ACT_CLOSE_LEG:
    leg = pd_map_get(&w->legs, a->leg_id);
    if (!leg) break;
    leg_gw_closed(w, leg);
    /* the close follows its request on the same connection; the abort, on its own, may
       overtake a late request (open_delay_ms) */
    push(w, w->now + w->net_ns > leg->t_open_arrive ? w->now + w->net_ns : leg->t_open_arrive,
         EV_G2W_CLOSE, 0, leg->leg_id, 0);
    if (a->str) {
      leg->aborts_in_flight++;
      pd_world_trace_instant(w, PD_TRACE_GATEWAY, leg->leg_id, PD_TRACE_ID_ABORT_SENT,
                             leg->req_id, leg->leg_id);
      push(w, w->now + w->net_ns, EV_G2W_ABORT, 0, leg->leg_id, 0);
    }
    break;
  case PD_ACT_CLIENT_HEAD:
  case PD_ACT_CLIENT_DATA:
  case PD_ACT_CLIENT_END: on_client(w, rq, a); break;
  case PD_ACT_OUTCOME:
    leg = pd_map_get(&w->legs, a->leg_id);
    if (leg) {
      leg->outcomes++;
      leg->outcome = (pd_outcome_t)a->flag;
      /* a leg hung (or dripping) by its own fault failed when the gateway gave up on it; so
         did a leg whose path a network fault cut (silent after response_lost): as far as the
         gateway could know, its worker failed (I16's worker_failed counts it alike) */
      if ((a->flag == PD_OUTCOME_FAILURE || a->flag == PD_OUTCOME_TIMEOUT) &&
          (leg->wstate == PD_WORKER_LEG_HUNG || leg->is_path_fault || is_never_reading(leg) ||
           (leg->drip_ms && leg->wstate == PD_WORKER_LEG_STREAM)))
        note_own_failure(w, leg);
      if ((a->flag == PD_OUTCOME_FAILURE || a->flag == PD_OUTCOME_TIMEOUT) &&
          !leg->is_failed_at_close && !leg->is_fault_fired && !leg->is_crash_hit &&
          (leg->wstate == PD_WORKER_LEG_BOOTSTRAP || leg->wstate == PD_WORKER_LEG_WAIT_KV))
        leg->is_partner_blamed = 1; /* its worker was healthy, waiting on its partner */
    }
    break;
  case PD_ACT_LOAD:
    on_load(rq, a);
    if (a->flag < 0) on_load_release_time(w, rq, a);
    break;
  case PD_ACT_BREAKER: {
    pd_worker_node_t *n = &w->nodes[w->role_node[a->role][a->worker]];
    int was_sick = n->breaker_state != PD_BREAKER_CLOSED && !n->is_breaker_unjust;
    if (pd_check_breaker_move(&n->bmodel, &w->gcfg.breaker, n->breaker_state, a->flag, w->now)) {
      n->is_breaker_unjust = 1; /* I12: opened without cause, on the request that saw it */
      rq->violations |= 1u << (PD_INVARIANT_BREAKER - 1);
      if (!rq->is_breaker_unjust) rq->is_breaker_unjust = (int)(n - w->nodes) + 1;
    } else if (a->flag == PD_BREAKER_CLOSED || a->flag == PD_BREAKER_OPEN) {
      n->is_breaker_unjust = 0; /* closed, or reopened for a real failure */
    }
    int is_sick = a->flag != PD_BREAKER_CLOSED && !n->is_breaker_unjust;
    if (was_sick != is_sick) pd_world_health(w, is_sick ? +1 : -1);
    if (a->flag == PD_BREAKER_HALF_OPEN && n->breaker_state != PD_BREAKER_HALF_OPEN) {
      n->half_open_period++; /* a new period: no probe of it yet */
      n->half_open_inflight = 0;
    }
    n->breaker_state = a->flag;
    break;
  }
  case PD_ACT_ATTEMPT: rq->attempts++; break;
  case PD_ACT_DONE: rq->core_done = 1; break;
  }
}

static void retire_by_id(struct pd_world *w, uint64_t req_id) {
  pd_client_request_t *rq = pd_map_get(&w->reqs, req_id);
  if (rq) pd_world_try_retire(w, rq);
}

/* Carry out the actions of one step, or of several requests' expiries: a request's actions
 * are contiguous (BREAKER actions carry the request that observed them), so it may retire
 * once its run of actions is over. */
void pd_world_refused(struct pd_world *w, uint64_t id) {
  pd_client_request_t *rq = pd_map_get(&w->reqs, id);
  if (!rq || rq->has_head || rq->ended || rq->gone) return;
  static const char body[] =
      "{\"error\":{\"code\":\"internal_error\",\"message\":\"out of memory\"}}";
  pd_action_t acts[] = {
      {.kind = PD_ACT_CLIENT_HEAD, .req_id = id, .status = 500},
      {.kind = PD_ACT_CLIENT_DATA, .req_id = id, .data = (const uint8_t *)body,
       .len = sizeof body - 1},
      {.kind = PD_ACT_CLIENT_END, .req_id = id},
  };
  for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) on_client(w, rq, &acts[i]);
  rq->core_done = 1; /* the core never took it */
  retire_by_id(w, id);
}

void pd_world_apply(struct pd_world *w) {
  for (size_t i = 0; i < w->acts.n; i++) {
    const pd_action_t *a = &w->acts.v[i];
    apply_one(w, a);
    if (i + 1 == w->acts.n || w->acts.v[i + 1].req_id != a->req_id) retire_by_id(w, a->req_id);
  }
}

/* ---------- heap events ---------- */

/* Keep only part p of n of the rendered message (c = W2G_PART(p, n), 0: all of it). */
static size_t slice(char *buf, size_t len, uint64_t c) {
  uint64_t n = c >> 8, p = c & 0xff;
  if (!n || p >= n) return len;
  size_t from = (size_t)(len * p / n), to = (size_t)(len * (p + 1) / n);
  memmove(buf, buf + from, to - from);
  return to - from;
}

/* Does this worker message report the leg's failure (I4's truth at the gateway's close)? */
static int reports_failure(const pd_worker_leg_t *leg, uint32_t kind, uint32_t arg) {
  switch (kind) {
  case W2G_HEAD:
  case W2G_ERROR_BODY: return (arg < 200 || arg >= 300) && !pd_worker_status_is_healthy((int)arg);
  case W2G_ERROR_EVENT:
  case W2G_UPERR: return 1;
  case W2G_END: return leg->truth == PD_TRUTH_FAILED; /* a stream cut without [DONE] */
  default: return 0;
  }
}

/* Hold a decode message while its client reads nothing (R-BACKPRESSURE: the gateway stops
 * reading the leg); 1 when held. */
static int hold_for_client(struct pd_world *w, pd_worker_leg_t *leg, uint32_t kind, uint32_t arg,
                           uint64_t part) {
  pd_client_request_t *rq = pd_map_get(&w->reqs, leg->req_id);
  if (!rq || !rq->is_client_blocked || leg->role != PD_ROLE_DECODE || !leg->gw_open) return 0;
  if (rq->n_held == rq->cap_held) {
    uint32_t nc = rq->cap_held ? rq->cap_held * 2 : 16;
    pd_world_held_t *nh = realloc(rq->held, nc * sizeof *nh);
    if (!nh) { /* the run cannot be judged: as a lost event */
      if (!w->push_err) w->push_err = PD_ERR_NOMEM;
      return 0;
    }
    rq->held = nh;
    rq->cap_held = nc;
  }
  rq->held[rq->n_held++] = (pd_world_held_t){leg->leg_id, kind, arg, part};
  return 1;
}

static void deliver_w2g(struct pd_world *w, pd_worker_leg_t *leg, uint32_t kind, uint32_t arg,
                        uint64_t part, char *buf);

/* The client stops reading (1) or reads again (0): the core is told, and what was held is
 * delivered in its order. */
static void client_block(struct pd_world *w, uint64_t req_id, int is_blocked, char *buf) {
  pd_client_request_t *rq = pd_map_get(&w->reqs, req_id);
  if (!rq || rq->is_client_blocked == is_blocked) return;
  rq->is_client_blocked = is_blocked;
  pd_event_t ev = {.kind = PD_EV_CLIENT_BLOCKED, .req_id = req_id, .status = is_blocked};
  pd_world_feed(w, &ev);
  if (is_blocked) return;
  for (uint32_t i = 0; i < rq->n_held; i++) { /* rq lives while a held leg is open */
    pd_world_held_t h = rq->held[i];
    pd_worker_leg_t *leg = pd_map_get(&w->legs, h.leg_id);
    if (leg) deliver_w2g(w, leg, h.kind, h.arg, h.part, buf);
    rq = pd_map_get(&w->reqs, req_id);
    if (!rq) return; /* retired with its last message */
  }
  rq->n_held = 0;
}

static void deliver_w2g(struct pd_world *w, pd_worker_leg_t *leg, uint32_t kind, uint32_t arg,
                        uint64_t part, char *buf) {
  if (hold_for_client(w, leg, kind, arg, part)) return;
  if (reports_failure(leg, kind, arg) && (leg->gw_open || leg->t_gw_closed == w->now)) {
    leg->is_failed_at_close = 1; /* arrived before the close, or in its very instant */
    note_own_failure(w, leg); /* the worker itself said it failed (I12's model) */
  }
  if (!leg->gw_open) return; /* the gateway already closed it */
  pd_event_t ev = {.req_id = leg->req_id, .leg_id = leg->leg_id};
  switch (kind) {
  case W2G_HEAD:
    ev.kind = PD_EV_UP_HEAD;
    ev.status = (int)arg;
    break;
  case W2G_END: ev.kind = PD_EV_UP_END; break;
  case W2G_UPERR:
    ev.kind = PD_EV_UP_ERROR;
    ev.uperr = (pd_upstream_error_t)arg;
    break;
  default:
    ev.kind = PD_EV_UP_DATA;
    ev.len = slice(buf, pd_worker_model_render(w, leg, (int)kind, arg, buf, RENDER_CAP), part);
    ev.data = (const uint8_t *)buf;
    if (!ev.len) return;
  }
  if (kind == W2G_END || kind == W2G_UPERR) leg_gw_closed(w, leg);
  else if (is_answer_end(kind, arg)) probe_done(w, leg);
  pd_world_feed(w, &ev); /* may retire the request and free leg */
  retire_by_id(w, ev.req_id);
}

/* A leg cut off while its own fault hung it (or it was slow-dripping) stalled by itself; one
 * waiting on its partner or in bootstrap did not (I16 tells the two apart). */
static void note_stall(pd_worker_leg_t *leg) {
  if (leg->wstate == PD_WORKER_LEG_HUNG || (leg->drip_ms && leg->wstate == PD_WORKER_LEG_STREAM))
    leg->is_own_stall = 1;
}

static void step(struct pd_world *w, const pd_heap_item_t *it, char *buf) {
  pd_worker_leg_t *leg = NULL;
  if (it->kind >= EV_G2W_OPEN && it->kind <= EV_W2G) {
    leg = pd_map_get(&w->legs, it->b);
    if (!leg) return;
  }
  switch (it->kind) {
  case EV_ARRIVE: pd_world_arrive(w); return;
  case EV_GONE: {
    pd_client_request_t *rq = pd_map_get(&w->reqs, it->b);
    if (!rq || rq->ended || rq->gone) return;
    rq->gone = 1;
    rq->t_end = w->now;
    rq->is_client_timeout = it->c == 1; /* client_timeout_ms, not disconnect_at_ms */
    pd_world_client_after(w, rq);
    pd_world_trace_instant(w, PD_TRACE_CLIENTS, rq->id, PD_TRACE_ID_CLIENT_GONE, rq->id, 0);
    pd_event_t ev = {.kind = PD_EV_CLIENT_GONE, .req_id = rq->id};
    pd_world_feed(w, &ev); /* may retire and free rq */
    retire_by_id(w, ev.req_id);
    return;
  }
  case EV_G2W_OPEN: {
    int was_down = w->nodes[leg->worker].is_down;
    pd_worker_model_on_open(w, leg); /* leg stays valid: retirement waits for the end of the step */
    pd_world_note_open(w, leg, was_down);
    return;
  }
  case EV_G2W_CLOSE: { /* the model may retire the request, freeing leg */
    uint64_t rid = leg->req_id;
    note_stall(leg);
    pd_worker_model_on_close(w, leg);
    retire_by_id(w, rid);
    return;
  }
  case EV_G2W_ABORT: {
    uint64_t rid = leg->req_id;
    assert(leg->aborts_in_flight > 0);
    leg->aborts_in_flight--;
    pd_world_trace_instant(w, PD_TRACE_WORKER + leg->worker, leg->leg_id,
                           PD_TRACE_ID_ABORT_RECEIVED, rid, leg->leg_id);
    note_stall(leg);
    pd_worker_model_on_abort(w, leg);
    retire_by_id(w, rid);
    return;
  }
  case EV_W2G: deliver_w2g(w, leg, it->a & 0xff, it->a >> 8, it->c, buf); return;
  case EV_WWAKE: pd_worker_model_wake(w, it->a, it->t_ns); return;
  case EV_CLIENT_BLOCK: client_block(w, it->b, (int)it->a, buf); return;
  case EV_SEND: pd_world_client_send_event(w, it->a, it->b, it->c); return;
  case EV_CRASH:
    if (!w->nodes[it->a].is_down) pd_world_health(w, +1);
    w->nodes[it->a].is_down = 1;
    pd_world_mark_crash(w, it->a);
    pd_world_trace_instant(w, PD_TRACE_WORKER + it->a, 0, PD_TRACE_ID_CRASH, 0, 0);
    pd_worker_model_crash(w, it->a);
    pd_world_fault_block_update(w);
    return;
  case EV_ALLOC_FAIL:
    if (it->a && w->orig) return; /* the healed phase: no fault starts */
    if (w->is_alloc_failing != (int)it->a) pd_world_health(w, it->a ? +1 : -1);
    w->is_alloc_failing = (int)it->a;
    return;
  case EV_RESTART:
    if (w->nodes[it->a].is_down) pd_world_health(w, -1);
    w->nodes[it->a].is_down = 0;
    pd_world_trace_instant(w, PD_TRACE_WORKER + it->a, 0, PD_TRACE_ID_RESTART, 0, 0);
    pd_worker_model_restart(w, it->a);
    pd_world_fault_block_update(w);
    return;
  default: return;
  }
}

/* config.alloc_fail_*: the core's allocator (libc), refusing every request inside the window */
static int alloc_refuses(struct pd_world *w) {
  if (!w->is_alloc_failing || ++w->alloc_in_window % w->s->config.alloc_fail_every) return 0;
  w->alloc_refused++;
  return 1;
}
static void *gw_malloc(size_t n, void *ud) {
  struct pd_world *w = ud;
  if (alloc_refuses(w)) return NULL;
  return malloc(n);
}
static void *gw_realloc(void *p, size_t n, void *ud) {
  struct pd_world *w = ud;
  if (alloc_refuses(w)) return NULL;
  return realloc(p, n);
}
static void gw_free(void *p, void *ud) {
  (void)ud;
  free(p);
}

static int setup(struct pd_world *w, const pd_scenario_t *s, pd_mode_t mode, uint64_t seed) {
  w->s = s;
  pd_goodput_begin(&w->goodput, s);
  pd_recovery_begin(&w->recovery, s);
  w->mode = mode;
  w->net_ns = s->config.net_us * 1000ull;
  w->seed = seed;
  pd_prng_t root;
  pd_prng_init(&root, seed);
  pd_prng_fork(&root, 1, &w->gw_rng);
  pd_prng_fork(&root, 2, &w->world_rng);
  pd_prng_fork(&root, 3, &w->fault_rng);
  pd_prng_fork(&root, 4, &w->client_rng);
  pd_gw_config_t *c = &w->gcfg;
  pd_scenario_gw_config(s, mode, c);
  /* I25: the budget the mode declares (the reference's R-RETRY-BUDGET; the models none) */
  pd_retry_budget_begin(&w->rbudget, mode == PD_MODE_REFERENCE ? c->retry_budget_pct : 0,
                        c->retry_budget_min, c->retry_budget_window_ns);
  w->gw_alloc = (pd_alloc_t){gw_malloc, gw_realloc, gw_free, w};
  w->gw = pd_gw_new(s->config.alloc_fail_for_ms ? &w->gw_alloc : NULL, c, &w->gw_rng);
  if (!w->gw) return PD_ERR_NOMEM;
  if (w->is_traced) pd_gw_set_transition_hook(w->gw, pd_trace_on_transition, &w->trace);
  pd_actbuf_init(&w->acts, NULL);
  pd_heap_init(&w->heap, NULL, 0);
  if (s->config.alloc_fail_for_ms) { /* memory pressure on the gateway: a world fault (I15) */
    push(w, s->config.alloc_fail_from_ms * MS_NS, EV_ALLOC_FAIL, 1, 0, 0);
    push(w, (s->config.alloc_fail_from_ms + s->config.alloc_fail_for_ms) * MS_NS, EV_ALLOC_FAIL,
         0, 0, 0);
  }
  for (uint32_t i = 0; i < s->n_workers; i++) {
    const pd_scenario_worker_t *sw = &s->workers[i];
    pd_worker_node_t *n = &w->nodes[w->n_nodes++];
    n->spec = sw;
    n->role = sw->role;
    int idx = pd_gw_add_worker(w->gw, sw->role, sw->name, sw->name,
                               sw->role == PD_ROLE_PREFILL ? 8998 : -1);
    if (idx < 0) return idx;
    n->role_index = (uint32_t)idx;
    /* R-ADMIT-LIMIT: the gateway knows each worker's capacity (its --max-running-requests) */
    pd_gw_set_worker_limit(w->gw, sw->role, (uint32_t)idx, sw->max_running);
    /* R-PAIR-GROUP: the gateway knows each worker's transfer group (as it knows its role) */
    pd_gw_set_worker_group(w->gw, sw->role, (uint32_t)idx, sw->transfer_group);
    /* R-ABORT-COMMITTED: the gateway is told (configuration) which prefills ignore late aborts */
    if (sw->role == PD_ROLE_PREFILL && sw->abort_after_commit_ignored != 0)
      pd_gw_set_worker_abort_ignored(w->gw, (uint32_t)idx, 1);
    w->role_node[sw->role][idx] = i;
    if (sw->breaker_initial != PD_BREAKER_CLOSED && mode != PD_MODE_MINILB) { /* no breaker */
      pd_gw_breaker_start_in(w->gw, sw->role, (uint32_t)idx, sw->breaker_initial, 0);
      n->breaker_state = sw->breaker_initial;
      n->half_open_period = sw->breaker_initial == PD_BREAKER_HALF_OPEN; /* the first period */
      pd_world_health(w, +1); /* the scenario opened it: not a healthy world (I15) */
    }
    if (sw->crash_at_ms) push(w, sw->crash_at_ms * MS_NS, EV_CRASH, i, 0, 0);
    if (sw->restart_at_ms) push(w, sw->restart_at_ms * MS_NS, EV_RESTART, i, 0, 0);
  }
  int rc = pd_world_workers_init(w);
  if (rc < 0) return rc;
  pd_world_trace_names(w);
  if (s->workload.users) return pd_world_clients_start(w); /* the closed loop */
  if (s->workload.requests)
    push(w, pd_scenario_arrival_gap_ns(&s->workload, 0, &w->world_rng), EV_ARRIVE, 0, 0, 0);
  return 0;
}

static void teardown(struct pd_world *w) {
  void *rq;
  for (size_t slot = 0; pd_map_next(&w->reqs, &slot, NULL, &rq);) pd_world_client_request_del(rq);
  pd_map_free(&w->reqs);
  pd_map_free(&w->legs);
  pd_world_workers_free(w);
  pd_heap_free(&w->heap);
  pd_actbuf_free(&w->acts);
  pd_gw_del(w->gw);
  free(w->user_busy);
}

/* Judge every request still unfinished when the queue ran dry (or the horizon passed). */
static void judge_leftovers(struct pd_world *w) {
  size_t n = 0, cap = pd_map_len(&w->reqs);
  pd_client_request_t **all = cap ? malloc(cap * sizeof *all) : NULL;
  if (cap && !all) return;
  void *rq;
  for (size_t slot = 0; n < cap && pd_map_next(&w->reqs, &slot, NULL, &rq);) all[n++] = rq;
  for (size_t i = 0; i < n; i++) pd_world_judge(w, all[i]); /* they run on, healed */
  free(all);
}

/* Fire the core's deadlines due now; one step, like an event. */
static void expire(struct pd_world *w) {
  pd_actbuf_reset(&w->acts);
  pd_gw_handle_expiry(w->gw, w->now, &w->acts);
  pd_world_apply(w);
}

/* Run events up to the horizon (an event past it stays queued for a later phase). The core's
 * next deadline and the world's next event are merged by time; at the same instant the
 * world's events go first, so a deadline fires after every event of its instant (as a socket
 * driver fires a due deadline after the socket events it already holds). */
static void run_until(struct pd_world *w, uint64_t horizon, const pd_world_opts_t *o, char *buf) {
  pd_world_stats_t *stats = w->stats;
  pd_heap_item_t it;
  for (uint64_t n = 0; n < (1ull << 40); n++) {
    const pd_heap_item_t *top = pd_heap_peek(&w->heap);
    uint64_t expiry = pd_gw_get_expiry(w->gw), t = top ? top->t_ns : UINT64_MAX;
    if (expiry < t) t = expiry;
    if (t == UINT64_MAX || t > horizon) break; /* idle, or nothing left before the horizon */
    assert(t >= w->now); /* every deadline and event is now or later */
    w->now = t;
    stats->events++;
    if (top && top->t_ns == t) {
      pd_heap_pop(&w->heap, &it);
      step(w, &it, buf);
    } else {
      expire(w);
    }
    for (size_t i = 0; i < w->n_dirty; i++) retire_by_id(w, w->dirty[i]);
    w->n_dirty = 0;
    if (o && o->progress && (n & 0xffff) == 0)
      o->progress(o->progress_ud, stats->requests_done, w->s->workload.requests);
  }
}

/* How long the healed phase may run: every worker-side timeout twice over, plus an hour per
 * possible attempt (smg's per-leg timeout is 30 minutes, R4.1). */
static uint64_t quiet_ns(const pd_scenario_t *s) {
  return (2 * s->config.bootstrap_timeout_ms + 2 * s->config.waiting_timeout_ms +
          (uint64_t)PD_MAX_ATTEMPTS * 3600000ull) * MS_NS;
}

/* The safety horizon: past every timeout a model can wait on, so hung runs still end; the
 * arrivals' span (slowed by the smallest load step) and, for clients that wait on their
 * answers, every try of every job one after another per user. Capped far below 2^64. */
static uint64_t run_horizon_ns(const pd_scenario_t *s) {
  const pd_scenario_workload_t *wl = &s->workload;
  const pd_scenario_config_t *c = &s->config;
  double each_ms = (double)(c->deadline_ms + 2 * c->bootstrap_timeout_ms +
                            2 * c->waiting_timeout_ms + 4000000ull);
  double slow = 1.0, tries = 1.0 + wl->client_retries;
  for (uint32_t k = 0; k < wl->n_steps; k++)
    if (wl->steps[k].factor < slow) slow = wl->steps[k].factor;
  double ms = each_ms + (double)wl->requests * ((double)wl->interval_ms + 1) * 4 / slow +
              (wl->n_bursts ? (double)wl->bursts[wl->n_bursts - 1].at_ms : 0.0) +
              (wl->n_steps ? (double)(wl->steps[wl->n_steps - 1].at_ms +
                                      wl->steps[wl->n_steps - 1].ramp_ms) : 0.0);
  if (wl->users || wl->client_retries) { /* each try may wait out the slowest timeout */
    double per_user = wl->users ? (double)wl->users * slow : 1.0;
    if (per_user < 1.0) per_user = 1.0;
    ms += (double)wl->requests * tries / per_user *
          ((double)c->deadline_ms + (double)wl->client_timeout_ms + (double)wl->think_ms +
           (double)wl->retry_backoff_max_ms + 1.0);
  }
  double ns = ms * 1e6;
  return ns >= 4.0e18 ? 4000000000000000000ull : (uint64_t)ns;
}

int pd_world_run(const pd_scenario_t *s, pd_mode_t mode, uint64_t seed, FILE *trace,
                 pd_world_stats_t *stats, uint32_t *violations, uint64_t *trace_hash) {
  pd_world_opts_t o = {trace, NULL, NULL, 0, 0, NULL};
  return pd_world_run_opts(s, mode, seed, &o, stats, violations, trace_hash);
}

int pd_world_run_opts(const pd_scenario_t *s, pd_mode_t mode, uint64_t seed,
                      const pd_world_opts_t *o, pd_world_stats_t *stats, uint32_t *violations,
                      uint64_t *trace_hash) {
  return pd_world_run_legs(s, mode, seed, o, NULL, NULL, stats, violations, trace_hash);
}

int pd_world_run_legs(const pd_scenario_t *s, pd_mode_t mode, uint64_t seed,
                      const pd_world_opts_t *o, pd_world_leg_fn on_leg, void *leg_ud,
                      pd_world_stats_t *stats, uint32_t *violations, uint64_t *trace_hash) {
  FILE *trace = o ? o->trace : NULL;
  struct pd_world *w = calloc(1, sizeof *w);
  if (!w) return PD_ERR_NOMEM;
  memset(stats, 0, sizeof *stats);
  w->stats = stats;
  pd_trace_init(&w->trace, trace);
  w->is_traced = trace || trace_hash; /* else nobody reads the trace: none is built */
  char *buf = malloc(RENDER_CAP);
  w->tie_seed = o && o->has_tie_seed ? o->tie_seed : s->config.tie_seed;
  w->on_leg = on_leg;
  w->leg_ud = leg_ud;
  w->metrics = o ? o->metrics : NULL;
  if (w->metrics) pd_metrics_run_begin(w->metrics, s);
  int rc = buf ? setup(w, s, mode, seed) : PD_ERR_NOMEM;
  /* horizon: past every timeout a model can wait on, so hung runs still end */
  uint64_t horizon = run_horizon_ns(s);
  if (rc == 0) run_until(w, horizon, o, buf);
  if (rc == 0) judge_leftovers(w);
  if (rc == 0) { /* the healed liveness phase: faults off, crashed workers back, time runs on */
    pd_world_heal(w);
    run_until(w, horizon + quiet_ns(s), o, buf);
    pd_world_check_quiet(w);
    char why[200];
    uint32_t gv = pd_goodput_judge(&w->goodput, why, sizeof why); /* I23, a whole-run judgement */
    if (gv) {
      w->violations |= gv;
      stats->inv_count[PD_INVARIANT_GOODPUT_FLOOR]++;
      if (!stats->first_reason[0]) snprintf(stats->first_reason, sizeof stats->first_reason, "%s", why);
    }
    uint32_t bv = pd_retry_budget_judge(&w->rbudget, why, sizeof why); /* I25, whole-run */
    if (bv) {
      w->violations |= bv;
      stats->inv_count[PD_INVARIANT_RETRY_BUDGET]++;
      if (!stats->first_reason[0]) snprintf(stats->first_reason, sizeof stats->first_reason, "%s", why);
    }
    uint32_t rv = pd_recovery_judge(&w->recovery, why, sizeof why); /* I26, whole-run */
    if (rv) {
      w->violations |= rv;
      stats->inv_count[PD_INVARIANT_RECOVERY]++;
      if (!stats->first_reason[0]) snprintf(stats->first_reason, sizeof stats->first_reason, "%s", why);
    }
  }
  pd_world_pins_settle(w); /* pins retired legs still hold: judged (I18) and counted up to now */
  if (rc == 0 && w->push_err) rc = w->push_err; /* an event was lost: the verdict is void */
  pd_world_exercised(w);
  if (rc == 0 && stats->records_lost) rc = PD_ERR_NOMEM; /* a request judged on a lost record */
  *violations = w->violations;
  w->room_collisions += pd_world_workers_collisions(w);
  if (w->room_collisions) *violations |= 1u << (PD_INVARIANT_ROOMS - 1);
  if (w->metrics) pd_metrics_world_end(w); /* requests left, trace counters, recovery */
  uint64_t h = pd_trace_finish(&w->trace);
  if (trace_hash) *trace_hash = h;
  free(buf);
  free(w->dirty);
  free(w->body_seen);
  free(w->has_body_read ? w->body_read.rooms : NULL);
  free(w->healed);
  pd_recovery_free(&w->recovery);
  teardown(w);
  free(w);
  return rc;
}
