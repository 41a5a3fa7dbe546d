/* The scenario format's newer parts, loaded and run: faults that follow the traffic (the
 * top-level "faults"), bursts, split_parts, open_delay_ms, breaker_initial and the half-open
 * probe count, and the tie seed; the loader's JSON-path errors for each and the writer's
 * round trip. Texts use single quotes, turned into JSON by q(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_scenario.h"
#include "pd_scenario_write.h"
#include "pd_world.h"
#include "pdt.h"
#include "pdt_scenario.h"
#include "pdt_net.h"

#ifndef PD_SOURCE_DIR
#define PD_SOURCE_DIR "."
#endif

#define ERR_BYTES PDT_SCENARIO_ERR_BYTES
#define INV(i) (1u << ((i) - 1))

static uint32_t run(const pd_scenario_t *s, pd_mode_t m, uint64_t seed, pd_world_stats_t *st) {
  uint32_t got = 0;
  PDT_EQ_INT(pd_world_run(s, m, seed, NULL, st, &got, NULL), 0);
  return got;
}

/* ---- loading ---- */

static const char full_new[] =
    "{'name':'t','config':{'tie_seed':'18446744073709551615','breaker_half_open_probes':3},"
    " 'workers':[{'name':'p0','role':'prefill','chunking':'split','split_parts':4,"
    "   'open_delay_ms':50,'breaker_initial':'open'},"
    "  {'name':'d0','role':'decode','breaker_initial':'half_open'}],"
    " 'faults':[{'role':'decode','request':2,'leg':[1,2],'sticky':true,'kind':'status',"
    "   'status':503},{'role':'prefill','kind':'error_after_kv','ms':30}],"
    " 'workload':{'bursts':[{'at_ms':0,'requests':3},{'at_ms':40,'requests':2}]},"
    " 'expect':{}}";

static void test_new_fields_load(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_q(s, full_new, err), 0);
  PDT_EQ_STR(err, "");
  PDT_EQ_U64(s->config.tie_seed, UINT64_MAX);
  PDT_EQ_U64(s->config.breaker_half_open_probes, 3);
  PDT_EQ_U64(s->workers[0].split_parts, 4);
  PDT_EQ_U64(s->workers[0].open_delay_ms, 50);
  PDT_EQ_INT(s->workers[0].breaker_initial, PD_BREAKER_OPEN);
  PDT_EQ_INT(s->workers[1].breaker_initial, PD_BREAKER_HALF_OPEN);
  PDT_EQ_U64(s->workers[1].split_parts, 2); /* default */
  PDT_EQ_U64(s->n_tfaults, 2);
  const pd_traffic_fault_t *a = &s->tfaults[0], *b = &s->tfaults[1];
  PDT_EQ_INT(a->role, PD_ROLE_DECODE);
  PDT_EQ_U64(a->request, 2);
  PDT_EQ_U64(a->f.nth_from, 1);
  PDT_EQ_U64(a->f.nth_to, 2);
  PDT_EQ_INT(a->is_sticky, 1);
  PDT_EQ_INT(a->f.status, 503);
  PDT_EQ_U64(b->request, PD_TRAFFIC_FAULT_ANY); /* absent: every request */
  PDT_EQ_U64(b->f.nth_from, 1);          /* absent: the first leg */
  PDT_EQ_INT(b->f.kind, PD_FAULT_ERROR_AFTER_KV);
  PDT_EQ_U64(b->f.ms, 30);
  PDT_EQ_U64(s->workload.n_bursts, 2);
  PDT_EQ_U64(s->workload.requests, 5); /* the bursts' sum */
  free(s);
}

