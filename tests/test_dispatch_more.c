/* More reference rules through the feed API: the tail after the client's end, failures after
 * commit, exhausted retries, idle and total deadlines, rooms and rids per attempt, a client
 * leaving during backoff, and breaker probes. */
#include "pd_err.h"
#include "pdt_harness.h"

static void test_tail_expiry_aborts_a_lagging_prefill_without_blame(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0 DONE);
  PDT_TRUE(h.ended && !h.aborted); /* the client is not held for prefill */
  PDT_TRUE(h_armed_later(&h)); /* the tail deadline */
  h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
  PDT_TRUE(h_fire(&h));
  const pd_action_t *c = h_close_of(&h, 1);
  PDT_TRUE(c && c->str != NULL); /* closed with /abort_request */
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_CANCELLED);
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
  h_free(&h);
}

static void test_prefill_failure_after_commit_is_its_own_and_stream_goes_on(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
  h_leg(&h, PD_EV_UP_HEAD, 1, 500, NULL);
  int st = 0;
  PDT_EQ_INT(h_outcome_of(&h, 1, &st), PD_OUTCOME_FAILURE);
  PDT_EQ_INT(st, 500);
  PDT_EQ_U64(pd_gw_load(h.gw, PD_ROLE_PREFILL, 0), 0);
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), -1); /* decode not blamed */
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK1 DONE);
  PDT_TRUE(h.ended && !h.aborted);
  PDT_EQ_STR(h.client, TOK0 TOK1 DONE);
  h_free(&h);
}

static void test_exhausted_retries_preserve_the_worker_status(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, NONSTREAM);
  uint64_t decode_leg = 2;
  int attempts = 0;
  for (int guard = 0; guard < 10 && !h.ended; guard++) {
    attempts++;
    h_leg(&h, PD_EV_UP_HEAD, decode_leg, 429, NULL);
    if (!h_fire(&h)) break;
    const pd_action_t *d = h_find(&h, PD_ACT_OPEN_LEG, 1);
    if (d) decode_leg = d->leg_id;
  }
  PDT_EQ_INT(attempts, 5); /* smg's default schedule: 5 attempts (R2.2) */
  PDT_EQ_INT(h.head_status, 429); /* not collapsed to 500 or 503 (G11) */
  PDT_TRUE(strstr(h.client, "\"error\"") != NULL);
  h_free(&h);
}

static void test_idle_deadline_ends_stream_with_error_event(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h.now = 5 * MS;
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
  PDT_EQ_U64(h_expiry(&h), 30005 * MS); /* idle 30 s from the token */
  h_fire(&h);
  PDT_TRUE(strstr(h.client, "\"error\"") && strstr(h.client, "[DONE]"));
  const pd_action_t *c = h_close_of(&h, 2);
  PDT_TRUE(c && c->str != NULL);
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_TIMEOUT);
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_CANCELLED);
  h_free(&h);
}

static void test_a_stream_leg_without_a_head_times_out_alone_after_5s(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  PDT_EQ_U64(h_expiry(&h), 5000 * MS); /* the head deadline comes first */
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  PDT_EQ_U64(h_expiry(&h), 5000 * MS); /* decode's head deadline stays */
  h.now = 5000 * MS;
  h_expire(&h);
  const pd_action_t *c = h_close_of(&h, 2);
  PDT_TRUE(c && c->str != NULL); /* closed and aborted: a hung request holds a slot */
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_TIMEOUT);
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_CANCELLED);
  PDT_TRUE(h_armed_later(&h)); /* backoff, then a fresh pair */
  h_free(&h);
}

static void test_first_token_deadline_blames_only_the_headless_leg(void) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.head_timeout_ns = 0; /* only the first-token deadline */
  harness_t h;
  h_init_cfg(&h, &c, 2);
  h_request(&h, STREAM);
  uint64_t at = h_expiry(&h);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL); /* prefill answered its head; decode never did */
  h.now = at;
  h_expire(&h);
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_TIMEOUT);
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_CANCELLED); /* it was waiting for decode */
  h_free(&h);
}

static void test_no_retry_when_backoff_would_pass_the_total_deadline(void) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.total_timeout_ns = 40 * MS; /* the first backoff is 50 ms +/- 20 % */
  harness_t h;
  h_init_cfg(&h, &c, 2);
  h_request(&h, NONSTREAM);
  h_leg(&h, PD_EV_UP_HEAD, 2, 503, NULL);
  PDT_EQ_INT(h.head_status, 503);
  PDT_TRUE(h.ended);
  h_free(&h);
}

