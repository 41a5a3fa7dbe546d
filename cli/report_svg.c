/* report: hand-drawn SVG line charts (axes, ticks, legend), the TTFT CDFs per mode and the
 * capacity scenarios' timelines (goodput, TTFT, stranded slots) from the metrics JSON. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define W 470.0
#define H 270.0
#define ML 58.0 /* margins: left, right, top, bottom */
#define MR 18.0
#define MT 26.0
#define MB 62.0
#define CDF_GRID 96          /* x points of a pooled CDF */
#define MAX_TIMELINES 24     /* capacity scenarios drawn */
#define MAX_MODES 16
#define MIN_TIMELINE_REQUESTS 100

const char *pd_report_mode_colour(const char *mode) {
  static const char *const names[] = {"joined", "pr1150", "minilb", "reference",
                                      "vllm-toy-proxy", "mooncake-proxy", "llmd-sidecar"};
  static const char *const col[] = {"#d62728", "#ff7f0e", "#9467bd", "#2ca02c",
                                    "#8c564b", "#e377c2", "#17becf", "#1f77b4", "#bcbd22", "#7f7f7f"};
  unsigned h = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(mode, names[i])) return col[i];
  for (const char *p = mode; *p; p++) h = h * 31u + (unsigned char)*p;
  return col[7 + h % 3];
}

/* A "nice" step near range/5: 1, 2 or 5 times a power of ten. */
static double nice_step(double range) {
  double raw = range / 5, p = pow(10, floor(log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

typedef struct axes {
  double x0, x1, y0, y1;
  int is_log_x;
} axes_t;

static double px(const axes_t *a, double x) {
  double t = a->is_log_x ? (log10(x) - log10(a->x0)) / (log10(a->x1) - log10(a->x0))
                         : (x - a->x0) / (a->x1 - a->x0);
  return ML + t * (W - ML - MR);
}
static double py(const axes_t *a, double y) { return H - MB - (y - a->y0) / (a->y1 - a->y0) * (H - MT - MB); }

static void bounds(axes_t *a, const pd_report_line_t *l, size_t n) {
  int any = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < l[i].n; k++) {
      double x = l[i].x[k], y = l[i].y[k];
      if (isnan(y) || isnan(x) || (a->is_log_x && x <= 0)) continue;
      if (!any || x < a->x0) a->x0 = x;
      if (!any || x > a->x1) a->x1 = x;
      if (!any || y > a->y1) a->y1 = y;
      any = 1;
    }
  a->y0 = 0;
  if (!any) a->x0 = 0, a->x1 = 1, a->y1 = 1;
  if (a->y1 <= a->y0) a->y1 = a->y0 + 1;
  if (a->is_log_x) {
    a->x0 = pow(10, floor(log10(a->x0)));
    a->x1 = pow(10, ceil(log10(a->x1)));
    if (a->x1 <= a->x0) a->x1 = a->x0 * 10;
  } else if (a->x1 <= a->x0) {
    a->x1 = a->x0 + 1;
  }
  double s = nice_step(a->y1 - a->y0);
  a->y1 = ceil(a->y1 / s) * s;
}

/* A tick label: 250, 2.5, 10k, 1M. */
static const char *tick(double v, char *buf, size_t cap) {
  double a = fabs(v);
  if (a >= 1e6) snprintf(buf, cap, "%gM", v / 1e6);
  else if (a >= 1e4) snprintf(buf, cap, "%gk", v / 1e3);
  else snprintf(buf, cap, "%g", v);
  return buf;
}

static void ticks(FILE *out, const axes_t *a) {
  char b[32];
  double s = nice_step(a->y1 - a->y0);
  for (double y = a->y0; y <= a->y1 + s / 2; y += s) /* at most ~11 ticks */
    fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e6ee\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
            ML, W - MR, py(a, y), py(a, y), ML - 4, py(a, y) + 4, tick(y, b, sizeof b));
  if (a->is_log_x) {
    for (double x = a->x0; x <= a->x1 * 1.001; x *= 10) /* bounded by the decades shown */
      fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e6ee\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
              px(a, x), px(a, x), MT, H - MB, px(a, x), H - MB + 14, tick(x, b, sizeof b));
    return;
  }
  double sx = nice_step(a->x1 - a->x0);
  for (double x = ceil(a->x0 / sx) * sx; x <= a->x1 + sx / 100; x += sx)
    fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e6ee\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
            px(a, x), px(a, x), MT, H - MB, px(a, x), H - MB + 14, tick(x, b, sizeof b));
}

