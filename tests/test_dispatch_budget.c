/* The reference's time budgets (docs/spec.md R-PROGRESS, R-TIMEOUT): a failure is ended
 * within the client's patience (the commit budget before the first byte, idle after it), and
 * healthy long work is never cut by default (a non-stream budget grows with the tokens asked;
 * a stream that keeps a healthy pace runs past the total cap, R-PROGRESS). */
#include "pdt_harness.h"

static const char *NONSTREAM_8 =
    "{\"text\":\"hi\",\"stream\":false,\"sampling_params\":{\"max_new_tokens\":8}}";
static const char *NONSTREAM_2000 =
    "{\"text\":\"hi\",\"stream\":false,\"sampling_params\":{\"max_new_tokens\":2000}}";
static const char *ANSWER = "{\"text\":\"ab\",\"meta_info\":{}}";

/* What a run did across every step: the actions worth counting. */
typedef struct {
  int opened, timeouts, cancelled;
  int outcome[8]; /* by leg id: outcome + 1, 0 none */
} run_t;

static void tally(harness_t *h, run_t *r) {
  for (size_t i = 0; i < h->out.n; i++) {
    const pd_action_t *a = &h->out.v[i];
    r->opened += a->kind == PD_ACT_OPEN_LEG;
    if (a->kind != PD_ACT_OUTCOME) continue;
    r->timeouts += a->flag == PD_OUTCOME_TIMEOUT;
    r->cancelled += a->flag == PD_OUTCOME_CANCELLED;
    if (a->leg_id < 8) r->outcome[a->leg_id] = a->flag + 1;
  }
}

/* Fire the core's deadlines while they are due no later than t, then move the clock to t. */
static void run_until(harness_t *h, run_t *r, uint64_t t) {
  for (int guard = 0; guard < 64 && h_expiry(h) <= t && !h->ended; guard++) {
    h_fire(h);
    tally(h, r);
  }
  if (t > h->now && !h->ended) h->now = t;
}

static void leg_at(harness_t *h, run_t *r, uint64_t t, pd_event_kind_t k, uint64_t leg,
                   int status, const char *data) {
  run_until(h, r, t);
  if (h->ended) return;
  h_leg(h, k, leg, status, data);
  tally(h, r);
}

static void begin(harness_t *h, run_t *r, const char *body) {
  memset(r, 0, sizeof *r);
  h_init(h, PD_MODE_REFERENCE, NULL);
  h_request(h, body);
  tally(h, r);
}

/* A non-stream leg's whole answer at time t. */
static void answer_at(harness_t *h, run_t *r, uint64_t t, uint64_t leg) {
  leg_at(h, r, t, PD_EV_UP_HEAD, leg, 200, NULL);
  leg_at(h, r, t, PD_EV_UP_DATA, leg, 0, ANSWER);
  leg_at(h, r, t, PD_EV_UP_END, leg, 0, NULL);
}

/* The request ended whole (200, no abort) on its first pair: two legs opened, none timed out
 * or cancelled, decode a success. */
static void expect_served_first_time(const harness_t *h, const run_t *r) {
  PDT_TRUE(h->ended);
  PDT_FALSE(h->aborted);
  PDT_EQ_INT(h->head_status, 200);
  PDT_EQ_INT(r->opened, 2);
  PDT_EQ_INT(r->timeouts, 0);
  PDT_EQ_INT(r->cancelled, 0);
  PDT_EQ_INT(r->outcome[2], PD_OUTCOME_SUCCESS + 1);
}

/* 2,000 tokens at 30 ms: decode answers 60 s after prefill. Its budget is idle 30 s +
 * 2,000 x 100 ms, so nothing is cut, nobody is blamed, and one attempt serves it. */
static void test_a_healthy_2000_token_nonstream_generation_is_served_on_its_first_attempt(void) {
  harness_t h;
  run_t r;
  begin(&h, &r, NONSTREAM_2000);
  answer_at(&h, &r, 20 * MS, 1);
  PDT_EQ_U64(h_expiry(&h), 20 * MS + 230000 * MS); /* idle 30 s + 2,000 x 100 ms */
  answer_at(&h, &r, 60020 * MS, 2);
  expect_served_first_time(&h, &r);
  h_free(&h);
}

/* A stream that shows a token every second for 300 s is healthy: idle (30 s) never passes
 * and the total cap (600 s) is far; the commit budget ended at its first token. */
