/* `pdref sim bench`: simulator throughput on a large workload, the built-in synthetic one or a
 * scenario file's (--scenario) at a chosen size (--requests) and arrival rate (--rate). Prints
 * simulated events/s, client requests/s, simulated and wall seconds, peak RSS and the RSS at
 * every tenth of the run (memory is flat when the last tenth is no higher than the first).
 * The CLI may read the wall clock; core/ and sim/ never do. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_json.h"
#include "cli_progress.h"
#include "pd_err.h"
#include "pd_pool.h"
#include "pd_world.h"

#define CMD "pdref sim bench"
#define MS_NS 1000000ull
#define TENTHS 10

static long peak_rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* CPU seconds (user + system) this process used: the figure a shared machine does not skew. */
static double cpu_s(void) { return pd_cli_cpu_s(0); }

/* Resident set now, in KiB (0 when /proc is not there). */
static long rss_now_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (!f) return 0;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void bench_world(pd_scenario_t *s) {
  pd_scenario_defaults(s);
  snprintf(s->name, sizeof s->name, "bench");
  snprintf(s->path, sizeof s->path, "(bench)");
  pd_scenario_set_workers(s, 4, 4);
  s->workload.requests = 1000000;
  s->workload.interval_ms = 1;
  s->workload.poisson = 1;
  s->workload.stream = 0.8;
  s->workload.logprob = 0.1;
  s->workload.tokens = 8;
  s->workload.fault_rate = 0.01;
  s->config.deadline_ms = 3600000;
  s->config.bootstrap_timeout_ms = 30000;
  s->config.waiting_timeout_ms = 30000;
}

static void usage(FILE *f) {
  fprintf(f, "usage: pdref sim bench [--scenario FILE] [--requests N] [--rate R]\n"
             "                       [--fault-rate F] [--mode M] [--json]\n"
             "Runs a large workload through the simulator in one mode and prints events/s,\n"
             "requests/s, simulated and wall seconds, peak RSS and the RSS at every tenth of the\n"
             "requests judged. Expectations are not checked: the figure is the count of requests\n"
             "violating an invariant.\n"
             "  --scenario FILE  run that file's workers, workload, faults and config (default:\n"
             "                   4 prefill + 4 decode workers, Poisson arrivals 1 ms apart)\n"
             "  --requests N     requests (default 1000000, or the scenario's)\n"
             "  --rate R         arrivals 1/R s apart, exponentially when the workload is\n"
             "                   Poisson (default 1000, or the scenario's)\n"
             "  --fault-rate F   share of legs faulted, 0..1 (default 0.01, or the scenario's)\n"
             "  --mode M         the gateway model (default reference)\n"
             "  --json           one JSON document on stdout\n"
             PD_CLI_MODES_HELP
             "example: pdref sim bench --requests 100000 --mode joined\n"
             "exit: 0 ran; 2 bad usage, a scenario that does not load, or a run that failed\n");
}

enum { OPT_REQUESTS = PD_CLI_OPT_FIRST, OPT_FAULT_RATE, OPT_MODE, OPT_JSON, OPT_SCENARIO, OPT_RATE };

static const struct option long_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"requests", required_argument, NULL, OPT_REQUESTS},
    {"fault-rate", required_argument, NULL, OPT_FAULT_RATE},
    {"mode", required_argument, NULL, OPT_MODE},
    {"json", no_argument, NULL, OPT_JSON},
    {"scenario", required_argument, NULL, OPT_SCENARIO},
    {"rate", required_argument, NULL, OPT_RATE},
    {NULL, 0, NULL, 0},
};

typedef struct bench_opts {
  uint32_t requests; /* 0: the workload's */
  int has_fault_rate;
  double fault_rate;
  double rate; /* requests/s; 0: the workload's spacing */
  pd_mode_t mode;
  const char *scenario;
  int is_json;
  const char *prog; /* the program as run: the replay command's first word */
} bench_opts_t;

/* One option with its value v; 0, or an error (the message printed). */
static int apply_opt(void *ctx, int c, int index, char *v) {
  bench_opts_t *o = ctx;
  (void)index;
  switch (c) {
  case OPT_REQUESTS:
    return pd_cli_parse_u32(CMD, "--requests", v, 1, PD_SCENARIO_MAX_REQUESTS, &o->requests);
  case OPT_FAULT_RATE:
    o->has_fault_rate = 1;
    return pd_cli_parse_double(CMD, "--fault-rate", v, 0, 1, &o->fault_rate);
  case OPT_RATE: return pd_cli_parse_positive(CMD, "--rate", v, 1e9, &o->rate);
  case OPT_MODE: return pd_cli_parse_mode(CMD, "--mode", v, &o->mode);
  case OPT_SCENARIO: o->scenario = v; return 0;
  default: o->is_json = 1; return 0; /* OPT_JSON */
  }
}

/* The workload to run: the scenario file's or the built-in one, with the overrides. 0, or 2
 * after printing why. */
