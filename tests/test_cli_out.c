/* What the built pdref prints (cli/cli_rows.c, cli_matrix.c, cli_inv.c, cli_json.c) as a user
 * or a script reads it: `sim run --only-unexpected` and `--quiet`; --json rows with arrays,
 * names, the seed and a replay command that replays the row; a file that does not load as an
 * error row among good rows; --listen with host names and [IPv6]; the ready lines of the mock
 * and the gateway (the same head: ready, pid, host, port, listen, url), on 127.0.0.1 and on
 * ::1 when the machine has an IPv6 loopback. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>

#include "cli_args.h"
#include "cli_rows.h"
#include "pd_err.h"
#include "pd_scenario_write.h"
#include "pdt.h"
#include "pdt_cli.h"

#define SCN PD_SOURCE_DIR "/scenarios/"
#define GOOD SCN "batch-chat-n2.json"
#define I3_ROW SCN "abort-overtakes-late-prefill-request.json" /* joined, minilb: I3 */

static run_t *pdref(const char *const *args, int split) {
  static run_t r;
  memset(&r, 0, sizeof r);
  if (pdt_cli_run(&r, "pdref", args, split) != 0) {
    fprintf(stderr, "test_cli_out: pdref not built next to the tests, binary test skipped\n");
    return NULL;
  }
  return &r;
}

/* A scratch directory with the files the tests run: wrong.json (I3_ROW expecting joined to
 * pass: one UNEXPECTED row), bad.json (an unknown key on line 3), deep.json (one in
 * workers[1], line 7), some.json (expects only joined). */
static char g_dir[64];

static int write_file(const char *name, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

/* Remove dir and what is in it (files and directories of files). */
static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    char path[PATH_MAX];
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
    if (remove(path) != 0) remove_tree(path); /* a directory: its files first */
  }
  if (d) closedir(d);
  rmdir(dir);
}

/* At exit: the scratch directory and what the runs wrote in it. */
static void drop_files(void) {
  if (g_dir[0]) remove_tree(g_dir);
}

static int make_files(void) {
  if (g_dir[0]) return 0;
  snprintf(g_dir, sizeof g_dir, "/tmp/pdref_cli_out_XXXXXX");
  if (!mkdtemp(g_dir)) return -1;
  atexit(drop_files);
  static char text[65536];
  FILE *f = fopen(I3_ROW, "r");
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[n] = '\0';
  char *at = strstr(text, "\"joined\": [\"I3\"]");
  if (!at) return -1;
  memcpy(at, "\"joined\": \"pass\"", 16); /* the same length */
  const char *some = "{\"name\": \"some\", \"workers\": [{\"name\": \"p0\", \"role\": \"prefill\"}, "
                     "{\"name\": \"d0\", \"role\": \"decode\"}], \"workload\": {\"requests\": 1}, "
                     "\"expect\": {\"joined\": \"pass\"}}\n";
  return write_file("wrong.json", text) | write_file("bad.json", "{\n \"name\": \"x\",\n \"bogus\": 3\n}\n") |
         write_file("deep.json", "{\n \"name\": \"deep\",\n \"workers\": [\n  {\"name\": \"p0\", "
                                 "\"role\": \"prefill\"},\n  {\"name\": \"d0\",\n   \"role\": "
                                 "\"decode\",\n   \"bogus\": 1}\n ]\n}\n") |
         write_file("some.json", some);
}

static const char *file(const char *name) {
  static char paths[4][128];
  static int k;
  char *p = paths[k++ % 4];
  snprintf(p, sizeof paths[0], "%s/%s", g_dir, name);
  return p;
}

/* The lines of out that start with prefix. */
static int count_lines(const char *out, const char *prefix) {
  int n = 0;
  for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    n += strncmp(l, prefix, strlen(prefix)) == 0;
  return n;
}

/* j[key] is the array of strings want ("" = empty), in order. */
static int is_list(const cJSON *j, const char *key, const char *const *want, int n) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key);
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) return 0;
  for (int i = 0; i < n; i++) {
    const char *s = cJSON_GetStringValue(cJSON_GetArrayItem(a, i));
    if (!s || strcmp(s, want[i]) != 0) return 0;
  }
  return 1;
}

static const char *str(const cJSON *j, const char *key) {
  return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, key));
}

/* ---------- invariant names ---------- */

static void test_invariant_names(void) {
  char b[PD_CLI_INV_TEXT_BYTES];
  pd_cli_inv_text((1u << 1) | (1u << 2), b, sizeof b);
  PDT_EQ_STR(b, "I2 orphan-leg, I3 stranded-slot");
  pd_cli_inv_text(0, b, sizeof b);
  PDT_EQ_STR(b, "");
  pd_cli_inv_text((1u << PD_INVARIANT_COUNT) - 1, b, sizeof b); /* all of them fit */
  PDT_TRUE(strstr(b, "I1 termination, ") == b && strstr(b, ", I19 freed-blocks") != NULL);
  pd_cli_reason_text("I3 prefill slot on p0 held", b, sizeof b);
  PDT_EQ_STR(b, "I3 stranded-slot: prefill slot on p0 held");
  pd_cli_reason_text("request 0: I12 a leg", b, sizeof b);
  PDT_EQ_STR(b, "request 0: I12 breaker: a leg");
  pd_cli_reason_text("ID I99 and Ix are not IDs", b, sizeof b);
  PDT_EQ_STR(b, "ID I99 and Ix are not IDs");
  cJSON *j = cJSON_CreateObject();
  pd_cli_inv_add(j, "v", "n", 1u << 17);
  const char *const id[] = {"I18"}, *const name[] = {"stranded-kv"};
  PDT_TRUE(is_list(j, "v", id, 1) && is_list(j, "n", name, 1));
  cJSON_Delete(j);
}

