/* OpenAI's wire shapes for the worker answers on /v1/completions and /v1/chat/completions
 * (see pd_worker_shared.h; facts W6.6-W6.9, V1.4, V1.5, V1.28, V1.31 in docs/upstream.md).
 *
 * Every object opens with id (SGLang's: the rid; vLLM's: "cmpl-<rid>" / "chatcmpl-<rid>"),
 * object, created (0: no clock here) and model (the request's, else "default").
 * Completions: choices[0].text; chat: a stream opens with a role chunk (delta
 * {"role":"assistant","content":""}), then delta.content, and a whole answer has
 * choices[0].message. Token k's text is "tok<k> ", one token per chunk;
 * finish_reason is null until the output ends, capped by max_tokens: "length" on the last
 * token's chunk, or (SGLang's chat) on a chunk of its own with an empty delta. A stream with
 * stream_options.include_usage ends with a chunk whose choices are empty and which carries
 * usage; a whole answer always carries usage. */
#include <assert.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pd_bw.h"
#include "pd_worker_shared.h"

/* An appending writer: once a write does not fit, every later one is refused too. is_vllm
 * picks vLLM's ids ("cmpl-<rid>"; SGLang's are the rid itself). */
typedef struct wr {
  pd_bw_t b;
  int is_vllm;
} wr_t;

__attribute__((format(printf, 2, 3))) static void put(wr_t *w, const char *fmt, ...) {
  pd_bw_t *b = &w->b;
  if (b->is_short) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b->buf + b->off, b->cap - b->off, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= b->cap - b->off) b->is_short = 1;
  else b->off += (size_t)n;
}

static size_t done(const wr_t *w) { return pd_bw_done(&w->b); }

/* put(w, "%s", s) and put(w, "%u", v) without the format: every token's events use these. */
static void put_s(wr_t *w, const char *s) { pd_bw_s(&w->b, s); }
static void put_u(wr_t *w, uint64_t v) { pd_bw_u(&w->b, v); }

static int is_chat(const pd_wire_leg_t *leg) { return leg->api->route == PD_ROUTE_CHAT; }

static const char *model_of(const pd_wire_leg_t *leg) {
  return leg->api->model[0] ? leg->api->model : "default";
}

/* {"id":..,"object":..,"created":0,"model":..,"choices":[ */
static void open_object(wr_t *w, const pd_wire_leg_t *leg, int is_chunk) {
  const char *object = !is_chat(leg) ? "text_completion"
                       : is_chunk    ? "chat.completion.chunk"
                                     : "chat.completion";
  const char *prefix = !w->is_vllm ? "" : is_chat(leg) ? "chatcmpl-" : "cmpl-";
  put_s(w, "{\"id\":\"");
  put_s(w, prefix);
  put_s(w, leg->rid ? leg->rid : "(null)"); /* what glibc's "%s" printed */
  put_s(w, "\",\"object\":\"");
  put_s(w, object);
  put_s(w, "\",\"created\":0,\"model\":\"");
  put_s(w, model_of(leg));
  put_s(w, "\",\"choices\":[");
}

static void put_finish(wr_t *w, const char *finish) {
  if (!finish) {
    put_s(w, ",\"logprobs\":null,\"finish_reason\":null}");
    return;
  }
  put_s(w, ",\"logprobs\":null,\"finish_reason\":\"");
  put_s(w, finish);
  put_s(w, "\"}");
}

/* ],"usage":{..}} or ]} */
static void close_object(wr_t *w, const pd_wire_leg_t *leg, int has_usage, uint32_t completion) {
  uint32_t prompt = leg->api->prompt_tokens;
  if (!has_usage) {
    put_s(w, "]}");
    return;
  }
  put_s(w, "],\"usage\":{\"prompt_tokens\":");
  put_u(w, prompt);
  put_s(w, ",\"completion_tokens\":");
  put_u(w, completion);
  put_s(w, ",\"total_tokens\":");
  put_u(w, (uint64_t)prompt + completion);
  put_s(w, "}}");
}

