/* The rows of `pdref sim run` (cli_rows.h): a text line per scenario x mode (with its detail
 * lines), or a JSON object per row; error rows for files that did not load; the summary
 * matrix and line at the end. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "cli_json.h"
#include "cli_result.h"
#include "cli_rows.h"
#include "pd_err.h"

static const char *const verdict_word[PD_CLI_VERDICTS] = {
    "as expected", "deployment limit", "UNEXPECTED", "not exercised", "skipped", "error"};
static const char *const verdict_json[PD_CLI_VERDICTS] = {
    "as expected", "deployment limit", "unexpected", "not exercised", "skipped", "error"};
static const char *const verdict_key[PD_CLI_VERDICTS] = {
    "as_expected", "deployment_limit", "unexpected", "not_exercised", "skipped", "errors"};

const char *pd_cli_verdict_word(pd_cli_verdict_t v) {
  return (unsigned)v < PD_CLI_VERDICTS ? verdict_word[v] : "error";
}

const char *pd_cli_verdict_json(pd_cli_verdict_t v) {
  return (unsigned)v < PD_CLI_VERDICTS ? verdict_json[v] : "error";
}

void pd_cli_verdict_summary(const char *cmd, const int *count) {
  printf("%s: %d as expected, %d deployment limit, %d UNEXPECTED, %d not exercised, %d skipped",
         cmd, count[PD_CLI_AS_EXPECTED], count[PD_CLI_LIMIT], count[PD_CLI_UNEXPECTED],
         count[PD_CLI_NOT_EXERCISED], count[PD_CLI_SKIPPED]);
  if (count[PD_CLI_ERROR])
    printf(", %d error%s", count[PD_CLI_ERROR], count[PD_CLI_ERROR] == 1 ? "" : "s");
  printf("\n");
  if (!count[PD_CLI_AS_EXPECTED] && !count[PD_CLI_LIMIT] && !count[PD_CLI_UNEXPECTED])
    printf("%s: no row was exercised: this run tested nothing\n", cmd);
}

void pd_cli_verdict_summary_json(cJSON *root, cJSON *rows, const int *count) {
  pd_cli_json_num_t nums[PD_CLI_VERDICTS];
  for (int v = 0; v < PD_CLI_VERDICTS; v++) nums[v] = (pd_cli_json_num_t){verdict_key[v], count[v]};
  pd_cli_json_add_summary(root, rows, nums, PD_CLI_VERDICTS);
}

int pd_cli_verdict_exit(const int *count, int allow_nx) {
  if (count[PD_CLI_ERROR]) return 2;
  if (count[PD_CLI_UNEXPECTED] || (count[PD_CLI_NOT_EXERCISED] && !allow_nx)) return 1;
  return count[PD_CLI_AS_EXPECTED] || count[PD_CLI_LIMIT] ? 0 : 1; /* nothing tested: not ok */
}

/* The row's own verdict: "pass", or its violated invariants with their names. */
static void own_verdict(uint32_t got, char *buf, size_t cap) {
  if (got) pd_cli_inv_text(got, buf, cap);
  else snprintf(buf, cap, "pass");
}

/* "pdref sim run FILE --mode M --seed S [--tie-seed T] --trace NAME-M.trace.json": the
 * command that replays the row and writes its Perfetto trace, the same words in the text
 * table and the JSON row. */
static void replay_cmd(const pd_cli_row_t *r, const char *prog, char *buf, size_t cap) {
  char ties[40] = "";
  if (r->tie_seed || r->s->config.tie_seed) /* --tie-seed 0 over a scenario's T too */
    snprintf(ties, sizeof ties, " --tie-seed %llu", (unsigned long long)r->tie_seed);
  snprintf(buf, cap, "%s sim run %s --mode %s --seed %llu%s --trace %s-%s.trace.json",
           prog ? prog : "pdref", r->s->path, pd_mode_name(r->mode), (unsigned long long)r->seed,
           ties, r->s->name, pd_mode_name(r->mode));
}

static void print_details(const pd_cli_rows_t *o, const pd_cli_row_t *r) {
  if (o->metrics) {
    char line[768];
    pd_metrics_line(&r->mx, line, sizeof line);
    printf("    cost: %s\n", line);
  }
  if (r->got) {
    char reason[320], replay[1200];
    pd_cli_reason_text(r->st.first_reason[0] ? r->st.first_reason : "violation", reason,
                       sizeof reason);
    printf("    %s\n", reason);
    replay_cmd(r, o->prog, replay, sizeof replay);
    printf("    replay: %s\n", replay);
  }
  if (r->trace) printf("    trace: %s\n", r->trace);
}

static pd_cli_result_t result_of(const pd_cli_rows_t *o, const pd_cli_row_t *r, char *replay,
                                 size_t cap);