/* ---------- sim run: --only-unexpected, --quiet, the matrix ---------- */

static void test_only_unexpected_and_quiet(void) {
  PDT_EQ_INT(make_files(), 0);
  const char *all[] = {"sim", "run", GOOD, file("wrong.json"), NULL};
  run_t *r = pdref(all, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 1);
  PDT_EQ_INT(count_lines(r->out, "batch-chat-n2 "), 5); /* the control: 4 rows, the matrix */
  PDT_HAS(r->out, "batch-chat-n2                                  joined         as expected      pass");
  const char *only[] = {"sim", "run", GOOD, file("wrong.json"), "--only-unexpected", NULL};
  r = pdref(only, 1);
  PDT_EQ_INT(r->code, 1);
  PDT_EQ_INT(count_lines(r->out, "batch-chat-n2 "), 1); /* its matrix line only */
  PDT_EQ_INT(count_lines(r->out, "abort-overtakes-late-prefill-request "), 1); /* joined */
  PDT_HAS(r->out, "joined         UNEXPECTED       I3 stranded-slot (expected pass)");
  PDT_HAS(r->out, "    I3 stranded-slot: prefill slot on p0 held");
  PDT_TRUE(!strstr(r->out, "as expected      pass") && !strstr(r->out, "FAIL") && !strstr(r->out, "PASS"));
  PDT_TRUE(strstr(r->out, "scenario                                       mode") == NULL);
  /* the matrix: a cell per row, the UNEXPECTED one '!' */
  PDT_HAS(r->out, "batch-chat-n2                           ....");
  PDT_HAS(r->out, "abort-overtakes-late-prefill-request    !.x.");
  PDT_TRUE(strstr(r->out, "sim: 7 as expected, 0 deployment limit, 1 UNEXPECTED, 0 not exercised, 0 skipped\n") != NULL);
  const char *quiet[] = {"sim", "run", GOOD, file("wrong.json"), "--quiet", NULL};
  r = pdref(quiet, 1);
  PDT_EQ_INT(r->code, 1);
  PDT_EQ_STR(r->out, "sim: 7 as expected, 0 deployment limit, 1 UNEXPECTED, 0 not exercised, 0 skipped\n");
  const char *good[] = {"sim", "run", GOOD, "--quiet", NULL};
  r = pdref(good, 1);
  PDT_EQ_INT(r->code, 0);
  PDT_EQ_STR(r->out, "sim: 4 as expected, 0 deployment limit, 0 UNEXPECTED, 0 not exercised, 0 skipped\n");
}

/* Every file given is a row: `--mode vllm-toy-proxy` on SGLang files runs nothing, and says
 * so (a skipped row per file, counted) and exits 1: a run with no exercised row tested nothing.
 * Before: no row, "0 passed, 0 failed", exit 0. */
static void test_a_run_that_tests_nothing_exits_1(void) {
  const char *text[] = {"sim", "run", GOOD, I3_ROW, "--mode", "vllm-toy-proxy", NULL};
  run_t *r = pdref(text, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 1);
  PDT_HAS(r->out, "batch-chat-n2                                  vllm-toy-proxy skipped          -  "
                  "(the mode does not speak SGLang's protocol, which its workers speak)");
  PDT_HAS(r->out, "sim: 0 as expected, 0 deployment limit, 0 UNEXPECTED, 0 not exercised, 2 skipped\n"
                  "sim: no row was exercised: this run tested nothing\n");
  const char *json[] = {"sim", "run", GOOD, I3_ROW, "--mode", "vllm-toy-proxy", "--json", NULL};
  r = pdref(json, 1);
  PDT_EQ_INT(r->code, 1);
  cJSON *doc = cJSON_Parse(r->out);
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "rows"), *row;
  PDT_EQ_INT(cJSON_GetArraySize(rows), 2);
  cJSON_ArrayForEach(row, rows) PDT_EQ_STR(str(row, "status"), "skipped");
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, "skipped");
  PDT_TRUE(cJSON_IsNumber(n) && n->valueint == 2);
  PDT_TRUE(!cJSON_GetObjectItemCaseSensitive(doc, "passed")); /* the totals use the words */
  n = cJSON_GetObjectItemCaseSensitive(doc, "as_expected");
  PDT_TRUE(cJSON_IsNumber(n) && n->valueint == 0);
  cJSON_Delete(doc);
  /* the same files in a mode that speaks them: 2 exercised rows, exit 0 */
  const char *ok[] = {"sim", "run", GOOD, I3_ROW, "--mode", "reference", "--quiet", NULL};
  r = pdref(ok, 1);
  PDT_EQ_INT(r->code, 0);
  PDT_EQ_STR(r->out, "sim: 2 as expected, 0 deployment limit, 0 UNEXPECTED, 0 not exercised, 0 skipped\n");
}

/* A deployment limit (sf-prefill-kv-expires-before-decode-reads: prefill's KV expired before
 * any decode could read it) has its own word, and the checker still holds the row to exactly
 * the declared set: the same declaration naming I18 instead of I19 is UNEXPECTED. */
/* A row whose fault never fired is "not exercised" (exit 1), whether it expects a pass or a
 * violation, and says which fault; only a declared row whose fault did fire is UNEXPECTED
 * for its stale declaration. Before: every not-exercised row read "UNEXPECTED ... (declared
 * unexercised, but every fault fired)". */
