/* The load invariants of the checker (docs/spec.md I23-I26). I23, the goodput floor: under a
 * load step, the requests a gateway serves within the SLOs stay at or above the scenario's
 * share of what the cluster could serve.
 * Judged from the client's side alone — a request is good when the checker found its answer
 * clean and complete (is_clean) with its first byte and its end within slo_ttft_ms and
 * slo_e2e_ms of its arrival — against the capacity of the worker model
 * (pd_metrics_capacity_rps), never from what the gateway reports. No clock, no globals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pd_metrics.h"
#include "pd_world.h"

#define MS_NS 1000000ull

void pd_goodput_begin(pd_goodput_t *g, const pd_scenario_t *s) {
  memset(g, 0, sizeof *g);
  if (!(s->config.goodput_floor > 0)) return;
  uint64_t a, b, ramp;
  uint32_t next = 0; /* the first step above the base, to the step back (never back: none) */
  if (!pd_scenario_step_span(&s->workload, &next, &a, &b, &ramp)) return;
  g->from_ns = a * MS_NS;
  g->to_ns = b * MS_NS;
  if (g->to_ns <= g->from_ns) return;
  g->capacity_rps = pd_metrics_capacity_rps(s);
  g->floor = s->config.goodput_floor;
  g->slo_ttft_ns = s->config.slo_ttft_ms * MS_NS;
  g->slo_e2e_ns = s->config.slo_e2e_ms * MS_NS;
  g->is_on = g->capacity_rps > 0;
}

void pd_goodput_note(pd_goodput_t *g, const pd_client_request_t *rq) {
  if (!g->is_on) return;
  if (rq->t_arrival >= g->from_ns && rq->t_arrival < g->to_ns) g->arrivals++;
  if (!rq->is_clean || !rq->ended || !(rq->has_first_data || rq->t_first_data)) return;
  if (rq->t_end < g->from_ns || rq->t_end >= g->to_ns) return;
  if (rq->t_first_data - rq->t_arrival <= g->slo_ttft_ns &&
      rq->t_end - rq->t_arrival <= g->slo_e2e_ns)
    g->good++;
}

uint32_t pd_goodput_judge(const pd_goodput_t *g, char *reason, size_t cap) {
  if (!g->is_on || !g->arrivals) return 0;
  double span = (double)(g->to_ns - g->from_ns) / 1e9;
  double offered = g->arrivals / span, goodput = g->good / span;
  double ask = offered < g->capacity_rps ? offered : g->capacity_rps;
  if (goodput >= g->floor * ask) return 0;
  if (reason && cap)
    snprintf(reason, cap,
             "I23 goodput in the load step %.2f/s is %.0f %% of %.2f/s (offered %.2f/s, "
             "capacity %.2f/s), under the floor of %.0f %%",
             goodput, ask > 0 ? 100 * goodput / ask : 0, ask, offered, g->capacity_rps,
             100 * g->floor);
  return 1u << (PD_INVARIANT_GOODPUT_FLOOR - 1);
}

/* I24 (R-ADMIT-QUEUE): the gateway declared a queue deadline (j->admit_queue_ns after the
 * request's arrival, absolute, not reset by retries). By then the request left its door: its
 * first attempt's earliest leg reached its worker no later than the deadline plus that leg's
 * way there (net_us, the worker's open_delay_ms) and 1 ms — worker truth — or, when no leg
 * was sent and its answer is an admission shed (or it got none), the client had the gateway's
 * answer (its head) by the deadline plus 1 ms — client bytes. A client that left before the
 * deadline asked nothing more. A gateway may shed earlier (R-ADMIT-EARLY); it may not hold a
 * request longer. */
