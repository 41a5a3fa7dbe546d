/* The verdict of a socket run once its legs are tied to requests (pd_conform_judge.c): rebuild
 * the simulator's records (pd_client_request_t with its pd_worker_leg_t list) from the mocks' legs
 * and judge every request with pd_check_request, the simulator's own checker; then the run-level I8
 * findings (a leg re-sent to its worker, room collisions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_conform_int.h"
#include "pd_hash.h"

typedef pd_conform_unit_t unit_t;


static int made_up_rid(const char *r) { /* the mock's own: 32 lowercase hex digits */
  size_t n = strlen(r);
  if (n != 32) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((r[i] >= '0' && r[i] <= '9') || (r[i] >= 'a' && r[i] <= 'f'))) return 0;
  return 1;
}

static pd_worker_leg_t *to_wleg(pd_conform_runner_t *run, const pd_conform_logged_leg_t *m,
                                size_t idx, const pd_conform_req_t *q, uint32_t attempt) {
  pd_worker_leg_t *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  l->leg_id = idx + 1;
  l->req_id = q->c.id;
  l->attempt = attempt;
  l->role = m->role;
  l->worker = m->worker;
  l->is_stream = m->is_stream;
  l->has_logprob = m->has_logprob;
  l->n_rooms = m->has_room ? (m->n_rooms ? m->n_rooms : 1) : 0;
  l->room = m->room;
  l->has_rid = m->rid_given >= 0 ? m->rid_given : !made_up_rid(m->rid);
  size_t rl = strlen(m->rid);
  if (rl < sizeof l->rid) /* a longer rid keeps its head and a hash of the whole */
    memcpy(l->rid, m->rid, rl + 1);
  else
    snprintf(l->rid, sizeof l->rid, "%.24s#%016llx", m->rid,
             (unsigned long long)pd_fnv1a_str(PD_FNV1A_OFFSET, m->rid));
  if (m->has_hash) {
    l->rooms_hash = m->rooms_hash;
  } else {
    char nr[16], bp[16];
    snprintf(nr, sizeof nr, "|%d|", m->n_rooms);
    snprintf(bp, sizeof bp, "|%d", m->boot_port);
    uint64_t h = pd_fnv1a_str(pd_fnv1a_str(PD_FNV1A_OFFSET, m->room_s), nr);
    l->rooms_hash = pd_fnv1a_str(pd_fnv1a_str(h, m->host), bp);
  }
  l->tokens = q->c.tokens;
  l->fault = m->fault;
  l->slot_taken = m->slot_taken;
  l->t_slot_taken = m->t_slot_taken;
  l->t_slot_freed = m->t_slot_freed;
  l->kv_pages = m->kv_pages;
  l->kv_pages_max = m->kv_pages_max;
  l->t_kv_freed = m->t_kv_freed;
  l->truth = m->truth;
  l->injected_status = m->fault == PD_FAULT_STATUS ? m->end_status : m->reject_status;
  l->aborts = m->aborts;
  l->lag_ms = m->fired >> PD_FAULT_PREFILL_LAG & 1u; /* applied (the amount is the mock's) */
  l->kv_from = m->kv_from; /* V1.15: a decode served from freed blocks (I19 where judged) */
  l->drip_ms = m->fired >> PD_FAULT_SLOW_DRIP & 1u;
#if PD_INVARIANT_COUNT >= 17 /* the checker knows crash hits and every room of a batch */
  uint64_t crash = run->t_crash[m->worker], closed = pd_conform_leg_closed(m);
  l->is_crash_hit = crash && m->t_arrive <= crash && (!closed || closed >= crash);
  l->is_room_scalar = m->has_room && m->room_array == 0;
  if (m->rooms && l->n_rooms > 1) {
    l->rooms = malloc((size_t)l->n_rooms * sizeof *l->rooms);
    if (l->rooms) memcpy(l->rooms, m->rooms, (size_t)l->n_rooms * sizeof *l->rooms);
    else run->n_nomem++; /* judged on its first room alone: the verdict is an error */
  }
#endif
  /* I21, I22: the leg reached its mock (it is in its log); the prefill its bootstrap port
   * names (each prefill mock has its own); the DP ranks its body named */
  l->is_reached = 1;
  l->boot_node = -1;
  for (uint32_t i = 0; m->role == PD_ROLE_DECODE && m->boot_port > 0 && i < run->s->n_workers; i++)
    if (run->s->workers[i].role == PD_ROLE_PREFILL && run->wk[i].boot_port == m->boot_port)
      l->boot_node = (int)i;
  l->has_routed_rank = m->routed_dp_rank >= 0;
  l->routed_rank = m->routed_dp_rank >= 0 ? (uint32_t)m->routed_dp_rank : 0;
  l->has_prefill_rank = m->prefill_dp_rank >= 0;
  l->prefill_rank = m->prefill_dp_rank >= 0 ? (uint32_t)m->prefill_dp_rank : 0;
  l->t_open = m->t_arrive;
  l->t_gw_closed = pd_conform_leg_closed(m);
  l->gw_open = !l->t_gw_closed;
  return l;
}

