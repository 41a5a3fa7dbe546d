/* pd_metrics: the accumulation side (distributions, goodput series, capacity per worker,
 * burst window, recovery). Reporting is in pd_metrics_report.c. docs/metrics.md. */
#include "pd_metrics.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "pd_world.h"

#define MS_NS 1000000ull


/* ---------- distributions ---------- */

/* Log-linear bucket of v: exact below PD_METRICS_SUB, else the top SUB_BITS + 1 bits. */
static uint32_t bucket_of(uint64_t v) {
  if (v < PD_METRICS_SUB) return (uint32_t)v;
  uint32_t e = 63u - (uint32_t)__builtin_clzll(v); /* >= SUB_BITS */
  uint32_t mant = (uint32_t)(v >> (e - PD_METRICS_SUB_BITS)) & (PD_METRICS_SUB - 1);
  return PD_METRICS_SUB + (e - PD_METRICS_SUB_BITS) * PD_METRICS_SUB + mant;
}

/* The middle of bucket b's range. */
static double bucket_mid(uint32_t b) {
  if (b < PD_METRICS_SUB) return b;
  uint32_t e = (b - PD_METRICS_SUB) / PD_METRICS_SUB + PD_METRICS_SUB_BITS;
  uint64_t mant = (b - PD_METRICS_SUB) % PD_METRICS_SUB;
  double width = (double)(1ull << (e - PD_METRICS_SUB_BITS));
  return (double)(PD_METRICS_SUB + mant) * width + width / 2;
}

static int to_buckets(pd_metrics_hist_t *h) {
  h->buckets = calloc(PD_METRICS_BUCKETS, sizeof *h->buckets);
  if (!h->buckets) return -1;
  for (uint64_t i = 0; i < h->n; i++) h->buckets[bucket_of(h->exact[i])]++;
  free(h->exact);
  h->exact = NULL;
  h->cap_exact = 0;
  return 0;
}

