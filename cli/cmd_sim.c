/* `pdref sim run`: replay scenario files under one or all modes, print one row per
 * scenario x mode and the summary line `sim: N passed, M failed`. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_json.h"
#include "pd_err.h"
#include "pd_world.h"

#define MAX_FILES 4096


static void mask_str(uint32_t m, char *buf, size_t cap) {
  pd_cli_mask_str(m, PD_INVARIANT_COUNT, ",", buf, cap);
}

typedef struct opts {
  int mode; /* -1 all */
  int has_seed, has_tie_seed;
  uint64_t seed, tie_seed;
  const char *trace;
  int json;
  int metrics; /* --metrics: one cost line under each row */
} opts_t;

typedef struct row_result {
  uint32_t got, want;
  int want_set, matched;
  int exercised;  /* every fault entry fired and some request reached a worker */
  int declared;   /* the scenario declares this mode unexercised ("unexercised") */
  uint64_t hash;
  char trace[1024]; /* the trace file written ("" none) */
  pd_world_stats_t st;
  pd_metrics_t mx; /* the first run's cost (pd_metrics.h) */
} row_result_t;

/* --trace's file for mode m: the path as given for one --mode; under all, the mode's name
 * before its extension (out.json -> out.reference.json; no extension: out.reference). */
static void trace_path(const opts_t *o, pd_mode_t m, char *buf, size_t cap) {
  const char *dot = strrchr(o->trace, '.'), *slash = strrchr(o->trace, '/');
  if (o->mode >= 0) snprintf(buf, cap, "%s", o->trace);
  else if (!dot || (slash && dot < slash) || dot == o->trace || (slash && dot == slash + 1))
    snprintf(buf, cap, "%s.%s", o->trace, pd_mode_name(m));
  else snprintf(buf, cap, "%.*s.%s%s", (int)(dot - o->trace), o->trace, pd_mode_name(m), dot);
}

/* Run one scenario x mode twice (I13: same seed, same trace hash). */
static int run_row(const pd_scenario_t *s, pd_mode_t m, const opts_t *o, row_result_t *r) {
  uint64_t seed = o->has_seed ? o->seed : s->config.seed;
  FILE *tf = NULL;
  if (o->trace) {
    trace_path(o, m, r->trace, sizeof r->trace);
    tf = fopen(r->trace, "w");
    if (!tf) {
      fprintf(stderr, "pdref sim run: %s: cannot write trace\n", r->trace);
      return 2;
    }
  }
  pd_metrics_init(&r->mx, tf != NULL);
  pd_world_opts_t wo = {tf, NULL, NULL, o->has_tie_seed, o->tie_seed, &r->mx};
  int rc = pd_world_run_opts(s, m, seed, &wo, &r->st, &r->got, &r->hash);
  if (tf) fclose(tf);
  if (rc) {
    fprintf(stderr, "pdref sim run: %s: %s\n", s->path, pd_strerror(rc));
    return 2;
  }
  pd_world_stats_t st2;
  uint32_t got2 = 0;
  uint64_t h2 = 0;
  wo.trace = NULL;
  wo.metrics = NULL;
  if (pd_world_run_opts(s, m, seed, &wo, &st2, &got2, &h2) == 0 && (h2 != r->hash || got2 != r->got))
    r->got |= 1u << (PD_INVARIANT_DETERMINISM - 1);
  r->want_set = s->expect[m].is_set;
  r->want = s->expect[m].violated_mask;
  r->exercised = r->st.faults_exercised == r->st.faults_total &&
                 (r->st.requests_served > 0 || r->st.requests_done == 0);
  r->declared = s->unexercised[m][0] != 0;
  /* a declared mode must really leave a fault unfired (else the declaration is stale) */
  r->matched = (!r->want_set || r->want == r->got) && r->declared == !r->exercised;
  return 0;
}

/* Not exercised and not declared so: the row tested nothing about a fault (or served nothing). */
static int is_not_exercised(const row_result_t *r) { return !r->exercised && !r->declared; }