static void test_a_healthy_300s_stream_is_not_cut(void) {
  harness_t h;
  run_t r;
  begin(&h, &r, STREAM);
  leg_at(&h, &r, 1 * MS, PD_EV_UP_HEAD, 1, 200, NULL);
  leg_at(&h, &r, 1 * MS, PD_EV_UP_HEAD, 2, 200, NULL);
  leg_at(&h, &r, 20 * MS, PD_EV_UP_DATA, 1, 0, TOK0 DONE);
  leg_at(&h, &r, 20 * MS, PD_EV_UP_END, 1, 0, NULL);
  for (uint64_t s = 0; s < 300 && !h.ended; s++)
    leg_at(&h, &r, (30 + s * 1000) * MS, PD_EV_UP_DATA, 2, 0, TOK0);
  PDT_FALSE(h.ended);
  leg_at(&h, &r, 300000 * MS, PD_EV_UP_DATA, 2, 0, DONE);
  leg_at(&h, &r, 300000 * MS, PD_EV_UP_END, 2, 0, NULL);
  expect_served_first_time(&h, &r);
  h_free(&h);
}

/* A non-stream decode that took the KV (prefill answered) and then hangs is blamed at idle +
 * 8 x 100 ms: timeout, excluded, and the request is retried on the other decode. */
static void test_a_nonstream_decode_that_hangs_after_prefill_is_blamed_within_its_budget(void) {
  harness_t h;
  run_t r;
  begin(&h, &r, NONSTREAM_8);
  uint32_t d_first = h_find(&h, PD_ACT_OPEN_LEG, 1)->worker;
  answer_at(&h, &r, 20 * MS, 1);
  PDT_EQ_INT(r.outcome[1], PD_OUTCOME_SUCCESS + 1);
  PDT_EQ_U64(h_expiry(&h), 20 * MS + 30800 * MS);
  run_until(&h, &r, 30820 * MS);
  PDT_EQ_INT(r.outcome[2], PD_OUTCOME_TIMEOUT + 1);
  PDT_FALSE(h.ended);
  run_until(&h, &r, 31000 * MS); /* the backoff */
  const pd_action_t *d2 = h_find(&h, PD_ACT_OPEN_LEG, 1);
  PDT_TRUE(d2 && d2->worker != d_first);
  h_free(&h);
}

/* Nobody answers (non-stream, defaults): 30 s first-token deadlines would take 150 s for five
 * attempts; the commit budget (90 s + 8 x 100 ms) ends the request with a 504, well within
 * the client's patience (I1: 120 s). Nobody is blamed: the legs the budget ends are
 * cancelled, and so are the three attempts' legs at their first-token deadlines, where nothing
 * tells the stalled leg from the one waiting on it (R-OUTCOME, "who was only waiting"). */
static void test_a_request_nobody_answers_ends_by_the_commit_budget(void) {
  harness_t h;
  run_t r;
  begin(&h, &r, NONSTREAM_8);
  run_until(&h, &r, 200000 * MS);
  PDT_TRUE(h.ended);
  PDT_EQ_INT(h.head_status, 504);
  PDT_EQ_U64(h.now, 90800 * MS);
  PDT_TRUE(strstr(h.client, "commit budget") != NULL);
  PDT_EQ_INT(r.opened, 8); /* attempts 1-4; the 4th ended by the budget */
  PDT_EQ_INT(r.timeouts, 0);
  PDT_EQ_INT(r.cancelled, 8);
  h_free(&h);
}

/* R-STATUS: a retry whose backoff would pass the commit budget is not started; the client
 * gets the last worker failure's status, as when the attempts are used up. */
static void test_a_retry_past_the_commit_budget_answers_the_worker_status(void) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.commit_timeout_ns = 1000 * MS;
  c.token_budget_ns = 0;
  harness_t h;
  run_t r;
  memset(&r, 0, sizeof r);
  h_init_cfg(&h, &c, 2);
  h_request(&h, NONSTREAM_8);
  tally(&h, &r);
  leg_at(&h, &r, 990 * MS, PD_EV_UP_HEAD, 2, 503, NULL); /* the backoff (>= 40 ms) passes 1 s */
  PDT_TRUE(h.ended);
  PDT_EQ_INT(h.head_status, 503);
  PDT_EQ_INT(r.opened, 2);
  h_free(&h);
}

/* A stream whose decode sends an event every step_ms from 20 ms on, for dur_ms, then [DONE]
 * (if the stream is still on). */
