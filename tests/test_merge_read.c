/* The merge reads prefill once (pd_merge_prefill_t) and splices the printed arrays; its
 * result must be byte for byte what splicing the two parsed trees and printing decode gave
 * (the form before, kept here as the reference), error codes included, and one prefill read
 * serves any number of decode events. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_merge.h"
#include "pdt.h"

static const char *const keys[] = {"input_token_logprobs", "input_top_logprobs",
                                   "input_token_ids_logprobs"};

static void move_all(cJSON *to, cJSON *from) {
  while (from->child) cJSON_AddItemToArray(to, cJSON_DetachItemViaPointer(from, from->child));
}

/* Parse both, move decode's elements behind prefill's for each key, print decode. */
static int tree_merge(const char *p, const char *d, char **out) {
  cJSON *pj = cJSON_Parse(p), *dj = cJSON_Parse(d);
  int rc = 0;
  if (!pj || !dj) rc = PD_ERR_JSON;
  else if (!cJSON_IsObject(pj) || !cJSON_IsObject(dj)) rc = PD_ERR_NOT_OBJECT;
  cJSON *pm = rc ? NULL : cJSON_GetObjectItemCaseSensitive(pj, "meta_info");
  cJSON *dm = rc ? NULL : cJSON_GetObjectItemCaseSensitive(dj, "meta_info");
  if (!rc && (!cJSON_IsObject(pm) || !cJSON_IsObject(dm))) rc = PD_ERR_NOT_FOUND;
  for (int k = 0; !rc && k < 3; k++) {
    cJSON *pa = cJSON_GetObjectItemCaseSensitive(pm, keys[k]);
    cJSON *da = cJSON_GetObjectItemCaseSensitive(dm, keys[k]);
    int both = cJSON_IsArray(pa) && cJSON_IsArray(da);
    if (k == 0 && !both) rc = PD_ERR_NOT_FOUND;
    else if (both) {
      move_all(pa, da);
      move_all(da, pa);
    }
  }
  if (!rc) *out = cJSON_PrintUnformatted(dj);
  cJSON_Delete(pj);
  cJSON_Delete(dj);
  return rc;
}

static const char *const prefills[] = {
    "{\"meta_info\":{\"input_token_logprobs\":[[-0.25,11,null],[-0.5,12,null]]}}",
    "{\"meta_info\":{\"input_token_logprobs\":[]}}",
    ("{\"text\":\"\",\"meta_info\":{\"id\":\"x\",\"input_token_logprobs\":[[0.1,1,\"a\\u00e9\"]],"
     "\"input_top_logprobs\":[[1e-300,2,null],null],\"input_token_ids_logprobs\":[]}}"),
    "{\"meta_info\":{\"input_token_logprobs\":{\"a\":1}}}",
    "{\"meta_info\":[1]}",
    "[1,2]",
    "{\"meta_info\":",
    "{\"meta_info\":{\"input_top_logprobs\":[[1,2]]}}",
};

static const char *const decodes[] = {
    ("{\"text\":\"tok0 \",\"index\":0,\"meta_info\":{\"id\":\"r\",\"completion_tokens\":1,"
     "\"input_token_logprobs\":[[-0.75,13,null]]}}"),
    "{\"meta_info\":{\"input_token_logprobs\":[],\"input_top_logprobs\":[[3.14159,4,null]],"
    "\"input_token_ids_logprobs\":[[0.333333333333333314829616256247,5]]}}",
    "{ \"meta_info\" : { \"input_token_logprobs\" : [ [ -0.1 , 1 ] ] , \"x\" : 9007199254740993 } }",
    "{\"meta_info\":{\"input_token_logprobs\":[1],\"input_token_logprobs\":[2]}}",
    "{\"meta_info\":{\"input_token_logprobs\":null}}",
    "{\"meta_info\":{}}",
    "{\"no_meta\":true}",
    "\"str\"",
    "not json",
};

static void t_merge_with_a_read_prefill_equals_the_tree_splice(void) {
  unsigned merged = 0;
  for (size_t p = 0; p < sizeof prefills / sizeof *prefills; p++) {
    pd_merge_prefill_t pf;
    pd_merge_prefill_init(&pf, prefills[p], strlen(prefills[p]));
    for (int round = 0; round < 2; round++) /* one read serves every event */
      for (size_t d = 0; d < sizeof decodes / sizeof *decodes; d++) {
        char *want = NULL, *got = NULL, *fresh = NULL;
        size_t n = 0;
        int rw = tree_merge(prefills[p], decodes[d], &want);
        int rg = pd_merge_logprobs_with(NULL, &pf, decodes[d], strlen(decodes[d]), &got, &n);
        int rf = pd_merge_logprobs(NULL, prefills[p], strlen(prefills[p]), decodes[d],
                                   strlen(decodes[d]), &fresh, NULL);
        PDT_EQ_INT(rg, rw);
        PDT_EQ_INT(rf, rw);
        if (rw == 0 && rg == 0 && rf == 0) {
          PDT_EQ_STR(got, want);
          PDT_EQ_STR(fresh, want);
          PDT_EQ_U64(n, strlen(want));
          merged++;
        }
        cJSON_free(want);
        free(got);
        free(fresh);
      }
    pd_merge_prefill_free(&pf);
  }
  PDT_TRUE(merged >= 20);
}

/* Consecutive events with the same decode array reuse its merged text; arrays one ulp or
 * one type apart do not. */
static void t_merge_reuses_only_an_identical_decode_array(void) {
  static const char *const arrays[] = {
      "[[-0.75,13,null]]", "[[-0.75,13,null]]", "[[-0.75,13.0,null]]",
      "[[-0.7500000000000001,13,null]]", "[[-0.75,13,null]]", "[[-0.75,13,\"null\"]]",
      "[[-0.75,13,null],[1,2]]", "[[-0.75,13]]", "[]", "[[-0.75,13,null]]", "[{\"a\":1}]",
      "[{\"b\":1}]", "[[-0.75,-0.0,null]]", "[[-0.75,0,null]]"};
  pd_merge_prefill_t pf;
  pd_merge_prefill_init(&pf, prefills[0], strlen(prefills[0]));
  for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) {
    char d[256], *want = NULL, *got = NULL;
    snprintf(d, sizeof d, "{\"index\":%zu,\"meta_info\":{\"input_token_logprobs\":%s}}", i,
             arrays[i]);
    PDT_EQ_INT(tree_merge(prefills[0], d, &want), 0);
    PDT_EQ_INT(pd_merge_logprobs_with(NULL, &pf, d, strlen(d), &got, NULL), 0);
    PDT_EQ_STR(got, want);
    cJSON_free(want);
    free(got);
  }
  pd_merge_prefill_free(&pf);
}

int pdt_suite_merge_read(void) {
  static const pdt_case_t cases[] = {
      {"merge with a read prefill equals the tree splice",
       t_merge_with_a_read_prefill_equals_the_tree_splice},
      {"merge reuses only an identical decode array", t_merge_reuses_only_an_identical_decode_array},
  };
  return PDT_SUITE("merge_read", cases);
}
