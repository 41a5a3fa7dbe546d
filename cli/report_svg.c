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

double pd_report_nice_step(double range) {
  double raw = range / 5, p = pow(10, floor(log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}
#define nice_step pd_report_nice_step

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

/* The axes' ranges. A time axis (not log) ends at the last point where any line is above 1 %
 * of the top, plus one step of it: a series that stays 0 to the end of a long horizon (the world runs until
 * every hung request is over) would squeeze what happened into a sliver. y runs from 0 to at
 * least min_y1. */
static void bounds(axes_t *a, const pd_report_line_t *l, size_t n, double min_y1, double x_keep) {
  int any = 0;
  double last_nonzero = NAN, step = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < l[i].n; k++) {
      double x = l[i].x[k], y = l[i].y[k];
      if (isnan(y) || isnan(x) || (a->is_log_x && x <= 0)) continue;
      if (!any || x < a->x0) a->x0 = x;
      if (!any || x > a->x1) a->x1 = x;
      if (!any || y > a->y1) a->y1 = y;
      if (k && !step) step = x - l[i].x[k - 1];
      any = 1;
    }
  for (size_t i = 0; any && i < n; i++) /* the tail: every line under 1 % of the top */
    for (size_t k = 0; k < l[i].n; k++) {
      double x = l[i].x[k], y = l[i].y[k];
      if (!isnan(x) && !isnan(y) && y > (a->y1 > min_y1 ? a->y1 : min_y1) / 100 &&
          (isnan(last_nonzero) || x > last_nonzero))
        last_nonzero = x;
    }
  a->y0 = 0;
  if (!any) a->x0 = 0, a->x1 = 1, a->y1 = 1;
  if (!isnan(x_keep) && (isnan(last_nonzero) || x_keep > last_nonzero)) last_nonzero = x_keep;
  if (!a->is_log_x && !isnan(last_nonzero) && last_nonzero + step < a->x1) {
    a->x1 = last_nonzero + (step > 0 ? step : 0);
    a->y1 = 0; /* the y range of what is shown */
    for (size_t i = 0; i < n; i++)
      for (size_t k = 0; k < l[i].n; k++)
        if (!isnan(l[i].y[k]) && l[i].x[k] <= a->x1 && l[i].y[k] > a->y1) a->y1 = l[i].y[k];
  }
  if (a->y1 < min_y1) a->y1 = min_y1;
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

/* Line i of a chart (of n): the first drawn widest and each later one narrower, every second
 * and third dashed, so a line lying on another shows as a coloured edge around it. */
static void path(FILE *out, const axes_t *a, const pd_report_line_t *l, size_t i, size_t n) {
  static const char *const dash[] = {"none", "7 4", "2 3"};
  int pen = 0;
  double last_y = 0, width = n > 1 ? 1.5 + 1.7 * (double)(n - 1 - i) / (double)(n - 1) : 1.8;
  fprintf(out, "<path fill=\"none\" stroke-width=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"%s\" "
          "stroke-linejoin=\"round\" stroke-linecap=\"round\" d=\"", width, l->colour, dash[i % 3]);
  for (size_t k = 0; k < l->n; k++) {
    double x = l->x[k], y = l->y[k];
    if (isnan(y) || isnan(x) || (a->is_log_x && x <= 0)) {
      pen = 0;
      continue;
    }
    if (x > a->x1 * (1 + 1e-9)) break; /* past the axis: the all-zero tail (bounds) */
    if (pen && l->is_step) fprintf(out, "H%.1f", px(a, x));
    else if (pen) fprintf(out, "L%.1f %.1f", px(a, x), py(a, y));
    else fprintf(out, "M%.1f %.1f", px(a, x), py(a, y));
    if (pen && l->is_step && y != last_y) fprintf(out, "V%.1f", py(a, y));
    /* a point with no neighbour (gaps either side) is drawn as a dot: round caps on a stub */
    int is_alone = !pen && (k + 1 >= l->n || isnan(l->y[k + 1]) || isnan(l->x[k + 1]));
    if (is_alone) fputs("h0.01", out);
    pen = 1;
    last_y = y;
  }
  fputs("\"><title>", out);
  pd_report_esc(out, l->label);
  fputs("</title></path>\n", out);
}

/* Whether lines i and j have the same points (then one is drawn and the legend says so). */
static int same_line(const pd_report_line_t *p, const pd_report_line_t *q) {
  if (p->n != q->n) return 0;
  for (size_t k = 0; k < p->n; k++) {
    double a = p->y[k], b = q->y[k];
    if (p->x[k] != q->x[k] || (isnan(a) != isnan(b)) || (!isnan(a) && fabs(a - b) > 1e-9 * (fabs(a) + 1)))
      return 0;
  }
  return 1;
}

#define LEGEND_ROW 14.0
#define CHAR_PX 6.2 /* an 11 px sans-serif character, wide enough to keep legend entries apart */

void pd_report_chart(FILE *out, const char *kind, const char *title, const char *x_label,
                     const char *y_label, const pd_report_line_t *lines, size_t n_lines,
                     int is_log_x, const double *band, double min_y1, double x_keep) {
  axes_t a = {.is_log_x = is_log_x};
  int twin[MAX_MODES]; /* the earlier identical line, or -1 */
  size_t n = n_lines < MAX_MODES ? n_lines : MAX_MODES;
  for (size_t i = 0; i < n; i++) {
    twin[i] = -1;
    for (size_t j = 0; j < i && twin[i] < 0; j++)
      if (twin[j] < 0 && same_line(&lines[i], &lines[j])) twin[i] = (int)j;
  }
  /* legend entries: a line's label, with its twins' ("joined = pr1150"), laid out in rows
   * under the x axis label, each entry as wide as its text */
  char label[MAX_MODES][160];
  double lx[MAX_MODES], ly[MAX_MODES], x = ML, row = 0;
  for (size_t i = 0; i < n; i++) {
    if (twin[i] >= 0) continue;
    snprintf(label[i], sizeof label[i], "%s", lines[i].label);
    for (size_t k = i + 1; k < n; k++)
      if (twin[k] == (int)i) {
        size_t len = strlen(label[i]);
        snprintf(label[i] + len, sizeof label[i] - len, " = %s", lines[k].label);
      }
    double w = 18 + CHAR_PX * (double)strlen(label[i]) + 12;
    if (x > ML && x + w > W - MR) x = ML, row++;
    lx[i] = x, ly[i] = row;
    x += w;
  }
  double h = H + row * LEGEND_ROW; /* room for every legend row below the plot */
  bounds(&a, lines, n, min_y1, x_keep);
  fprintf(out, "<svg class=\"chart\" data-kind=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" "
               "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\"><title>",
          kind, W, h, W, h);
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
  fprintf(out, "<rect class=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
               "stroke=\"#99a\"/>\n", ML, MT, W - ML - MR, H - MT - MB);
  size_t drawn = 0, n_drawn = 0;
  for (size_t i = 0; i < n; i++) n_drawn += twin[i] < 0;
  for (size_t i = 0; i < n; i++)
    if (twin[i] < 0) path(out, &a, &lines[i], drawn++, n_drawn);
  fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (ML + W - MR) / 2, H - MB + 28);
  pd_report_esc(out, x_label);
  fprintf(out, "</text><text transform=\"translate(12 %.1f) rotate(-90)\" text-anchor=\"middle\">",
          (MT + H - MB) / 2);
  pd_report_esc(out, y_label);
  fputs("</text>\n", out);
  for (size_t i = 0; i < n; i++) {
    if (twin[i] >= 0) continue;
    double y = H - 18 + ly[i] * LEGEND_ROW;
    fprintf(out, "<g class=\"legend-item\"><rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\">", lx[i], y - 4, lines[i].colour, lx[i] + 18, y);
    pd_report_esc(out, label[i]);
    fputs("</text></g>\n", out);
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
    if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(row, "metrics")) ||
        (scenario && strcmp(pd_report_str(row, "scenario"), scenario)))
      continue;
    if (!cJSON_IsArray(pts)) pts = NULL; /* nothing completed: its requests count, as failed */
    /* each row's F(x) is over its completed requests: weighted by them, divided by every
     * request, so a failed request (which never reaches a first token) keeps the curve below
     * 100 % (the mode that fails most no longer looks fastest) */
    double w = pts ? pd_report_num(metrics_of(row, "ttft_ms"), "n", 0) : 0;
    double all = pd_report_num(cJSON_GetObjectItemCaseSensitive(row, "metrics"), "requests", w);
    const char *mode = pd_report_str(row, "mode");
    size_t k = 0;
    while (k < n && strcmp(mc[k].mode, mode)) k++;
    if (k == n) {
      if (n == MAX_MODES) continue;
      memset(&mc[n], 0, sizeof mc[n]);
      mc[n++].mode = mode;
    }
    for (int g = 0; g < CDF_GRID && w > 0; g++) { /* a row with none completed adds only weight */
      double x = lo * pow(hi / lo, (double)g / (CDF_GRID - 1));
      mc[k].x[g] = x;
      mc[k].y[g] += w * cdf_at(pts, x);
    }
    mc[k].weight += all > w ? all : w;
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
  if (k)
    pd_report_chart(out, "cdf", title, "time to first token (ms, log scale)",
                    "% of all requests (failed: never)", lines, k, 1, NULL, 100, NAN);
  else fputs("<p class=\"note\">No TTFT distribution in these results.</p>\n", out);
  free(mc);
}