void pd_metrics_hist_add(pd_metrics_hist_t *h, uint64_t v) {
  if (!h->buckets && h->n == PD_METRICS_EXACT_MAX && to_buckets(h)) {
    h->is_nomem = 1;
    return;
  }
  if (!h->buckets && h->n == h->cap_exact) {
    size_t nc = h->cap_exact ? h->cap_exact * 2 : 256;
    uint64_t *ne = realloc(h->exact, nc * sizeof *ne);
    if (!ne) {
      h->is_nomem = 1;
      return;
    }
    h->exact = ne;
    h->cap_exact = nc;
  }
  if (h->buckets) h->buckets[bucket_of(v)]++;
  else h->exact[h->n] = v;
  if (!h->n || v < h->min) h->min = v;
  if (!h->n || v > h->max) h->max = v;
  h->n++;
  h->sum += (double)v;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

double pd_metrics_hist_percentile(const pd_metrics_hist_t *h, double p) {
  if (!h->n) return 0;
  double rank = p / 100.0 * (double)(h->n - 1);
  if (!h->buckets) { /* exact: sort a copy, interpolate linearly between neighbours */
    uint64_t *a = malloc(h->n * sizeof *a);
    if (!a) return 0;
    memcpy(a, h->exact, h->n * sizeof *a);
    qsort(a, h->n, sizeof *a, cmp_u64);
    size_t lo = (size_t)rank;
    double frac = rank - (double)lo, v = (double)a[lo];
    if (lo + 1 < h->n) v += ((double)a[lo + 1] - (double)a[lo]) * frac;
    free(a);
    return v;
  }
  uint64_t k = (uint64_t)(rank + 0.5), cum = 0;
  for (uint32_t b = 0; b < PD_METRICS_BUCKETS; b++) {
    cum += h->buckets[b];
    if (cum > k) {
      double v = bucket_mid(b);
      return v < (double)h->min ? (double)h->min : v > (double)h->max ? (double)h->max : v;
    }
  }
  return (double)h->max;
}

double pd_metrics_hist_mean(const pd_metrics_hist_t *h) { return h->n ? h->sum / (double)h->n : 0; }

void pd_metrics_hist_free(pd_metrics_hist_t *h) {
  free(h->exact);
  free(h->buckets);
  memset(h, 0, sizeof *h);
}

/* ---------- the run ---------- */

void pd_metrics_init(pd_metrics_t *m, int keep_trace) {
  memset(m, 0, sizeof *m);
  m->keep_trace = keep_trace;
}

void pd_metrics_free(pd_metrics_t *m) {
  pd_metrics_hist_free(&m->ttft);
  pd_metrics_hist_free(&m->tpot);
  pd_metrics_hist_free(&m->itl);
  pd_metrics_hist_free(&m->e2e);
  pd_metrics_hist_free(&m->shed);
  free(m->bins);
  free(m->tev);
  free(m->cs);
  pd_metrics_series_free(m);
  memset(m, 0, sizeof *m);
}

static void burst_span(pd_metrics_t *m, uint64_t from, uint64_t to) {
  if (!m->has_burst || from < m->burst_from) m->burst_from = from;
  if (!m->has_burst || to > m->burst_to) m->burst_to = to;
  m->has_burst = 1;
}

void pd_metrics_run_begin(pd_metrics_t *m, const pd_scenario_t *s) {
  const pd_scenario_config_t *c = &s->config;
  m->runs++;
  m->scen = s;
  m->slo_ttft_ns = c->slo_ttft_ms * MS_NS;
  m->slo_e2e_ns = c->slo_e2e_ms * MS_NS;
  m->grace_ns = c->grace_ms * MS_NS;
  m->window_ns = (c->goodput_window_ms ? c->goodput_window_ms : 10000) * MS_NS;
  m->has_arrival = 0;
  m->t_first_arrival = m->t_last_arrival = m->t_last_end = 0;
  memset(m->w, 0, sizeof m->w);
  m->n_workers = s->n_workers;
  m->n_bins = 0;
  m->is_bins_cut = 0;
  m->has_burst = 0;
  memset(&m->rec, 0, sizeof m->rec);
  m->n_tev = 0;
  pd_metrics_series_reset(m);
  pd_metrics_capacity_begin(m);
  pd_metrics_overload_begin(m, s);
  /* a load step above the base is a burst until the load is back at or under it (O4.1: the
   * trigger's end is when recovery starts counting, not the last request it touched) */
  uint64_t a, b, ramp;
  for (uint32_t next = 0; pd_scenario_step_span(&s->workload, &next, &a, &b, &ramp);)
    burst_span(m, a * MS_NS, (b + ramp) * MS_NS);
  for (uint32_t i = 0; i < s->n_workers; i++) /* a crash is a burst until its restart */
    if (s->workers[i].crash_at_ms)
      burst_span(m, s->workers[i].crash_at_ms * MS_NS,
                 (s->workers[i].restart_at_ms ? s->workers[i].restart_at_ms
                                              : s->workers[i].crash_at_ms) * MS_NS);
}

void pd_metrics_req_free(pd_metrics_req_t *x) {
  free(x->gaps);
  memset(x, 0, sizeof *x);
}

void pd_metrics_on_data(pd_metrics_t *m, pd_client_request_t *rq, uint64_t now) {
  pd_metrics_req_t *x = &rq->metrics;
  (void)m;
  if (!rq->is_stream) return;
  if (x->has_last && x->n == x->cap) {
    uint32_t nc = x->cap ? x->cap * 2 : 16;
    uint64_t *ng = realloc(x->gaps, nc * sizeof *ng);
    if (!ng) return; /* this gap is lost; the request's ITL is short of it */
    x->gaps = ng;
    x->cap = nc;
  }
  if (x->has_last) x->gaps[x->n++] = now - x->t_last;
  x->t_last = now;
  x->has_last = 1;
}

static void bin_good(pd_metrics_t *m, uint64_t t_end) {
  uint64_t bin_ns = m->window_ns / PD_METRICS_WINDOW_BINS;
  uint64_t b = t_end / (bin_ns ? bin_ns : 1);
  if (pd_metrics_bin_add(&m->bins, &m->n_bins, &m->cap_bins, b)) m->is_bins_cut = 1;
}

int pd_metrics_bin_add(uint32_t **bins, size_t *n_bins, size_t *cap_bins, uint64_t b) {
  if (b >= PD_METRICS_MAX_BINS) return -1;
  if (b >= *cap_bins) {
    size_t nc = *cap_bins ? *cap_bins : 1024;
    while (nc <= b) nc *= 2;
    uint32_t *nb = realloc(*bins, nc * sizeof *nb);
    if (!nb) return -1;
    memset(nb + *cap_bins, 0, (nc - *cap_bins) * sizeof *nb);
    *bins = nb;
    *cap_bins = nc;
  }
  if (b >= *n_bins) *n_bins = (size_t)b + 1;
  (*bins)[b]++;
  return 0;
}

static void latencies(pd_metrics_t *m, const pd_client_request_t *rq) {
  uint64_t ttft = rq->t_first_data - rq->t_arrival, e2e = rq->t_end - rq->t_arrival;
  pd_metrics_hist_add(&m->ttft, ttft);
  pd_metrics_hist_add(&m->e2e, e2e);
  if (rq->is_stream && rq->tokens > 1)
    pd_metrics_hist_add(&m->tpot, (rq->t_end - rq->t_first_data) / (rq->tokens - 1));
  for (uint32_t i = 0; rq->is_stream && i < rq->metrics.n; i++)
    pd_metrics_hist_add(&m->itl, rq->metrics.gaps[i]);
  m->completed++;
  pd_metrics_series_ttft(m, rq->t_arrival, ttft);
  if (ttft <= m->slo_ttft_ns && e2e <= m->slo_e2e_ns) {
    m->good++;
    bin_good(m, rq->t_end);
    pd_metrics_overload_good(m, rq->t_end);
  }
}

static void trace_ev(pd_metrics_t *m, uint64_t t, uint32_t worker, int kind, int delta) {
  if (m->n_tev == m->cap_tev) {
    size_t nc = m->cap_tev ? m->cap_tev * 2 : 256;
    pd_metrics_trace_ev_t *ne = realloc(m->tev, nc * sizeof *ne);
    if (!ne) return;
    m->tev = ne;
    m->cap_tev = nc;
  }
  m->tev[m->n_tev++] = (pd_metrics_trace_ev_t){t, worker, kind, delta};
}

/* [t0, t1) held; the part after `end` and after end + grace are added to the last two. */
static void held(uint64_t t0, uint64_t t1, int has_end, uint64_t end, uint64_t grace,
                 uint64_t *all, uint64_t *after, uint64_t *beyond) {
  if (t1 <= t0) return;
  *all += t1 - t0;
  if (!has_end) return;
  uint64_t a = end > t0 ? end : t0, g = end + grace > t0 ? end + grace : t0;
  if (t1 > a) *after += t1 - a;
  if (t1 > g) *beyond += t1 - g;
}

static void capacity(pd_metrics_t *m, const pd_client_request_t *rq, const pd_worker_leg_t *l,
                     uint64_t now) {
  if (l->worker >= PD_SCENARIO_MAX_WORKERS) return;
  pd_metrics_worker_t *w = &m->w[l->worker];
  int has_end = rq->ended || rq->gone;
  if (l->slot_taken) {
    uint64_t t1 = l->is_slot_freed || l->t_slot_freed ? l->t_slot_freed : now;
    held(l->t_slot_taken, t1, has_end, rq->t_end, m->grace_ns, &w->slot_ns,
         &w->slot_after_end_ns, &w->slot_beyond_grace_ns);
    if (has_end) pd_metrics_series_stranded(m, rq->t_end > l->t_slot_taken ? rq->t_end : l->t_slot_taken, t1);
    if (m->keep_trace) {
      trace_ev(m, l->t_slot_taken, l->worker, 0, +1);
      trace_ev(m, t1, l->worker, 0, -1);
      uint64_t a = rq->t_end > l->t_slot_taken ? rq->t_end : l->t_slot_taken;
      if (has_end && t1 > a) {
        trace_ev(m, a, l->worker, 2, +1);
        trace_ev(m, t1, l->worker, 2, -1);
      }
    }
  }
  pd_metrics_kv_held(w, l, has_end, rq->t_end, m->grace_ns, now);
  uint64_t c1 = l->gw_open ? now : l->t_gw_closed;
  held(l->t_open, c1, has_end, rq->t_end, m->grace_ns, &w->leg_ns, &w->leg_after_end_ns,
       &w->leg_beyond_grace_ns);
  if (m->keep_trace && c1 > l->t_open) {
    trace_ev(m, l->t_open, l->worker, 1, +1);
    trace_ev(m, c1, l->worker, 1, -1);
  }
}

/* A fault entry bounded in time: a worker fault with an `nth` range, or a traffic fault
 * naming one request. The instant its leg reached the worker is part of the burst. */
static int is_bounded_fault(const pd_worker_leg_t *l, const pd_scenario_t *s) {
  if (!l->is_fault_fired || l->fault < 0 || !l->fp) return 0;
  for (uint32_t i = 0; i < s->n_tfaults; i++)
    if (l->fp == &s->tfaults[i].f) return s->tfaults[i].request != PD_TRAFFIC_FAULT_ANY;
  return l->fp->nth_to != 0;
}

void pd_metrics_add_request(pd_metrics_t *m, const pd_client_request_t *rq, uint64_t now) {
  m->requests++;
  if (!m->has_arrival || rq->t_arrival < m->t_first_arrival) m->t_first_arrival = rq->t_arrival;
  if (!m->has_arrival || rq->t_arrival > m->t_last_arrival) m->t_last_arrival = rq->t_arrival;
  m->has_arrival = 1;
  pd_metrics_overload_arrival(m, rq);
  if ((rq->ended || rq->gone) && rq->t_end > m->t_last_end) m->t_last_end = rq->t_end;
  if (rq->is_clean && (rq->has_first_data || rq->t_first_data)) latencies(m, rq);
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    capacity(m, rq, l, now);
    if (m->scen && is_bounded_fault(l, m->scen)) burst_span(m, l->t_open_arrive, l->t_open_arrive);
  }
}