static void test_new_fields_rejected_with_paths(void) {
  expect_error(MIN_DOC(",'faults':[{'kind':'kv_fail'}]"),
               "scen.json: $.faults[0]: missing required key \"role\"");
  expect_error(MIN_DOC(",'faults':[{'role':'decode','kind':'status'}]"),
               "scen.json: $.faults[0]: kind \"status\" needs \"status\" in 400..599");
  expect_error(MIN_DOC(",'faults':[{'role':'decode','kind':'kv_fail','prob':0.5}]"),
               "scen.json: $.faults[0].prob: unknown key");
  expect_error(MIN_DOC(",'faults':[{'role':'decode','kind':'kv_fail','sticky':1}]"),
               "scen.json: $.faults[0].sticky: expected a boolean, got 1");
  expect_error(MIN_DOC(",'faults':[{'role':'decode','kind':'kv_fail','leg':[2,1]}]"),
               "scen.json: $.faults[0].leg: expected an integer n >= 1 or [from, to] with 1 <= "
               "from <= to, got an array");
  expect_error(MIN_DOC(",'faults':[{'role':'decode','kind':'kv_fail','request':1}]"),
               "scen.json: $.faults[0].request: request 1 does not exist: the workload has 1 "
               "(counted from 0)");
  expect_error(MIN_DOC(",'workload':{'bursts':[{'at_ms':5,'requests':1},{'at_ms':5,'requests':1}]}"),
               "scen.json: $.workload.bursts[1].at_ms: must be greater than the previous burst's "
               "at_ms (5), got 5");
  expect_error(MIN_DOC(",'workload':{'bursts':[{'at_ms':0,'requests':0}]}"),
               "scen.json: $.workload.bursts[0].requests: expected an integer in 1..10000000, got 0");
  expect_error(MIN_DOC(",'workload':{'bursts':[]}"),
               "scen.json: $.workload.bursts: expected at least one burst (leave the key out instead)");
  expect_error(MIN_DOC(",'workload':{'interval_ms':5,'bursts':[{'at_ms':0,'requests':2}]}"),
               "scen.json: $.workload: bursts: cannot be combined with interval_ms or poisson");
  expect_error(MIN_DOC(",'workload':{'requests':3,'bursts':[{'at_ms':0,'requests':2}]}"),
               "scen.json: $.workload: requests: 3, but the bursts bring 2 (leave requests out, "
               "or make them equal)");
  expect_error("{'name':'t','workers':[{'name':'p0','role':'prefill','split_parts':1},"
               "{'name':'d0','role':'decode'}],'expect':{}}",
               "scen.json: $.workers[0].split_parts: expected an integer in 2..16, got 1");
  expect_error("{'name':'t','workers':[{'name':'p0','role':'prefill','breaker_initial':'ajar'},"
               "{'name':'d0','role':'decode'}],'expect':{}}",
               "scen.json: $.workers[0].breaker_initial: unknown breaker state \"ajar\" (expected "
               "closed, open or half_open)");
  expect_error(MIN_DOC(",'config':{'tie_seed':-1}"),
               "scen.json: $.config.tie_seed: expected an integer in 0..9007199254740992 or a "
               "decimal string up to 18446744073709551615, got -1");
}

static void test_writer_round_trips_new_fields(void) {
  pd_scenario_t *s = malloc(sizeof *s), *t = malloc(sizeof *t);
  char *txt = pdt_scenario_round_trip(full_new, s, t);
  if (txt) {
    PDT_TRUE(memcmp(s->tfaults, t->tfaults, sizeof s->tfaults) == 0);
    PDT_TRUE(memcmp(&s->workload, &t->workload, sizeof s->workload) == 0);
    PDT_TRUE(memcmp(&s->workers[0], &t->workers[0], sizeof s->workers[0]) == 0);
    PDT_EQ_U64(t->config.tie_seed, UINT64_MAX);
    PDT_TRUE(strstr(txt, "\"sticky\": true") && strstr(txt, "\"bursts\": ["));
  }
  free(txt);
  free(s);
  free(t);
}

static void test_burst_arrival_gaps(void) {
  pd_scenario_workload_t w;
  memset(&w, 0, sizeof w);
  w.bursts[0] = (pd_scenario_burst_t){10, 2};
  w.bursts[1] = (pd_scenario_burst_t){25, 3};
  w.n_bursts = 2;
  pd_prng_t r;
  pd_prng_init(&r, 1);
  static const uint64_t want_ms[] = {10, 0, 15, 0, 0, 0};
  for (uint32_t i = 0; i < 6; i++) PDT_EQ_U64(pd_scenario_arrival_gap_ns(&w, i, &r), want_ms[i] * 1000000ull);
  w.n_bursts = 0;
  w.interval_ms = 7;
  PDT_EQ_U64(pd_scenario_arrival_gap_ns(&w, 0, &r), 0);
  PDT_EQ_U64(pd_scenario_arrival_gap_ns(&w, 3, &r), 7000000ull);
}

/* ---- running ---- */

/* The fault follows the traffic: under minilb's random pair, every seed meets the 503 on the
 * first decode leg; the same fault tied to d0 is missed by the seeds that pick d1. */
static void test_traffic_fault_fires_whatever_pair_is_picked(void) {
  pd_scenario_t *s = pdt_load_scenario("decode-503-while-prefill-detached");
  pd_world_stats_t st;
  if (!s) return;
  uint32_t want = INV(3) | INV(14), missed_by_name = 0;
  for (uint64_t seed = 1; seed <= 8; seed++) PDT_EQ_U64(run(s, PD_MODE_MINILB, seed, &st), want);
  pd_scenario_worker_t *d0 = &s->workers[2];
  PDT_EQ_STR(d0->name, "d0");
  d0->faults[0] = s->tfaults[0].f; /* the old form: on worker d0, its first request */
  d0->n_faults = 1;
  s->n_tfaults = 0;
  for (uint64_t seed = 1; seed <= 8; seed++) missed_by_name += run(s, PD_MODE_MINILB, seed, &st) == 0;
  PDT_TRUE(missed_by_name > 0 && missed_by_name < 8); /* the picks differ by seed */
  free(s);
}