/* Line i of a chart: every second and third one dashed, so lines that coincide all show. */
static void path(FILE *out, const axes_t *a, const pd_report_line_t *l, size_t i) {
  static const char *const dash[] = {"none", "7 4", "2 3"};
  int pen = 0;
  double last_y = 0;
  fprintf(out, "<path fill=\"none\" stroke-width=\"1.6\" stroke=\"%s\" stroke-dasharray=\"%s\" d=\"",
          l->colour, dash[i % 3]);
  for (size_t k = 0; k < l->n; k++) {
    double x = l->x[k], y = l->y[k];
    if (isnan(y) || isnan(x) || (a->is_log_x && x <= 0)) {
      pen = 0;
      continue;
    }
    if (pen && l->is_step) fprintf(out, "H%.1f", px(a, x));
    else if (pen) fprintf(out, "L%.1f %.1f", px(a, x), py(a, y));
    else fprintf(out, "M%.1f %.1f", px(a, x), py(a, y));
    if (pen && l->is_step && y != last_y) fprintf(out, "V%.1f", py(a, y));
    pen = 1;
    last_y = y;
  }
  fputs("\"><title>", out);
  pd_report_esc(out, l->label);
  fputs("</title></path>\n", out);
}

void pd_report_chart(FILE *out, const char *title, const char *x_label, const char *y_label,
                     const pd_report_line_t *lines, size_t n_lines, int is_log_x,
                     const double *band) {
  axes_t a = {.is_log_x = is_log_x};
  bounds(&a, lines, n_lines);
  fprintf(out, "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
               "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\"><title>", W, H, W, H);
  pd_report_esc(out, title);
  fprintf(out, "</title><text x=\"%.1f\" y=\"16\" font-weight=\"bold\">", ML);
  pd_report_esc(out, title);
  fputs("</text>\n", out);
  ticks(out, &a);
  if (band && band[1] >= band[0] && band[0] <= a.x1 && band[1] >= a.x0) {
    double b0 = px(&a, band[0] > a.x0 ? band[0] : a.x0), b1 = px(&a, band[1] < a.x1 ? band[1] : a.x1);
    fprintf(out, "<rect class=\"burst\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                 "fill=\"#f6d7d7\"><title>fault burst</title></rect>\n", b0, MT, b1 - b0 > 1 ? b1 - b0 : 1,
            H - MT - MB);
  }
  fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
               "stroke=\"#99a\"/>\n", ML, MT, W - ML - MR, H - MT - MB);
  for (size_t i = 0; i < n_lines; i++) path(out, &a, &lines[i], i);
  fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (ML + W - MR) / 2, H - MB + 28);
  pd_report_esc(out, x_label);
  fprintf(out, "</text><text transform=\"translate(12 %.1f) rotate(-90)\" text-anchor=\"middle\">",
          (MT + H - MB) / 2);
  pd_report_esc(out, y_label);
  fputs("</text>\n", out);
  for (size_t i = 0; i < n_lines; i++) { /* legend: two rows of four */
    double lx = ML + (double)(i % 4) * 100, ly = H - 18 + (double)(i / 4 % 2) * 13;
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"4\" fill=\"%s\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\">", lx, ly - 4, lines[i].colour, lx + 14, ly);
    pd_report_esc(out, lines[i].label);
    fputs("</text>\n", out);
  }
  fputs("</svg>\n", out);
}

/* F(x) in percent of one row's quantile points [[p, ms], ...] (p ascending, ms not
 * decreasing): 0 below the first, linear between neighbours, the last p from the last on. */
static double cdf_at(const cJSON *pts, double x) {
  double pp = 0, pm = 0;
  int first = 1;
  const cJSON *e;
  cJSON_ArrayForEach(e, pts) {
    const cJSON *p = cJSON_GetArrayItem(e, 0), *m = cJSON_GetArrayItem(e, 1);
    if (!cJSON_IsNumber(p) || !cJSON_IsNumber(m)) continue;
    if (x < m->valuedouble) /* x >= pm here, so m > pm */
      return first ? 0 : pp + (p->valuedouble - pp) * (x - pm) / (m->valuedouble - pm);
    pp = p->valuedouble, pm = m->valuedouble, first = 0;
  }
  return first ? 0 : pp;
}

