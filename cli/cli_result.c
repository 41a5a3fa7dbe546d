/* The result record's JSON renderer (cli_result.h). */
#include "cli_result.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_scenario.h"

void pd_cli_result_add_seed(cJSON *j, const char *key, uint64_t seed) {
  if (seed <= 9007199254740992ull) {
    cJSON_AddNumberToObject(j, key, (double)seed);
    return;
  }
  char b[24];
  snprintf(b, sizeof b, "%llu", (unsigned long long)seed);
  cJSON_AddStringToObject(j, key, b);
}

void pd_cli_result_text_head(const pd_cli_result_t *r) {
  char own[PD_CLI_INV_TEXT_BYTES];
  if (r->violated) pd_cli_inv_text(r->violated, own, sizeof own);
  else snprintf(own, sizeof own, "pass");
  printf("%-46s %-14s %-16s ", r->scenario ? r->scenario : r->file ? r->file : "-",
         r->mode ? r->mode : "-", pd_cli_verdict_word(r->verdict));
  if (r->verdict == PD_CLI_SKIPPED) printf("-  (%s)\n", r->reason ? r->reason : "");
  else printf("%s", own);
}

static void add_str_or_skip(cJSON *j, const char *key, const char *v) {
  if (v && v[0]) cJSON_AddStringToObject(j, key, v);
}

cJSON *pd_cli_result_json(const pd_cli_result_t *r) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  if (r->verdict == PD_CLI_ERROR && r->error) {
    cJSON_AddStringToObject(j, "file", r->file ? r->file : "");
    if (r->scenario) cJSON_AddStringToObject(j, "scenario", r->scenario);
    if (r->scenario && r->mode) cJSON_AddStringToObject(j, "mode", r->mode);
    cJSON_AddStringToObject(j, "status", pd_cli_verdict_json(r->verdict));
    cJSON_AddStringToObject(j, "error", r->error);
    return j;
  }
  cJSON_AddStringToObject(j, "scenario", r->scenario ? r->scenario : "");
  cJSON_AddStringToObject(j, "file", r->file ? r->file : "");
  cJSON_AddStringToObject(j, "mode", r->mode ? r->mode : "");
  cJSON_AddStringToObject(j, "status", pd_cli_verdict_json(r->verdict));
  if (r->verdict == PD_CLI_SKIPPED) {
    cJSON_AddStringToObject(j, "reason", r->reason ? r->reason : "");
    return j;
  }
  pd_cli_inv_add(j, "violated", "violated_names", r->violated);
  if (r->expected_set) pd_cli_inv_add(j, "expected", NULL, r->expected); /* [] = held to pass */
  else cJSON_AddNullToObject(j, "expected"); /* the scenario sets none for the mode */
  cJSON_AddBoolToObject(j, "matched", r->matched);
  if (r->exercised >= 0) cJSON_AddBoolToObject(j, "exercised", r->exercised);
  pd_cli_result_add_seed(j, "seed", r->seed);
  if (r->has_tie_seed) pd_cli_result_add_seed(j, "tie_seed", r->tie_seed);
  cJSON_AddStringToObject(j, "replay", r->replay ? r->replay : "");
  cJSON_AddStringToObject(j, "reason", r->reason ? r->reason : "");
  if (r->error) cJSON_AddStringToObject(j, "error", r->error);
  if (r->verdict == PD_CLI_LIMIT) cJSON_AddStringToObject(j, "deployment_limit", r->limit_why ? r->limit_why : "");
  add_str_or_skip(j, "declared_unexercised", r->declared_unexercised);
  add_str_or_skip(j, "never_fired", r->never_fired);
  if (r->has_counts) {
    cJSON_AddNumberToObject(j, "faults_exercised", r->faults_exercised);
    cJSON_AddNumberToObject(j, "faults_total", r->faults_total);
    cJSON_AddNumberToObject(j, "requests", r->requests);
    cJSON_AddNumberToObject(j, "requests_served", r->requests_served);
    if (!r->has_ttft) return j;
    if (isnan(r->ttft_ms_mean)) cJSON_AddNullToObject(j, "ttft_ms_mean");
    else cJSON_AddNumberToObject(j, "ttft_ms_mean", r->ttft_ms_mean);
  }
  return j;
}

/* ---- the record from its JSON (pd_cli_result_parse) ---- */

