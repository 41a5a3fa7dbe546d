/* The checker reads a client event by comparing its bytes with the next token as the decode
 * leg rendered it (or as merged); any other event is parsed with cJSON. Both readings must
 * reach the same findings: every event sequence here is fed to a record that may compare
 * bytes and to one that only parses (is_parse_only), and their findings must be equal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pd_merge.h"
#include "pd_worker_shared.h"
#include "pdt.h"

#define PREFILL_JSON \
  "{\"text\":\"\",\"meta_info\":{\"id\":\"r\",\"input_token_logprobs\":" PD_LP_PREFILL "}}"

typedef struct {
  pd_client_request_t rq;
  pd_worker_leg_t leg;
} rec_t;

static void rec_init(rec_t *r, const char *rid, int has_lp, int wants_lp, int parse_only) {
  memset(r, 0, sizeof *r);
  r->leg.role = PD_ROLE_DECODE;
  r->leg.has_logprob = has_lp;
  r->leg.is_stream = 1;
  r->leg.tokens = 8;
  r->leg.api.route = PD_ROUTE_GENERATE;
  snprintf(r->leg.rid, sizeof r->leg.rid, "%s", rid);
  r->rq.legs = &r->leg;
  r->rq.is_stream = 1;
  r->rq.wants_logprob = wants_lp;
  r->rq.head_status = 200;
  r->rq.has_head = 1;
  r->rq.is_sse_head = 1;
  r->rq.is_parse_only = parse_only;
  pd_sse_init(&r->rq.sse, NULL);
}

/* The kinds of event a sequence is made of. */
enum { EV_WORKER, EV_MERGED, EV_SKIP, EV_OTHER_RID, EV_SPACED, EV_OPENAI, EV_TRAILING, EV_GARBAGE,
       EV_N };

/* Event `kind` for token k of a leg with this rid and logprob flag; returns its payload. */
static size_t event(int kind, const char *rid, int has_lp, uint32_t k, char *out, size_t cap) {
  pd_wire_leg_t wl = {rid, 1, has_lp, 8, NULL};
  const char *lp = has_lp ? PD_LP_DECODE : NULL;
  char *m = NULL;
  size_t n = 0;
  switch (kind) {
  case EV_WORKER: return pd_wire_token_json(&wl, k, lp, out, cap);
  case EV_MERGED: /* what the core's merge makes of the worker's event */
    n = pd_wire_token_json(&wl, k, lp, out, cap);
    if (pd_merge_logprobs(NULL, PREFILL_JSON, strlen(PREFILL_JSON), out, n, &m, &n) != 0)
      return n; /* nothing to merge: as the worker sent it */
    snprintf(out, cap, "%s", m);
    free(m);
    return strlen(out);
  case EV_SKIP: return pd_wire_token_json(&wl, k + 1, lp, out, cap);
  case EV_OTHER_RID: wl.rid = "other"; return pd_wire_token_json(&wl, k, lp, out, cap);
  case EV_SPACED:
    return (size_t)snprintf(out, cap, "{ \"text\": \"tok%u \", \"index\": %u, \"meta_info\": {%s}}",
                            k, k, has_lp ? "\"input_token_logprobs\": " PD_LP_MERGED : "");
  case EV_TRAILING: /* the merged event with bytes after its JSON: no client parses it */
    n = event(EV_MERGED, rid, has_lp, k, out, cap);
    return n + (size_t)snprintf(out + n, cap - n, "x");
  case EV_OPENAI:
    return (size_t)snprintf(out, cap, "{\"choices\":[{\"index\":0,\"text\":\"tok%u \"}]}", k);
  default: return (size_t)snprintf(out, cap, "{\"index\":%u", k);
  }
}

static void feed(rec_t *r, const char *payload, size_t n) {
  char wire[1024];
  int len = snprintf(wire, sizeof wire, "data: %.*s\n\n", (int)n, payload);
  PDT_TRUE(len > 0 && (size_t)len < sizeof wire);
  PDT_EQ_INT(pd_check_client_data(&r->rq, (const uint8_t *)wire, (size_t)len), 0);
}

/* Feed one sequence (kinds[i] for event i) to both records; returns events read by bytes. */
static uint32_t agree(const char *rid, int has_lp, int wants_lp, const int *kinds, int n) {
  rec_t a, b;
  rec_init(&a, rid, has_lp, wants_lp, 0);
  rec_init(&b, rid, has_lp, wants_lp, 1);
  for (int i = 0; i < n; i++) {
    char payload[512];
    size_t len = event(kinds[i], rid, has_lp, a.rq.next_token, payload, sizeof payload);
    feed(&a, payload, len);
    feed(&b, payload, len);
    PDT_EQ_U64(a.rq.next_token, b.rq.next_token);
    PDT_EQ_INT(a.rq.token_error, b.rq.token_error);
    PDT_EQ_INT(a.rq.logprob_state, b.rq.logprob_state);
    PDT_EQ_INT(a.rq.first_event_seen, b.rq.first_event_seen);
  }
  PDT_EQ_U64(b.rq.known_events, 0);
  pd_sse_free(&a.rq.sse);
  pd_sse_free(&b.rq.sse);
  return a.rq.known_events;
}

