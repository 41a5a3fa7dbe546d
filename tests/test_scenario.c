/* pd_scenario: the scenario file loader. Scenario texts are written with single quotes and
 * turned into JSON by q() so they stay readable here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pd_err.h"
#include "pd_scenario.h"
#include "pdt.h"

#define ERR_BYTES 1024

/* The minimum a file must say: two workers and an expect object. */
#define PAIR "'workers':[{'name':'p0','role':'prefill'},{'name':'d0','role':'decode'}]"
#define MIN_DOC(extra) "{'name':'t'," PAIR ",'expect':{}" extra "}"

/* Single quotes -> double quotes (the texts here contain no apostrophes). */
static char *q(const char *src) {
  size_t n = strlen(src);
  char *t = malloc(n + 1);
  if (!t) return NULL;
  for (size_t i = 0; i <= n; i++) t[i] = src[i] == '\'' ? '"' : src[i];
  return t;
}

/* Parse src (single-quoted) as "scen.json". */
static int parse_q(pd_scenario_t *s, const char *src, char *err) {
  char *t = q(src);
  if (!t) return PD_ERR_NOMEM;
  int rc = pd_scenario_parse(s, "scen.json", t, strlen(t), err, ERR_BYTES);
  free(t);
  return rc;
}

/* Parse and expect failure with exactly this code and message. */
static void expect_error(const char *src, int code, const char *msg) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_q(s, src, err), code);
  PDT_EQ_STR(err, msg);
  free(s);
}

static const char full_doc[] =
    "{'name':'decode-503-before-first-token','description':'decode answers 503',"
    " 'tags':['seed-1','G6'],"
    " 'config':{'prefill_policy':'random','decode_policy':'power_of_two','max_attempts':5,"
    "  'request_timeout_ms':1800000,'first_token_timeout_ms':2000,'idle_timeout_ms':3000,"
    "  'total_timeout_ms':4000,'tail_timeout_ms':5000,'breaker_failure_threshold':10,"
    "  'breaker_open_ms':60000,'bootstrap_timeout_ms':1000,'waiting_timeout_ms':2000,"
    "  'commit_timeout_ms':3500,'token_budget_ms':20,"
    "  'deadline_ms':9000,'grace_ms':500,'net_us':250,'seed':'12345678901234567890'},"
    " 'workers':[{'name':'p0','role':'prefill','forward_ms':30,'kv_ms':6,'first_token_ms':11,"
    "   'token_ms':7,'chunking':'split','crash_at_ms':100,'restart_at_ms':200,"
    "   'faults':[{'kind':'prefill_lag','ms':150,'nth':[2,4],'prob':0.5}]},"
    "  {'name':'d0','role':'decode','chunking':'coalesce',"
    "   'faults':[{'kind':'status','status':503,'nth':1},"
    "             {'kind':'hang_mid_stream','after_tokens':3}]},"
    "  {'name':'d1','role':'decode'}],"
    " 'workload':{'requests':100,'route':'/v1/chat/completions','stream':0.75,'logprob':true,"
    "  'batch':4,'tokens':16,'interval_ms':10,'poisson':true,'disconnect_at_ms':50,"
    "  'disconnect_prob':0.25,'fault_rate':0.125},"
    " 'expect':{'joined':'pass','pr1150':['I3','I2'],'minilb':['I14'],'reference':'pass'}}";

static void check_full_config(const pd_scenario_t *s) {
  const pd_scenario_config_t *c = &s->config;
  PDT_EQ_STR(c->prefill_policy, "random");
  PDT_EQ_STR(c->decode_policy, "power_of_two");
  PDT_EQ_U64(c->max_attempts, 5);
  PDT_EQ_U64(c->request_timeout_ms, 1800000);
  PDT_EQ_U64(c->first_token_timeout_ms, 2000);
  PDT_EQ_U64(c->idle_timeout_ms, 3000);
  PDT_EQ_U64(c->total_timeout_ms, 4000);
  PDT_EQ_U64(c->tail_timeout_ms, 5000);
  PDT_EQ_U64(c->breaker_failure_threshold, 10);
  PDT_EQ_U64(c->breaker_open_ms, 60000);
  PDT_EQ_U64(c->bootstrap_timeout_ms, 1000);
  PDT_EQ_U64(c->waiting_timeout_ms, 2000);
  PDT_EQ_U64(c->deadline_ms, 9000);
  PDT_EQ_U64(c->commit_timeout_ms, 3500);
  PDT_EQ_U64(c->token_budget_ms, 20);
  PDT_EQ_U64(c->grace_ms, 500);
  PDT_EQ_U64(c->net_us, 250);
  PDT_EQ_U64(c->seed, 12345678901234567890ULL);
}