static void test_not_exercised_word(void) {
  PDT_EQ_INT(make_files(), 0);
  PDT_EQ_INT(write_file("unfired.json",
                        "{\"name\": \"unfired\", \"workers\": [{\"name\": \"p0\", \"role\": "
                        "\"prefill\", \"faults\": [{\"kind\": \"status\", \"status\": 503, "
                        "\"nth\": 5}]}, {\"name\": \"d0\", \"role\": \"decode\"}], \"workload\": "
                        "{\"requests\": 1}, \"expect\": {\"reference\": \"pass\", \"joined\": "
                        "[\"I1\"]}}\n"),
             0);
  const char *text[] = {"sim", "run", file("unfired.json"), "--mode", "all", NULL};
  run_t *r = pdref(text, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 1);
  PDT_HAS(r->out, "reference      not exercised    pass");
  PDT_HAS(r->out, "(never fired: p0 faults[0] status)");
  PDT_HAS(r->out, "joined         UNEXPECTED       pass (expected I1 termination)");
  PDT_TRUE(strstr(r->out, "declared unexercised") == NULL);
  PDT_HAS(r->out, "pr1150         skipped          -  (the scenario's expect has no entry for this mode");
  PDT_HAS(r->out, "sim: 0 as expected, 0 deployment limit, 1 UNEXPECTED, 1 not exercised, 2 skipped");
}

static void test_deployment_limit_word(void) {
  PDT_EQ_INT(make_files(), 0);
  const char *text[] = {"sim", "run", SCN "sf-prefill-kv-expires-before-decode-reads.json",
                        "--mode", "reference", NULL};
  run_t *r = pdref(text, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 0);
  PDT_HAS(r->out, "reference      deployment limit I19 freed-blocks");
  PDT_HAS(r->out, "    deployment limit: prefill's KV timer freed the blocks");
  PDT_HAS(r->out, "sim: 0 as expected, 1 deployment limit, 0 UNEXPECTED");
  PDT_HAS(r->out, "kv-expires-before-decode-re~ L\n");
  FILE *in = fopen(PD_SOURCE_DIR "/scenarios/sf-prefill-kv-expires-before-decode-reads.json", "r");
  static char txt[16384];
  size_t n = in ? fread(txt, 1, sizeof txt - 1, in) : 0;
  if (in) fclose(in);
  txt[n] = 0;
  char *at = strstr(txt, "\"reference\": {\n      \"deployment_limit\": [\n        \"I19\"");
  PDT_TRUE(at != NULL);
  if (!at) return;
  at[strlen("\"reference\": {\n      \"deployment_limit\": [\n        \"I1")] = '8';
  PDT_EQ_INT(write_file("limit18.json", txt), 0);
  const char *wrong[] = {"sim", "run", file("limit18.json"), "--mode", "reference", NULL};
  r = pdref(wrong, 1);
  PDT_EQ_INT(r->code, 1);
  PDT_HAS(r->out, "reference      UNEXPECTED       I19 freed-blocks (expected I18 stranded-kv)");
}

/* A deployment limit survives the scenario writer (sim explore's and sim new's): the file it
 * writes loads back with the same set and why. */
static void test_deployment_limit_round_trips(void) {
  PDT_EQ_INT(make_files(), 0);
  pd_scenario_t *s = malloc(sizeof *s), *t = malloc(sizeof *t);
  char err[512] = "", *txt = NULL;
  size_t len = 0;
  PDT_TRUE(s && t);
  if (!s || !t) goto out;
  PDT_EQ_INT(pd_scenario_load(s, SCN "sf-prefill-params-invalid.json", err, sizeof err), 0);
  PDT_EQ_INT(s->expect[PD_MODE_REFERENCE].limit_mask, 1u << 17 | 1u << 19); /* I18, I20 */
  PDT_EQ_INT(s->expect[PD_MODE_MOONCAKE_PROXY].limit_mask, 0); /* a plain list there */
  PDT_EQ_INT(pd_scenario_write_json(s, &txt, &len), 0);
  PDT_TRUE(txt && strstr(txt, "\"deployment_limit\": [") != NULL);
  PDT_EQ_INT(txt ? write_file("limit-rt.json", txt) : -1, 0);
  PDT_EQ_INT(pd_scenario_load(t, file("limit-rt.json"), err, sizeof err), 0);
  for (int m = 0; m < PD_MODE_COUNT; m++) {
    PDT_EQ_INT(t->expect[m].violated_mask, s->expect[m].violated_mask);
    PDT_EQ_INT(t->expect[m].limit_mask, s->expect[m].limit_mask);
    PDT_EQ_STR(t->expect[m].limit_why, s->expect[m].limit_why);
  }
out:
  free(txt);
  free(s);
  free(t);
}

/* Every line of the matrix fits 100 columns, the legend names every mode. */
static void test_matrix_fits_100_columns(void) {
  const char *args[] = {"sim", "run", GOOD, SCN "sf-happy-path-stream.json", I3_ROW,
                        "--only-unexpected", NULL};
  run_t *r = pdref(args, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 0);
  PDT_HAS(r->out, "matrix:");
  PDT_HAS(r->out, "v vllm-toy-proxy");
  PDT_HAS(r->out, "l llmd-sidecar");
  for (const char *l = r->out; *l; l = strchr(l, '\n') + 1) {
    PDT_TRUE(strcspn(l, "\n") <= 100);
    if (!strchr(l, '\n')) break;
  }
}

/* ---------- --json rows ---------- */

static const cJSON *row_of(const cJSON *doc, const char *mode) {
  const cJSON *row;
  cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(doc, "rows")) {
    const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "mode"));
    if (m && strcmp(m, mode) == 0) return row;
  }
  return NULL;
}

