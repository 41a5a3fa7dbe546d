/* pd_metrics: reporting (JSON object, one text line, the trace's counter tracks) and the
 * world's end-of-run hook. docs/metrics.md. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_metrics.h"
#include "pd_trace.h"
#include "pd_world_int.h"

static double ms(double ns) { return ns / 1e6; }
static double sec(uint64_t ns) { return (double)ns / 1e9; }

static void add_dist(cJSON *o, const char *key, const pd_metrics_hist_t *h) {
  cJSON *d = cJSON_AddObjectToObject(o, key);
  if (!d) return;
  cJSON_AddNumberToObject(d, "n", (double)h->n);
  cJSON_AddNumberToObject(d, "mean", ms(pd_metrics_hist_mean(h)));
  cJSON_AddNumberToObject(d, "p50", ms(pd_metrics_hist_percentile(h, 50)));
  cJSON_AddNumberToObject(d, "p99", ms(pd_metrics_hist_percentile(h, 99)));
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The TTFT CDF as PD_CDF_POINTS [percentile, ms] pairs (the same percentiles as
 * pd_metrics_hist_percentile, with one sort of the exact samples for all of them). */
static const double cdf_p[] = {0,  1,  2,  5,  10, 15, 20, 25, 30, 35, 40, 45, 50, 55,  60,  65,
                               70, 75, 80, 85, 90, 95, 97, 98, 99, 99.5, 99.9, 100};
#define PD_CDF_POINTS (sizeof cdf_p / sizeof cdf_p[0])

static void add_cdf(cJSON *o, const char *key, const pd_metrics_hist_t *h) {
  if (!h->n) return;
  uint64_t *a = NULL;
  if (!h->buckets && (a = malloc(h->n * sizeof *a))) {
    memcpy(a, h->exact, h->n * sizeof *a);
    qsort(a, h->n, sizeof *a, cmp_u64);
  }
  cJSON *arr = cJSON_AddArrayToObject(o, key);
  for (size_t i = 0; arr && i < PD_CDF_POINTS; i++) {
    double v, rank = cdf_p[i] / 100.0 * (double)(h->n - 1);
    if (a) { /* as pd_metrics_hist_percentile: linear between the two nearest ranks */
      size_t lo = (size_t)rank;
      v = (double)a[lo];
      if (lo + 1 < h->n) v += ((double)a[lo + 1] - (double)a[lo]) * (rank - (double)lo);
    } else {
      v = pd_metrics_hist_percentile(h, cdf_p[i]);
    }
    double pair[2] = {cdf_p[i], (double)(long long)(ms(v) * 1e3 + 0.5) / 1e3};
    cJSON_AddItemToArray(arr, cJSON_CreateDoubleArray(pair, 2));
  }
  free(a);
}

static void add_capacity(cJSON *o, const pd_metrics_worker_t *w) {
  cJSON_AddNumberToObject(o, "slot_s", sec(w->slot_ns));
  cJSON_AddNumberToObject(o, "stranded_slot_s", sec(w->slot_after_end_ns));
  cJSON_AddNumberToObject(o, "stranded_slot_beyond_grace_s", sec(w->slot_beyond_grace_ns));
  cJSON_AddNumberToObject(o, "open_leg_s", sec(w->leg_ns));
  cJSON_AddNumberToObject(o, "open_leg_after_end_s", sec(w->leg_after_end_ns));
  cJSON_AddNumberToObject(o, "open_leg_beyond_grace_s", sec(w->leg_beyond_grace_ns));
  cJSON_AddNumberToObject(o, "kv_page_s", w->kv_page_s);
  cJSON_AddNumberToObject(o, "stranded_kv_page_s", w->kv_after_end_page_s);
  cJSON_AddNumberToObject(o, "stranded_kv_page_beyond_grace_s", w->kv_beyond_grace_page_s);
}

/* The engine's peaks (pd_metrics_note_capacity); absent when no step was ever noted. */
static void add_peak(cJSON *o, const pd_metrics_t *m, const pd_metrics_peak_t *p) {
  if (!m->has_capacity) return;
  cJSON_AddNumberToObject(o, "peak_running", p->running);
  cJSON_AddNumberToObject(o, "peak_queued", p->queued);
  cJSON_AddNumberToObject(o, "peak_kv_pages", (double)p->kv_pages);
  cJSON_AddNumberToObject(o, "kv_pages_total", (double)p->kv_total_pages);
}

