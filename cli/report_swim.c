/* report: a swimlane per FAIL row. The row is re-run (its file, mode and seed) with the trace
 * written to memory, and the trace is read back with cJSON using only the standard Trace
 * Event Format fields (ph X and B/E spans, i/I instants, C counters, M process_name and
 * thread_name), so any track layout of sim/pd_trace.c draws. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_result.h"
#include "pd_err.h"
#include "pd_world.h"
#include "report.h"

#define MAX_LANES 4096      /* tracks read from one trace; more are counted, not drawn */
#define SHOW_LANES 40       /* thread tracks drawn */
#define SHOW_COUNTERS 12    /* counter tracks drawn */
#define SHOW_PER_PROC 10    /* thread tracks drawn per process, so every process shows */
#define MAX_ELEMS 1500      /* spans, instants and counter steps drawn per swimlane */
#define MAX_DEPTH 16        /* open B spans per track */
#define SW 1100.0           /* width, label column, lane height */
#define LABEL_W 250.0
#define LANE_H 15.0

typedef struct lane {
  double pid, tid;
  const char *name;      /* thread_name, or the counter's "<name> <key>" (points into a buffer) */
  int is_counter, n_spans, n_inst;
  double t_first, vmax;
  const char *open_name[MAX_DEPTH]; /* B without its E yet */
  double open_t[MAX_DEPTH];
  int depth;
  char ckey[96];         /* counter lanes: "<event name> <args key>" */
  size_t name_len;       /* ... of which the event name is the first name_len bytes */
} lane_t;

typedef struct swim {
  lane_t *lane;
  size_t n_lanes, lanes_dropped;
  const cJSON *procs;     /* the events array, for process_name lookups */
  double t0, t1;
  int has_t;
  int has_win;            /* only [w0, w1] is drawn: the first violating request's time */
  double w0, w1;
} swim_t;

static int in_win(const swim_t *s, double a, double b) { return !s->has_win || (b >= s->w0 && a <= s->w1); }

/* The time of the first span the checker marked (its name holds "VIOLATION"): from its start
 * to the end of the last span that began within it (its legs and slots, a stranded hold
 * included), padded by 5 %. */
static void find_window(swim_t *s, const cJSON *evs) {
  const cJSON *e;
  double a = NAN, b = NAN;
  cJSON_ArrayForEach(e, evs) {
    if (strcmp(pd_report_str(e, "ph"), "X") || !strstr(pd_report_str(e, "name"), "VIOLATION")) continue;
    a = pd_report_num(e, "ts", NAN);
    b = a + pd_report_num(e, "dur", 0);
    if (!isnan(a)) break;
  }
  if (isnan(a)) return;
  double end = b;
  cJSON_ArrayForEach(e, evs) {
    double ts = pd_report_num(e, "ts", NAN), t1 = ts + pd_report_num(e, "dur", 0);
    if (!strcmp(pd_report_str(e, "ph"), "X") && ts >= a && ts <= b && t1 > end) end = t1;
  }
  double pad = (end - a) * 0.05 > 1000 ? (end - a) * 0.05 : 1000; /* at least 1 ms */
  s->w0 = a - pad, s->w1 = end + pad, s->has_win = 1;
}

static lane_t *lane_get(swim_t *s, double pid, double tid, int is_counter, const char *ckey) {
  for (size_t i = s->n_lanes; i-- > 0;) { /* recent lanes first; bounded by MAX_LANES */
    lane_t *l = &s->lane[i];
    if (l->pid == pid && l->is_counter == is_counter &&
        (is_counter ? !strcmp(l->ckey, ckey) : l->tid == tid))
      return l;
  }
  if (s->n_lanes == MAX_LANES) {
    s->lanes_dropped++;
    return NULL;
  }
  lane_t *l = &s->lane[s->n_lanes++];
  memset(l, 0, sizeof *l);
  l->pid = pid, l->tid = tid, l->is_counter = is_counter, l->t_first = INFINITY;
  if (is_counter) snprintf(l->ckey, sizeof l->ckey, "%s", ckey);
  return l;
}

