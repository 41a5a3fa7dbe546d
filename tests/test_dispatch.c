/* The dispatch core through the same feed API the drivers use: each test scripts events for
 * one request and asserts the actions a user could name. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "pd_dispatch.h"
#include "pd_err.h"
#include "pdt.h"

#include "pdt_harness.h"

static void test_both_legs_share_room_and_rid(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  const pd_action_t *p = h_find(&h, PD_ACT_OPEN_LEG, 0), *d = h_find(&h, PD_ACT_OPEN_LEG, 1);
  PDT_TRUE(p && d);
  if (p && d) {
    PDT_EQ_INT(p->role, PD_ROLE_PREFILL); /* prefill first (R1.13) */
    PDT_EQ_INT(d->role, PD_ROLE_DECODE);
    cJSON *a = cJSON_ParseWithLength((const char *)p->data, p->len);
    cJSON *b = cJSON_ParseWithLength((const char *)d->data, d->len);
    cJSON *ra = cJSON_GetObjectItem(a, "bootstrap_room"), *rb = cJSON_GetObjectItem(b, "bootstrap_room");
    PDT_TRUE(cJSON_IsNumber(ra) && cJSON_IsNumber(rb) && ra->valuedouble == rb->valuedouble);
    PDT_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(a, "rid")),
               cJSON_GetStringValue(cJSON_GetObjectItem(b, "rid")));
    PDT_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(a, "bootstrap_host")), "p0");
    cJSON_Delete(a);
    cJSON_Delete(b);
  }
  h_free(&h);
}

static void test_nothing_committed_before_first_event(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
  PDT_EQ_INT(h.head_status, 200);
  PDT_EQ_STR(h.client, TOK0);
  h_free(&h);
}

static void test_decode_503_cancels_prefill_and_retries_elsewhere(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  uint32_t first_decode = h_find(&h, PD_ACT_OPEN_LEG, 1)->worker;
  h_leg(&h, PD_EV_UP_HEAD, 2, 503, NULL);
  const pd_action_t *c = h_find(&h, PD_ACT_CLOSE_LEG, 0);
  int saw_abort_prefill = 0, saw_fail = 0, saw_cancel = 0;
  for (int i = 0; (c = h_find(&h, PD_ACT_CLOSE_LEG, i)); i++)
    if (c->leg_id == 1 && c->str && strncmp(c->str, "pdref-", 6) == 0) saw_abort_prefill = 1;
  const pd_action_t *o;
  for (int i = 0; (o = h_find(&h, PD_ACT_OUTCOME, i)); i++) {
    if (o->leg_id == 2 && o->flag == PD_OUTCOME_FAILURE) saw_fail = 1;
    if (o->leg_id == 1 && o->flag == PD_OUTCOME_CANCELLED) saw_cancel = 1;
  }
  PDT_TRUE(saw_abort_prefill);
  PDT_TRUE(saw_fail);
  PDT_TRUE(saw_cancel);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0); /* nothing to the client yet */
  PDT_TRUE(h_armed_later(&h)); /* the backoff */
  if (h_fire(&h)) {
    const pd_action_t *d2 = h_find(&h, PD_ACT_OPEN_LEG, 1);
    PDT_TRUE(d2 != NULL);
    if (d2) PDT_TRUE(d2->worker != first_decode); /* fresh pair excludes the failed one */
  }
  h_free(&h);
}

static void test_prefill_load_released_when_prefill_ends(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
  PDT_EQ_U64(pd_gw_load(h.gw, PD_ROLE_PREFILL, 0), 1);
  h_leg(&h, PD_EV_UP_DATA, 1, 0, "data: {\"text\":\"\"}\n\ndata: [DONE]\n\n");
  h_leg(&h, PD_EV_UP_END, 1, 0, NULL);
  PDT_EQ_U64(pd_gw_load(h.gw, PD_ROLE_PREFILL, 0), 0); /* while decode still streams */
  PDT_EQ_U64(pd_gw_load(h.gw, PD_ROLE_DECODE, h_find(&h, PD_ACT_OUTCOME, 0) ? 0 : 0), 1);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, DONE);
  h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
  PDT_TRUE(h.ended && !h.aborted);
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
  h_free(&h);
}

static void test_client_gone_aborts_both_legs_at_once(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  pd_event_t ev = {.kind = PD_EV_CLIENT_GONE, .req_id = 7};
  h_feed(&h, ev);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLOSE_LEG), 2);
  PDT_TRUE(h_find(&h, PD_ACT_CLOSE_LEG, 0)->str != NULL);
  PDT_TRUE(h_find(&h, PD_ACT_CLOSE_LEG, 1)->str != NULL);
  PDT_EQ_U64(h_count(&h, PD_ACT_DONE), 1);
  PDT_EQ_U64(pd_gw_load(h.gw, PD_ROLE_DECODE, 0) + pd_gw_load(h.gw, PD_ROLE_DECODE, 1), 0);
  h_free(&h);
}