static void add_recovery(cJSON *o, const pd_metrics_t *m) {
  if (!m->has_burst || m->runs != 1) return; /* pooled worlds have no one timeline */
  cJSON *r = cJSON_AddObjectToObject(o, "recovery");
  if (!r) return;
  static const char *const st[] = {"none", "recovered", "never", "no baseline"};
  cJSON_AddNumberToObject(r, "burst_from_ms", ms((double)m->burst_from));
  cJSON_AddNumberToObject(r, "burst_to_ms", ms((double)m->burst_to));
  cJSON_AddNumberToObject(r, "window_ms", ms((double)m->window_ns));
  cJSON_AddStringToObject(r, "status", st[m->rec.status & 3]);
  cJSON_AddNumberToObject(r, "pre_goodput_rps", m->rec.pre_rps);
  cJSON_AddNumberToObject(r, "min_goodput_rps", m->rec.min_rps);
  if (m->rec.status == PD_METRICS_REC_OK)
    cJSON_AddNumberToObject(r, "recovered_after_ms", ms((double)m->rec.after_ns));
  else cJSON_AddNullToObject(r, "recovered_after_ms");
}

static void add_overload(cJSON *o, const pd_metrics_t *m) {
  const pd_metrics_overload_t *v = &m->ovl;
  if (!v->has || m->runs != 1) return;
  cJSON *r = cJSON_AddObjectToObject(o, "overload");
  if (!r) return;
  double span = (double)(v->to_ns - v->from_ns) / 1e9;
  cJSON_AddNumberToObject(r, "from_ms", ms((double)v->from_ns));
  cJSON_AddNumberToObject(r, "to_ms", ms((double)v->to_ns));
  cJSON_AddNumberToObject(r, "capacity_rps", v->capacity_rps);
  cJSON_AddNumberToObject(r, "offered_rps", span > 0 ? v->arrivals / span : 0);
  cJSON_AddNumberToObject(r, "goodput_rps", span > 0 ? v->good / span : 0);
  cJSON_AddNumberToObject(r, "goodput_share", pd_metrics_overload_share(v));
  cJSON_AddNumberToObject(r, "shed", v->shed);
  cJSON_AddNumberToObject(r, "shed_ms_mean", v->shed ? ms((double)v->shed_ns_sum / v->shed) : 0);
  cJSON_AddNumberToObject(r, "shed_ms_p50", v->shed ? ms(pd_metrics_hist_percentile(&m->shed, 50)) : 0);
  cJSON_AddNumberToObject(r, "shed_ms_p90", v->shed ? ms(pd_metrics_hist_percentile(&m->shed, 90)) : 0);
  cJSON_AddNumberToObject(r, "shed_ms_p99", v->shed ? ms(pd_metrics_hist_percentile(&m->shed, 99)) : 0);
  cJSON_AddNumberToObject(r, "shed_ms_max", ms((double)v->shed_ns_max));
}

void *pd_metrics_json(const pd_metrics_t *m, const pd_scenario_t *names) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  double dur = m->duration_s;
  cJSON_AddNumberToObject(o, "requests", (double)m->requests);
  cJSON_AddNumberToObject(o, "completed", (double)m->completed);
  cJSON_AddNumberToObject(o, "good", (double)m->good);
  cJSON_AddNumberToObject(o, "duration_s", dur);
  cJSON_AddNumberToObject(o, "throughput_rps", dur > 0 ? (double)m->completed / dur : 0);
  cJSON_AddNumberToObject(o, "goodput_rps", dur > 0 ? (double)m->good / dur : 0);
  cJSON_AddNumberToObject(o, "slo_ttft_ms", ms((double)m->slo_ttft_ns));
  cJSON_AddNumberToObject(o, "slo_e2e_ms", ms((double)m->slo_e2e_ns));
  int exact = !m->ttft.buckets && !m->tpot.buckets && !m->itl.buckets && !m->e2e.buckets;
  cJSON_AddStringToObject(o, "percentiles", exact ? "exact" : "histogram");
  add_dist(o, "ttft_ms", &m->ttft);
  add_dist(o, "tpot_ms", &m->tpot);
  add_dist(o, "itl_ms", &m->itl);
  add_dist(o, "e2e_ms", &m->e2e);
  add_cdf(o, "ttft_cdf_ms", &m->ttft);
  cJSON *cap = cJSON_AddObjectToObject(o, "capacity");
  pd_metrics_worker_t t = m->total;
  if (cap) add_capacity(cap, &t);
  if (cap) add_peak(cap, m, &m->peak_total);
  cJSON *wa = names && cap ? cJSON_AddArrayToObject(cap, "workers") : NULL;
  for (uint32_t i = 0; wa && i < m->n_workers && i < names->n_workers; i++) {
    cJSON *e = cJSON_CreateObject();
    if (!e) break;
    cJSON_AddStringToObject(e, "worker", names->workers[i].name);
    add_capacity(e, &m->w[i]);
    add_peak(e, m, &m->peak[i]);
    cJSON_AddItemToArray(wa, e);
  }
  add_recovery(o, m);
  add_overload(o, m);
  pd_metrics_series_json(m, o);
  if (m->ttft.is_nomem || m->itl.is_nomem || m->is_bins_cut)
    cJSON_AddBoolToObject(o, "incomplete", 1);
  return o;
}