/* The counter lane of event name and args key. */
static lane_t *counter_lane(swim_t *s, double pid, const char *name, const char *key) {
  char ck[96];
  snprintf(ck, sizeof ck, "%s %s", name, key);
  lane_t *l = lane_get(s, pid, 0, 1, ck);
  if (l) l->name_len = strlen(name) < sizeof l->ckey ? strlen(name) : sizeof l->ckey - 1;
  return l;
}

static void see_t(swim_t *s, double t) {
  if (s->has_win) t = t < s->w0 ? s->w0 : t > s->w1 ? s->w1 : t;
  if (!s->has_t || t < s->t0) s->t0 = t;
  if (!s->has_t || t > s->t1) s->t1 = t;
  s->has_t = 1;
}

/* First pass: lanes, their names, time range, and counts. */
static void scan(swim_t *s, const cJSON *evs) {
  const cJSON *e;
  cJSON_ArrayForEach(e, evs) {
    const char *ph = pd_report_str(e, "ph");
    double pid = pd_report_num(e, "pid", 0), tid = pd_report_num(e, "tid", 0);
    double ts = pd_report_num(e, "ts", NAN), dur = pd_report_num(e, "dur", 0);
    if (!strcmp(ph, "M")) {
      if (strcmp(pd_report_str(e, "name"), "thread_name")) continue;
      lane_t *l = lane_get(s, pid, tid, 0, NULL);
      if (l) l->name = pd_report_str(cJSON_GetObjectItemCaseSensitive(e, "args"), "name");
      continue;
    }
    if (isnan(ts)) continue;
    if (!strcmp(ph, "C")) {
      const cJSON *a;
      cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(e, "args")) {
        lane_t *l = counter_lane(s, pid, pd_report_str(e, "name"), a->string ? a->string : "");
        if (!l || !cJSON_IsNumber(a)) continue;
        if (a->valuedouble > l->vmax) l->vmax = a->valuedouble;
        if (ts < l->t_first) l->t_first = ts;
        l->n_spans++;
      }
      see_t(s, ts);
      continue;
    }
    int is_x = !strcmp(ph, "X");
    if ((is_x || !strcmp(ph, "i") || !strcmp(ph, "I")) && !in_win(s, ts, is_x ? ts + dur : ts)) continue;
    lane_t *l = lane_get(s, pid, tid, 0, NULL);
    if (!l) continue;
    if (ts < l->t_first) l->t_first = ts;
    if (!strcmp(ph, "X") || !strcmp(ph, "B")) l->n_spans++;
    else if (!strcmp(ph, "i") || !strcmp(ph, "I")) l->n_inst++;
    see_t(s, ts);
    if (!strcmp(ph, "X")) see_t(s, ts + dur);
  }
}

static const char *proc_name(const swim_t *s, double pid) {
  const cJSON *e;
  cJSON_ArrayForEach(e, s->procs)
    if (!strcmp(pd_report_str(e, "ph"), "M") && !strcmp(pd_report_str(e, "name"), "process_name") &&
        pd_report_num(e, "pid", -1) == pid)
      return pd_report_str(cJSON_GetObjectItemCaseSensitive(e, "args"), "name");
  return "";
}

static int cmp_lane(const void *a, const void *b) {
  const lane_t *x = *(lane_t *const *)a, *y = *(lane_t *const *)b;
  if (x->is_counter != y->is_counter) return x->is_counter - y->is_counter;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->is_counter) return strcmp(x->ckey, y->ckey);
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return 0;
}

static double xt(const swim_t *s, double t) {
  double span = s->t1 > s->t0 ? s->t1 - s->t0 : 1;
  return LABEL_W + (t - s->t0) / span * (SW - LABEL_W - 40);
}

static const char *palette(const char *name) {
  static const char *const c[] = {"#4e79a7", "#f28e2b", "#59a14f", "#76b7b2", "#edc948",
                                  "#b07aa1", "#86bcb6", "#9c755f", "#bab0ac"}; /* no red */
  unsigned h = 0;
  if (strstr(name, "VIOLATION")) return "#d62728"; /* the checker's mark on a failing request */
  for (const char *p = name; *p && *p != ' '; p++) h = h * 31u + (unsigned char)*p; /* first word */
  return c[h % 9];
}