static void print_row(const pd_cli_rows_t *o, const pd_cli_row_t *r) {
  char want[PD_CLI_INV_TEXT_BYTES], replay[1200];
  pd_cli_result_t x = result_of(o, r, replay, sizeof replay);
  pd_cli_result_text_head(&x); /* the record's text renderer: the first columns */
  if (r->verdict == PD_CLI_SKIPPED) return;
  own_verdict(r->want, want, sizeof want);
  if (r->verdict == PD_CLI_UNEXPECTED) {
    if (r->want_set && r->want != r->got) printf(" (expected %s)", want);
    else printf(" (declared unexercised, but every fault fired)");
  }
  if (r->st.ttft_n && !r->got)
    printf("  ttft %.3f ms", (double)r->st.ttft_sum_ns / (double)r->st.ttft_n / 1e6);
  printf("  faults exercised %u/%u, requests served %llu/%llu", r->st.faults_exercised,
         r->st.faults_total, (unsigned long long)r->st.requests_served,
         (unsigned long long)r->st.requests_done);
  if (r->st.unexercised[0]) printf(" (never fired: %s)", r->st.unexercised);
  if (r->st.class_n[PD_PRIO_CRITICAL] || r->st.class_n[PD_PRIO_SHEDDABLE]) /* R-ADMIT-PRIO */
    for (int c = 0; c < PD_PRIO_COUNT; c++)
      printf("%s%s %llu/%llu clean, %llu shed", c ? "; " : "  classes: ", pd_prio_name(c),
             (unsigned long long)r->st.class_clean[c], (unsigned long long)r->st.class_n[c],
             (unsigned long long)r->st.class_shed[c]);
  if (o->has_seed) printf("  hash %016llx", (unsigned long long)r->hash);
  printf("\n");
  if (r->verdict == PD_CLI_LIMIT) printf("    deployment limit: %s\n", r->s->expect[r->mode].limit_why);
  print_details(o, r);
}

/* The row as the shared result record (cli_result.h); replay is the caller's buffer. */
static pd_cli_result_t result_of(const pd_cli_rows_t *o, const pd_cli_row_t *r, char *replay,
                                 size_t cap) {
  const pd_scenario_t *s = r->s;
  pd_cli_result_t x = {.scenario = s->name, .file = s->path, .mode = pd_mode_name(r->mode),
                       .verdict = r->verdict, .reason = r->skip_why, .exercised = -1};
  if (r->verdict == PD_CLI_SKIPPED) return x;
  replay_cmd(r, o->prog, replay, cap);
  x.violated = r->got;
  x.expected = r->want;
  x.expected_set = r->want_set;
  x.matched = r->matched;
  x.exercised = r->exercised;
  x.reason = r->st.first_reason;
  x.limit_why = s->expect[r->mode].limit_why;
  x.declared_unexercised = r->declared ? s->unexercised[r->mode] : NULL;
  x.never_fired = r->st.unexercised;
  x.seed = r->seed;
  x.tie_seed = r->tie_seed;
  x.has_tie_seed = r->tie_seed != 0;
  x.replay = replay;
  x.has_counts = 1;
  x.faults_exercised = r->st.faults_exercised;
  x.faults_total = r->st.faults_total;
  x.requests = (double)r->st.requests_done;
  x.requests_served = (double)r->st.requests_served;
  x.has_ttft = 1;
  x.ttft_ms_mean = r->st.ttft_n ? (double)r->st.ttft_sum_ns / (double)r->st.ttft_n / 1e6 : NAN;
  return x;
}

static cJSON *json_row(const pd_cli_rows_t *o, const pd_cli_row_t *r) {
  const pd_scenario_t *s = r->s;
  char replay[1200];
  pd_cli_result_t x = result_of(o, r, replay, sizeof replay);
  cJSON *j = pd_cli_result_json(&x);
  if (!j || r->verdict == PD_CLI_SKIPPED) return j; /* skipped: head, status and reason */
  char hash[24];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r->hash);
  cJSON_AddStringToObject(j, "trace_hash", hash);
  if (r->trace) cJSON_AddStringToObject(j, "trace", r->trace);
  cJSON_AddNumberToObject(j, "events", (double)r->st.events);
  cJSON *mx = pd_metrics_json(&r->mx, s);
  if (mx) cJSON_AddItemToObject(j, "metrics", mx);
  return j;
}

static cJSON *json_skip_row(const pd_cli_rows_t *o, const pd_cli_row_t *r) {
  return json_row(o, r); /* the record renders a skipped row as head, status and reason */
}

int pd_cli_rows_begin(pd_cli_rows_t *o) {
  if (o->json_out && !(o->file_arr = cJSON_CreateArray())) return PD_ERR_NOMEM;
  if (o->json) {
    o->arr = cJSON_CreateArray();
    return o->arr ? 0 : PD_ERR_NOMEM;
  }
  if (!o->quiet) {
    o->matrix = pd_cli_matrix_new();
    if (!o->matrix) return PD_ERR_NOMEM;
  }
  if (!o->quiet && !o->only_unexpected)
    printf("%-46s %-14s %-16s %s\n", "scenario", "mode", "verdict", "the row's own (pass, or violated)");
  return 0;
}

