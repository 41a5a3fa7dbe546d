/* `pdref sim run`: replay scenario files under one or all modes, print one row per
 * scenario x mode (or an error row per file that does not load), the summary matrix and the
 * summary line `sim: N as expected, N deployment limit, N UNEXPECTED, N not exercised, N skipped`
 * (the printing and the words: cli/cli_rows.c). */
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
#include "cli_rows.h"
#include "pd_err.h"
#include "pd_world.h"

#define MAX_FILES 4096


typedef struct opts {
  int mode; /* -1 all */
  int has_seed, has_tie_seed;
  uint64_t seed, tie_seed;
  const char *trace;
  pd_cli_rows_t out; /* --json, --metrics, --only-unexpected, --quiet */
  int fail_fast, stopped; /* --fail-fast: stop after the first row not as expected */
  char trace_buf[1024]; /* this row's trace file (trace_path) */
} opts_t;

/* --trace's file for mode m: the path as given for one --mode; under all, the mode's name
 * before its extension (out.json -> out.reference.json; no extension: out.reference). */
static void trace_path(const opts_t *o, pd_mode_t m, char *buf, size_t cap) {
  const char *dot = strrchr(o->trace, '.'), *slash = strrchr(o->trace, '/');
  if (o->mode >= 0) snprintf(buf, cap, "%s", o->trace);
  else if (!dot || (slash && dot < slash) || dot == o->trace || (slash && dot == slash + 1))
    snprintf(buf, cap, "%s.%s", o->trace, pd_mode_name(m));
  else snprintf(buf, cap, "%.*s.%s%s", (int)(dot - o->trace), o->trace, pd_mode_name(m), dot);
}

/* Run one scenario x mode twice (I13: same seed, same trace hash). 0, or an error message
 * in err. */
static int run_row(const pd_scenario_t *s, pd_mode_t m, opts_t *o, pd_cli_row_t *r,
                   char *err, size_t errlen) {
  r->s = s;
  r->mode = m;
  r->seed = o->has_seed ? o->seed : s->config.seed;
  r->tie_seed = o->has_tie_seed ? o->tie_seed : s->config.tie_seed;
  FILE *tf = NULL;
  if (o->trace) {
    trace_path(o, m, o->trace_buf, sizeof o->trace_buf);
    tf = fopen(o->trace_buf, "w");
    if (!tf) {
      snprintf(err, errlen, "%.256s: %.256s: cannot write trace", s->path, o->trace_buf);
      return 2;
    }
    r->trace = o->trace_buf;
  }
  pd_metrics_init(&r->mx, tf != NULL);
  pd_world_opts_t wo = {tf, NULL, NULL, o->has_tie_seed, o->tie_seed, &r->mx};
  int rc = pd_world_run_opts(s, m, r->seed, &wo, &r->st, &r->got, &r->hash);
  if (tf) fclose(tf);
  if (rc) {
    snprintf(err, errlen, "%s: %s: %s", s->path, pd_mode_name(m), pd_strerror(rc));
    return 2;
  }
  pd_world_stats_t st2;
  uint32_t got2 = 0;
  uint64_t h2 = 0;
  wo.trace = NULL;
  wo.metrics = NULL;
  if (pd_world_run_opts(s, m, r->seed, &wo, &st2, &got2, &h2) == 0 &&
      (h2 != r->hash || got2 != r->got))
    r->got |= 1u << (PD_INVARIANT_DETERMINISM - 1);
  r->want_set = s->expect[m].is_set;
  r->want = s->expect[m].violated_mask;
  r->exercised = r->st.faults_exercised == r->st.faults_total &&
                 (r->st.requests_served > 0 || r->st.requests_done == 0);
  r->declared = s->unexercised[m][0] != 0;
  /* a declared mode must really leave a fault unfired (else the declaration is stale); a row
     that was not exercised and not declared is judged "not exercised" (pd_cli_sim_verdict),
     not a mismatch */
  r->matched = (!r->want_set || r->want == r->got) && !(r->declared && r->exercised);
  r->verdict = pd_cli_sim_verdict(r, s->expect[m].limit_mask);
  return 0;
}

/* The row's word (cli_rows.h). An expectation met by a row that was not exercised (a fault
 * never fired, no request reached a worker) is not as expected, whether it expects a pass
 * or a violation: the violation did not come from the row's cause. A row whose own verdict
 * differs from its expectation is UNEXPECTED whatever was exercised. */
