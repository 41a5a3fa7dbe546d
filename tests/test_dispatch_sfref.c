/* The source-first reference (core/pd_mode_sfref.c, docs/spec.md R-SF-*): prefill failures
 * retried before anything is committed, a decode that never reached its worker retried on
 * another decode with the same parameters, prefill redone otherwise, a client leaving during
 * prefill closes it, and each worker's outcome comes from its own leg. */
#include "pdt_sf.h"

/* The OPEN_LEG of this step for role, or NULL. */
static const pd_action_t *open_of(harness_t *h, pd_role_t role) {
  const pd_action_t *a;
  for (int i = 0; (a = h_find(h, PD_ACT_OPEN_LEG, i)); i++)
    if (a->role == role) return a;
  return NULL;
}

static cJSON *kv_of(const pd_action_t *a) {
  cJSON *j = a ? cJSON_ParseWithLength((const char *)a->data, a->len) : NULL;
  cJSON *kv = j ? cJSON_DetachItemFromObjectCaseSensitive(j, "kv_transfer_params") : NULL;
  cJSON_Delete(j);
  return kv;
}

static void run_decode_stream(harness_t *h, uint64_t leg) {
  h_leg(h, PD_EV_UP_HEAD, leg, 200, NULL);
  h_leg(h, PD_EV_UP_DATA, leg, 0, SF_CHUNK0);
  h_leg(h, PD_EV_UP_DATA, leg, 0, "data: [DONE]\n\n");
  h_leg(h, PD_EV_UP_END, leg, 0, NULL);
}

/* R-SF-PARAMS, R-OUTCOME, R-LOAD: prefill's body is V1.1's, its outcome and load end with its
 * own answer, before decode is sent with its parameters; decode commits at its first event. */
static void test_sfref_happy_path_outcomes_from_each_leg(void) {
  harness_t h;
  sf_init(&h, PD_MODE_REFERENCE);
  sf_request(&h, "/v1/chat/completions", SF_CHAT);
  PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 1);
  cJSON *p = sf_open_body(&h, 0);
  PDT_TRUE(sf_get(p, "min_tokens") == NULL && cJSON_IsFalse(sf_get(p, "stream")));
  PDT_TRUE(sf_num(p, "max_tokens") == 1 && sf_get(p, "stream_options") == NULL);
  cJSON_Delete(p);
  sf_answer(&h, 1, 200, SF_KV);
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_SUCCESS);
  const pd_action_t *rel = h_find(&h, PD_ACT_LOAD, 0);
  PDT_TRUE(rel && rel->role == PD_ROLE_PREFILL && rel->flag == -1);
  cJSON *kv = kv_of(open_of(&h, PD_ROLE_DECODE));
  PDT_TRUE(sf_json_eq(kv, SF_KV));
  cJSON_Delete(kv);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0); /* nothing committed yet */
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, SF_CHUNK0);
  PDT_EQ_INT(h.head_status, 200); /* committed at decode's first event */
  h_leg(&h, PD_EV_UP_DATA, 2, 0, "data: [DONE]\n\n");
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_SUCCESS);
  h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
  PDT_EQ_STR(h.client, SF_CHUNK0 "data: [DONE]\n\n");
  PDT_TRUE(h.ended && !h.aborted);
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
  h_free(&h);
}

/* R-SF-PREFILL-RETRY: a failed prefill is the only leg; nothing is committed, so the attempt
 * is retried on the other prefill (R-RETRY-EXCLUDE) and the client sees one clean answer. */
