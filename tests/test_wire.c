/* The workers' wire shapes (pd_worker_shared.h, pd_wire_openai.c; W6.6-W6.9, V1.4, V1.5,
 * V1.28, V1.31): every kind on each route, stream or not, parsed back with cJSON; the size
 * bound; the body parser's route, model and include_usage; the checker reading token identity
 * in OpenAI's shape (a lost, repeated or reordered token is caught); and a /v1 chat stream
 * served cleanly through the simulator under every mode of each protocol. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pd_err.h"
#include "pd_worker_body.h"
#include "pd_worker_shared.h"
#include "pd_world.h"
#include "pdt.h"
#include "pdt_mock.h"
#include "pdt_scenario.h"

#define OUT_MAX 65536u
#define EV_MAX 16

static const pd_wire_api_t api_cmpl = {PD_ROUTE_COMPLETIONS, 0, 5, "m"};
static const pd_wire_api_t api_cmpl_usage = {PD_ROUTE_COMPLETIONS, 1, 5, "m"};
static const pd_wire_api_t api_chat = {PD_ROUTE_CHAT, 0, 5, "m"};
static const pd_wire_api_t api_chat_usage = {PD_ROUTE_CHAT, 1, 5, "m"};

/* A leg of 3 tokens named r1 on api. */
static pd_wire_leg_t leg_on(const pd_wire_api_t *api, int is_stream) {
  return (pd_wire_leg_t){"r1", is_stream, 0, 3, api};
}

/* Render kind into out (NUL-terminated); fails the test when it is empty or past the cap. */
static size_t render(const pd_wire_leg_t *leg, int kind, uint32_t arg, char *out) {
  size_t cap = pd_wire_render_cap(leg, kind);
  PDT_TRUE(cap < OUT_MAX);
  size_t n = pd_wire_render(leg, kind, arg, out, cap < OUT_MAX ? cap : OUT_MAX - 1);
  PDT_TRUE(n > 0 && n < cap);
  out[n < OUT_MAX ? n : 0] = 0;
  return n;
}

/* Split an SSE text into its events' JSON (cJSON each, NULL for [DONE]); returns the count. */
static int events_of(const char *s, cJSON **ev) {
  int n = 0;
  while (*s && n < EV_MAX) {
    if (strncmp(s, "data: ", 6) != 0) break;
    const char *end = strstr(s, "\n\n");
    if (!end) break;
    int is_done = strncmp(s + 6, "[DONE]", 6) == 0;
    ev[n++] = is_done ? NULL : cJSON_ParseWithLength(s + 6, (size_t)(end - s - 6));
    s = end + 2;
  }
  PDT_EQ_STR(s, ""); /* nothing but whole events */
  return n;
}

static void free_events(cJSON **ev, int n) {
  for (int i = 0; i < n; i++) cJSON_Delete(ev[i]);
}

static const char *str_at(const cJSON *j, const char *path) {
  char key[64];
  const cJSON *cur = j;
  while (cur && *path) { /* "a.b.0.c": object keys and array indices */
    size_t k = strcspn(path, ".");
    snprintf(key, sizeof key, "%.*s", (int)k, path);
    cur = key[0] >= '0' && key[0] <= '9' ? cJSON_GetArrayItem(cur, atoi(key))
                                         : cJSON_GetObjectItemCaseSensitive(cur, key);
    path += k + (path[k] == '.');
  }
  if (cJSON_IsNull(cur)) return "null";
  return cJSON_IsString(cur) ? cur->valuestring : "(absent)";
}

static double num_at(const cJSON *j, const char *obj, const char *key) {
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, obj);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* The fields every OpenAI object opens with. */
static void expect_head(const cJSON *j, const char *id, const char *object) {
  PDT_TRUE(j != NULL);
  PDT_EQ_STR(str_at(j, "id"), id);
  PDT_EQ_STR(str_at(j, "object"), object);
  PDT_EQ_STR(str_at(j, "model"), "m");
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "created");
  PDT_TRUE(cJSON_IsNumber(c) && c->valuedouble == 0);
  PDT_TRUE(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "choices")));
}

static void expect_usage(const cJSON *j, int completion) {
  PDT_EQ_INT((int)num_at(j, "usage", "prompt_tokens"), 5);
  PDT_EQ_INT((int)num_at(j, "usage", "completion_tokens"), completion);
  PDT_EQ_INT((int)num_at(j, "usage", "total_tokens"), 5 + completion);
}

