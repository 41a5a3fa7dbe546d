/* `pdref report`: result files (sim run, sim explore [merge], conform, sim bench, gateway bench
 * --json) into one self-contained HTML page (cli/report.h, docs/report.md). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_json.h"
#include "pd_err.h"
#include "report.h"
#include "report_requirements.h"

#define CMD "pdref report"
#define MAX_FILES PD_REPORT_MAX_DIR_FILES /* files named and found; results among them:
                                             PD_REPORT_MAX_INPUTS */

typedef struct opts {
  const char *out;
  int json;
  int requirements;         /* --requirements: the requirement matrix as text (report_requirements.c) */
  const char *req_doc;      /* --requirements-doc FILE */
  pd_report_opts_t r;
} opts_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: pdref report [--out FILE] [--json] [--no-swimlanes] [--swimlane-max-requests N]\n"
          "                    RESULT|DIR...\n"
          "Turns --json results of `pdref sim run`, `sim explore` (and `sim explore merge`),\n"
          "`conform`, `sim bench` and `gateway bench` into one self-contained HTML page (inline\n"
          "CSS and SVG, no network): the scenario x mode verdict matrix (click a cell for the\n"
          "row's description, reason and replay command), TTFT CDFs per mode, goodput, TTFT and\n"
          "stranded-slot timelines of the capacity scenarios, a swimlane per row that violates\n"
          "something or is UNEXPECTED (the row\n"
          "is re-run here from its file, mode and seed, its trace kept in memory), explore's\n"
          "findings per invariant, conform's scenario x gateway table and the bench figures.\n"
          "A directory gives its *.json files that are results (explore's output directory:\n"
          "its shard results; the shrunk cases beside them, or named, are listed). Shards of one\n"
          "exploration are merged as `pdref sim explore merge` does (a gap or an overlap in\n"
          "their seeds is an error). --out: the page (default report.html).\n"
          "--no-swimlanes: re-run nothing. --swimlane-max-requests: rows with more requests get\n"
          "no swimlane (default 2000). --json: a summary of what was written on stdout.\n"
          "example: pdref sim run scenarios --json > sim.json && pdref report --out r.html sim.json\n"
          "exit: 0 written, 2 bad usage or input (a missing file, malformed JSON, a file that is\n"
          "no pdref result), named on stderr.\n"
          "--requirements [NAME=]RESULT...: instead of the page, the requirement x gateway\n"
          "matrix of docs/pd-gateway-behaviour.md on stdout (--json: as JSON): a column per\n"
          "conform result (named NAME, else its mode label) and per mode of a sim run result;\n"
          "cells met / NOT MET / n/e (not exercised) / -. --requirements-doc FILE: another copy\n"
          "of the document's index.\n");
}

enum { OPT_OUT = PD_CLI_OPT_FIRST, OPT_JSON, OPT_NO_SWIM, OPT_SWIM_MAX, OPT_REQS, OPT_REQ_DOC };

static const struct option report_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"out", required_argument, NULL, OPT_OUT},
    {"json", no_argument, NULL, OPT_JSON},
    {"no-swimlanes", no_argument, NULL, OPT_NO_SWIM},
    {"swimlane-max-requests", required_argument, NULL, OPT_SWIM_MAX},
    {"requirements", no_argument, NULL, OPT_REQS},
    {"requirements-doc", required_argument, NULL, OPT_REQ_DOC},
    {NULL, 0, NULL, 0},
};

static int apply_opt(void *ctx, int c, int index, char *v) {
  opts_t *o = ctx;
  uint64_t n;
  (void)index;
  switch (c) {
  case OPT_OUT:
    o->out = v;
    return 0;
  case OPT_JSON:
    o->json = 1;
    return 0;
  case OPT_REQS:
    o->requirements = 1;
    return 0;
  case OPT_REQ_DOC:
    o->req_doc = v;
    return 0;
  case OPT_NO_SWIM:
    o->r.swimlanes = 0;
    return 0;
  default: /* OPT_SWIM_MAX */
    if (pd_cli_parse_u64(CMD, "--swimlane-max-requests", v, 0, 10000000, &n)) return PD_ERR_INVAL;
    o->r.swim_max_requests = (size_t)n;
    return 0;
  }
}

static void summary_json(const opts_t *o, const pd_report_t *r, const pd_report_stats_t *st) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "schema", PD_REPORT_SCHEMA);
  cJSON_AddStringToObject(j, "command", "report");
  cJSON_AddStringToObject(j, "out", o->out);
  cJSON_AddNumberToObject(j, "bytes", (double)st->bytes);
  cJSON *ins = cJSON_AddArrayToObject(j, "inputs");
  for (size_t i = 0; i < r->n; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "path", r->in[i].path);
    cJSON_AddStringToObject(e, "kind", pd_report_kind_names[r->in[i].kind]);
    cJSON_AddItemToArray(ins, e);
  }
  cJSON_AddNumberToObject(j, "cells", (double)st->cells);
  cJSON *v = cJSON_AddObjectToObject(j, "verdicts");
  for (int k = 0; k < PD_VERDICT_COUNT; k++)
    cJSON_AddNumberToObject(v, pd_report_verdict_names[k], (double)st->verdicts[k]);
  const pd_cli_json_num_t nums[] = {{"cdf_modes", (double)st->cdf_modes},
                                    {"timelines", (double)st->timelines},
                                    {"swimlanes", (double)st->swimlanes},
                                    {"explore_invariants", (double)st->explore_invariants},
                                    {"conform_rows", (double)st->conform_rows},
                                    {"bench_tables", (double)st->bench_tables},
                                    {"requirement_rows", (double)st->req_rows},
                                    {"requirement_columns", (double)st->req_cols},
                                    {"skipped_files", (double)r->skipped},
                                    {"shrunk_cases", (double)st->shrunk_cases}};
  pd_cli_json_add_nums(j, nums, sizeof nums / sizeof nums[0]);
  pd_cli_json_print(j);
}