static const cJSON *metrics_of(const cJSON *row, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(row, "metrics"), key);
}

/* Every sim row of r (callback per row), in input order. */
#define FOR_SIM_ROWS(r, row)                                                              \
  for (size_t in_ = 0; in_ < (r)->n; in_++)                                               \
    if ((r)->in[in_].kind == PD_REPORT_SIM)                                               \
      cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive((r)->in[in_].root, "rows"))

typedef struct mode_cdf {
  const char *mode;
  double x[CDF_GRID], y[CDF_GRID];
  double weight;
} mode_cdf_t;

/* Pool the rows (of scenario, or all when NULL) per mode: F(x) = sum n_i F_i(x) / sum n_i. */
static size_t pooled_cdfs(const pd_report_t *r, const char *scenario, mode_cdf_t *mc) {
  double lo = 0, hi = 0;
  size_t n = 0;
  cJSON *row;
  FOR_SIM_ROWS(r, row) {
    const cJSON *pts = metrics_of(row, "ttft_cdf_ms");
    if (!cJSON_IsArray(pts) || (scenario && strcmp(pd_report_str(row, "scenario"), scenario))) continue;
    const cJSON *f = cJSON_GetArrayItem(pts, 0), *l = cJSON_GetArrayItem(pts, cJSON_GetArraySize(pts) - 1);
    double a = cJSON_GetArrayItem(f, 1) ? cJSON_GetArrayItem(f, 1)->valuedouble : 0;
    double b = cJSON_GetArrayItem(l, 1) ? cJSON_GetArrayItem(l, 1)->valuedouble : 0;
    if (a > 0 && (lo == 0 || a < lo)) lo = a;
    if (b > hi) hi = b;
  }
  if (lo <= 0 || hi <= 0) return 0;
  lo = lo * 0.9, hi = hi * 1.1;
  FOR_SIM_ROWS(r, row) {
    const cJSON *pts = metrics_of(row, "ttft_cdf_ms");
    if (!cJSON_IsArray(pts) || (scenario && strcmp(pd_report_str(row, "scenario"), scenario))) continue;
    double w = pd_report_num(metrics_of(row, "ttft_ms"), "n", 0);
    const char *mode = pd_report_str(row, "mode");
    size_t k = 0;
    while (k < n && strcmp(mc[k].mode, mode)) k++;
    if (k == n) {
      if (n == MAX_MODES) continue;
      memset(&mc[n], 0, sizeof mc[n]);
      mc[n++].mode = mode;
    }
    for (int g = 0; g < CDF_GRID && w > 0; g++) {
      double x = lo * pow(hi / lo, (double)g / (CDF_GRID - 1));
      mc[k].x[g] = x;
      mc[k].y[g] += w * cdf_at(pts, x);
    }
    mc[k].weight += w;
  }
  for (size_t k = 0; k < n; k++)
    for (int g = 0; g < CDF_GRID; g++) mc[k].y[g] = mc[k].weight > 0 ? mc[k].y[g] / mc[k].weight : NAN;
  return n;
}

static void cdf_chart(FILE *out, const pd_report_t *r, const char *scenario, const char *title) {
  mode_cdf_t *mc = calloc(MAX_MODES, sizeof *mc);
  pd_report_line_t lines[MAX_MODES];
  size_t n = mc ? pooled_cdfs(r, scenario, mc) : 0, k = 0;
  for (size_t i = 0; i < n; i++)
    if (mc[i].weight > 0)
      lines[k++] = (pd_report_line_t){mc[i].mode, pd_report_mode_colour(mc[i].mode), mc[i].x, mc[i].y, CDF_GRID, 0};
  if (k) pd_report_chart(out, title, "TTFT (ms, log scale)", "% of completed requests", lines, k, 1, NULL);
  else fputs("<p class=\"note\">No TTFT distribution in these results.</p>\n", out);
  free(mc);
}