static void test_each_attempt_gets_fresh_53bit_rooms_and_a_fixed_width_rid(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  char rid1[64] = "";
  double room1 = 0;
  for (int attempt = 0; attempt < 2; attempt++) {
    const pd_action_t *o = h_find(&h, PD_ACT_OPEN_LEG, 0);
    PDT_TRUE(o != NULL);
    if (!o) break;
    cJSON *j = cJSON_ParseWithLength((const char *)o->data, o->len);
    const cJSON *room = cJSON_GetObjectItem(j, "bootstrap_room");
    const char *rid = cJSON_GetStringValue(cJSON_GetObjectItem(j, "rid"));
    PDT_TRUE(cJSON_IsNumber(room) && room->valuedouble < 9007199254740992.0);
    PDT_TRUE(rid && strlen(rid) == 22 && strncmp(rid, "pdref-", 6) == 0);
    if (attempt == 0) {
      snprintf(rid1, sizeof rid1, "%s", rid ? rid : "");
      room1 = room ? room->valuedouble : 0;
    } else {
      PDT_TRUE(rid && strcmp(rid, rid1) != 0);
      PDT_TRUE(room && room->valuedouble != room1);
    }
    cJSON_Delete(j);
    uint64_t d = h_find(&h, PD_ACT_OPEN_LEG, 1)->leg_id;
    h_leg(&h, PD_EV_UP_HEAD, d, 503, NULL);
    h_fire(&h);
  }
  h_free(&h);
}

static void test_client_leaving_during_backoff_ends_everything(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 2, 503, NULL);
  PDT_TRUE(h_armed_later(&h)); /* the backoff */
  uint64_t at = h_expiry(&h);
  pd_event_t gone = {.kind = PD_EV_CLIENT_GONE, .req_id = 7};
  h_feed(&h, gone);
  PDT_EQ_U64(h_count(&h, PD_ACT_DONE), 1);
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
  PDT_EQ_U64(h_expiry(&h), UINT64_MAX); /* its deadlines went with it */
  PDT_EQ_U64(pd_gw_deadlines_armed(h.gw), 0);
  h.now = at;
  h_expire(&h);
  PDT_EQ_U64(h.out.n, 0); /* no attempt after the client left */
  h_free(&h);
}

static void test_half_open_breaker_admits_one_probe_at_a_time(void) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.breaker.failure_threshold = 1;
  c.breaker.open_ns = 100 * MS;
  c.retry.max_attempts = 1;
  harness_t h;
  h_init_cfg(&h, &c, 2);
  h_request(&h, NONSTREAM); /* req 7 fails on its decode: its breaker opens */
  uint32_t bad = h_find(&h, PD_ACT_OPEN_LEG, 1)->worker;
  h_leg(&h, PD_EV_UP_HEAD, 2, 503, NULL);
  PDT_EQ_INT(pd_gw_breaker_state(h.gw, PD_ROLE_DECODE, bad, h.now), PD_BREAKER_OPEN);
  h.now += 200 * MS; /* past open_ns: half-open */
  int to_bad = 0;
  for (uint64_t id = 100; id < 104; id++) { /* four requests while the probe is in flight */
    pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = id, .path = "/generate",
                     .data = (const uint8_t *)NONSTREAM, .len = strlen(NONSTREAM)};
    h_feed(&h, ev);
    const pd_action_t *d = h_find(&h, PD_ACT_OPEN_LEG, 1);
    if (d && d->worker == bad) to_bad++;
  }
  PDT_EQ_INT(to_bad, 1);
  h_free(&h);
}

/* R-BREAKER-BOUND: with two decodes, once one's breaker is open the other's never opens,
 * however it fails (max(1, n/2) of a role may be out at once, O4.3). */
static void test_breaker_ejection_is_bounded_to_half_a_role(void) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.breaker.failure_threshold = 1;
  c.retry.max_attempts = 1;
  harness_t h;
  h_init_cfg(&h, &c, 2);
  h_request(&h, NONSTREAM);
  uint32_t bad = h_find(&h, PD_ACT_OPEN_LEG, 1)->worker;
  h_leg(&h, PD_EV_UP_HEAD, 2, 503, NULL);
  PDT_EQ_INT(pd_gw_breaker_state(h.gw, PD_ROLE_DECODE, bad, h.now), PD_BREAKER_OPEN);
  for (uint64_t id = 100; id < 103; id++) { /* the other decode fails three requests */
    pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = id, .path = "/generate",
                     .data = (const uint8_t *)NONSTREAM, .len = strlen(NONSTREAM)};
    h_feed(&h, ev);
    const pd_action_t *d = h_find(&h, PD_ACT_OPEN_LEG, 1);
    PDT_TRUE(d != NULL && d->worker != bad);
    if (!d) break;
    uint32_t w = d->worker;
    pd_event_t up = {.kind = PD_EV_UP_HEAD, .req_id = id, .leg_id = d->leg_id, .status = 503};
    h_feed(&h, up);
    PDT_EQ_INT(pd_gw_breaker_state(h.gw, PD_ROLE_DECODE, w, h.now), PD_BREAKER_CLOSED);
  }
  h_free(&h);
}

