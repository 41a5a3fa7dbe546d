/* Who the core blames and what it records: every leg that failed in the instant an attempt
 * was given up (R-OUTCOME, R-RETRY-EXCLUDE), every attempt including those that failed at
 * selection (I7) (the time budgets of R-PROGRESS are in test_dispatch_budget.c); and two
 * behaviours of the minilb model read from mini_lb's source (M1, M2; docs/spec.md 7.3). */
#include "pd_err.h"
#include "pdt_harness.h"

/* One step as the driver takes it (no end of the instant run for it); fire_raw fires the
 * core's next deadline at its time, again as one step. */
static void raw(harness_t *h, pd_event_t ev) { h_feed_raw(h, ev); }

static void fire_raw(harness_t *h) {
  uint64_t at = h_expiry(h);
  if (at == UINT64_MAX) return;
  if (at > h->now) h->now = at;
  pd_actbuf_reset(&h->out);
  pd_gw_handle_expiry(h->gw, h->now, &h->out);
}

/* The attempt the last step opened goes to another prefill and another decode than the first. */
static void new_pair_avoids(harness_t *h, uint32_t p_first, uint32_t d_first) {
  const pd_action_t *p2 = h_find(h, PD_ACT_OPEN_LEG, 0), *d2 = h_find(h, PD_ACT_OPEN_LEG, 1);
  PDT_TRUE(p2 && d2);
  if (p2 && d2) {
    PDT_TRUE(p2->worker != p_first);
    PDT_TRUE(d2->worker != d_first);
  }
}

/* Both legs answer 503 in the same instant. The first report fails the attempt; the other leg
 * is given up but stays open to the end of the instant, so its own 503 is recorded as its
 * failure and excludes it: the retry goes to the other prefill and the other decode. */
static void test_same_instant_failure_of_the_other_leg_is_its_own(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  uint32_t p_first = h_find(&h, PD_ACT_OPEN_LEG, 0)->worker;
  uint32_t d_first = h_find(&h, PD_ACT_OPEN_LEG, 1)->worker;
  pd_event_t p503 = {.kind = PD_EV_UP_HEAD, .req_id = 7, .leg_id = 1, .status = 503};
  raw(&h, p503);
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_FAILURE);
  PDT_TRUE(h_close_of(&h, 2) == NULL); /* not closed before the end of the instant */
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), -1);
  PDT_EQ_U64(pd_gw_load(h.gw, PD_ROLE_DECODE, d_first), 0); /* its load goes at once */
  pd_event_t d503 = {.kind = PD_EV_UP_HEAD, .req_id = 7, .leg_id = 2, .status = 503};
  raw(&h, d503); /* same instant: decode's own report */
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_FAILURE);
  PDT_TRUE(h_close_of(&h, 2) != NULL && h_close_of(&h, 2)->str != NULL); /* closed with abort */
  fire_raw(&h); /* the end of the instant: nothing left to settle */
  PDT_EQ_U64(h_count(&h, PD_ACT_OUTCOME), 0);
  PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 0);
  fire_raw(&h); /* the backoff: a fresh pair, both failed workers excluded */
  new_pair_avoids(&h, p_first, d_first);
  h_free(&h);
}

/* R-RETRY-EXCLUDE: decode answers 500 (its waiting timeout, S5.5) while prefill has sent
 * nothing: prefill is not blamed (cancelled) but the retry takes the untried prefill and the
 * untried decode, not the prefill that may have hung (retry-avoids-silent-prefill-partner). */
