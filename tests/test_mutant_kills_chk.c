/* Tests written to kill survivors of `make mutate` in the checker target set (sim/pd_check.c,
 * sim/pd_check_sf.c; docs/mutation.md, tests/mutants.json) that no scenario can reach: no
 * modelled gateway commits the violation the mutant hides. Each names the mutant it kills and
 * the judgement a user could name that the mutant breaks. The records are built by hand, as in
 * tests/test_check.c (tests/pdt_check.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pd_sse.h"
#include "pdt.h"
#include "pdt_check.h"

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

/* sim/pd_check.c close_bound_ns: `b < grace && (rq->gone || b)` -> `||` (seed-2 sample): a
 * mode's tail longer than the grace would become I2's bound. pd_check.h: "either bound above
 * the grace is the grace". A reference whose tail is 2 s, a grace of 1 s: a leg closed 1.5 s
 * after the client's end is I2. */
static void test_a_tail_longer_than_the_grace_does_not_extend_i2(void) {
  fixture_t *f = clean();
  PDT_TRUE(f != NULL);
  if (!f) return;
  PDT_EQ_U64(f->s.config.grace_ms, 1000);
  f->j.is_cancel_bound = 1;
  f->j.cancel_end_ns = 2000 * MS;
  f->p.t_gw_closed = f->rq.t_end + 1500 * MS;
  PDT_EQ_U64(judge(f), BIT(PD_INVARIANT_ORPHAN_LEG));
  free(f);
}

/* sim/pd_check.c check_loads: `uint64_t worker_end = 0` -> 1 (seed-2 sample): a leg closed at
 * virtual time 0 ends its worker's part at 0, not 1 ns later; a load released 1 ns past the
 * grace after it is I10 (time 0 counts as a time, as test_check.c holds for I2 and I3). */
static void test_a_load_released_just_past_the_grace_after_a_leg_closed_at_0_is_i10(void) {
  fixture_t *f = clean();
  PDT_TRUE(f != NULL);
  if (!f) return;
  f->p.t_open = 0;
  f->p.t_slot_taken = 0;
  f->p.t_slot_freed = 0;
  f->p.is_slot_freed = 1;
  f->p.t_gw_closed = 0;
  f->rq.load_t_rel[0][0] = f->s.config.grace_ms * MS + 1;
  PDT_EQ_U64(judge(f), BIT(PD_INVARIANT_LOAD_TRUTH));
  free(f);
}

/* The fixture's request, failed: a 502 error head, its decode failed without a status. */
static void fail_it(fixture_t *f) {
  f->rq.head_status = 502;
  f->rq.is_sse_head = 0;
  f->rq.saw_done = 0;
  f->d.truth = PD_TRUTH_FAILED;
  f->d.outcome = PD_OUTCOME_FAILURE;
  f->rq.was_healthy = 1;
}

/* sim/pd_check.c check_served: `l->fault >= 0` -> `>= 1` (seed-2 sample): a leg struck by its
 * worker's first scripted fault (index 0) is a fault like any other, and a request it failed
 * is no I15 (not every worker was healthy for it). With no fault it is I15. */
static void test_a_request_failed_by_a_workers_first_fault_is_not_i15(void) {
  fixture_t *f = clean();
  PDT_TRUE(f != NULL);
  if (!f) return;
  fail_it(f);
  PDT_EQ_U64(judge(f), BIT(PD_INVARIANT_SERVED));
  free(f);
  f = clean();
  PDT_TRUE(f != NULL);
  if (!f) return;
  fail_it(f);
  f->d.fault = 0;
  PDT_EQ_U64(judge(f), 0);
  free(f);
}

/* sim/pd_check.c check_served: `int legs = 0` -> 1 (seed-2 sample): I15's reason says "no leg
 * was sent" when the gateway sent none (a 503 with no leg at all), not "no leg reached a
 * worker", which names a different fault (legs lost on the way). */
