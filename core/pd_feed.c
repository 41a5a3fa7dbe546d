/* Event routing (pd_gw_feed), attempt start (selection + bootstrap), and the deadlines
 * (one heap entry per request: pd_gw_get_expiry, pd_gw_handle_expiry). */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "pd_err.h"
#include "pd_gw_int.h"

static const pd_mode_ops_t *mode_ops(const pd_gw_t *gw) {
  switch (gw->cfg.mode) {
  case PD_MODE_MINILB: return &pd_mode_minilb_ops;
  case PD_MODE_REFERENCE:
    return gw->cfg.protocol == PD_PROTOCOL_VLLM ? &pd_mode_sfref_ops : &pd_mode_ref_ops;
  case PD_MODE_VLLM_TOY_PROXY: return &pd_mode_toy_ops;
  case PD_MODE_MOONCAKE_PROXY: return &pd_mode_mooncake_ops;
  case PD_MODE_LLMD_SIDECAR: return &pd_mode_llmd_ops;
  default: return &pd_mode_smg_ops;
  }
}

/* The vLLM-family models forward any JSON object (their batch is vLLM's business): no batch
 * rule of their own, mini_lb's never counts one on the OpenAI routes. */
static pd_batch_rule_t batch_rule(pd_mode_t m) {
  return m == PD_MODE_MINILB || pd_mode_protocol(m) == PD_PROTOCOL_VLLM ? PD_BATCH_RULE_MINILB
         : m == PD_MODE_REFERENCE                                       ? PD_BATCH_RULE_REFERENCE
                                                                        : PD_BATCH_RULE_SMG;
}

/* ---------- selection ---------- */

static int is_excluded(const pd_rq_t *rq, pd_role_t role, uint32_t w) {
  return (rq->excluded[role][w / 8] >> (w % 8)) & 1u;
}

/* R-PAIR-GROUP (reference only): worker w of role may be picked now: of the group the
 * attempt's prefill fixed, and a prefill only from a group that has a decode at all (a group
 * without a complete pair is not ready). The models pick from every worker (docs/spec.md 7). */
static int pd_gw_group_ok(const pd_gw_t *gw, pd_role_t role, uint32_t w) {
  if (gw->cfg.mode != PD_MODE_REFERENCE) return 1;
  uint32_t g = gw->workers[role][w].group;
  if (gw->pick_group >= 0) return g == (uint64_t)gw->pick_group;
  if (role != PD_ROLE_PREFILL) return 1;
  for (uint32_t d = 0; d < gw->n_workers[PD_ROLE_DECODE]; d++)
    if (gw->workers[PD_ROLE_DECODE][d].group == g) return 1;
  return 0;
}

/* Candidates per R1.13/R1.16: breaker admits; for reference also not excluded by an earlier
 * attempt of this request (R-RETRY-EXCLUDE), falling back to the admitted set when the
 * exclusions would leave nobody. */
int32_t pd_gw_pick(pd_gw_t *gw, pd_rq_t *rq, pd_role_t role) {
  uint32_t cand[PD_MAX_WORKERS], load[PD_MAX_WORKERS];
  uint32_t n = 0, n_all = 0, n_full_fresh = 0;
  uint32_t all[PD_MAX_WORKERS];
  for (uint32_t w = 0; w < gw->n_workers[role]; w++) {
    load[w] = gw->workers[role][w].load;
    if (!pd_gw_group_ok(gw, role, w)) continue; /* R-PAIR-GROUP */
    pd_breaker_t *b = &gw->workers[role][w].breaker;
    pd_breaker_state_t before = b->state;
    int ok = pd_breaker_can_execute(b, gw->now);
    if (b->state != before) { /* the lazy Open->HalfOpen move (R3.6), made visible */
      pd_action_t *a = pd_gw_emit(gw, PD_ACT_BREAKER, rq);
      a->role = role;
      a->worker = w;
      a->flag = (int)b->state;
    }
    if (!ok) continue;
    int is_excl = gw->cfg.mode == PD_MODE_REFERENCE && is_excluded(rq, role, w);
    if (!gw->is_pick_unlimited && !pd_admit_has_room(gw, role, w)) { /* at its limit (R-ADMIT-LIMIT) */
      n_full_fresh += !is_excl;
      continue;
    }
    all[n_all++] = w;
    if (is_excl) continue;
    cand[n++] = w;
  }
  /* R-ADMIT-QUEUE: an untried worker is only full: wait for it rather than go back to one
   * that failed the request (R-RETRY-EXCLUDE) */
  if (n == 0 && n_full_fresh) return PD_PICK_WAIT;
  if (n == 0) return pd_policy_pick(&gw->policy[role], all, n_all, load, gw->rng);
  return pd_policy_pick(&gw->policy[role], cand, n, load, gw->rng);
}

