/* The core's deadlines (pd_gw_get_expiry, pd_gw_handle_expiry): the expiry is always the
 * earliest live deadline, equal deadlines fire in the order they were armed, a request's
 * deadlines leave with it, and an expiry not yet due does nothing. */
#include "pd_err.h"
#include "pdt_harness.h"

/* Reference mode with short, distinct budgets, so each deadline can be named by its time. */
static void expiry_config(pd_gw_config_t *c) {
  pd_gw_config_default(c, PD_MODE_REFERENCE);
  c->head_timeout_ns = 50 * MS;
  c->first_token_timeout_ns = 80 * MS;
  c->idle_timeout_ns = 30 * MS;
  c->total_timeout_ns = 1000 * MS;
  c->commit_timeout_ns = 0;
  c->prefill_tail_timeout_ns = 200 * MS;
}

static void feed_at(harness_t *h, uint64_t t_ms, pd_event_t ev) {
  h->now = t_ms * MS;
  h_feed(h, ev);
}

static pd_event_t request(uint64_t id, const char *body) {
  pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = id, .path = "/generate",
                   .data = (const uint8_t *)body, .len = strlen(body)};
  return ev;
}

static pd_event_t leg_ev(uint64_t id, pd_event_kind_t k, uint64_t leg, int status,
                         const char *data) {
  pd_event_t ev = {.kind = k, .req_id = id, .leg_id = leg, .status = status,
                   .data = (const uint8_t *)data, .len = data ? strlen(data) : 0};
  return ev;
}

/* Request 1 (legs 1, 2) and request 2 (legs 3, 4) interleaved: after every step the expiry is
 * the earliest deadline either holds (per-leg head 50 ms, first token 80 ms, idle 30 ms from
 * the last token, tail 200 ms after the client's end). */
static void test_the_expiry_after_each_step_is_the_earliest_live_deadline(void) {
  pd_gw_config_t c;
  expiry_config(&c);
  harness_t h;
  h_init_cfg(&h, &c, 2);
  PDT_EQ_U64(h_expiry(&h), UINT64_MAX); /* nothing armed yet */
  feed_at(&h, 0, request(1, STREAM));
  PDT_EQ_U64(h_expiry(&h), 50 * MS); /* 1: heads by 50 */
  feed_at(&h, 10, request(2, STREAM));
  PDT_EQ_U64(h_expiry(&h), 50 * MS); /* 2: heads by 60 */
  PDT_EQ_U64(pd_gw_deadlines_armed(h.gw), 2);
  feed_at(&h, 20, leg_ev(1, PD_EV_UP_HEAD, 1, 200, NULL));
  PDT_EQ_U64(h_expiry(&h), 50 * MS); /* 1's decode head is still due at 50 */
  feed_at(&h, 20, leg_ev(1, PD_EV_UP_HEAD, 2, 200, NULL));
  PDT_EQ_U64(h_expiry(&h), 60 * MS); /* 1: first token by 80; 2: heads by 60 */
  feed_at(&h, 30, leg_ev(2, PD_EV_UP_HEAD, 3, 200, NULL));
  feed_at(&h, 30, leg_ev(2, PD_EV_UP_HEAD, 4, 200, NULL));
  PDT_EQ_U64(h_expiry(&h), 80 * MS); /* 2: first token by 90 */
  feed_at(&h, 40, leg_ev(1, PD_EV_UP_DATA, 2, 0, TOK0));
  PDT_EQ_U64(h_expiry(&h), 70 * MS); /* 1 committed: idle 30 ms from its token */
  feed_at(&h, 45, leg_ev(1, PD_EV_UP_DATA, 2, 0, TOK1));
  PDT_EQ_U64(h_expiry(&h), 75 * MS);
  feed_at(&h, 50, (pd_event_t){.kind = PD_EV_CLIENT_GONE, .req_id = 2});
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 1); /* 2 settled and freed in its instant */
  PDT_EQ_U64(pd_gw_deadlines_armed(h.gw), 1);
  PDT_EQ_U64(h_expiry(&h), 75 * MS);
  feed_at(&h, 55, leg_ev(1, PD_EV_UP_DATA, 2, 0, DONE));
  feed_at(&h, 55, leg_ev(1, PD_EV_UP_END, 2, 0, NULL));
  PDT_TRUE(h.ended && !h.aborted);
  PDT_EQ_U64(h_expiry(&h), 255 * MS); /* prefill's tail after the client's end */
  PDT_TRUE(h_fire(&h));
  PDT_EQ_U64(h.now, 255 * MS);
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_CANCELLED);
  PDT_EQ_U64(h_expiry(&h), UINT64_MAX);
  PDT_EQ_U64(pd_gw_deadlines_armed(h.gw), 0);
  h_free(&h);
}

/* The request whose actions come n-th in the buffer (each request's are contiguous). */
static uint64_t nth_request(const harness_t *h, int n) {
  uint64_t last = UINT64_MAX;
  for (size_t i = 0; i < h->out.n; i++) {
    if (h->out.v[i].req_id == last) continue;
    last = h->out.v[i].req_id;
    if (n-- == 0) return last;
  }
  return UINT64_MAX;
}

/* Three requests armed for 50 ms in the order 5, 3, 9 expire in that order, not by id; a
 * step that leaves a request's deadline where it was (5's prefill head, decode's still due)
 * keeps its place. */