/* One stream event of one choice: choice opens it ({"index":0,... without its closing
 * brace), put_finish closes it. */
static void choice_event(wr_t *w, const pd_wire_leg_t *leg, const char *choice,
                         const char *finish) {
  put_s(w, "data: ");
  open_object(w, leg, 1);
  put_s(w, choice);
  put_finish(w, finish);
  close_object(w, leg, 0, 0);
  put_s(w, "\n\n");
}

/* A choice whose text (completions) or delta content (chat) is text (a token's, at most
 * "tok4294967295 "). */
static void chunk_event(wr_t *w, const pd_wire_leg_t *leg, const char *text, const char *finish) {
  char c[64];
  size_t n = is_chat(leg) ? sizeof "{\"index\":0,\"delta\":{\"content\":\"" - 1
                          : sizeof "{\"index\":0,\"text\":\"" - 1;
  memcpy(c, is_chat(leg) ? "{\"index\":0,\"delta\":{\"content\":\"" : "{\"index\":0,\"text\":\"", n);
  size_t t = strlen(text); /* at most "tok4294967295 " */
  assert(n + t + 3 <= sizeof c);
  memcpy(c + n, text, t);
  memcpy(c + n + t, is_chat(leg) ? "\"}" : "\"", is_chat(leg) ? 3 : 2);
  choice_event(w, leg, c, finish);
}

static void role_event(wr_t *w, const pd_wire_leg_t *leg) {
  choice_event(w, leg, "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}", NULL);
}

/* The final chunk of a stream that asked for usage (W6.8): no choices. */
static void usage_event(wr_t *w, const pd_wire_leg_t *leg, uint32_t completion) {
  put_s(w, "data: ");
  open_object(w, leg, 1);
  close_object(w, leg, 1, completion);
  put_s(w, "\n\n");
}

/* SGLang's chat stream ends a choice with a chunk of its own: an empty delta and the
 * finish_reason (W6.7). */
static void finish_event(wr_t *w, const pd_wire_leg_t *leg, const char *finish) {
  choice_event(w, leg, "{\"index\":0,\"delta\":{}", finish);
}

/* Token k as its own event(s): the chat role chunk before the first; after the last,
 * SGLang's chat finish chunk (else the last token's chunk says it) and the usage chunk. */
static void token_events(wr_t *w, const pd_wire_leg_t *leg, uint32_t k) {
  char text[24] = "tok";
  size_t n = 3;
  char d[10];
  size_t i = sizeof d;
  uint32_t v = k;
  do d[--i] = (char)('0' + v % 10); while ((v /= 10) && i);
  memcpy(text + n, d + i, sizeof d - i);
  n += sizeof d - i;
  memcpy(text + n, " ", 2); /* "tok<k> " */
  int is_last = k + 1 >= leg->tokens, is_own_finish = is_chat(leg) && !w->is_vllm;
  if (k == 0 && is_chat(leg)) role_event(w, leg);
  chunk_event(w, leg, text, is_last && !is_own_finish ? "length" : NULL);
  if (is_last && is_own_finish) finish_event(w, leg, "length");
  if (is_last && leg->api->has_usage) usage_event(w, leg, leg->tokens);
}

static size_t render_token(const pd_wire_leg_t *leg, int is_vllm, uint32_t arg, char *buf,
                           size_t cap) {
  uint32_t k = arg >> 2, part = arg & 3;
  wr_t w = {pd_bw_over(buf, cap), is_vllm};
  token_events(&w, leg, k);
  if (part == 3) token_events(&w, leg, k + 1);
  return pd_wire_token_part(buf, done(&w), part);
}

/* A whole answer whose one choice says text and finish. */
static void whole_open(wr_t *w, const pd_wire_leg_t *leg) {
  open_object(w, leg, 0);
  put(w, is_chat(leg) ? "{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\""
                      : "{\"index\":0,\"text\":\"");
}

