/* The report of `pdref gateway bench`: per level and path, TTFT and inter-token gaps, what
 * the gateway adds over direct and pd, its RSS and CPU, and the gateway's latency and cost
 * targets with a verdict each (docs/benchmarks.md). A percentile from too few samples is not
 * printed (NETBENCH_MIN_SAMPLES), nor is a difference below 0: it is noise. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_json.h"
#include "cmd_netbench.h"

typedef struct netbench_target {
  const char *name, *unit;
  double value, limit;
  int is_max; /* the value must stay below the limit (else reach it) */
  int is_measured;
  char note[128];
} netbench_target_t;

static const netbench_level_t *find_level(const netbench_session_t *b, uint32_t streams) {
  for (uint32_t i = 0; i < b->o.n_levels; i++)
    if (b->lv[i].streams == streams && b->lv[i].p[PD_NETBENCH_GATEWAY].requests) return &b->lv[i];
  return NULL;
}

/* p50 (k 0) or p99 (k 1) of the gateway path minus the same percentile of path `from`: NAN
 * when either has too few samples; may be negative (use added_text / added_json). */
static double added(const netbench_level_t *lv, int from, int is_itl, int k) {
  const netbench_path_stats_t *x = &lv->p[PD_NETBENCH_GATEWAY], *y = &lv->p[from];
  return is_itl ? x->itl_us[k] - y->itl_us[k] : x->ttft_us[k] - y->ttft_us[k];
}

/* The difference as the reader needs it: "+933 us (3189 - 2257)", "<= 0 us (5970 - 6692,
 * noise)", or "- (16 samples, p99 needs 100)". */
static void added_text(char *buf, size_t cap, const netbench_level_t *lv, int from, int is_itl,
                       int k) {
  const netbench_path_stats_t *x = &lv->p[PD_NETBENCH_GATEWAY], *y = &lv->p[from];
  double a = is_itl ? x->itl_us[k] : x->ttft_us[k], b = is_itl ? y->itl_us[k] : y->ttft_us[k];
  uint64_t n = is_itl ? (x->n_itl < y->n_itl ? x->n_itl : y->n_itl)
                      : (x->n_ttft < y->n_ttft ? x->n_ttft : y->n_ttft);
  if (isnan(a) || isnan(b))
    snprintf(buf, cap, "- (%llu samples, p%d needs %u)", (unsigned long long)n, k ? 99 : 50,
             NETBENCH_MIN_SAMPLES(k));
  else if (a - b < 0) snprintf(buf, cap, "<= 0 us (%.0f - %.0f, noise)", a, b);
  else snprintf(buf, cap, "+%.0f us (%.0f - %.0f)", a - b, a, b);
}

/* A JSON number for a difference or percentile: null when not measured, 0 for noise below 0. */
static void add_us(cJSON *j, const char *key, double v, int is_clamped) {
  if (isnan(v)) cJSON_AddNullToObject(j, key);
  else cJSON_AddNumberToObject(j, key, is_clamped && v < 0 ? 0 : v);
}

static double per_cpu_s(const netbench_path_stats_t *s) {
  return s->gw_cpu_s > 0 ? (double)s->events / s->gw_cpu_s : 0;
}

#define NETBENCH_TARGETS 8
/* The gateway's targets: the latency it adds (TTFT, ITL), its own share with the PD
 * rendezvous taken out, errors under load, CPU per relayed event and memory. */