static void test_a_silent_partner_of_a_failed_attempt_is_avoided_by_the_retry(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, NONSTREAM);
  uint32_t p_first = h_find(&h, PD_ACT_OPEN_LEG, 0)->worker;
  uint32_t d_first = h_find(&h, PD_ACT_OPEN_LEG, 1)->worker;
  /* a second request takes the other pair, so round robin alone would bring request 7's
     retry back to p_first and d_first */
  pd_event_t other = {.kind = PD_EV_CLIENT_REQUEST, .req_id = 8, .path = "/generate",
                      .data = (const uint8_t *)NONSTREAM, .len = strlen(NONSTREAM)};
  h_feed(&h, other);
  PDT_TRUE(h_find(&h, PD_ACT_OPEN_LEG, 0) && h_find(&h, PD_ACT_OPEN_LEG, 0)->worker != p_first);
  h.now += 1000 * MS;
  pd_event_t d500 = {.kind = PD_EV_UP_HEAD, .req_id = 7, .leg_id = 2, .status = 500};
  raw(&h, d500);
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_FAILURE);
  fire_raw(&h); /* the end of the instant: prefill said nothing */
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_CANCELLED);
  fire_raw(&h); /* the backoff: the next attempt */
  new_pair_avoids(&h, p_first, d_first);
  h_free(&h);
}

/* A given-up leg that reports nothing in the instant is cancelled (neutral) with an abort at
 * its end: not blamed (the next attempt still avoids its worker, R-RETRY-EXCLUDE). */
static void test_a_given_up_leg_that_says_nothing_is_cancelled_at_the_end_of_the_instant(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  pd_event_t p503 = {.kind = PD_EV_UP_HEAD, .req_id = 7, .leg_id = 1, .status = 503};
  raw(&h, p503);
  PDT_TRUE(h_close_of(&h, 2) == NULL);
  fire_raw(&h);
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_CANCELLED);
  PDT_TRUE(h_close_of(&h, 2) != NULL && h_close_of(&h, 2)->str != NULL);
  h_free(&h);
}

/* After commit, a decode failure gives up prefill; a prefill error event in the same instant
 * is its own failure, not `cancelled`. */
static void test_prefill_error_in_the_instant_decode_fails_after_commit_is_recorded(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
  pd_event_t reset = {
      .kind = PD_EV_UP_ERROR, .req_id = 7, .leg_id = 2, .uperr = PD_UPSTREAM_ERROR_RESET};
  raw(&h, reset);
  PDT_TRUE(h_close_of(&h, 1) == NULL);
  const char *err = "data: {\"error\":{\"message\":\"kv\",\"code\":500}}\n\n";
  pd_event_t ev = {.kind = PD_EV_UP_DATA, .req_id = 7, .leg_id = 1,
                   .data = (const uint8_t *)err, .len = strlen(err)};
  raw(&h, ev);
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_FAILURE);
  h_free(&h);
}

/* I7 counts attempts: one that failed at selection (every breaker open) is still an attempt
 * in the record, with no worker named. */
static void test_selection_failures_are_attempts_in_the_record(void) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.breaker.failure_threshold = 1;
  c.breaker.open_ns = 3600000 * MS;
  c.retry.max_attempts = 4;
  harness_t h;
  h_init_cfg(&h, &c, 1);
  h_request(&h, NONSTREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 503, NULL); /* p0's breaker opens; d0 cancelled */
  PDT_EQ_INT(pd_gw_breaker_state(h.gw, PD_ROLE_PREFILL, 0, h.now), PD_BREAKER_OPEN);
  int attempts = 1, unnamed = 0;
  for (int i = 0; i < 8 && !h.ended; i++) {
    if (!h_fire(&h)) break;
    const pd_action_t *a;
    for (int k = 0; (a = h_find(&h, PD_ACT_ATTEMPT, k)); k++) {
      attempts++;
      PDT_EQ_INT(a->status, attempts);
      unnamed += a->flag == -1;
    }
    PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 0);
  }
  PDT_EQ_INT(attempts, 4); /* 1 that reached workers + 3 that failed at selection */
  PDT_EQ_INT(unnamed, 3);
  PDT_TRUE(h.ended);
  PDT_EQ_INT(h.head_status, 503);
  h_free(&h);
}

/* M1: mini_lb's stream handler returns its StreamingResponse before contacting a worker: the
 * client has a 200 event-stream head at once, and a refused decode cuts the stream (no 500,
 * no error event). */
