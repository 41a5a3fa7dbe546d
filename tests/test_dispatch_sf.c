/* The source-first models (core/pd_mode_sf.c, docs/spec.md 7.4-7.6) driven with hand-made
 * worker events: the exact prefill and decode bodies each source sends (V1.1, V1.2, V1.7,
 * V1.25) and each one's failure behaviour (V1.24, V1.25, V1.27). */
#include "pdt_sf.h"

/* Every member of the client's body except kv_transfer_params is in decode's body as the
 * client sent it (V1.7: original stream, limits and min_tokens). */
static int is_client_body_plus_kv(const cJSON *dec, const char *client, const char *kv) {
  cJSON *d = cJSON_Duplicate(dec, 1);
  if (!d) return 0;
  cJSON *got_kv = cJSON_DetachItemFromObjectCaseSensitive(d, "kv_transfer_params");
  int ok = sf_json_eq(d, client) && (kv ? sf_json_eq(got_kv, kv) : got_kv == NULL);
  cJSON_Delete(got_kv);
  cJSON_Delete(d);
  return ok;
}

static void test_toy_proxy_sends_prefill_v1_1_then_decode_with_its_params(void) {
  harness_t h;
  sf_init(&h, PD_MODE_VLLM_TOY_PROXY);
  sf_request(&h, "/v1/chat/completions", SF_CHAT);
  PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 1); /* prefill alone */
  PDT_EQ_INT(sf_open(&h, 0)->role, PD_ROLE_PREFILL);
  PDT_EQ_STR(sf_open(&h, 0)->str, "/v1/chat/completions");
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0);
  cJSON *p = sf_open_body(&h, 0);
  PDT_TRUE(sf_json_eq(p, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                         "\"stream\":false,\"max_tokens\":1,\"max_completion_tokens\":1,"
                         "\"kv_transfer_params\":{\"do_remote_decode\":true,"
                         "\"do_remote_prefill\":false,\"remote_engine_id\":null,"
                         "\"remote_block_ids\":null,\"remote_host\":null,\"remote_port\":null}}"));
  cJSON_Delete(p);
  sf_answer(&h, 1, 200, SF_KV); /* in two pieces: read whole before anything happens */
  PDT_EQ_INT(h.head_status, 200);
  PDT_EQ_INT(sf_head_flag(&h), 0); /* application/json although the client streams */
  PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 1);
  PDT_EQ_INT(sf_open(&h, 0)->role, PD_ROLE_DECODE);
  cJSON *d = sf_open_body(&h, 0);
  PDT_TRUE(is_client_body_plus_kv(d, SF_CHAT, SF_KV)); /* verbatim */
  cJSON_Delete(d);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, SF_CHUNK0 SF_CHUNK1);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, "data: [DONE]\n\n");
  h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
  PDT_EQ_STR(h.client, SF_CHUNK0 SF_CHUNK1 "data: [DONE]\n\n"); /* decode's bytes, as they are */
  PDT_TRUE(h.ended && !h.aborted);
  PDT_EQ_U64(h_count(&h, PD_ACT_DONE), 1);
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
  h_free(&h);
}

/* Prefill answered without parameters (null, V1.6): decode gets the client's body unchanged
 * and computes the prompt itself. */
static void test_toy_proxy_null_params_send_the_plain_body(void) {
  harness_t h;
  sf_init(&h, PD_MODE_VLLM_TOY_PROXY);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS_NS);
  cJSON *p = sf_open_body(&h, 0);
  PDT_TRUE(sf_get(p, "max_completion_tokens") == NULL); /* capped only when sent */
  PDT_TRUE(cJSON_IsFalse(sf_get(p, "stream")));
  cJSON_Delete(p);
  sf_answer(&h, 1, 200, "null");
  PDT_EQ_STR((const char *)sf_open(&h, 0)->data, SF_COMPLETIONS_NS);
  h_free(&h);
}

static void test_toy_proxy_prefill_failure_is_a_bare_500(void) {
  for (int how = 0; how < 3; how++) {
    harness_t h;
    sf_init(&h, PD_MODE_VLLM_TOY_PROXY);
    sf_request(&h, "/v1/completions", SF_COMPLETIONS);
    if (how == 0) sf_answer(&h, 1, 503, NULL); /* raise_for_status */
    else if (how == 1) h_uperr(&h, 1, PD_UPSTREAM_ERROR_CONNECT);
    else { /* 200 but not JSON: response.json() raises */
      h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
      h_leg(&h, PD_EV_UP_DATA, 1, 0, "oops");
      h_leg(&h, PD_EV_UP_END, 1, 0, NULL);
    }
    PDT_EQ_INT(h.head_status, 500);
    PDT_EQ_STR(h.client, "Internal Server Error");
    PDT_TRUE(h.ended && !h.aborted);
    PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 0); /* decode is never contacted, no retry */
    PDT_EQ_U64(h_count(&h, PD_ACT_OUTCOME) + h_count(&h, PD_ACT_LOAD), 0);
    PDT_EQ_U64(h_count(&h, PD_ACT_DONE), 1);
    h_free(&h);
  }
}

