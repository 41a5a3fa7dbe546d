/* R-BREAKER-BUSY: the reference's breaker tells a busy worker from a dead one. A head timeout
 * on a decode leg counts as nothing when another leg of that decode, opened before this one,
 * made progress (a token, or its success) after this one was opened (queued behind others); it
 * counts as a failure when the worker made no progress since, or a leg opened after this one
 * did (this one was skipped).
 * One prefill, one decode, failure threshold 1: a counted failure opens the breaker. */
#include "pd_err.h"
#include "pdt_harness.h"

/* Request id served in full on both legs at h->now: its decode outcome is a success. */
static void serve(harness_t *h, uint64_t id, uint64_t p, uint64_t d) {
  h_up(h, PD_EV_UP_HEAD, id, p, 200, NULL);
  h_up(h, PD_EV_UP_HEAD, id, d, 200, NULL);
  h_up(h, PD_EV_UP_DATA, id, d, 0, TOK0 DONE);
  h_up(h, PD_EV_UP_END, id, d, 0, NULL);
  h_up(h, PD_EV_UP_DATA, id, p, 0, TOK0 DONE);
  h_up(h, PD_EV_UP_END, id, p, 0, NULL);
}

static void init(harness_t *h) { h_init_ref_breaker(h, 1); }

/* Requests 1 and 2 opened 1 ms apart on the gateway of init(), then 1 s passes. */
static void open_two(harness_t *h, uint64_t *p1, uint64_t *d1, uint64_t *p2, uint64_t *d2) {
  init(h);
  h_open_stream(h, 1, p1, d1);
  h->now += 1 * MS;
  h_open_stream(h, 2, p2, d2);
  PDT_TRUE(*d1 && *d2);
  h->now += 1000 * MS;
}

/* Busy: request 1 is opened first and served while request 2 waits behind it. */
static void test_timeout_behind_a_served_leg_is_not_a_death(void) {
  harness_t h;
  uint64_t p1, d1, p2, d2;
  open_two(&h, &p1, &d1, &p2, &d2);
  serve(&h, 1, p1, d1);
  PDT_EQ_INT(h_time_out_decode(&h, 2, p2, d2), PD_BREAKER_CLOSED);
  h_free(&h);
}

/* Busy, streaming: request 1, opened first, is still streaming (a token, no end) when request
 * 2's head deadline runs out: a token is progress, as a success is. */
static void test_timeout_behind_a_streaming_leg_is_not_a_death(void) {
  harness_t h;
  uint64_t p1, d1, p2, d2;
  open_two(&h, &p1, &d1, &p2, &d2);
  h_up(&h, PD_EV_UP_HEAD, 1, p1, 200, NULL);
  h_up(&h, PD_EV_UP_HEAD, 1, d1, 200, NULL);
  h_up(&h, PD_EV_UP_DATA, 1, d1, 0, TOK0);
  PDT_EQ_INT(h_time_out_decode(&h, 2, p2, d2), PD_BREAKER_CLOSED);
  h_free(&h);
}

/* Dead: nothing served since the leg was opened; the timeout counts and the breaker opens
 * (request 1 was served before request 2 was opened). */
static void test_timeout_on_a_worker_that_served_nobody_since_counts(void) {
  harness_t h;
  init(&h);
  uint64_t p1, d1, p2, d2;
  h_open_stream(&h, 1, &p1, &d1);
  h.now += 1 * MS;
  serve(&h, 1, p1, d1);
  h.now += 1 * MS;
  h_open_stream(&h, 2, &p2, &d2);
  PDT_TRUE(d1 && d2);
  PDT_EQ_INT(h_time_out_decode(&h, 2, p2, d2), PD_BREAKER_OPEN);
  h_free(&h);
}

/* Skipped: request 2 is opened after request 1 and served while request 1 stays silent: the
 * worker is not queueing request 1 behind others (it admits in arrival order), it dropped it. */
static void test_timeout_overtaken_by_a_later_leg_counts(void) {
  harness_t h;
  uint64_t p1, d1, p2, d2;
  open_two(&h, &p1, &d1, &p2, &d2);
  serve(&h, 2, p2, d2);
  PDT_EQ_INT(h_time_out_decode(&h, 1, p1, d1), PD_BREAKER_OPEN);
  h_free(&h);
}