static void test_midstream_reset_ends_with_sse_error_event(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
  h_uperr(&h, 2, PD_UPSTREAM_ERROR_RESET);
  PDT_TRUE(strstr(h.client, "\"error\"") != NULL);
  PDT_TRUE(strstr(h.client, "data: [DONE]") != NULL);
  PDT_TRUE(h.ended && !h.aborted);
  PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 0); /* no retry after commit */
  h_free(&h);
}

static void test_split_feed_gives_same_client_bytes(void) {
  const char *stream = "data: {\"index\":0}\n\ndata: {\"index\":1}\n\ndata: [DONE]\n\n";
  harness_t whole, split;
  start(&whole, PD_MODE_REFERENCE, STREAM);
  start(&split, PD_MODE_REFERENCE, STREAM);
  h_leg(&whole, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&split, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&whole, PD_EV_UP_DATA, 2, 0, stream);
  for (size_t i = 0; stream[i]; i++) {
    char one[2] = {stream[i], 0};
    h_leg(&split, PD_EV_UP_DATA, 2, 0, one);
  }
  PDT_EQ_STR(split.client, whole.client);
  PDT_EQ_STR(whole.client, stream);
  h_free(&whole);
  h_free(&split);
}

static void test_joined_waits_for_prefill_body_before_streaming(void) {
  harness_t h;
  start(&h, PD_MODE_JOINED, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
  PDT_EQ_INT(h.head_status, 0); /* R1.35: prefill drained first (G5) */
  h_leg(&h, PD_EV_UP_DATA, 1, 0, DONE);
  h_leg(&h, PD_EV_UP_END, 1, 0, NULL);
  PDT_EQ_INT(h.head_status, 200);
  PDT_EQ_STR(h.client, TOK0);
  h_free(&h);
}

static void test_pr1150_detached_prefill_survives_decode_failure(void) {
  harness_t h;
  start(&h, PD_MODE_PR1150, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 2, 503, NULL);
  for (int i = 0; h_find(&h, PD_ACT_CLOSE_LEG, i); i++)
    PDT_TRUE(h_find(&h, PD_ACT_CLOSE_LEG, i)->leg_id != 1); /* seed finding 1 */
  PDT_TRUE(pd_gw_requests_live(h.gw) == 1);
  h_free(&h);
}

static void test_joined_transport_error_drops_other_leg_without_abort(void) {
  harness_t h;
  start(&h, PD_MODE_JOINED, "{\"text\":\"hi\",\"stream\":false}");
  h_uperr(&h, 2, PD_UPSTREAM_ERROR_RESET);
  const pd_action_t *c = h_find(&h, PD_ACT_CLOSE_LEG, 0);
  PDT_TRUE(c && c->leg_id == 1 && c->str == NULL); /* try_join drop: TCP close only (R1.31) */
  const pd_action_t *o = h_find(&h, PD_ACT_OUTCOME, 0);
  PDT_TRUE(o && o->status == 502); /* R3.1: 502 for both workers */
  PDT_EQ_U64(h_count(&h, PD_ACT_OUTCOME), 2);
  PDT_TRUE(h_armed_later(&h)); /* retryable: backoff */
  h_free(&h);
}

static void test_minilb_answers_200_even_when_decode_fails(void) {
  harness_t h;
  start(&h, PD_MODE_MINILB, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 503, NULL);
  PDT_EQ_INT(h.head_status, 200); /* M8.4 */
  PDT_EQ_U64(h_count(&h, PD_ACT_OUTCOME), 0); /* no breaker, no outcomes */
  h_free(&h);
}

static void test_bad_input_gets_4xx_json(void) {
  harness_t h;
  h_init(&h, PD_MODE_REFERENCE, NULL);
  h_request(&h, "{\"text\": ");
  PDT_EQ_INT(h.head_status, 400);
  PDT_TRUE(strstr(h.client, "\"error\"") != NULL);
  pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = 8, .path = "/nope",
                   .data = (const uint8_t *)"{}", .len = 2};
  h.client_len = 0;
  h_feed(&h, ev);
  PDT_EQ_INT(h.head_status, 404);
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
  /* events for unknown requests and legs are ignored */
  h_leg(&h, PD_EV_UP_DATA, 99, 0, TOK1);
  PDT_EQ_U64(h.out.n, 0);
  h_free(&h);
}

