/* report: reading result files and telling their kind. Rows are read into the result record
 * by pd_cli_result_parse (cli_result.c), both shapes (old: "violated" a comma string,
 * "expected" a string; new: arrays, "seed", "replay", error rows). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_shard.h"
#include "pd_scenario.h"
#include "report.h"

const char *const pd_report_kind_names[PD_REPORT_KINDS] = {"sim run", "sim explore", "conform",
                                                           "sim bench", "gateway bench"};
const char *const pd_report_verdict_names[PD_VERDICT_COUNT] = {
    "expected", "fail", "not-exercised", "error", "limit", "skipped"};
const char *const pd_report_verdict_words[PD_VERDICT_COUNT] = {
    "as expected", "UNEXPECTED", "not exercised", "error", "deployment limit", "skipped"};

const char *pd_report_seed(const cJSON *o, const char *key, char *buf, size_t cap) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (cJSON_IsNumber(v)) snprintf(buf, cap, "%.0f", v->valuedouble);
  else snprintf(buf, cap, "%s", cJSON_IsString(v) && v->valuestring ? v->valuestring : "");
  return buf;
}

const char *pd_report_str(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) && v->valuestring ? v->valuestring : "";
}

double pd_report_num(const cJSON *o, const char *key, double dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (cJSON_IsNumber(v)) return v->valuedouble;
  if (cJSON_IsString(v) && v->valuestring && v->valuestring[0]) {
    char *end;
    double d = strtod(v->valuestring, &end);
    if (!*end) return d;
  }
  return dflt;
}

static int has(const cJSON *o, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(o, key) != NULL;
}

int pd_report_is_case(const cJSON *root) {
  if (!cJSON_IsObject(root) || !pd_report_str(root, "name")[0] || !has(root, "workers")) return 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(root, "tags"))
    if (cJSON_IsString(t) && t->valuestring && !strcmp(t->valuestring, "explore")) return 1;
  return 0;
}

/* Keep a shrunk case: its file, name, description, and from its tags ["explore", mode, "I<n>"]
 * the mode and the invariant. 0, or 2 with err set (too many, out of memory). */
static int keep_case(pd_report_t *r, const char *path, const cJSON *root, char *err, size_t cap) {
  if (r->n_cases == PD_REPORT_MAX_CASES) {
    snprintf(err, cap, "%s: more than %d shrunk cases", path, PD_REPORT_MAX_CASES);
    return 2;
  }
  if (!r->cases && !(r->cases = calloc(PD_REPORT_MAX_CASES, sizeof *r->cases))) {
    snprintf(err, cap, "%s: out of memory", path);
    return 2;
  }
  const char *mode = "", *inv = "";
  const cJSON *t;
  cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(root, "tags")) {
    const char *v = cJSON_IsString(t) && t->valuestring ? t->valuestring : "";
    if (v[0] == 'I' && v[1] >= '0' && v[1] <= '9') inv = v;
    else if (strcmp(v, "explore") && pd_mode_parse(v, &(pd_mode_t){0}) == 0) mode = v;
  }
  pd_report_case_t *c = &r->cases[r->n_cases];
  c->path = strdup(path);
  c->name = strdup(pd_report_str(root, "name"));
  c->description = strdup(pd_report_str(root, "description"));
  c->mode = strdup(mode);
  c->inv = strdup(inv);
  r->n_cases++; /* freed by pd_report_free, whole or not */
  if (!c->path || !c->name || !c->description || !c->mode || !c->inv) {
    snprintf(err, cap, "%s: out of memory", path);
    return 2;
  }
  return 0;
}

int pd_report_classify(const cJSON *root) {
  if (!cJSON_IsObject(root)) return -1;
  const char *schema = pd_report_str(root, "schema");
  if (PD_EXPLORE_IS_RESULT(schema) || !strcmp(schema, PD_EXPLORE_MERGE_SCHEMA) ||
      !strcmp(schema, PD_EXPLORE_MERGE_SCHEMA_V1))
    return PD_REPORT_EXPLORE;
  const char *cmd = pd_report_str(root, "command"); /* named since the one vocabulary */
  if (!strcmp(cmd, "sim bench")) return PD_REPORT_SIM_BENCH;
  if (!strcmp(cmd, "gateway bench")) return PD_REPORT_GW_BENCH;
  if (!strcmp(cmd, "sim run")) return PD_REPORT_SIM;
  if (!strcmp(cmd, "conform")) return PD_REPORT_CONFORM;
  if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "rows")))
    return has(root, "skipped") ? PD_REPORT_CONFORM : PD_REPORT_SIM;
  if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "levels")) && has(root, "gateway"))
    return PD_REPORT_GW_BENCH;
  if (has(root, "events_per_s") && has(root, "scenario")) return PD_REPORT_SIM_BENCH;
  return -1;
}