pd_metrics_recovery_t pd_metrics_recovery(const uint32_t *bins, size_t n_bins, uint64_t bin_ns,
                                          uint32_t win_bins, uint64_t t0, uint64_t t_stop,
                                          uint64_t burst_from, uint64_t burst_to) {
  pd_metrics_recovery_t r = {PD_METRICS_REC_NO_BASE, 0, 0, 0};
  assert(bin_ns > 0 && win_bins > 0);
  uint64_t b0 = (t0 + bin_ns - 1) / bin_ns, bf = burst_from / bin_ns; /* whole bins before */
  uint64_t good = 0;
  for (uint64_t b = b0; b < bf; b++) good += b < n_bins ? bins[b] : 0;
  if (bf <= b0 || !good) return r;
  r.pre_rps = (double)good / ((double)(bf - b0) * (double)bin_ns / 1e9);
  double win_s = (double)win_bins * (double)bin_ns / 1e9;
  r.status = PD_METRICS_REC_NEVER;
  r.min_rps = r.pre_rps;
  /* back = a window at the level with no later one under PD_METRICS_RELAPSE of it (O4.1: a
   * run that bounces back for a window and collapses again has not recovered; a dip of a few
   * completions is the arrivals' noise); the lowest is taken until the recovery */
  double min_all = r.pre_rps, min_at_back = 0;
  int is_back = 0;
  uint64_t back_k = 0;
  uint64_t sum = 0, start = bf; /* sliding sum over [k, k + win_bins) */
  for (uint64_t b = start; b < start + win_bins; b++) sum += b < n_bins ? bins[b] : 0;
  for (uint64_t k = start; (k + win_bins) * bin_ns <= t_stop; k++) {
    double g = (double)sum / win_s;
    if (g < min_all) min_all = g;
    if (k * bin_ns >= burst_to) {
      if (g < PD_METRICS_RELAPSE * r.pre_rps) is_back = 0;
      else if (!is_back && g >= PD_METRICS_RECOVERED * r.pre_rps)
        is_back = 1, back_k = k, min_at_back = min_all;
    }
    sum -= k < n_bins ? bins[k] : 0;
    sum += k + win_bins < n_bins ? bins[k + win_bins] : 0;
  }
  r.min_rps = min_all;
  if (is_back) {
    r.status = PD_METRICS_REC_OK;
    r.after_ns = back_k * bin_ns - burst_to;
    r.min_rps = min_at_back;
  }
  return r;
}