static void test_minilb_stream_head_goes_out_before_any_worker(void) {
  harness_t h;
  start(&h, PD_MODE_MINILB, STREAM);
  PDT_EQ_INT(h.head_status, 200);
  const pd_action_t *hd = h_find(&h, PD_ACT_CLIENT_HEAD, 0);
  PDT_TRUE(hd && hd->flag == 1); /* text/event-stream */
  PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 2);
  h_uperr(&h, 2, PD_UPSTREAM_ERROR_CONNECT);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0); /* no second head, no 500 */
  PDT_TRUE(h.ended && h.aborted);
  PDT_EQ_INT((int)h.client_len, 0);
  h_free(&h);
}

/* M2: non-stream, mini_lb awaits prefill's JSON whenever the body has a "return_logprob" key,
 * even false: a broken prefill body then gives 500 although decode answered. Without the key
 * it answers from decode alone. */
static void minilb_nonstream(harness_t *h, const char *body) {
  h_init(h, PD_MODE_MINILB, NULL);
  h_request(h, body);
  h_leg(h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(h, PD_EV_UP_DATA, 2, 0, "{\"text\":\"ab\",\"meta_info\":{}}");
  h_leg(h, PD_EV_UP_END, 2, 0, NULL);
}

static void test_minilb_nonstream_waits_for_prefill_json_when_the_key_is_present(void) {
  harness_t h;
  minilb_nonstream(&h, "{\"text\":\"hi\",\"stream\":false,\"return_logprob\":false}");
  PDT_FALSE(h.ended); /* awaiting prefill_response.json() */
  h_uperr(&h, 1, PD_UPSTREAM_ERROR_READ);
  PDT_TRUE(h.ended);
  PDT_EQ_INT(h.head_status, 500);
  h_free(&h);
  minilb_nonstream(&h, NONSTREAM);
  PDT_TRUE(h.ended);
  PDT_EQ_INT(h.head_status, 200);
  h_free(&h);
}

/* On sockets the instant has a width (settle_ns): the partner's 503 half a millisecond later
 * is still its own failure; the settle comes at settle_ns. */
static void test_the_instant_lasts_settle_ns_for_a_socket_driver(void) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.settle_ns = 1 * MS;
  harness_t h;
  h_init_cfg(&h, &c, 1);
  h_request(&h, STREAM);
  h.now = 10 * MS;
  pd_event_t p503 = {.kind = PD_EV_UP_HEAD, .req_id = 7, .leg_id = 1, .status = 503};
  raw(&h, p503);
  PDT_EQ_U64(h_expiry(&h), 11 * MS);
  h.now = 10 * MS + MS / 2;
  pd_event_t d503 = {.kind = PD_EV_UP_HEAD, .req_id = 7, .leg_id = 2, .status = 503};
  raw(&h, d503);
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_FAILURE);
  h_free(&h);
}

/* Neither leg charged at the first-token deadline: both cancelled and closed with an abort,
 * both excluded, so the retry takes the other prefill and the other decode. */
static void expect_neither_charged(const char *body, int heads) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, body);
  uint32_t p_first = h_find(&h, PD_ACT_OPEN_LEG, 0)->worker;
  uint32_t d_first = h_find(&h, PD_ACT_OPEN_LEG, 1)->worker;
  if (heads) {
    h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
    h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  }
  PDT_EQ_U64(h_expiry(&h), 30000 * MS); /* the first-token deadline */
  h_fire(&h);
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_CANCELLED);
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_CANCELLED);
  PDT_TRUE(h_close_of(&h, 1) && h_close_of(&h, 1)->str);
  PDT_TRUE(h_close_of(&h, 2) && h_close_of(&h, 2)->str);
  PDT_FALSE(h.ended);
  h_fire(&h); /* the backoff: both excluded */
  const pd_action_t *p2 = h_find(&h, PD_ACT_OPEN_LEG, 0), *d2 = h_find(&h, PD_ACT_OPEN_LEG, 1);
  PDT_TRUE(p2 && d2 && p2->worker != p_first && d2->worker != d_first);
  h_free(&h);
}

/* "Who was only waiting" (R-OUTCOME), non-stream: neither leg answered by the first-token
 * deadline, and nothing the gateway sees tells the stalled one from the one waiting on it (a
 * non-stream head waits for the answer, S5.3). Neither worker is charged. (Before: both
 * timeout, the healthy partner's breaker fed.) */
