/* Reference admission (docs/spec.md R-ADMIT-*, after O1.1, O2.4, O3.3, O4.5): each worker
 * admits at most its limit of requests in flight; a request that finds no prefill/decode
 * pair with room waits at the gateway in a bounded FIFO queue, and its pair is picked only
 * when capacity frees (late binding); both legs are admitted together, so no prefill is sent
 * for a decode that cannot take the request; a request the queue cannot hold, or still
 * waiting at its absolute queue deadline, is shed at once with 503, Retry-After and a JSON
 * body naming the limit. Sans-IO: the queue wakes through the request's DL_BACKOFF. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "pd_err.h"
#include "pd_gw_int.h"

static const char *const prio_names[PD_PRIO_COUNT] = {"standard", "critical", "sheddable"};

const char *pd_prio_name(int prio) {
  return prio >= 0 && prio < PD_PRIO_COUNT ? prio_names[prio] : NULL;
}

int pd_prio_parse(const char *s) {
  for (int i = 0; s && i < PD_PRIO_COUNT; i++)
    if (!strcmp(s, prio_names[i])) return i;
  return -1;
}

/* R-ADMIT-PRIO: critical 2 > standard 1 > sheddable 0 */
static int rank(pd_prio_t p) {
  return p == PD_PRIO_CRITICAL ? 2 : p == PD_PRIO_SHEDDABLE ? 0 : 1;
}

int pd_admit_is_on(const pd_gw_t *gw) {
  return gw->cfg.mode == PD_MODE_REFERENCE && gw->cfg.admit_queue_max > 0;
}

int pd_admit_has_room(const pd_gw_t *gw, pd_role_t role, uint32_t w) {
  const pd_worker_t *k = &gw->workers[role][w];
  return !pd_admit_is_on(gw) || !k->limit || k->load < k->limit;
}

static int role_has_room(const pd_gw_t *gw, pd_role_t role) {
  /* R-ADMIT-SF: source-first requests admitted before their decode leg opens hold a slot of
   * the decode role each; the role has room when a slot is left over */
  uint64_t held = role == PD_ROLE_DECODE ? gw->sf_slots_held : 0, room = 0;
  for (uint32_t w = 0; w < gw->n_workers[role]; w++) {
    const pd_worker_t *k = &gw->workers[role][w];
    if (!pd_admit_is_on(gw) || !k->limit) return 1; /* unlimited */
    room += k->load < k->limit ? k->limit - k->load : 0;
    if (room > held) return 1;
  }
  return 0;
}

void pd_admit_sf_release(pd_gw_t *gw, pd_rq_t *rq) {
  if (!rq->has_sf_slot) return;
  rq->has_sf_slot = 0;
  assert(gw->sf_slots_held > 0);
  gw->sf_slots_held--;
}

int pd_admit_pair_has_room(const pd_gw_t *gw) {
  return role_has_room(gw, PD_ROLE_PREFILL) && role_has_room(gw, PD_ROLE_DECODE);
}

int pd_gw_set_worker_limit(pd_gw_t *gw, pd_role_t role, uint32_t w, uint32_t limit) {
  if (!gw || (unsigned)role > 1 || w >= gw->n_workers[role]) return PD_ERR_INVAL;
  gw->workers[role][w].limit = limit;
  return 0;
}

int pd_gw_set_worker_group(pd_gw_t *gw, pd_role_t role, uint32_t w, uint32_t group) {
  if (!gw || (unsigned)role > 1 || w >= gw->n_workers[role]) return PD_ERR_INVAL;
  gw->workers[role][w].group = group;
  return 0;
}

void pd_gw_admit_stats(const pd_gw_t *gw, pd_admit_stats_t *out) {
  *out = gw->admit;
  out->now_queued = gw->n_queued;
}

/* 503 with Retry-After and the limit in the body (R-ADMIT-SHED). is_full: 1 the queue is
 * full, 0 its deadline passed, 2 the queue ahead would keep it past its deadline. */
