/* The requirement index of docs/pd-gateway-behaviour.md (cli/conform_level.c), `pdref conform
 * --level` against pdref's own gateway and against its joined model over real sockets
 * (processes started and stopped by conform, every run bounded by pdt_cli), and the
 * requirement matrix of `pdref report --requirements`. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_rows.h"
#include "conform_level.h"
#include "pdt.h"
#include "pdt_cli.h"

#define BIT(i) (1u << ((i) - 1))

/* A small document of the same shape: level "mini" with two rows, one requirement only the
 * simulator can judge (I12), and level "more" with a pending requirement. */
static const char k_doc[] =
    "# test requirements\n"
    "### PDG-T-SERVE-1 — served\n"
    "### PDG-T-CANCEL-1 — nothing left behind\n"
    "### PDG-T-EJECT-1 — breakers\n"
    "### PDG-T-LATER-1 — later (pending issue 25)\n"
    "## 9. Index\n"
    "### 9.1 Requirements\n"
    "| ID | keyword | level | invariants | rows |\n"
    "|---|---|---|---|---|\n"
    "| PDG-T-SERVE-1 | MUST | mini | I5, I15 | happy-path-stream |\n"
    "| PDG-T-CANCEL-1 | MUST | mini | I2, I3 | `decode-503-while-prefill-detached` |\n"
    "| PDG-T-EJECT-1 | SHOULD | mini | I12 | happy-path-stream |\n"
    "| PDG-T-LATER-1 | SHOULD | more | I1 | pending issue 25 |\n"
    "### 9.2 Levels\n"
    "| level | builds on | claim |\n"
    "|---|---|---|\n"
    "| mini | - | two rows |\n"
    "| more | mini | and one pending |\n";

static char g_dir[64];

static void drop_dir(void) {
  const char *names[] = {"doc.md", "level.json", "plain.json", "sim.json", NULL};
  char p[128];
  for (int i = 0; names[i]; i++) {
    snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
    remove(p);
  }
  rmdir(g_dir);
}

static const char *path_of(const char *name) {
  static char paths[4][128];
  static int k;
  char *p = paths[k++ % 4];
  snprintf(p, sizeof paths[0], "%s/%s", g_dir, name);
  return p;
}