static void test_equal_deadlines_fire_in_the_order_they_were_armed(void) {
  pd_gw_config_t c;
  expiry_config(&c);
  harness_t h;
  h_init_cfg(&h, &c, 2);
  static const uint64_t ids[] = {5, 3, 9};
  for (int i = 0; i < 3; i++) feed_at(&h, 0, request(ids[i], STREAM));
  feed_at(&h, 0, leg_ev(5, PD_EV_UP_HEAD, 1, 200, NULL));
  PDT_EQ_U64(h_expiry(&h), 50 * MS);
  h.now = 50 * MS;
  pd_actbuf_reset(&h.out);
  pd_gw_handle_expiry(h.gw, h.now, &h.out); /* one call: the settles they arm come later */
  for (int i = 0; i < 3; i++) PDT_EQ_U64(nth_request(&h, i), ids[i]);
  PDT_EQ_U64(nth_request(&h, 3), UINT64_MAX);
  h_free(&h);
}

/* However a request ends (served, client gone, a bad request, retries exhausted), its
 * deadlines leave with it: the heap holds one entry per live request at most. */
static void test_a_request_s_deadlines_leave_when_it_ends(void) {
  pd_gw_config_t c;
  expiry_config(&c);
  c.retry.max_attempts = 1;
  harness_t h;
  h_init_cfg(&h, &c, 2);
  feed_at(&h, 0, request(1, STREAM));     /* legs 1, 2: served */
  feed_at(&h, 0, request(2, STREAM));     /* legs 3, 4: the client leaves */
  feed_at(&h, 0, request(3, NONSTREAM));  /* legs 5, 6: decode fails, no retry left */
  feed_at(&h, 0, request(4, "{\"te"));    /* malformed: answered 400 at once */
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 3);
  PDT_EQ_U64(pd_gw_deadlines_armed(h.gw), 3);
  feed_at(&h, 1, leg_ev(1, PD_EV_UP_HEAD, 1, 200, NULL));
  feed_at(&h, 1, leg_ev(1, PD_EV_UP_HEAD, 2, 200, NULL));
  feed_at(&h, 2, leg_ev(1, PD_EV_UP_DATA, 2, 0, TOK0 DONE));
  feed_at(&h, 2, leg_ev(1, PD_EV_UP_END, 2, 0, NULL));
  feed_at(&h, 3, leg_ev(1, PD_EV_UP_END, 1, 0, NULL));
  feed_at(&h, 4, (pd_event_t){.kind = PD_EV_CLIENT_GONE, .req_id = 2});
  feed_at(&h, 5, leg_ev(3, PD_EV_UP_HEAD, 6, 503, NULL));
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
  PDT_EQ_U64(pd_gw_deadlines_armed(h.gw), 0);
  PDT_EQ_U64(h_expiry(&h), UINT64_MAX);
  h_free(&h);
}

/* Asking before the expiry does nothing; at the expiry the deadline fires. */
static void test_handle_expiry_before_the_expiry_emits_nothing(void) {
  pd_gw_config_t c;
  expiry_config(&c);
  harness_t h;
  h_init_cfg(&h, &c, 2);
  feed_at(&h, 0, request(1, STREAM));
  uint64_t at = h_expiry(&h);
  PDT_EQ_U64(at, 50 * MS);
  h.now = at - 1;
  h_expire(&h);
  PDT_EQ_U64(h.out.n, 0);
  PDT_EQ_U64(h_expiry(&h), at);
  PDT_EQ_U64(pd_gw_deadlines_armed(h.gw), 1);
  h.now = at;
  h_expire(&h);
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_TIMEOUT); /* decode gave no head */
  h_free(&h);
}

/* A deadline armed while firing, even one due at once (the settle of legs given up at the
 * total deadline), waits for the next call: the driver delivers what it holds first. */
static void test_a_deadline_armed_while_firing_waits_for_the_next_call(void) {
  pd_gw_config_t c;
  expiry_config(&c);
  c.total_timeout_ns = 40 * MS; /* before the heads' 50 ms */
  harness_t h;
  h_init_cfg(&h, &c, 2);
  feed_at(&h, 0, request(1, STREAM));
  feed_at(&h, 5, request(2, STREAM)); /* due at 45: two entries, so the call could go on */
  PDT_EQ_U64(h_expiry(&h), 40 * MS);
  h.now = 40 * MS;
  pd_actbuf_reset(&h.out);
  PDT_EQ_INT(pd_gw_handle_expiry(h.gw, h.now, &h.out), 0);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLOSE_LEG), 0); /* the legs are given up, not closed yet */
  PDT_EQ_U64(h_expiry(&h), 40 * MS);            /* the end of the instant */
  pd_actbuf_reset(&h.out);
  PDT_EQ_INT(pd_gw_handle_expiry(h.gw, h.now, &h.out), 0);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLOSE_LEG), 2);
  PDT_EQ_U64(h_count(&h, PD_ACT_DONE), 1);
  PDT_EQ_U64(h_expiry(&h), 45 * MS);
  PDT_EQ_INT(pd_gw_handle_expiry(NULL, 0, &h.out), PD_ERR_INVAL);
  h_free(&h);
}

int pdt_suite_dispatch_expiry(void) {
  static const pdt_case_t cases[] = {
      {"the expiry after each step is the earliest live deadline",
       test_the_expiry_after_each_step_is_the_earliest_live_deadline},
      {"equal deadlines fire in the order they were armed",
       test_equal_deadlines_fire_in_the_order_they_were_armed},
      {"a request's deadlines leave when it ends", test_a_request_s_deadlines_leave_when_it_ends},
      {"handle_expiry before the expiry emits nothing",
       test_handle_expiry_before_the_expiry_emits_nothing},
      {"a deadline armed while firing waits for the next call",
       test_a_deadline_armed_while_firing_waits_for_the_next_call},
  };
  return PDT_SUITE("dispatch_expiry", cases);
}