/* Run a row's replay command (its words, the first the built pdref's path, as the tests run
 * it) with --json: its row. */
static cJSON *replay(const char *cmd) {
  static char buf[PATH_MAX + 1024];
  char bin[PATH_MAX + 8];
  const char *args[24];
  int n = 0;
  snprintf(buf, sizeof buf, "%s", cmd);
  char *save = NULL, *w = strtok_r(buf, " ", &save);
  if (!w || pdt_pdref_path(bin, sizeof bin) != 0 || strcmp(w, bin) != 0) return NULL;
  static char trace[PATH_MAX];
  while ((w = strtok_r(NULL, " ", &save)) && n < 20) {
    int is_trace = n > 0 && strcmp(args[n - 1], "--trace") == 0;
    if (is_trace) snprintf(trace, sizeof trace, "%s/%s", g_dir, w); /* not into the cwd */
    args[n++] = is_trace ? trace : w;
  }
  args[n++] = "--json";
  args[n] = NULL;
  run_t *r = pdref(args, 1);
  return r && r->code == 0 ? cJSON_Parse(r->out) : NULL;
}

static void test_json_rows_arrays_seed_replay(void) {
  PDT_EQ_INT(make_files(), 0);
  const char *args[] = {"sim", "run", I3_ROW, file("some.json"), "--json", NULL};
  run_t *r = pdref(args, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 0);
  cJSON *doc = cJSON_Parse(r->out);
  PDT_TRUE(doc != NULL);
  const cJSON *joined = row_of(doc, "joined"), *pr = row_of(doc, "pr1150");
  const char *const i3[] = {"I3"}, *const name[] = {"stranded-slot"};
  PDT_TRUE(joined && pr);
  if (!joined || !pr) {
    cJSON_Delete(doc);
    return;
  }
  PDT_TRUE(is_list(joined, "violated", i3, 1));
  PDT_TRUE(is_list(joined, "violated_names", name, 1));
  PDT_TRUE(is_list(joined, "expected", i3, 1));
  PDT_TRUE(is_list(pr, "violated", NULL, 0) && is_list(pr, "expected", NULL, 0));
  const cJSON *seed = cJSON_GetObjectItemCaseSensitive(joined, "seed");
  PDT_TRUE(cJSON_IsNumber(seed) && seed->valuedouble == 1);
  char want[PATH_MAX + 512], bin[PATH_MAX + 8];
  PDT_EQ_INT(pdt_pdref_path(bin, sizeof bin), 0);
  snprintf(want, sizeof want,
           "%s sim run %s --mode joined --seed 1 --trace "
           "abort-overtakes-late-prefill-request-joined.trace.json",
           bin, I3_ROW);
  PDT_EQ_STR(str(joined, "replay"), want);
  cJSON *again = replay(str(joined, "replay")); /* the same row again */
  const cJSON *one = again ? row_of(again, "joined") : NULL;
  PDT_TRUE(one && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(again, "rows")) == 1);
  if (one) PDT_EQ_STR(str(one, "trace_hash"), str(joined, "trace_hash"));
  if (one) PDT_TRUE(is_list(one, "violated", i3, 1));
  cJSON_Delete(again);
  /* a mode the scenario sets no expectation for is skipped, saying so (before: run, unjudged,
     and counted "as expected"); one it does: [] */
  int n_skipped = 0, n_some = 0;
  const cJSON *row;
  cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(doc, "rows")) {
    if (strcmp(str(row, "scenario"), "some") != 0) continue;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(row, "expected");
    n_skipped += strcmp(str(row, "status"), "skipped") == 0 &&
                 strstr(str(row, "reason"), "no entry for this mode") != NULL;
    n_some += cJSON_IsArray(e) && strcmp(str(row, "mode"), "joined") == 0;
  }
  PDT_EQ_INT(n_skipped, 3);
  PDT_EQ_INT(n_some, 1);
  cJSON_Delete(doc);
}

/* explore's findings and violating seeds, sim bench: arrays, a seed, a replay command. */
static void test_explore_and_bench_json(void) {
  char out[96], bin[PATH_MAX + 8], want[PATH_MAX + 160];
  PDT_EQ_INT(make_files(), 0);
  PDT_EQ_INT(pdt_pdref_path(bin, sizeof bin), 0);
  snprintf(out, sizeof out, "%s/explore", g_dir);
  const char *ex[] = {"sim", "explore", "--mode", "pr1150", "--seeds", "8", "--out", out,
                      "--json", NULL};
  run_t *r = pdref(ex, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 1); /* pr1150 violates at seed 1 */
  cJSON *doc = cJSON_Parse(r->out);
  const cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "findings"), 0);
  const cJSON *v = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "violating"), 0);
  const char *const i10[] = {"I10"}, *const lt[] = {"load-truth"};
  PDT_TRUE(f && is_list(f, "violated", i10, 1) && is_list(f, "violated_names", lt, 1));
  PDT_TRUE(f && is_list(f, "shrunk_violated", i10, 1));
  PDT_TRUE(v && is_list(v, "violated", i10, 1) && is_list(v, "violated_names", lt, 1));
  snprintf(want, sizeof want, "%s sim explore --mode pr1150 --seed-start 1 --seeds 1 --ties 2", bin);
  PDT_EQ_STR(v ? str(v, "replay") : "", want);
  cJSON_Delete(doc);
  const char *bench[] = {"sim", "bench", "--requests", "50", "--json", NULL};
  r = pdref(bench, 1);
  PDT_EQ_INT(r->code, 0);
  doc = cJSON_Parse(r->out);
  PDT_TRUE(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(doc, "seed")));
  snprintf(want, sizeof want, "%s sim bench --requests 50 --mode reference", bin);
  PDT_EQ_STR(str(doc, "replay") ? str(doc, "replay") : "", want);
  cJSON_Delete(doc);
}