/* raise_for_status runs inside the generator, after the 200 head: a cut body, nothing else. */
static void test_toy_proxy_decode_error_after_the_head_truncates_the_body(void) {
  for (int how = 0; how < 2; how++) {
    harness_t h;
    sf_init(&h, PD_MODE_VLLM_TOY_PROXY);
    sf_request(&h, "/v1/completions", SF_COMPLETIONS);
    sf_answer(&h, 1, 200, SF_KV);
    if (how == 0) {
      h_leg(&h, PD_EV_UP_HEAD, 2, 503, NULL);
      PDT_TRUE(h_close_of(&h, 2) && h_close_of(&h, 2)->str == NULL);
    } else {
      h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
      h_leg(&h, PD_EV_UP_DATA, 2, 0, SF_CHUNK0);
      h_uperr(&h, 2, PD_UPSTREAM_ERROR_RESET);
    }
    PDT_EQ_INT(h.head_status, 200);
    PDT_TRUE(h.ended && h.aborted);
    PDT_TRUE(strstr(h.client, "error") == NULL); /* no SSE error event */
    PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 0);
    PDT_EQ_U64(h_expiry(&h), UINT64_MAX); /* no timer of any kind */
    PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
    h_free(&h);
  }
}

/* The handler awaiting prefill is not cancelled: prefill runs on, nothing closes it, and
 * decode is never opened; its pinned KV waits for the worker's timer (V1.19). */
static void test_toy_proxy_client_gone_during_prefill_closes_nothing(void) {
  harness_t h;
  sf_init(&h, PD_MODE_VLLM_TOY_PROXY);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  h_feed(&h, (pd_event_t){.kind = PD_EV_CLIENT_GONE, .req_id = 7});
  PDT_EQ_U64(h_count(&h, PD_ACT_CLOSE_LEG), 0);
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 1);
  sf_answer(&h, 1, 200, SF_KV);
  PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG) + h_count(&h, PD_ACT_CLIENT_HEAD), 0);
  PDT_EQ_U64(h_count(&h, PD_ACT_DONE), 1);
  h_free(&h);
}

static void test_mooncake_proxy_fires_prefill_and_streams_decode_at_once(void) {
  harness_t h;
  sf_init(&h, PD_MODE_MOONCAKE_PROXY);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 2);
  PDT_EQ_INT(sf_open(&h, 0)->role, PD_ROLE_PREFILL);
  PDT_EQ_INT(sf_open(&h, 1)->role, PD_ROLE_DECODE);
  PDT_TRUE(sf_head_flag(&h) == 0 && h.head_status == 200);
  cJSON *p = sf_open_body(&h, 0), *d = sf_open_body(&h, 1);
  PDT_TRUE(sf_json_eq(p, "{\"model\":\"m\",\"prompt\":\"hi\",\"stream\":false,\"max_tokens\":1,"
                         "\"min_tokens\":5,\"kv_transfer_params\":{\"do_remote_decode\":true,"
                         "\"do_remote_prefill\":false}}"));
  PDT_TRUE(is_client_body_plus_kv(d, SF_COMPLETIONS,
                                  "{\"do_remote_decode\":false,\"do_remote_prefill\":true,"
                                  "\"bootstrap_server_host\":\"p0\","
                                  "\"bootstrap_server_port\":9000}"));
  cJSON_Delete(p);
  cJSON_Delete(d);
  sf_answer(&h, 1, 500, NULL); /* never checked */
  PDT_TRUE(!h.ended && h.client_len == 0);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, SF_CHUNK0);
  h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
  PDT_EQ_STR(h.client, SF_CHUNK0);
  PDT_TRUE(h.ended && !h.aborted);
  PDT_EQ_U64(h_count(&h, PD_ACT_DONE), 1);
  /* the next request goes to p1, which has no bootstrap port: the proxy's 8998 */
  sf_request_id(&h, 8, "/v1/completions", SF_COMPLETIONS);
  d = sf_open_body(&h, 1);
  const cJSON *kv = sf_get(d, "kv_transfer_params");
  PDT_EQ_STR(cJSON_GetStringValue(sf_get(kv, "bootstrap_server_host")), "p1");
  PDT_TRUE(sf_num(kv, "bootstrap_server_port") == 8998);
  cJSON_Delete(d);
  h_free(&h);
}