static void test_first_token_deadline_times_out_both_and_retries(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  PDT_EQ_U64(h_expiry(&h), 5000 * MS); /* neither stream leg sends its head */
  h_fire(&h);
  size_t timeouts = 0;
  for (int i = 0; h_find(&h, PD_ACT_OUTCOME, i); i++)
    timeouts += h_find(&h, PD_ACT_OUTCOME, i)->flag == PD_OUTCOME_TIMEOUT;
  PDT_EQ_U64(timeouts, 2);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLOSE_LEG), 2);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0);
  h_free(&h);
}

/* The CLOSE_LEG of leg carries an abort (its rid). */
static int aborted_leg(harness_t *h, uint64_t leg) {
  const pd_action_t *c = h_close_of(h, leg);
  return c && c->str && strlen(c->str) == 22;
}

/* R-CANCEL after a transport error (issue 24, section 3): the worker of a leg whose transport
 * failed may still hold the request (the reset may be on the path, the response lost; a
 * prefill may sit in bootstrap, S5.4), so the failing leg gets its /abort_request too, not
 * only its partner. A refused connect never sent the request: no abort. (Before, a leg was
 * marked failed before its failure was handled and only open legs got a close.) */
static void test_a_leg_whose_transport_failed_gets_its_abort(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM); /* decode reset before its head */
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_uperr(&h, 2, PD_UPSTREAM_ERROR_RESET);
  PDT_TRUE(aborted_leg(&h, 2));
  PDT_TRUE(aborted_leg(&h, 1)); /* its partner, at the end of the instant */
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_FAILURE);
  h_free(&h);
  start(&h, PD_MODE_REFERENCE, NONSTREAM); /* the driver's timeout on prefill */
  h_uperr(&h, 1, PD_UPSTREAM_ERROR_TIMEOUT);
  PDT_TRUE(aborted_leg(&h, 1));
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_TIMEOUT);
  PDT_TRUE(aborted_leg(&h, 2));
  h_free(&h);
  start(&h, PD_MODE_REFERENCE, NONSTREAM); /* a read error in prefill's body */
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_uperr(&h, 1, PD_UPSTREAM_ERROR_READ);
  PDT_TRUE(aborted_leg(&h, 1));
  h_free(&h);
  start(&h, PD_MODE_REFERENCE, STREAM); /* a refused connect: nothing to abort there */
  h_uperr(&h, 2, PD_UPSTREAM_ERROR_CONNECT);
  PDT_TRUE(h_close_of(&h, 2) == NULL);
  PDT_TRUE(aborted_leg(&h, 1));
  h_free(&h);
  start(&h, PD_MODE_REFERENCE, STREAM); /* after commit: prefill's reset is its own */
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
  h_uperr(&h, 1, PD_UPSTREAM_ERROR_RESET);
  PDT_TRUE(aborted_leg(&h, 1));
  PDT_TRUE(h_close_of(&h, 2) == NULL); /* the stream goes on */
  h_uperr(&h, 2, PD_UPSTREAM_ERROR_RESET); /* then decode's: the stream ends, decode aborted */
  PDT_TRUE(aborted_leg(&h, 2));
  PDT_TRUE(h.ended);
  h_free(&h);
}

int pdt_suite_dispatch(void) {
  static const pdt_case_t cases[] = {
      {"both legs share one room and one rid, prefill opened first", test_both_legs_share_room_and_rid},
      {"reference commits nothing before decode's first event", test_nothing_committed_before_first_event},
      {"decode 503 before first token cancels prefill with abort and retries elsewhere",
       test_decode_503_cancels_prefill_and_retries_elsewhere},
      {"prefill load is released when prefill ends", test_prefill_load_released_when_prefill_ends},
      {"client gone aborts both legs at once", test_client_gone_aborts_both_legs_at_once},
      {"mid-stream reset ends with an SSE error event", test_midstream_reset_ends_with_sse_error_event},
      {"byte-by-byte feed gives the same client bytes", test_split_feed_gives_same_client_bytes},
      {"joined waits for the prefill body before streaming (G5)", test_joined_waits_for_prefill_body_before_streaming},
      {"pr1150 leaves its detached prefill running when decode fails", test_pr1150_detached_prefill_survives_decode_failure},
      {"joined drops the other leg without abort on a transport error", test_joined_transport_error_drops_other_leg_without_abort},
      {"minilb answers 200 even when decode fails", test_minilb_answers_200_even_when_decode_fails},
      {"bad input gets a 4xx JSON error; unknown ids are ignored", test_bad_input_gets_4xx_json},
      {"a head deadline with both stream legs silent times out both", test_first_token_deadline_times_out_both_and_retries},
      {"a leg whose transport failed gets its abort (R-CANCEL)", test_a_leg_whose_transport_failed_gets_its_abort},
  };
  return PDT_SUITE("dispatch", cases);
}