static void check_full_workers(const pd_scenario_t *s) {
  const pd_scenario_worker_t *p = &s->workers[0], *d = &s->workers[1];
  PDT_EQ_U64(s->n_workers, 3);
  PDT_EQ_STR(p->name, "p0");
  PDT_EQ_INT(p->role, PD_ROLE_PREFILL);
  PDT_EQ_U64(p->forward_ms, 30);
  PDT_EQ_U64(p->kv_ms, 6);
  PDT_EQ_U64(p->first_token_ms, 11);
  PDT_EQ_U64(p->token_ms, 7);
  PDT_EQ_INT(p->chunking, PD_CHUNK_SPLIT);
  PDT_EQ_U64(p->crash_at_ms, 100);
  PDT_EQ_U64(p->restart_at_ms, 200);
  PDT_EQ_U64(p->n_faults, 1);
  PDT_EQ_INT(p->faults[0].kind, PD_FAULT_PREFILL_LAG);
  PDT_EQ_U64(p->faults[0].ms, 150);
  PDT_EQ_U64(p->faults[0].nth_from, 2);
  PDT_EQ_U64(p->faults[0].nth_to, 4);
  PDT_TRUE(p->faults[0].prob == 0.5);
  PDT_EQ_STR(d->name, "d0");
  PDT_EQ_INT(d->role, PD_ROLE_DECODE);
  PDT_EQ_INT(d->chunking, PD_CHUNK_COALESCE);
  PDT_EQ_U64(d->n_faults, 2);
  PDT_EQ_INT(d->faults[0].kind, PD_FAULT_STATUS);
  PDT_EQ_INT(d->faults[0].status, 503);
  PDT_TRUE(d->faults[0].prob == 1.0);
  PDT_EQ_INT(d->faults[1].kind, PD_FAULT_HANG_MID_STREAM);
  PDT_EQ_U64(d->faults[1].after_tokens, 3);
  PDT_EQ_U64(d->faults[1].nth_from, 0);
  PDT_EQ_U64(d->faults[1].nth_to, 0);
  PDT_EQ_STR(s->workers[2].name, "d1");
  PDT_EQ_U64(s->workers[2].forward_ms, 20); /* per-worker defaults */
}

static void check_full_workload(const pd_scenario_t *s) {
  const pd_scenario_workload_t *w = &s->workload;
  PDT_EQ_U64(w->requests, 100);
  PDT_EQ_INT(w->route, PD_ROUTE_CHAT);
  PDT_TRUE(w->stream == 0.75);
  PDT_TRUE(w->logprob == 1.0);
  PDT_EQ_U64(w->batch, 4);
  PDT_EQ_U64(w->tokens, 16);
  PDT_EQ_U64(w->interval_ms, 10);
  PDT_TRUE(w->poisson == 1.0);
  PDT_EQ_U64(w->disconnect_at_ms, 50);
  PDT_TRUE(w->disconnect_prob == 0.25);
  PDT_TRUE(w->fault_rate == 0.125);
}

static void test_full_example_loads_every_field(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_q(s, full_doc, err), 0);
  PDT_EQ_STR(err, "");
  PDT_EQ_STR(s->path, "scen.json");
  PDT_EQ_STR(s->name, "decode-503-before-first-token");
  PDT_EQ_STR(s->description, "decode answers 503");
  PDT_EQ_U64(s->n_tags, 2);
  PDT_EQ_STR(s->tags[0], "seed-1");
  PDT_EQ_STR(s->tags[1], "G6");
  check_full_config(s);
  check_full_workers(s);
  check_full_workload(s);
  PDT_TRUE(s->expect[PD_MODE_JOINED].is_set);
  PDT_EQ_U64(s->expect[PD_MODE_JOINED].violated_mask, 0);
  PDT_EQ_U64(s->expect[PD_MODE_PR1150].violated_mask, (1u << 1) | (1u << 2));
  PDT_EQ_U64(s->expect[PD_MODE_MINILB].violated_mask, 1u << 13);
  PDT_TRUE(s->expect[PD_MODE_REFERENCE].is_set);
  free(s);
}