/* One timeline chart of key (an array in metrics.series) for scenario, a line per mode. */
/* Where the scenario's traffic ends: the last goodput bin of any of its rows above 1 % of the
 * highest (NAN: none), so that its four charts share a time axis that ends there (or later,
 * where one of them still shows something). */
static double active_end(const pd_report_t *r, const char *scenario) {
  double top = 0, end = NAN;
  for (int pass = 0; pass < 2; pass++) {
    cJSON *row;
    FOR_SIM_ROWS(r, row) {
      const cJSON *s = metrics_of(row, "series");
      const cJSON *arr = cJSON_GetObjectItemCaseSensitive(s, "goodput_rps"), *e;
      if (strcmp(pd_report_str(row, "scenario"), scenario) || !cJSON_IsArray(arr)) continue;
      double bin_s = pd_report_num(s, "bin_ms", 1000) / 1e3, i = 0;
      cJSON_ArrayForEach(e, arr) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : 0, x = (i++ + 0.5) * bin_s;
        if (!pass && v > top) top = v;
        if (pass && v > top / 100 && (isnan(end) || x > end)) end = x;
      }
    }
  }
  return end;
}

static void timeline(FILE *out, const pd_report_t *r, const char *scenario, const char *key,
                     const char *title, const char *y_label, double min_y1) {
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
  pd_report_chart(out, key, title, "simulated time (s)", y_label, lines, n, 0,
                  band[1] >= band[0] ? band : NULL, min_y1, active_end(r, scenario));
  for (size_t i = 0; i < n; i++) free(buf[i]);
}