static const char *str_of(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

/* key as a number; present 0/1 into *has (NULL: not asked). */
static double num_of(const cJSON *o, const char *key, int *has) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (has) *has = cJSON_IsNumber(v);
  return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* A seed as pd_cli_result_add_seed writes it (a number up to 2^53, a decimal string above);
 * 0, or -1 when absent or neither. */
static int seed_of(const cJSON *o, const char *key, uint64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0) {
    *out = (uint64_t)v->valuedouble;
    return 0;
  }
  if (!cJSON_IsString(v) || !v->valuestring || v->valuestring[0] < '0' || v->valuestring[0] > '9')
    return -1;
  char *end = NULL;
  unsigned long long x = strtoull(v->valuestring, &end, 10);
  if (*end) return -1;
  *out = x;
  return 0;
}

/* One ID "I<n>" into *m; counted in *n. */
static void add_id(const char *id, size_t len, uint32_t *m, int *n) {
  if (len < 2 || id[0] != 'I') return;
  int k = 0;
  for (size_t i = 1; i < len && k < 1000; i++) {
    if (id[i] < '0' || id[i] > '9') return;
    k = k * 10 + (id[i] - '0');
  }
  (*n)++;
  if (k >= 1 && k <= PD_INVARIANT_COUNT && k <= 32) *m |= 1u << (k - 1);
}

/* An invariant set: ["I3", "I10"] or the older "I3,I10" ("" none). */
static uint32_t mask_of(const cJSON *v, int *n) {
  uint32_t m = 0;
  *n = 0;
  if (cJSON_IsArray(v)) {
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
      if (cJSON_IsString(e) && e->valuestring) add_id(e->valuestring, strlen(e->valuestring), &m, n);
  } else if (cJSON_IsString(v) && v->valuestring) {
    for (const char *p = v->valuestring; *p;) { /* bounded by the NUL */
      size_t k = strcspn(p, ",");
      while (k && *p == ' ') p++, k--;
      add_id(p, k, &m, n);
      p += k + (p[k] == ',');
    }
  }
  return m;
}

int pd_cli_result_parse(const cJSON *row, pd_cli_result_t *r) {
  memset(r, 0, sizeof *r);
  r->exercised = -1;
  r->verdict = PD_CLI_UNEXPECTED;
  if (!cJSON_IsObject(row)) return -1;
  r->src = row;
  r->scenario = str_of(row, "scenario");
  r->file = str_of(row, "file");
  r->mode = str_of(row, "mode");
  r->reason = str_of(row, "reason");
  r->error = str_of(row, "error");
  r->limit_why = str_of(row, "deployment_limit");
  r->declared_unexercised = str_of(row, "declared_unexercised");
  r->never_fired = str_of(row, "never_fired");
  r->replay = str_of(row, "replay");
  const char *st = str_of(row, "status");
  int known = 0;
  for (int v = 0; st && v < PD_CLI_VERDICTS && !known; v++) /* the JSON word, or the text's */
    if (!strcmp(st, pd_cli_verdict_json((pd_cli_verdict_t)v)) ||
        !strcmp(st, pd_cli_verdict_word((pd_cli_verdict_t)v)))
      r->verdict = (pd_cli_verdict_t)v, known = 1;
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(row, "matched");
  if (!known && r->error) r->verdict = PD_CLI_ERROR;
  else if (!known && cJSON_IsBool(m)) r->verdict = cJSON_IsTrue(m) ? PD_CLI_AS_EXPECTED : PD_CLI_UNEXPECTED;
  r->matched = cJSON_IsTrue(m);
  r->violated = mask_of(cJSON_GetObjectItemCaseSensitive(row, "violated"), &r->n_ids);
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(row, "expected");
  int n_want;
  r->expected_set = e && !cJSON_IsNull(e);
  r->expected = mask_of(e, &n_want);
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(row, "exercised");
  if (cJSON_IsBool(x)) r->exercised = cJSON_IsTrue(x);
  r->has_seed = seed_of(row, "seed", &r->seed) == 0;
  r->has_tie_seed = seed_of(row, "tie_seed", &r->tie_seed) == 0;
  int has_req, has_total;
  r->requests = num_of(row, "requests", &has_req);
  r->faults_total = num_of(row, "faults_total", &has_total);
  r->has_counts = has_req || has_total;
  r->faults_exercised = num_of(row, "faults_exercised", NULL);
  r->requests_served = num_of(row, "requests_served", NULL);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(row, "ttft_ms_mean");
  r->has_ttft = t != NULL;
  r->ttft_ms_mean = cJSON_IsNumber(t) ? t->valuedouble : NAN;
  return 0;
}