/* One timeline chart of key (an array in metrics.series) for scenario, a line per mode. */
static void timeline(FILE *out, const pd_report_t *r, const char *scenario, const char *key,
                     const char *title, const char *y_label) {
  pd_report_line_t lines[MAX_MODES];
  double *buf[MAX_MODES], band[2] = {0, -1};
  size_t n = 0;
  memset(lines, 0, sizeof lines);
  cJSON *row;
  FOR_SIM_ROWS(r, row) {
    const cJSON *s = metrics_of(row, "series");
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(s, key);
    if (n == MAX_MODES || strcmp(pd_report_str(row, "scenario"), scenario) || !cJSON_IsArray(arr)) continue;
    size_t len = (size_t)cJSON_GetArraySize(arr), i = 0;
    double bin_s = pd_report_num(s, "bin_ms", 1000) / 1e3;
    if (!(buf[n] = malloc(2 * (len ? len : 1) * sizeof(double)))) continue;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
      buf[n][i] = ((double)i + 0.5) * bin_s;
      buf[n][len + i] = cJSON_IsNumber(e) ? e->valuedouble : NAN;
      i++;
    }
    const cJSON *rec = metrics_of(row, "recovery");
    if (rec && band[1] < band[0]) { /* the scenario's burst, as its first row measured it */
      band[0] = pd_report_num(rec, "burst_from_ms", 0) / 1e3;
      band[1] = pd_report_num(rec, "burst_to_ms", -1e3) / 1e3;
    }
    const char *mode = pd_report_str(row, "mode");
    lines[n] = (pd_report_line_t){mode, pd_report_mode_colour(mode), buf[n], buf[n] + len, len, 0};
    n++;
  }
  pd_report_chart(out, title, "simulated time (s)", y_label, lines, n, 0, band[1] >= band[0] ? band : NULL);
  for (size_t i = 0; i < n; i++) free(buf[i]);
}

static int is_capacity_row(const cJSON *row) {
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(metrics_of(row, "series"), "goodput_rps");
  return cJSON_GetArraySize(s) >= 3 &&
         pd_report_num(cJSON_GetObjectItemCaseSensitive(row, "metrics"), "requests", 0) >= MIN_TIMELINE_REQUESTS;
}

void pd_report_charts(FILE *out, const pd_report_t *r, pd_report_stats_t *st) {
  fputs("<h2 id=\"ttft\">TTFT per mode</h2>\n<p>Pooled over every row with completed "
        "requests (each row weighted by its number of completed requests).</p>\n<div class=\"charts\">", out);
  mode_cdf_t *mc = calloc(MAX_MODES, sizeof *mc);
  st->cdf_modes = mc ? pooled_cdfs(r, NULL, mc) : 0;
  free(mc);
  cdf_chart(out, r, NULL, "TTFT CDF, all scenarios");
  fputs("</div>\n<h2 id=\"capacity\">Capacity scenarios over time</h2>\n<p>A line per mode; "
        "the shaded span is the fault burst (metrics.recovery).</p>\n", out);
  const char *done[MAX_TIMELINES];
  size_t n_done = 0;
  cJSON *row;
  FOR_SIM_ROWS(r, row) {
    const char *sc = pd_report_str(row, "scenario");
    int seen = 0;
    for (size_t i = 0; i < n_done; i++) seen |= !strcmp(done[i], sc);
    if (seen || n_done == MAX_TIMELINES || !is_capacity_row(row)) continue;
    done[n_done++] = sc;
    fputs("<h3>", out);
    pd_report_esc(out, sc);
    fputs("</h3>\n<div class=\"charts\">", out);
    timeline(out, r, sc, "goodput_rps", "goodput", "good completions/s");
    timeline(out, r, sc, "ttft_ms_mean", "TTFT by arrival time (mean)", "ms");
    timeline(out, r, sc, "stranded_slots", "stranded slots (held after the client's end)", "slots (mean)");
    cdf_chart(out, r, sc, "TTFT CDF");
    fputs("</div>\n", out);
  }
  st->timelines = n_done;
  if (!n_done)
    fputs("<p class=\"note\">No capacity scenario (a row with a goodput series and at least 100 "
          "requests) in these results.</p>\n", out);
}