static void whole_close(wr_t *w, const pd_wire_leg_t *leg, const char *finish, uint32_t n) {
  put(w, is_chat(leg) ? "\"}" : "\"");
  put_finish(w, finish);
  close_object(w, leg, 1, n);
}

/* Room the end of a whole answer needs after its text (finish_reason, usage: no names). */
#define CLOSE_ROOM 256u

/* The whole output; a text that would not fit before CLOSE_ROOM is cut short, as the native
 * shape's is (the simulator renders into a fixed buffer), usage still counting every token. */
static size_t render_decode_body(const pd_wire_leg_t *leg, int is_vllm, char *buf, size_t cap) {
  wr_t w = {pd_bw_over(buf, cap), is_vllm};
  whole_open(&w, leg);
  for (uint32_t k = 0; k < leg->tokens && !w.b.is_short && w.b.off + CLOSE_ROOM < cap; k++)
    put(&w, "tok%u ", k);
  whole_close(&w, leg, "length", leg->tokens);
  return done(&w);
}

/* SGLang's prefill on an OpenAI route: its output ends at once, capped by length, with no
 * text (W6.6, S5.6). arg = 1: only the first event / the first half (a body error follows). */
static size_t render_prefill(const pd_wire_leg_t *leg, int is_vllm, uint32_t arg, char *buf,
                             size_t cap) {
  wr_t w = {pd_bw_over(buf, cap), is_vllm};
  if (leg->is_stream) { /* chat: the role chunk, then SGLang's finish chunk */
    if (is_chat(leg)) role_event(&w, leg);
    if (is_chat(leg) && !is_vllm) finish_event(&w, leg, "length");
    else chunk_event(&w, leg, "", "length");
    if (!arg) put(&w, "data: [DONE]\n\n");
    return done(&w);
  }
  whole_open(&w, leg);
  whole_close(&w, leg, "length", 0);
  size_t n = done(&w);
  return arg ? n / 2 : n;
}

/* SGLang's answer to /abort_request for a request whose client is still there: an ordinary
 * output whose finish_reason is abort (S2.10), as a chunk and [DONE] or a whole answer. */
static size_t render_abort(const pd_wire_leg_t *leg, int is_vllm, int is_event, char *buf,
                           size_t cap) {
  wr_t w = {pd_bw_over(buf, cap), is_vllm};
  if (is_event) {
    chunk_event(&w, leg, "", "abort");
    put(&w, "data: [DONE]\n\n");
  } else {
    whole_open(&w, leg);
    whole_close(&w, leg, "abort", 0);
  }
  return done(&w);
}

/* SGLang's OpenAI server's errors (W6.9): the flat ErrorResponse under "error", as a body
 * (non-stream) or as one event (the [DONE] after it is its own message). */
static size_t render_error(uint32_t status, int is_event, char *buf, size_t cap) {
  wr_t w = {pd_bw_over(buf, cap), 0};
  put(&w, "%s{\"error\":{\"object\":\"error\",\"message\":\"worker returned %u\",\"type\":\"%s\","
          "\"param\":null,\"code\":%u}}%s",
      is_event ? "data: " : "", status, status < 500 ? "BadRequestError" : "InternalServerError",
      status, is_event ? "\n\n" : "");
  return done(&w);
}

size_t pd_wire_openai_render(const pd_wire_leg_t *leg, int is_vllm, int kind, uint32_t arg,
                             char *buf, size_t cap) {
  if (!pd_wire_is_openai(leg) || !cap) return 0;
  switch (kind) {
  case PD_WIRE_TOKEN: return render_token(leg, is_vllm, arg, buf, cap);
  case PD_WIRE_DONE_EVENT: {
    wr_t w = {pd_bw_over(buf, cap), is_vllm};
    put(&w, "data: [DONE]\n\n");
    return done(&w);
  }
  case PD_WIRE_ERROR_EVENT: return render_error(arg, 1, buf, cap);
  case PD_WIRE_ERROR_BODY: return render_error(arg, 0, buf, cap);
  case PD_WIRE_PREFILL_BODY: return render_prefill(leg, is_vllm, arg, buf, cap);
  case PD_WIRE_DECODE_BODY: return render_decode_body(leg, is_vllm, buf, cap);
  case PD_WIRE_ABORT_EVENT: return render_abort(leg, is_vllm, 1, buf, cap);
  case PD_WIRE_ABORT_BODY: return render_abort(leg, is_vllm, 0, buf, cap);
  default: return 0;
  }
}