/* A finding whose case first violates another invariant than the one it was shrunk for says
 * so above the reason it prints (joined, seed 5: shrunk for I1, first violation I4). Before,
 * the I4 reason read as I1's. */
static void test_explore_names_the_invariant_of_the_reason_it_prints(void) {
  char out[96];
  PDT_EQ_INT(make_files(), 0);
  snprintf(out, sizeof out, "%s/explore5", g_dir);
  const char *ex[] = {"sim", "explore", "--mode", "joined", "--seed-start", "5", "--seeds", "1",
                      "--out", out, NULL};
  run_t *r = pdref(ex, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 1);
  PDT_HAS(r->out, "shrunk for I1 (termination)");
  PDT_HAS(r->out, "    first violation of the case is I4, not I1 (shrunk for):\n    I4 outcome: ");
}

/* A directory with more .json files than sim run takes (4096) is an error naming it, exit 2,
 * never a silent cut (a file left out is a row not run). Before: the first 4096 ran. */
static void test_a_directory_past_the_file_limit_is_an_error(void) {
  PDT_EQ_INT(make_files(), 0);
  char dir[160];
  snprintf(dir, sizeof dir, "%s/many", g_dir);
  PDT_EQ_INT(mkdir(dir, 0700), 0);
  int ok = 1;
  for (int i = 0; i < 4097 && ok; i++) {
    char name[64];
    snprintf(name, sizeof name, "many/f%04d.json", i);
    ok = write_file(name, "{}\n") == 0;
  }
  PDT_TRUE(ok);
  const char *args[] = {"sim", "run", dir, "--quiet", NULL};
  run_t *r = pdref(args, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 2);
  PDT_HAS(r->err, "more than 4096 .json files (the limit)");
}

/* row's "violated" is an array of IDs and "violated_names" their names, one each. */
static int names_match(const cJSON *row) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, "violated");
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(row, "violated_names");
  if (!cJSON_IsArray(v) || !cJSON_IsArray(n) || cJSON_GetArraySize(v) != cJSON_GetArraySize(n))
    return 0;
  for (int i = 0; i < cJSON_GetArraySize(v); i++) {
    int inv = pd_invariant_parse(cJSON_GetStringValue(cJSON_GetArrayItem(v, i)));
    const char *name = cJSON_GetStringValue(cJSON_GetArrayItem(n, i));
    if (!inv || !name || strcmp(name, pd_invariant_name(inv)) != 0) return 0;
  }
  return 1;
}

/* conform: the same row shape (arrays, seed, replay) and the same error row. */
static void test_conform_json_arrays_and_error_row(void) {
  char bin[PATH_MAX + 8], cmd[PATH_MAX + 160], bad[160];
  if (pdt_pdref_path(bin, sizeof bin) != 0) return;
  PDT_EQ_INT(make_files(), 0);
  snprintf(cmd, sizeof cmd, "%s gateway --mode joined {prefill_args} {decode_args} --listen "
           "127.0.0.1:{port} {pdref_gateway_args}", bin);
  snprintf(bad, sizeof bad, "%s:3: $.bogus: unknown key", file("bad.json"));
  const char *args[] = {"conform", "--json", "--mode-label", "joined", "--timeout-scale", "0.05",
                        "--no-warm-up", "--gateway-cmd", cmd, file("bad.json"), I3_ROW, NULL};
  run_t *r = pdref(args, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 2); /* the error row */
  cJSON *doc = cJSON_Parse(r->out);
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "rows");
  const cJSON *e = cJSON_GetArrayItem(rows, 0), *row = cJSON_GetArrayItem(rows, 1);
  PDT_EQ_INT(cJSON_GetArraySize(rows), 2);
  PDT_TRUE(e && strcmp(str(e, "status"), "error") == 0 && strcmp(str(e, "error"), bad) == 0);
  const char *const i3[] = {"I3"};
  PDT_TRUE(row && names_match(row)); /* the verdict itself is socket timing: conform's tests */
  PDT_TRUE(row && is_list(row, "expected", i3, 1));
  PDT_TRUE(row && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(row, "judged")));
  PDT_TRUE(row && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(row, "seed")));
  const char *rp = row ? str(row, "replay") : NULL;
  char head[PATH_MAX + 64];
  snprintf(head, sizeof head, "%s conform --gateway-cmd '", bin);
  PDT_TRUE(rp && strncmp(rp, head, strlen(head)) == 0 && strstr(rp, I3_ROW));
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, "errors");
  PDT_TRUE(cJSON_IsNumber(n) && n->valueint == 1);
  /* the text table prints the same command under the row */
  char line[PATH_MAX + 600];
  snprintf(line, sizeof line, "    replay: %s\n", rp ? rp : "");
  cJSON_Delete(doc);
  const char *text[] = {"conform", "--mode-label", "joined", "--timeout-scale", "0.05",
                        "--no-warm-up", "--gateway-cmd", cmd, I3_ROW, NULL};
  r = pdref(text, 1);
  PDT_HAS(r->out, line);
}

/* ---------- replay commands: the program as the user ran it ---------- */

static run_t *pdref_as(const char *argv0, const char *const *args) {
  static run_t r;
  memset(&r, 0, sizeof r);
  if (pdt_cli_run_as(&r, "pdref", argv0, args, 1) != 0) {
    fprintf(stderr, "test_cli_out: pdref not built next to the tests, binary test skipped\n");
    return NULL;
  }
  return &r;
}