/* The whole file, NUL-terminated, in *out (caller frees). 0, or -1 with err set. */
static int slurp(const char *path, char **out, size_t *len, char *err, size_t cap) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, cap, "%s: %s", path, strerror(errno));
    return -1;
  }
  size_t n = 0, c = 1 << 16;
  char *b = malloc(c + 1);
  while (b) { /* bounded by PD_REPORT_MAX_FILE_BYTES */
    size_t k = fread(b + n, 1, c - n, f);
    n += k;
    if (n < c) break;
    if (c >= PD_REPORT_MAX_FILE_BYTES) {
      snprintf(err, cap, "%s: larger than %u MiB", path, PD_REPORT_MAX_FILE_BYTES >> 20);
      free(b);
      fclose(f);
      return -1;
    }
    char *nb = realloc(b, c * 2 + 1);
    if (!nb) free(b);
    b = nb;
    c *= 2;
  }
  int bad = !b || ferror(f);
  fclose(f);
  if (bad) {
    snprintf(err, cap, "%s: %s", path, b ? "read error" : "out of memory");
    free(b);
    return -1;
  }
  b[n] = 0;
  *out = b;
  *len = n;
  return 0;
}

int pd_report_load(pd_report_t *r, const char *path, char *err, size_t cap) {
  if (r->n == PD_REPORT_MAX_INPUTS) {
    snprintf(err, cap, "%s: more than %d result files", path, PD_REPORT_MAX_INPUTS);
    return 2;
  }
  char *txt;
  size_t len;
  if (slurp(path, &txt, &len, err, cap)) return 2;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(txt, len, &end, 0);
  if (!root) {
    snprintf(err, cap, "%s: malformed JSON at byte %zu", path, end ? (size_t)(end - txt) : 0);
    free(txt);
    return 2;
  }
  free(txt);
  int kind = pd_report_classify(root);
  if (kind < 0 && pd_report_is_case(root)) { /* a shrunk case, named or beside the results */
    int rc = keep_case(r, path, root, err, cap);
    r->skipped++;
    cJSON_Delete(root);
    return rc;
  }
  if (kind < 0 && r->is_skipping_unknown) { /* other JSON in a directory given */
    r->skipped++;
    cJSON_Delete(root);
    return 0;
  }
  if (kind < 0) {
    snprintf(err, cap, "%s: unknown result kind (not sim run, sim explore, conform, sim bench "
                       "or gateway bench --json output)", path);
    cJSON_Delete(root);
    return 2;
  }
  pd_report_input_t *in = &r->in[r->n];
  if (!(in->path = strdup(path))) {
    snprintf(err, cap, "%s: out of memory", path);
    cJSON_Delete(root);
    return 2;
  }
  in->kind = (pd_report_kind_t)kind;
  in->root = root;
  r->n++;
  return 0;
}

void pd_report_free(pd_report_t *r) {
  for (size_t i = 0; i < r->n; i++) {
    free(r->in[i].path);
    cJSON_Delete(r->in[i].root);
  }
  r->n = 0;
  for (size_t i = 0; i < r->n_cases; i++) {
    pd_report_case_t *c = &r->cases[i];
    free(c->path);
    free(c->name);
    free(c->description);
    free(c->mode);
    free(c->inv);
  }
  free(r->cases);
  r->cases = NULL;
  r->n_cases = 0;
}

int pd_report_merge_shards(pd_report_t *r) {
  for (size_t i = 0; i < r->n; i++) {
    if (!PD_EXPLORE_IS_RESULT(pd_report_str(r->in[i].root, "schema"))) continue;
    const char *mode = pd_report_str(r->in[i].root, "mode");
    const cJSON *docs[PD_REPORT_MAX_INPUTS];
    const char *paths[PD_REPORT_MAX_INPUTS];
    size_t idx[PD_REPORT_MAX_INPUTS], n = 0;
    for (size_t k = i; k < r->n; k++)
      if (PD_EXPLORE_IS_RESULT(pd_report_str(r->in[k].root, "schema")) &&
          !strcmp(pd_report_str(r->in[k].root, "mode"), mode)) {
        docs[n] = r->in[k].root;
        paths[n] = r->in[k].path;
        idx[n++] = k;
      }
    if (n < 2) continue;
    cJSON *merged = pd_cli_explore_fold(docs, paths, (int)n);
    if (!merged) return 2;
    char name[512];
    snprintf(name, sizeof name, "%zu shards merged: %s ...", n, paths[0]);
    char *path = strdup(name);
    if (!path) {
      cJSON_Delete(merged);
      return 2;
    }
    for (size_t j = n; j-- > 1;) { /* the other shards leave the list, in order */
      size_t k = idx[j];
      free(r->in[k].path);
      cJSON_Delete(r->in[k].root);
      memmove(&r->in[k], &r->in[k + 1], (r->n - k - 1) * sizeof r->in[0]);
      r->n--;
    }
    free(r->in[i].path);
    cJSON_Delete(r->in[i].root);
    r->in[i].path = path;
    r->in[i].root = merged;
  }
  return 0;
}
