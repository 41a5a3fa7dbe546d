/* Tests written to kill survivors of `make mutate` in the checker target set (sim/pd_check.c,
 * sim/pd_check_sf.c; docs/mutation.md, tests/mutants.json) that no scenario can reach: no
 * modelled gateway commits the violation the mutant hides. Each names the mutant it kills and
 * the judgement a user could name that the mutant breaks. The records are built by hand, as in
 * tests/test_check.c. */
#include <stdlib.h>

#include "pd_check.h"
#include "pdt.h"

#define MS 1000000ull
#define BIT(i) (1u << ((i) - 1))

typedef struct fixture {
  pd_scenario_t s;
  pd_judge_t j;
  pd_world_stats_t st;
  pd_client_request_t rq;
  pd_worker_leg_t p, d;
} fixture_t;

/* One streaming request of 2 tokens on (p0, d0) that went perfectly, judged at t = 1 s. */
static fixture_t *clean(void) {
  fixture_t *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  pd_scenario_defaults(&f->s);
  f->j = (pd_judge_t){.s = &f->s, .mode = PD_MODE_REFERENCE, .max_attempts = 5,
                      .now = 1000 * MS, .stats = &f->st};
  pd_client_request_t *r = &f->rq;
  r->is_stream = 1;
  r->tokens = 2;
  r->next_token = 2;
  r->ended = 1;
  r->t_end = 100 * MS;
  r->head_status = 200;
  r->is_sse_head = 1;
  r->saw_done = 1;
  r->core_done = 1;
  r->attempts = 1;
  pd_worker_leg_t *legs[2] = {&f->p, &f->d};
  for (int i = 0; i < 2; i++) {
    pd_worker_leg_t *l = legs[i];
    l->leg_id = (uint64_t)i + 1;
    l->attempt = 1;
    l->role = i ? PD_ROLE_DECODE : PD_ROLE_PREFILL;
    l->worker = (uint32_t)i; /* defaults: p0 then d0 */
    l->room = 42;
    l->rooms_hash = 4242;
    l->n_rooms = 1;
    l->truth = PD_TRUTH_OK;
    l->wstate = PD_WORKER_LEG_DONE;
    l->slot_taken = 1;
    l->t_slot_taken = 1 * MS;
    l->t_slot_freed = 90 * MS;
    l->t_open = 1 * MS;
    l->t_gw_closed = 95 * MS;
    l->outcomes = 1;
    l->outcome = PD_OUTCOME_SUCCESS;
    l->fault = -1;
  }
  f->p.next_in_req = &f->d;
  r->legs = &f->p;
  r->n_legs = 2;
  r->load_w[0][0] = 1;
  r->load_w[1][0] = 1;
  r->load_t_rel[0][0] = 95 * MS;
  r->load_t_rel[1][0] = 95 * MS;
  return f;
}

static uint32_t judge(fixture_t *f) {
  char reason[160];
  return pd_check_request(&f->j, &f->rq, reason, sizeof reason);
}

static void test_the_fixture_is_clean(void) {
  fixture_t *f = clean();
  PDT_TRUE(f != NULL);
  if (!f) return;
  PDT_EQ_U64(judge(f), 0);
  PDT_TRUE(f->rq.is_clean);
  free(f);
}

/* sim/pd_check.c check_tokens: `int decode_ok = 0` -> 1 survived: I5 is also a clean answer
 * whose decode never succeeded (its tokens cannot be the generation the client asked for),
 * not only one that is short of tokens. Every token arrived, the stream ended with [DONE], but
 * the only decode leg failed (truth failed, recorded failure): I5 alone. */
static void test_a_clean_answer_without_a_decode_that_succeeded_is_i5(void) {
  fixture_t *f = clean();
  PDT_TRUE(f != NULL);
  if (!f) return;
  f->d.truth = PD_TRUTH_FAILED;
  f->d.outcome = PD_OUTCOME_FAILURE;
  PDT_EQ_U64(judge(f), BIT(PD_INVARIANT_FALSE_SUCCESS));
  free(f);
}

/* sim/pd_check.c check_loads: the "released twice" finding is I9 (load-balance);
 * PD_INVARIANT_LOAD_BALANCE -> PD_INVARIANT_LOAD_TRUTH survived: no modelled gateway releases
 * a load twice (smg's guard decrements saturate, R3.11), so no row expects I9. A balance that
 * went below 0 is I9 alone, not I10. */
static void test_a_load_released_twice_is_i9(void) {
  fixture_t *f = clean();
  PDT_TRUE(f != NULL);
  if (!f) return;
  f->rq.load_neg = 1;
  PDT_EQ_U64(judge(f), BIT(PD_INVARIANT_LOAD_BALANCE));
  free(f);
}

/* sim/pd_check.c check_error_visible: `head_status < 300` -> `< 299` survived: every 2xx is
 * a success head, 299 too (a third-party gateway judged by conform may send any 2xx). A 299
 * stream that ends without [DONE] and without an SSE error event, its decode failed, hides the
 * failure: I14 (with 200 the same record is I14 too). */
static void test_a_failed_299_stream_without_an_error_event_is_i14(void) {
  for (int status = 200; status <= 299; status += 99) {
    fixture_t *f = clean();
    PDT_TRUE(f != NULL);
    if (!f) return;
    f->rq.head_status = status;
    f->rq.saw_done = 0;
    f->d.truth = PD_TRUTH_FAILED;
    f->d.outcome = PD_OUTCOME_FAILURE;
    PDT_EQ_U64(judge(f), BIT(PD_INVARIANT_ERROR_VISIBLE));
    free(f);
  }
}

int pdt_suite_mutant_kills_chk(void) {
  static const pdt_case_t cases[] = {
      {"the hand-built record is clean", test_the_fixture_is_clean},
      {"I5: a clean answer without a decode that succeeded",
       test_a_clean_answer_without_a_decode_that_succeeded_is_i5},
      {"I9: a load released twice", test_a_load_released_twice_is_i9},
      {"I14: a failed 299 stream without an error event",
       test_a_failed_299_stream_without_an_error_event_is_i14},
  };
  return PDT_SUITE("mutant_kills_chk", cases);
}