pd_leg_t *pd_gw_leg_new(pd_gw_t *gw, pd_rq_t *rq, pd_role_t role, uint32_t w) {
  if (rq->n_legs >= PD_MAX_LEGS) return NULL;
  pd_leg_t *leg = pd_calloc(gw->alloc, 1, sizeof *leg);
  if (!leg) return NULL;
  leg->id = gw->next_leg_id++;
  leg->role = role;
  leg->worker = w;
  leg->attempt = rq->attempt;
  leg->t_open_ns = gw->now;
  pd_sse_init(&leg->sse, gw->alloc);
  if (gw->cfg.request_timeout_ns) leg->deadline_ns = gw->now + gw->cfg.request_timeout_ns;
  rq->legs[rq->n_legs++] = leg;
  rq->cur_id[role] = leg->id;
  return leg;
}

#define PD_ROOM_MASK ((1ull << 53) - 1) /* exact in every JSON parser that uses doubles */

static int render(pd_gw_t *gw, pd_rq_t *rq, uint32_t pw, char **body, size_t *len) {
  uint32_t n = rq->req.batch_size ? rq->req.batch_size : 1;
  uint64_t rooms_small[8];
  uint64_t *rooms = n <= 8 ? rooms_small : pd_calloc(gw->alloc, n, sizeof *rooms);
  if (!rooms) return PD_ERR_NOMEM;
  for (uint32_t i = 0; i < n; i++) rooms[i] = pd_prng_next(gw->rng) & PD_ROOM_MASK;
  if (gw->cfg.seeded_bug == PD_BUG_SHARED_BATCH_ROOM && n >= 2) rooms[1] = rooms[0];
  if (gw->cfg.mode == PD_MODE_REFERENCE) {
    char rid[40] = "pdref-"; /* "pdref-%016llx", written by hand: one per attempt */
    uint64_t v = pd_prng_next(gw->rng);
    for (int i = 0; i < 16; i++) rid[6 + i] = "0123456789abcdef"[v >> (60 - 4 * i) & 15];
    rid[22] = '\0';
    pd_free(gw->alloc, rq->rid);
    rq->rid = pd_strndup(gw->alloc, rid, strlen(rid));
    if (!rq->rid) {
      if (rooms != rooms_small) pd_free(gw->alloc, rooms);
      return PD_ERR_NOMEM;
    }
  }
  const pd_worker_t *p = &gw->workers[PD_ROLE_PREFILL][pw];
  /* R-PAIR-RANK: the reference sends no DP rank of the client's: both legs follow the room */
  pd_bootstrap_t b = {p->host, p->port, rooms, rq->rid, -1, gw->cfg.mode == PD_MODE_REFERENCE};
  int rc = pd_request_render(&rq->req, &b, body, len);
  if (rooms != rooms_small) pd_free(gw->alloc, rooms);
  return rc;
}

void pd_gw_open_leg(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *body,
                    size_t len) {
  pd_action_t *a = pd_gw_emit(gw, PD_ACT_OPEN_LEG, rq);
  a->leg_id = leg->id;
  a->role = leg->role;
  a->worker = leg->worker;
  a->str = pd_route_path(rq->req.route);
  if (rq->sf_xrid[0]) a->xrid = (const char *)pd_gw_keep(gw, rq->sf_xrid, strlen(rq->sf_xrid));
  a->data = body;
  a->len = len;
  a->deadline_ns = gw->cfg.connect_timeout_ns ? gw->now + gw->cfg.connect_timeout_ns : 0;
}