/* R-RETRY-BUDGET: three non-stream requests on 1P2D, retry budget 20 % of the requests in
 * the window with a floor of `floor` retries; requests 1 and 2 fail on decode with 503, one after the other. Returns the status
 * request 2's client got at once (0: none, it was retried), and its body in body. */
static int second_failure_answer(uint32_t floor, char *body, size_t cap) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.retry_budget_pct = 20;
  c.retry_budget_min = floor;
  harness_t h;
  h_init_cfg(&h, &c, 2);
  uint64_t leg[4] = {0};
  for (uint64_t id = 1; id <= 3; id++) {
    pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = id, .path = "/generate",
                     .data = (const uint8_t *)NONSTREAM, .len = strlen(NONSTREAM)};
    h_feed(&h, ev);
    const pd_action_t *a;
    for (int i = 0; (a = h_find(&h, PD_ACT_OPEN_LEG, i)); i++)
      if (a->role == PD_ROLE_DECODE) leg[id] = a->leg_id;
  }
  int st = 0;
  body[0] = 0;
  for (uint64_t id = 1; id <= 2; id++) {
    h_up(&h, PD_EV_UP_HEAD, id, leg[id], 503, NULL);
    for (size_t i = 0; id == 2 && i < h.out.n; i++) {
      const pd_action_t *a = &h.out.v[i];
      if (a->req_id != 2) continue;
      if (a->kind == PD_ACT_CLIENT_HEAD) st = a->status;
      if (a->kind == PD_ACT_CLIENT_DATA && a->len < cap) {
        memcpy(body, a->data, a->len);
        body[a->len] = 0;
      }
    }
  }
  h_free(&h);
  return st;
}

/* Three requests in the window allow 20 % of 3 = 0 retries, the floor 1: the first failure's
 * retry spends it, the second failure is answered at once with decode's 503, budget named. */
/* R-RETRY-BUDGET's defaults, as the spec states them (O4.2): 20 % of the requests in the last
 * 10 s, at least 10 retries; every other mode has no budget. */
static void test_retry_budget_defaults(void) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  PDT_EQ_INT(c.retry_budget_pct, 20);
  PDT_EQ_INT(c.retry_budget_min, 10);
  PDT_EQ_U64(c.retry_budget_window_ns, 10000000000ull);
  pd_gw_config_default(&c, PD_MODE_JOINED);
  PDT_EQ_INT(c.retry_budget_pct, 0);
}

static void test_retry_budget_refuses_a_retry_past_it(void) {
  char body[512];
  PDT_EQ_INT(second_failure_answer(1, body, sizeof body), 503);
  PDT_TRUE(strstr(body, "retry_budget_exhausted") != NULL);
}

/* With a floor of 2, the same second failure is retried (nothing for its client yet). */
static void test_retry_budget_floor_allows_a_few(void) {
  char body[512];
  PDT_EQ_INT(second_failure_answer(2, body, sizeof body), 0);
}

int pdt_suite_busy(void) {
  static const pdt_case_t cases[] = {
      {"a timeout behind a leg the worker served since is not a death (R-BREAKER-BUSY)",
       test_timeout_behind_a_served_leg_is_not_a_death},
      {"a timeout behind a leg still streaming is not a death (R-BREAKER-BUSY)",
       test_timeout_behind_a_streaming_leg_is_not_a_death},
      {"a timeout on a worker that served nobody since counts (R-BREAKER-BUSY)",
       test_timeout_on_a_worker_that_served_nobody_since_counts},
      {"a timeout overtaken by a later leg the worker served counts (R-BREAKER-BUSY)",
       test_timeout_overtaken_by_a_later_leg_counts},
      {"a retry past the retry budget is refused with the last status (R-RETRY-BUDGET)",
       test_retry_budget_refuses_a_retry_past_it},
      {"the retry budget's floor allows a few retries (R-RETRY-BUDGET)",
       test_retry_budget_floor_allows_a_few},
      {"the retry budget's defaults (R-RETRY-BUDGET)", test_retry_budget_defaults},
  };
  return PDT_SUITE("busy", cases);
}