static void targets(const netbench_session_t *b, netbench_target_t t[NETBENCH_TARGETS]) {
  const netbench_level_t *l1 = find_level(b, 1), *l64 = find_level(b, 64), *l512 = find_level(b, 512);
  const netbench_level_t *top = NULL;
  for (uint32_t i = 0; i < b->o.n_levels; i++)
    if (b->lv[i].p[PD_NETBENCH_GATEWAY].requests && (!top || b->lv[i].streams > top->streams))
      top = &b->lv[i];
  int pd1 = l1 && l1->p[PD_NETBENCH_PD].requests, pd64 = l64 && l64->p[PD_NETBENCH_PD].requests;
  double rss = (double)(b->rss_kib[0] > b->rss_kib[1] ? b->rss_kib[0] : b->rss_kib[1]) / 1024.0;
  double itl = l64 ? added(l64, PD_NETBENCH_DIRECT, 1, 0) : NAN;
  double per_ev = top ? per_cpu_s(&top->p[PD_NETBENCH_GATEWAY]) : 0;
  double a50 = l64 ? added(l64, PD_NETBENCH_DIRECT, 0, 0) : NAN;
  double a99 = l64 ? added(l64, PD_NETBENCH_DIRECT, 0, 1) : NAN;
  double own1 = pd1 ? added(l1, PD_NETBENCH_PD, 0, 0) : NAN;
  double own64 = pd64 ? added(l64, PD_NETBENCH_PD, 0, 0) : NAN;
  netbench_target_t v[NETBENCH_TARGETS] = {
      {"added TTFT p50, 64 streams", "us", a50 < 0 ? 0 : a50, 200, 1, !isnan(a50),
       "gateway - direct"},
      {"added TTFT p99, 64 streams", "us", a99 < 0 ? 0 : a99, 2000, 1, !isnan(a99),
       "gateway - direct"},
      {"errors at 512 streams", "", l512 ? (double)l512->p[PD_NETBENCH_GATEWAY].errors : 0, 1,
       1, !!l512, ""},
      {"gateway's own TTFT p50, 1 stream", "us", own1 < 0 ? 0 : own1, 100, 1, !isnan(own1),
       "gateway - pd (the client doing the PD rendezvous itself)"},
      {"gateway's own TTFT p50, 64 streams", "us", own64 < 0 ? 0 : own64, 100, 1, !isnan(own64),
       "gateway - pd"},
      {"|added ITL p50|, 64 streams", "us", itl < 0 ? -itl : itl, 50, 1, !isnan(itl),
       "gateway - direct, either way"},
      {"events per gateway CPU-s", "ev", per_ev, 100000, 0, top && per_ev > 0, ""},
      {"peak RSS, up to 512 streams", "MiB", rss, 32, 1, rss > 0 && l512, ""},
  };
  if (top)
    snprintf(v[6].note, sizeof v[6].note, "one event per chunk, %u streams; throughput run "
             "(coalesced): %.0f", top->streams, per_cpu_s(&b->tp));
  snprintf(v[7].note, sizeof v[7].note, "latency levels %.1f MiB, throughput run %.1f MiB",
           (double)b->rss_kib[0] / 1024.0, (double)b->rss_kib[1] / 1024.0);
  memcpy(t, v, sizeof v);
}

static const char *verdict(const netbench_target_t *t) {
  if (!t->is_measured) return "not measured";
  return (t->is_max ? t->value < t->limit : t->value >= t->limit) ? "met" : "missed";
}

/* has_gw: the path runs through the gateway; else its gateway CPU figures are null (no gateway). */
static cJSON *pstats_json(const netbench_path_stats_t *s, int has_gw) {
  const char *k[] = {"requests",       "ok",           "errors",        "ttft_p50_us",
                     "ttft_p99_us",    "itl_p50_us",   "itl_p99_us",    "events",
                     "elapsed_s",      "events_per_s", "gateway_cpu_s", "events_per_gateway_cpu_s",
                     "events_per_read"};
  double v[] = {s->requests,
                s->ok,
                s->errors,
                s->ttft_us[0],
                s->ttft_us[1],
                s->itl_us[0],
                s->itl_us[1],
                (double)s->events,
                s->wall_s,
                s->events_per_s,
                has_gw ? s->gw_cpu_s : NAN,
                has_gw ? per_cpu_s(s) : NAN,
                s->reads ? (double)s->events / (double)s->reads : NAN};
  cJSON *j = cJSON_CreateObject();
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    add_us(j, k[i], v[i], 0); /* a percentile from too few samples: null */
  cJSON_AddNumberToObject(j, "ttft_samples", (double)s->n_ttft);
  cJSON_AddNumberToObject(j, "itl_samples", (double)s->n_itl);
  if (s->err[0]) cJSON_AddStringToObject(j, "first_error", s->err);
  return j;
}