int pd_gw_start_attempt(pd_gw_t *gw, pd_rq_t *rq) {
  if (gw->cfg.protocol == PD_PROTOCOL_VLLM) return pd_sf_start_attempt(gw, rq);
  /* R-ADMIT-BOTH: both legs are admitted together, or the request waits (not an attempt) */
  if (pd_admit_is_on(gw) && !pd_admit_pair_has_room(gw)) return PD_ADMIT_WAIT;
  rq->attempt++;
  int32_t pw = pd_gw_pick(gw, rq, PD_ROLE_PREFILL); /* R1.13: prefill first, then decode */
  if (pw >= 0) gw->pick_group = gw->workers[PD_ROLE_PREFILL][pw].group; /* R-PAIR-GROUP */
  int32_t dw = pw < 0 ? -1 : pd_gw_pick(gw, rq, PD_ROLE_DECODE);
  gw->pick_group = -1;
  if (pw == PD_PICK_WAIT || dw == PD_PICK_WAIT) { /* not an attempt: it waits for room */
    rq->attempt--;
    return PD_ADMIT_WAIT;
  }
  if (pw < 0 || dw < 0) { /* R1.9: an attempt that failed at selection is still an attempt */
    pd_action_t *at = pd_gw_emit(gw, PD_ACT_ATTEMPT, rq);
    at->status = (int)rq->attempt;
    at->flag = pw;
    at->worker = dw < 0 ? UINT32_MAX : (uint32_t)dw;
    return 503;
  }
  char *body = NULL;
  size_t len = 0;
  int rc = render(gw, rq, (uint32_t)pw, &body, &len);
  if (rc) return rc;
  const uint8_t *kept = pd_gw_keep(gw, body, len);
  pd_free(gw->alloc, body);
  if (!kept) return PD_ERR_NOMEM;
  pd_action_t *at = pd_gw_emit(gw, PD_ACT_ATTEMPT, rq);
  at->status = (int)rq->attempt;
  at->flag = pw;
  at->worker = (uint32_t)dw;
  pd_leg_t *p = pd_gw_leg_new(gw, rq, PD_ROLE_PREFILL, (uint32_t)pw);
  pd_leg_t *d = p ? pd_gw_leg_new(gw, rq, PD_ROLE_DECODE, (uint32_t)dw) : NULL;
  if (!d) {
    if (p) pd_gw_drop_leg(gw, rq, p);
    return PD_ERR_NOMEM;
  }
  if (gw->cfg.mode != PD_MODE_MINILB) { /* R1.27: guards before sending; mini_lb has none */
    pd_gw_load_acquire(gw, rq, PD_ROLE_PREFILL, (uint32_t)pw);
    pd_gw_load_acquire(gw, rq, PD_ROLE_DECODE, (uint32_t)dw);
    pd_breaker_admit(&gw->workers[0][pw].breaker, gw->now, &p->probe);
    pd_breaker_admit(&gw->workers[1][dw].breaker, gw->now, &d->probe);
  }
  pd_gw_open_leg(gw, rq, p, kept, len);
  pd_gw_open_leg(gw, rq, d, kept, len);
  return 0;
}

/* ---------- deadlines ---------- */

/* A deadline entry's c is its request (the heap's items carry integers). */
static pd_rq_t *entry_rq(const pd_heap_item_t *it) { return (pd_rq_t *)(uintptr_t)it->c; }

static void deadline_track(const pd_heap_item_t *it, size_t index) {
  entry_rq(it)->dl_index = index;
}

void pd_gw_deadlines_init(pd_gw_t *gw) {
  pd_heap_init(&gw->deadlines, gw->alloc, 0);
  pd_heap_set_track(&gw->deadlines, deadline_track);
}

static void disarm(pd_gw_t *gw, pd_rq_t *rq) {
  if (rq->dl_index != PD_HEAP_NONE) pd_heap_remove(&gw->deadlines, rq->dl_index, NULL);
  assert(rq->dl_index == PD_HEAP_NONE);
}

/* Arm the request's earliest deadline. One that does not move keeps its entry, and so its
 * place among equal deadlines; one that moves is armed anew, after those already armed. */