static void test_completions_stream_chunks(void) {
  char out[OUT_MAX];
  cJSON *ev[EV_MAX];
  pd_wire_leg_t leg = leg_on(&api_cmpl, 1);
  render(&leg, PD_WIRE_TOKEN, 0 << 2, out);
  int n = events_of(out, ev);
  PDT_EQ_INT(n, 1);
  if (n == 1) {
    expect_head(ev[0], "r1", "text_completion");
    PDT_EQ_STR(str_at(ev[0], "choices.0.text"), "tok0 ");
    PDT_EQ_STR(str_at(ev[0], "choices.0.finish_reason"), "null");
    PDT_EQ_STR(str_at(ev[0], "choices.0.logprobs"), "null");
    PDT_TRUE(!cJSON_GetObjectItemCaseSensitive(ev[0], "usage"));
  }
  free_events(ev, n);
  render(&leg, PD_WIRE_TOKEN, 2 << 2, out); /* the last: finish_reason length, no usage */
  n = events_of(out, ev);
  PDT_EQ_INT(n, 1);
  if (n == 1) PDT_EQ_STR(str_at(ev[0], "choices.0.finish_reason"), "length");
  free_events(ev, n);
  leg = leg_on(&api_cmpl_usage, 1); /* include_usage: a final chunk with no choices */
  render(&leg, PD_WIRE_TOKEN, 2 << 2, out);
  n = events_of(out, ev);
  PDT_EQ_INT(n, 2);
  if (n == 2) {
    PDT_EQ_STR(str_at(ev[0], "choices.0.text"), "tok2 ");
    expect_head(ev[1], "r1", "text_completion");
    PDT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(ev[1], "choices")), 0);
    expect_usage(ev[1], 3);
  }
  free_events(ev, n);
  render(&leg, PD_WIRE_DONE_EVENT, 0, out);
  PDT_EQ_STR(out, "data: [DONE]\n\n");
}

static void test_chat_stream_chunks(void) {
  char out[OUT_MAX];
  cJSON *ev[EV_MAX];
  pd_wire_leg_t leg = leg_on(&api_chat_usage, 1);
  render(&leg, PD_WIRE_TOKEN, 0 << 2, out); /* the role chunk, then the first token */
  int n = events_of(out, ev);
  PDT_EQ_INT(n, 2);
  if (n == 2) {
    expect_head(ev[0], "r1", "chat.completion.chunk");
    PDT_EQ_STR(str_at(ev[0], "choices.0.delta.role"), "assistant");
    PDT_EQ_STR(str_at(ev[0], "choices.0.delta.content"), "");
    expect_head(ev[1], "r1", "chat.completion.chunk");
    PDT_EQ_STR(str_at(ev[1], "choices.0.delta.content"), "tok0 ");
    PDT_EQ_STR(str_at(ev[1], "choices.0.delta.role"), "(absent)");
    PDT_EQ_STR(str_at(ev[1], "choices.0.finish_reason"), "null");
  }
  free_events(ev, n);
  render(&leg, PD_WIRE_TOKEN, 1 << 2 | 3, out); /* coalesced: tok1, tok2, finish, usage */
  n = events_of(out, ev);
  PDT_EQ_INT(n, 4);
  if (n == 4) {
    PDT_EQ_STR(str_at(ev[0], "choices.0.delta.content"), "tok1 ");
    PDT_EQ_STR(str_at(ev[1], "choices.0.delta.content"), "tok2 ");
    PDT_EQ_STR(str_at(ev[1], "choices.0.finish_reason"), "null");
    PDT_EQ_STR(str_at(ev[2], "choices.0.delta.content"), "(absent)"); /* SGLang's own chunk */
    PDT_EQ_STR(str_at(ev[2], "choices.0.finish_reason"), "length");
    expect_usage(ev[3], 3);
  }
  free_events(ev, n);
  pd_wire_vllm_t v = {"p0", "p0", 5600}; /* vLLM: the last token's chunk says it */
  size_t nv = pd_wire_render_vllm(&leg, &v, PD_WIRE_TOKEN, 2 << 2, out, sizeof out - 1);
  out[nv] = 0;
  n = events_of(out, ev);
  PDT_EQ_INT(n, 2);
  if (n == 2) {
    PDT_EQ_STR(str_at(ev[0], "choices.0.delta.content"), "tok2 ");
    PDT_EQ_STR(str_at(ev[0], "choices.0.finish_reason"), "length");
    expect_usage(ev[1], 3);
  }
  free_events(ev, n);
  char a[OUT_MAX], b[OUT_MAX]; /* split: the halves make the whole */
  size_t whole = render(&leg, PD_WIRE_TOKEN, 1 << 2, out);
  size_t na = render(&leg, PD_WIRE_TOKEN, 1 << 2 | 1, a);
  size_t nb = render(&leg, PD_WIRE_TOKEN, 1 << 2 | 2, b);
  PDT_EQ_U64(na + nb, whole);
  PDT_TRUE(memcmp(out, a, na) == 0 && memcmp(out + na, b, nb) == 0);
}