uint32_t pd_check_queue_deadline(const pd_judge_t *j, const pd_client_request_t *rq,
                                 char *reason, size_t cap) {
  if (!j->admit_queue_ns) return 0;
  uint64_t due = rq->t_arrival + j->admit_queue_ns, net = j->s->config.net_us * 1000ull;
  /* an admission wait counts no attempt (R-ADMIT-QUEUE), so a request that waited and then
   * started has its first legs in attempt 1; a selection failure is an attempt (R-RETRY), and
   * a request whose first attempt sent nothing was not held for capacity: not judged here */
  const pd_worker_leg_t *first = NULL;
  int any = 0;
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    any = 1;
    if (l->attempt == 1 && (!first || l->t_open_arrive < first->t_open_arrive)) first = l;
  }
  if (any && !first) return 0;
  if (first) {
    uint64_t way = net + (first->worker < j->s->n_workers
                              ? j->s->workers[first->worker].open_delay_ms * MS_NS : 0);
    if (first->t_open_arrive <= due + way + MS_NS) return 0;
    if (reason && cap && !*reason)
      snprintf(reason, cap, "I24 the first leg reached %s %.1f ms after arrival, past the "
               "queue deadline of %llu ms", j->s->workers[first->worker % PD_SCENARIO_MAX_WORKERS].name,
               (double)(first->t_open_arrive - rq->t_arrival) / 1e6,
               (unsigned long long)(j->admit_queue_ns / MS_NS));
    return 1u << (PD_INVARIANT_QUEUE_DEADLINE - 1);
  }
  if (rq->gone && rq->t_end <= due + MS_NS) return 0;
  /* no leg at all, and a role had no worker to select when it arrived: its attempts failed
   * at selection (R-RETRY), which is no admission wait (worker truth: the crash; the
   * breakers as the core reported them) */
  if (rq->is_unselectable_at_arrival) return 0;
  /* no leg at all: held to the deadline when the gateway's own answer says it was shed for
   * capacity (its body's code, admission_*: client bytes), or when it never answered */
  int answered = rq->head_status != 0;
  if (answered && !pd_check_has_bytes(&rq->body, "\"code\":\"admission_")) return 0;
  uint64_t t = answered ? rq->t_head : rq->ended || rq->gone ? rq->t_end : j->now;
  if (t <= due + MS_NS) return 0;
  if (reason && cap && !*reason)
    snprintf(reason, cap, "I24 %s %.1f ms after arrival and no leg sent, past the queue "
             "deadline of %llu ms", answered ? "answered" : "still waiting",
             (double)(t - rq->t_arrival) / 1e6, (unsigned long long)(j->admit_queue_ns / MS_NS));
  return 1u << (PD_INVARIANT_QUEUE_DEADLINE - 1);
}

/* I25 (R-RETRY-BUDGET): see pd_check.h. */
void pd_retry_budget_begin(pd_retry_budget_t *b, uint32_t pct, uint32_t min, uint64_t window_ns) {
  memset(b, 0, sizeof *b);
  b->pct = pct;
  b->min = min;
  b->window_ns = window_ns;
}

void pd_retry_budget_note(pd_retry_budget_t *b, const pd_client_request_t *rq) {
  if (!b->pct) return;
  b->requests++;
  if (!b->has_first || rq->t_arrival < b->t_first) b->t_first = rq->t_arrival;
  b->has_first = 1;
  /* the attempts that sent a leg a worker got, each counted once (worker truth: is_reached) */
  uint64_t seen = 0; /* attempts 1..64 */
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    if (!l->is_reached || l->attempt < 1 || l->attempt > 64) continue;
    uint64_t bit = 1ull << (l->attempt - 1);
    if (!(seen & bit)) {
      seen |= bit;
      if (l->t_open_arrive > b->t_last) b->t_last = l->t_open_arrive;
    }
  }
  uint32_t n = 0;
  for (; seen; seen &= seen - 1) n++;
  if (n > 1) b->retries += n - 1;
}

uint32_t pd_retry_budget_judge(const pd_retry_budget_t *b, char *reason, size_t cap) {
  if (!b->pct || !b->requests || !b->window_ns) return 0;
  uint64_t part = b->window_ns / 10 * 9, span = b->t_last > b->t_first ? b->t_last - b->t_first : 0;
  uint64_t windows = (part ? span / part : 0) + 1;
  double bound = (double)windows * (b->min + 1) + 3.0 * b->pct / 100.0 * (double)b->requests;
  if ((double)b->retries <= bound) return 0;
  if (reason && cap)
    snprintf(reason, cap,
             "I25 %llu retries reached workers for %llu requests: more than any gateway keeping "
             "a %u %% budget (at least %u a window) can send (%.0f)",
             (unsigned long long)b->retries, (unsigned long long)b->requests, b->pct, b->min,
             bound);
  return 1u << (PD_INVARIANT_RETRY_BUDGET - 1);
}