void pd_gw_rearm(pd_gw_t *gw, pd_rq_t *rq) {
  uint64_t t = rq->is_settle_due ? rq->settle_at : UINT64_MAX; /* may be 0: MAX = none */
  for (int i = 0; i < DL_COUNT; i++)
    if (rq->dl[i] && rq->dl[i] < t) t = rq->dl[i];
  for (uint32_t i = 0; i < rq->n_legs; i++) {
    uint64_t d = rq->legs[i]->deadline_ns;
    if (d && (rq->legs[i]->state == LEG_OPEN || rq->legs[i]->state == LEG_HEAD) && d < t)
      t = d;
  }
  if (rq->dl_index != PD_HEAP_NONE && gw->deadlines.v[rq->dl_index].t_ns == t) return;
  if (rq->dl_index != PD_HEAP_NONE && t != UINT64_MAX) { /* moved: removed and pushed, in one */
    pd_heap_rekey(&gw->deadlines, rq->dl_index, t);
    return;
  }
  disarm(gw, rq);
  if (t == UINT64_MAX) return;
  pd_heap_item_t it = {.t_ns = t, .b = rq->id, .c = (uint64_t)(uintptr_t)rq};
  int rc = pd_heap_push(&gw->deadlines, &it); /* cannot fail: room kept per live request */
  assert(rc == 0);
  (void)rc;
}

static void fire_deadlines(pd_gw_t *gw, pd_rq_t *rq, const pd_mode_ops_t *ops) {
  if (rq->is_settle_due && rq->settle_seq != gw->feed_seq && rq->settle_at <= gw->now) {
    /* the end of an earlier step's instant: settle first */
    rq->is_settle_due = 0;
    ops->on_deadline(gw, rq, DL_SETTLE);
  }
  /* per-leg transport deadlines (reqwest / aiohttp total timeouts) */
  for (uint32_t guard = 0; guard < PD_MAX_LEGS; guard++) {
    pd_leg_t *due = NULL;
    for (uint32_t i = 0; i < rq->n_legs; i++) {
      pd_leg_t *l = rq->legs[i];
      if (l->deadline_ns && l->deadline_ns <= gw->now &&
          (l->state == LEG_OPEN || l->state == LEG_HEAD)) {
        due = l;
        break;
      }
    }
    if (!due) break;
    pd_action_t *a = pd_gw_emit(gw, PD_ACT_CLOSE_LEG, rq); /* the client gives up on it */
    a->leg_id = due->id;
    a->role = due->role;
    a->worker = due->worker;
    if (gw->cfg.mode == PD_MODE_REFERENCE && rq->rid) /* R-CANCEL: a hung leg holds a slot */
      a->str = (const char *)pd_gw_keep(gw, rq->rid, strlen(rq->rid));
    PD_LEG_SET(gw, rq, due, LEG_FAILED);
    due->deadline_ns = 0;
    ops->on_error(gw, rq, due, PD_UPSTREAM_ERROR_TIMEOUT);
  }
  for (int i = 0; i < DL_COUNT; i++) {
    if (!rq->dl[i] || rq->dl[i] > gw->now) continue;
    rq->dl[i] = 0;
    ops->on_deadline(gw, rq, i);
  }
}

/* ---------- feed ---------- */

static int client_request(pd_gw_t *gw, const pd_event_t *ev) {
  if (pd_map_find(&gw->map, ev->req_id) != SIZE_MAX) return PD_ERR_INVAL;
  pd_rq_t *rq = pd_calloc(gw->alloc, 1, sizeof *rq);
  if (!rq) return PD_ERR_NOMEM;
  rq->id = ev->req_id;
  rq->dl_index = PD_HEAP_NONE;
  rq->t_start_ns = gw->now;
  rq->prio = (unsigned)ev->prio < PD_PRIO_COUNT ? ev->prio : PD_PRIO_STANDARD;
  char err[256];
  int rc = pd_request_parse(&rq->req, gw->alloc, ev->path ? ev->path : "",
                            (const char *)ev->data, ev->len, batch_rule(gw->cfg.mode), err,
                            sizeof err);
  if (rc == 0 && gw->cfg.protocol == PD_PROTOCOL_VLLM && rq->req.route == PD_ROUTE_GENERATE) {
    pd_request_free(&rq->req); /* vLLM's servers and proxies serve only the OpenAI routes */
    snprintf(err, sizeof err, "path: /generate is not a route of the vllm protocol");
    rc = PD_ERR_ROUTE;
  }
  if (rc) {
    int st = rc == PD_ERR_ROUTE ? 404 : rc == PD_ERR_TOO_LARGE ? 413
             : rc == PD_ERR_NOMEM ? 500 : 400;
    pd_gw_client_error(gw, rq, st, rc == PD_ERR_ROUTE ? "unknown_route" : "invalid_request", err);
    PD_RQ_SET(gw, rq, RQ_END); /* never in the map: freed at once */
    pd_request_free(&rq->req);
    pd_free(gw->alloc, rq);
    return 0;
  }
  /* room for one deadline per live request, so arming one never fails */
  if ((rc = pd_heap_reserve(&gw->deadlines, pd_map_len(&gw->map) + 1)) ||
      (rc = pd_map_put(&gw->map, rq->id, rq))) {
    pd_request_free(&rq->req);
    pd_free(gw->alloc, rq);
    return rc;
  }
  pd_gw_budget_note_request(gw); /* R-RETRY-BUDGET */
  rq->is_fast_path = gw->cfg.mode == PD_MODE_PR1150 && rq->req.is_stream &&
                     !rq->req.return_logprob;
  if (gw->cfg.total_timeout_ns) rq->dl[DL_TOTAL] = gw->now + gw->cfg.total_timeout_ns;
  if (gw->cfg.commit_timeout_ns) /* R-PROGRESS: the first byte, across every attempt */
    rq->dl[DL_COMMIT] = gw->now + gw->cfg.commit_timeout_ns + pd_gw_work_allowance_ns(gw, rq);
  pd_gw_begin(gw, rq);
  assert(rq->state != RQ_NEW); /* started, waiting to retry, or answered */
  return 0;
}