static void test_defaults_applied_when_keys_absent(void) {
  pd_scenario_t *s = malloc(sizeof *s), *d = malloc(sizeof *d);
  char err[ERR_BYTES];
  if (s && d) {
    PDT_EQ_INT(parse_q(s, MIN_DOC(""), err), 0);
    pd_scenario_defaults(d);
    PDT_EQ_STR(s->config.prefill_policy, "round_robin");
    PDT_EQ_STR(s->config.decode_policy, "round_robin");
    PDT_EQ_U64(s->config.bootstrap_timeout_ms, 300000);
    PDT_EQ_U64(s->config.waiting_timeout_ms, 300000);
    PDT_EQ_U64(s->config.deadline_ms, 120000);
    PDT_EQ_U64(s->config.grace_ms, 1000);
    PDT_EQ_U64(s->config.net_us, 100);
    PDT_EQ_U64(s->config.seed, 1);
    PDT_EQ_U64(s->config.max_attempts, 0);
    PDT_EQ_U64(s->workers[1].first_token_ms, 10);
    PDT_EQ_U64(s->workers[1].token_ms, 5);
    PDT_EQ_U64(s->workers[0].forward_ms, 20);
    PDT_EQ_U64(s->workers[0].kv_ms, 5);
    PDT_EQ_INT(s->workers[0].chunking, PD_CHUNK_EVENT);
    PDT_EQ_U64(s->workload.requests, 1);
    PDT_EQ_INT(s->workload.route, PD_ROUTE_GENERATE);
    PDT_TRUE(s->workload.stream == 1.0 && s->workload.logprob == 0.0);
    PDT_TRUE(s->workload.disconnect_prob == 1.0 && s->workload.fault_rate == 0.0);
    PDT_EQ_U64(s->workload.tokens, 8);
    PDT_EQ_U64(s->n_tags, 0);
    for (int m = 0; m < PD_MODE_COUNT; m++) PDT_FALSE(s->expect[m].is_set);
    /* defaults() makes the same pair the minimal file spells out */
    PDT_EQ_U64(d->n_workers, 2);
    PDT_EQ_STR(d->workers[0].name, "p0");
    PDT_EQ_INT(d->workers[1].role, PD_ROLE_DECODE);
    PDT_TRUE(memcmp(s->workers, d->workers, sizeof s->workers) == 0);
  }
  free(s);
  free(d);
}

static void test_workers_array_replaces_default_pair(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_q(s, "{'name':'t','expect':{},'workers':[{'name':'d9','role':'decode'},"
                        "{'name':'p9','role':'prefill'}]}", err), 0);
  PDT_EQ_U64(s->n_workers, 2);
  PDT_EQ_STR(s->workers[0].name, "d9");
  PDT_EQ_STR(s->workers[1].name, "p9");
  free(s);
}

static void test_unknown_key_names_path_at_three_depths(void) {
  expect_error(MIN_DOC(",'colour':1"), PD_ERR_FIELD, "scen.json: $.colour: unknown key");
  expect_error(MIN_DOC(",'config':{'seed':2,'colour':'red'}"), PD_ERR_FIELD,
               "scen.json: $.config.colour: unknown key");
  expect_error("{'name':'t','expect':{},'workers':[{'name':'p','role':'prefill'},"
               "{'name':'d','role':'decode','faults':[{'kind':'truncate','colour':0}]}]}",
               PD_ERR_FIELD, "scen.json: $.workers[1].faults[0].colour: unknown key");
}