static cJSON *level_json(const netbench_level_t *lv) {
  cJSON *l = cJSON_CreateObject();
  cJSON_AddNumberToObject(l, "streams", lv->streams);
  for (int p = 0; p < NETBENCH_PATHS; p++)
    if (lv->p[p].requests)
      cJSON_AddItemToObject(l, pd_netbench_path_names[p], pstats_json(&lv->p[p], p == PD_NETBENCH_GATEWAY));
  const char *names[4] = {"added_ttft_p50_us", "added_ttft_p99_us", "added_itl_p50_us",
                          "added_itl_p99_us"};
  for (int k = 0; k < 4; k++) /* below 0 is noise: 0; too few samples: null */
    add_us(l, names[k], added(lv, PD_NETBENCH_DIRECT, k / 2, k % 2), 1);
  if (lv->p[PD_NETBENCH_PD].requests) {
    add_us(l, "gateway_alone_ttft_p50_us", added(lv, PD_NETBENCH_PD, 0, 0), 1);
    add_us(l, "gateway_alone_ttft_p99_us", added(lv, PD_NETBENCH_PD, 0, 1), 1);
  }
  return l;
}

void pd_cli_nb_report_json(const netbench_session_t *b) {
  const netbench_opts_t *o = &b->o;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "schema", PD_CLI_SCHEMA_GATEWAY_BENCH);
  cJSON_AddStringToObject(j, "command", "gateway bench");
  cJSON_AddStringToObject(j, "gateway_label", o->label);
  if (o->gateway_cmd) cJSON_AddStringToObject(j, "gateway_cmd", b->gw_cmd);
  else cJSON_AddStringToObject(j, "mode", o->mode);
  cJSON_AddNumberToObject(j, "tokens", o->tokens);
  cJSON_AddNumberToObject(j, "token_ms", o->token_ms);
  cJSON_AddNumberToObject(j, "first_token_ms", o->first_token_ms);
  cJSON *levels = cJSON_AddArrayToObject(j, "levels");
  for (uint32_t i = 0; i < o->n_levels; i++)
    if (b->lv[i].p[PD_NETBENCH_GATEWAY].requests)
      cJSON_AddItemToArray(levels, level_json(&b->lv[i]));
  if (b->tp.requests) {
    cJSON *t = pstats_json(&b->tp, 1);
    cJSON_AddNumberToObject(t, "streams", o->tp_streams);
    cJSON_AddNumberToObject(t, "tokens", o->tp_tokens);
    cJSON_AddNumberToObject(t, "token_ms", o->tp_token_ms);
    cJSON_AddItemToObject(j, "throughput", t);
  }
  cJSON *g = cJSON_AddObjectToObject(j, "gateway");
  cJSON_AddNumberToObject(g, "peak_rss_kib", (double)b->rss_kib[0]);
  cJSON_AddNumberToObject(g, "cpu_s", b->cpu_s[0]);
  cJSON_AddNumberToObject(g, "throughput_peak_rss_kib", (double)b->rss_kib[1]);
  cJSON_AddNumberToObject(g, "throughput_cpu_s", b->cpu_s[1]);
  netbench_target_t t[NETBENCH_TARGETS];
  targets(b, t);
  cJSON *ta = cJSON_AddArrayToObject(j, "targets");
  for (int i = 0; i < NETBENCH_TARGETS; i++) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "name", t[i].name);
    add_us(x, "value", t[i].is_measured ? t[i].value : NAN, 0);
    cJSON_AddNumberToObject(x, "limit", t[i].limit);
    cJSON_AddStringToObject(x, "unit", t[i].unit);
    cJSON_AddStringToObject(x, "result", verdict(&t[i]));
    if (t[i].note[0]) cJSON_AddStringToObject(x, "note", t[i].note);
    cJSON_AddItemToArray(ta, x);
  }
  cJSON_AddNumberToObject(j, "errors", (double)b->errors);
  char *s = cJSON_Print(j);
  if (s) puts(s);
  cJSON_free(s);
  cJSON_Delete(j);
}