static void test_sfref_prefill_failure_is_retried_before_commit(void) {
  harness_t h;
  sf_init(&h, PD_MODE_REFERENCE);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  PDT_EQ_U64(sf_open(&h, 0)->worker, 0);
  h_leg(&h, PD_EV_UP_HEAD, 1, 503, NULL);
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_FAILURE);
  PDT_TRUE(h_close_of(&h, 1) != NULL && h_close_of(&h, 1)->str == NULL); /* no abort API */
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0);
  PDT_TRUE(h_armed_later(&h)); /* backoff */
  PDT_TRUE(h_fire(&h));
  const pd_action_t *p2 = open_of(&h, PD_ROLE_PREFILL);
  PDT_TRUE(p2 && p2->worker == 1 && p2->leg_id == 2); /* p1: p0 failed */
  PDT_TRUE(open_of(&h, PD_ROLE_DECODE) == NULL);
  sf_answer(&h, 2, 200, SF_KV);
  PDT_TRUE(open_of(&h, PD_ROLE_DECODE) != NULL);
  run_decode_stream(&h, 3);
  PDT_EQ_INT(h.head_status, 200);
  PDT_TRUE(h.ended && !h.aborted);
  h_free(&h);
}

/* R-SF-DECODE-RETRY: decode refused the connection, so it never saw the parameters; the next
 * attempt sends them verbatim to the other decode, and prefill is not run again. */
static void test_sfref_decode_connect_failure_reuses_the_params(void) {
  harness_t h;
  sf_init(&h, PD_MODE_REFERENCE);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  sf_answer(&h, 1, 200, SF_KV);
  const pd_action_t *d = open_of(&h, PD_ROLE_DECODE);
  PDT_TRUE(d && d->worker == 0);
  uint64_t t_refused = h.now;
  h_uperr(&h, 2, PD_UPSTREAM_ERROR_CONNECT);
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_FAILURE);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0);
  PDT_TRUE(h_fire(&h));
  PDT_TRUE(h.now <= t_refused + 1); /* no backoff (a deadline at t = 0 is 1 ns): the
                                        parameters do not wait */
  PDT_TRUE(open_of(&h, PD_ROLE_PREFILL) == NULL); /* no second prefill */
  d = open_of(&h, PD_ROLE_DECODE);
  PDT_TRUE(d && d->worker == 1 && d->leg_id == 3);
  cJSON *kv = kv_of(d);
  PDT_TRUE(sf_json_eq(kv, SF_KV));
  cJSON_Delete(kv);
  const pd_action_t *at = h_find(&h, PD_ACT_ATTEMPT, 0);
  PDT_TRUE(at && at->status == 2 && at->flag == 0 && at->worker == 1); /* p0's params, d1 */
  run_decode_stream(&h, 3);
  PDT_TRUE(h.ended && !h.aborted && h.head_status == 200);
  h_free(&h);
}

/* A decode that saw the request (a 503 before admission, V1.18; or parameters older than the
 * reuse window) may have released or read prefill's blocks: prefill is redone. */
static void test_sfref_decode_failure_otherwise_redoes_prefill(void) {
  for (int how = 0; how < 2; how++) {
    pd_gw_config_t c;
    pd_gw_config_default(&c, PD_MODE_REFERENCE);
    c.protocol = PD_PROTOCOL_VLLM;
    if (how == 1) c.sf_params_reuse_ns = 1 * MS; /* stale when decode is refused */
    harness_t h;
    sf_init_cfg(&h, &c);
    sf_request(&h, "/v1/completions", SF_COMPLETIONS);
    sf_answer(&h, 1, 200, SF_KV);
    h.now += 2 * MS;
    if (how == 0) h_leg(&h, PD_EV_UP_HEAD, 2, 503, NULL);
    else h_uperr(&h, 2, PD_UPSTREAM_ERROR_CONNECT);
    PDT_TRUE(h_fire(&h));
    const pd_action_t *p = open_of(&h, PD_ROLE_PREFILL);
    PDT_TRUE(p != NULL && open_of(&h, PD_ROLE_DECODE) == NULL);
    cJSON *kv = kv_of(p);
    PDT_TRUE(cJSON_IsTrue(sf_get(kv, "do_remote_decode"))); /* a fresh prefill request */
    cJSON_Delete(kv);
    h_free(&h);
  }
}