static void test_wrong_type_names_path_and_expected_type(void) {
  expect_error(MIN_DOC(",'workload':{'tokens':-1}"), PD_ERR_FIELD,
               "scen.json: $.workload.tokens: expected an integer in 0..100000, got -1");
  expect_error(MIN_DOC(",'workload':{'tokens':'8'}"), PD_ERR_FIELD,
               "scen.json: $.workload.tokens: expected an integer in 0..100000, got \"8\"");
  /* R-ZERO-TOKENS: a stated 0 is SGLang's; vLLM refuses it (V1.29) */
  expect_error("{'name':'t','workers':[{'name':'p0','role':'prefill','protocol':'vllm'},"
               "{'name':'d0','role':'decode','protocol':'vllm'}],'expect':{},"
               "'workload':{'tokens':0,'route':'/v1/completions'}}",
               PD_ERR_FIELD,
               "scen.json: $.workload.tokens: 0 is refused by vLLM's sampling parameters "
               "(max_tokens must be at least 1, V1.29) and a worker speaks vllm; 0 is for sglang "
               "workers (R-ZERO-TOKENS)");
  expect_error(MIN_DOC(",'workload':{'stream':'yes'}"), PD_ERR_FIELD,
               "scen.json: $.workload.stream: expected a boolean or a number in 0..1, got "
               "\"yes\"");
  expect_error(MIN_DOC(",'workload':{'poisson':1}"), PD_ERR_FIELD,
               "scen.json: $.workload.poisson: expected a boolean, got 1");
  expect_error(MIN_DOC(",'config':[]"), PD_ERR_FIELD,
               "scen.json: $.config: expected an object, got an array");
  expect_error("{'name':7," PAIR ",'expect':{}}", PD_ERR_FIELD,
               "scen.json: $.name: expected a string, got 7");
  expect_error(MIN_DOC(",'workload':{'fault_rate':1.5}"), PD_ERR_FIELD,
               "scen.json: $.workload.fault_rate: expected a number in 0..1, got 1.5");
}

static void test_integers_must_be_whole_and_in_range(void) {
  expect_error(MIN_DOC(",'workload':{'batch':1.5}"), PD_ERR_FIELD,
               "scen.json: $.workload.batch: expected an integer in 0..1024, got 1.5");
  expect_error(MIN_DOC(",'workload':{'batch':-1}"), PD_ERR_FIELD,
               "scen.json: $.workload.batch: expected an integer in 0..1024, got -1");
  expect_error(MIN_DOC(",'config':{'grace_ms':1e30}"), PD_ERR_FIELD,
               "scen.json: $.config.grace_ms: expected an integer in 0..1000000000, got 1e+30");
  expect_error(MIN_DOC(",'workload':{'requests':10000001}"), PD_ERR_FIELD,
               "scen.json: $.workload.requests: expected an integer in 1..10000000, got 10000001");
  expect_error(MIN_DOC(",'workload':{'requests':2000000,'interval_ms':1000}"), PD_ERR_FIELD,
               "scen.json: $.workload: requests * interval_ms = 2000000000 ms exceeds "
               "1000000000 ms (PD_SCENARIO_MAX_MS)");
}

static const char fault_doc[] =
    "{'name':'t','expect':{},'workers':[{'name':'p','role':'prefill'},"
    "{'name':'d','role':'decode','faults':[%s]}]}";

/* Parse fault_doc with `faults` spliced in; the decode worker's faults land in *s. */
static int parse_faults(pd_scenario_t *s, const char *faults, char *err) {
  char doc[1024];
  snprintf(doc, sizeof doc, fault_doc, faults);
  return parse_q(s, doc, err);
}

static void test_nth_integer_means_one_request(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_faults(s, "{'kind':'reset_before_head','nth':3},{'kind':'truncate'}", err),
             0);
  PDT_EQ_U64(s->workers[1].faults[0].nth_from, 3);
  PDT_EQ_U64(s->workers[1].faults[0].nth_to, 3);
  PDT_EQ_U64(s->workers[1].faults[1].nth_from, 0); /* absent: every request */
  PDT_EQ_U64(s->workers[1].faults[1].nth_to, 0);
  PDT_EQ_INT(parse_faults(s, "{'kind':'truncate','nth':[2,2]}", err), 0);
  PDT_EQ_U64(s->workers[1].faults[0].nth_from, 2);
  PDT_EQ_U64(s->workers[1].faults[0].nth_to, 2);
  free(s);
}

static void test_nth_range_must_be_ordered_and_positive(void) {
  static const char *const bad[] = {"[3,2]", "[0,1]", "[1]", "[1,2,3]", "0", "[1,'2']"};
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES], f[64];
  if (!s) return;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(f, sizeof f, "{'kind':'truncate','nth':%s}", bad[i]);
    PDT_EQ_INT(parse_faults(s, f, err), PD_ERR_FIELD);
    PDT_TRUE(strncmp(err, "scen.json: $.workers[1].faults[0].nth: expected ", 48) == 0);
  }
  free(s);
}

