/* The mock's hand-built SGLang token events against the snprintf form they replaced (every
 * part, cap, rid and logprob flag), and the exact room read only when its key occurs once in
 * the text (the count skips to candidate bytes with memchr). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_worker_body.h"
#include "pd_worker_shared.h"
#include "pdt.h"

/* The token event as it was printed before (snprintf), the reference for pd_wire_render. */
static size_t ref_token_event(const pd_wire_leg_t *leg, uint32_t k, char *buf, size_t cap) {
  int n = snprintf(buf, cap,
                   "data: {\"text\":\"tok%u \",\"index\":%u,\"meta_info\":{\"id\":\"%s\","
                   "\"completion_tokens\":%u%s%s}}\n\n",
                   k, k, leg->rid, k + 1, leg->has_logprob ? ",\"input_token_logprobs\":" : "",
                   leg->has_logprob ? PD_LP_DECODE : "");
  return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

static size_t ref_render_token(const pd_wire_leg_t *leg, uint32_t arg, char *buf, size_t cap) {
  uint32_t k = arg >> 2, part = arg & 3;
  size_t len = ref_token_event(leg, k, buf, cap);
  if (part == 3 && len) return len + ref_token_event(leg, k + 1, buf + len, cap - len);
  if (part == 1) return len / 2;
  if (part == 2) {
    size_t h = len / 2;
    memmove(buf, buf + h, len - h);
    return len - h;
  }
  return len;
}

static void t_token_events_render_as_snprintf_did(void) {
  static const char *const rids[] = {"pdref-0123456789abcdef", "", "r\\\"x", "leg-7"};
  static const uint32_t ks[] = {0, 1, 9, 10, 99, 12345, (1u << 30) - 1};
  static const size_t caps[] = {4096, 200, 120, 90, 40, 1};
  unsigned compared = 0;
  for (size_t r = 0; r < sizeof rids / sizeof *rids; r++)
    for (int lp = 0; lp < 2; lp++)
      for (size_t k = 0; k < sizeof ks / sizeof *ks; k++)
        for (uint32_t part = 0; part < 4; part++)
          for (size_t c = 0; c < sizeof caps / sizeof *caps; c++) {
            pd_wire_leg_t leg = {rids[r], 1, lp, 100, NULL};
            char a[4096], b[4096];
            size_t na = pd_wire_render(&leg, PD_WIRE_TOKEN, ks[k] << 2 | part, a, caps[c]);
            size_t nb = ref_render_token(&leg, ks[k] << 2 | part, b, caps[c]);
            PDT_EQ_U64(na, nb);
            if (na == nb && na && memcmp(a, b, na) != 0) PDT_TRUE(!"same bytes");
            compared += na > 0;
          }
  PDT_TRUE(compared > 500);
}

/* The prefill answer, [DONE] and the decode body as snprintf printed them before. */
static size_t ref_render(const pd_wire_leg_t *leg, int kind, uint32_t arg, char *buf, size_t cap) {
  const char *lp = leg->has_logprob ? ",\"input_token_logprobs\":" PD_LP_PREFILL : "";
  int n = 0;
  size_t off = 0;
  switch (kind) {
  case PD_WIRE_DONE_EVENT: /* arg: a finish event with no token first (R-ZERO-TOKENS) */
    if (arg)
      n = snprintf(buf, cap,
                   "data: {\"text\":\"\",\"meta_info\":{\"id\":\"%s\",\"completion_tokens\":0,"
                   "\"finish_reason\":{\"type\":\"length\",\"length\":0}%s%s}}\n\n"
                   "data: [DONE]\n\n",
                   leg->rid, leg->has_logprob ? ",\"input_token_logprobs\":" : "",
                   leg->has_logprob ? PD_LP_DECODE : "");
    else
      n = snprintf(buf, cap, "data: [DONE]\n\n");
    break;
  case PD_WIRE_PREFILL_BODY:
    if (leg->is_stream)
      n = snprintf(buf, cap,
                   "data: {\"text\":\"\",\"meta_info\":{\"id\":\"%s\",\"completion_tokens\":0,"
                   "\"finish_reason\":{\"type\":\"length\",\"length\":0}%s}}\n\n%s",
                   leg->rid, lp, arg ? "" : "data: [DONE]\n\n");
    else
      n = snprintf(buf, cap,
                   "{\"text\":\"\",\"meta_info\":{\"id\":\"%s\",\"completion_tokens\":0,"
                   "\"finish_reason\":{\"type\":\"length\",\"length\":0}%s}}%s",
                   leg->rid, lp, arg ? "" : "");
    if (arg && !leg->is_stream && n > 10) n = n / 2;
    break;
  default: /* PD_WIRE_DECODE_BODY */
    n = snprintf(buf, cap, "{\"text\":\"");
    off = (size_t)n;
    for (uint32_t k = 0; k < leg->tokens && off + 32 < cap; k++)
      off += (size_t)snprintf(buf + off, cap - off, "tok%u ", k);
    n = snprintf(buf + off, cap - off, "\",\"meta_info\":{\"id\":\"%s\",\"completion_tokens\":%u%s%s}}",
                 leg->rid, leg->tokens, leg->has_logprob ? ",\"input_token_logprobs\":" : "",
                 leg->has_logprob ? PD_LP_DECODE : "");
  }
  return n > 0 && off + (size_t)n < cap ? off + (size_t)n : 0;
}

static void t_bodies_render_as_snprintf_did(void) {
  static const char *const rids[] = {"pdref-0123456789abcdef", "", "r\\\"x", "leg-7"};
  static const uint32_t tokens[] = {0, 1, 8, 100, 5000};
  static const size_t caps[] = {65536, 600, 200, 120, 60, 20};
  static const int kinds[] = {PD_WIRE_DONE_EVENT, PD_WIRE_PREFILL_BODY, PD_WIRE_DECODE_BODY};
  unsigned compared = 0;
  for (size_t r = 0; r < sizeof rids / sizeof *rids; r++)
    for (int lp = 0; lp < 2; lp++)
      for (int stream = 0; stream < 2; stream++)
        for (size_t t = 0; t < sizeof tokens / sizeof *tokens; t++)
          for (size_t kd = 0; kd < sizeof kinds / sizeof *kinds; kd++)
            for (uint32_t arg = 0; arg < 2; arg++)
              for (size_t c = 0; c < sizeof caps / sizeof *caps; c++) {
                pd_wire_leg_t leg = {rids[r], stream, lp, tokens[t], NULL};
                static char a[65536], b[65536];
                size_t na = pd_wire_render(&leg, kinds[kd], arg, a, caps[c]);
                size_t nb = ref_render(&leg, kinds[kd], arg, b, caps[c]);
                PDT_EQ_U64(na, nb);
                if (na == nb && na && memcmp(a, b, na) != 0) PDT_TRUE(!"same bytes");
                compared += na > 0;
              }
  PDT_TRUE(compared > 1000);
}

static uint64_t room_read(const char *body) {
  cJSON *j = cJSON_Parse(body);
  pd_worker_body_t b;
  (void)pd_worker_body_read(&b, j, body, strlen(body), NULL, NULL, 0);
  cJSON_Delete(j);
  free(b.rooms);
  return b.room;
}

/* The room is read from the text only when its key occurs once (counted with memchr now). */
static void t_exact_room_needs_the_key_once_in_the_text(void) {
  PDT_EQ_U64(room_read("{\"bootstrap_room\":9007199254740993}"), 9007199254740993ull);
  PDT_EQ_U64(room_read("{\"x\":{\"bootstrap_room\":1},\"bootstrap_room\":9007199254740993}"),
             9007199254740992ull); /* twice: through the double */
  PDT_EQ_U64(room_read("{\"text\":\"\\\"bootstrap_roo\",\"bootstrap_room\":9007199254740993}"),
             9007199254740993ull);
  PDT_EQ_U64(room_read("{\"bootstrap_room\":[9007199254740993,1],\"x\":{\"bootstrap_room\":2}}"),
             9007199254740992ull);
}

int pdt_suite_wire_fast(void) {
  static const pdt_case_t cases[] = {
      {"token events render as snprintf rendered them", t_token_events_render_as_snprintf_did},
      {"prefill, [DONE] and decode bodies render as snprintf rendered them",
       t_bodies_render_as_snprintf_did},
      {"the exact room needs its key once in the text", t_exact_room_needs_the_key_once_in_the_text},
  };
  return PDT_SUITE("wire_fast", cases);
}