static void test_i15_says_no_leg_was_sent_when_none_was(void) {
  fixture_t *f = clean();
  PDT_TRUE(f != NULL);
  if (!f) return;
  fail_it(f);
  f->rq.head_status = 503;
  f->rq.legs = NULL;
  f->rq.n_legs = 0;
  memset(f->rq.load_w, 0, sizeof f->rq.load_w);
  char reason[160];
  PDT_EQ_U64(pd_check_request(&f->j, &f->rq, reason, sizeof reason), BIT(PD_INVARIANT_SERVED));
  PDT_TRUE(strstr(reason, "no leg was sent") != NULL);
  free(f);
}

/* sim/pd_check.c openai_body_ok: `k < n` -> `k <= n` (seed-2 sample): an OpenAI answer whose
 * text spells one token more than its usage counts (n + 1 tokens, over 4 KiB of text) is not a
 * clean answer of n tokens. */
static void test_an_openai_body_with_a_token_too_many_is_not_clean(void) {
  enum { N = 700 };
  fixture_t *f = clean();
  char *body = malloc(16 * 1024);
  PDT_TRUE(f != NULL && body != NULL);
  if (!f || !body) {
    free(f);
    free(body);
    return;
  }
  f->rq.is_stream = 0;
  f->rq.is_sse_head = 0;
  f->rq.saw_done = 0;
  f->rq.tokens = N;
  f->rq.next_token = 0;
  for (int extra = 0; extra < 2; extra++) {
    int at = snprintf(body, 64, "{\"choices\":[{\"index\":0,\"text\":\"");
    for (int k = 0; k < N + extra; k++) at += snprintf(body + at, 32, "tok%d ", k);
    at += snprintf(body + at, 96, "\"}],\"usage\":{\"completion_tokens\":%d}}", N);
    PDT_TRUE(at > 4096 + 64);
    f->rq.body.len = 0;
    f->rq.is_clean = 0;
    PDT_EQ_INT(pd_check_client_data(&f->rq, (const uint8_t *)body, (size_t)at), 0);
    PDT_EQ_U64(judge(f), 0);
    PDT_EQ_INT(f->rq.is_clean, !extra); /* n tokens: clean; n + 1: not */
  }
  pd_buf_free(NULL, &f->rq.body);
  free(body);
  free(f);
}

/* sim/pd_check.c pd_check_client_data: `rq->token_error = 1` on a framer overflow -> 0 (seed-2
 * sample): a client stream carrying an event larger than the SSE framer's limit
 * (PD_SSE_MAX_EVENT_BYTES) cannot be read token by token, and the request is I6 even when it
 * ends with [DONE] and every token counted. */
static void test_a_client_event_past_the_framer_limit_is_i6(void) {
  fixture_t *f = clean();
  size_t n = PD_SSE_MAX_EVENT_BYTES + 16;
  char *big = malloc(n);
  PDT_TRUE(f != NULL && big != NULL);
  if (!f || !big) {
    free(f);
    free(big);
    return;
  }
  pd_sse_init(&f->rq.sse, NULL);
  memcpy(big, "data: ", 6);
  memset(big + 6, 'x', n - 6); /* one event, not ended: past the limit before its blank line */
  PDT_EQ_INT(pd_check_client_data(&f->rq, (const uint8_t *)big, n), 0);
  PDT_EQ_U64(judge(f), BIT(PD_INVARIANT_COMMIT));
  pd_sse_free(&f->rq.sse);
  free(big);
  free(f);
}

/* sim/pd_check.c check_loads: "load never released" is I9; PD_INVARIANT_LOAD_BALANCE ->
 * PD_INVARIANT_LOAD_TRUTH (line 435) would report it as I10. No modelled gateway leaks a load,
 * so no row expects it. A decode load left at 1 is I9 alone. */
static void test_a_load_never_released_is_i9(void) {
  fixture_t *f = clean();
  PDT_TRUE(f != NULL);
  if (!f) return;
  f->rq.load_bal[1][0] = 1;
  PDT_EQ_U64(judge(f), BIT(PD_INVARIANT_LOAD_BALANCE));
  free(f);
}