/* R-SF-KV-DRAIN (issue 24, section 4): decode d's read failed (an error event under its 200
 * head before any token, V1.22): prefill's blocks stay pinned, unread and unnotified. A drain
 * leg takes the same parameters to the other decode at once: no attempt, no load, never
 * current; given up at its 2xx head and closed (cancelled) at the end of that instant, its
 * bytes never reach the client. The client's retry redoes prefill and is served as before.
 * (Before: no drain; the pin waited for prefill's 480 s timer, I18.) */
static void test_sfref_a_failed_read_has_its_pin_drained(void) {
  harness_t h;
  sf_init(&h, PD_MODE_REFERENCE);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  sf_answer(&h, 1, 200, SF_KV);
  uint32_t d_first = open_of(&h, PD_ROLE_DECODE)->worker;
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, "data: {\"error\":{\"message\":\"kv load failed\",\"code\":500}}\n\n");
  PDT_EQ_INT(h_outcome_of(&h, 2, NULL), PD_OUTCOME_FAILURE);
  const pd_action_t *dr = open_of(&h, PD_ROLE_DECODE);
  PDT_TRUE(dr != NULL && dr->leg_id == 3 && dr->worker != d_first);
  cJSON *kv = kv_of(dr);
  PDT_TRUE(sf_json_eq(kv, SF_KV)); /* the same parameters, verbatim */
  cJSON_Delete(kv);
  PDT_EQ_U64(h_count(&h, PD_ACT_ATTEMPT), 0);
  PDT_EQ_U64(h_count(&h, PD_ACT_LOAD), 1); /* the failed decode's release only */
  h_leg(&h, PD_EV_UP_HEAD, 3, 200, NULL); /* the drain's head: given up, closed at once */
  PDT_EQ_INT(h_outcome_of(&h, 3, NULL), PD_OUTCOME_CANCELLED);
  PDT_TRUE(h_close_of(&h, 3) != NULL);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0);
  PDT_TRUE(h_fire(&h)); /* the backoff: prefill redone */
  const pd_action_t *p2 = open_of(&h, PD_ROLE_PREFILL);
  PDT_TRUE(p2 && p2->leg_id == 4);
  sf_answer(&h, 4, 200, SF_KV);
  run_decode_stream(&h, 5);
  PDT_EQ_STR(h.client, SF_CHUNK0 "data: [DONE]\n\n");
  PDT_TRUE(h.ended && !h.aborted);
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
  h_free(&h);
}

/* A drain that fails on its own (its head 503) is that decode's failure (R-OUTCOME), and a
 * decode that failed after a token (committed) or with a non-2xx head gets no drain. */
static void test_sfref_a_drain_reports_its_own_failure_and_only_failed_reads_drain(void) {
  harness_t h;
  sf_init(&h, PD_MODE_REFERENCE);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  sf_answer(&h, 1, 200, SF_KV);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, "data: {\"error\":{\"message\":\"x\",\"code\":500}}\n\n");
  h_leg(&h, PD_EV_UP_HEAD, 3, 503, NULL);
  PDT_EQ_INT(h_outcome_of(&h, 3, NULL), PD_OUTCOME_FAILURE);
  h_free(&h);
  sf_init(&h, PD_MODE_REFERENCE); /* a 503 head: no drain (V1.18 frees the pin) */
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  sf_answer(&h, 1, 200, SF_KV);
  h_leg(&h, PD_EV_UP_HEAD, 2, 503, NULL);
  PDT_TRUE(open_of(&h, PD_ROLE_DECODE) == NULL);
  h_free(&h);
  sf_init(&h, PD_MODE_REFERENCE); /* an error after a token: committed, no drain */
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  sf_answer(&h, 1, 200, SF_KV);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, SF_CHUNK0);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, "data: {\"error\":{\"message\":\"x\",\"code\":500}}\n\n");
  PDT_TRUE(open_of(&h, PD_ROLE_DECODE) == NULL);
  PDT_TRUE(h.ended);
  h_free(&h);
}