void pd_metrics_line(const pd_metrics_t *m, char *buf, size_t cap) {
  pd_metrics_worker_t t = m->total;
  double dur = m->duration_s;
  int n = snprintf(buf, cap,
                   "goodput %.2f/s (%llu/%llu good), ttft p50 %.1f p99 %.1f ms, e2e p99 %.1f ms, "
                   "stranded slot %.1f s (beyond grace %.1f), open legs after end %.1f s",
                   dur > 0 ? (double)m->good / dur : 0, (unsigned long long)m->good,
                   (unsigned long long)m->requests, ms(pd_metrics_hist_percentile(&m->ttft, 50)),
                   ms(pd_metrics_hist_percentile(&m->ttft, 99)),
                   ms(pd_metrics_hist_percentile(&m->e2e, 99)), sec(t.slot_after_end_ns),
                   sec(t.slot_beyond_grace_ns), sec(t.leg_after_end_ns));
  if (n > 0 && (size_t)n < cap && (m->has_capacity || t.kv_page_s > 0)) {
    const pd_metrics_peak_t *p = &m->peak_total;
    int k = snprintf(buf + n, cap - (size_t)n,
                     ", stranded KV %.1f page-s (beyond grace %.1f), peak running %u, queued %u, "
                     "KV pages %llu of %llu",
                     t.kv_after_end_page_s, t.kv_beyond_grace_page_s, p->running, p->queued,
                     (unsigned long long)p->kv_pages, (unsigned long long)p->kv_total_pages);
    n = k < 0 ? -1 : n + k;
  }
  const pd_metrics_overload_t *v = &m->ovl;
  if (n > 0 && (size_t)n < cap && v->has && m->runs == 1) {
    double span = (double)(v->to_ns - v->from_ns) / 1e9;
    int k = snprintf(buf + n, cap - (size_t)n,
                     ", load step: offered %.1f/s, capacity %.1f/s, goodput %.1f/s (%.0f %%), "
                     "shed %u (p99 %.0f ms)",
                     span > 0 ? v->arrivals / span : 0, v->capacity_rps,
                     span > 0 ? v->good / span : 0, 100 * pd_metrics_overload_share(v), v->shed,
                     v->shed ? ms(pd_metrics_hist_percentile(&m->shed, 99)) : 0);
    n = k < 0 ? -1 : n + k;
  }
  if (n < 0 || (size_t)n >= cap || !m->has_burst || m->runs != 1) return;
  if (m->rec.status == PD_METRICS_REC_OK)
    snprintf(buf + n, cap - (size_t)n, ", burst: goodput %.1f/s -> min %.1f/s, recovered %.1f s after it",
             m->rec.pre_rps, m->rec.min_rps, sec(m->rec.after_ns));
  else
    snprintf(buf + n, cap - (size_t)n, ", %s after the burst",
             m->rec.status == PD_METRICS_REC_NEVER ? "never recovered" : "no pre-burst goodput");
}

static int cmp_tev(const void *a, const void *b) {
  const pd_metrics_trace_ev_t *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  if (x->worker != y->worker) return x->worker < y->worker ? -1 : 1;
  return x->delta - y->delta; /* frees before takes at one instant: no false peak */
}

void pd_metrics_trace(const pd_metrics_t *m, pd_trace_t *t, const pd_scenario_t *s) {
  (void)s; /* the worker is the counter's process (PD_TRACE_WORKER + index) */
  if (!t->out || !m->n_tev) return;
  pd_metrics_trace_ev_t *v = malloc(m->n_tev * sizeof *v);
  if (!v) return;
  memcpy(v, m->tev, m->n_tev * sizeof *v);
  qsort(v, m->n_tev, sizeof *v, cmp_tev);
  int64_t cur[PD_SCENARIO_MAX_WORKERS][3];
  memset(cur, 0, sizeof cur);
  for (size_t i = 0; i < m->n_tev; i++) {
    uint32_t wk = v[i].worker;
    cur[wk][v[i].kind] += v[i].delta;
    if (i + 1 < m->n_tev && v[i + 1].t == v[i].t && v[i + 1].worker == wk) continue;
    pd_trace_arg_t a[] = {PD_TRACE_ARG_U("slots held", cur[wk][0]),
                          PD_TRACE_ARG_U("open legs", cur[wk][1]),
                          PD_TRACE_ARG_U("stranded slots", cur[wk][2])};
    pd_trace_counter(t, PD_TRACE_WORKER + wk, "capacity", v[i].t, a, 3);
  }
  free(v);
}

void pd_metrics_world_end(struct pd_world *w) {
  void *rq;
  for (size_t slot = 0; pd_map_next(&w->reqs, &slot, NULL, &rq);)
    pd_metrics_add_request(w->metrics, rq, w->now);
  pd_metrics_trace(w->metrics, &w->trace, w->orig ? w->orig : w->s);
  pd_metrics_capacity_trace(w->metrics, &w->trace, w->orig ? w->orig : w->s);
  pd_metrics_run_end(w->metrics);
}