/* R-RETRY-EXCLUDE: each failed decode is excluded for the rest of the request; once both
 * decode workers have failed, exclusion leaves nobody and the policy picks among all the
 * admitted workers again instead of giving up. */
static void test_exclusion_that_leaves_nobody_falls_back_to_all_admitted(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, NONSTREAM);
  const pd_action_t *d = h_find(&h, PD_ACT_OPEN_LEG, 1);
  uint32_t worker[3] = {0};
  for (int a = 0; a < 3 && d; a++) {
    PDT_EQ_INT(d->role, PD_ROLE_DECODE);
    worker[a] = d->worker;
    h_leg(&h, PD_EV_UP_HEAD, d->leg_id, 503, NULL); /* this attempt's decode fails */
    PDT_FALSE(h.ended);
    if (!h_fire(&h)) break; /* the backoff, then a new attempt */
    d = h_find(&h, PD_ACT_OPEN_LEG, 1);
    PDT_TRUE(d != NULL); /* never a 503 for want of workers while any is admitted */
  }
  PDT_TRUE(worker[1] != worker[0]); /* the second attempt excludes the first's decode */
  PDT_TRUE(d != NULL && d->worker < 2); /* after both failed: a fallback pick, not nobody */
  PDT_FALSE(h.ended);
  h_free(&h);
}

/* R-LOGPROB through the core: a logprob stream holds decode's events until prefill has
 * ended well, then prepends prefill's input_token_logprobs to every decode event exactly
 * once, whatever the chunking. */
static void test_logprob_stream_waits_for_prefill_and_merges_once(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, "{\"text\":\"hi\",\"stream\":true,\"return_logprob\":true}");
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  /* decode's first event, split across two chunks, before prefill is done: held */
  h_leg(&h, PD_EV_UP_DATA, 2, 0, "data: {\"text\":\"a\",\"meta_info\":{\"input_token_");
  h_leg(&h, PD_EV_UP_DATA, 2, 0, "logprobs\":[[-0.5,3,null]]}}\n\n");
  PDT_EQ_INT(h.client_len, 0);
  h_leg(&h, PD_EV_UP_DATA, 1, 0,
        "data: {\"text\":\"\",\"meta_info\":{\"input_token_logprobs\":[[-0.1,1,null],"
        "[-0.2,2,null]]}}\n\ndata: [DONE]\n\n");
  h_leg(&h, PD_EV_UP_END, 1, 0, NULL);
  PDT_EQ_INT(h.head_status, 200);
  PDT_TRUE(strstr(h.client, "[[-0.1,1,null],[-0.2,2,null],[-0.5,3,null]]") != NULL);
  size_t before = h.client_len;
  /* the next event, two in one chunk with [DONE]: merged once each, never twice */
  h_leg(&h, PD_EV_UP_DATA, 2, 0,
        "data: {\"text\":\"b\",\"meta_info\":{\"input_token_logprobs\":[[-0.5,3,null]]}}"
        "\n\ndata: [DONE]\n\n");
  h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
  PDT_TRUE(h.ended && !h.aborted);
  const char *second = h.client + before;
  PDT_TRUE(strstr(second, "[[-0.1,1,null],[-0.2,2,null],[-0.5,3,null]]") != NULL);
  PDT_TRUE(strstr(h.client, "-0.1,1,null],[-0.2,2,null],[-0.1") == NULL); /* not twice */
  PDT_TRUE(strstr(second, "data: [DONE]") != NULL);
  h_free(&h);
}

/* R-FAIL-PRECOMMIT, "prefill lost": a stream prefill whose response breaks after its 200 head
 * may have sent the KV: it fails alone and decode goes on; decode's first event commits.
 * Had decode produced nothing within the tail budget, the attempt fails without blaming it. */
