/* The closed loop, the client timeout and retry policy, and load steps (docs/scenarios.md
 * "Closed loop, client timeout and retries", O5.1): the keys, the pure schedule functions,
 * and runs that show each one changes what the clients send. */
#include <stdlib.h>
#include <string.h>

#include "pd_world.h"
#include "pdt.h"
#include "pdt_scenario.h"

#define MS 1000000ull

static pd_scenario_t *parse_ok(const char *src) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[PDT_SCENARIO_ERR_BYTES] = "";
  if (!s) return NULL;
  int rc = parse_q(s, src, err);
  PDT_EQ_INT(rc, 0);
  if (rc) {
    PDT_EQ_STR(err, "");
    free(s);
    return NULL;
  }
  return s;
}

static void test_keys_load_and_round_trip(void) {
  pd_scenario_t *s = malloc(sizeof *s), *t = malloc(sizeof *t);
  if (!s || !t) return;
  char *txt = pdt_scenario_round_trip(
      MIN_DOC(",'workload':{'users':32,'requests':64,'think_ms':5,'client_timeout_ms':900,"
              "'client_retries':3,'retry_backoff_ms':50,'retry_backoff_max_ms':400,"
              "'retry_jitter':0.25,'steps':[{'at_ms':100,'factor':3},"
              "{'at_ms':200,'factor':1,'ramp_ms':50}]}"),
      s, t);
  if (txt) {
    const pd_scenario_workload_t *w = &t->workload;
    PDT_EQ_U64(w->users, 32);
    PDT_EQ_U64(w->think_ms, 5);
    PDT_EQ_U64(w->client_timeout_ms, 900);
    PDT_EQ_U64(w->client_retries, 3);
    PDT_EQ_U64(w->retry_backoff_ms, 50);
    PDT_EQ_U64(w->retry_backoff_max_ms, 400);
    PDT_TRUE(w->retry_jitter == 0.25);
    PDT_EQ_U64(w->n_steps, 2);
    PDT_TRUE(w->steps[0].factor == 3.0);
    PDT_EQ_U64(w->steps[1].ramp_ms, 50);
  }
  free(txt);
  free(s);
  free(t);
}

static void test_keys_rejected_naming_where(void) {
  expect_error(MIN_DOC(",'workload':{'users':4,'interval_ms':10}"),
               "scen.json: $.workload.users: a closed loop (users) cannot be combined with "
               "interval_ms, poisson or bursts: its users send when their last request ends");
  expect_error(MIN_DOC(",'workload':{'steps':[{'at_ms':100,'factor':2,'ramp_ms':50},"
                       "{'at_ms':120,'factor':1}]}"),
               "scen.json: $.workload.steps[1].at_ms: must be after the previous step and its "
               "ramp (at_ms 100 + ramp_ms 50), got 120");
  expect_error(MIN_DOC(",'workload':{'steps':[{'at_ms':100,'factor':0}]}"),
               "scen.json: $.workload.steps[0].factor: expected a number in 0.01..100, got 0");
  expect_error(MIN_DOC(",'workload':{'client_retries':17}"),
               "scen.json: $.workload.client_retries: expected an integer in 0..16, got 17");
  expect_error(MIN_DOC(",'workload':{'steps':[]}"),
               "scen.json: $.workload.steps: expected at least one step (leave the key out "
               "instead)");
}

