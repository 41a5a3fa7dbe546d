/* The result record's JSON renderer (cli_result.h). */
#include "cli_result.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>

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