static int write_text(const char *name, const char *text) {
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "/tmp/pdref_level_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    atexit(drop_dir);
  }
  FILE *f = fopen(path_of(name), "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

static int find(const pd_reqdoc_t *d, const char *id) {
  for (int i = 0; i < d->n_req; i++)
    if (!strcmp(d->req[i].id, id)) return i;
  return -1;
}

static void test_the_built_in_index_is_the_documents(void) {
  static pd_reqdoc_t d, disk;
  char err[600], path[512];
  PDT_EQ_INT(pd_reqdoc_load(&d, NULL, err, sizeof err), 0);
  snprintf(path, sizeof path, "%s/docs/pd-gateway-behaviour.md", PD_SOURCE_DIR);
  PDT_EQ_INT(pd_reqdoc_load(&disk, path, err, sizeof err), 0);
  PDT_EQ_INT(d.n_req, disk.n_req); /* the binary carries the document as it is */
  for (int i = 0; i < d.n_req && i < disk.n_req; i++) PDT_EQ_STR(d.req[i].id, disk.req[i].id);
  int core = pd_reqdoc_level(&d, "core"), cancel = pd_reqdoc_level(&d, "cancel"),
      adm = pd_reqdoc_level(&d, "admission");
  PDT_TRUE(core >= 0 && cancel >= 0 && adm >= 0);
  int c1 = find(&d, "PDG-CANCEL-1"), m1 = find(&d, "PDG-COMMIT-1"), a1 = find(&d, "PDG-ADMIT-1"),
      r1 = find(&d, "PDG-REPRO-1");
  PDT_TRUE(c1 >= 0 && m1 >= 0 && a1 >= 0 && r1 >= 0);
  if (c1 < 0 || m1 < 0 || a1 < 0 || r1 < 0 || core < 0 || cancel < 0 || adm < 0) return;
  PDT_EQ_U64(d.req[c1].inv, BIT(2) | BIT(3) | BIT(18));
  PDT_EQ_STR(d.req[c1].rows[0], "decode-503-while-prefill-detached");
  PDT_TRUE(pd_reqdoc_in_level(&d, m1, cancel) && pd_reqdoc_in_level(&d, m1, adm)); /* cumulative */
  PDT_FALSE(pd_reqdoc_in_level(&d, c1, core));
  PDT_TRUE(!d.req[a1].pending[0] && d.req[a1].n_rows > 0); /* issue 25 gave it rows */
  for (int l = 0; l < d.n_lvl; l++) PDT_FALSE(pd_reqdoc_in_level(&d, r1, l)); /* a MAY in none */
}

static void test_a_bad_index_is_refused_naming_where(void) {
  static pd_reqdoc_t d;
  char err[600], text[sizeof k_doc + 64];
  PDT_EQ_INT(pd_reqdoc_parse(&d, k_doc, strlen(k_doc), "t.md", err, sizeof err), 0);
  PDT_EQ_INT(d.n_req, 4);
  PDT_EQ_INT(d.n_lvl, 2);
  snprintf(text, sizeof text, "%s", k_doc);
  char *at = strstr(text, "I5, I15");
  memcpy(at, "I5, I99", 7);
  PDT_EQ_INT(pd_reqdoc_parse(&d, text, strlen(text), "t.md", err, sizeof err), -1);
  PDT_HAS(err, "t.md:10: PDG-T-SERVE-1: invariants 'I5, I99'");
  snprintf(text, sizeof text, "%s", k_doc);
  memcpy(strstr(text, "| more | mini |"), "| more | mino |", 15);
  PDT_EQ_INT(pd_reqdoc_parse(&d, text, strlen(text), "t.md", err, sizeof err), -1);
  PDT_HAS(err, "level more: builds on 'mino', which is no level");
  snprintf(text, sizeof text, "%s", k_doc);
  memcpy(strstr(text, "| SHOULD | more |"), "| SHOULD | mare |", 17);
  PDT_EQ_INT(pd_reqdoc_parse(&d, text, strlen(text), "t.md", err, sizeof err), -1);
  PDT_HAS(err, "PDG-T-LATER-1: no level 'mare'");
}

static pd_req_verdict_t eval(const pd_req_t *r, const pd_req_row_t *rows, size_t n, char *why) {
  pd_req_result_t res;
  pd_req_eval(r, rows, n, &res);
  if (why) snprintf(why, 256, "%.250s", res.note);
  return res.v;
}

static void test_a_requirement_is_met_only_on_rows_that_tested_it(void) {
  pd_req_t r = {.id = "PDG-X", .keyword = "MUST", .level = "core", .inv = BIT(2) | BIT(3),
                .n_rows = 2, .rows = {"a-b-c", "d-e-f"}};
  const uint32_t all = (1u << PD_INVARIANT_COUNT) - 1u;
  pd_req_row_t ok[2] = {{"a-b-c", PD_CLI_AS_EXPECTED, 1, 0, all, 0},
                        {"d-e-f", PD_CLI_AS_EXPECTED, 1, BIT(1), all, 0}};
  char why[256];
  PDT_EQ_INT(eval(&r, ok, 2, NULL), PD_REQ_MET); /* I1 is another requirement's */
  ok[1].got = BIT(3) | BIT(1);
  PDT_EQ_INT(eval(&r, ok, 2, why), PD_REQ_NOT_MET);
  PDT_HAS(why, "d-e-f I3");
  ok[1].allowed = BIT(3); /* what the reference itself shows there (a deployment limit) */
  PDT_EQ_INT(eval(&r, ok, 2, NULL), PD_REQ_MET);
  ok[1].exercised = 0; /* a row that tested nothing proves nothing, even with a violation */
  ok[1].got = BIT(2);
  PDT_EQ_INT(eval(&r, ok, 2, why), PD_REQ_NX);
  PDT_HAS(why, "d-e-f not exercised");
  ok[1].exercised = 1;
  ok[1].judged = all & ~(BIT(2) | BIT(3)); /* the sockets could not judge them there */
  PDT_EQ_INT(eval(&r, ok, 2, why), PD_REQ_NX);
  PDT_HAS(why, "not judged");
  PDT_EQ_INT(eval(&r, ok, 1, why), PD_REQ_NX); /* d-e-f never ran */
  PDT_HAS(why, "d-e-f not run");
  ok[1].judged = all;
  ok[1].status = PD_CLI_SKIPPED; /* another protocol: the other row decides */
  PDT_EQ_INT(eval(&r, ok, 2, NULL), PD_REQ_MET);
  ok[0].status = PD_CLI_SKIPPED;
  PDT_EQ_INT(eval(&r, ok, 2, why), PD_REQ_NX);
  PDT_HAS(why, "every row skipped");
  ok[0].status = PD_CLI_ERROR;
  PDT_EQ_INT(eval(&r, ok, 2, NULL), PD_REQ_NX);
  pd_req_t p = {.id = "PDG-P", .keyword = "SHOULD", .inv = BIT(1), .pending = "pending issue 25"};
  PDT_EQ_INT(eval(&p, ok, 2, why), PD_REQ_NX);
  PDT_HAS(why, "pending issue 25");
}

static void test_a_level_with_a_pending_requirement_is_never_claimed(void) {
  static pd_reqdoc_t d;
  char err[600];
  PDT_EQ_INT(pd_reqdoc_parse(&d, k_doc, strlen(k_doc), "t.md", err, sizeof err), 0);
  pd_req_verdict_t v[4] = {PD_REQ_MET, PD_REQ_MET, PD_REQ_NX, PD_REQ_NX};
  PDT_TRUE(pd_reqdoc_claims(&d, 0, v, NULL)); /* a SHOULD not exercised does not decide */
  PDT_FALSE(pd_reqdoc_claims(&d, 1, v, NULL));
  v[1] = PD_REQ_NOT_MET;
  PDT_FALSE(pd_reqdoc_claims(&d, 0, v, NULL));
}

static run_t *pdref(const char *const *args) {
  static run_t r;
  memset(&r, 0, sizeof r);
  return pdt_cli_run(&r, "pdref", args, 1) == 0 ? &r : NULL;
}

static void test_list_levels_prints_the_index(void) {
  const char *args[] = {"conform", "--list-levels", "--json", NULL};
  run_t *r = pdref(args);
  if (!r) return;
  PDT_EQ_INT(r->code, 0);
  cJSON *doc = cJSON_Parse(r->out);
  const cJSON *lv = cJSON_GetObjectItemCaseSensitive(doc, "levels");
  PDT_EQ_INT(cJSON_GetArraySize(lv), 3);
  const cJSON *core = cJSON_GetArrayItem(lv, 0), *cancel = cJSON_GetArrayItem(lv, 1);
  PDT_TRUE(core && cancel &&
           cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cancel, "requirements")) >
               cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(core, "requirements")));
  cJSON_Delete(doc);
  const char *bad[] = {"conform", "--level", "gold", "--gateway-cmd", "true", NULL};
  r = pdref(bad);
  if (!r) return;
  PDT_EQ_INT(r->code, 2);
  PDT_HAS(r->err, "--level: no level 'gold' (levels: core, cancel, admission)");
}