static void test_fault_kinds_and_status(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES], f[96];
  if (!s) return;
  for (int k = 0; k < PD_FAULT_KIND_COUNT; k++) {
    snprintf(f, sizeof f, "{'kind':'%s','status':429}", pd_fault_kind_name((pd_fault_kind_t)k));
    PDT_EQ_INT(parse_faults(s, f, err), 0);
    PDT_EQ_INT(s->workers[1].faults[0].kind, k);
  }
  PDT_EQ_STR(pd_fault_kind_name(PD_FAULT_KIND_COUNT), "?");
  free(s);
  expect_error("{'name':'t','expect':{},'workers':[{'name':'p','role':'prefill'},"
               "{'name':'d','role':'decode','faults':[{'kind':'hang'}]}]}",
               PD_ERR_FIELD,
               "scen.json: $.workers[1].faults[0].kind: unknown fault kind \"hang\" (expected "
               "status, hang_before_head, hang_mid_stream, reset_before_head, reset_mid_stream, "
               "sse_error, truncate, slow_drip, connect_refused, bootstrap_never_served, "
               "never_connect, kv_fail, prefill_lag, body_error, error_after_kv, net_reset or "
               "response_lost)");
  expect_error("{'name':'t','expect':{},'workers':[{'name':'p','role':'prefill'},"
               "{'name':'d','role':'decode','faults':[{'kind':'status'}]}]}",
               PD_ERR_FIELD,
               "scen.json: $.workers[1].faults[0]: kind \"status\" needs \"status\" in 400..599");
  expect_error("{'name':'t','expect':{},'workers':[{'name':'p','role':'prefill'},"
               "{'name':'d','role':'decode','faults':[{'status':503}]}]}",
               PD_ERR_FIELD, "scen.json: $.workers[1].faults[0]: missing required key \"kind\"");
}

static void test_expect_list_is_exact_mask(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_q(s, "{'name':'t'," PAIR ",'expect':{'pr1150':['I14','I1','I7'],"
                        "'joined':[]}}", err), 0);
  PDT_TRUE(s->expect[PD_MODE_PR1150].is_set);
  PDT_EQ_U64(s->expect[PD_MODE_PR1150].violated_mask, (1u << 13) | 1u | (1u << 6));
  PDT_TRUE(s->expect[PD_MODE_JOINED].is_set);
  PDT_EQ_U64(s->expect[PD_MODE_JOINED].violated_mask, 0);
  PDT_FALSE(s->expect[PD_MODE_MINILB].is_set);
  PDT_FALSE(s->expect[PD_MODE_REFERENCE].is_set);
  free(s);
  expect_error("{'name':'t'," PAIR ",'expect':{'joined':['I2','I2']}}", PD_ERR_FIELD,
               "scen.json: $.expect.joined[1]: duplicate invariant \"I2\"");
  expect_error("{'name':'t'," PAIR ",'expect':{'joined':['I99']}}", PD_ERR_FIELD,
               "scen.json: $.expect.joined[0]: expected an invariant ID I1..I26, got \"I99\"");
  expect_error("{'name':'t'," PAIR ",'expect':{'joined':'fail'}}", PD_ERR_FIELD,
               "scen.json: $.expect.joined: expected \"pass\", a list of invariant IDs such "
               "as [\"I2\", \"I3\"] or {\"deployment_limit\": [...], \"why\": \"...\"}, got "
               "\"fail\"");
  /* a deployment limit: the exact set, and why; each part named when wrong */
  expect_error("{'name':'t'," PAIR ",'expect':{'joined':{'deployment_limit':['I19']}}}", PD_ERR_FIELD,
               "scen.json: $.expect.joined: a deployment limit needs both \"deployment_limit\" "
               "(the invariants) and \"why\" (why no gateway can pass)");
  expect_error("{'name':'t'," PAIR ",'expect':{'joined':{'deployment_limit':[],'why':'w'}}}",
               PD_ERR_FIELD, "scen.json: $.expect.joined.deployment_limit: expected at least one "
               "invariant ID (a deployment limit violates something)");
  expect_error("{'name':'t'," PAIR ",'expect':{'joined':{'deployment_limit':['I3'],'why':'w',"
               "'note':1}}}", PD_ERR_FIELD, "scen.json: $.expect.joined.note: unknown or duplicate "
               "key (expected \"deployment_limit\" and \"why\")");
}