/* argv[0] begins every replay command, text and JSON alike: "pdref" as a shell passes a name
 * it found on PATH (after make install: no build/pdref, which is not there), "build/pdref"
 * as typed in the source tree, a path with a space quoted for the shell. */
static void test_replay_names_the_program_as_run(void) {
  const char *const as[] = {"pdref", "build/pdref", "/opt/my tools/pdref"};
  const char *const head[] = {"pdref", "build/pdref", "'/opt/my tools/pdref'"};
  char want[PATH_MAX + 256], out[96];
  PDT_EQ_INT(make_files(), 0);
  for (size_t i = 0; i < sizeof as / sizeof as[0]; i++) {
    const char *text[] = {"sim", "run", I3_ROW, "--mode", "joined", NULL};
    run_t *r = pdref_as(as[i], text);
    if (!r) return;
    PDT_EQ_INT(r->code, 0);
    snprintf(want, sizeof want,
             "    replay: %s sim run %s --mode joined --seed 1 --trace "
             "abort-overtakes-late-prefill-request-joined.trace.json\n",
             head[i], I3_ROW);
    PDT_HAS(r->out, want);
    if (i == 0) PDT_TRUE(strstr(r->out, "build/pdref") == NULL);
    const char *json[] = {"sim", "run", I3_ROW, "--mode", "joined", "--json", NULL};
    r = pdref_as(as[i], json);
    cJSON *doc = cJSON_Parse(r->out);
    const cJSON *row = row_of(doc, "joined");
    /* the JSON row's command is the text line's, word for word */
    char line[PATH_MAX + 256];
    snprintf(line, sizeof line, "    replay: %s\n", row && str(row, "replay") ? str(row, "replay") : "");
    PDT_EQ_STR(line, want);
    cJSON_Delete(doc);
  }
  snprintf(out, sizeof out, "%s/explore-as", g_dir);
  const char *ex[] = {"sim", "explore", "--mode", "pr1150", "--seeds", "1", "--out", out, NULL};
  run_t *r = pdref_as("pdref", ex);
  PDT_EQ_INT(r->code, 1); /* pr1150 violates at seed 1 */
  snprintf(want, sizeof want, "    replay: pdref sim run %s/", out);
  PDT_HAS(r->out, want);
  PDT_TRUE(strstr(r->out, "build/pdref") == NULL);
  char tmpl[96]; /* sim new's hint too */
  snprintf(tmpl, sizeof tmpl, "%s/as-new.json", g_dir);
  const char *nw[] = {"sim", "new", "as-new", "--out", tmpl, NULL};
  r = pdref_as("build/pdref", nw);
  PDT_EQ_INT(r->code, 0);
  snprintf(want, sizeof want, "replay it with: build/pdref sim run %s --mode all", tmpl);
  PDT_HAS(r->err, want);
}

/* ---------- a file that does not load ---------- */

static void test_error_row_among_good_files(void) {
  PDT_EQ_INT(make_files(), 0);
  char bad[160], deep[160];
  snprintf(bad, sizeof bad, "%s:3: $.bogus: unknown key", file("bad.json"));
  snprintf(deep, sizeof deep, "%s:7: $.workers[1].bogus: unknown key", file("deep.json"));
  const char *text[] = {"sim", "run", GOOD, file("bad.json"), I3_ROW, file("deep.json"), NULL};
  run_t *r = pdref(text, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 2);
  PDT_EQ_INT(count_lines(r->out, "batch-chat-n2 "), 5); /* 4 rows and the matrix line */
  PDT_EQ_INT(count_lines(r->out, "abort-overtakes-late-prefill-request "), 4);
  PDT_HAS(r->out, "bad.json                                       -              error            -\n");
  PDT_HAS(r->out, bad);
  PDT_HAS(r->out, deep);
  PDT_HAS(r->out, "sim: 8 as expected, 0 deployment limit, 0 UNEXPECTED, 0 not exercised, 0 skipped, 2 errors\n");
  PDT_HAS(r->err, bad);
  const char *json[] = {"sim", "run", GOOD, file("bad.json"), I3_ROW, "--json", NULL};
  r = pdref(json, 1);
  PDT_EQ_INT(r->code, 2);
  cJSON *doc = cJSON_Parse(r->out);
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "rows"), *row;
  PDT_EQ_INT(cJSON_GetArraySize(rows), 9);
  int errors = 0, good = 0;
  cJSON_ArrayForEach(row, rows) {
    const char *st = str(row, "status");
    if (st && strcmp(st, "error") == 0) {
      errors++;
      PDT_EQ_STR(str(row, "file"), file("bad.json"));
      PDT_EQ_STR(str(row, "error"), bad);
    } else {
      good += st && strcmp(st, "as expected") == 0;
    }
  }
  PDT_EQ_INT(errors, 1);
  PDT_EQ_INT(good, 8);
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, "errors");
  PDT_TRUE(cJSON_IsNumber(n) && n->valueint == 1);
  cJSON_Delete(doc);
}

/* --json-out: the table on stdout as usual (filtered by --only-unexpected), and in the file
 * every row, the error row among them; a file that cannot be written is exit 2. */