/* sim/pd_check.c check_legs: R-OUTCOME is the reference's rule; PD_MODE_REFERENCE ->
 * PD_MODE_VLLM_TOY_PROXY (line 411) would judge it of the toy proxy instead. The reference never
 * blames a leg that only waited on its partner, so no row shows it: a reference-mode leg so
 * blamed is I4. */
static void test_a_reference_leg_blamed_for_its_partner_is_i4(void) {
  fixture_t *f = clean();
  PDT_TRUE(f != NULL);
  if (!f) return;
  f->d.is_partner_blamed = 1;
  PDT_EQ_U64(judge(f), BIT(PD_INVARIANT_OUTCOME));
  free(f);
}

/* sim/pd_check.c check_rooms: the shared-room scan starts at item 0; `int i = 0` -> 1 (line 340)
 * would miss a room item 0 shares with item 1. No modelled gateway shares rooms between batch
 * items, so no row shows it: both legs carrying rooms {7, 7} is I8. */
static void test_batch_items_0_and_1_sharing_a_room_is_i8(void) {
  static uint64_t rooms[2] = {7, 7};
  fixture_t *f = clean();
  PDT_TRUE(f != NULL);
  if (!f) return;
  f->p.rooms = f->d.rooms = rooms;
  f->p.n_rooms = f->d.n_rooms = 2;
  PDT_EQ_U64(judge(f), BIT(PD_INVARIANT_ROOMS));
  f->p.rooms = f->d.rooms = NULL;
  free(f);
}

/* sim/pd_check.c check_error_visible: `if (ok2xx || !rq->head_status)` -> `&&` survived (seed
 * 1 on 1370b96): a 2xx head is final. A committed 200 stream whose prefill then answered 500
 * shows its failure with an SSE error event; comparing its head with the worker's 500 would
 * ask the impossible (a status cannot change after the head). The same record without the
 * error event is I14: the judgement is live. */
static void test_a_committed_200_stream_with_an_error_event_is_not_i14(void) {
  for (int with_event = 1; with_event >= 0; with_event--) {
    fixture_t *f = clean();
    PDT_TRUE(f != NULL);
    if (!f) return;
    f->rq.saw_done = 0;
    f->rq.saw_error_event = with_event;
    f->p.injected_status = 500;
    f->p.truth = PD_TRUTH_FAILED;
    f->p.outcome = PD_OUTCOME_FAILURE;
    uint32_t v = judge(f) & BIT(PD_INVARIANT_ERROR_VISIBLE);
    PDT_EQ_U64(v, with_event ? 0 : BIT(PD_INVARIANT_ERROR_VISIBLE));
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
      {"I2: a mode's tail longer than the grace does not extend the bound",
       test_a_tail_longer_than_the_grace_does_not_extend_i2},
      {"I10: a load released just past the grace after a leg closed at time 0",
       test_a_load_released_just_past_the_grace_after_a_leg_closed_at_0_is_i10},
      {"I15: a request failed by its worker's first scripted fault is not I15",
       test_a_request_failed_by_a_workers_first_fault_is_not_i15},
      {"I15 says no leg was sent when the gateway sent none",
       test_i15_says_no_leg_was_sent_when_none_was},
      {"an OpenAI body with a token more than its usage is not clean",
       test_an_openai_body_with_a_token_too_many_is_not_clean},
      {"I6: a client event past the SSE framer's limit",
       test_a_client_event_past_the_framer_limit_is_i6},
      {"I9: a load never released", test_a_load_never_released_is_i9},
      {"I4: a reference leg blamed for its partner", test_a_reference_leg_blamed_for_its_partner_is_i4},
      {"I8: batch items 0 and 1 sharing a room", test_batch_items_0_and_1_sharing_a_room_is_i8},
      {"I14: a committed 200 stream with an error event is not judged by its worker's status",
       test_a_committed_200_stream_with_an_error_event_is_not_i14},
  };
  return PDT_SUITE("mutant_kills_chk", cases);
}