/* PDREF_CONFORM_DEBUG=1: each request and the legs tied to it, on stderr (ms). */
static void debug_request(const pd_conform_runner_t *run, const pd_conform_req_t *q,
                          const unit_t *u, uint32_t nu, uint32_t v, const char *why) {
  const pd_client_request_t *c = &q->c;
  fprintf(stderr, "req %llu: [%#x %s] sent %.3f end %.3f status %d%s%s%s first_data %.3f\n",
          (unsigned long long)c->id, v, v ? why : "",
          (double)c->t_arrival / 1e6, (double)c->t_end / 1e6,
          c->head_status, c->gone ? " gone" : "", q->is_cut ? " cut" : "",
          c->aborted ? " aborted" : "", (double)c->t_first_data / 1e6);
  if (getenv("PDREF_CONFORM_DEBUG")[0] == '2') fprintf(stderr, "  body: %.300s\n", q->first);
  for (uint32_t i = 0; i < nu; i++) {
    if (u[i].client != (int32_t)c->id) continue;
    for (uint32_t k = 0; k < u[i].n; k++) {
      const pd_conform_logged_leg_t *m = &run->legs[u[i].leg[k]];
      fprintf(stderr, "  att %u %s %-3s rid %.24s room %s arrive %.3f closed %.3f freed %.3f "
              "truth %d fault %d status %d\n", u[i].attempt, run->s->workers[m->worker].name,
              m->role == PD_ROLE_PREFILL ? "P" : "D", m->rid, m->room_s,
              (double)m->t_arrive / 1e6, (double)pd_conform_leg_closed(m) / 1e6,
              (double)m->t_slot_freed / 1e6, m->truth, m->fault, m->end_status);
    }
  }
}

/* I6 on sockets: attempt x (a second or later) was opened after bytes reached the client.
 * The gateway opens an attempt before its first leg reaches a worker, so only an arrival
 * inside the client's commit window proves it: after the first byte of an SSE response and
 * before the client's end (an SSE head, or a 2xx stream served as application/json: the toy
 * proxy's, V1.24). A leg that reached its worker after the end may belong to an
 * attempt opened before it (the last attempt's refused prefill ends the request with 502
 * while its decode request is still on its way); a gateway that really opened an attempt for
 * a client already gone leaves its legs open past the end, which I2 judges. A whole answer
 * (a non-stream body, an error document) is one piece on the wire: no window. */
static int opened_after_commit(const pd_conform_req_t *q, const unit_t *x) {
  uint64_t first = q->c.t_first_data, end = pd_conform_client_end(q);
  if (!first || !pd_conform_reads_sse(&q->c) || x->t_first <= first) return 0;
  return !end || x->t_first < end;
}