pd_cli_verdict_t pd_cli_sim_verdict(const pd_cli_row_t *r, uint32_t limit_mask) {
  if (!r->matched) return PD_CLI_UNEXPECTED;
  if (!r->exercised && !r->declared) return PD_CLI_NOT_EXERCISED;
  return r->want_set && r->got && limit_mask ? PD_CLI_LIMIT : PD_CLI_AS_EXPECTED;
}

#define CMD "pdref sim run"

static void usage(FILE *f) {
  fprintf(f, "usage: pdref sim run FILE|DIR... [--mode M|all] [--seed N] [--tie-seed T]\n"
             "                     [--trace OUT.json] [--metrics] [--json] [--json-out FILE]\n"
             "                     [--only-unexpected | --quiet] [--fail-fast]\n"
             "Runs each scenario under each mode (twice, to check determinism) and compares the\n"
             "violated invariants with the scenario's expectation. Each row says one word: as\n"
             "expected, deployment limit (as expected, and what it violates the scenario declares\n"
             "a limit no gateway can pass), UNEXPECTED, not exercised (its fault entries did not\n"
             "all fire, or its requests reached no worker: its expectation, a pass or a violation,\n"
             "was not met by its own cause; unless the scenario declares that mode in\n"
             "\"unexercised\"), or skipped (--mode M that does not speak the file's protocol, or a\n"
             "mode the scenario's expect has no entry for);\n"
             "beside it the row's own verdict: pass, or the invariants violated.\n"
             "  FILE|DIR          scenario files; a directory gives its *.json files\n"
             "  --mode M|all      the gateway model (default all: every mode that speaks the\n"
             "                    scenario's protocol)\n"
             "  --seed N          run with seed N instead of the scenario's config.seed (the row\n"
             "                    then prints its run hash)\n"
             "  --tie-seed T      order events of the same instant (0: insertion order; default:\n"
             "                    the scenario's config.tie_seed), as `pdref sim explore` found them\n"
             "  --trace OUT.json  write a Chrome/Perfetto trace (ui.perfetto.dev; docs/traces.md)\n"
             "                    of one scenario file; under several modes each mode gets its own\n"
             "                    file (out.json -> out.joined.json, out.reference.json, ...)\n"
             "  --metrics         print each row's cost (goodput, TTFT, E2E, stranded capacity,\n"
             "                    recovery; docs/metrics.md) under it (--json always has it)\n"
             "  --json            one JSON document on stdout instead of the table\n"
             "  --json-out FILE   also write --json's document, every row, to FILE while the\n"
             "                    table goes to stdout (one run for a table and a report: make sim)\n"
             "  --only-unexpected print only the rows not as expected (UNEXPECTED, not exercised,\n"
             "                    errors), then the matrix and summary line (default: every row)\n"
             "  --quiet           print only the summary line (with --json: no \"rows\")\n"
             "  --fail-fast       stop after the first row not as expected or error row\n"
             "                    (`make mutate` uses it: one unexpected row kills a mutant)\n"
             PD_CLI_MODES_HELP
             "A file that does not load is an error row (file:line: message); the other files\n"
             "still run.\n"
             "example: pdref sim run scenarios --mode all --only-unexpected\n"
             "exit: 0 every row as expected, a deployment limit or skipped and at least one\n"
             "exercised, 1 a row UNEXPECTED or not exercised, or no row exercised, 2 bad usage\n"
             "or an error row\n");
}

enum {
  OPT_MODE = PD_CLI_OPT_FIRST, OPT_SEED, OPT_TIE_SEED, OPT_TRACE, OPT_JSON, OPT_METRICS,
  OPT_ONLY_UNEXPECTED, OPT_QUIET, OPT_JSON_OUT, OPT_FAIL_FAST
};