static const cJSON *req(const cJSON *doc, const char *id) {
  const cJSON *q;
  cJSON_ArrayForEach(q, cJSON_GetObjectItemCaseSensitive(doc, "requirements")) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(q, "id");
    if (cJSON_IsString(v) && !strcmp(v->valuestring, id)) return q;
  }
  return NULL;
}

static const char *str(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : "";
}

/* conform --level mini against `pdref gateway --mode M` labelled M; the JSON parsed. */
static cJSON *run_level(const char *mode, int *code) {
  char bin[PATH_MAX + 8], cmd[PATH_MAX + 200], dir[600];
  *code = -1;
  if (pdt_pdref_path(bin, sizeof bin) != 0 || write_text("doc.md", k_doc)) return NULL;
  snprintf(cmd, sizeof cmd, "exec %s gateway --mode %s {prefill_args} {decode_args} --listen "
           "127.0.0.1:{port} {pdref_gateway_args}", bin, mode);
  snprintf(dir, sizeof dir, "%s/scenarios", PD_SOURCE_DIR);
  const char *args[] = {"conform", "--level", "mini", "--requirements-doc", path_of("doc.md"),
                        "--json", "--mode-label", mode, "--timeout-scale", "0.01", "--no-warm-up",
                        "--gateway-cmd", cmd, dir, NULL};
  run_t *r = pdref(args);
  if (!r) return NULL;
  *code = r->code;
  cJSON *doc = cJSON_Parse(r->out);
  if (!doc) fprintf(stderr, "test: no JSON:\n%s\n%s\n", r->out, r->err);
  return doc;
}