/* A decode error cuts the 200 body; a prefill error is lost; client gone closes decode only:
 * the prefill task lives on (V1.25). */
static void test_mooncake_proxy_failures(void) {
  harness_t h;
  sf_init(&h, PD_MODE_MOONCAKE_PROXY);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  h_uperr(&h, 1, PD_UPSTREAM_ERROR_RESET);
  PDT_TRUE(!h.ended);
  h_leg(&h, PD_EV_UP_HEAD, 2, 500, NULL);
  PDT_TRUE(h.ended && h.aborted && h.head_status == 200);
  h_free(&h);
  sf_init(&h, PD_MODE_MOONCAKE_PROXY);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  h_feed(&h, (pd_event_t){.kind = PD_EV_CLIENT_GONE, .req_id = 7});
  PDT_TRUE(h_close_of(&h, 2) != NULL && h_close_of(&h, 1) == NULL);
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 1); /* the orphan prefill */
  sf_answer(&h, 1, 200, SF_KV);
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
  h_free(&h);
}

static void test_llmd_sidecar_bodies_v1_2(void) {
  harness_t h;
  sf_init(&h, PD_MODE_LLMD_SIDECAR);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  cJSON *p = sf_open_body(&h, 0);
  PDT_TRUE(sf_json_eq(p, "{\"model\":\"m\",\"prompt\":\"hi\",\"stream\":false,\"max_tokens\":1,"
                         "\"min_tokens\":5,\"kv_transfer_params\":{\"do_remote_decode\":true,"
                         "\"do_remote_prefill\":false,\"remote_engine_id\":null,"
                         "\"remote_block_ids\":null,\"remote_host\":null,"
                         "\"remote_port\":null}}")); /* min_tokens kept */
  cJSON_Delete(p);
  sf_answer(&h, 1, 200, NULL); /* no kv_transfer_params: only logged, decode gets null */
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0);
  cJSON *d = sf_open_body(&h, 0);
  PDT_TRUE(is_client_body_plus_kv(d, SF_COMPLETIONS, "null"));
  cJSON_Delete(d);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL); /* the ReverseProxy passes decode's head through */
  PDT_TRUE(h.head_status == 200 && sf_head_flag(&h) == 1);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, SF_CHUNK0);
  h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
  PDT_EQ_STR(h.client, SF_CHUNK0);
  PDT_TRUE(h.ended && !h.aborted);
  h_free(&h);
  sf_init(&h, PD_MODE_LLMD_SIDECAR); /* chat: both limits capped, sent or not */
  sf_request(&h, "/v1/chat/completions",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":9}");
  p = sf_open_body(&h, 0);
  PDT_TRUE(sf_num(p, "max_tokens") == 1 && sf_num(p, "max_completion_tokens") == 1);
  cJSON_Delete(p);
  sf_answer(&h, 1, 200, SF_KV);
  d = sf_open_body(&h, 0);
  PDT_TRUE(is_client_body_plus_kv(
      d, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":9}", SF_KV));
  cJSON_Delete(d);
  h_free(&h);
}

/* V1.27: prefill 400-451 goes to the client unchanged; any other non-2xx, or a connection
 * error, falls back to decode alone with the client's body. */
static void test_llmd_sidecar_prefill_4xx_passes_other_failures_fall_back(void) {
  static const char err[] = "{\"error\":{\"message\":\"too long\",\"code\":400}}";
  harness_t h;
  sf_init(&h, PD_MODE_LLMD_SIDECAR);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  h_leg(&h, PD_EV_UP_HEAD, 1, 400, NULL);
  h_leg(&h, PD_EV_UP_DATA, 1, 0, err);
  h_leg(&h, PD_EV_UP_END, 1, 0, NULL);
  PDT_EQ_INT(h.head_status, 400);
  PDT_EQ_STR(h.client, err);
  PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 0);
  h_free(&h);
  for (int how = 0; how < 3; how++) {
    sf_init(&h, PD_MODE_LLMD_SIDECAR);
    sf_request(&h, "/v1/completions", SF_COMPLETIONS);
    if (how == 0) sf_answer(&h, 1, 500, NULL);
    else if (how == 1) sf_answer(&h, 1, 452, NULL); /* past 451: falls back too */
    else h_uperr(&h, 1, PD_UPSTREAM_ERROR_CONNECT);
    PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 1);
    PDT_EQ_INT(sf_open(&h, 0)->role, PD_ROLE_DECODE);
    PDT_EQ_STR((const char *)sf_open(&h, 0)->data, SF_COMPLETIONS); /* the client's body */
    PDT_TRUE(!h.ended);
    h_free(&h);
  }
}