static void span_rect(FILE *out, const swim_t *s, double y, double t0, double t1, const char *name) {
  double a = t0 < s->t0 ? s->t0 : t0, b = t1 > s->t1 ? s->t1 : t1; /* clipped to the window */
  double x0 = xt(s, a), w = xt(s, b) - x0;
  fprintf(out, "<rect class=\"span\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
               "<title>", x0, y + 2, w < 1 ? 1 : w, LANE_H - 4, palette(name));
  pd_report_esc(out, name);
  fprintf(out, " %.3f..%.3f ms</title></rect>", t0 / 1e3, t1 / 1e3);
}

/* Second pass: the events of the shown lanes; at most MAX_ELEMS, spans before instants. */
static size_t draw_events(FILE *out, swim_t *s, const cJSON *evs, lane_t **shown, size_t n_shown,
                          int instants) {
  size_t n = 0;
  const cJSON *e;
  double last_v[SHOW_LANES + SHOW_COUNTERS], last_t[SHOW_LANES + SHOW_COUNTERS];
  for (size_t i = 0; i < n_shown; i++) last_v[i] = NAN, last_t[i] = NAN;
  cJSON_ArrayForEach(e, evs) {
    const char *ph = pd_report_str(e, "ph");
    double pid = pd_report_num(e, "pid", 0), tid = pd_report_num(e, "tid", 0), ts = pd_report_num(e, "ts", NAN);
    if (n >= MAX_ELEMS) break;
    if (isnan(ts) || !strcmp(ph, "M")) continue;
    int is_c = !strcmp(ph, "C"), is_i = !strcmp(ph, "i") || !strcmp(ph, "I");
    if (instants != is_i || (is_c && instants)) continue;
    for (size_t k = 0; k < n_shown && n < MAX_ELEMS; k++) {
      lane_t *l = shown[k];
      double y = 20 + (double)k * LANE_H;
      if (is_c && l->is_counter && l->pid == pid) {
        const char *name = pd_report_str(e, "name");
        if (strlen(name) != l->name_len || strncmp(name, l->ckey, l->name_len)) continue;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"),
                                                          l->ckey + l->name_len + 1);
        if (!cJSON_IsNumber(a)) continue;
        double c0 = last_t[k] < s->t0 ? s->t0 : last_t[k], c1 = ts > s->t1 ? s->t1 : ts;
        if (!isnan(last_v[k]) && last_v[k] > 0 && c1 > c0) {
          double h = (LANE_H - 3) * last_v[k] / (l->vmax > 0 ? l->vmax : 1);
          fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#8aa\"/>",
                  xt(s, c0), y + LANE_H - 1 - h, xt(s, c1) - xt(s, c0), h);
          n++;
        }
        last_v[k] = a->valuedouble, last_t[k] = ts;
        continue;
      }
      if (is_c || l->is_counter || l->pid != pid || l->tid != tid) continue;
      const char *name = pd_report_str(e, "name");
      if ((!strcmp(ph, "X") && !in_win(s, ts, ts + pd_report_num(e, "dur", 0))) || (is_i && !in_win(s, ts, ts)))
        break;
      if (!strcmp(ph, "X")) {
        span_rect(out, s, y, ts, ts + pd_report_num(e, "dur", 0), name);
        n++;
      } else if (!strcmp(ph, "B") && l->depth < MAX_DEPTH) {
        l->open_name[l->depth] = name, l->open_t[l->depth++] = ts;
      } else if (!strcmp(ph, "E") && l->depth > 0) {
        l->depth--;
        span_rect(out, s, y, l->open_t[l->depth], ts, l->open_name[l->depth]);
        n++;
      } else if (is_i) {
        fprintf(out, "<path class=\"inst\" d=\"M%.1f %.1fl-3 -5h6z\" fill=\"#333\"><title>",
                xt(s, ts), y + LANE_H - 2);
        pd_report_esc(out, name);
        fprintf(out, " at %.3f ms</title></path>", ts / 1e3);
        n++;
      }
      break;
    }
  }
  return n;
}