static void test_level_against_pdref_gateway_over_sockets(void) {
  int code;
  cJSON *doc = run_level("reference", &code);
  PDT_TRUE(doc != NULL);
  if (!doc) return;
  PDT_EQ_INT(code, 0);
  PDT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "rows")), 2); /* the level's */
  const cJSON *lv = cJSON_GetObjectItemCaseSensitive(doc, "level");
  PDT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lv, "claimed")));
  PDT_EQ_STR(str(req(doc, "PDG-T-SERVE-1"), "verdict"), "met");
  PDT_EQ_STR(str(req(doc, "PDG-T-CANCEL-1"), "verdict"), "met");
  /* I12 lives inside the gateway: the sockets never judge it, so never "met" */
  PDT_EQ_STR(str(req(doc, "PDG-T-EJECT-1"), "verdict"), "not exercised");
  PDT_TRUE(req(doc, "PDG-T-LATER-1") == NULL); /* level "more" only */
  char *txt = cJSON_Print(doc);
  if (txt) PDT_TRUE(write_text("level.json", txt) == 0);
  free(txt);
  cJSON_Delete(doc);
}

/* The joined model leaves the prefill of a failed attempt in bootstrap (seed finding 1): I3 on
 * decode-503-while-prefill-detached, so the cancel requirement is not met there. */
static void test_level_against_the_joined_model_finds_its_stranded_prefill(void) {
  int code;
  cJSON *doc = run_level("joined", &code);
  PDT_TRUE(doc != NULL);
  if (!doc) return;
  PDT_EQ_INT(code, 1);
  PDT_FALSE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(doc, "level"), "claimed")));
  PDT_EQ_STR(str(req(doc, "PDG-T-SERVE-1"), "verdict"), "met");
  PDT_EQ_STR(str(req(doc, "PDG-T-CANCEL-1"), "verdict"), "not met");
  PDT_HAS(str(req(doc, "PDG-T-CANCEL-1"), "why"), "decode-503-while-prefill-detached I3");
  cJSON_Delete(doc);
}

/* The matrix: a conform --level result, a plain conform result (rows only), and a sim run of
 * every mode, one column each (the sim run: one per mode). */