static void test_json_out_beside_the_table(void) {
  PDT_EQ_INT(make_files(), 0);
  char out[128];
  snprintf(out, sizeof out, "%s/rows.json", g_dir);
  const char *args[] = {"sim", "run", GOOD, file("wrong.json"), file("bad.json"),
                        "--only-unexpected", "--json-out", out, NULL};
  run_t *r = pdref(args, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 2);
  PDT_HAS(r->out, "sim: 7 as expected, 0 deployment limit, 1 UNEXPECTED, 0 not exercised, 0 skipped, 1 error\n");
  PDT_TRUE(strstr(r->out, "as expected      pass") == NULL);
  FILE *f = fopen(out, "r");
  PDT_TRUE(f != NULL);
  if (!f) return;
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  cJSON *doc = cJSON_Parse(text);
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "rows"), *row;
  PDT_EQ_INT(cJSON_GetArraySize(rows), 9); /* 8 rows, none filtered out, and the error row */
  int as_expected = 0, errors = 0;
  cJSON_ArrayForEach(row, rows) {
    const char *st = str(row, "status");
    as_expected += st && strcmp(st, "as expected") == 0;
    errors += st && strcmp(st, "error") == 0;
  }
  PDT_EQ_INT(as_expected, 7);
  PDT_EQ_INT(errors, 1);
  cJSON_Delete(doc);
  const char *nowhere[] = {"sim", "run", GOOD, "--quiet", "--json-out", "/nonexistent/x.json", NULL};
  r = pdref(nowhere, 1);
  PDT_EQ_INT(r->code, 2);
  PDT_HAS(r->err, "/nonexistent/x.json: cannot write --json-out");
}

/* --fail-fast (make mutate's stage 1): the run stops after the first row not as expected or
 * the first error row; the rows before it are kept, the files after it never run. */
static int json_rows(const char *out) {
  cJSON *doc = cJSON_Parse(out);
  int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "rows"));
  cJSON_Delete(doc);
  return n;
}

static void test_fail_fast(void) {
  PDT_EQ_INT(make_files(), 0);
  const char *first[] = {"sim", "run", file("wrong.json"), GOOD, "--fail-fast", "--json", NULL};
  run_t *r = pdref(first, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 1);
  PDT_EQ_INT(json_rows(r->out), 1); /* joined, UNEXPECTED; GOOD never ran */
  const char *later[] = {"sim", "run", GOOD, file("wrong.json"), "--fail-fast", "--json", NULL};
  r = pdref(later, 1);
  PDT_EQ_INT(r->code, 1);
  PDT_EQ_INT(json_rows(r->out), 5); /* GOOD's 4 rows, then wrong.json's first */
  const char *bad[] = {"sim", "run", file("bad.json"), GOOD, "--fail-fast", "--json", NULL};
  r = pdref(bad, 1);
  PDT_EQ_INT(r->code, 2);
  PDT_EQ_INT(json_rows(r->out), 1); /* the error row */
  const char *good[] = {"sim", "run", GOOD, "--fail-fast", "--json", NULL};
  r = pdref(good, 1);
  PDT_EQ_INT(r->code, 0);
  PDT_EQ_INT(json_rows(r->out), 4);
}

/* ---------- --listen and the ready lines ---------- */

/* Whether the name localhost resolves here (a minimal root may have no /etc/hosts): else
 * the checks that listen on it are skipped, saying so (CUnit has no skip). */
static int localhost_resolves(void) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  int rc = getaddrinfo("localhost", NULL, &hints, &ai);
  if (ai) freeaddrinfo(ai);
  if (rc != 0)
    fprintf(stderr, "test_cli_out: skipped: localhost does not resolve (%s)\n", gai_strerror(rc));
  return rc == 0;
}

static void test_listen_parsing(void) {
  char host[64];
  uint16_t port = 0;
  if (localhost_resolves()) {
    PDT_EQ_INT(pd_cli_parse_listen("t", "--listen", "localhost:8000", host, sizeof host, &port), 0);
    PDT_TRUE(strcmp(host, "127.0.0.1") == 0 || strcmp(host, "::1") == 0);
    PDT_EQ_INT(port, 8000);
  }
  PDT_EQ_INT(pd_cli_parse_listen("t", "--listen", "[::1]:8001", host, sizeof host, &port), 0);
  PDT_EQ_STR(host, "::1");
  PDT_EQ_INT(port, 8001);
  PDT_EQ_INT(pd_cli_parse_listen("t", "--listen", "127.0.0.2:0", host, sizeof host, &port), 0);
  PDT_EQ_STR(host, "127.0.0.2");
  const char *bad[] = {"[zz::1]:80", "[127.0.0.1]:80", "localhost", "[::1]:65536", ":80", "[::1]"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    PDT_EQ_INT(pd_cli_parse_listen("t", "--listen", bad[i], host, sizeof host, &port), PD_ERR_INVAL);
  /* the binaries: exit 2 naming the value */
  const char *gw[] = {"gateway", "--prefill", "http://127.0.0.1:1", "--decode",
                      "http://127.0.0.1:2", "--listen", "[zz::1]:0", NULL};
  run_t *r = pdref(gw, 1);
  if (!r) return;
  PDT_EQ_INT(r->code, 2);
  PDT_HAS(r->err, "pdref gateway: --listen: '[zz::1]:0'");
  const char *mock[] = {"mock", "--role", "decode", "--listen", "[::1]:99999", NULL};
  r = pdref(mock, 1);
  PDT_EQ_INT(r->code, 2);
  PDT_HAS(r->err, "pdref mock: --listen:");
  PDT_HAS(r->err, "'[::1]:99999'");
}

static size_t discard(char *p, size_t sz, size_t n, void *ud) {
  (void)p;
  (void)ud;
  return sz * n;
}

/* GET url/health: the status, or 0. */
static long get_health(const char *url) {
  char u[160];
  long code = 0;
  snprintf(u, sizeof u, "%s/health", url);
  CURL *c = curl_easy_init();
  if (!c) return 0;
  curl_easy_setopt(c, CURLOPT_URL, u);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(c);
  return code;
}

/* Start `pdref ARGS --json` and check its ready line's head: ready, pid (the child's),
 * host, port, listen and url that answers GET /health. The pid (the caller stops it), or -1. */
static pid_t start_ready(const char *const *args, const char *host, char *url, size_t cap) {
  char bin[PATH_MAX + 8], line[1024] = "", *argv[24];
  int n = 0;
  if (pdt_pdref_path(bin, sizeof bin) != 0) return -1;
  argv[n++] = bin;
  for (; args[n - 1] && n < 22; n++) argv[n] = (char *)args[n - 1];
  argv[n++] = "--json";
  argv[n] = NULL;
  pid_t pid = pdt_spawn(argv, line, sizeof line, 10000);
  PDT_TRUE(pid > 0);
  cJSON *j = pid > 0 ? cJSON_Parse(line) : NULL;
  const cJSON *port = cJSON_GetObjectItemCaseSensitive(j, "port");
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "pid");
  PDT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ready")));
  PDT_TRUE(cJSON_IsNumber(p) && (pid_t)p->valuedouble == pid);
  PDT_TRUE(cJSON_IsNumber(port) && port->valueint > 0);
  char listen[96] = "", want_url[112];
  if (cJSON_IsNumber(port))
    snprintf(listen, sizeof listen, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port->valueint);
  snprintf(want_url, sizeof want_url, "http://%s", listen);
  PDT_EQ_STR(str(j, "host") ? str(j, "host") : "", host);
  PDT_EQ_STR(str(j, "listen") ? str(j, "listen") : "", listen);
  PDT_EQ_STR(str(j, "url") ? str(j, "url") : "", want_url);
  snprintf(url, cap, "%s", want_url);
  if (pid > 0) PDT_EQ_INT(get_health(want_url), 200);
  cJSON_Delete(j);
  return pid;
}