static void labels(FILE *out, const swim_t *s, lane_t **shown, size_t n_shown) {
  for (size_t k = 0; k < n_shown; k++) {
    const lane_t *l = shown[k];
    double y = 20 + (double)k * LANE_H;
    char label[160];
    const char *pn = proc_name(s, l->pid);
    if (l->is_counter) snprintf(label, sizeof label, "%s%s%s (max %g)", pn, pn[0] ? ": " : "", l->ckey, l->vmax);
    else if (l->name && l->name[0]) snprintf(label, sizeof label, "%s%s%s", pn, pn[0] ? ": " : "", l->name);
    else snprintf(label, sizeof label, "%s%spid %g tid %g", pn, pn[0] ? ": " : "", l->pid, l->tid);
    fprintf(out, "<rect x=\"0\" y=\"%.1f\" width=\"%.0f\" height=\"%.1f\" fill=\"%s\"/>"
                 "<text x=\"4\" y=\"%.1f\">", y, SW, LANE_H, k % 2 ? "#f6f7fa" : "#ffffff", y + 11);
    pd_report_esc(out, label);
    fputs("</text>\n", out);
  }
}

/* Round ticks (1, 2 or 5 times a power of ten) in ms, or s from 1 s steps on, with a faint
 * line down the lanes (height h) so a bar's time can be read. */
static void axis(FILE *out, const swim_t *s, double h) {
  double range_ms = (s->t1 - s->t0) / 1e3;
  double step = pd_report_nice_step(range_ms > 0 ? range_ms : 1);
  int is_s = step >= 1000;
  for (double t = ceil(s->t0 / 1e3 / step) * step; t <= s->t1 / 1e3 + step / 1e6; t += step) {
    double x = xt(s, t * 1e3);
    fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"15\" y2=\"%.1f\" stroke=\"#c9ccd8\" "
                 "stroke-width=\"0.6\"/><text x=\"%.1f\" y=\"12\" text-anchor=\"middle\">%g %s</text>",
            x, x, h, x, is_s ? t / 1e3 : t, is_s ? "s" : "ms");
  }
  fprintf(out, "<text x=\"4\" y=\"12\" fill=\"#667\">simulated time</text>\n");
}

/* The lanes to draw: thread tracks with events (by pid, tid), then counter tracks. */
static size_t pick(swim_t *s, lane_t **shown, size_t *hidden) {
  lane_t **all = malloc(s->n_lanes * sizeof *all + 1);
  size_t n = 0, th = 0, co = 0, in_proc = 0;
  double proc = NAN;
  *hidden = s->lanes_dropped;
  if (!all) return 0;
  for (size_t i = 0; i < s->n_lanes; i++) all[i] = &s->lane[i];
  qsort(all, s->n_lanes, sizeof *all, cmp_lane);
  for (size_t i = 0; i < s->n_lanes; i++) {
    lane_t *l = all[i];
    int has = l->is_counter ? l->vmax > 0 : l->n_spans || l->n_inst; /* a counter never above 0: nothing to see */
    if (!has) continue;
    if (!l->is_counter && l->pid != proc) proc = l->pid, in_proc = 0;
    if (l->is_counter ? co++ < SHOW_COUNTERS : in_proc++ < SHOW_PER_PROC && th++ < SHOW_LANES)
      shown[n++] = l;
    else (*hidden)++;
  }
  free(all);
  return n;
}

int pd_report_swim_draw(FILE *out, const char *trace, size_t len, const char *title) {
  cJSON *root = cJSON_ParseWithLength(trace, len);
  const cJSON *evs = cJSON_IsArray(root) ? root : cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  swim_t s = {.lane = calloc(MAX_LANES, sizeof(lane_t)), .procs = evs};
  lane_t *shown[SHOW_LANES + SHOW_COUNTERS];
  size_t hidden = 0, n_shown = 0;
  if (s.lane && cJSON_IsArray(evs)) {
    find_window(&s, evs);
    scan(&s, evs);
    n_shown = pick(&s, shown, &hidden);
  }
  if (!n_shown || !s.has_t) {
    fputs("<p class=\"note\">No swimlane: the trace held no events.</p>\n", out);
    free(s.lane);
    cJSON_Delete(root);
    return 0;
  }
  double h = 26 + (double)n_shown * LANE_H;
  fprintf(out, "<svg class=\"swimlane\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
               "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\"><title>", SW, h, SW, h);
  pd_report_esc(out, title);
  fputs("</title>\n", out);
  labels(out, &s, shown, n_shown);
  axis(out, &s, h);
  size_t drawn = draw_events(out, &s, evs, shown, n_shown, 0);
  size_t inst = draw_events(out, &s, evs, shown, n_shown, 1);
  (void)inst;
  fputs("</svg>\n", out);
  if (s.has_win)
    fprintf(out, "<p class=\"note\">From %.1f to %.1f ms: the first request the checker marked "
                 "(VIOLATION, in red) until the last thing it started ended, and what overlaps that.</p>\n", s.t0 / 1e3, s.t1 / 1e3);
  if (hidden || drawn + inst >= MAX_ELEMS)
    fprintf(out, "<p class=\"note\">%zu more tracks not shown%s; replay with --trace and open it in "
                 "ui.perfetto.dev for all.</p>\n", hidden,
            drawn + inst >= MAX_ELEMS ? ", and the events past the first 1,500" : "");
  free(s.lane);
  cJSON_Delete(root);
  return 1;
}