static void test_report_renders_the_requirement_matrix(void) {
  char a[600], b[600];
  snprintf(a, sizeof a, "%s/scenarios/happy-path-stream.json", PD_SOURCE_DIR);
  snprintf(b, sizeof b, "%s/scenarios/decode-503-while-prefill-detached.json", PD_SOURCE_DIR);
  const char *sim[] = {"sim", "run", a, b, "--mode", "all", "--json", NULL};
  run_t *r = pdref(sim);
  if (!r) return;
  PDT_EQ_INT(r->code, 0);
  PDT_EQ_INT(write_text("sim.json", r->out), 0);
  const char *level =
      "{\"command\": \"conform\", \"rows\": [{\"scenario\": \"happy-path-stream\", \"mode\": \"x\","
      " \"status\": \"as expected\"}], \"skipped\": 0, \"level\": {\"name\": \"mini\"},"
      " \"requirements\": [{\"id\": \"PDG-T-SERVE-1\", \"verdict\": \"met\", \"why\": \"\"},"
      " {\"id\": \"PDG-T-CANCEL-1\", \"verdict\": \"not met\", \"why\": \"row I3\"}]}";
  char plain[2048];
  snprintf(plain, sizeof plain,
           "{\"command\": \"conform\", \"skipped\": 0, \"rows\": ["
           "{\"scenario\": \"happy-path-stream\", \"file\": \"%s\", \"mode\": \"gateway\","
           " \"status\": \"as expected\", \"exercised\": true, \"violated\": [],"
           " \"judged\": [\"I1\", \"I2\", \"I3\", \"I5\", \"I15\"]},"
           "{\"scenario\": \"decode-503-while-prefill-detached\", \"file\": \"%s\","
           " \"mode\": \"gateway\", \"status\": \"unexpected\", \"exercised\": true,"
           " \"violated\": [\"I2\"], \"judged\": [\"I1\", \"I2\", \"I3\"]}]}", a, b);
  PDT_EQ_INT(write_text("level.json", level) | write_text("plain.json", plain), 0);
  char l_arg[200], p_arg[200];
  snprintf(l_arg, sizeof l_arg, "gw=%s", path_of("level.json"));
  snprintf(p_arg, sizeof p_arg, "peer=%s", path_of("plain.json"));
  const char *args[] = {"report", "--requirements", "--requirements-doc", path_of("doc.md"),
                        "--json", l_arg, p_arg, path_of("sim.json"), NULL};
  r = pdref(args);
  if (!r) return;
  PDT_EQ_INT(r->code, 0);
  cJSON *doc = cJSON_Parse(r->out);
  const cJSON *serve = req(doc, "PDG-T-SERVE-1"), *cancel = req(doc, "PDG-T-CANCEL-1"),
              *eject = req(doc, "PDG-T-EJECT-1");
  PDT_TRUE(serve && cancel && eject);
  if (serve && cancel && eject) {
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(serve, "cells"),
                *cc = cJSON_GetObjectItemCaseSensitive(cancel, "cells"),
                *ec = cJSON_GetObjectItemCaseSensitive(eject, "cells");
    PDT_EQ_STR(str(sc, "gw"), "met");
    PDT_EQ_STR(str(cc, "gw"), "not met");
    PDT_TRUE(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(ec, "gw"))); /* not in that run */
    PDT_EQ_STR(str(sc, "peer"), "met");
    PDT_EQ_STR(str(cc, "peer"), "not met"); /* I2 where the reference passes */
    PDT_EQ_STR(str(ec, "peer"), "not exercised"); /* I12 not among its judged */
    PDT_EQ_STR(str(cc, "joined (sim)"), "not met"); /* the model's I3 */
    PDT_EQ_STR(str(cc, "pr1150 (sim)"), "not met");
    PDT_EQ_STR(str(cc, "reference (sim)"), "met");
    PDT_EQ_STR(str(ec, "reference (sim)"), "met"); /* the simulator judges I12 */
  }
  cJSON_Delete(doc);
  const char *text[] = {"report", "--requirements", "--requirements-doc", path_of("doc.md"),
                        l_arg, path_of("sim.json"), NULL};
  r = pdref(text);
  if (!r) return;
  PDT_EQ_INT(r->code, 0);
  PDT_HAS(r->out, "PDG-T-CANCEL-1   MUST   | NOT MET | NOT MET      | NOT MET      |");
  PDT_HAS(r->out, "level mini");
}

int pdt_suite_conform_level(void) {
  static const pdt_case_t cases[] = {
      {"the built-in index is the document's, levels cumulative", test_the_built_in_index_is_the_documents},
      {"a bad index is refused naming where", test_a_bad_index_is_refused_naming_where},
      {"a requirement is met only on rows that tested it", test_a_requirement_is_met_only_on_rows_that_tested_it},
      {"a level with a pending requirement is never claimed", test_a_level_with_a_pending_requirement_is_never_claimed},
      {"conform --list-levels --json; an unknown level exits 2", test_list_levels_prints_the_index},
      {"conform --level against pdref gateway (sockets)", test_level_against_pdref_gateway_over_sockets},
      {"conform --level against the joined model: its stranded prefill", test_level_against_the_joined_model_finds_its_stranded_prefill},
      {"report --requirements: level, conform and sim columns", test_report_renders_the_requirement_matrix},
  };
  return PDT_SUITE("conform_level", cases);
}