static void test_load_factor_steps_and_ramps(void) {
  pd_scenario_workload_t w;
  memset(&w, 0, sizeof w);
  w.users = 4;
  PDT_TRUE(pd_scenario_load_factor(&w, 5 * MS) == 1.0); /* no steps */
  w.steps[0] = (pd_scenario_step_t){100, 3.0, 0};   /* a spike of 3x ... */
  w.steps[1] = (pd_scenario_step_t){200, 1.0, 100}; /* ... ramped back over 100 ms */
  w.n_steps = 2;
  PDT_TRUE(pd_scenario_load_factor(&w, 99 * MS) == 1.0);
  PDT_TRUE(pd_scenario_load_factor(&w, 100 * MS) == 3.0);
  PDT_TRUE(pd_scenario_load_factor(&w, 250 * MS) == 2.0);
  PDT_TRUE(pd_scenario_load_factor(&w, 300 * MS) == 1.0);
  PDT_EQ_U64(pd_scenario_users_at(&w, 0), 4);
  PDT_EQ_U64(pd_scenario_users_at(&w, 150 * MS), 12);
  PDT_EQ_U64(pd_scenario_users_at(&w, 250 * MS), 8);
  PDT_EQ_U64(pd_scenario_user_start_ns(&w, 0, 4), 100 * MS); /* the spike adds users 4..11 */
  PDT_EQ_U64(pd_scenario_user_start_ns(&w, 0, 11), 100 * MS);
  PDT_EQ_U64(pd_scenario_user_start_ns(&w, 0, 3), UINT64_MAX); /* already active */
  PDT_EQ_U64(pd_scenario_user_start_ns(&w, 1, 5), UINT64_MAX); /* a step down adds none */
  w.steps[0] = (pd_scenario_step_t){100, 2.0, 400}; /* a ramp 4 -> 8 users over 400 ms */
  w.n_steps = 1;
  PDT_EQ_U64(pd_scenario_user_start_ns(&w, 0, 4), 150 * MS); /* 4.5 users at 1/8 */
  PDT_EQ_U64(pd_scenario_user_start_ns(&w, 0, 7), 450 * MS);
  /* the open loop: a gap is the base gap over the factor where the previous arrival was */
  memset(&w, 0, sizeof w);
  w.interval_ms = 10;
  w.steps[0] = (pd_scenario_step_t){50, 2.0, 0};
  w.n_steps = 1;
  pd_prng_t r;
  pd_prng_init(&r, 1);
  PDT_EQ_U64(pd_scenario_arrival_next_ns(&w, 1, 40 * MS, &r), 50 * MS);
  PDT_EQ_U64(pd_scenario_arrival_next_ns(&w, 2, 50 * MS, &r), 55 * MS);
}

static void test_backoff_doubles_caps_and_jitters(void) {
  pd_scenario_workload_t w;
  memset(&w, 0, sizeof w);
  w.retry_backoff_ms = 100;
  w.retry_backoff_max_ms = 350;
  pd_prng_t r, r2;
  pd_prng_init(&r, 7);
  PDT_EQ_U64(pd_scenario_retry_backoff_ns(&w, 1, &r), 100 * MS);
  PDT_EQ_U64(pd_scenario_retry_backoff_ns(&w, 2, &r), 200 * MS);
  PDT_EQ_U64(pd_scenario_retry_backoff_ns(&w, 3, &r), 350 * MS);
  PDT_EQ_U64(pd_scenario_retry_backoff_ns(&w, 16, &r), 350 * MS);
  w.retry_jitter = 0.5;
  pd_prng_init(&r, 7);
  pd_prng_init(&r2, 7);
  int differs = 0;
  for (uint32_t i = 0; i < 32; i++) {
    uint64_t a = pd_scenario_retry_backoff_ns(&w, 1, &r), b = pd_scenario_retry_backoff_ns(&w, 1, &r2);
    PDT_EQ_U64(a, b); /* the same seed, the same jitter */
    PDT_TRUE(a > 50 * MS && a <= 100 * MS);
    differs |= a != 100 * MS;
  }
  PDT_TRUE(differs);
}

static void test_what_a_client_retries(void) {
  PDT_TRUE(pd_scenario_client_should_retry(1, 1, 200, 0)); /* it gave up waiting */
  PDT_TRUE(pd_scenario_client_should_retry(0, 0, 0, 0));   /* no answer */
  PDT_TRUE(pd_scenario_client_should_retry(0, 1, 503, 0));
  PDT_TRUE(pd_scenario_client_should_retry(0, 1, 429, 0));
  PDT_TRUE(pd_scenario_client_should_retry(0, 1, 408, 0));
  PDT_TRUE(pd_scenario_client_should_retry(0, 1, 200, 1)); /* a cut stream */
  PDT_FALSE(pd_scenario_client_should_retry(0, 1, 200, 0));
  PDT_FALSE(pd_scenario_client_should_retry(0, 1, 400, 0));
}

