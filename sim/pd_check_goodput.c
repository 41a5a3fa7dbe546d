/* The goodput floor of the checker (docs/spec.md I23): under a load step, the requests a gateway
 * serves within the SLOs stay at or above the scenario's share of what the cluster could serve.
 * Judged from the client's side alone — a request is good when the checker found its answer
 * clean and complete (is_clean) with its first byte and its end within slo_ttft_ms and
 * slo_e2e_ms of its arrival — against the capacity of the worker model
 * (pd_metrics_capacity_rps), never from what the gateway reports. No clock, no globals. */
#include <stdio.h>
#include <string.h>

#include "pd_check.h"
#include "pd_metrics.h"
#include "pd_world.h"

#define MS_NS 1000000ull

void pd_goodput_begin(pd_goodput_t *g, const pd_scenario_t *s) {
  memset(g, 0, sizeof *g);
  if (!(s->config.goodput_floor > 0)) return;
  const pd_scenario_workload_t *wl = &s->workload;
  for (uint32_t i = 0; i < wl->n_steps; i++) { /* the first step above the base, to its end */
    if (wl->steps[i].factor <= 1.0) continue;
    uint32_t j = i + 1;
    while (j < wl->n_steps && wl->steps[j].factor > 1.0) j++;
    if (j == wl->n_steps) return; /* never back: the step has no end to judge to */
    g->from_ns = wl->steps[i].at_ms * MS_NS;
    g->to_ns = wl->steps[j].at_ms * MS_NS;
    break;
  }
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