static void stop(pid_t pid) {
  int status = 0;
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  PDT_EQ_INT(pdt_reap(pid, 10000, &status), 0);
}

/* A mock and a gateway in front of it on host, each named by name (localhost) or address. */
static void ready_pair(const char *listen, const char *host) {
  char d_url[128], g_url[128], dec[140];
  const char *mock[] = {"mock", "--role", "decode", "--direct", "--listen", listen, NULL};
  pid_t d = start_ready(mock, host, d_url, sizeof d_url);
  snprintf(dec, sizeof dec, "%s", d_url);
  const char *gw[] = {"gateway", "--prefill", "http://127.0.0.1:1", "--decode", dec,
                      "--listen", listen, NULL};
  pid_t g = d > 0 ? start_ready(gw, host, g_url, sizeof g_url) : -1;
  stop(g);
  stop(d);
}

/* Whether this machine can listen on ::1 (else the IPv6 half is skipped, saying why). */
static int has_ipv6_loopback(char *why, size_t cap) {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (!ok) snprintf(why, cap, "%s", strerror(errno));
  if (fd >= 0) close(fd);
  return ok;
}

static void test_ready_lines_and_listen_names(void) {
  char bin[PATH_MAX + 8], why[128];
  if (pdt_pdref_path(bin, sizeof bin) != 0) {
    fprintf(stderr, "test_cli_out: pdref not built next to the tests, binary test skipped\n");
    return;
  }
  ready_pair("127.0.0.1:0", "127.0.0.1");
  if (localhost_resolves()) ready_pair("localhost:0", "127.0.0.1"); /* a name: its IPv4 one */
  if (has_ipv6_loopback(why, sizeof why)) ready_pair("[::1]:0", "::1");
  else fprintf(stderr, "test_cli_out: skipped the [::1] listeners: no IPv6 loopback (%s)\n", why);
}

int pdt_suite_cli_out(void) {
  static const pdt_case_t cases[] = {
      {"invariant names: text, reasons, arrays", test_invariant_names},
      {"sim run --only-unexpected and --quiet", test_only_unexpected_and_quiet},
      {"sim run: a run that tests nothing (every file skipped) exits 1", test_a_run_that_tests_nothing_exits_1},
      {"sim run: a deployment limit has its own word, held to its exact set", test_deployment_limit_word},
      {"sim run: a row whose fault never fired is not exercised, not UNEXPECTED", test_not_exercised_word},
      {"sim run: a directory past the file limit is an error, not a silent cut",
       test_a_directory_past_the_file_limit_is_an_error},
      {"sim explore: a finding names the invariant of the reason it prints",
       test_explore_names_the_invariant_of_the_reason_it_prints},
      {"a deployment limit round-trips through the scenario writer", test_deployment_limit_round_trips},
      {"sim run matrix fits 100 columns", test_matrix_fits_100_columns},
      {"sim run --json: arrays, names, seed, a replay that replays", test_json_rows_arrays_seed_replay},
      {"sim run: a bad file is an error row among good rows", test_error_row_among_good_files},
      {"sim run --json-out: every row in the file beside the table", test_json_out_beside_the_table},
      {"sim run --fail-fast: stops at the first row not as expected", test_fail_fast},
      {"explore and sim bench --json: arrays, seed, replay", test_explore_and_bench_json},
      {"conform --json: arrays, seed, replay, an error row", test_conform_json_arrays_and_error_row},
      {"replay commands begin with the program as run (pdref, build/pdref, quoted)",
       test_replay_names_the_program_as_run},
      {"--listen: names, [IPv6], bad values exit 2", test_listen_parsing},
      {"ready lines: ready, pid, host, port, listen, url (v4, name, v6)",
       test_ready_lines_and_listen_names},
  };
  return PDT_SUITE("cli_out", cases);
}