static uint32_t run(const pd_scenario_t *s, pd_world_stats_t *st, uint64_t *hash) {
  uint32_t got = 0;
  PDT_EQ_INT(pd_world_run(s, PD_MODE_REFERENCE, 1, NULL, st, &got, hash), 0);
  return got;
}

/* Two users and six jobs: at most two requests live at once, where an open loop of six
 * arrivals at t = 0 has six. */
static void test_closed_loop_keeps_users_in_flight(void) {
  pd_scenario_t *s = parse_ok(MIN_DOC(",'workload':{'users':2,'requests':6,'think_ms':50}"));
  pd_world_stats_t st;
  if (!s) return;
  PDT_EQ_U64(run(s, &st, NULL), 0);
  PDT_EQ_U64(st.requests_done, 6);
  PDT_EQ_U64(st.peak_live, 2);
  s->workload.users = 0; /* the open loop: all six at once */
  PDT_EQ_U64(run(s, &st, NULL), 0);
  PDT_EQ_U64(st.peak_live, 6);
  free(s);
}

/* A decode far slower than the client's patience: every try times out, and the client sends
 * each job 1 + client_retries times, the same way on every run. */
static void test_client_timeout_retries_each_job(void) {
  pd_scenario_t *s = parse_ok(
      "{'name':'t','workers':[{'name':'p0','role':'prefill'},{'name':'d0','role':'decode',"
      "'token_ms':1000}],'expect':{},'workload':{'users':1,'requests':2,"
      "'client_timeout_ms':100,'client_retries':2,'retry_jitter':0.5}}");
  pd_world_stats_t st;
  uint64_t h1 = 0, h2 = 0;
  if (!s) return;
  run(s, &st, &h1);
  PDT_EQ_U64(st.requests_done, 6); /* 2 jobs x 3 tries */
  run(s, &st, &h2);
  PDT_EQ_U64(h1, h2);
  s->workload.client_retries = 0;
  run(s, &st, NULL);
  PDT_EQ_U64(st.requests_done, 2);
  s->workload.client_timeout_ms = 0; /* patient: each job once, served */
  s->workload.client_retries = 2;
  PDT_EQ_U64(run(s, &st, NULL), 0);
  PDT_EQ_U64(st.requests_done, 2);
  PDT_EQ_U64(st.clean_success, 2);
  free(s);
}

/* A spike of 3x users for a while: more requests live at once than the base two. */
static void test_spike_adds_users(void) {
  pd_scenario_t *s = parse_ok(
      "{'name':'t','workers':[{'name':'p0','role':'prefill'},{'name':'d0','role':'decode',"
      "'token_ms':20}],'expect':{},'workload':{'users':2,'requests':40,'tokens':10,"
      "'think_ms':20,'steps':[{'at_ms':300,'factor':3},{'at_ms':900,'factor':1}]}}");
  pd_world_stats_t st;
  if (!s) return;
  PDT_EQ_U64(run(s, &st, NULL), 0);
  PDT_EQ_U64(st.requests_done, 40);
  PDT_EQ_U64(st.peak_live, 6);
  s->workload.n_steps = 0;
  PDT_EQ_U64(run(s, &st, NULL), 0);
  PDT_EQ_U64(st.peak_live, 2);
  free(s);
}

int pdt_suite_clients(void) {
  static const pdt_case_t cases[] = {
      {"closed-loop keys load and round-trip", test_keys_load_and_round_trip},
      {"closed-loop keys rejected naming file and key", test_keys_rejected_naming_where},
      {"load factor: steps, ramps, users, open-loop gaps", test_load_factor_steps_and_ramps},
      {"backoff doubles, caps and jitters from the seed", test_backoff_doubles_caps_and_jitters},
      {"what a client retries", test_what_a_client_retries},
      {"a closed loop keeps its users in flight", test_closed_loop_keeps_users_in_flight},
      {"a client timeout retries each job", test_client_timeout_retries_each_job},
      {"a spike adds users for its span", test_spike_adds_users},
  };
  return PDT_SUITE("clients", cases);
}