static void shed(pd_gw_t *gw, pd_rq_t *rq, int is_full, const char *msg) {
  gw->admit.shed_by_class[rq->prio]++; /* R-ADMIT-PRIO */
  if (pd_rq_client_done(rq)) return;
  char m[300];
  /* is_full 3: evicted by a higher class; 4: sheddable at half the queue (R-ADMIT-PRIO) */
  const char *code = is_full == 1   ? "admission_queue_full"
                     : is_full == 3 ? "admission_queue_evicted"
                     : is_full == 4 ? "admission_queue_sheddable"
                     : is_full      ? "admission_queue_wait"
                                    : "admission_queue_timeout";
  int is_max = is_full == 1 || is_full >= 3;
  unsigned long long lim = is_full == 4 ? (gw->cfg.admit_queue_max + 1u) / 2u
                           : is_max     ? (unsigned long long)gw->cfg.admit_queue_max
                                        : (unsigned long long)(gw->cfg.admit_queue_ns / 1000000u);
  snprintf(m, sizeof m, "%s (limit: %s %llu; class: %s; retry after %llu s)", msg,
           is_full == 4 ? "sheddable_queue_max" : is_max ? "admit_queue_max" : "admit_queue_ms",
           lim, pd_prio_name(rq->prio),
           (unsigned long long)((gw->cfg.admit_retry_after_ns + 999999999u) / 1000000000u));
  size_t before = gw->out->n;
  /* a retry shed: the last worker status, as R-STATUS and I14 (not the gateway's own 504; a
   * worker's own 504 is its status) */
  int st = rq->last_status && (rq->last_status != 504 || rq->is_last_status_worker)
               ? rq->last_status
               : 503;
  pd_gw_client_error(gw, rq, st, code, m);
  for (size_t i = before; i < gw->out->n; i++) /* the head carries the Retry-After */
    if (gw->out->v[i].kind == PD_ACT_CLIENT_HEAD && gw->out->v[i].req_id == rq->id)
      gw->out->v[i].deadline_ns = gw->cfg.admit_retry_after_ns ? gw->cfg.admit_retry_after_ns : 1;
}

void pd_admit_wait(pd_gw_t *gw, pd_rq_t *rq) {
  if (!rq->is_queued) {
    uint64_t until = rq->t_start_ns + gw->cfg.admit_queue_ns;
    /* R-ADMIT-QUEUE: never wait so long that the request's own commit or total deadline
     * comes before an attempt started then could answer (the measured start -> commit of
     * requests served, svc_ns): it would end in a 504 instead of the shed's 503 (explore
     * seeds 4962, 6520). The queue gives up at least 1 ns before either deadline. */
    uint64_t svc = gw->svc_ns[rq->req.is_stream ? 1 : 0];
    for (int k = 0; k < 2; k++) {
      uint64_t d = rq->dl[k ? DL_TOTAL : DL_COMMIT];
      uint64_t by = d > svc + 1 ? d - svc - 1 : 1;
      if (d && by < until) until = by;
    }
    /* R-ADMIT-PRIO: the queue is ordered by class; a full queue gives the newest request of
     * a strictly lower class (its tail) up to an arrival, else the arrival is shed */
    pd_rq_t *victim = gw->n_queued >= gw->cfg.admit_queue_max && gw->q_tail &&
                              rank(gw->q_tail->prio) < rank(rq->prio)
                          ? gw->q_tail
                          : NULL;
    if (gw->n_queued >= gw->cfg.admit_queue_max && !victim) {
      gw->admit.shed_full++;
      shed(gw, rq, 1,
           "every worker pair is at its in-flight limit and the admission queue is full");
      return;
    }
    /* R-ADMIT-PRIO: a sheddable request waits only while the backlog is under half the queue,
     * so the other half is kept for the classes above it */
    if (rq->prio == PD_PRIO_SHEDDABLE &&
        gw->n_queued >= (gw->cfg.admit_queue_max + 1u) / 2u) {
      gw->admit.shed_sheddable++;
      shed(gw, rq, 4,
           "every worker pair is at its in-flight limit and the backlog holds no more "
           "sheddable requests");
      return;
    }
    if (until <= gw->now) {
      gw->admit.shed_timeout++;
      shed(gw, rq, 0,
           "every worker pair is at its in-flight limit and the queue deadline has passed");
      return;
    }
    /* R-ADMIT-EARLY: every pair is full, and a full gateway starts one queued request per
     * q_interval_ns (measured while a backlog lasted): one behind n_queued others starts at
     * the (n_queued + 1)-th departure; if that is past its queue deadline, shed it now */
    uint64_t ahead = 0; /* R-ADMIT-PRIO: those it would wait behind, its class and above */
    for (const pd_rq_t *q = gw->q_head; q && rank(q->prio) >= rank(rq->prio); q = q->q_next)
      ahead++;
    if (gw->q_interval_ns &&
        gw->q_interval_ns > (until - gw->now) / 2 / (ahead + 1)) {
      gw->admit.shed_wait++;
      shed(gw, rq, 2,
           "every worker pair is at its in-flight limit and the queue ahead would hold the "
           "request past its queue deadline");
      return;
    }
    if (victim) { /* R-ADMIT-PRIO: out of the queue, answered, and its object freed soon */
      pd_admit_unlink(gw, victim); /* clears its queue deadline */
      gw->admit.evicted++;
      shed(gw, victim, 3,
           "every worker pair is at its in-flight limit and a request of a higher class took "
           "its place in the full admission queue");
      /* its other deadlines stay armed: wake it now so the next expiry frees it (it is done
       * and holds no leg; DL_BACKOFF then finds it no longer waiting) */
      victim->dl[DL_BACKOFF] = gw->now ? gw->now : 1;
      pd_gw_rearm(gw, victim);
    }
    /* after the last of its class or above: higher class first, FIFO within a class */
    pd_rq_t *after = gw->q_tail;
    while (after && rank(after->prio) < rank(rq->prio)) after = after->q_prev;
    rq->is_queued = 1;
    rq->q_prev = after;
    rq->q_next = after ? after->q_next : gw->q_head;
    if (rq->q_next) rq->q_next->q_prev = rq;
    else gw->q_tail = rq;
    if (after) after->q_next = rq;
    else gw->q_head = rq;
    gw->n_queued++;
    gw->admit.queued++;
    if (gw->n_queued > gw->admit.peak_queued) gw->admit.peak_queued = gw->n_queued;
    rq->dl[DL_QUEUE] = until + (gw->cfg.seeded_bug == PD_BUG_LATE_SHED ? 5000000000ull : 0);
  }
  if (rq->state != RQ_BACKOFF) PD_RQ_SET(gw, rq, RQ_BACKOFF);
}