static void test_whole_answers(void) {
  char out[OUT_MAX];
  pd_wire_leg_t leg = leg_on(&api_cmpl, 0);
  render(&leg, PD_WIRE_DECODE_BODY, 0, out);
  cJSON *j = cJSON_Parse(out);
  expect_head(j, "r1", "text_completion");
  PDT_EQ_STR(str_at(j, "choices.0.text"), "tok0 tok1 tok2 ");
  PDT_EQ_STR(str_at(j, "choices.0.finish_reason"), "length");
  expect_usage(j, 3); /* a whole answer always carries usage */
  cJSON_Delete(j);
  leg = leg_on(&api_chat, 0);
  render(&leg, PD_WIRE_DECODE_BODY, 0, out);
  j = cJSON_Parse(out);
  expect_head(j, "r1", "chat.completion");
  PDT_EQ_STR(str_at(j, "choices.0.message.role"), "assistant");
  PDT_EQ_STR(str_at(j, "choices.0.message.content"), "tok0 tok1 tok2 ");
  PDT_EQ_STR(str_at(j, "choices.0.finish_reason"), "length");
  expect_usage(j, 3);
  cJSON_Delete(j);
  render(&leg, PD_WIRE_ABORT_BODY, 0, out); /* /abort_request: finish_reason abort */
  j = cJSON_Parse(out);
  PDT_EQ_STR(str_at(j, "choices.0.finish_reason"), "abort");
  PDT_EQ_STR(str_at(j, "choices.0.message.content"), "");
  cJSON_Delete(j);
}

static void test_sglang_prefill_and_abort_events(void) {
  char out[OUT_MAX];
  cJSON *ev[EV_MAX];
  pd_wire_leg_t leg = leg_on(&api_cmpl, 1);
  render(&leg, PD_WIRE_PREFILL_BODY, 0, out); /* no text, capped by length, [DONE] */
  int n = events_of(out, ev);
  PDT_EQ_INT(n, 2);
  if (n == 2) {
    PDT_EQ_STR(str_at(ev[0], "choices.0.text"), "");
    PDT_EQ_STR(str_at(ev[0], "choices.0.finish_reason"), "length");
    PDT_TRUE(ev[1] == NULL);
  }
  free_events(ev, n);
  render(&leg, PD_WIRE_PREFILL_BODY, 1, out); /* a body error follows: no [DONE] */
  n = events_of(out, ev);
  PDT_EQ_INT(n, 1);
  free_events(ev, n);
  leg = leg_on(&api_chat, 1); /* chat: the role chunk and SGLang's finish chunk */
  render(&leg, PD_WIRE_PREFILL_BODY, 0, out);
  n = events_of(out, ev);
  PDT_EQ_INT(n, 3);
  if (n == 3) {
    PDT_EQ_STR(str_at(ev[0], "choices.0.delta.role"), "assistant");
    PDT_EQ_STR(str_at(ev[1], "choices.0.finish_reason"), "length");
  }
  free_events(ev, n);
  leg = leg_on(&api_chat, 0);
  render(&leg, PD_WIRE_PREFILL_BODY, 0, out);
  cJSON *j = cJSON_Parse(out);
  PDT_EQ_STR(str_at(j, "choices.0.message.content"), "");
  expect_usage(j, 0);
  cJSON_Delete(j);
  size_t whole = strlen(out);
  PDT_EQ_U64(render(&leg, PD_WIRE_PREFILL_BODY, 1, out), whole / 2); /* cut mid-document */
  leg = leg_on(&api_chat, 1);
  render(&leg, PD_WIRE_ABORT_EVENT, 0, out);
  n = events_of(out, ev);
  PDT_EQ_INT(n, 2);
  if (n == 2) PDT_EQ_STR(str_at(ev[0], "choices.0.finish_reason"), "abort");
  free_events(ev, n);
}