#if PD_INVARIANT_COUNT >= PD_CONFORM_INV_RETRY_FAILED
/* Did the worker of logged leg k fail the request by itself, as its own log shows? Refused
 * (truth never), or failed or stalled by its own fault that took effect (a `fault` line of
 * its kind), or hit by its worker's crash. A leg stalled while another leg of its attempt
 * failed may have been cut for its partner's failure before it showed the gateway anything:
 * not counted. */
static int log_failed(const pd_conform_runner_t *run, const unit_t *x, uint32_t k) {
  const pd_conform_logged_leg_t *m = &run->legs[x->leg[k]];
  if (m->truth == PD_TRUTH_NEVER) return 1;
  if (m->truth != PD_TRUTH_FAILED && m->truth != PD_TRUTH_STALLED) return 0;
  uint64_t crash = run->t_crash[m->worker], closed = pd_conform_leg_closed(m);
  if (crash && m->t_arrive <= crash && (!closed || closed >= crash)) return 1;
  if (m->fault < 0 || !(m->fired >> m->fault & 1u)) return 0;
  if (m->truth == PD_TRUTH_STALLED)
    for (uint32_t i = 0; i < x->n; i++)
      if (i != k && (run->legs[x->leg[i]].truth == PD_TRUTH_FAILED ||
                     run->legs[x->leg[i]].truth == PD_TRUTH_NEVER))
        return 0;
  return 1;
}

/* Worker wi shows in the logs a failure of any request before t (a leg of it that failed
 * by itself, or its crash): its breaker may rightly be open, so it need not be eligible. */
static int failed_before(const pd_conform_runner_t *run, const unit_t *u, uint32_t nu,
                         uint32_t wi, uint64_t t) {
  if (run->t_crash[wi] && run->t_crash[wi] <= t) return 1;
  for (uint32_t i = 0; i < nu; i++)
    for (uint32_t k = 0; k < u[i].n; k++) {
      const pd_conform_logged_leg_t *m = &run->legs[u[i].leg[k]];
      if (m->worker == wi && m->t_arrive < t && log_failed(run, &u[i], k)) return 1;
    }
  return 0;
}

/* Request rq tried worker wi (role r) in an attempt before `before`; failed_only: and that
 * worker failed it by itself. */
static int req_tried(const pd_conform_runner_t *run, const unit_t *u, uint32_t nu, int32_t rq,
                     uint32_t wi, uint32_t before, int failed_only) {
  for (uint32_t i = 0; i < nu; i++) {
    if (u[i].client != rq || u[i].attempt >= before) continue;
    for (uint32_t k = 0; k < u[i].n; k++)
      if (run->legs[u[i].leg[k]].worker == wi && (!failed_only || log_failed(run, &u[i], k)))
        return 1;
  }
  return 0;
}

/* I16 over sockets, from the worker logs alone (a black box shows no breaker): a leg of
 * attempt k >= 2 reached a worker that failed this request by itself in an earlier attempt,
 * while a worker of the same role the request had not tried was certainly eligible: the logs
 * show it failing nothing and not down before that leg arrived (a gateway's breaker opens
 * only on failures). An untried worker that had failed elsewhere excuses the retry: its
 * breaker may have been open. So a socket I16 is always a real one; an I16 the simulator
 * finds through the breaker's view may not show here (conform holds an expected I16 to
 * "judged if seen", pd_conform.c observe). */
