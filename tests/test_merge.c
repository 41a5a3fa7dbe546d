/* Logprob merge: non-stream documents (R1.38, M8.3, G9) and smg's per-chunk stream merge
 * (R1.39), checked by parsing the output back. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "pd_alloc.h"
#include "pd_err.h"
#include "pd_merge.h"
#include "pdt.h"

#define PREFILL                                                                        \
  "{\"text\":\"\",\"meta_info\":{\"input_token_logprobs\":[[-0.5,11,null],[-0.25,12,null]]," \
  "\"input_top_logprobs\":[[\"p1\"],[\"p2\"]],\"input_token_ids_logprobs\":[[1],[2]]}}"
#define DECODE                                                                           \
  "{\"text\":\"Hi\",\"meta_info\":{\"id\":\"r1\",\"input_token_logprobs\":[[-1.5,13,null]]," \
  "\"input_top_logprobs\":[[\"d1\"]],\"output_token_logprobs\":[[-0.1,7,null]]}}"

static int merge(const char *p, const char *d, char **out) {
  size_t n = 0;
  int rc = pd_merge_logprobs(NULL, p, strlen(p), d, strlen(d), out, &n);
  if (rc == 0) PDT_EQ_U64(n, strlen(*out));
  return rc;
}

static const cJSON *meta(const cJSON *doc, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "meta_info"),
                                          key);
}

/* Token id (second element) of input_token_logprobs[i]. */
static int token_at(const cJSON *doc, int i) {
  const cJSON *e = cJSON_GetArrayItem(meta(doc, "input_token_logprobs"), i);
  const cJSON *id = cJSON_GetArrayItem(e, 1);
  return cJSON_IsNumber(id) ? id->valueint : -1;
}

static void t_merge_prepends_prefill_logprobs_exactly_once(void) {
  char *out = NULL;
  PDT_EQ_INT(merge(PREFILL, DECODE, &out), 0);
  cJSON *doc = cJSON_Parse(out);
  PDT_TRUE(doc != NULL);
  PDT_EQ_INT(cJSON_GetArraySize(meta(doc, "input_token_logprobs")), 3);
  PDT_EQ_INT(token_at(doc, 0), 11);
  PDT_EQ_INT(token_at(doc, 1), 12);
  PDT_EQ_INT(token_at(doc, 2), 13);
  PDT_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "text")), "Hi");
  PDT_EQ_STR(cJSON_GetStringValue(meta(doc, "id")), "r1");
  PDT_EQ_INT(cJSON_GetArraySize(meta(doc, "output_token_logprobs")), 1); /* untouched */
  cJSON_Delete(doc);
  pd_free(NULL, out);
}

static void t_merge_top_and_ids_only_when_both_sides_have_them(void) {
  char *out = NULL;
  PDT_EQ_INT(merge(PREFILL, DECODE, &out), 0);
  cJSON *doc = cJSON_Parse(out);
  const cJSON *top = meta(doc, "input_top_logprobs");
  PDT_EQ_INT(cJSON_GetArraySize(top), 3); /* both had it: merged (G9) */
  PDT_EQ_STR(cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetArrayItem(top, 0), 0)), "p1");
  PDT_EQ_STR(cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetArrayItem(top, 2), 0)), "d1");
  PDT_TRUE(meta(doc, "input_token_ids_logprobs") == NULL); /* decode lacked it: not added */
  cJSON_Delete(doc);
  pd_free(NULL, out);
}

static void t_merge_needs_token_logprob_arrays_on_both_sides(void) {
  char *out = (char *)"untouched";
  const char *no_meta = "{\"text\":\"x\"}";
  const char *null_lp = "{\"meta_info\":{\"input_token_logprobs\":null}}";
  PDT_EQ_INT(merge(PREFILL, no_meta, &out), PD_ERR_NOT_FOUND);
  PDT_EQ_INT(merge(no_meta, DECODE, &out), PD_ERR_NOT_FOUND);
  PDT_EQ_INT(merge(null_lp, DECODE, &out), PD_ERR_NOT_FOUND);
  PDT_EQ_INT(merge(PREFILL, null_lp, &out), PD_ERR_NOT_FOUND);
  PDT_EQ_STR(out, "untouched");
}

static void t_merge_rejects_bad_json_and_non_objects(void) {
  char *out = NULL;
  PDT_EQ_INT(merge("{", DECODE, &out), PD_ERR_JSON);
  PDT_EQ_INT(merge(PREFILL, "", &out), PD_ERR_JSON);
  PDT_EQ_INT(merge(PREFILL, DECODE " {}", &out), PD_ERR_JSON); /* two documents */
  PDT_EQ_INT(merge("[1]", DECODE, &out), PD_ERR_NOT_OBJECT);
  PDT_EQ_INT(merge(PREFILL, "\"s\"", &out), PD_ERR_NOT_OBJECT);
  PDT_TRUE(out == NULL);
  /* trailing whitespace after one document is fine */
  PDT_EQ_INT(merge(PREFILL, DECODE "\r\n ", &out), 0);
  pd_free(NULL, out);
}