/* Load every file (a directory's: its *.json files, so explore's output directory gives its
 * shard results and the shrunk cases beside them, other JSON skipped), then fold the shards
 * of one exploration into one; 0, or 2 after naming the first bad one. */
static int load_all(pd_report_t *r, char **words, int n_words, char **files, int *n_files) {
  for (int w = 0; w < n_words; w++) {
    struct stat sb;
    int first = *n_files, rc;
    r->is_skipping_unknown = stat(words[w], &sb) == 0 && S_ISDIR(sb.st_mode);
    if ((rc = pd_cli_collect_json(CMD, &words[w], 1, files, n_files, MAX_FILES))) return rc;
    if (r->is_skipping_unknown && *n_files == MAX_FILES) { /* the collector stops there */
      fprintf(stderr, CMD ": %s: more than %d JSON files (with the files before it)\n", words[w],
              MAX_FILES);
      return 2;
    }
    for (int i = first; i < *n_files; i++) {
      char err[768];
      if (pd_report_load(r, files[i], err, sizeof err)) {
        fprintf(stderr, CMD ": %s\n", err);
        return 2;
      }
    }
  }
  r->is_skipping_unknown = 0;
  if (r->n == 0 && r->n_cases == 0) {
    fprintf(stderr, CMD ": no result among the files given (%zu other JSON files)\n", r->skipped);
    return 2;
  }
  return pd_report_merge_shards(r);
}

static int write_page(const opts_t *o, const pd_report_t *r, pd_report_stats_t *st) {
  FILE *f = fopen(o->out, "w");
  if (!f) {
    fprintf(stderr, CMD ": %s: cannot write\n", o->out);
    return 2;
  }
  int rc = pd_report_html(r, &o->r, f, st);
  long pos = ftell(f);
  st->bytes = pos > 0 ? (size_t)pos : 0;
  if (fclose(f) || rc) {
    fprintf(stderr, CMD ": %s: write failed\n", o->out);
    return 2;
  }
  return 0;
}

int pd_cli_report(const char *prog, int argc, char **argv) {
  opts_t o = {.out = "report.html",
              .r = {.swimlanes = 1, .swim_max_requests = 2000, .swim_max = 400, .prog = prog}};
  char *words[PD_REPORT_MAX_INPUTS];
  char **files = calloc(MAX_FILES, sizeof *files);
  int n_words = 0, n_files = 0;
  if (!files) return 2;
  pd_cli_parser_t p = {CMD, report_opts, usage, apply_opt, &o, words, PD_REPORT_MAX_INPUTS,
                       &n_words};
  int rc = pd_cli_parse(&p, argc, argv);
  if (rc < 0 && !n_words) {
    fprintf(stderr, CMD ": no result file given (try --help)\n");
    rc = 2;
  }
  if (rc < 0 && o.requirements) rc = pd_report_requirements(stdout, words, n_words, o.req_doc, o.json);
  if (rc >= 0) {
    free(files);
    return rc;
  }
  pd_report_t *r = calloc(1, sizeof *r);
  pd_report_stats_t st;
  rc = r ? load_all(r, words, n_words, files, &n_files) : 2;
  if (!rc) rc = write_page(&o, r, &st);
  if (!rc && o.json) summary_json(&o, r, &st);
  else if (!rc)
    printf("report: wrote %s (%zu cells: %zu as expected, %zu deployment limit, %zu UNEXPECTED, "
           "%zu not exercised, %zu skipped, %zu error; %zu timelines, %zu swimlanes)\n", o.out,
           st.cells, st.verdicts[PD_VERDICT_EXPECTED], st.verdicts[PD_VERDICT_LIMIT],
           st.verdicts[PD_VERDICT_FAIL], st.verdicts[PD_VERDICT_NX],
           st.verdicts[PD_VERDICT_SKIPPED], st.verdicts[PD_VERDICT_ERROR], st.timelines,
           st.swimlanes);
  if (!rc && !o.json && r->n_cases)
    printf("report: %zu shrunk cases of explore listed\n", r->n_cases);
  if (!rc && !o.json && r->skipped > r->n_cases)
    printf("report: %zu JSON files in the directories given are no results, skipped\n",
           r->skipped - r->n_cases);
  for (int i = 0; i < n_files; i++) free(files[i]);
  free(files);
  if (r) pd_report_free(r);
  free(r);
  return rc;
}