/* "unexercised": {mode: reason} declares the modes in which a fault cannot fire. */
static void test_unexercised_declares_modes_with_a_reason(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_q(s, MIN_DOC(",'unexercised':{'minilb':'never retries'}"), err), 0);
  PDT_EQ_STR(s->unexercised[PD_MODE_MINILB], "never retries");
  PDT_EQ_STR(s->unexercised[PD_MODE_REFERENCE], "");
  free(s);
  expect_error(MIN_DOC(",'unexercised':{'fast':'x'}"), PD_ERR_FIELD,
               "scen.json: $.unexercised.fast: unknown mode (expected joined, pr1150, minilb, "
               "reference, vllm-toy-proxy, mooncake-proxy or llmd-sidecar)");
  expect_error(MIN_DOC(",'unexercised':{'minilb':''}"), PD_ERR_FIELD,
               "scen.json: $.unexercised.minilb: expected the reason, a string of 1..159 "
               "characters, got \"\"");
  expect_error(MIN_DOC(",'unexercised':['minilb']"), PD_ERR_FIELD,
               "scen.json: $.unexercised: expected an object, got an array");
}

static void test_expect_unknown_mode_rejected(void) {
  expect_error("{'name':'t'," PAIR ",'expect':{'fast':'pass'}}", PD_ERR_FIELD,
               "scen.json: $.expect.fast: unknown mode (expected joined, pr1150, minilb, "
               "reference, vllm-toy-proxy, mooncake-proxy or llmd-sidecar)");
  expect_error("{'name':'t'," PAIR ",'expect':{'joined':'pass','joined':'pass'}}",
               PD_ERR_FIELD, "scen.json: $.expect.joined: duplicate key");
  expect_error("{'name':'t'," PAIR "}", PD_ERR_FIELD,
               "scen.json: $: missing required key \"expect\"");
}

static void test_worker_set_rules(void) {
  expect_error("{'name':'t','expect':{},'workers':[{'name':'d0','role':'decode'},"
               "{'name':'d1','role':'decode'}]}",
               PD_ERR_FIELD,
               "scen.json: $.workers: no prefill worker (need at least one prefill and one "
               "decode)");
  expect_error("{'name':'t','expect':{},'workers':[{'name':'p','role':'prefill'}]}",
               PD_ERR_FIELD, "scen.json: $.workers: expected 2..64 workers, got 1");
  expect_error("{'name':'t','expect':{},'workers':[{'name':'p','role':'prefill'},"
               "{'name':'p','role':'decode'}]}",
               PD_ERR_FIELD,
               "scen.json: $.workers[1].name: duplicate worker name \"p\" (also workers[0])");
  expect_error("{'name':'t','expect':{},'workers':[{'name':'p','role':'prefill',"
               "'crash_at_ms':50,'restart_at_ms':50},{'name':'d','role':'decode'}]}",
               PD_ERR_FIELD,
               "scen.json: $.workers[0].restart_at_ms: must be greater than crash_at_ms (50), "
               "got 50");
  expect_error("{'name':'t','expect':{},'workers':[{'role':'prefill'}]}", PD_ERR_FIELD,
               "scen.json: $.workers[0]: missing required key \"name\"");
}

static void test_too_many_workers_is_a_limit(void) {
  char doc[8192];
  size_t n = (size_t)snprintf(doc, sizeof doc, "{'name':'t','expect':{},'workers':[");
  for (unsigned i = 0; i <= PD_SCENARIO_MAX_WORKERS && n < sizeof doc; i++)
    n += (size_t)snprintf(doc + n, sizeof doc - n, "%s{'name':'w%u','role':'%s'}", i ? "," : "",
                          i, i % 2 ? "decode" : "prefill");
  snprintf(doc + n, sizeof doc - n, "]}");
  expect_error(doc, PD_ERR_LIMIT,
               "scen.json: $.workers: more than 64 workers (PD_SCENARIO_MAX_WORKERS)");
}