static void t_merge_reads_only_the_given_length(void) {
  const char *d = DECODE "garbage";
  char *out = NULL;
  PDT_EQ_INT(pd_merge_logprobs(NULL, PREFILL, strlen(PREFILL), d, strlen(DECODE), &out, NULL),
             0);
  pd_free(NULL, out);
}

typedef struct {
  long fail_at, calls, live;
} failing_t;
static void *fa_malloc(size_t n, void *ud) {
  failing_t *f = ud;
  if (f->calls++ == f->fail_at) return NULL;
  f->live++;
  return malloc(n);
}
static void *fa_realloc(void *p, size_t n, void *ud) {
  (void)p, (void)n, (void)ud;
  return NULL;
}
static void fa_free(void *p, void *ud) {
  ((failing_t *)ud)->live--;
  free(p);
}

static void t_merge_output_allocation_failure_is_nomem(void) {
  failing_t f = {0, 0, 0};
  pd_alloc_t a = {fa_malloc, fa_realloc, fa_free, &f};
  char *out = NULL;
  PDT_EQ_INT(pd_merge_logprobs(&a, PREFILL, strlen(PREFILL), DECODE, strlen(DECODE), &out, NULL),
             PD_ERR_NOMEM);
  PDT_TRUE(out == NULL);
  PDT_EQ_INT(f.live, 0);
  const char *chunk = "data: " DECODE "\n\n";
  f.calls = 0;
  PDT_EQ_INT(pd_merge_smg_chunk(&a, "[[0,1,null]]", 12, chunk, strlen(chunk), &out, NULL),
             PD_ERR_NOMEM);
  PDT_EQ_INT(f.live, 0);
}

#define PREFILL_LP "[[-0.5,11,null],[-0.25,12,null]]"

static int smg(const char *chunk, char **out) {
  return pd_merge_smg_chunk(NULL, PREFILL_LP, strlen(PREFILL_LP), chunk, strlen(chunk), out,
                            NULL);
}

static void t_smg_chunk_with_one_event_is_merged_and_reencoded(void) {
  char *out = NULL;
  PDT_EQ_INT(smg("data: " DECODE "\n\n", &out), 0);
  size_t n = out ? strlen(out) : 0;
  PDT_TRUE(n > 8 && memcmp(out, "data: ", 6) == 0 && memcmp(out + n - 2, "\n\n", 2) == 0);
  cJSON *doc = out ? cJSON_ParseWithLength(out + 6, n - 8) : NULL;
  PDT_EQ_INT(cJSON_GetArraySize(meta(doc, "input_token_logprobs")), 3);
  PDT_EQ_INT(token_at(doc, 0), 11);
  PDT_EQ_INT(token_at(doc, 2), 13);
  PDT_EQ_INT(cJSON_GetArraySize(meta(doc, "input_top_logprobs")), 1); /* smg: not merged */
  cJSON_Delete(doc);
  pd_free(NULL, out);
}

static void t_smg_chunk_merge_skips_a_chunk_carrying_two_events(void) {
  char *out = NULL;
  PDT_EQ_INT(smg("data: " DECODE "\n\ndata: " DECODE "\n\n", &out), PD_ERR_NOT_FOUND); /* G9 */
  PDT_TRUE(out == NULL);
}

static void t_smg_chunk_merge_skips_half_an_event(void) {
  char *out = NULL;
  PDT_EQ_INT(smg("data: {\"text\":\"Hi\",\"meta_info\":{\"input_tok", &out), PD_ERR_NOT_FOUND);
  PDT_EQ_INT(smg("en_logprobs\":[]}}\n\n", &out), PD_ERR_NOT_FOUND); /* the other half */
}

static void t_smg_chunk_merge_skips_done_and_non_data(void) {
  char *out = NULL;
  PDT_EQ_INT(smg("data: [DONE]\n\n", &out), PD_ERR_NOT_FOUND);
  /* smg checks contains("[DONE]"), so a payload mentioning it is not merged either */
  PDT_EQ_INT(smg("data: {\"text\":\"[DONE]\",\"meta_info\":{\"input_token_logprobs\":[]}}\n\n",
                 &out),
             PD_ERR_NOT_FOUND);
  PDT_EQ_INT(smg("data:" DECODE "\n\n", &out), PD_ERR_NOT_FOUND); /* no space after colon */
  PDT_EQ_INT(smg(": keep-alive\n\n", &out), PD_ERR_NOT_FOUND);
  PDT_EQ_INT(smg("data: \xff{}\n\n", &out), PD_ERR_NOT_FOUND); /* not UTF-8 */
  PDT_TRUE(out == NULL);
}