/* ---------- vLLM's prefill answer (V1.4-V1.6) ---------- */

/* The params decode needs (V1.5), or null when the request did not end capped by length;
 * no_rid: without remote_request_id (an older prefill, which a newer decode finds invalid,
 * V1.8); unknown: naming an engine that is not there (kv_params unknown_engine). */
static void put_kvp(wr_t *w, const pd_wire_leg_t *leg, const pd_wire_vllm_t *v, uint32_t blocks,
                    int no_rid, int unknown) {
  pd_wire_vllm_t nobody = {PD_WIRE_UNKNOWN_ENGINE_NAME, PD_WIRE_UNKNOWN_ENGINE_NAME, v->kv_port};
  if (unknown) v = &nobody;
  if (!blocks) {
    put(w, "null");
    return;
  }
  put(w, "{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_block_ids\":[");
  for (uint32_t i = 0; i < blocks && !w->b.is_short; i++) put(w, i ? ",%u" : "%u", i);
  put(w, "],\"remote_engine_id\":\"%s\",", v->engine_id ? v->engine_id : "");
  if (!no_rid) put(w, "\"remote_request_id\":\"%s\",", leg->rid);
  put(w, "\"remote_host\":\"%s\",\"remote_port\":%d,\"tp_size\":1}",
      v->kv_host ? v->kv_host : "localhost", v->kv_port);
}

/* An ordinary answer of one token plus the top-level params; stream: one event and [DONE].
 * A leg without an OpenAI route (no api, or /generate, which vLLM does not serve) answers as
 * /v1/completions. */
size_t pd_wire_openai_vllm_prefill(const pd_wire_leg_t *leg, const pd_wire_vllm_t *v,
                                   uint32_t arg, char *buf, size_t cap) {
  static const pd_wire_api_t completions = {PD_ROUTE_COMPLETIONS, 0, 0, ""};
  pd_wire_leg_t l = *leg;
  if (!pd_wire_is_openai(&l)) l.api = &completions;
  uint32_t blocks = arg & ~(PD_WIRE_CUT | PD_WIRE_NO_RID | PD_WIRE_UNKNOWN_ENGINE);
  if (blocks > PD_WIRE_MAX_BLOCKS) blocks = PD_WIRE_MAX_BLOCKS;
  const char *finish = blocks ? "length" : "stop";
  wr_t w = {pd_bw_over(buf, cap), 1};
  if (l.is_stream) put(&w, "data: ");
  open_object(&w, &l, l.is_stream);
  if (l.is_stream && is_chat(&l)) put(&w, "{\"index\":0,\"delta\":{\"content\":\"tok0 \"}");
  else if (l.is_stream || !is_chat(&l)) put(&w, "{\"index\":0,\"text\":\"tok0 \"");
  else put(&w, "{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"tok0 \"}");
  put_finish(&w, finish);
  close_object(&w, &l, 1, 1);
  w.b.off -= w.b.is_short ? 0 : 1; /* reopen the object for the params */
  put(&w, ",\"kv_transfer_params\":");
  put_kvp(&w, &l, v, blocks, (arg & PD_WIRE_NO_RID) != 0, (arg & PD_WIRE_UNKNOWN_ENGINE) != 0);
  put(&w, "}%s", l.is_stream ? "\n\ndata: [DONE]\n\n" : "");
  size_t n = done(&w);
  return arg & PD_WIRE_CUT ? n / 2 : n;
}