static char matrix_cell(const pd_cli_row_t *r) {
  switch (r->verdict) {
  case PD_CLI_AS_EXPECTED: return r->got ? 'x' : '.';
  case PD_CLI_LIMIT: return 'L';
  case PD_CLI_UNEXPECTED: return '!';
  case PD_CLI_NOT_EXERCISED: return '?';
  case PD_CLI_SKIPPED: return '-';
  default: return 'E';
  }
}

void pd_cli_rows_add(pd_cli_rows_t *o, const pd_cli_row_t *r) {
  int plain = r->verdict == PD_CLI_AS_EXPECTED || r->verdict == PD_CLI_LIMIT ||
              r->verdict == PD_CLI_SKIPPED;
  int shown = !o->quiet && (!o->only_unexpected || !plain);
  o->count[r->verdict]++;
  if (o->matrix) pd_cli_matrix_set(o->matrix, r->s->path, r->s->name, (int)r->mode, matrix_cell(r));
  int skip = r->verdict == PD_CLI_SKIPPED;
  if (o->file_arr) cJSON_AddItemToArray(o->file_arr, skip ? json_skip_row(o, r) : json_row(o, r));
  if (!shown) return;
  if (o->arr) cJSON_AddItemToArray(o->arr, skip ? json_skip_row(o, r) : json_row(o, r));
  else print_row(o, r);
  fflush(stdout);
}

void pd_cli_rows_skip(pd_cli_rows_t *o, const pd_scenario_t *s, int mode, const char *why) {
  pd_cli_row_t r;
  memset(&r, 0, sizeof r);
  r.s = s;
  r.mode = (pd_mode_t)mode;
  r.verdict = PD_CLI_SKIPPED;
  r.skip_why = why;
  pd_cli_rows_add(o, &r);
}

static cJSON *json_error_row(const char *file, const char *scenario, int mode, const char *msg) {
  pd_cli_result_t x = {.file = file, .scenario = scenario, .verdict = PD_CLI_ERROR, .error = msg,
                       .mode = mode >= 0 ? pd_mode_name((pd_mode_t)mode) : NULL};
  return pd_cli_result_json(&x);
}

void pd_cli_rows_error(pd_cli_rows_t *o, const char *file, const char *scenario, int mode,
                       const char *msg) {
  const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  o->count[PD_CLI_ERROR]++;
  fprintf(stderr, "pdref sim run: %s\n", msg);
  if (o->matrix) pd_cli_matrix_set(o->matrix, file, scenario ? scenario : base, mode, 'E');
  if (o->file_arr) cJSON_AddItemToArray(o->file_arr, json_error_row(file, scenario, mode, msg));
  if (o->quiet) return;
  if (o->arr) {
    cJSON_AddItemToArray(o->arr, json_error_row(file, scenario, mode, msg));
    return;
  }
  printf("%-46s %-14s %-16s -\n    %s\n", scenario ? scenario : base,
         scenario && mode >= 0 ? pd_mode_name((pd_mode_t)mode) : "-", "error", msg);
  fflush(stdout);
}

/* The JSON document of rows: the rows, the summary counts and errors. Takes arr. */
static cJSON *json_doc(const pd_cli_rows_t *o, cJSON *arr) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "schema", PD_CLI_SCHEMA_SIM_RUN);
  cJSON_AddStringToObject(root, "command", "sim run");
  pd_cli_verdict_summary_json(root, arr, o->count);
  return root;
}

/* --json-out: the document into o->json_out. 0, or -1 (said on stderr). */
static int write_json_out(pd_cli_rows_t *o) {
  cJSON *root = json_doc(o, o->file_arr);
  o->file_arr = NULL;
  char *txt = cJSON_Print(root);
  cJSON_Delete(root);
  FILE *f = txt ? fopen(o->json_out, "w") : NULL;
  int bad = !f || fputs(txt, f) < 0 || fputc('\n', f) < 0;
  if (f && fclose(f)) bad = 1;
  cJSON_free(txt);
  if (bad) fprintf(stderr, "pdref sim run: %s: cannot write --json-out\n", o->json_out);
  return bad ? -1 : 0;
}

int pd_cli_rows_end(pd_cli_rows_t *o) {
  int out_bad = o->file_arr && write_json_out(o) != 0;
  if (o->arr) {
    cJSON *root = json_doc(o, o->arr);
    o->arr = NULL;
    pd_cli_json_print(root);
  } else {
    if (o->matrix) pd_cli_matrix_print(o->matrix);
    o->matrix = NULL;
    pd_cli_verdict_summary("sim", o->count);
  }
  fflush(stdout);
  int rc = pd_cli_verdict_exit(o->count, 0);
  return out_bad ? 2 : rc;
}