static uint32_t log_retry_target(const pd_conform_runner_t *run, const unit_t *u, uint32_t nu,
                                 int32_t rq, char *reason, size_t cap) {
  for (uint32_t i = 0; i < nu; i++) {
    if (u[i].client != rq || u[i].attempt < 2) continue;
    for (uint32_t k = 0; k < u[i].n; k++) {
      const pd_conform_logged_leg_t *m = &run->legs[u[i].leg[k]];
      if (!req_tried(run, u, nu, rq, m->worker, u[i].attempt, 1)) continue;
      for (uint32_t w = 0; w < run->s->n_workers; w++) {
        if (run->s->workers[w].role != m->role || w == m->worker ||
            req_tried(run, u, nu, rq, w, u[i].attempt, 0) ||
            failed_before(run, u, nu, w, m->t_arrive))
          continue;
        snprintf(reason, cap, "I16 attempt %u went back to %s, which failed it, while %s was "
                 "untried and, by the logs, had failed nothing", u[i].attempt,
                 run->s->workers[m->worker].name, run->s->workers[w].name);
        return PD_CONFORM_BIT(PD_CONFORM_INV_RETRY_FAILED);
      }
    }
  }
  return 0;
}
#endif

/* R-ADMIT-SHED over sockets: a 503 at t sheds at capacity when more client requests were in
 * flight at t than a role's workers can run together (their max_running): the first test of
 * the simulator's role_at_capacity (pd_world_loop.c), from the client records alone. The
 * second (every worker of a role full by its slots) needs the mocks' slot times on the
 * runner's clock; the first is enough for a gateway that holds the excess at its door. */
static int shed_at_capacity(const pd_conform_runner_t *run, uint64_t t) {
  uint64_t waiting = 0;
  for (uint32_t i = 0; i < run->n_reqs; i++) {
    const pd_client_request_t *c = &run->reqs[i].c;
    if (c->t_arrival > t) continue;
    uint64_t end = pd_conform_client_end(&run->reqs[i]);
    waiting += !end || end > t;
  }
  for (int r = 0; r < 2; r++) {
    uint64_t cap = 0;
    for (uint32_t i = 0; i < run->s->n_workers; i++)
      if (run->s->workers[i].role == (pd_role_t)r) cap += run->s->workers[i].max_running;
    if (waiting > cap) return 1;
  }
  return 0;
}

static void judge_one(pd_conform_runner_t *run, pd_conform_req_t *q, unit_t *u, uint32_t nu) {
  pd_client_request_t *rq = &q->c;
  uint32_t attempt = 0;
  for (uint32_t i = 0; i < nu; i++) { /* u is sorted by t_first: attempts in order */
    if (u[i].client != (int32_t)rq->id) continue;
    u[i].attempt = ++attempt;
    if (attempt > 1 && opened_after_commit(q, &u[i]))
      rq->retry_after_commit = 1;
    for (uint32_t k = 0; k < u[i].n; k++) {
      pd_worker_leg_t *l = to_wleg(run, &run->legs[u[i].leg[k]], (size_t)u[i].leg[k], q, attempt);
      if (!l) { /* a request judged without one of its legs: the verdict is an error */
        run->n_nomem++;
        continue;
      }
      l->next_in_req = rq->legs;
      rq->legs = l;
      rq->n_legs++;
      run->r->legs++;
    }
  }
  rq->attempts = attempt;
#if PD_INVARIANT_COUNT >= 15 /* I15 (served) reads whether the world was healthy all along */
  uint64_t end = pd_conform_client_end(q);
  rq->was_healthy = !pd_conform_failure_before(run, end ? end : q->t_bound);
#endif
  if (rq->head_status == 503) rq->is_shed_at_capacity = shed_at_capacity(run, rq->t_head);
  char reason[160] = "";
  run->judge.now = run->t_gw_stop; /* what is still open is judged open at the stop */
  uint32_t v = pd_check_request(&run->judge, rq, reason, sizeof reason) & run->r->judged;
#if PD_INVARIANT_COUNT >= PD_CONFORM_INV_RETRY_FAILED
  if (run->r->judged & PD_CONFORM_BIT(PD_CONFORM_INV_RETRY_FAILED)) {
    char why[160] = "";
    uint32_t r16 = log_retry_target(run, u, nu, (int32_t)rq->id, why, sizeof why);
    if (r16 && !v) snprintf(reason, sizeof reason, "%s", why);
    v |= r16;
  }
#endif
  if (getenv("PDREF_CONFORM_DEBUG")) debug_request(run, q, u, nu, v, reason);
  if (v) {
    run->violations |= v;
    if (!run->stats.first_violating_req_valid) {
      run->stats.first_violating_req_valid = 1;
      run->stats.first_violating_req = rq->id;
      snprintf(run->stats.first_reason, sizeof run->stats.first_reason, "request %llu: %s",
               (unsigned long long)rq->id, reason);
    }
  }
  while (rq->legs) {
    pd_worker_leg_t *nx = rq->legs->next_in_req;
#if PD_INVARIANT_COUNT >= 17
    free(rq->legs->rooms);
#endif
    free(rq->legs);
    rq->legs = nx;
  }
}