static void long_stream(harness_t *h, run_t *r, uint64_t step_ms, uint64_t dur_ms) {
  begin(h, r, STREAM);
  leg_at(h, r, 1 * MS, PD_EV_UP_HEAD, 1, 200, NULL);
  leg_at(h, r, 1 * MS, PD_EV_UP_HEAD, 2, 200, NULL);
  leg_at(h, r, 20 * MS, PD_EV_UP_DATA, 1, 0, TOK0 DONE);
  leg_at(h, r, 20 * MS, PD_EV_UP_END, 1, 0, NULL);
  for (uint64_t t = 20; t <= 20 + dur_ms && !h->ended; t += step_ms)
    leg_at(h, r, t * MS, PD_EV_UP_DATA, 2, 0, TOK0);
  leg_at(h, r, (20 + dur_ms) * MS, PD_EV_UP_DATA, 2, 0, DONE);
  leg_at(h, r, (20 + dur_ms) * MS, PD_EV_UP_END, 2, 0, NULL);
}

/* Issue 24, section 4 (R-PROGRESS): a stream that keeps a healthy pace (an event every 50 ms,
 * the token budget is 100 ms) runs past the 600 s total cap: 700 s, 14,000 events, served
 * whole on its first attempt. (Before, the cap cut it at 600 s with an SSE error.) */
static void test_a_healthy_stream_past_the_total_cap_is_not_cut(void) {
  harness_t h;
  run_t r;
  long_stream(&h, &r, 50, 700000);
  expect_served_first_time(&h, &r); /* decode success, nothing cancelled or timed out */
  PDT_EQ_U64(h.now, 700020 * MS);
  h_free(&h);
}

/* The bound stays: a stream slower than the pace (an event a second: each within idle) is cut
 * by the cap at 600 s as before, an SSE error and [DONE], decode recorded cancelled. */
static void test_a_stream_behind_the_pace_is_still_cut_by_the_total_cap(void) {
  harness_t h;
  run_t r;
  long_stream(&h, &r, 1000, 700000);
  PDT_TRUE(h.ended);
  PDT_FALSE(h.aborted); /* an SSE error event and [DONE], a clean end */
  PDT_EQ_U64(h.now, 600000 * MS);
  PDT_EQ_INT(r.outcome[2], PD_OUTCOME_CANCELLED + 1);
  PDT_EQ_INT(r.timeouts, 0);
  h_free(&h);
}

/* The same for a non-stream answer: 8,000 tokens earn a commit budget of 90 s + 800 s, past
 * the 600 s cap; decode answers at 700 s (88 ms a token) and is served on its first attempt.
 * (Before, the cap cut it at 600 s.) */
static void test_a_nonstream_answer_inside_its_budget_is_not_cut_by_the_total_cap(void) {
  harness_t h;
  run_t r;
  begin(&h, &r, "{\"text\":\"hi\",\"stream\":false,\"sampling_params\":{\"max_new_tokens\":8000}}");
  answer_at(&h, &r, 20 * MS, 1);
  answer_at(&h, &r, 700000 * MS, 2);
  expect_served_first_time(&h, &r);
  PDT_EQ_U64(h.now, 700000 * MS);
  h_free(&h);
}

int pdt_suite_dispatch_budget(void) {
  static const pdt_case_t cases[] = {
      {"a healthy 2,000-token non-stream generation is served on its first attempt",
       test_a_healthy_2000_token_nonstream_generation_is_served_on_its_first_attempt},
      {"a healthy 300 s stream is not cut", test_a_healthy_300s_stream_is_not_cut},
      {"a healthy stream past the 600 s total cap is not cut (R-PROGRESS)",
       test_a_healthy_stream_past_the_total_cap_is_not_cut},
      {"a non-stream answer inside its budget is not cut by the total cap",
       test_a_nonstream_answer_inside_its_budget_is_not_cut_by_the_total_cap},
      {"a stream behind the pace is still cut by the total cap",
       test_a_stream_behind_the_pace_is_still_cut_by_the_total_cap},
      {"a non-stream decode that hangs after prefill is blamed within its budget",
       test_a_nonstream_decode_that_hangs_after_prefill_is_blamed_within_its_budget},
      {"a request nobody answers ends by the commit budget",
       test_a_request_nobody_answers_ends_by_the_commit_budget},
      {"a retry past the commit budget answers the worker status",
       test_a_retry_past_the_commit_budget_answers_the_worker_status},
  };
  return PDT_SUITE("dispatch_budget", cases);
}