static void test_malformed_json_reports_line_and_column(void) {
  expect_error("{\n  'name': 't',\n  'workers': [1, 2,}\n}", PD_ERR_JSON,
               "scen.json: $: malformed JSON at byte 36 (line 3:20)");
  expect_error(MIN_DOC("") " x", PD_ERR_JSON,
               "scen.json: $: unexpected data after the JSON value at byte 98 (line 1:99)");
  expect_error("", PD_ERR_JSON, "scen.json: $: malformed JSON at byte 0 (line 1:1)");
}

static void test_seed_string_round_trips_64_bits(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_q(s, MIN_DOC(",'config':{'seed':'18446744073709551615'}"), err), 0);
  PDT_EQ_U64(s->config.seed, UINT64_MAX);
  PDT_EQ_INT(parse_q(s, MIN_DOC(",'config':{'seed':'9007199254740993'}"), err), 0);
  PDT_EQ_U64(s->config.seed, 9007199254740993ULL); /* 2^53 + 1: lost as a JSON number */
  PDT_EQ_INT(parse_q(s, MIN_DOC(",'config':{'seed':42}"), err), 0);
  PDT_EQ_U64(s->config.seed, 42);
  static const char *const bad[] = {"'18446744073709551616'", "'-1'", "''", "' 1'",
                                    "9007199254740994", "1.5"};
  char doc[256];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(doc, sizeof doc, MIN_DOC(",'config':{'seed':%s}"), bad[i]);
    PDT_EQ_INT(parse_q(s, doc, err), PD_ERR_FIELD);
    PDT_TRUE(strncmp(err, "scen.json: $.config.seed: expected ", 35) == 0);
  }
  free(s);
}

static void test_strings_routes_and_policies(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_q(s, MIN_DOC(",'workload':{'route':'/v1/completions'}"), err), 0);
  PDT_EQ_INT(s->workload.route, PD_ROUTE_COMPLETIONS);
  free(s);
  expect_error(MIN_DOC(",'workload':{'route':'/generate?x=1'}"), PD_ERR_FIELD,
               "scen.json: $.workload.route: unknown route \"/generate?x=1\" (expected "
               "/generate, /v1/completions or /v1/chat/completions)");
  expect_error(MIN_DOC(",'config':{'decode_policy':'least_load'}"), PD_ERR_FIELD,
               "scen.json: $.config.decode_policy: unknown policy \"least_load\" (expected "
               "random, round_robin or power_of_two)");
  expect_error("{'name':''," PAIR ",'expect':{}}", PD_ERR_FIELD,
               "scen.json: $.name: expected a non-empty string");
  expect_error(MIN_DOC(",'tags':['123456789012345678901234']"), PD_ERR_FIELD,
               "scen.json: $.tags[0]: expected at most 23 characters, got 24");
  expect_error(MIN_DOC(",'tags':['a','b','c','d','e','f','g','h','i']"), PD_ERR_LIMIT,
               "scen.json: $.tags: more than 8 tags");
  expect_error(MIN_DOC(",'name':'u'"), PD_ERR_FIELD, "scen.json: $.name: duplicate key");
}

static void test_invariant_ids_and_names(void) {
  PDT_EQ_INT(pd_invariant_parse("I7"), 7);
  PDT_EQ_INT(pd_invariant_parse("I1"), 1);
  PDT_EQ_INT(pd_invariant_parse("I14"), 14);
  PDT_EQ_INT(pd_invariant_parse("I17"), 17);
  static const char *const bad[] = {"I0", "I99", "I07", "i7", "I", "I7x", "I140", "", "7"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) PDT_EQ_INT(pd_invariant_parse(bad[i]), 0);
  PDT_EQ_INT(pd_invariant_parse(NULL), 0);
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_TERMINATION), "termination");
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_ATTEMPTS), "attempts");
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_ERROR_VISIBLE), "error-visible");
  PDT_EQ_STR(pd_invariant_name(0), "?");
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_SERVED), "served");
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_RETRY_FAILED), "retry-onto-failed");
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_QUIESCENCE), "quiescence");
  PDT_EQ_INT(pd_invariant_parse("I20"), PD_INVARIANT_DISAGGREGATED);
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_DISAGGREGATED), "disaggregated");
  PDT_EQ_STR(pd_invariant_name(21), "pair-group");
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_GOODPUT_FLOOR), "goodput-floor");
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_COUNT + 1), "?");
}