static void t_events_read_by_bytes_agree_with_cjson(void) {
  static const char *const rids[] = {"pdref-0123456789abcdef", "leg-7", "", "r\\\"x", "caf\xc3\xa9"};
  uint32_t by_bytes = 0;
  for (size_t r = 0; r < sizeof rids / sizeof *rids; r++)
    for (int lp = 0; lp < 2; lp++)
      for (int want = 0; want < 2; want++)
        for (int first = 0; first < EV_N; first++)
          for (int second = 0; second < EV_N; second++) {
            int kinds[] = {first, second, EV_WORKER, EV_MERGED, second, first};
            by_bytes += agree(rids[r], lp, want, kinds, 6);
          }
  PDT_TRUE(by_bytes > 1000); /* the byte comparison did read most of them */
}

/* An event with bytes after its JSON is a token error on both readings (the byte comparison
 * must not take the expected event as a prefix; cJSON must not stop at the first value). */
static void t_bytes_after_an_events_json_are_a_token_error(void) {
  for (int parse_only = 0; parse_only < 2; parse_only++)
    for (int kind = EV_WORKER; kind <= EV_MERGED; kind++) {
      rec_t r;
      rec_init(&r, "pdref-1", 1, 1, parse_only);
      char payload[512];
      size_t n = event(kind, "pdref-1", 1, 0, payload, sizeof payload);
      feed(&r, payload, n); /* token 0, as sent: fine */
      PDT_EQ_INT(r.rq.token_error, 0);
      n = event(kind, "pdref-1", 1, 1, payload, sizeof payload);
      snprintf(payload + n, sizeof payload - n, " \t");
      feed(&r, payload, n + 2); /* token 1 and white space: fine */
      PDT_EQ_INT(r.rq.token_error, 0);
      n = event(kind, "pdref-1", 1, 2, payload, sizeof payload);
      snprintf(payload + n, sizeof payload - n, "}");
      feed(&r, payload, n + 1); /* token 2 and a stray brace: an error */
      PDT_EQ_INT(r.rq.token_error, 1);
      pd_sse_free(&r.rq.sse);
    }
}

/* The merged form the checker expects is the bytes the core's merge prints. */
static void t_merged_form_is_what_the_merge_prints(void) {
  char out[512];
  size_t n = event(EV_MERGED, "pdref-1", 1, 3, out, sizeof out);
  pd_wire_leg_t wl = {"pdref-1", 1, 1, 8, NULL};
  char want[512];
  size_t m = pd_wire_token_json(&wl, 3, PD_LP_MERGED, want, sizeof want);
  PDT_EQ_U64(n, m);
  PDT_EQ_STR(out, want);
}

/* OpenAI routes: every event of every token as SGLang's or vLLM's worker writes it, in
 * order, then the same with one event dropped, repeated or corrupted. */
static uint32_t openai_run(int route, int usage, int vllm, int mutate_at, int how) {
  rec_t a, b;
  rec_init(&a, "pdref-42", 0, 0, 0);
  rec_init(&b, "pdref-42", 0, 0, 1);
  a.leg.api.route = b.leg.api.route = route;
  a.leg.api.has_usage = b.leg.api.has_usage = usage;
  pd_wire_leg_t wl = {"pdref-42", 1, 0, 8, &a.leg.api};
  int ev_no = 0;
  for (uint32_t k = 0; k < 8; k++) {
    char msg[4096];
    size_t n = pd_wire_openai_render(&wl, vllm, PD_WIRE_TOKEN, k << 2, msg, sizeof msg);
    PDT_TRUE(n > 0);
    for (size_t at = 0; at < n; ev_no++) {
      const char *end = strstr(msg + at, "\n\n");
      size_t len = (size_t)(end - msg) - at - 6;
      char payload[1024];
      memcpy(payload, msg + at + 6, len);
      payload[len] = 0;
      at += 6 + len + 2;
      if (ev_no == mutate_at && how == 0) continue; /* dropped */
      if (ev_no == mutate_at && how == 2) payload[len / 2] ^= 1; /* corrupted */
      for (int rep = 0; rep < (ev_no == mutate_at && how == 1 ? 2 : 1); rep++) {
        feed(&a, payload, len);
        feed(&b, payload, len);
        PDT_EQ_U64(a.rq.next_token, b.rq.next_token);
        PDT_EQ_INT(a.rq.token_error, b.rq.token_error);
        PDT_EQ_INT(a.rq.first_event_seen, b.rq.first_event_seen);
      }
    }
  }
  PDT_EQ_U64(b.rq.known_events, 0);
  if (mutate_at < 0) PDT_EQ_U64(a.rq.next_token, 8);
  pd_sse_free(&a.rq.sse);
  pd_sse_free(&b.rq.sse);
  return a.rq.known_events;
}

static void t_openai_events_read_by_bytes_agree_with_cjson(void) {
  uint32_t by_bytes = 0;
  for (int route = PD_ROUTE_COMPLETIONS; route <= PD_ROUTE_CHAT; route++)
    for (int usage = 0; usage < 2; usage++)
      for (int vllm = 0; vllm < 2; vllm++)
        for (int at = -1; at < 12; at++)
          for (int how = 0; how < 3; how++) by_bytes += openai_run(route, usage, vllm, at, how);
  PDT_TRUE(by_bytes > 2000);
}

int pdt_suite_check_bytes(void) {
  static const pdt_case_t cases[] = {
      {"client events read by their bytes agree with cJSON's reading",
       t_events_read_by_bytes_agree_with_cjson},
      {"the merged form expected is what the merge prints", t_merged_form_is_what_the_merge_prints},
      {"bytes after an event's JSON are a token error", t_bytes_after_an_events_json_are_a_token_error},
      {"OpenAI events read by their bytes agree with cJSON's reading",
       t_openai_events_read_by_bytes_agree_with_cjson},
  };
  return PDT_SUITE("check_bytes", cases);
}