static void test_prefill_lost_after_its_head_lets_decode_go_on(void) {
  for (int decode_speaks = 1; decode_speaks >= 0; decode_speaks--) {
    harness_t h;
    start(&h, PD_MODE_REFERENCE, STREAM);
    h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
    h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
    h_uperr(&h, 1, PD_UPSTREAM_ERROR_READ);
    const pd_action_t *o = h_find(&h, PD_ACT_OUTCOME, 0);
    PDT_TRUE(o && o->leg_id == 1 && o->flag == PD_OUTCOME_FAILURE); /* prefill, alone */
    for (int i = 0; h_find(&h, PD_ACT_CLOSE_LEG, i); i++) /* decode is not touched */
      PDT_TRUE(h_find(&h, PD_ACT_CLOSE_LEG, i)->leg_id != 2);
    PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0);
    PDT_FALSE(h.ended);
    if (decode_speaks) {
      h.now += 10 * MS; /* the KV had arrived: decode streams */
      h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
      PDT_EQ_INT(h.head_status, 200);
      h_leg(&h, PD_EV_UP_DATA, 2, 0, DONE);
      h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
      PDT_TRUE(h.ended && !h.aborted);
      PDT_TRUE(strstr(h.client, "\"a\"") && strstr(h.client, "[DONE]"));
    } else {
      PDT_EQ_U64(h_expiry(&h), h.now + 500 * MS); /* the tail budget, not 30 s */
      h_fire(&h);
      int decode_cancelled = 0;
      for (int i = 0; (o = h_find(&h, PD_ACT_OUTCOME, i)); i++)
        decode_cancelled |= o->leg_id == 2 && o->flag == PD_OUTCOME_CANCELLED;
      PDT_TRUE(decode_cancelled); /* decode waited on a KV that never came: not its fault */
      PDT_FALSE(h.ended);         /* a retry is scheduled */
      PDT_TRUE(h_armed_later(&h));
    }
    h_free(&h);
  }
}

/* One decode read holding more events than PD_MAX_ACTIONS_PER_EVENT (a client resuming after
 * backpressure gets a whole held buffer at once): the core forwards it as a few client data
 * actions, every byte in order, instead of one action per event past its bound. */
static void test_a_read_of_many_events_is_few_actions(void) {
  char stream[8000];
  size_t len = 0;
  for (int i = 0; i < 300; i++) /* 300 events > PD_MAX_ACTIONS_PER_EVENT (256) */
    len += (size_t)snprintf(stream + len, sizeof stream - len, "data: {\"index\":%d}\n\n", i);
  PDT_TRUE(len < sizeof stream - 1 && 300 > PD_MAX_ACTIONS_PER_EVENT);
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, stream);
  PDT_FALSE(h.out.is_overflow);
  PDT_TRUE(h_count(&h, PD_ACT_CLIENT_DATA) <= 3);
  PDT_EQ_STR(h.client, stream);
  h_free(&h);
}

int pdt_suite_dispatch_more(void) {
  static const pdt_case_t cases[] = {
      {"a read of many events is few actions", test_a_read_of_many_events_is_few_actions},
      {"tail expiry aborts a lagging prefill without blame", test_tail_expiry_aborts_a_lagging_prefill_without_blame},
      {"prefill failure after commit is its own; the stream goes on",
       test_prefill_failure_after_commit_is_its_own_and_stream_goes_on},
      {"exhausted retries preserve the worker status", test_exhausted_retries_preserve_the_worker_status},
      {"idle deadline ends the stream with an SSE error event", test_idle_deadline_ends_stream_with_error_event},
      {"a stream leg without a head times out alone after 5 s",
       test_a_stream_leg_without_a_head_times_out_alone_after_5s},
      {"first-token deadline blames only the leg without a head",
       test_first_token_deadline_blames_only_the_headless_leg},
      {"no retry when the backoff would pass the total deadline",
       test_no_retry_when_backoff_would_pass_the_total_deadline},
      {"each attempt gets fresh 53-bit rooms and a fixed-width rid",
       test_each_attempt_gets_fresh_53bit_rooms_and_a_fixed_width_rid},
      {"a client leaving during backoff ends everything", test_client_leaving_during_backoff_ends_everything},
      {"a half-open breaker admits one probe at a time", test_half_open_breaker_admits_one_probe_at_a_time},
      {"exclusion that leaves nobody falls back to all admitted workers",
       test_exclusion_that_leaves_nobody_falls_back_to_all_admitted},
      {"a logprob stream waits for prefill and merges its logprobs once",
       test_logprob_stream_waits_for_prefill_and_merges_once},
      {"a prefill lost after its head lets decode go on (or fails without blaming it)",
       test_prefill_lost_after_its_head_lets_decode_go_on},
      {"breaker ejection is bounded to half a role (R-BREAKER-BOUND)",
       test_breaker_ejection_is_bounded_to_half_a_role},
  };
  return PDT_SUITE("dispatch_more", cases);
}