void pd_conform_judge_init(pd_conform_runner_t *run) {
  const pd_conform_opts_t *o = run->o;
  pd_mode_t mode = o->has_mode ? o->mode : PD_MODE_REFERENCE;
  pd_gw_config_t gcfg;
  pd_scenario_gw_config(run->s, mode, &gcfg);
  uint32_t att = gcfg.retry.max_attempts ? gcfg.retry.max_attempts : 1;
  run->judge = (pd_judge_t){
      .s = run->ss,
      .mode = mode,
      .is_outcome_blind = 1, /* outcomes come from /metrics, per worker (pd_conform_metrics.c) */
      .max_attempts = o->has_mode ? att : UINT32_MAX, /* no mode label: I7 is not judged */
      .now = 0,
      .stats = &run->stats,
  };
}

int pd_conform_judge(pd_conform_runner_t *run, char *err, size_t cap) {
  unit_t *u = calloc(run->n_legs + 1, sizeof *u);
  if (!u) {
    snprintf(err, cap, "out of memory judging %zu legs", run->n_legs);
    return -1;
  }
  uint32_t nu = pd_conform_attribute(run, u);
  for (uint32_t r = 0; r < run->n_reqs; r++) {
    pd_conform_req_t *q = &run->reqs[r];
    if (!q->c.t_arrival) continue; /* never sent (the run was stopped) */
    judge_one(run, q, u, nu);
    if (q->is_cut) run->r->cut_off++;
  }
  for (size_t i = 0; i < run->n_legs && (run->r->judged & PD_CONFORM_BIT(PD_INVARIANT_ROOMS));
       i++) {
    const pd_conform_logged_leg_t *m = &run->legs[i], *o;
    if (m->resend_of < 0) continue;
    /* like a room collision (run level, as in the simulator): the worker got the room twice */
    run->violations |= PD_CONFORM_BIT(PD_INVARIANT_ROOMS);
    o = &run->legs[m->resend_of];
    if (!run->stats.first_reason[0])
      snprintf(run->stats.first_reason, sizeof run->stats.first_reason,
               "I8 room %.20s reached %s twice (%u legs re-sent): the gateway's HTTP client "
               "re-sent a leg after %s", m->room_s, run->s->workers[m->worker].name,
               run->r->legs_resent,
               o->fault == PD_FAULT_RESET_BEFORE_HEAD || o->fault == PD_FAULT_CONNECT_REFUSED
                   ? "a reset before any byte" : "its first try ended");
    break;
  }
  if (run->collisions && (run->r->judged & PD_CONFORM_BIT(PD_INVARIANT_ROOMS))) {
    run->violations |= PD_CONFORM_BIT(PD_INVARIANT_ROOMS);
    if (!run->stats.first_reason[0])
      snprintf(run->stats.first_reason, sizeof run->stats.first_reason,
               "I8 %u room collision(s) on worker %s", run->collisions, run->collision_worker);
  }
  free(u);
  if (run->n_nomem || run->stats.records_lost) {
    snprintf(err, cap, "out of memory judging the run (%u allocations failed, %llu client "
             "bodies lost): no verdict", run->n_nomem, (unsigned long long)run->stats.records_lost);
    return -1;
  }
  return 0;
}
