/* pd_metrics: the timelines of one run for `pdref report` (pd_metrics.h): TTFT by arrival
 * bin and stranded slot time per bin, on the goodput series' bins; their JSON, merged down
 * to at most PD_METRICS_SERIES_MAX_POINTS points with the goodput series. docs/metrics.md. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "pd_metrics.h"

typedef struct pd_metrics_series {
  size_t n, cap;        /* bins in use, bins allocated */
  int is_cut;           /* a sample past PD_METRICS_SERIES_MAX_BINS was dropped */
  double *ttft_sum_ns;  /* per bin: TTFT summed over the completed requests arriving in it */
  uint32_t *ttft_n;
  uint64_t *ttft_max_ns;
  uint64_t *stranded_ns; /* slot time held after the client's end, within the bin */
} pd_metrics_series_t;

static uint64_t bin_ns(const pd_metrics_t *m) {
  uint64_t b = m->window_ns / PD_METRICS_WINDOW_BINS;
  return b ? b : 1;
}

/* Room for bin b (zeroed); 0, or -1 when b is past the limit or memory ran out. */
static int grow(pd_metrics_t *m, uint64_t b) {
  if (b >= PD_METRICS_SERIES_MAX_BINS) {
    if (m->series) m->series->is_cut = 1;
    return -1;
  }
  if (!m->series && !(m->series = calloc(1, sizeof *m->series))) return -1;
  pd_metrics_series_t *s = m->series;
  if (b < s->cap) {
    if (b >= s->n) s->n = (size_t)b + 1;
    return 0;
  }
  size_t nc = s->cap ? s->cap : 256;
  while (nc <= b) nc *= 2;
  double *a = realloc(s->ttft_sum_ns, nc * sizeof *a);
  if (a) s->ttft_sum_ns = a;
  uint32_t *c = realloc(s->ttft_n, nc * sizeof *c);
  if (c) s->ttft_n = c;
  uint64_t *x = realloc(s->ttft_max_ns, nc * sizeof *x);
  if (x) s->ttft_max_ns = x;
  uint64_t *st = realloc(s->stranded_ns, nc * sizeof *st);
  if (st) s->stranded_ns = st;
  if (!a || !c || !x || !st) return -1; /* the arrays kept their old size */
  size_t k = nc - s->cap;
  memset(s->ttft_sum_ns + s->cap, 0, k * sizeof *a);
  memset(s->ttft_n + s->cap, 0, k * sizeof *c);
  memset(s->ttft_max_ns + s->cap, 0, k * sizeof *x);
  memset(s->stranded_ns + s->cap, 0, k * sizeof *st);
  s->cap = nc;
  s->n = (size_t)b + 1;
  return 0;
}

void pd_metrics_series_ttft(pd_metrics_t *m, uint64_t t_arrival, uint64_t ttft_ns) {
  uint64_t b = t_arrival / bin_ns(m);
  if (grow(m, b)) return;
  pd_metrics_series_t *s = m->series;
  s->ttft_sum_ns[b] += (double)ttft_ns;
  s->ttft_n[b]++;
  if (ttft_ns > s->ttft_max_ns[b]) s->ttft_max_ns[b] = ttft_ns;
}

void pd_metrics_series_stranded(pd_metrics_t *m, uint64_t t0, uint64_t t1) {
  uint64_t w = bin_ns(m);
  if (t1 <= t0) return;
  uint64_t last = (t1 - 1) / w;
  if (grow(m, last < PD_METRICS_SERIES_MAX_BINS ? last : PD_METRICS_SERIES_MAX_BINS - 1)) return;
  if (last >= PD_METRICS_SERIES_MAX_BINS) m->series->is_cut = 1;
  /* bounded: at most PD_METRICS_SERIES_MAX_BINS bins */
  for (uint64_t b = t0 / w; b <= last && b < PD_METRICS_SERIES_MAX_BINS; b++) {
    uint64_t lo = b * w > t0 ? b * w : t0, hi = (b + 1) * w < t1 ? (b + 1) * w : t1;
    m->series->stranded_ns[b] += hi - lo;
  }
}

void pd_metrics_series_reset(pd_metrics_t *m) {
  pd_metrics_series_t *s = m->series;
  if (!s) return;
  size_t n = s->n;
  memset(s->ttft_sum_ns, 0, n * sizeof *s->ttft_sum_ns);
  memset(s->ttft_n, 0, n * sizeof *s->ttft_n);
  memset(s->ttft_max_ns, 0, n * sizeof *s->ttft_max_ns);
  memset(s->stranded_ns, 0, n * sizeof *s->stranded_ns);
  s->n = 0;
  s->is_cut = 0;
}

void pd_metrics_series_free(pd_metrics_t *m) {
  pd_metrics_series_t *s = m->series;
  if (!s) return;
  free(s->ttft_sum_ns);
  free(s->ttft_n);
  free(s->ttft_max_ns);
  free(s->stranded_ns);
  free(s);
  m->series = NULL;
}

/* A number rounded to three decimals, so the JSON stays short. */
static cJSON *num(double v) { return cJSON_CreateNumber((double)(long long)(v * 1e3 + (v < 0 ? -0.5 : 0.5)) / 1e3); }

void pd_metrics_series_json(const pd_metrics_t *m, void *obj) {
  const pd_metrics_series_t *s = m->series;
  size_t n = s && s->n > m->n_bins ? s->n : m->n_bins;
  if (m->runs != 1 || !n) return; /* pooled worlds have no one timeline */
  size_t k = (n + PD_METRICS_SERIES_MAX_POINTS - 1) / PD_METRICS_SERIES_MAX_POINTS; /* bins/point */
  double pt_s = (double)(k * bin_ns(m)) / 1e9;
  cJSON *o = cJSON_AddObjectToObject(obj, "series");
  if (!o) return;
  cJSON_AddNumberToObject(o, "bin_ms", pt_s * 1e3);
  cJSON *g = cJSON_AddArrayToObject(o, "goodput_rps"), *tm = cJSON_AddArrayToObject(o, "ttft_ms_mean");
  cJSON *tx = cJSON_AddArrayToObject(o, "ttft_ms_max"), *st = cJSON_AddArrayToObject(o, "stranded_slots");
  for (size_t p = 0; p * k < n && g && tm && tx && st; p++) {
    double good = 0, sum = 0, stranded = 0;
    uint64_t cnt = 0, mx = 0;
    size_t end = (p + 1) * k < n ? (p + 1) * k : n;
    double span_s = (double)((end - p * k) * bin_ns(m)) / 1e9; /* the last point may be short */
    for (size_t b = p * k; b < end; b++) {
      if (b < m->n_bins) good += m->bins[b];
      if (!s || b >= s->n) continue;
      sum += s->ttft_sum_ns[b];
      cnt += s->ttft_n[b];
      if (s->ttft_max_ns[b] > mx) mx = s->ttft_max_ns[b];
      stranded += (double)s->stranded_ns[b];
    }
    cJSON_AddItemToArray(g, num(good / span_s));
    cJSON_AddItemToArray(tm, cnt ? num(sum / (double)cnt / 1e6) : cJSON_CreateNull());
    cJSON_AddItemToArray(tx, cnt ? num((double)mx / 1e6) : cJSON_CreateNull());
    cJSON_AddItemToArray(st, num(stranded / 1e9 / span_s)); /* mean stranded slots in it */
  }
  if ((s && s->is_cut) || m->is_bins_cut) cJSON_AddBoolToObject(o, "cut", 1);
}