static void test_error_shapes_per_protocol(void) {
  char out[OUT_MAX];
  pd_wire_leg_t leg = leg_on(&api_chat, 0);
  render(&leg, PD_WIRE_ERROR_BODY, 503, out); /* SGLang (W6.9) */
  PDT_EQ_STR(out, "{\"error\":{\"object\":\"error\",\"message\":\"worker returned 503\","
                  "\"type\":\"InternalServerError\",\"param\":null,\"code\":503}}");
  leg.is_stream = 1;
  render(&leg, PD_WIRE_ERROR_EVENT, 400, out);
  PDT_EQ_STR(out, "data: {\"error\":{\"object\":\"error\",\"message\":\"worker returned 400\","
                  "\"type\":\"BadRequestError\",\"param\":null,\"code\":400}}\n\n");
  pd_wire_vllm_t v = {"p0", "p0", 5600}; /* vLLM keeps its own (V1.28, V1.31) */
  size_t n = pd_wire_render_vllm(&leg, &v, PD_WIRE_ERROR_EVENT, 500, out, sizeof out - 1);
  out[n] = 0;
  PDT_EQ_STR(out, "data: {\"error\":{\"message\":\"worker returned 500\",\"type\":"
                  "\"InternalServerError\",\"param\":null,\"code\":500}}\n\n");
  leg = leg_on(NULL, 0); /* /generate: SGLang's native shape, unchanged */
  render(&leg, PD_WIRE_ERROR_BODY, 500, out);
  PDT_EQ_STR(out, "{\"error\":{\"message\":\"worker returned 500\",\"code\":500}}");
  leg.is_stream = 1;
  render(&leg, PD_WIRE_TOKEN, 1 << 2, out);
  PDT_EQ_STR(out, "data: {\"text\":\"tok1 \",\"index\":1,\"meta_info\":{\"id\":\"r1\","
                  "\"completion_tokens\":2}}\n\n");
}

/* vLLM prefill's answer is the route's object with kv_transfer_params on top (V1.4, V1.5);
 * vLLM's ids are "cmpl-<rid>" / "chatcmpl-<rid>". */
static void test_vllm_prefill_answer_per_route(void) {
  char out[OUT_MAX];
  size_t n = 0;
  pd_wire_vllm_t v = {"p0", "p0", 5600};
  const pd_wire_api_t *apis[] = {&api_cmpl, &api_chat};
  const char *objects[] = {"text_completion", "chat.completion"};
  const char *texts[] = {"choices.0.text", "choices.0.message.content"};
  for (int i = 0; i < 2; i++) {
    pd_wire_leg_t leg = leg_on(apis[i], 0);
    n = pd_wire_render_vllm(&leg, &v, PD_WIRE_VLLM_PREFILL_BODY, 2, out, sizeof out - 1);
    PDT_TRUE(n > 0 && n < pd_wire_render_cap(&leg, PD_WIRE_VLLM_PREFILL_BODY));
    out[n] = 0;
    cJSON *j = cJSON_Parse(out);
    expect_head(j, i ? "chatcmpl-r1" : "cmpl-r1", objects[i]);
    PDT_EQ_STR(str_at(j, texts[i]), "tok0 ");
    PDT_EQ_STR(str_at(j, "choices.0.finish_reason"), "length");
    expect_usage(j, 1);
    PDT_EQ_STR(str_at(j, "kv_transfer_params.remote_request_id"), "r1");
    PDT_EQ_STR(str_at(j, "kv_transfer_params.remote_engine_id"), "p0");
    cJSON_Delete(j);
  }
  pd_wire_leg_t leg = leg_on(&api_chat, 1); /* vLLM's own chunks name "chatcmpl-<rid>" */
  size_t nt = pd_wire_render_vllm(&leg, &v, PD_WIRE_TOKEN, 1 << 2, out, sizeof out - 1);
  out[nt] = 0;
  cJSON *tj = cJSON_Parse(out + 6);
  expect_head(tj, "chatcmpl-r1", "chat.completion.chunk");
  PDT_EQ_STR(str_at(tj, "choices.0.delta.content"), "tok1 ");
  cJSON_Delete(tj);
  /* a stream prefill (no proxy asks for one): a chunk */
  n = pd_wire_render_vllm(&leg, &v, PD_WIRE_VLLM_PREFILL_BODY, 0, out, sizeof out - 1);
  out[n] = 0;
  cJSON *ev[EV_MAX];
  int ne = events_of(out, ev);
  PDT_EQ_INT(ne, 2);
  if (ne == 2) {
    PDT_EQ_STR(str_at(ev[0], "object"), "chat.completion.chunk");
    PDT_EQ_STR(str_at(ev[0], "choices.0.delta.content"), "tok0 ");
    PDT_EQ_STR(str_at(ev[0], "choices.0.finish_reason"), "stop");
    PDT_EQ_STR(str_at(ev[0], "kv_transfer_params"), "null");
  }
  free_events(ev, ne);
}