void pd_gw_begin(pd_gw_t *gw, pd_rq_t *rq) {
  const pd_mode_ops_t *ops = mode_ops(gw);
  if (pd_admit_too_late(gw, rq)) return; /* R-ADMIT-QUEUE: its turn came too late */
  int rc = pd_gw_start_attempt(gw, rq);
  if (rc == PD_ADMIT_WAIT) { /* R-ADMIT-QUEUE: wait for room, or be shed */
    pd_admit_wait(gw, rq);
    return;
  }
  if (rq->is_queued && rc == 0) pd_admit_started(gw);
  if (rc == 0) rq->t_try_ns = gw->now;
  pd_admit_unlink(gw, rq); /* it started (or was answered): out of the queue */
  if (rc == 0) {
    ops->on_start(gw, rq);
  } else if (rc > 0) {
    ops->on_no_pair(gw, rq, rc);
  } else {
    pd_gw_close_all(gw, rq, 1);
    pd_gw_release_load(gw, rq, PD_ROLE_PREFILL);
    pd_gw_release_load(gw, rq, PD_ROLE_DECODE);
    pd_gw_client_error(gw, rq, 500, "internal_error", pd_strerror(rc));
  }
}

int pd_gw_feed(pd_gw_t *gw, uint64_t now_ns, const pd_event_t *ev, pd_actbuf_t *out) {
  if (!gw || !ev || !out) return PD_ERR_INVAL;
  if (pd_actbuf_reserve(out, PD_MAX_ACTIONS_PER_EVENT)) return PD_ERR_NOMEM; /* nothing done */
  gw->out = out;
  gw->now = now_ns;
  gw->feed_seq++;
  out->step_start = out->n;
  if (ev->kind == PD_EV_CLIENT_REQUEST) {
    int rc = client_request(gw, ev);
    size_t slot = pd_map_find(&gw->map, ev->req_id);
    if (slot != SIZE_MAX) pd_gw_finish(gw, slot);
    return rc;
  }
  size_t slot = pd_map_find(&gw->map, ev->req_id);
  if (slot == SIZE_MAX) return 0;
  pd_rq_t *rq = gw->map.vals[slot];
  const pd_mode_ops_t *ops = mode_ops(gw);
  pd_leg_t *leg = NULL;
  if (ev->kind >= PD_EV_UP_HEAD && ev->kind <= PD_EV_UP_ERROR) {
    leg = pd_gw_leg(rq, ev->leg_id);
    if (!leg || leg->state == LEG_FAILED || leg->state == LEG_ENDED) return 0;
  }
  switch (ev->kind) {
  case PD_EV_UP_HEAD:
    if (leg->state != LEG_OPEN) return 0;
    PD_LEG_SET(gw, rq, leg, LEG_HEAD);
    leg->status = ev->status;
    ops->on_head(gw, rq, leg);
    break;
  case PD_EV_UP_DATA:
    if (leg->state != LEG_HEAD) return 0;
    if (leg->status >= 200 && leg->status < 300) pd_gw_note_progress(gw, leg); /* R-BREAKER-BUSY */
    ops->on_data(gw, rq, leg, ev->data, ev->len);
    break;
  case PD_EV_UP_END:
    if (leg->state != LEG_HEAD) return 0;
    PD_LEG_SET(gw, rq, leg, LEG_ENDED);
    ops->on_end(gw, rq, leg);
    break;
  case PD_EV_UP_ERROR:
    PD_LEG_SET(gw, rq, leg, LEG_FAILED);
    leg->is_abort_owed = ev->uperr != PD_UPSTREAM_ERROR_CONNECT;
    ops->on_error(gw, rq, leg, ev->uperr);
    break;
  case PD_EV_CLIENT_BLOCKED:
    /* A stall the client causes is nobody's upstream fault: the idle deadline (reference)
       is suspended while the driver holds decode back, and restarts in full after. The
       total deadline still runs; a client gone for good is noticed by the driver. */
    if (pd_rq_client_done(rq) || !!ev->status == rq->is_client_blocked) return 0;
    rq->is_client_blocked = !!ev->status;
    if (rq->is_client_blocked)
      rq->dl[DL_IDLE] = 0;
    else if (rq->is_committed && gw->cfg.idle_timeout_ns)
      rq->dl[DL_IDLE] = gw->now + gw->cfg.idle_timeout_ns;
    break;
  case PD_EV_CLIENT_GONE:
    if (pd_rq_client_done(rq)) return 0;
    ops->on_client_gone(gw, rq); /* reads the state the client left */
    PD_RQ_SET(gw, rq, RQ_GONE);
    break;
  default: return PD_ERR_INVAL;
  }
  pd_gw_finish(gw, slot);
  return 0;
}