static void print_row(const pd_scenario_t *s, pd_mode_t m, const opts_t *o, const row_result_t *r) {
  char got[64], want[64];
  mask_str(r->got, got, sizeof got);
  mask_str(r->want, want, sizeof want);
  printf("%-46s %-9s %-4s %-14s %s", s->name, pd_mode_name(m), r->got ? "FAIL" : "PASS", got,
         is_not_exercised(r) ? "NOT EXERCISED" : r->matched ? "as expected" : "UNEXPECTED");
  if (!r->matched && !is_not_exercised(r)) {
    if (r->want_set && r->want != r->got) printf(" (expected %s)", r->want ? want : "pass");
    else printf(" (declared unexercised, but every fault fired)");
  }
  if (r->st.ttft_n && !r->got)
    printf("  ttft %.3f ms", (double)r->st.ttft_sum_ns / (double)r->st.ttft_n / 1e6);
  printf("  faults exercised %u/%u, requests served %llu/%llu", r->st.faults_exercised,
         r->st.faults_total, (unsigned long long)r->st.requests_served,
         (unsigned long long)r->st.requests_done);
  if (r->st.unexercised[0]) printf(" (never fired: %s)", r->st.unexercised);
  if (o->has_seed) printf("  hash %016llx", (unsigned long long)r->hash);
  printf("\n");
  if (o->metrics) {
    char line[512];
    pd_metrics_line(&r->mx, line, sizeof line);
    printf("    cost: %s\n", line);
  }
  if (r->got) {
    printf("    %s%s\n", r->st.first_reason[0] ? r->st.first_reason : "violation",
           r->st.first_violating_req_valid ? "" : "");
    uint64_t tie = o->has_tie_seed ? o->tie_seed : s->config.tie_seed;
    char ties[40] = "";
    if (tie) snprintf(ties, sizeof ties, " --tie-seed %llu", (unsigned long long)tie);
    printf("    replay: build/pdref sim run %s --mode %s --seed %llu%s --trace %s-%s.trace.json\n",
           s->path, pd_mode_name(m),
           (unsigned long long)(o->has_seed ? o->seed : s->config.seed), ties, s->name,
           pd_mode_name(m));
  }
  if (r->trace[0]) printf("    trace: %s\n", r->trace);
}

static cJSON *json_row(const pd_scenario_t *s, pd_mode_t m, const row_result_t *r) {
  cJSON *j = cJSON_CreateObject();
  char got[64], want[64];
  mask_str(r->got, got, sizeof got);
  mask_str(r->want, want, sizeof want);
  pd_cli_json_row_head(j, s->name, s->path, pd_mode_name(m));
  cJSON_AddStringToObject(j, "violated", got);
  cJSON_AddStringToObject(j, "expected", r->want_set ? want : "any");
  cJSON_AddBoolToObject(j, "matched", r->matched);
  cJSON_AddStringToObject(j, "status", is_not_exercised(r) ? "not exercised"
                                       : r->matched ? "as expected" : "unexpected");
  const pd_cli_json_num_t nums[] = {{"faults_exercised", r->st.faults_exercised},
                                     {"faults_total", r->st.faults_total},
                                     {"requests_served", (double)r->st.requests_served}};
  pd_cli_json_add_nums(j, nums, sizeof nums / sizeof nums[0]);
  if (r->st.unexercised[0]) cJSON_AddStringToObject(j, "never_fired", r->st.unexercised);
  if (r->declared) cJSON_AddStringToObject(j, "declared_unexercised", s->unexercised[m]);
  cJSON_AddStringToObject(j, "reason", r->st.first_reason);
  char hash[24];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r->hash);
  cJSON_AddStringToObject(j, "trace_hash", hash);
  if (r->trace[0]) cJSON_AddStringToObject(j, "trace", r->trace);
  cJSON_AddNumberToObject(j, "requests", (double)r->st.requests_done);
  cJSON_AddNumberToObject(j, "events", (double)r->st.events);
  if (r->st.ttft_n)
    cJSON_AddNumberToObject(j, "ttft_ms_mean", (double)r->st.ttft_sum_ns / (double)r->st.ttft_n / 1e6);
  cJSON *mx = pd_metrics_json(&r->mx, s);
  if (mx) cJSON_AddItemToObject(j, "metrics", mx);
  return j;
}

#define CMD "pdref sim run"

static void usage(FILE *f) {
  fprintf(f, "usage: pdref sim run FILE|DIR... [--mode joined|pr1150|minilb|reference|all]\n"
             "(all: the modes that speak the scenario's protocol: joined, pr1150, minilb and\n"
             "reference for SGLang's; vllm-toy-proxy, mooncake-proxy, llmd-sidecar and\n"
             "reference for vLLM's)\n"
             "                    [--seed N] [--tie-seed T] [--trace OUT.json] [--json] [--metrics]\n"
             "Runs each scenario under each mode (twice, to check determinism) and compares the\n"
             "violated invariants with the scenario's expectation. A row whose fault entries did\n"
             "not all fire, or whose requests reached no worker, is NOT EXERCISED (exit 1) unless\n"
             "the scenario declares that mode in \"unexercised\". --trace writes a Chrome/Perfetto\n"
             "trace (open in ui.perfetto.dev; docs/traces.md) of one scenario file; under several modes\n"
             "each mode gets its own file, named from OUT with the mode before the extension\n"
             "(out.json -> out.joined.json, out.reference.json, ...). --tie-seed\n"
             "orders events of the same instant (0: insertion order; default: the scenario's\n"
             "config.tie_seed), as `pdref sim explore` found them. --metrics prints each row's cost\n"
             "(goodput, TTFT, E2E, stranded capacity, recovery; docs/metrics.md) under it; --json\n"
             "always has it as \"metrics\".\n");
}

