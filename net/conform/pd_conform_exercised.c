/* Did a socket run test anything? (docs/conformance.md "Exercised".) A row passes only when
 * the scenario's faults really fired at the mocks and the workload's requests really reached
 * the workers; otherwise it is NOT EXERCISED. Computed from the mocks' logs once the legs are
 * tied to requests (pd_conform_judge.c):
 *  - faults exercised k/n: n counts the scenario's scripted fault entries that could fire
 *    (probability 1, not shadowed by an earlier entry of the same worker that takes every
 *    request it would take, first request within the legs the worker can get, not a 0 ms
 *    prefill_lag or slow_drip, which the mock does not even log); k those with a
 *    `fault` line of their kind on their worker for a request in their nth range. A worker's
 *    crash_at_ms counts too: exercised when its mock logged the crash while a client request
 *    was in flight (refused connections leave no line) or the crash freed a vLLM prefill's
 *    pinned KV; and each top-level fault (one that
 *    follows the traffic) whose request was sent, exercised when a mock logged
 *    `traffic_fault` with its index;
 *  - requests served s/m: m the requests sent; s those with at least one leg tied to them in a
 *    mock's log that reached its worker before the client's end (a leg that comes after the
 *    client has its answer, or has gone, tested nothing of that request: a slow gateway
 *    behind a 5 ms disconnect). A request with no such leg is excused when, before its end, a
 *    leg of the run had met a fault or failed (a breaker may be open, no worker eligible: the
 *    gateway may fail it fast) or a worker had crashed (refused connections leave no line).
 *    A gateway that serves nothing meets no failure: nothing excuses it. */
#include <stdio.h>
#include <string.h>

#include "pd_conform_int.h"

static int is_modifier(pd_fault_kind_t k) {
  return k == PD_FAULT_PREFILL_LAG || k == PD_FAULT_SLOW_DRIP;
}

/* Entry j takes every request entry i would take (so i never fires, pd_worker_pick_fault). */
static int shadows(const pd_fault_t *j, const pd_fault_t *i) {
  if (is_modifier(j->kind) || is_modifier(i->kind) || j->prob < 1.0) return 0;
  if (!j->nth_from && !j->nth_to) return 1;
  if (!i->nth_from && !i->nth_to) return 0;
  return j->nth_from <= i->nth_from && j->nth_to >= i->nth_to;
}

static int can_fire(const pd_conform_runner_t *run, const pd_scenario_worker_t *w, uint32_t i) {
  const pd_fault_t *f = &w->faults[i];
  if (f->prob < 1.0) return 0; /* a drawn fault may rightly not fire */
  if (is_modifier(f->kind) && !f->ms) return 0; /* a lag or drip of 0 ms changes nothing */
  uint32_t att = run->o->has_mode ? run->judge.max_attempts : PD_MAX_ATTEMPTS;
  uint64_t most = (uint64_t)run->n_reqs * (att ? att : 1);
  if (f->nth_from && f->nth_from > most) return 0;
  for (uint32_t j = 0; j < i; j++)
    if (shadows(&w->faults[j], f)) return 0;
  return 1;
}

static int fired(const pd_conform_runner_t *run, uint32_t wi, const pd_fault_t *f) {
  for (size_t k = 0; k < run->n_legs; k++) {
    const pd_conform_logged_leg_t *l = &run->legs[k];
    if (l->worker != wi || !(l->fired >> f->kind & 1u)) continue;
    if ((f->nth_from || f->nth_to) && (l->nth < f->nth_from || (f->nth_to && l->nth > f->nth_to)))
      continue;
    return 1;
  }
  return 0;
}

/* A crash hit traffic: the mock logged it while a client request was in flight (its refused
 * connections leave no line, so the requests stand in for them), or it freed the KV a vLLM
 * prefill had pinned for a request (a done leg's pin, as the simulator counts it). */
static int crash_fired(const pd_conform_runner_t *run, uint32_t wi) {
  uint64_t t = run->t_crash[wi];
  if (t && run->crash_pin[wi]) return 1;
  for (uint32_t i = 0; t && i < run->n_reqs; i++) {
    const pd_conform_req_t *q = &run->reqs[i];
    uint64_t end = pd_conform_client_end(q);
    if (q->c.t_arrival && q->c.t_arrival <= t && (!end || end >= t)) return 1;
  }
  return 0;
}