static int load_world(const bench_opts_t *o, pd_scenario_t *s) {
  char err[512];
  if (!o->scenario) bench_world(s);
  else if (pd_scenario_load(s, o->scenario, err, sizeof err) != 0) {
    fprintf(stderr, CMD ": %s\n", err);
    return 2;
  }
  pd_scenario_workload_t *wl = &s->workload;
  if (o->requests) wl->requests = o->requests;
  if (o->has_fault_rate) wl->fault_rate = o->fault_rate;
  if (o->rate > 0) {
    if (wl->n_bursts) {
      fprintf(stderr, CMD ": --rate: %s arrives in bursts, not at a rate\n", s->path);
      return 2;
    }
    wl->interval_ns = (uint64_t)(1e9 / o->rate + 0.5);
    if (!wl->interval_ns) wl->interval_ns = 1;
    wl->interval_ms = wl->interval_ns / MS_NS; /* the world's horizon counts whole ms */
  }
  uint64_t span_ms = (uint64_t)wl->requests *
                     (wl->interval_ns ? wl->interval_ns / MS_NS : wl->interval_ms);
  if (span_ms > PD_SCENARIO_MAX_MS) {
    fprintf(stderr, CMD ": %u requests %s apart last %llu ms, more than %u ms\n", wl->requests,
            o->rate > 0 ? "at --rate" : "interval_ms", (unsigned long long)span_ms,
            PD_SCENARIO_MAX_MS);
    return 2;
  }
  return 0;
}

/* The run as the progress callback sees it: the bar and the RSS samples. */
typedef struct bench_run {
  pd_cli_progress_t bar;
  int next;                  /* the next tenth to sample, 1..TENTHS */
  long rss_kib[TENTHS + 1];  /* [k]: RSS when k tenths of the requests were judged */
  double wall_s[TENTHS + 1]; /* ... and the wall seconds then */
  int is_after_run;          /* the last tenth was sampled after the run (world freed) */
} bench_run_t;

static void sample_tenths(bench_run_t *b, uint64_t done, uint64_t total) {
  while (b->next <= TENTHS && total && done * TENTHS >= (uint64_t)b->next * total) {
    b->rss_kib[b->next] = rss_now_kib();
    b->wall_s[b->next] = pd_cli_progress_elapsed_s(&b->bar);
    b->next++;
  }
}

/* pd_world's progress callback (every 65536 events): RSS samples, the bar. */
static void on_progress(void *ud, uint64_t done, uint64_t total) {
  bench_run_t *b = ud;
  sample_tenths(b, done, total);
  double el = pd_cli_progress_elapsed_s(&b->bar);
  pd_cli_progress_draw(&b->bar, total ? (double)done / (double)total : 0,
                       "%llu/%llu requests, %.0f req/s, RSS %.1f MiB", (unsigned long long)done,
                       (unsigned long long)total, (double)done / (el + 1e-9),
                       (double)rss_now_kib() / 1024.0);
}

static double growth(const bench_run_t *b) {
  return b->rss_kib[1] ? (double)b->rss_kib[TENTHS] / (double)b->rss_kib[1] : 0;
}

/* "pdref sim bench ... --mode M": the same run again (its seed is the scenario's). */
static void replay_cmd(const bench_opts_t *o, char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "%s sim bench", o->prog);
  if (o->scenario && n < cap) n += (size_t)snprintf(buf + n, cap - n, " --scenario %s", o->scenario);
  if (o->requests && n < cap) n += (size_t)snprintf(buf + n, cap - n, " --requests %u", o->requests);
  if (o->rate > 0 && n < cap) n += (size_t)snprintf(buf + n, cap - n, " --rate %.17g", o->rate);
  if (o->has_fault_rate && n < cap)
    n += (size_t)snprintf(buf + n, cap - n, " --fault-rate %.17g", o->fault_rate);
  if (n < cap) snprintf(buf + n, cap - n, " --mode %s", pd_mode_name(o->mode));
}

static void report_json(const bench_opts_t *o, const pd_scenario_t *s, const pd_world_stats_t *st,
                        const pd_metrics_t *mx, const bench_run_t *b, double dt) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "schema", PD_CLI_SCHEMA_SIM_BENCH);
  cJSON_AddStringToObject(j, "command", "sim bench");
  if (o->scenario) cJSON_AddStringToObject(j, "scenario", s->path);
  else cJSON_AddNullToObject(j, "scenario"); /* the built-in workload */
  cJSON_AddStringToObject(j, "mode", pd_mode_name(o->mode));
  char replay[1200];
  replay_cmd(o, replay, sizeof replay);
  cJSON_AddNumberToObject(j, "seed", (double)s->config.seed);
  cJSON_AddStringToObject(j, "replay", replay);
  cJSON_AddNumberToObject(j, "requests", (double)st->requests_done);
  cJSON_AddNumberToObject(j, "events", (double)st->events);
  cJSON_AddNumberToObject(j, "elapsed_s", dt);
  cJSON_AddNumberToObject(j, "cpu_s", cpu_s());
  cJSON_AddNumberToObject(j, "simulated_s", mx->duration_s);
  cJSON_AddNumberToObject(j, "events_per_s", (double)st->events / dt);
  cJSON_AddNumberToObject(j, "requests_per_s", (double)st->requests_done / dt);
  cJSON_AddNumberToObject(j, "peak_rss_kib", (double)peak_rss_kib());
  cJSON *rss = cJSON_AddArrayToObject(j, "rss_kib_by_tenth");
  for (int k = 1; k <= TENTHS; k++) cJSON_AddItemToArray(rss, cJSON_CreateNumber((double)b->rss_kib[k]));
  cJSON_AddNumberToObject(j, "rss_last_over_first_tenth", growth(b));
  cJSON_AddBoolToObject(j, "rss_last_after_run", b->is_after_run);
  cJSON_AddNumberToObject(j, "peak_live_requests", (double)st->peak_live);
  cJSON_AddNumberToObject(j, "violating_requests", (double)st->violations_total);
  cJSON *m = pd_metrics_json(mx, NULL);
  if (m) cJSON_AddItemToObject(j, "metrics", m);
  pd_cli_json_print(j);
}