static int is_capacity_row(const cJSON *row) {
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(metrics_of(row, "series"), "goodput_rps");
  return cJSON_GetArraySize(s) >= 3 &&
         pd_report_num(cJSON_GetObjectItemCaseSensitive(row, "metrics"), "requests", 0) >= MIN_TIMELINE_REQUESTS;
}

void pd_report_charts(FILE *out, const pd_report_t *r, pd_report_stats_t *st) {
  fputs("<h2 id=\"ttft\">TTFT per mode</h2>\n<p>Pooled over every row: the share of all "
        "requests whose first token came within x ms. A request that failed never had a first "
        "token, so a mode's curve ends below 100 % by its failed share.</p>\n<div class=\"charts\">", out);
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
    timeline(out, r, sc, "goodput_rps", "goodput", "good completions per second", 1);
    timeline(out, r, sc, "ttft_ms_mean", "TTFT by arrival time (mean)", "time to first token (ms)", 1);
    timeline(out, r, sc, "stranded_slots", "stranded slots (held after the client's end)",
             "running slots held (mean per bin)", 1);
    cdf_chart(out, r, sc, "TTFT CDF");
    fputs("</div>\n", out);
  }
  st->timelines = n_done;
  if (!n_done)
    fputs("<p class=\"note\">No capacity scenario (a row with a goodput series and at least 100 "
          "requests) in these results.</p>\n", out);
}