static const struct option run_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"mode", required_argument, NULL, OPT_MODE},
    {"seed", required_argument, NULL, OPT_SEED},
    {"tie-seed", required_argument, NULL, OPT_TIE_SEED},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"json", no_argument, NULL, OPT_JSON},
    {"metrics", no_argument, NULL, OPT_METRICS},
    {"only-unexpected", no_argument, NULL, OPT_ONLY_UNEXPECTED},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"json-out", required_argument, NULL, OPT_JSON_OUT},
    {"fail-fast", no_argument, NULL, OPT_FAIL_FAST},
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
    o->has_seed = o->out.has_seed = 1;
    return pd_cli_parse_u64(CMD, "--seed", v, 0, UINT64_MAX, &o->seed);
  case OPT_TIE_SEED:
    o->has_tie_seed = 1;
    return pd_cli_parse_u64(CMD, "--tie-seed", v, 0, UINT64_MAX, &o->tie_seed);
  case OPT_TRACE:
    o->trace = v;
    return 0;
  case OPT_METRICS:
    o->out.metrics = 1;
    return 0;
  case OPT_ONLY_UNEXPECTED:
    o->out.only_unexpected = 1;
    return 0;
  case OPT_QUIET:
    o->out.quiet = 1;
    return 0;
  case OPT_JSON_OUT:
    o->out.json_out = v;
    return 0;
  case OPT_FAIL_FAST:
    o->fail_fast = 1;
    return 0;
  default: /* OPT_JSON */
    o->out.json = 1;
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

/* Every mode of one loaded scenario that the run asks for. */
static void run_modes(const pd_scenario_t *s, opts_t *o) {
  if (o->mode >= 0 && !pd_mode_speaks((pd_mode_t)o->mode, pd_scenario_protocol(s))) {
    /* every file given is a row: one the mode cannot run is skipped, and says why */
    pd_cli_rows_skip(&o->out, s, o->mode,
                     pd_scenario_protocol(s) == PD_PROTOCOL_VLLM
                         ? "the mode does not speak vLLM's protocol, which its workers speak"
                         : "the mode does not speak SGLang's protocol, which its workers speak");
    return;
  }
  for (int m = 0; m < PD_MODE_COUNT; m++) {
    if (o->mode >= 0 && m != o->mode) continue;
    /* `all` (and a named mode) = the modes that speak the scenario's protocol */
    if (!pd_mode_speaks((pd_mode_t)m, pd_scenario_protocol(s))) continue;
    if (!s->expect[m].is_set) { /* a row with nothing to judge it against is not "as expected" */
      pd_cli_rows_skip(&o->out, s, m,
                       s->config.alloc_fail_for_ms && m != PD_MODE_REFERENCE
                           ? "memory pressure on the gateway judges the reference only: this "
                             "mode's out-of-memory paths are pdref's, not its gateway's"
                           : "the scenario's expect has no entry for this mode: nothing to "
                             "judge the row against");
      continue;
    }
    pd_cli_row_t r;
    char err[600];
    memset(&r, 0, sizeof r);
    int bad = run_row(s, (pd_mode_t)m, o, &r, err, sizeof err);
    if (bad == 0) pd_cli_rows_add(&o->out, &r);
    else pd_cli_rows_error(&o->out, s->path, s->name, m, err);
    pd_metrics_free(&r.mx);
    if (o->fail_fast && (bad || r.verdict == PD_CLI_UNEXPECTED || r.verdict == PD_CLI_NOT_EXERCISED)) {
      o->stopped = 1;
      return;
    }
  }
}

int pd_cli_sim_run(const char *prog, int argc, char **argv) {
  static opts_t o;
  static char *files[MAX_FILES];
  memset(&o, 0, sizeof o);
  o.mode = -1;
  o.out.prog = prog;
  int n_files = 0, rc = parse_opts(argc, argv, &o, files, &n_files);
  if (rc >= 0) return rc;
  if (o.trace && n_files != 1) {
    fprintf(stderr, "pdref sim run: --trace needs exactly one scenario file\n");
    for (int f = 0; f < n_files; f++) free(files[f]);
    return 2;
  }
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s || pd_cli_rows_begin(&o.out)) {
    free(s);
    for (int f = 0; f < n_files; f++) free(files[f]);
    fprintf(stderr, "pdref sim run: out of memory\n");
    return 2;
  }
  for (int f = 0; f < n_files && !o.stopped; f++) {
    char err[512], msg[700];
    if (pd_scenario_load(s, files[f], err, sizeof err) == 0) {
      run_modes(s, &o);
      continue;
    }
    pd_cli_file_error(files[f], err, msg, sizeof msg);
    pd_cli_rows_error(&o.out, files[f], NULL, -1, msg); /* the other files still run */
    o.stopped = o.fail_fast;
  }
  for (int f = 0; f < n_files; f++) free(files[f]);
  free(s);
  return pd_cli_rows_end(&o.out);
}