static void report_text(const bench_opts_t *o, const pd_scenario_t *s, const pd_world_stats_t *st,
                        const pd_metrics_t *mx, const bench_run_t *b, double dt) {
  printf("bench %s %s: %llu requests, %llu events, %.1f simulated s in %.2f wall s\n", s->path,
         pd_mode_name(o->mode), (unsigned long long)st->requests_done,
         (unsigned long long)st->events, mx->duration_s, dt);
  double cpu = cpu_s();
  printf("  %.0f events/s, %.0f requests/s (%.0f events per CPU second, %.2f CPU s)\n",
         (double)st->events / dt, (double)st->requests_done / dt,
         (double)st->events / (cpu + 1e-9), cpu);
  printf("  peak RSS %ld KiB, peak live requests %llu\n", peak_rss_kib(),
         (unsigned long long)st->peak_live);
  printf("  RSS by tenth of the requests (MiB):");
  for (int k = 1; k <= TENTHS; k++) printf(" %.1f", (double)b->rss_kib[k] / 1024.0);
  printf("%s; 100%%/10%% = %.2f\n", b->is_after_run ? " (the last after the run)" : "", growth(b));
  printf("  requests violating an invariant: %llu (clean %llu, errors %llu)\n",
         (unsigned long long)st->violations_total, (unsigned long long)st->clean_success,
         (unsigned long long)st->client_errors);
  char line[768];
  pd_metrics_line(mx, line, sizeof line);
  printf("  cost: %s\n", line);
}

/* Run s under o's mode with the RSS samples and the bar; 0 or a negative error. */
static int run(const bench_opts_t *o, const pd_scenario_t *s, pd_metrics_t *mx,
               pd_world_stats_t *st, bench_run_t *b, double *dt) {
  uint32_t viol = 0;
  uint64_t hash = 0;
  memset(b, 0, sizeof *b);
  b->next = 1;
  pd_cli_progress_init(&b->bar, o->is_json);
  pd_world_opts_t wo = {NULL, on_progress, b, 0, 0, mx};
  int rc = pd_world_run_opts(s, o->mode, s->config.seed, &wo, st, &viol, &hash);
  *dt = pd_cli_progress_elapsed_s(&b->bar);
  pd_cli_progress_clear(&b->bar);
  if (b->next <= TENTHS) { /* the run ended between two progress calls */
    b->is_after_run = 1;
    sample_tenths(b, 1, 1);
  }
  return rc;
}

/* A simulator run makes and frees cJSON's nodes and strings by the hundred thousand (leg
 * bodies, merged events): glibc's malloc spent a sixth of the run on them. The pool lives as
 * long as the process (its slabs stay reachable). */
static pd_pool_t cjson_pool;
static void *pool_malloc(size_t n) { return pd_pool_malloc(&cjson_pool, n); }
static void pool_release(void *b) { pd_pool_release(&cjson_pool, b); }

void pd_cli_pool_cjson(void) {
  static int is_on;
  if (is_on) return;
  is_on = 1;
  pd_pool_init(&cjson_pool);
  cJSON_Hooks h = {pool_malloc, pool_release};
  cJSON_InitHooks(&h);
}

int pd_cli_sim_bench(const char *prog, int argc, char **argv) {
  pd_cli_pool_cjson();
  bench_opts_t o = {.mode = PD_MODE_REFERENCE, .prog = prog};
  pd_cli_parser_t p = {CMD, long_opts, usage, apply_opt, &o, NULL, 0, NULL};
  int rc = pd_cli_parse(&p, argc, argv);
  if (rc >= 0) return rc;
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s) return 2;
  if (load_world(&o, s)) {
    free(s);
    return 2;
  }
  pd_world_stats_t st;
  pd_metrics_t mx;
  pd_metrics_init(&mx, 0);
  bench_run_t b;
  double dt = 0;
  rc = run(&o, s, &mx, &st, &b, &dt);
  if (rc) fprintf(stderr, CMD ": %s\n", pd_strerror(rc));
  else if (o.is_json) report_json(&o, s, &st, &mx, &b, dt);
  else report_text(&o, s, &st, &mx, &b, dt);
  pd_metrics_free(&mx);
  free(s);
  return rc ? 2 : 0;
}