/* Decode through the ReverseProxy: refused -> 503 JSON, another error before the head -> 502,
 * after it the body is aborted; the client leaving cancels both legs. */
static void test_llmd_sidecar_decode_errors_and_client_gone(void) {
  for (int how = 0; how < 3; how++) {
    harness_t h;
    sf_init(&h, PD_MODE_LLMD_SIDECAR);
    sf_request(&h, "/v1/completions", SF_COMPLETIONS);
    sf_answer(&h, 1, 200, SF_KV);
    if (how < 2) {
      h_uperr(&h, 2, how == 0 ? PD_UPSTREAM_ERROR_CONNECT : PD_UPSTREAM_ERROR_RESET);
      PDT_EQ_INT(h.head_status, how == 0 ? 503 : 502);
      PDT_TRUE(h.ended && !h.aborted && strstr(h.client, "\"error\"") != NULL);
    } else {
      h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
      h_uperr(&h, 2, PD_UPSTREAM_ERROR_READ);
      PDT_TRUE(h.ended && h.aborted);
    }
    h_free(&h);
  }
  harness_t h;
  sf_init(&h, PD_MODE_LLMD_SIDECAR);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  h_feed(&h, (pd_event_t){.kind = PD_EV_CLIENT_GONE, .req_id = 7});
  PDT_TRUE(h_close_of(&h, 1) != NULL && h_close_of(&h, 1)->str == NULL);
  PDT_EQ_U64(h_count(&h, PD_ACT_DONE), 1);
  h_free(&h);
}

/* The vllm protocol serves only the OpenAI routes; the modes list by protocol. */
static void test_protocols_and_routes(void) {
  harness_t h;
  sf_init(&h, PD_MODE_VLLM_TOY_PROXY);
  sf_request(&h, "/generate", "{\"text\":\"hi\"}");
  PDT_EQ_INT(h.head_status, 404);
  PDT_EQ_U64(h_count(&h, PD_ACT_OPEN_LEG), 0);
  h_free(&h);
  int sglang = 0, vllm = 0;
  for (int m = 0; m < PD_MODE_COUNT; m++) {
    sglang += pd_mode_speaks((pd_mode_t)m, PD_PROTOCOL_SGLANG);
    vllm += pd_mode_speaks((pd_mode_t)m, PD_PROTOCOL_VLLM);
    pd_mode_t back;
    PDT_TRUE(pd_mode_parse(pd_mode_name((pd_mode_t)m), &back) == 0 && back == (pd_mode_t)m);
  }
  PDT_EQ_INT(sglang, 4); /* joined, pr1150, minilb, reference: `--mode all` today */
  PDT_EQ_INT(vllm, 4);   /* the three models and reference */
  PDT_EQ_INT(pd_mode_protocol(PD_MODE_LLMD_SIDECAR), PD_PROTOCOL_VLLM);
  PDT_EQ_INT(pd_mode_protocol(PD_MODE_REFERENCE), PD_PROTOCOL_SGLANG);
  pd_protocol_t p;
  PDT_TRUE(pd_protocol_parse("vllm", &p) == 0 && p == PD_PROTOCOL_VLLM);
  PDT_TRUE(pd_protocol_parse("tgi", &p) != 0);
}

int pdt_suite_dispatch_sf(void) {
  static const pdt_case_t cases[] = {
      {"toy proxy: prefill V1.1, then decode with its params",
       test_toy_proxy_sends_prefill_v1_1_then_decode_with_its_params},
      {"toy proxy: null params send the plain body", test_toy_proxy_null_params_send_the_plain_body},
      {"toy proxy: prefill failure is a bare 500", test_toy_proxy_prefill_failure_is_a_bare_500},
      {"toy proxy: decode error after the head truncates the body",
       test_toy_proxy_decode_error_after_the_head_truncates_the_body},
      {"toy proxy: client gone during prefill closes nothing",
       test_toy_proxy_client_gone_during_prefill_closes_nothing},
      {"mooncake proxy: prefill fired, decode streamed at once",
       test_mooncake_proxy_fires_prefill_and_streams_decode_at_once},
      {"mooncake proxy: failures", test_mooncake_proxy_failures},
      {"llm-d sidecar: bodies V1.2", test_llmd_sidecar_bodies_v1_2},
      {"llm-d sidecar: prefill 4xx passes, other failures fall back",
       test_llmd_sidecar_prefill_4xx_passes_other_failures_fall_back},
      {"llm-d sidecar: decode errors and client gone",
       test_llmd_sidecar_decode_errors_and_client_gone},
      {"protocols and routes", test_protocols_and_routes},
  };
  return PDT_SUITE("dispatch_sf", cases);
}