/* pd_wire_render_cap bounds every kind on every route, stream or not, with the longest rid
 * and model, usage asked, tokens coalesced. */
static void test_render_cap_bounds_every_kind_and_route(void) {
  static const int kinds[] = {PD_WIRE_TOKEN,       PD_WIRE_DONE_EVENT,   PD_WIRE_ERROR_EVENT,
                              PD_WIRE_PREFILL_BODY, PD_WIRE_DECODE_BODY, PD_WIRE_ERROR_BODY,
                              PD_WIRE_ABORT_EVENT, PD_WIRE_ABORT_BODY,   PD_WIRE_VLLM_PREFILL_BODY};
  static const uint32_t args[] = {0, 1, 3, 999, 4294967292u | 3, PD_WIRE_CUT | PD_WIRE_MAX_BLOCKS};
  char rid[PD_WORKER_RID_MAX * 6], *out = malloc(OUT_MAX);
  memset(rid, 'x', sizeof rid - 1); /* an escaped rid can be 6 x its bytes */
  rid[sizeof rid - 1] = 0;
  pd_wire_api_t apis[3] = {{PD_ROUTE_GENERATE, 1, UINT32_MAX, ""},
                           {PD_ROUTE_COMPLETIONS, 1, UINT32_MAX, ""},
                           {PD_ROUTE_CHAT, 1, UINT32_MAX, ""}};
  pd_wire_vllm_t v = {NULL, NULL, 65535};
  char name[PD_WIRE_NAME_MAX];
  memset(name, 'n', sizeof name - 1);
  name[sizeof name - 1] = 0;
  v.engine_id = v.kv_host = name;
  if (!out) return;
  for (int a = 0; a < 3; a++) {
    memset(apis[a].model, 'm', PD_WIRE_MODEL_MAX - 1);
    for (int s = 0; s < 2; s++)
      for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t g = 0; g < sizeof args / sizeof args[0]; g++) {
          pd_wire_leg_t leg = {rid, s, 1, 2000, &apis[a]};
          size_t cap = pd_wire_render_cap(&leg, kinds[k]);
          PDT_TRUE(cap < OUT_MAX);
          size_t n = pd_wire_render_vllm(&leg, &v, kinds[k], args[g], out, cap);
          size_t m = pd_wire_render(&leg, kinds[k], args[g], out, cap);
          PDT_TRUE(n > 0 && n < cap && m > 0 && m < cap);
        }
  }
  free(out);
}

static int read_body(pd_worker_body_t *b, const char *path, const char *json) {
  cJSON *j = cJSON_Parse(json);
  int rc = pd_worker_body_read(b, j, json, strlen(json), NULL, NULL, 0);
  pd_worker_body_route(b, path);
  cJSON_Delete(j);
  return rc;
}

static void test_body_parser_reads_route_model_and_usage(void) {
  pd_worker_body_t b;
  PDT_EQ_INT(read_body(&b, "/v1/chat/completions",
                       "{\"model\":\"llama-3\",\"messages\":[{\"role\":\"user\","
                       "\"content\":\"a b\"}],"
                       "\"stream\":true,\"stream_options\":{\"include_usage\":true}}"),
             0);
  PDT_EQ_INT(b.api.route, PD_ROUTE_CHAT);
  PDT_EQ_STR(b.api.model, "llama-3");
  PDT_EQ_INT(b.api.has_usage, 1);
  PDT_EQ_U64(b.api.prompt_tokens, 2);
  PDT_EQ_INT(read_body(&b, "/v1/completions", "{\"model\":\"a\\\"b\",\"prompt\":\"x\","
                                              "\"stream_options\":{\"include_usage\":false}}"),
             0);
  PDT_EQ_INT(b.api.route, PD_ROUTE_COMPLETIONS);
  PDT_EQ_STR(b.api.model, ""); /* a name that needs escaping is not echoed */
  PDT_EQ_INT(b.api.has_usage, 0);
  PDT_EQ_INT(read_body(&b, "/generate", "{\"text\":\"x\"}"), 0);
  PDT_EQ_INT(b.api.route, PD_ROUTE_GENERATE);
  PDT_EQ_INT(read_body(&b, "/nope", "{\"text\":\"x\"}"), 0);
  PDT_EQ_INT(b.api.route, PD_ROUTE_GENERATE);
}