static void t_smg_chunk_without_logprobs_is_reencoded_unmerged(void) {
  char *out = NULL;
  PDT_EQ_INT(smg("data: {\"text\":\"x\"}\r\n\r\n", &out), 0);
  PDT_EQ_STR(out, "data: {\"text\":\"x\"}\n\n");
  pd_free(NULL, out);
  out = NULL;
  PDT_EQ_INT(pd_merge_smg_chunk(NULL, NULL, 0, "data: " DECODE "\n\n",
                                strlen("data: " DECODE "\n\n"), &out, NULL),
             0); /* no prefill logprobs (the usual stream case, R1.40): re-encoded only */
  cJSON *doc = out ? cJSON_ParseWithLength(out + 6, strlen(out) - 8) : NULL;
  PDT_EQ_INT(cJSON_GetArraySize(meta(doc, "input_token_logprobs")), 1);
  cJSON_Delete(doc);
  pd_free(NULL, out);
}

static void t_smg_chunk_non_array_decode_logprobs_become_null(void) {
  char *out = NULL;
  PDT_EQ_INT(smg("data: {\"meta_info\":{\"input_token_logprobs\":5}}\n\n", &out), 0);
  PDT_EQ_STR(out, "data: {\"meta_info\":{\"input_token_logprobs\":null}}\n\n");
  pd_free(NULL, out);
}

static void t_smg_chunk_strips_repeated_data_prefixes(void) {
  char *out = NULL;
  PDT_EQ_INT(smg("data: data: {\"a\":1}\n\n", &out), 0); /* trim_start_matches */
  PDT_EQ_STR(out, "data: {\"a\":1}\n\n");
  pd_free(NULL, out);
}

static void t_smg_chunk_bad_prefill_json_is_an_error(void) {
  char *out = NULL;
  const char *c = "data: {}\n\n";
  PDT_EQ_INT(pd_merge_smg_chunk(NULL, "[1,", 3, c, strlen(c), &out, NULL), PD_ERR_JSON);
  PDT_TRUE(out == NULL);
}

/* pd_merge_may_carry: 0 only for text that cannot carry the key, so the reference may skip
 * the parse there; an escaped spelling of the key (which cJSON decodes) keeps it 1. */
static void test_may_carry_is_a_safe_skip(void) {
  static const char p[] = "{\"meta_info\":{\"input_token_logprobs\":[[-0.25,11,null]]}}";
  static const char plain[] = "{\"text\":\"a\",\"meta_info\":{\"completion_tokens\":1}}";
  static const char keyed[] = "{\"meta_info\":{\"input_token_logprobs\":[[-0.75,13,null]]}}";
  static const char escaped[] = "{\"meta_info\":{\"\\u0069nput_token_logprobs\":[[-0.75,13,null]]}}";
  char *out = NULL;
  size_t n = 0;
  PDT_EQ_INT(pd_merge_may_carry(plain, sizeof plain - 1), 0);
  PDT_TRUE(pd_merge_logprobs(NULL, p, sizeof p - 1, plain, sizeof plain - 1, &out, &n) != 0);
  PDT_EQ_INT(pd_merge_may_carry(keyed, sizeof keyed - 1), 1);
  PDT_EQ_INT(pd_merge_may_carry(escaped, sizeof escaped - 1), 1);
  PDT_EQ_INT(pd_merge_logprobs(NULL, p, sizeof p - 1, escaped, sizeof escaped - 1, &out, &n), 0);
  PDT_TRUE(out && strstr(out, "[[-0.25,11,null],[-0.75,13,null]]") != NULL);
  pd_free(NULL, out);
}

int pdt_suite_merge(void) {
  static const pdt_case_t cases[] = {
      {"may_carry is a safe skip", test_may_carry_is_a_safe_skip},
      {"merge prepends prefill logprobs exactly once",
       t_merge_prepends_prefill_logprobs_exactly_once},
      {"top and ids logprobs merge only when both sides have them (G9)",
       t_merge_top_and_ids_only_when_both_sides_have_them},
      {"merge needs token logprob arrays on both sides",
       t_merge_needs_token_logprob_arrays_on_both_sides},
      {"merge rejects bad JSON and non-objects", t_merge_rejects_bad_json_and_non_objects},
      {"merge reads only the given length", t_merge_reads_only_the_given_length},
      {"a failed output allocation is NOMEM and leaks nothing",
       t_merge_output_allocation_failure_is_nomem},
      {"smg merges a chunk holding one event and re-encodes it (R1.39)",
       t_smg_chunk_with_one_event_is_merged_and_reencoded},
      {"smg chunk merge skips a chunk carrying two events (G9)",
       t_smg_chunk_merge_skips_a_chunk_carrying_two_events},
      {"smg chunk merge skips half an event (G9)", t_smg_chunk_merge_skips_half_an_event},
      {"smg chunk merge skips DONE, non-data and non-UTF-8 chunks",
       t_smg_chunk_merge_skips_done_and_non_data},
      {"smg re-encodes a chunk with nothing to merge",
       t_smg_chunk_without_logprobs_is_reencoded_unmerged},
      {"smg turns non-array decode logprobs into null",
       t_smg_chunk_non_array_decode_logprobs_become_null},
      {"smg strips repeated data: prefixes", t_smg_chunk_strips_repeated_data_prefixes},
      {"bad prefill logprob JSON is an error", t_smg_chunk_bad_prefill_json_is_an_error},
  };
  return PDT_SUITE("merge", cases);
}