/* Writes text to a fresh temporary file; returns its path in buf or "" on failure. */
static void write_temp(char *buf, size_t n, const char *text, size_t len) {
  snprintf(buf, n, "/tmp/pdt_scenario_XXXXXX");
  int fd = mkstemp(buf);
  if (fd < 0 || write(fd, text, len) != (ssize_t)len) buf[0] = '\0';
  if (fd >= 0) close(fd);
}

static void test_load_reads_file_and_keeps_path(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES], path[64];
  char *t = q(full_doc);
  if (s && t) {
    write_temp(path, sizeof path, t, strlen(t));
    PDT_EQ_INT(pd_scenario_load(s, path, err, sizeof err), 0);
    PDT_EQ_STR(s->path, path);
    PDT_EQ_U64(s->config.seed, 12345678901234567890ULL);
    unlink(path);
    PDT_EQ_INT(pd_scenario_load(s, "/nonexistent/x.json", err, sizeof err), PD_ERR_IO);
    PDT_EQ_STR(err, "/nonexistent/x.json: cannot open: No such file or directory");
  }
  free(t);
  free(s);
}

static void test_load_rejects_oversized_file(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char *big = malloc(PD_SCENARIO_MAX_FILE_BYTES + 1);
  char err[ERR_BYTES], path[64];
  if (s && big) {
    memset(big, ' ', PD_SCENARIO_MAX_FILE_BYTES + 1);
    write_temp(path, sizeof path, big, PD_SCENARIO_MAX_FILE_BYTES + 1);
    PDT_EQ_INT(pd_scenario_load(s, path, err, sizeof err), PD_ERR_TOO_LARGE);
    PDT_TRUE(strstr(err, "exceeds the limit of 1048576 bytes") != NULL);
    unlink(path);
  }
  free(big);
  free(s);
}

static void test_short_error_buffer_is_truncated_safely(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[8];
  char *t = q(MIN_DOC(",'colour':1"));
  if (s && t) {
    PDT_EQ_INT(pd_scenario_parse(s, "scen.json", t, strlen(t), err, sizeof err), PD_ERR_FIELD);
    PDT_EQ_STR(err, "scen.js");
    PDT_EQ_INT(pd_scenario_parse(s, "scen.json", t, strlen(t), NULL, 0), PD_ERR_FIELD);
  }
  free(t);
  free(s);
}

int pdt_suite_scenario(void) {
  static const pdt_case_t cases[] = {
      {"full example loads every field", test_full_example_loads_every_field},
      {"defaults applied when keys are absent", test_defaults_applied_when_keys_absent},
      {"workers array replaces the default pair", test_workers_array_replaces_default_pair},
      {"unknown key names its path at three depths", test_unknown_key_names_path_at_three_depths},
      {"wrong type names path and expected type", test_wrong_type_names_path_and_expected_type},
      {"integers must be whole and in range", test_integers_must_be_whole_and_in_range},
      {"nth 3 means [3,3]", test_nth_integer_means_one_request},
      {"nth range must be ordered and positive", test_nth_range_must_be_ordered_and_positive},
      {"fault kinds by name, status needs a status", test_fault_kinds_and_status},
      {"expect list parsed into the exact mask", test_expect_list_is_exact_mask},
      {"unknown mode key in expect rejected", test_expect_unknown_mode_rejected},
      {"unexercised declares modes with a reason", test_unexercised_declares_modes_with_a_reason},
      {"missing prefill, too few or duplicate workers rejected", test_worker_set_rules},
      {"more than 64 workers is a limit error", test_too_many_workers_is_a_limit},
      {"malformed JSON reports line:column", test_malformed_json_reports_line_and_column},
      {"64-bit seed string round-trips exactly", test_seed_string_round_trips_64_bits},
      {"strings, routes and policies checked", test_strings_routes_and_policies},
      {"invariant IDs and names", test_invariant_ids_and_names},
      {"load reads the file and keeps its path", test_load_reads_file_and_keeps_path},
      {"load rejects a file over 1 MiB", test_load_rejects_oversized_file},
      {"short error buffer truncated safely", test_short_error_buffer_is_truncated_safely},
  };
  return PDT_SUITE("scenario", cases);
}