enum { OPT_MODE = PD_CLI_OPT_FIRST, OPT_SEED, OPT_TIE_SEED, OPT_TRACE, OPT_JSON, OPT_METRICS };

static const struct option run_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"mode", required_argument, NULL, OPT_MODE},
    {"seed", required_argument, NULL, OPT_SEED},
    {"tie-seed", required_argument, NULL, OPT_TIE_SEED},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"json", no_argument, NULL, OPT_JSON},
    {"metrics", no_argument, NULL, OPT_METRICS},
    {NULL, 0, NULL, 0},
};

/* One option; 0, or PD_ERR_INVAL after printing why. */
static int apply_opt(void *ctx, int c, int index, char *v) {
  opts_t *o = ctx;
  pd_mode_t pm;
  (void)index;
  switch (c) {
  case OPT_MODE:
    if (strcmp(v, "all") == 0) o->mode = -1;
    else if (pd_cli_parse_mode(CMD, "--mode", v, &pm) == 0) o->mode = (int)pm;
    else return PD_ERR_INVAL;
    return 0;
  case OPT_SEED:
    o->has_seed = 1;
    return pd_cli_parse_u64(CMD, "--seed", v, 0, UINT64_MAX, &o->seed);
  case OPT_TIE_SEED:
    o->has_tie_seed = 1;
    return pd_cli_parse_u64(CMD, "--tie-seed", v, 0, UINT64_MAX, &o->tie_seed);
  case OPT_TRACE:
    o->trace = v;
    return 0;
  case OPT_METRICS:
    o->metrics = 1;
    return 0;
  default: /* OPT_JSON */
    o->json = 1;
    return 0;
  }
}

/* Returns -1 to go on, or an exit code (0 after --help, 2 on bad usage). */
static int parse_opts(int argc, char **argv, opts_t *o, char **files, int *n_files) {
  static char *paths[MAX_FILES];
  int n_paths = 0;
  pd_cli_parser_t p = {CMD, run_opts, usage, apply_opt, o, paths, MAX_FILES, &n_paths};
  int rc = pd_cli_parse(&p, argc, argv);
  if (rc >= 0) return rc;
  if (!n_paths) {
    fprintf(stderr, CMD ": no scenario file or directory given (try --help)\n");
    return 2;
  }
  rc = pd_cli_collect_json(CMD, paths, n_paths, files, n_files, MAX_FILES);
  return rc ? rc : -1;
}

int pd_cli_sim_run(int argc, char **argv) {
  opts_t o = {.mode = -1};
  static char *files[MAX_FILES];
  int n_files = 0, rc = parse_opts(argc, argv, &o, files, &n_files);
  if (rc >= 0) return rc;
  if (o.trace && n_files != 1) {
    fprintf(stderr, "pdref sim run: --trace needs exactly one scenario file\n");
    return 2;
  }
  pd_scenario_t *s = malloc(sizeof *s);
  cJSON *arr = o.json ? cJSON_CreateArray() : NULL;
  int passed = 0, failed = 0, unexercised = 0, exit_code = 0;
  if (!s) return 2;
  if (!o.json)
    printf("%-46s %-9s %-4s %-14s %s\n", "scenario", "mode", "inv", "violated", "expectation");
  for (int f = 0; f < n_files && exit_code != 2; f++) {
    char err[512];
    if (pd_scenario_load(s, files[f], err, sizeof err) != 0) {
      fprintf(stderr, "pdref sim run: %s\n", err);
      exit_code = 2;
      break;
    }
    for (int m = 0; m < PD_MODE_COUNT; m++) {
      if (o.mode >= 0 && m != o.mode) continue;
      /* `all` (and a named mode) = the modes that speak the scenario's protocol */
      if (!pd_mode_speaks((pd_mode_t)m, pd_scenario_protocol(s))) continue;
      row_result_t r;
      memset(&r, 0, sizeof r);
      if (run_row(s, (pd_mode_t)m, &o, &r)) { pd_metrics_free(&r.mx); exit_code = 2; break; }
      if (is_not_exercised(&r)) unexercised++;
      else if (r.matched) passed++;
      else failed++;
      if (arr) cJSON_AddItemToArray(arr, json_row(s, (pd_mode_t)m, &r));
      else print_row(s, (pd_mode_t)m, &o, &r);
      pd_metrics_free(&r.mx);
      fflush(stdout);
    }
  }
  for (int f = 0; f < n_files; f++) free(files[f]);
  free(s);
  if (arr) {
    cJSON *root = cJSON_CreateObject();
    pd_cli_json_add_summary(root, arr, passed, failed, unexercised);
    pd_cli_json_print(root);
  } else if (exit_code != 2) {
    printf("sim: %d passed, %d failed, %d not exercised\n", passed, failed, unexercised);
  }
  if (exit_code == 2) return 2;
  return failed || unexercised ? 1 : 0;
}
