/* `pdref sim bench`: simulator throughput on a large synthetic workload. Prints simulated
 * events/s, client requests/s and peak RSS. The CLI may read the wall clock; core/ and sim/
 * never do. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "pd_err.h"
#include "pd_world.h"

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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

/* One-line progress bar on a TTY, redrawn at most ~10 times a second. */
typedef struct progress {
  int is_tty;
  double t0, last;
} progress_t;

static void on_progress(void *ud, uint64_t done, uint64_t total) {
  progress_t *p = ud;
  double now = wall_s();
  if (!p->is_tty || now - p->last < 0.1) return;
  p->last = now;
  int width = 30, fill = total ? (int)((double)done / (double)total * width) : 0;
  char bar[64];
  for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
  bar[width] = 0;
  fprintf(stderr, "\r[%s] %llu/%llu requests, %.0f req/s ", bar, (unsigned long long)done,
          (unsigned long long)total, (double)done / (now - p->t0 + 1e-9));
}

int pd_cli_sim_bench(int argc, char **argv) {
  uint32_t requests = 1000000;
  double fault_rate = 0.01;
  int json = 0;
  const char *mode_name = "reference";
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0) {
      printf("usage: pdref sim bench [--requests N] [--fault-rate F] [--mode M] [--json]\n"
             "Runs N simulated requests (default 1000000, 1%% of legs faulted) through the\n"
             "given mode (default reference) and prints events/s, requests/s, peak RSS.\n");
      return 0;
    } else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc) {
      requests = (uint32_t)strtoul(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--fault-rate") == 0 && i + 1 < argc) {
      fault_rate = strtod(argv[++i], NULL);
    } else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
      mode_name = argv[++i];
    } else if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else {
      fprintf(stderr, "pdref sim bench: unknown option '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  pd_mode_t mode;
  if (pd_mode_parse(mode_name, &mode) || requests == 0 || requests > PD_SCN_MAX_REQUESTS ||
      fault_rate < 0 || fault_rate > 1) {
    fprintf(stderr, "pdref sim bench: bad --mode, --requests (1..%u) or --fault-rate (0..1)\n",
            PD_SCN_MAX_REQUESTS);
    return 2;
  }
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s) return 2;
  bench_world(s, requests, fault_rate);
  pd_world_stats_t st;
  uint32_t viol = 0;
  uint64_t hash = 0;
  double t0 = wall_s();
  progress_t pr = {isatty(2), t0, 0};
  pd_world_opts_t wo = {NULL, on_progress, &pr, 0, 0};
  int rc = pd_world_run_opts(s, mode, 1, &wo, &st, &viol, &hash);
  double dt = wall_s() - t0;
  if (pr.is_tty) fprintf(stderr, "\r%60s\r", "");
  free(s);
  if (rc) {
    fprintf(stderr, "pdref sim bench: %s\n", pd_strerror(rc));
    return 2;
  }
  double ev_s = (double)st.events / dt, rq_s = (double)st.requests_done / dt;
  if (json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "mode", pd_mode_name(mode));
    cJSON_AddNumberToObject(j, "requests", (double)st.requests_done);
    cJSON_AddNumberToObject(j, "events", (double)st.events);
    cJSON_AddNumberToObject(j, "seconds", dt);
    cJSON_AddNumberToObject(j, "events_per_s", ev_s);
    cJSON_AddNumberToObject(j, "requests_per_s", rq_s);
    cJSON_AddNumberToObject(j, "peak_rss_kib", (double)peak_rss_kib());
    cJSON_AddNumberToObject(j, "peak_live_requests", (double)st.peak_live);
    cJSON_AddNumberToObject(j, "violating_requests", (double)st.violations_total);
    char *t = cJSON_Print(j);
    if (t) puts(t);
    cJSON_free(t);
    cJSON_Delete(j);
  } else {
    printf("bench %s: %llu requests, %llu events in %.2f s\n", pd_mode_name(mode),
           (unsigned long long)st.requests_done, (unsigned long long)st.events, dt);
    printf("  %.0f events/s, %.0f requests/s, peak RSS %ld KiB, peak live requests %llu\n", ev_s,
           rq_s, peak_rss_kib(), (unsigned long long)st.peak_live);
    printf("  requests violating an invariant: %llu (clean %llu, errors %llu)\n",
           (unsigned long long)st.violations_total, (unsigned long long)st.clean_success,
           (unsigned long long)st.client_errors);
  }
  return 0;
}