static void count_faults(pd_conform_runner_t *run, char *miss, size_t cap) {
  pd_conform_result_t *r = run->r;
  for (uint32_t i = 0; i < run->s->n_tfaults && i < PD_SCENARIO_MAX_TRAFFIC_FAULTS; i++) {
    const pd_traffic_fault_t *t = &run->s->tfaults[i]; /* top-level: follows the traffic */
    if (t->request != PD_TRAFFIC_FAULT_ANY && t->request >= run->n_reqs) continue;
    if (is_modifier(t->f.kind) && !t->f.ms) continue;
    r->faults_n++;
    if (run->tfault_fired[i]) r->faults_fired++;
    else if (!miss[0])
      snprintf(miss, cap, "faults[%u] %s (follows the traffic) never fired", i,
               pd_fault_kind_name(t->f.kind));
  }
  for (uint32_t wi = 0; wi < run->s->n_workers; wi++) {
    const pd_scenario_worker_t *w = &run->s->workers[wi];
    if (w->crash_at_ms) {
      r->faults_n++;
      if (crash_fired(run, wi)) r->faults_fired++;
      else if (!miss[0])
        snprintf(miss, cap, "%s crash_at_ms hit no request in flight nor pinned KV", w->name);
    }
    for (uint32_t i = 0; i < w->n_faults; i++) {
      if (!can_fire(run, w, i)) continue;
      r->faults_n++;
      if (fired(run, wi, &w->faults[i])) r->faults_fired++;
      else if (!miss[0])
        snprintf(miss, cap, "%s faults[%u] %s never fired", w->name, i,
                 pd_fault_kind_name(w->faults[i].kind));
    }
  }
}

/* Before t, a leg met a failure the gateway may act on (it reached its worker and failed),
 * or a worker was down. */
int pd_conform_failure_before(const pd_conform_runner_t *run, uint64_t t) {
  for (size_t k = 0; k < run->n_legs; k++) {
    const pd_conform_logged_leg_t *l = &run->legs[k];
    if (l->t_arrive >= t) continue;
    if (l->fault >= 0 || l->truth == PD_TRUTH_FAILED || l->truth == PD_TRUTH_STALLED ||
        l->truth == PD_TRUTH_NEVER)
      return 1;
  }
  for (uint32_t wi = 0; wi < run->s->n_workers; wi++)
    if (run->t_crash[wi] && run->t_crash[wi] <= t) return 1;
  return 0;
}

static void count_served(pd_conform_runner_t *run, char *miss, size_t cap) {
  pd_conform_result_t *r = run->r;
  for (uint32_t i = 0; i < run->n_reqs; i++) {
    const pd_conform_req_t *q = &run->reqs[i];
    if (!q->c.t_arrival) continue; /* never sent: the run was stopped */
    r->sent++;
    uint64_t end = q->c.ended || q->c.gone ? q->c.t_end : q->t_bound;
    if (q->n_units && q->t_first_unit < end) {
      r->served++;
      continue;
    }
    if (q->n_units || q->c.gone) r->unserved_late++; /* too soon for this gateway */
    /* a failure before its end, or an admission shed while more requests were in flight than
     * a role can run (pd_conform_verdict.c, set by the judge that runs first): nothing of the
     * row's was left untested by it */
    if (pd_conform_failure_before(run, end) || q->c.is_shed_at_capacity) {
      r->unserved_excused++;
      continue;
    }
    if (!miss[0])
      snprintf(miss, cap, "request %u reached no worker %s(client saw %s%d)", i,
               q->n_units ? "before its end " : "",
               q->c.gone ? "its own disconnect, status " : "status ", q->c.head_status);
  }
}

void pd_conform_exercised(pd_conform_runner_t *run) {
  pd_conform_result_t *r = run->r;
  char fmiss[128] = "", smiss[128] = "";
  count_faults(run, fmiss, sizeof fmiss);
  count_served(run, smiss, sizeof smiss);
  r->exercised = r->faults_fired == r->faults_n && r->served + r->unserved_excused == r->sent;
  if (r->exercised || r->nx_reason[0]) return;
  if (r->served + r->unserved_excused < r->sent)
    snprintf(r->nx_reason, sizeof r->nx_reason, "requests served %u/%u: %s", r->served, r->sent,
             smiss);
  else
    snprintf(r->nx_reason, sizeof r->nx_reason, "faults exercised %u/%u: %s", r->faults_fired,
             r->faults_n, fmiss);
}