/* Re-run the row in memory: the trace text in *buf (caller frees), the violations in *got. */
static int rerun(const pd_cli_result_t *x, pd_scenario_t *sc, char **buf, size_t *len,
                 uint32_t *got, char *why, size_t cap) {
  const char *file = x->file ? x->file : "", *mode = x->mode ? x->mode : "";
  pd_mode_t m;
  char err[512];
  if (pd_scenario_load(sc, file, err, sizeof err) != 0) {
    snprintf(why, cap, "cannot load the scenario to re-run it: %s", err);
    return -1;
  }
  if (pd_mode_parse(mode, &m) != 0) {
    snprintf(why, cap, "unknown mode");
    return -1;
  }
  uint64_t seed = x->has_seed ? x->seed : sc->config.seed, tie = x->tie_seed;
  int has_tie = x->has_tie_seed;
  FILE *tf = open_memstream(buf, len);
  if (!tf) {
    snprintf(why, cap, "out of memory");
    return -1;
  }
  pd_metrics_t mx;
  pd_metrics_init(&mx, 1); /* as sim run --trace: the capacity counter tracks too */
  pd_world_opts_t wo = {tf, NULL, NULL, has_tie, tie, &mx};
  pd_world_stats_t st;
  uint64_t hash;
  int rc = pd_world_run_opts(sc, m, seed, &wo, &st, got, &hash);
  fclose(tf);
  pd_metrics_free(&mx);
  if (rc) snprintf(why, cap, "the re-run failed: %s", pd_strerror(rc));
  return rc ? -1 : 0;
}

int pd_report_swimlane(FILE *out, const pd_cli_result_t *x, const pd_report_opts_t *o) {
  double requests = x->has_counts ? x->requests : 0;
  char why[640], got_s[128], title[256];
  if (requests > (double)o->swim_max_requests) {
    fprintf(out, "<p class=\"note\">No swimlane: %.0f requests (more than %zu); replay with "
                 "--trace for the whole run.</p>\n", requests, o->swim_max_requests);
    return 0;
  }
  pd_scenario_t *sc = malloc(sizeof *sc);
  char *buf = NULL;
  size_t len = 0;
  uint32_t got = 0;
  int drawn = 0;
  if (!sc) snprintf(why, sizeof why, "out of memory");
  if (sc && rerun(x, sc, &buf, &len, &got, why, sizeof why) == 0) {
    pd_cli_mask_str(got, PD_INVARIANT_COUNT, ",", got_s, sizeof got_s);
    fputs("<p><b>swimlane</b> (re-run here: violated ", out);
    pd_report_esc(out, got_s[0] ? got_s : "none");
    fputs("; hover a bar for its name and times)</p>\n<div class=\"swim\">", out);
    snprintf(title, sizeof title, "%s %s", x->scenario ? x->scenario : "", x->mode ? x->mode : "");
    drawn = pd_report_swim_draw(out, buf, len, title);
    fputs("</div>\n", out);
  } else {
    fputs("<p class=\"note\">No swimlane: ", out);
    pd_report_esc(out, why);
    fputs("</p>\n", out);
  }
  free(buf);
  free(sc);
  return drawn;
}