void pd_gw_finish(pd_gw_t *gw, size_t slot) {
  pd_rq_t *rq = gw->map.vals[slot];
  if (pd_rq_client_done(rq) && rq->n_legs == 0) {
    PD_RQ_SET(gw, rq, RQ_END); /* releases what loads remain, emits DONE */
    pd_map_remove_slot(&gw->map, slot);
    disarm(gw, rq);
    pd_gw_rq_del(gw, rq);
    return;
  }
  if (pd_rq_client_done(rq) && !rq->dl[DL_TAIL] && gw->cfg.prefill_tail_timeout_ns)
    rq->dl[DL_TAIL] = gw->now + gw->cfg.prefill_tail_timeout_ns; /* R-TAIL */
  pd_gw_rearm(gw, rq);
}

uint64_t pd_gw_get_expiry(const pd_gw_t *gw) {
  const pd_heap_item_t *top = pd_heap_peek(&gw->deadlines);
  return top ? top->t_ns : UINT64_MAX;
}

size_t pd_gw_deadlines_armed(const pd_gw_t *gw) { return pd_heap_len(&gw->deadlines); }

int pd_gw_handle_expiry(pd_gw_t *gw, uint64_t now_ns, pd_actbuf_t *out) {
  if (!gw || !out) return PD_ERR_INVAL;
  gw->out = out;
  gw->now = now_ns;
  const pd_mode_ops_t *ops = mode_ops(gw);
  /* Entries armed from here on carry a seq >= armed_before and t >= now_ns (every deadline is
   * now or later), so they sort after every due entry armed before: the first one on top
   * ends the call. Each earlier entry fires at most once: the length bounds the loop. */
  const uint64_t armed_before = gw->deadlines.next_seq;
  for (size_t guard = pd_heap_len(&gw->deadlines); guard > 0; guard--) {
    const pd_heap_item_t *top = pd_heap_peek(&gw->deadlines);
    if (!top || top->t_ns > now_ns || top->seq >= armed_before) break;
    /* the deadline stays armed when there is no room: the next call fires it */
    if (pd_actbuf_reserve(out, PD_MAX_ACTIONS_PER_EVENT)) return PD_ERR_NOMEM;
    pd_rq_t *rq = entry_rq(top);
    pd_heap_pop(&gw->deadlines, NULL);
    size_t slot = pd_map_find(&gw->map, rq->id);
    assert(slot != SIZE_MAX && gw->map.vals[slot] == rq); /* a freed request is disarmed */
    gw->feed_seq++; /* each request's expiry is a step of its own (DL_SETTLE) */
    out->step_start = out->n;
    fire_deadlines(gw, rq, ops);
    pd_gw_finish(gw, slot);
  }
  return 0;
}