/* ---- the checker reads token identity in OpenAI's shape ---- */

/* A whole 200 stream of the leg's tokens as the worker writes it; skip (index) is left out,
 * swap exchanges tokens 0 and 1, dup repeats token 1 (each -1: none). */
static size_t stream_of(const pd_wire_leg_t *leg, int skip, int swap, int dup, char *out) {
  size_t off = 0;
  for (uint32_t i = 0; i < leg->tokens; i++) {
    uint32_t k = swap >= 0 && i < 2 ? 1 - i : i;
    if ((int)k == skip) continue;
    off += render(leg, PD_WIRE_TOKEN, k << 2, out + off);
    if ((int)k == dup) off += render(leg, PD_WIRE_TOKEN, k << 2, out + off);
  }
  off += render(leg, PD_WIRE_DONE_EVENT, 0, out + off);
  return off;
}

/* Feed bytes to the checker's stream reader, one byte at a time when split; returns the
 * request's tokens seen, or -1 after a token error. */
static int feed_stream(const char *bytes, size_t n, int split) {
  pd_client_request_t rq;
  memset(&rq, 0, sizeof rq);
  rq.is_stream = 1;
  rq.head_status = 200;
  rq.is_sse_head = 1;
  rq.tokens = 3;
  pd_sse_init(&rq.sse, NULL);
  for (size_t i = 0; i < n; i += split ? 1 : n)
    PDT_EQ_INT(pd_check_client_data(&rq, (const uint8_t *)bytes + i, split ? 1 : n), 0);
  pd_sse_free(&rq.sse);
  PDT_TRUE(rq.saw_done);
  return rq.token_error || rq.events_after_done ? -1 : (int)rq.next_token;
}

static void test_checker_reads_openai_streams(void) {
  char *out = malloc(OUT_MAX);
  const pd_wire_api_t *apis[] = {&api_cmpl, &api_chat_usage, NULL};
  if (!out) return;
  for (int a = 0; a < 3; a++) {
    pd_wire_leg_t leg = leg_on(apis[a], 1);
    size_t n = stream_of(&leg, -1, -1, -1, out);
    PDT_EQ_INT(feed_stream(out, n, 0), 3); /* every token, in order */
    PDT_EQ_INT(feed_stream(out, n, 1), 3);
    n = stream_of(&leg, 1, -1, -1, out);
    PDT_EQ_INT(feed_stream(out, n, 0), -1); /* a lost token */
    n = stream_of(&leg, 2, -1, -1, out); /* the last lost: I5 counts 2 of 3 (chat: role kept) */
    PDT_EQ_INT(feed_stream(out, n, 0), 2);
    n = stream_of(&leg, -1, 1, -1, out);
    PDT_EQ_INT(feed_stream(out, n, 0), -1); /* reordered */
    n = stream_of(&leg, -1, -1, 1, out);
    PDT_EQ_INT(feed_stream(out, n, 0), -1); /* repeated */
  }
  static const char foreign[] = /* a chunk whose text is not a token's */
      "data: {\"choices\":[{\"index\":0,\"text\":\"tok0 \"}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"text\":\"hello\"}]}\n\ndata: [DONE]\n\n";
  PDT_EQ_INT(feed_stream(foreign, sizeof foreign - 1, 0), -1);
  free(out);
}

/* The whole-answer reader: pd_check_request counts every token only when the text spells
 * them all in order and usage.completion_tokens agrees. */
static uint32_t judge_body_of(const char *body, uint32_t tokens) {
  pd_scenario_t *s = malloc(sizeof *s);
  pd_world_stats_t st;
  pd_client_request_t rq;
  pd_worker_leg_t d;
  if (!s) return UINT32_MAX;
  memset(&st, 0, sizeof st);
  memset(&rq, 0, sizeof rq);
  memset(&d, 0, sizeof d);
  pd_scenario_defaults(s);
  pd_judge_t j = {.s = s, .mode = PD_MODE_JOINED, .max_attempts = 5, .now = 1000000000ull,
                  .stats = &st};
  d.role = PD_ROLE_DECODE;
  d.worker = 1;
  d.truth = PD_TRUTH_OK;
  d.fault = -1;
  rq.legs = &d;
  rq.n_legs = 1;
  rq.tokens = tokens;
  rq.ended = 1;
  rq.head_status = 200;
  rq.attempts = 1;
  PDT_EQ_INT(pd_check_client_data(&rq, (const uint8_t *)body, strlen(body)), 0);
  char reason[160];
  (void)pd_check_request(&j, &rq, reason, sizeof reason);
  pd_buf_free(NULL, &rq.body);
  free(s);
  return rq.next_token;
}