/* I26 (O4.1): see pd_check.h. */

void pd_recovery_begin(pd_recovery_check_t *r, const pd_scenario_t *s) {
  memset(r, 0, sizeof *r);
  if (!s->config.recover_within_ms) return;
  int has = 0;
  uint64_t a, b, ramp; /* each load step above 1, until it is back (its ramp included) */
  for (uint32_t next = 0; pd_scenario_step_span(&s->workload, &next, &a, &b, &ramp);) {
    if (!has || a * MS_NS < r->from_ns) r->from_ns = a * MS_NS;
    if (!has || (b + ramp) * MS_NS > r->to_ns) r->to_ns = (b + ramp) * MS_NS;
    has = 1;
  }
  for (uint32_t i = 0; i < s->n_workers; i++) { /* a crash, until its restart */
    const pd_scenario_worker_t *w = &s->workers[i];
    if (!w->crash_at_ms || !w->restart_at_ms) continue;
    if (!has || w->crash_at_ms * MS_NS < r->from_ns) r->from_ns = w->crash_at_ms * MS_NS;
    if (!has || w->restart_at_ms * MS_NS > r->to_ns) r->to_ns = w->restart_at_ms * MS_NS;
    has = 1;
  }
  uint64_t win = (s->config.goodput_window_ms ? s->config.goodput_window_ms : 10000) * MS_NS;
  r->bin_ns = win / PD_METRICS_WINDOW_BINS;
  r->bound_ns = s->config.recover_within_ms * MS_NS;
  r->slo_ttft_ns = s->config.slo_ttft_ms * MS_NS;
  r->slo_e2e_ns = s->config.slo_e2e_ms * MS_NS;
  r->is_on = has && r->bin_ns > 0;
}

void pd_recovery_note(pd_recovery_check_t *r, const pd_client_request_t *rq) {
  if (!r->is_on) return;
  if (!r->has_first || rq->t_arrival < r->t_first) r->t_first = rq->t_arrival;
  if (!r->has_first || rq->t_arrival > r->t_last) r->t_last = rq->t_arrival;
  r->has_first = 1;
  if (!rq->is_clean || !rq->ended || !(rq->has_first_data || rq->t_first_data)) return;
  if (rq->t_first_data - rq->t_arrival > r->slo_ttft_ns || rq->t_end - rq->t_arrival > r->slo_e2e_ns)
    return;
  if (pd_metrics_bin_add(&r->bins, &r->n_bins, &r->cap_bins, rq->t_end / r->bin_ns)) r->is_cut = 1;
}

uint32_t pd_recovery_judge(const pd_recovery_check_t *r, char *reason, size_t cap) {
  if (!r->is_on || r->is_cut || !r->has_first) return 0;
  pd_metrics_recovery_t x = pd_metrics_recovery(r->bins, r->n_bins, r->bin_ns,
                                                PD_METRICS_WINDOW_BINS, r->t_first, r->t_last,
                                                r->from_ns, r->to_ns);
  if (x.status == PD_METRICS_REC_NO_BASE) return 0;
  if (x.status == PD_METRICS_REC_OK && x.after_ns <= r->bound_ns) return 0;
  if (reason && cap) {
    if (x.status == PD_METRICS_REC_OK)
      snprintf(reason, cap, "I26 goodput back %.1f s after the trigger ended (%.1f/s before it), "
               "later than %.1f s", (double)x.after_ns / 1e9, x.pre_rps, (double)r->bound_ns / 1e9);
    else
      snprintf(reason, cap, "I26 goodput never back within 5 %% of its %.1f/s before the trigger "
               "(lowest %.1f/s) by the last arrival", x.pre_rps, x.min_rps);
  }
  return 1u << (PD_INVARIANT_RECOVERY - 1);
}

void pd_recovery_free(pd_recovery_check_t *r) {
  free(r->bins);
  r->bins = NULL;
  r->n_bins = r->cap_bins = 0;
}