static void test_a_nonstream_stall_nobody_can_attribute_charges_neither_worker(void) {
  expect_neither_charged(NONSTREAM, 0);
}

/* The same for a stream whose legs both sent their heads (SGLang sends a stream's head at once,
 * S5.3) and no event by the first-token deadline: a decode that never joined the room and a
 * prefill waiting for it in bootstrap look alike (decode-never-connects, bootstrap-never-served).
 * Neither is charged; both are closed with an abort and excluded from the retry. (Before: both
 * timeout, so the prefill that was only waiting fed its breaker: I4 from worker truth.) */
static void test_a_stream_stall_with_both_heads_in_charges_neither_worker(void) {
  expect_neither_charged(STREAM, 1);
}

/* With logprobs a stream's decode events are held until prefill ends (R-LOGPROB): a decode
 * that sent events has the KV and waits on prefill. When the idle deadline passes before
 * prefill's end, prefill alone stalled: timeout; decode cancelled. (Before: both timeout.) */
static void test_a_decode_holding_events_for_a_stalled_prefill_was_only_waiting(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, "{\"text\":\"hi\",\"stream\":true,\"return_logprob\":true}");
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h.now = 10 * MS;
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0); /* held: prefill's logprobs are not in */
  PDT_EQ_U64(h_expiry(&h), 10 * MS + 30000 * MS);
  h_fire(&h);
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_TIMEOUT);
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_CANCELLED);
  h_free(&h);
}

/* A multi-request driver for the 2P2D run below: what each worker was recorded. */
typedef struct {
  harness_t h;
  uint32_t recorded[2][2][4]; /* role, worker, outcome */
  uint64_t open_leg[8], open_req[8]; /* this step's OPEN_LEG actions, prefill then decode */
  uint32_t open_worker[8], n_open;
  int ended;
} fleet_t;

static void fleet_step(fleet_t *f, const pd_event_t *ev) {
  pd_actbuf_reset(&f->h.out);
  if (ev) pd_gw_feed(f->h.gw, f->h.now, ev, &f->h.out);
  else pd_gw_handle_expiry(f->h.gw, f->h.now, &f->h.out);
  for (size_t i = 0; i < f->h.out.n; i++) {
    const pd_action_t *a = &f->h.out.v[i];
    if (a->kind == PD_ACT_OUTCOME && a->worker < 2) f->recorded[a->role][a->worker][a->flag]++;
    if (a->kind == PD_ACT_CLIENT_END) f->ended++;
    if (a->kind == PD_ACT_OPEN_LEG && f->n_open < 8) {
      f->open_leg[f->n_open] = a->leg_id;
      f->open_req[f->n_open] = a->req_id;
      f->open_worker[f->n_open++] = a->worker;
    }
  }
}

/* Answer the attempts this step opened unless their decode is d1, which never answers (its
 * prefill then waits in bootstrap, as SGLang's does, S5.2). */
static void fleet_answer(fleet_t *f) {
  uint64_t legs[8], reqs[8];
  uint32_t workers[8], n = f->n_open;
  memcpy(legs, f->open_leg, sizeof legs);
  memcpy(reqs, f->open_req, sizeof reqs);
  memcpy(workers, f->open_worker, sizeof workers);
  f->n_open = 0;
  for (uint32_t i = 0; i + 1 < n; i += 2) {
    if (workers[i + 1] == 1) continue;
    for (uint32_t k = i; k < i + 2; k++) {
      const char *ans = "{\"text\":\"ab\",\"meta_info\":{}}";
      pd_event_t hd = {.kind = PD_EV_UP_HEAD, .req_id = reqs[k], .leg_id = legs[k], .status = 200};
      pd_event_t dt = {.kind = PD_EV_UP_DATA, .req_id = reqs[k], .leg_id = legs[k],
                       .data = (const uint8_t *)ans, .len = strlen(ans)};
      pd_event_t en = {.kind = PD_EV_UP_END, .req_id = reqs[k], .leg_id = legs[k]};
      fleet_step(f, &hd);
      fleet_step(f, &dt);
      fleet_step(f, &en);
    }
  }
}