void pd_metrics_run_end(pd_metrics_t *m) {
  for (uint32_t i = 0; i < m->n_workers && i < PD_SCENARIO_MAX_WORKERS; i++) {
    pd_metrics_worker_t *t = &m->total, *w = &m->w[i];
    t->slot_ns += w->slot_ns;
    t->slot_after_end_ns += w->slot_after_end_ns;
    t->slot_beyond_grace_ns += w->slot_beyond_grace_ns;
    t->leg_ns += w->leg_ns;
    t->leg_after_end_ns += w->leg_after_end_ns;
    t->leg_beyond_grace_ns += w->leg_beyond_grace_ns;
    t->kv_page_s += w->kv_page_s;
    t->kv_after_end_page_s += w->kv_after_end_page_s;
    t->kv_beyond_grace_page_s += w->kv_beyond_grace_page_s;
  }
  pd_metrics_capacity_end(m);
  if (m->has_arrival && m->t_last_end > m->t_first_arrival)
    m->duration_s += (double)(m->t_last_end - m->t_first_arrival) / 1e9;
  if (!m->has_burst) return;
  uint64_t bin_ns = m->window_ns / PD_METRICS_WINDOW_BINS;
  m->rec = pd_metrics_recovery(m->bins, m->n_bins, bin_ns ? bin_ns : 1, PD_METRICS_WINDOW_BINS,
                               m->t_first_arrival, m->t_last_arrival, m->burst_from,
                               m->burst_to);
}
