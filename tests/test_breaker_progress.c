/* R-BREAKER-BUSY: only a data event under a 2xx head (or a success) is progress. A worker that
 * answers an earlier leg with an error status and its error body did not serve it: a later
 * leg's head timeout on that worker still counts (docs/spec.md, "another leg of the worker
 * made progress ... (a data event under a 2xx head, or a success)"). In the reference a
 * non-2xx head ends its leg at once, so the error body that follows is dropped before it could
 * count (pd_feed.c's 2xx test is the second guard; tests/mutants.json, core/pd_feed.c:369).
 * One prefill, one decode; failure threshold 2 at the default rate (50 %): the 503 alone does
 * not open the decode's breaker, the 503 and a counted timeout do. */
#include "pd_err.h"
#include "pdt_harness.h"

#define ERROR_BODY "{\"error\":{\"message\":\"overloaded\",\"code\":503}}"

static void init(harness_t *h) { h_init_ref_breaker(h, 2); }

/* Decode leg d of request id answers 503 with its error body: a failure on d0, recorded and
 * closed at the head; the body that follows changes nothing (no action at all). */
static void answer_503(harness_t *h, uint64_t id, uint64_t p, uint64_t d) {
  h_up(h, PD_EV_UP_HEAD, id, p, 200, NULL);
  h_up(h, PD_EV_UP_HEAD, id, d, 503, NULL);
  int st = 0;
  PDT_EQ_INT(h_outcome_of(h, d, &st), PD_OUTCOME_FAILURE);
  PDT_EQ_INT(st, 503);
  PDT_TRUE(h_close_of(h, d) != NULL);
  PDT_EQ_INT(pd_gw_breaker_state(h->gw, PD_ROLE_DECODE, 0, h->now), PD_BREAKER_CLOSED);
  h_up(h, PD_EV_UP_DATA, id, d, 0, ERROR_BODY);
  PDT_EQ_U64(h->out.n, 0);
}

/* Request 2's decode, opened first, answers 503 and its error body after request 3's decode
 * was opened; request 3's head times out. Nothing the worker did was progress: the timeout
 * counts, and with the 503 the breaker opens. */
static void test_error_body_is_not_progress(void) {
  harness_t h;
  init(&h);
  uint64_t p2, d2, p3, d3;
  h_open_stream(&h, 2, &p2, &d2);
  h.now += 1 * MS;
  h_open_stream(&h, 3, &p3, &d3);
  PDT_TRUE(d2 && d3);
  h.now += 1000 * MS;
  answer_503(&h, 2, p2, d2);
  PDT_EQ_INT(h_time_out_decode(&h, 3, p3, d3), PD_BREAKER_OPEN);
  h_free(&h);
}

/* The same, with request 1 (opened before request 3) served in full under 200 heads after
 * request 3 was opened: that is progress, request 3's timeout is busy and counts as nothing,
 * and the 503 alone leaves the breaker closed. */
static void test_served_leg_is_progress_beside_an_error_body(void) {
  harness_t h;
  init(&h);
  uint64_t p1, d1, p2, d2, p3, d3;
  h_open_stream(&h, 1, &p1, &d1);
  h.now += 1 * MS;
  h_open_stream(&h, 2, &p2, &d2);
  h.now += 1 * MS;
  h_open_stream(&h, 3, &p3, &d3);
  PDT_TRUE(d1 && d2 && d3);
  h.now += 1000 * MS;
  answer_503(&h, 2, p2, d2);
  h_up(&h, PD_EV_UP_HEAD, 1, p1, 200, NULL);
  h_up(&h, PD_EV_UP_HEAD, 1, d1, 200, NULL);
  h_up(&h, PD_EV_UP_DATA, 1, d1, 0, TOK0 DONE);
  h_up(&h, PD_EV_UP_END, 1, d1, 0, NULL);
  h_up(&h, PD_EV_UP_DATA, 1, p1, 0, TOK0 DONE);
  h_up(&h, PD_EV_UP_END, 1, p1, 0, NULL);
  PDT_EQ_INT(h_time_out_decode(&h, 3, p3, d3), PD_BREAKER_CLOSED);
  h_free(&h);
}

int pdt_suite_breaker_progress(void) {
  static const pdt_case_t cases[] = {
      {"an error status's body is not progress: a later head timeout counts (R-BREAKER-BUSY)",
       test_error_body_is_not_progress},
      {"beside the same error body, a leg served under 200 heads is progress (R-BREAKER-BUSY)",
       test_served_leg_is_progress_beside_an_error_body},
  };
  return PDT_SUITE("breaker_progress", cases);
}
