/* Capacity in the scenario format (docs/capacity.md): the worker keys named as SGLang's flags
 * and the workload's prompt length, their ranges and JSON-path errors, and the writer's round
 * trip (test_capacity_prompt.c has the lengths themselves). Texts use single quotes, turned
 * into JSON by parse_q(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_scenario.h"
#include "pd_scenario_write.h"
#include "pdt.h"
#include "pdt_scenario.h"

#define ERR_BYTES PDT_SCENARIO_ERR_BYTES
#define ONE_WORKER(keys)                                                                         \
  "{'name':'t','workers':[{'name':'p0','role':'prefill'," keys "},"                             \
  "{'name':'d0','role':'decode'}],'expect':{}}"

static const char full_cap[] =
    "{'name':'t',"
    " 'workers':[{'name':'p0','role':'prefill','max_running_requests':64,"
    "   'max_total_tokens':200000,'page_size':16,'forward_us_per_token':30,"
    "   'max_prefill_tokens':8192},"
    "  {'name':'d0','role':'decode','num_reserved_decode_tokens':0,'max_total_tokens':4096}],"
    " 'workload':{'prompt_tokens':100,'prompt_tokens_max':900,'batch':2},"
    " 'expect':{}}";

static void test_capacity_keys_load(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_q(s, full_cap, err), 0);
  PDT_EQ_STR(err, "");
  const pd_scenario_worker_t *p = &s->workers[0], *d = &s->workers[1];
  PDT_EQ_U64(p->max_running, 64);
  PDT_EQ_U64(p->kv_tokens, 200000);
  PDT_EQ_U64(p->page_size, 16);
  PDT_EQ_U64(p->forward_us_per_token, 30);
  PDT_EQ_U64(p->max_prefill_tokens, 8192);
  PDT_EQ_U64(p->reserved_decode_tokens, PD_WORKER_DEFAULT_DECODE_RESERVE); /* default */
  PDT_EQ_U64(d->reserved_decode_tokens, 0);
  PDT_EQ_U64(d->kv_tokens, 4096);
  PDT_EQ_U64(d->max_running, PD_WORKER_DEFAULT_MAX_RUNNING);
  PDT_EQ_U64(d->page_size, PD_WORKER_DEFAULT_PAGE_SIZE);
  PDT_EQ_U64(d->max_prefill_tokens, PD_WORKER_DEFAULT_MAX_PREFILL_TOKENS);
  PDT_EQ_U64(s->workload.prompt_tokens, 100);
  PDT_EQ_U64(s->workload.prompt_tokens_max, 900);
  /* defaults when absent */
  PDT_EQ_INT(parse_q(s, MIN_DOC(""), err), 0);
  PDT_EQ_U64(s->workers[0].kv_tokens, PD_WORKER_DEFAULT_KV_TOKENS);
  PDT_EQ_U64(s->workers[0].forward_us_per_token, 0);
  PDT_EQ_U64(s->workload.prompt_tokens, 0);
  PDT_EQ_U64(s->workload.prompt_tokens_max, 0);
  free(s);
}

static void test_capacity_keys_rejected_with_paths(void) {
  expect_error(ONE_WORKER("'max_running_requests':0"),
               "scen.json: $.workers[0].max_running_requests: expected an integer in "
               "1..1000000, got 0");
  expect_error(ONE_WORKER("'max_total_tokens':-5"),
               "scen.json: $.workers[0].max_total_tokens: expected an integer in "
               "1..1099511627776, got -5");
  expect_error(ONE_WORKER("'page_size':65537"),
               "scen.json: $.workers[0].page_size: expected an integer in 1..65536, got 65537");
  expect_error(ONE_WORKER("'num_reserved_decode_tokens':1.5"),
               "scen.json: $.workers[0].num_reserved_decode_tokens: expected an integer in "
               "0..1000000, got 1.5");
  expect_error(ONE_WORKER("'forward_us_per_token':'3'"),
               "scen.json: $.workers[0].forward_us_per_token: expected an integer in "
               "0..1000000, got \"3\"");
  expect_error(ONE_WORKER("'max_prefill_tokens':0"),
               "scen.json: $.workers[0].max_prefill_tokens: expected an integer in "
               "1..10000000, got 0");
  expect_error(ONE_WORKER("'page_size':64,'max_total_tokens':63"),
               "scen.json: $.workers[0].max_total_tokens: must be at least page_size (64), "
               "got 63");
  expect_error(ONE_WORKER("'max_running':5"), "scen.json: $.workers[0].max_running: unknown key");
  expect_error(MIN_DOC(",'workload':{'prompt_tokens':100,'prompt_tokens_max':99}"),
               "scen.json: $.workload.prompt_tokens_max: must be at least prompt_tokens (100, "
               "which must be at least 1), got 99");
  expect_error(MIN_DOC(",'workload':{'prompt_tokens_max':99}"),
               "scen.json: $.workload.prompt_tokens_max: must be at least prompt_tokens (0, "
               "which must be at least 1), got 99");
  expect_error(MIN_DOC(",'workload':{'prompt_tokens':1000001}"),
               "scen.json: $.workload.prompt_tokens: expected an integer in 0..1000000, got "
               "1000001");
  expect_error(MIN_DOC(",'workload':{'prompt_tokens':1000,'batch':1001}"),
               "scen.json: $.workload: batch * prompt tokens = 1001000 words in one body "
               "exceeds 1000000 (SCENARIO_MAX_PROMPT_TOKENS)");
}

static void test_writer_round_trips_capacity(void) {
  pd_scenario_t *s = malloc(sizeof *s), *t = malloc(sizeof *t);
  char *txt = pdt_scenario_round_trip(full_cap, s, t);
  if (txt) {
    PDT_TRUE(memcmp(&s->workload, &t->workload, sizeof s->workload) == 0);
    PDT_TRUE(memcmp(&s->workers[0], &t->workers[0], sizeof s->workers[0]) == 0);
    PDT_TRUE(memcmp(&s->workers[1], &t->workers[1], sizeof s->workers[1]) == 0);
    PDT_TRUE(strstr(txt, "\"max_running_requests\": 64") != NULL);
    PDT_TRUE(strstr(txt, "\"num_reserved_decode_tokens\": 0") != NULL);
    PDT_TRUE(strstr(txt, "\"prompt_tokens_max\": 900") != NULL);
    /* a default is left out: d0 keeps max_running_requests at 2048 */
    PDT_TRUE(strstr(strstr(txt, "\"d0\""), "max_running_requests") == NULL);
  }
  free(txt);
  free(s);
  free(t);
}

int pdt_suite_capacity_scenario(void) {
  static const pdt_case_t cases[] = {
      {"capacity keys load", test_capacity_keys_load},
      {"capacity keys rejected with JSON paths", test_capacity_keys_rejected_with_paths},
      {"the writer round-trips the capacity keys", test_writer_round_trips_capacity},
  };
  return PDT_SUITE("capacity_scenario", cases);
}