void pd_cli_nb_report_text(const netbench_session_t *b) {
  const netbench_opts_t *o = &b->o;
  if (o->gateway_cmd) printf("gateway bench: %s: %s\n", o->label, b->gw_cmd);
  printf("gateway bench: %s%s%s, %u tokens/request, decode first token %u ms then %u ms/token, "
         "prefill forward+kv 0 ms\n",
         o->label, o->gateway_cmd ? "" : " mode ", o->gateway_cmd ? "" : o->mode, o->tokens,
         o->first_token_ms, o->token_ms);
  printf("%7s %-7s %5s %4s %9s %9s %9s %9s %9s %9s\n", "streams", "path", "reqs", "err", "TTFT p50",
         "TTFT p99", "ITL p50", "ITL p99", "events/s", "gw us/ev");
  for (uint32_t i = 0; i < o->n_levels; i++)
    for (int p = 0; p < NETBENCH_PATHS; p++) {
      const netbench_path_stats_t *s = &b->lv[i].p[p];
      if (!s->requests) continue;
      printf("%7u %-7s %5u %4u", b->lv[i].streams, pd_netbench_path_names[p], s->requests,
             s->errors);
      const double pct[4] = {s->ttft_us[0], s->ttft_us[1], s->itl_us[0], s->itl_us[1]};
      for (int k = 0; k < 4; k++)
        if (isnan(pct[k])) printf(" %9s", "-");
        else printf(" %6.0f us", pct[k]);
      printf(" %9.0f", s->events_per_s);
      if (p == PD_NETBENCH_GATEWAY && s->events)
        printf(" %9.1f", s->gw_cpu_s * 1e6 / (double)s->events);
      printf("\n");
      if (s->err[0]) printf("%7s first error: %s\n", "", s->err);
    }
  printf("- : too few samples for the percentile (p50 needs %u, p99 %u)\n",
         NETBENCH_MIN_SAMPLES(0), NETBENCH_MIN_SAMPLES(1));
  printf("added by the gateway = a percentile of the gateway path minus the same percentile of\n"
         "the direct path (client straight to decode), same streams; own = minus the pd path\n"
         "(the client does the PD rendezvous itself); a difference below 0 is noise:\n");
  for (uint32_t i = 0; i < o->n_levels; i++) {
    const netbench_level_t *lv = &b->lv[i];
    if (!lv->p[PD_NETBENCH_GATEWAY].requests) continue;
    char t[4][96];
    for (int k = 0; k < 4; k++) added_text(t[k], sizeof t[k], lv, PD_NETBENCH_DIRECT, k / 2, k % 2);
    printf("%7u streams: added TTFT p50 %s, p99 %s\n%16s added ITL p50 %s, p99 %s\n",
           lv->streams, t[0], t[1], "", t[2], t[3]);
    if (lv->p[PD_NETBENCH_PD].requests) {
      added_text(t[0], sizeof t[0], lv, PD_NETBENCH_PD, 0, 0);
      added_text(t[1], sizeof t[1], lv, PD_NETBENCH_PD, 0, 1);
      printf("%16s own TTFT p50 %s, p99 %s\n", "", t[0], t[1]);
    }
  }
  const netbench_path_stats_t *tp = &b->tp;
  if (tp->requests)
    printf(
        "throughput: %u streams x %u tokens, token_ms %u: %llu events in %.2f s = %.0f events/s; "
        "gateway CPU %.2f s (%.0f%% of a core) = %.0f events per CPU-s; %.1f events per "
        "client read\n",
        o->tp_streams, o->tp_tokens, o->tp_token_ms, (unsigned long long)tp->events, tp->wall_s,
        tp->events_per_s, tp->gw_cpu_s, tp->wall_s > 0 ? 100 * tp->gw_cpu_s / tp->wall_s : 0,
        per_cpu_s(tp), tp->reads ? (double)tp->events / (double)tp->reads : 0);
  if (tp->err[0]) printf("%7s first error: %s\n", "", tp->err);
  printf("%s: peak RSS %.1f MiB, CPU %.2f s (latency levels); peak RSS %.1f MiB, CPU %.2f s "
         "(throughput)\n",
         o->label, (double)b->rss_kib[0] / 1024, b->cpu_s[0], (double)b->rss_kib[1] / 1024, b->cpu_s[1]);
  netbench_target_t t[NETBENCH_TARGETS];
  targets(b, t);
  printf("targets:\n");
  for (int i = 0; i < NETBENCH_TARGETS; i++)
    if (t[i].is_measured)
      printf("  %-36s %2s %6.0f %-4s %10.1f  %-12s %s\n", t[i].name, t[i].is_max ? "<" : ">=",
             t[i].limit, t[i].unit, t[i].value, verdict(&t[i]), t[i].note);
    else
      printf("  %-36s %2s %6.0f %-4s %10s  %-12s %s\n", t[i].name, t[i].is_max ? "<" : ">=",
             t[i].limit, t[i].unit, "-", verdict(&t[i]), t[i].note);
  printf("errors: %llu\n", (unsigned long long)b->errors);
}