static void wake(pd_gw_t *gw, pd_rq_t *rq) {
  if (!rq || (rq->dl[DL_BACKOFF] && rq->dl[DL_BACKOFF] <= gw->now)) return;
  rq->dl[DL_BACKOFF] = gw->now ? gw->now : 1;
  pd_gw_rearm(gw, rq);
}

void pd_admit_unlink(pd_gw_t *gw, pd_rq_t *rq) {
  if (!rq->is_queued) return;
  rq->is_queued = 0;
  if (rq->q_prev) rq->q_prev->q_next = rq->q_next;
  else gw->q_head = rq->q_next;
  if (rq->q_next) rq->q_next->q_prev = rq->q_prev;
  else gw->q_tail = rq->q_prev;
  rq->q_prev = rq->q_next = NULL;
  assert(gw->n_queued > 0);
  gw->n_queued--;
  rq->dl[DL_QUEUE] = 0;
  uint64_t waited = gw->now - rq->t_start_ns;
  gw->admit.wait_ns_sum += waited;
  if (waited > gw->admit.wait_ns_max) gw->admit.wait_ns_max = waited;
  if (pd_admit_pair_has_room(gw)) wake(gw, gw->q_head); /* room left: the next one goes too */
}

void pd_admit_started(pd_gw_t *gw) {
  gw->admit.dequeued++;
  if (gw->q_last_start_ns) { /* the backlog lasted since the last departure */
    uint64_t d = gw->now - gw->q_last_start_ns;
    gw->q_interval_ns = gw->q_interval_ns ? (gw->q_interval_ns * 15 + d) / 16 : d;
  }
  /* the request is still in the queue: the backlog goes on if another waits behind it */
  gw->q_last_start_ns = gw->n_queued > 1 ? (gw->now ? gw->now : 1) : 0;
}

int pd_admit_too_late(pd_gw_t *gw, pd_rq_t *rq) {
  if (!rq->is_queued) return 0;
  uint64_t svc = gw->svc_ns[rq->req.is_stream ? 1 : 0], end = gw->now + svc;
  uint64_t c = rq->dl[DL_COMMIT], t = rq->dl[DL_TOTAL];
  if (!svc || ((!c || end < c) && (!t || end < t))) return 0;
  pd_admit_unlink(gw, rq);
  gw->admit.shed_timeout++;
  shed(gw, rq, 0,
       "the request waited at its in-flight limit until an attempt started now would pass its "
       "deadline");
  return 1;
}

void pd_admit_committed(pd_gw_t *gw, pd_rq_t *rq) {
  if (gw->now < rq->t_try_ns) return;
  uint64_t d = gw->now - rq->t_try_ns, *e = &gw->svc_ns[rq->req.is_stream ? 1 : 0];
  *e = *e ? (*e * 3 + d) / 4 : d;
}

void pd_admit_kick(pd_gw_t *gw) {
  if (gw->q_head && pd_admit_pair_has_room(gw)) wake(gw, gw->q_head);
}

void pd_admit_deadline(pd_gw_t *gw, pd_rq_t *rq) {
  if (!rq->is_queued || rq->is_committed) return;
  pd_admit_unlink(gw, rq);
  gw->admit.shed_timeout++;
  shed(gw, rq, 0,
       "every worker pair stayed at its in-flight limit until the request's queue deadline");
}
