/* pd_metrics_overload: the cluster's capacity from the worker model, and what a run served
 * while its load step asked for more (docs/metrics.md, "Overload"). No clock, no globals. */
#include "pd_metrics.h"

#include <string.h>

#include "pd_scenario.h"
#include "pd_world.h"

#define MS_NS 1000000ull

/* Mean of a role's timing field over its workers (0 when the role has none). */
static double mean_ms(const pd_scenario_t *s, pd_role_t role, int which) {
  double sum = 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->n_workers; i++) {
    const pd_scenario_worker_t *w = &s->workers[i];
    if (w->role != role) continue;
    double prompt = (double)pd_scenario_prompt_tokens(&s->workload, 0, 0);
    sum += which == 0 ? (double)w->forward_ms + (double)w->forward_us_per_token * prompt / 1000.0
                      : (double)w->kv_ms;
    n++;
  }
  return n ? sum / n : 0;
}

double pd_metrics_capacity_rps(const pd_scenario_t *s) {
  uint32_t tokens = s->workload.tokens ? s->workload.tokens : 1;
  double fwd = mean_ms(s, PD_ROLE_PREFILL, 0), kv = mean_ms(s, PD_ROLE_PREFILL, 1);
  double decode = 0, prefill = 0;
  for (uint32_t i = 0; i < s->n_workers; i++) {
    const pd_scenario_worker_t *w = &s->workers[i];
    if (w->max_running == 0) continue;
    if (w->role == PD_ROLE_DECODE) {
      /* an SGLang decode holds its slot from pre-allocation, while prefill computes and
       * sends the KV (S2.6); a vLLM decode only from its own request, after prefill's */
      double held = (double)w->first_token_ms + (double)(tokens - 1) * (double)w->token_ms;
      if (w->protocol == PD_PROTOCOL_SGLANG) held += fwd + kv;
      decode += held > 0 ? (double)w->max_running * 1000.0 / held : 1e12;
    } else if (w->role == PD_ROLE_PREFILL) {
      double held = (double)w->forward_ms + (double)w->kv_ms;
      prefill += held > 0 ? (double)w->max_running * 1000.0 / held : 1e12;
    }
  }
  if (decode <= 0 || prefill <= 0) return 0;
  return decode < prefill ? decode : prefill;
}

void pd_metrics_overload_begin(pd_metrics_t *m, const pd_scenario_t *s) {
  memset(&m->ovl, 0, sizeof m->ovl);
  uint64_t a, b, ramp;
  uint32_t next = 0; /* the first step above the base, to the step back (a rise never back: none) */
  if (pd_scenario_step_span(&s->workload, &next, &a, &b, &ramp)) {
    m->ovl.has = 1;
    m->ovl.from_ns = a * MS_NS;
    m->ovl.to_ns = b * MS_NS;
  }
  m->ovl.capacity_rps = pd_metrics_capacity_rps(s);
}

void pd_metrics_overload_arrival(pd_metrics_t *m, const pd_client_request_t *rq) {
  uint64_t t = rq->t_arrival;
  if (m->ovl.has && t >= m->ovl.from_ns && t < m->ovl.to_ns) m->ovl.arrivals++;
  if (rq->has_head && (rq->head_status == 503 || rq->head_status == 429) && !rq->legs &&
      rq->t_head >= t) {
    uint64_t d = rq->t_head - t;
    m->ovl.shed++;
    m->ovl.shed_ns_sum += d;
    if (d > m->ovl.shed_ns_max) m->ovl.shed_ns_max = d;
    pd_metrics_hist_add(&m->shed, d);
  }
}

void pd_metrics_overload_good(pd_metrics_t *m, uint64_t t_end) {
  if (m->ovl.has && t_end >= m->ovl.from_ns && t_end < m->ovl.to_ns) m->ovl.good++;
}

double pd_metrics_overload_share(const pd_metrics_overload_t *o) {
  double span = (double)(o->to_ns - o->from_ns) / 1e9;
  if (!o->has || span <= 0 || o->capacity_rps <= 0) return 0;
  double offered = o->arrivals / span, ask = offered < o->capacity_rps ? offered : o->capacity_rps;
  return ask > 0 ? (o->good / span) / ask : 0;
}