/* R-SF-DISCONNECT: the client leaving during prefill closes prefill's connection (a plain
 * close: vLLM aborts the request and frees its blocks, V1.20), recorded as cancelled; during
 * decode, decode is closed the same way (V1.17). */
static void test_sfref_client_gone_closes_the_open_leg(void) {
  for (int during_decode = 0; during_decode < 2; during_decode++) {
    harness_t h;
    sf_init(&h, PD_MODE_REFERENCE);
    sf_request(&h, "/v1/completions", SF_COMPLETIONS);
    uint64_t leg = 1;
    if (during_decode) {
      sf_answer(&h, 1, 200, SF_KV);
      leg = 2;
    }
    h_feed(&h, (pd_event_t){.kind = PD_EV_CLIENT_GONE, .req_id = 7});
    const pd_action_t *c = h_close_of(&h, leg);
    PDT_TRUE(c != NULL && c->str == NULL);
    PDT_EQ_INT(h_outcome_of(&h, leg, NULL), PD_OUTCOME_CANCELLED);
    PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 0);
    PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
    h_free(&h);
  }
}

/* R-TIMEOUT in source-first: the first-token budget covers prefill's answer; a prefill that
 * never answers times out alone and the attempt is retried on the other prefill. */
static void test_sfref_silent_prefill_times_out_and_is_retried(void) {
  harness_t h;
  sf_init(&h, PD_MODE_REFERENCE);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  PDT_EQ_U64(h_expiry(&h), 30000 * MS);
  PDT_TRUE(h_fire(&h));
  PDT_EQ_INT(h_outcome_of(&h, 1, NULL), PD_OUTCOME_TIMEOUT);
  PDT_TRUE(h_close_of(&h, 1) != NULL);
  PDT_TRUE(h_fire(&h)); /* backoff over */
  const pd_action_t *p = open_of(&h, PD_ROLE_PREFILL);
  PDT_TRUE(p && p->worker == 1);
  h_free(&h);
}

/* A non-stream request: decode's whole answer is the client's, under the idle budget plus the
 * work allowance (R-PROGRESS), not the first-token one. */
static void test_sfref_nonstream_answer(void) {
  static const char ans[] = "{\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\"abc\"}]}";
  harness_t h;
  sf_init(&h, PD_MODE_REFERENCE);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS_NS);
  sf_answer(&h, 1, 200, SF_KV);
  PDT_EQ_U64(h_expiry(&h), 30000 * MS + 3 * 100 * MS); /* idle 30 s + 3 tokens x 100 ms */
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, ans);
  h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
  PDT_EQ_INT(h.head_status, 200);
  PDT_EQ_STR(h.client, ans);
  PDT_TRUE(h.ended && !h.aborted);
  h_free(&h);
}

int pdt_suite_dispatch_sfref(void) {
  static const pdt_case_t cases[] = {
      {"happy path: outcomes from each leg", test_sfref_happy_path_outcomes_from_each_leg},
      {"prefill failure retried before commit", test_sfref_prefill_failure_is_retried_before_commit},
      {"decode connect failure reuses the params",
       test_sfref_decode_connect_failure_reuses_the_params},
      {"decode failure otherwise redoes prefill",
       test_sfref_decode_failure_otherwise_redoes_prefill},
      {"client gone closes the open leg", test_sfref_client_gone_closes_the_open_leg},
      {"a failed read has its pin drained (R-SF-KV-DRAIN)", test_sfref_a_failed_read_has_its_pin_drained},
      {"a drain reports its own failure; only failed reads drain",
       test_sfref_a_drain_reports_its_own_failure_and_only_failed_reads_drain},
      {"silent prefill times out and is retried",
       test_sfref_silent_prefill_times_out_and_is_retried},
      {"non-stream answer", test_sfref_nonstream_answer},
  };
  return PDT_SUITE("dispatch_sfref", cases);
}
