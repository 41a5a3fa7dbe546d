/* The report of `pdref gateway bench`: per level and path, TTFT and inter-token gaps, what
 * the gateway adds over direct and pd, its RSS and CPU, and the targets with a
 * verdict each (docs/benchmarks.md). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* p50 (k 0) or p99 (k 1) of the gateway path minus the same percentile of path `from`. */
static double added(const netbench_level_t *lv, int from, int is_itl, int k) {
  const netbench_path_stats_t *x = &lv->p[PD_NETBENCH_GATEWAY], *y = &lv->p[from];
  return is_itl ? x->itl_us[k] - y->itl_us[k] : x->ttft_us[k] - y->ttft_us[k];
}

static double per_cpu_s(const netbench_path_stats_t *s) {
  return s->gw_cpu_s > 0 ? (double)s->events / s->gw_cpu_s : 0;
}

#define NETBENCH_TARGETS 8
/* The targets of issue 4 (the gateway's first cut) and issue 14 (its own share under 100 us,
 * ITL untouched, 100k events per CPU-second one event per chunk, RSS under 32 MiB). */
static void targets(const netbench_session_t *b, netbench_target_t t[NETBENCH_TARGETS]) {
  const netbench_level_t *l1 = find_level(b, 1), *l64 = find_level(b, 64), *l512 = find_level(b, 512);
  const netbench_level_t *top = NULL;
  for (uint32_t i = 0; i < b->o.n_levels; i++)
    if (b->lv[i].p[PD_NETBENCH_GATEWAY].requests && (!top || b->lv[i].streams > top->streams))
      top = &b->lv[i];
  int pd1 = l1 && l1->p[PD_NETBENCH_PD].requests, pd64 = l64 && l64->p[PD_NETBENCH_PD].requests;
  double rss = (double)(b->rss_kib[0] > b->rss_kib[1] ? b->rss_kib[0] : b->rss_kib[1]) / 1024.0;
  double itl = l64 ? added(l64, PD_NETBENCH_DIRECT, 1, 0) : 0;
  double per_ev = top ? per_cpu_s(&top->p[PD_NETBENCH_GATEWAY]) : 0;
  netbench_target_t v[NETBENCH_TARGETS] = {
      {"4: added TTFT p50, 64 streams", "us", l64 ? added(l64, PD_NETBENCH_DIRECT, 0, 0) : 0, 200,
       1, !!l64, ""},
      {"4: added TTFT p99, 64 streams", "us", l64 ? added(l64, PD_NETBENCH_DIRECT, 0, 1) : 0,
       2000, 1, !!l64, ""},
      {"4: errors at 512 streams", "", l512 ? (double)l512->p[PD_NETBENCH_GATEWAY].errors : 0, 1,
       1, !!l512, ""},
      {"14: own TTFT p50, 1 stream", "us", pd1 ? added(l1, PD_NETBENCH_PD, 0, 0) : 0, 100, 1, pd1,
       "gateway - pd (the direct PD rendezvous)"},
      {"14: own TTFT p50, 64 streams", "us", pd64 ? added(l64, PD_NETBENCH_PD, 0, 0) : 0, 100, 1,
       pd64, "gateway - pd"},
      {"14: |added ITL p50|, 64 streams", "us", itl < 0 ? -itl : itl, 50, 1, !!l64,
       "gateway - direct"},
      {"14: events per gateway CPU-s", "ev", per_ev, 100000, 0, top && per_ev > 0, ""},
      {"14: peak RSS, up to 512 streams", "MiB", rss, 32, 1, rss > 0 && l512, ""},
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

static cJSON *pstats_json(const netbench_path_stats_t *s) {
  const char *k[] = {"requests",       "ok",           "errors",        "ttft_p50_us",
                     "ttft_p99_us",    "itl_p50_us",   "itl_p99_us",    "events",
                     "seconds",        "events_per_s", "gateway_cpu_s", "events_per_gateway_cpu_s",
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
                s->gw_cpu_s,
                per_cpu_s(s),
                s->reads ? (double)s->events / (double)s->reads : 0};
  cJSON *j = cJSON_CreateObject();
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    cJSON_AddNumberToObject(j, k[i], v[i]);
  if (s->err[0]) cJSON_AddStringToObject(j, "first_error", s->err);
  return j;
}

static cJSON *level_json(const netbench_level_t *lv) {
  cJSON *l = cJSON_CreateObject();
  cJSON_AddNumberToObject(l, "streams", lv->streams);
  for (int p = 0; p < NETBENCH_PATHS; p++)
    if (lv->p[p].requests)
      cJSON_AddItemToObject(l, pd_netbench_path_names[p], pstats_json(&lv->p[p]));
  const char *names[4] = {"added_ttft_p50_us", "added_ttft_p99_us", "added_itl_p50_us",
                          "added_itl_p99_us"};
  for (int k = 0; k < 4; k++)
    cJSON_AddNumberToObject(l, names[k], added(lv, PD_NETBENCH_DIRECT, k / 2, k % 2));
  if (lv->p[PD_NETBENCH_PD].requests) {
    cJSON_AddNumberToObject(l, "gateway_alone_ttft_p50_us", added(lv, PD_NETBENCH_PD, 0, 0));
    cJSON_AddNumberToObject(l, "gateway_alone_ttft_p99_us", added(lv, PD_NETBENCH_PD, 0, 1));
  }
  return l;
}

void pd_cli_nb_report_json(const netbench_session_t *b) {
  const netbench_opts_t *o = &b->o;
  cJSON *j = cJSON_CreateObject();
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
    cJSON *t = pstats_json(&b->tp);
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
    cJSON_AddNumberToObject(x, "value", t[i].value);
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
      printf("%7u %-7s %5u %4u %6.0f us %6.0f us %6.0f us %6.0f us %9.0f", b->lv[i].streams,
             pd_netbench_path_names[p], s->requests, s->errors, s->ttft_us[0], s->ttft_us[1],
             s->itl_us[0], s->itl_us[1], s->events_per_s);
      if (p == PD_NETBENCH_GATEWAY && s->events)
        printf(" %9.1f", s->gw_cpu_s * 1e6 / (double)s->events);
      printf("\n");
      if (s->err[0]) printf("%7s first error: %s\n", "", s->err);
    }
  printf("added = gateway - direct, same streams, p50 - p50 and p99 - p99 "
         "(gateway alone = gateway - pd):\n");
  for (uint32_t i = 0; i < o->n_levels; i++) {
    const netbench_level_t *lv = &b->lv[i];
    if (!lv->p[PD_NETBENCH_GATEWAY].requests) continue;
    printf("%7u streams: TTFT %+.0f / %+.0f us, ITL %+.0f / %+.0f us", lv->streams,
           added(lv, 0, 0, 0), added(lv, 0, 0, 1), added(lv, 0, 1, 0), added(lv, 0, 1, 1));
    if (lv->p[PD_NETBENCH_PD].requests)
      printf("; gateway alone TTFT %+.0f / %+.0f us", added(lv, PD_NETBENCH_PD, 0, 0),
             added(lv, PD_NETBENCH_PD, 0, 1));
    printf("\n");
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
  printf("targets (issue: what):\n");
  for (int i = 0; i < NETBENCH_TARGETS; i++)
    printf("  %-33s %2s %6.0f %-4s %10.1f  %-12s %s\n", t[i].name,
           t[i].is_max ? "<" : ">=", t[i].limit, t[i].unit, t[i].value, verdict(&t[i]), t[i].note);
  printf("errors: %llu\n", (unsigned long long)b->errors);
}
