/* `pdref sim bench`: simulator throughput on a large synthetic workload. Prints simulated
 * events/s, client requests/s and peak RSS. The CLI may read the wall clock; core/ and sim/
 * never do. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_progress.h"
#include "pd_err.h"
#include "pd_world.h"

static long peak_rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static void bench_world(pd_scenario_t *s, uint32_t requests, double fault_rate) {
  pd_scenario_defaults(s);
  snprintf(s->name, sizeof s->name, "bench");
  snprintf(s->path, sizeof s->path, "(bench)");
  pd_scenario_set_workers(s, 4, 4);
  s->workload.requests = requests;
  s->workload.interval_ms = 1;
  s->workload.poisson = 1;
  s->workload.stream = 0.8;
  s->workload.logprob = 0.1;
  s->workload.tokens = 8;
  s->workload.fault_rate = fault_rate;
  s->config.deadline_ms = 3600000;
  s->config.bootstrap_timeout_ms = 30000;
  s->config.waiting_timeout_ms = 30000;
}

#define CMD "pdref sim bench"

/* pd_world's progress callback: the bar, with the request rate. */
static void on_progress(void *ud, uint64_t done, uint64_t total) {
  pd_cli_progress_t *p = ud;
  double el = pd_cli_progress_elapsed_s(p);
  pd_cli_progress_draw(p, total ? (double)done / (double)total : 0, "%llu/%llu requests, %.0f req/s",
                       (unsigned long long)done, (unsigned long long)total,
                       (double)done / (el + 1e-9));
}

static void usage(FILE *f) {
  fprintf(f, "usage: pdref sim bench [--requests N] [--fault-rate F] [--mode M] [--json]\n"
             "Runs N simulated requests (default 1000000, 1%% of legs faulted) through the\n"
             "given mode (default reference) and prints events/s, requests/s, peak RSS.\n");
}

enum { OPT_REQUESTS = PD_CLI_OPT_FIRST, OPT_FAULT_RATE, OPT_MODE, OPT_JSON };

static const struct option long_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"requests", required_argument, NULL, OPT_REQUESTS},
    {"fault-rate", required_argument, NULL, OPT_FAULT_RATE},
    {"mode", required_argument, NULL, OPT_MODE},
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};

typedef struct bench_opts {
  uint32_t requests;
  double fault_rate;
  pd_mode_t mode;
  int is_json;
} bench_opts_t;

/* One option with its value v; 0, or an error (the message printed). */
static int apply_opt(void *ctx, int c, int index, char *v) {
  bench_opts_t *o = ctx;
  (void)index;
  switch (c) {
  case OPT_REQUESTS:
    return pd_cli_parse_u32(CMD, "--requests", v, 1, PD_SCENARIO_MAX_REQUESTS, &o->requests);
  case OPT_FAULT_RATE: return pd_cli_parse_double(CMD, "--fault-rate", v, 0, 1, &o->fault_rate);
  case OPT_MODE: return pd_cli_parse_mode(CMD, "--mode", v, &o->mode);
  default: o->is_json = 1; return 0; /* OPT_JSON */
  }
}

static void report(const bench_opts_t *o, const pd_world_stats_t *st, const pd_metrics_t *mx,
                   double dt) {
  double ev_s = (double)st->events / dt, rq_s = (double)st->requests_done / dt;
  if (o->is_json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "mode", pd_mode_name(o->mode));
    cJSON_AddNumberToObject(j, "requests", (double)st->requests_done);
    cJSON_AddNumberToObject(j, "events", (double)st->events);
    cJSON_AddNumberToObject(j, "seconds", dt);
    cJSON_AddNumberToObject(j, "events_per_s", ev_s);
    cJSON_AddNumberToObject(j, "requests_per_s", rq_s);
    cJSON_AddNumberToObject(j, "peak_rss_kib", (double)peak_rss_kib());
    cJSON_AddNumberToObject(j, "peak_live_requests", (double)st->peak_live);
    cJSON_AddNumberToObject(j, "violating_requests", (double)st->violations_total);
    cJSON *m = pd_metrics_json(mx, NULL);
    if (m) cJSON_AddItemToObject(j, "metrics", m);
    char *t = cJSON_Print(j);
    if (t) puts(t);
    cJSON_free(t);
    cJSON_Delete(j);
  } else {
    printf("bench %s: %llu requests, %llu events in %.2f s\n", pd_mode_name(o->mode),
           (unsigned long long)st->requests_done, (unsigned long long)st->events, dt);
    printf("  %.0f events/s, %.0f requests/s, peak RSS %ld KiB, peak live requests %llu\n", ev_s,
           rq_s, peak_rss_kib(), (unsigned long long)st->peak_live);
    printf("  requests violating an invariant: %llu (clean %llu, errors %llu)\n",
           (unsigned long long)st->violations_total, (unsigned long long)st->clean_success,
           (unsigned long long)st->client_errors);
    char line[512];
    pd_metrics_line(mx, line, sizeof line);
    printf("  cost: %s\n", line);
  }
}

int pd_cli_sim_bench(int argc, char **argv) {
  bench_opts_t o = {.requests = 1000000, .fault_rate = 0.01, .mode = PD_MODE_REFERENCE};
  pd_cli_parser_t p = {CMD, long_opts, usage, apply_opt, &o, NULL, 0, NULL};
  int rc = pd_cli_parse(&p, argc, argv);
  if (rc >= 0) return rc;
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s) return 2;
  bench_world(s, o.requests, o.fault_rate);
  pd_world_stats_t st;
  uint32_t viol = 0;
  uint64_t hash = 0;
  pd_cli_progress_t pr;
  pd_cli_progress_init(&pr, o.is_json);
  pd_metrics_t mx;
  pd_metrics_init(&mx, 0);
  pd_world_opts_t wo = {NULL, on_progress, &pr, 0, 0, &mx};
  rc = pd_world_run_opts(s, o.mode, 1, &wo, &st, &viol, &hash);
  double dt = pd_cli_progress_elapsed_s(&pr);
  pd_cli_progress_clear(&pr);
  free(s);
  if (rc) {
    pd_metrics_free(&mx);
    fprintf(stderr, "pdref sim bench: %s\n", pd_strerror(rc));
    return 2;
  }
  report(&o, &st, &mx, dt);
  pd_metrics_free(&mx);
  return 0;
}