/* Issue 24, section 3: 2P2D, d1 never answers, 100 non-stream requests 1 s apart. Round
 * robin pairs p1 with d1 again and again; when every such stall was charged to both legs, p1
 * (healthy, only waiting in bootstrap) was recorded timeout 25 times and its breaker opened.
 * Now no prefill is charged, no prefill breaker opens, and every request is answered 200. */
static void test_a_hung_decode_does_not_get_its_healthy_prefill_ejected(void) {
  static fleet_t f;
  memset(&f, 0, sizeof f);
  h_init(&f.h, PD_MODE_REFERENCE, NULL);
  uint64_t next_req = 0;
  for (int guard = 0; guard < 10000 && f.ended < 100; guard++) {
    uint64_t arrive = next_req < 100 ? next_req * 1000 * MS : UINT64_MAX;
    uint64_t exp = h_expiry(&f.h);
    if (arrive == UINT64_MAX && exp == UINT64_MAX) break;
    if (arrive <= exp) {
      f.h.now = arrive > f.h.now ? arrive : f.h.now;
      pd_event_t rq = {.kind = PD_EV_CLIENT_REQUEST, .req_id = ++next_req, .path = "/generate",
                       .data = (const uint8_t *)NONSTREAM, .len = strlen(NONSTREAM)};
      fleet_step(&f, &rq);
      fleet_answer(&f);
    } else {
      f.h.now = exp > f.h.now ? exp : f.h.now;
      fleet_step(&f, NULL);
      fleet_answer(&f);
    }
  }
  PDT_EQ_INT(f.ended, 100);
  for (uint32_t w = 0; w < 2; w++) {
    PDT_EQ_U64(f.recorded[PD_ROLE_PREFILL][w][PD_OUTCOME_TIMEOUT], 0);
    PDT_EQ_INT(pd_gw_breaker_state(f.h.gw, PD_ROLE_PREFILL, w, f.h.now), PD_BREAKER_CLOSED);
  }
  PDT_TRUE(f.recorded[PD_ROLE_PREFILL][1][PD_OUTCOME_CANCELLED] > 0); /* p1 met d1 */
  h_free(&f.h);
}

int pdt_suite_dispatch_blame(void) {
  static const pdt_case_t cases[] = {
      {"a same-instant failure of the other leg is recorded and excluded as its own",
       test_same_instant_failure_of_the_other_leg_is_its_own},
      {"a given-up leg that says nothing is cancelled at the end of the instant",
       test_a_given_up_leg_that_says_nothing_is_cancelled_at_the_end_of_the_instant},
      {"a prefill error in the instant decode fails after commit is recorded",
       test_prefill_error_in_the_instant_decode_fails_after_commit_is_recorded},
      {"the instant lasts settle_ns for a socket driver",
       test_the_instant_lasts_settle_ns_for_a_socket_driver},
      {"selection failures are attempts in the record", test_selection_failures_are_attempts_in_the_record},
      {"a non-stream stall nobody can attribute charges neither worker",
       test_a_nonstream_stall_nobody_can_attribute_charges_neither_worker},
      {"a stream stall with both heads in charges neither worker",
       test_a_stream_stall_with_both_heads_in_charges_neither_worker},
      {"a decode holding events for a stalled prefill was only waiting",
       test_a_decode_holding_events_for_a_stalled_prefill_was_only_waiting},
      {"a hung decode does not get its healthy prefill ejected (2P2D, 100 requests)",
       test_a_hung_decode_does_not_get_its_healthy_prefill_ejected},
      {"a silent partner of a failed attempt is avoided by the retry",
       test_a_silent_partner_of_a_failed_attempt_is_avoided_by_the_retry},
      {"minilb: the stream head goes out before any worker (M1)",
       test_minilb_stream_head_goes_out_before_any_worker},
      {"minilb: non-stream waits for prefill's JSON when the key is present (M2)",
       test_minilb_nonstream_waits_for_prefill_json_when_the_key_is_present},
  };
  return PDT_SUITE("dispatch_blame", cases);
}
