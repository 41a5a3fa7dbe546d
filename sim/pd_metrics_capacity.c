/* pd_metrics: capacity held at the workers' side — KV page-seconds per worker from each leg
 * at its retirement, and the engines' running / queued / KV gauges noted after each worker
 * step (peaks for the cost output, samples for the trace's counter tracks). docs/metrics.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_metrics.h"
#include "pd_trace.h"
#include "pd_world.h"

#define NS_S 1e9

/* Page-seconds leg l held after instant t. Exact when its hold has not changed since t (the
 * stranded cases: pages kept from before the end until a timeout); when it changed after t,
 * the most it ever held over that span, capped by its whole integral (an upper bound). */
static double after_s(const pd_worker_leg_t *l, uint64_t t, double total_s, uint64_t now) {
  uint64_t release = l->kv_pages ? now : l->t_kv_freed;
  if (release <= t) return 0;
  double span = (double)(release - t) / NS_S;
  if (l->t_kv_changed <= t) return (double)l->kv_pages * span;
  double bound = (double)l->kv_pages_max * span;
  return bound < total_s ? bound : total_s;
}

void pd_metrics_kv_held(pd_metrics_worker_t *w, const pd_worker_leg_t *l, int has_end,
                        uint64_t t_end, uint64_t grace, uint64_t now) {
  if (!l->kv_pages_max) return; /* never held a page */
  uint64_t cur = l->kv_pages && now > l->t_kv_changed ? now - l->t_kv_changed : 0;
  double total = ((double)l->kv_page_ns + (double)l->kv_pages * (double)cur) / NS_S;
  w->kv_page_s += total;
  if (!has_end) return;
  w->kv_after_end_page_s += after_s(l, t_end, total, now);
  w->kv_beyond_grace_page_s += after_s(l, t_end + grace, total, now);
}

void pd_metrics_kv_late(pd_metrics_t *m, uint32_t worker, uint64_t pages, uint64_t since,
                        uint64_t release, int has_end, uint64_t t_end) {
  if (worker >= PD_SCENARIO_MAX_WORKERS || release <= since) return;
  pd_metrics_worker_t *w = &m->w[worker];
  w->kv_page_s += (double)pages * (double)(release - since) / NS_S;
  if (!has_end) return;
  uint64_t a = t_end > since ? t_end : since, g = t_end + m->grace_ns > since ? t_end + m->grace_ns : since;
  if (release > a) w->kv_after_end_page_s += (double)pages * (double)(release - a) / NS_S;
  if (release > g) w->kv_beyond_grace_page_s += (double)pages * (double)(release - g) / NS_S;
}

void pd_metrics_capacity_begin(pd_metrics_t *m) {
  memset(m->peak, 0, sizeof m->peak);
  memset(m->has_last, 0, sizeof m->has_last);
  m->n_cs = 0;
  m->cs_gap_ns = 0;
}

static void peak_max(pd_metrics_peak_t *to, const pd_metrics_peak_t *p) {
  if (p->running > to->running) to->running = p->running;
  if (p->queued > to->queued) to->queued = p->queued;
  if (p->kv_pages > to->kv_pages) to->kv_pages = p->kv_pages;
  if (p->kv_total_pages > to->kv_total_pages) to->kv_total_pages = p->kv_total_pages;
}

void pd_metrics_capacity_end(pd_metrics_t *m) {
  for (uint32_t i = 0; i < m->n_workers && i < PD_SCENARIO_MAX_WORKERS; i++)
    peak_max(&m->peak_total, &m->peak[i]);
}

/* Full: keep every other sample, and from now on at most one per worker per doubled gap. */
static void thin(pd_metrics_t *m) {
  size_t k = 0;
  for (size_t i = 0; i < m->n_cs; i += 2) m->cs[k++] = m->cs[i];
  uint64_t span = m->n_cs ? m->cs[m->n_cs - 1].t - m->cs[0].t : 0;
  uint64_t floor = span / (PD_METRICS_MAX_CAP_SAMPLES / 4) + 1;
  m->cs_gap_ns = m->cs_gap_ns * 2 > floor ? m->cs_gap_ns * 2 : floor;
  m->n_cs = k;
}

static void keep_sample(pd_metrics_t *m, const pd_metrics_cap_sample_t *x) {
  if (m->cs_gap_ns && x->t - m->t_kept[x->worker] < m->cs_gap_ns)
    return; /* thinned; the worker's final state is written from last[] at the end */
  if (m->n_cs == PD_METRICS_MAX_CAP_SAMPLES) thin(m);
  if (m->n_cs == m->cap_cs) {
    size_t nc = m->cap_cs ? m->cap_cs * 2 : 1024;
    pd_metrics_cap_sample_t *ns = realloc(m->cs, nc * sizeof *ns);
    if (!ns) return; /* the track misses this change; peaks are unaffected */
    m->cs = ns;
    m->cap_cs = nc;
  }
  m->cs[m->n_cs++] = *x;
  m->t_kept[x->worker] = x->t;
}

void pd_metrics_note_capacity(pd_metrics_t *m, uint32_t worker, uint64_t now, uint32_t running,
                              uint32_t queued, uint64_t kv_used_pages, uint64_t kv_total_pages) {
  if (!m || worker >= PD_SCENARIO_MAX_WORKERS) return;
  pd_metrics_peak_t p = {running, queued, kv_used_pages, kv_total_pages};
  peak_max(&m->peak[worker], &p);
  m->has_capacity = 1;
  pd_metrics_cap_sample_t *last = &m->last[worker];
  if (m->has_last[worker] && last->running == running && last->queued == queued &&
      last->kv_pages == kv_used_pages)
    return; /* samples only on change */
  *last = (pd_metrics_cap_sample_t){now, kv_used_pages, worker, running, queued};
  m->has_last[worker] = 1;
  if (m->keep_trace) keep_sample(m, last);
}

static void counter(pd_trace_t *t, const pd_scenario_t *s, const pd_metrics_cap_sample_t *x) {
  (void)s;
  pd_trace_arg_t a[] = {PD_TRACE_ARG_U("running", x->running), PD_TRACE_ARG_U("queued", x->queued),
                        PD_TRACE_ARG_U("kv pages used", x->kv_pages)};
  pd_trace_counter(t, PD_TRACE_WORKER + x->worker, "engine", x->t, a, 3);
}

void pd_metrics_capacity_trace(const pd_metrics_t *m, pd_trace_t *t, const pd_scenario_t *s) {
  if (!t->out) return;
  for (size_t i = 0; i < m->n_cs; i++)
    if (m->cs[i].worker < s->n_workers) counter(t, s, &m->cs[i]);
  for (uint32_t w = 0; w < s->n_workers && w < PD_SCENARIO_MAX_WORKERS; w++)
    if (m->has_last[w]) counter(t, s, &m->last[w]); /* its final state, even if thinned out */
}