/* sticky: whichever decode worker got the first leg keeps failing; smg re-picks it. */
static void test_sticky_fault_stays_on_the_worker_that_got_it(void) {
  pd_scenario_t *s = pdt_load_scenario("retry-picks-same-failed-pair");
  pd_world_stats_t st;
  if (!s) return;
  PDT_EQ_U64(run(s, PD_MODE_REFERENCE, s->config.seed, &st), 0);
  PDT_EQ_U64(st.clean_success, 1); /* the retry went to the other worker */
  /* I16: each retry goes back to the worker that failed while the other was untried */
  PDT_EQ_U64(run(s, PD_MODE_JOINED, s->config.seed, &st), INV(3) | INV(16));
  PDT_EQ_U64(st.clean_success, 0); /* 503 on every attempt */
  s->tfaults[0].is_sticky = 0; /* without it, the second leg on the same worker succeeds */
  PDT_EQ_U64(run(s, PD_MODE_JOINED, s->config.seed, &st), INV(3) | INV(16));
  PDT_EQ_U64(st.clean_success, 1);
  free(s);
}

/* The tie seed orders same-instant events: the disconnect and the last token at 35 ms. */
static void test_tie_seed_orders_same_instant_events(void) {
  pd_scenario_t *s = pdt_load_scenario("tie-disconnect-at-last-token");
  pd_world_stats_t st;
  if (!s) return;
  uint32_t got = 0;
  uint64_t h[3] = {0, 0, 0};
  pd_world_opts_t o = {NULL, NULL, NULL, 1, 0, NULL};
  PDT_EQ_INT(pd_world_run_opts(s, PD_MODE_REFERENCE, 1, &o, &st, &got, &h[0]), 0);
  PDT_EQ_U64(st.clean_success, 0); /* insertion order: the disconnect first */
  o.tie_seed = 2;
  PDT_EQ_INT(pd_world_run_opts(s, PD_MODE_REFERENCE, 1, &o, &st, &got, &h[1]), 0);
  PDT_EQ_U64(st.clean_success, 1); /* the token first */
  PDT_EQ_INT(pd_world_run_opts(s, PD_MODE_REFERENCE, 1, &o, &st, &got, &h[2]), 0);
  PDT_EQ_U64(h[1], h[2]); /* one tie seed, one run */
  PDT_TRUE(h[0] != h[1]);
  PDT_EQ_U64(run(s, PD_MODE_REFERENCE, 1, &st), 0); /* pd_world_run: the file's tie_seed 2 */
  PDT_EQ_U64(st.clean_success, 1);
  free(s);
}

/* An abort that overtakes its late request is applied when the request arrives (Q7). */
static void test_abort_before_its_request_is_remembered(void) {
  pd_scenario_t *s = pdt_load_scenario("abort-overtakes-late-prefill-request");
  pd_world_stats_t st;
  if (!s) return;
  PDT_EQ_U64(run(s, PD_MODE_REFERENCE, 1, &st), 0);
  PDT_EQ_U64(run(s, PD_MODE_JOINED, 1, &st), INV(3)); /* late, it lands in bootstrap */
  s->workers[0].open_delay_ms = 0; /* no overtaking: a close cancels the forward pass */
  PDT_EQ_U64(run(s, PD_MODE_REFERENCE, 1, &st), 0);
  PDT_EQ_U64(run(s, PD_MODE_JOINED, 1, &st), 0);
  free(s);
}

int pdt_suite_scenario_more(void) {
  static const pdt_case_t cases[] = {
      {"new fields load", test_new_fields_load},
      {"new fields rejected with JSON paths", test_new_fields_rejected_with_paths},
      {"the writer round-trips the new fields", test_writer_round_trips_new_fields},
      {"burst arrival gaps", test_burst_arrival_gaps},
      {"a traffic fault fires whatever pair the seed picks", test_traffic_fault_fires_whatever_pair_is_picked},
      {"a sticky fault stays on the worker that got it", test_sticky_fault_stays_on_the_worker_that_got_it},
      {"the tie seed orders same-instant events", test_tie_seed_orders_same_instant_events},
      {"an abort before its request is remembered", test_abort_before_its_request_is_remembered},
  };
  return PDT_SUITE("scenario_more", cases);
}