static uint32_t judge_body(const char *body) { return judge_body_of(body, 3); }

static void test_checker_reads_openai_bodies(void) {
  char out[OUT_MAX];
  const pd_wire_api_t *apis[] = {&api_cmpl, &api_chat};
  for (int a = 0; a < 2; a++) {
    pd_wire_leg_t leg = leg_on(apis[a], 0);
    render(&leg, PD_WIRE_DECODE_BODY, 0, out);
    PDT_EQ_U64(judge_body(out), 3);
    char *t = strstr(out, "tok1 ");
    if (t) memcpy(t, "tok2 ", 5); /* tok0 tok2 tok2: a lost (repeated) token */
    PDT_EQ_U64(judge_body(out), 0);
    leg.tokens = 2; /* two tokens where three were asked: usage and text both short */
    render(&leg, PD_WIRE_DECODE_BODY, 0, out);
    PDT_EQ_U64(judge_body(out), 0);
  }
  PDT_EQ_U64(judge_body("{\"choices\":[{\"index\":0,\"text\":\"tok0 tok1 tok2 \"}],"
                        "\"usage\":{\"completion_tokens\":2}}"),
             0); /* usage disagrees */
  /* 100000 tokens into the simulator's 256 KiB render buffer: the text is cut short, the
     answer stays whole JSON with usage counting all, and reads clean */
  size_t big = 256u * 1024u;
  char *buf = malloc(big);
  pd_wire_leg_t leg = leg_on(&api_chat, 0);
  leg.tokens = 100000;
  size_t n = buf ? pd_wire_render(&leg, PD_WIRE_DECODE_BODY, 0, buf, big) : 0;
  PDT_TRUE(n > big / 2 && n < big);
  if (buf && n) {
    buf[n] = 0;
    PDT_EQ_U64(judge_body_of(buf, 100000), 100000);
    char *t = strstr(buf, "tok7 "); /* a lost token inside the cut text is still caught */
    if (t) memcpy(t, "tok8 ", 5);
    PDT_EQ_U64(judge_body_of(buf, 100000), 0);
  }
  free(buf);
}

/* ---- over sockets: the mock answers each route in its shape ---- */

static void test_the_mock_answers_openai_routes_in_their_shape(void) {
  mk_t d;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&d, PD_ROLE_DECODE, NULL, 300000, 300000, 1) == 0); /* direct */
  if (!d.m) goto out;
  pdt_tx_t *t = pdt_tx_once(mh, pd_mock_port(d.m), "/v1/chat/completions",
                            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
                            "\"a b c d e\"}],\"max_tokens\":3,\"stream\":true,\"rid\":\"r1\","
                            "\"stream_options\":{\"include_usage\":true}}");
  PDT_EQ_INT(t->status, 200);
  cJSON *ev[EV_MAX];
  int n = events_of(t->buf, ev); /* role, tok0, tok1, tok2, finish, usage, [DONE] */
  PDT_EQ_INT(n, 7);
  if (n == 7) {
    expect_head(ev[0], "r1", "chat.completion.chunk");
    PDT_EQ_STR(str_at(ev[0], "choices.0.delta.role"), "assistant");
    PDT_EQ_STR(str_at(ev[3], "choices.0.delta.content"), "tok2 ");
    PDT_EQ_STR(str_at(ev[4], "choices.0.finish_reason"), "length");
    expect_usage(ev[5], 3);
    PDT_TRUE(ev[6] == NULL);
  }
  free_events(ev, n);
  PDT_EQ_INT(feed_stream(t->buf, t->len, 1), 3);
  pdt_tx_del(mh, t);
  t = pdt_tx_once(mh, pd_mock_port(d.m), "/v1/completions",
                  "{\"model\":\"m\",\"prompt\":\"a b c d e\",\"max_tokens\":3,\"rid\":\"r2\"}");
  PDT_EQ_INT(t->status, 200);
  cJSON *j = cJSON_Parse(t->buf);
  expect_head(j, "r2", "text_completion");
  PDT_EQ_STR(str_at(j, "choices.0.text"), "tok0 tok1 tok2 ");
  expect_usage(j, 3);
  cJSON_Delete(j);
  PDT_EQ_U64(judge_body(t->buf), 3);
  pdt_tx_del(mh, t);
  mk_stop(&d);
out:
  mk_free(&d);
  curl_multi_cleanup(mh);
}

/* ---- through the simulator ---- */

static void run_all_modes(const char *doc, const uint32_t *expect_by_mode) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[PDT_SCENARIO_ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_q(s, doc, err), 0);
  PDT_EQ_STR(err, "");
  int runs = 0;
  for (int m = 0; m < PD_MODE_COUNT; m++) {
    if (!pd_mode_speaks((pd_mode_t)m, pd_scenario_protocol(s))) continue;
    pd_world_stats_t st;
    uint32_t got = UINT32_MAX;
    uint64_t h = 0;
    PDT_EQ_INT(pd_world_run(s, (pd_mode_t)m, s->config.seed, NULL, &st, &got, &h), 0);
    if (got != expect_by_mode[m])
      fprintf(stderr, "  %s: %s\n", pd_mode_name((pd_mode_t)m), st.first_reason);
    PDT_EQ_U64(got, expect_by_mode[m]);
    PDT_EQ_U64(st.requests_served, 4);
    runs++;
  }
  PDT_TRUE(runs >= 4);
  free(s);
}

static void test_a_chat_stream_is_served_cleanly_under_every_mode(void) {
  uint32_t none[PD_MODE_COUNT] = {0};
  run_all_modes("{'name':'chat','workers':[{'name':'p0','role':'prefill'},"
                "{'name':'d0','role':'decode','chunking':'split'}],'expect':{},"
                "'workload':{'requests':4,'stream':true,'tokens':5,"
                "'route':'/v1/chat/completions'}}",
                none);
  uint32_t sf[PD_MODE_COUNT] = {0}; /* the same as sf-happy-path-stream on /v1/completions */
  sf[PD_MODE_MOONCAKE_PROXY] = 1u << (PD_INVARIANT_STRANDED_KV - 1) |
                                1u << (PD_INVARIANT_DISAGGREGATED - 1); /* decode alone */
  run_all_modes("{'name':'chat-sf','workers':[{'name':'p0','role':'prefill','protocol':'vllm'},"
                "{'name':'d0','role':'decode','protocol':'vllm','chunking':'coalesce'}],"
                "'expect':{},'workload':{'requests':4,'stream':true,'tokens':5,"
                "'route':'/v1/chat/completions'}}",
                sf);
}

int pdt_suite_wire(void) {
  static const pdt_case_t cases[] = {
      {"/v1/completions stream: text chunks, finish_reason on the last, usage chunk (W6.6, W6.8)",
       test_completions_stream_chunks},
      {"/v1/chat/completions stream: role chunk, delta.content, coalesced and split (W6.7)",
       test_chat_stream_chunks},
      {"whole answers: text_completion / chat.completion with usage; abort", test_whole_answers},
      {"SGLang prefill and abort on an OpenAI route", test_sglang_prefill_and_abort_events},
      {"errors: SGLang's OpenAI shape (W6.9), vLLM's own (V1.28, V1.31), /generate unchanged",
       test_error_shapes_per_protocol},
      {"vLLM prefill's answer is the route's object plus kv_transfer_params (V1.4, V1.5)",
       test_vllm_prefill_answer_per_route},
      {"pd_wire_render_cap bounds every kind, route and stream flag",
       test_render_cap_bounds_every_kind_and_route},
      {"body parser: route from the path, model echoed, include_usage",
       test_body_parser_reads_route_model_and_usage},
      {"checker: OpenAI streams, a lost, repeated or reordered token is caught",
       test_checker_reads_openai_streams},
      {"checker: OpenAI whole answers must spell every token and count them in usage",
       test_checker_reads_openai_bodies},
      {"sockets: the mock answers /v1/chat/completions and /v1/completions in their shapes",
       test_the_mock_answers_openai_routes_in_their_shape},
      {"simulator: a /v1/chat/completions stream is served cleanly under every mode",
       test_a_chat_stream_is_served_cleanly_under_every_mode},
  };
  return PDT_SUITE("wire", cases);
}
