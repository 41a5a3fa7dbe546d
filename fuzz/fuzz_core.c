/* Structure-aware fuzzer for the dispatch core: the input picks a mode and decodes into an
 * interleaving of events for several requests (heads, SSE fragments, ends, transport errors,
 * expiries of the core's deadlines, client disconnects), fed through the same API the drivers
 * use. After every step and at the end it checks what must always hold: loads never go
 * negative and return to zero, every request gets one head, body only after it and one end,
 * the core holds no more deadlines than live requests and an expiry not yet due does nothing,
 * and once every leg is answered nothing stays alive. */
#include <stdint.h>
#include <string.h>

#include "pd_dispatch.h"
#include "fuzz_reader.h"

#define MAX_LEGS 64
#define MAX_REQS 4

typedef struct world {
  pd_gw_t *gw;
  pd_actbuf_t out;
  uint64_t now;
  uint64_t legs[MAX_LEGS], leg_req[MAX_LEGS];
  int n_legs;
  int ends[MAX_REQS], heads[MAX_REQS], done[MAX_REQS];
  long load;
} world_t;

static const char *const frags[] = {
    "data: {\"index\":0,\"meta_info\":{\"input_token_logprobs\":[[-1,1,null]]}}\n\n",
    "data: {\"index\":1}\n\n", "data: [DONE]\n\n", "data: {\"error\":{\"message\":\"x\",\"code\":503}}\n\n",
    "data: {\"ind", "ex\":2}\n\n", "\r\n\r\n", ": comment\n\n", "{\"text\":\"a\",\"meta_info\":{}}",
    "{\"error\":{\"message\":\"e\"}}", "data: [DONE]", "\n\n",
    "{\"choices\":[],\"kv_transfer_params\":{\"remote_block_ids\":[1],\"remote_port\":5600}}",
    "{\"choices\":[],\"kv_transfer_params\":null}"};

static void apply(world_t *w) {
  if (w->out.is_overflow) __builtin_trap();
  for (size_t i = 0; i < w->out.n; i++) {
    const pd_action_t *a = &w->out.v[i];
    int r = (int)(a->req_id % MAX_REQS);
    if (w->done[r] && a->kind != PD_ACT_BREAKER) __builtin_trap(); /* nothing after DONE */
    switch (a->kind) {
    case PD_ACT_OPEN_LEG:
      if (w->n_legs < MAX_LEGS) {
        w->legs[w->n_legs] = a->leg_id;
        w->leg_req[w->n_legs++] = a->req_id;
      }
      break;
    case PD_ACT_CLIENT_END:
      if (++w->ends[r] > 1) __builtin_trap();
      break;
    case PD_ACT_CLIENT_HEAD:
      if (++w->heads[r] > 1 || w->ends[r]) __builtin_trap(); /* one head, before the end */
      break;
    case PD_ACT_CLIENT_DATA:
      if (!w->heads[r] || w->ends[r]) __builtin_trap(); /* body only between head and end */
      break;
    case PD_ACT_LOAD:
      w->load += a->flag;
      if (w->load < 0) __builtin_trap();
      break;
    case PD_ACT_DONE: w->done[r] = 1; break;
    default: break;
    }
  }
  if (pd_gw_deadlines_armed(w->gw) > pd_gw_requests_live(w->gw)) __builtin_trap();
}

static void feed(world_t *w, pd_event_t ev) {
  pd_actbuf_reset(&w->out);
  pd_gw_feed(w->gw, w->now, &ev, &w->out);
  apply(w);
}

/* Fire the core's next deadline, moving the clock to it when it is later; nothing armed:
 * nothing to do. Asking before it is due must do nothing. */
static void expire(world_t *w) {
  uint64_t at = pd_gw_get_expiry(w->gw);
  if (at == UINT64_MAX) return;
  pd_actbuf_reset(&w->out);
  if (at > w->now) {
    pd_gw_handle_expiry(w->gw, w->now, &w->out);
    if (w->out.n || pd_gw_get_expiry(w->gw) != at) __builtin_trap(); /* not due yet */
    w->now = at;
  }
  pd_gw_handle_expiry(w->gw, w->now, &w->out);
  apply(w);
}

static void step(world_t *w, fz_reader_t *b) {
  uint8_t op = fz_u8(b) % 9;
  int li = w->n_legs ? fz_u8(b) % w->n_legs : 0;
  pd_event_t ev = {.req_id = w->n_legs ? w->leg_req[li] : 0, .leg_id = w->n_legs ? w->legs[li] : 0};
  static const int statuses[] = {200, 200, 200, 503, 429, 400, 500, 504};
  switch (op) {
  case 0: ev.kind = PD_EV_UP_HEAD; ev.status = statuses[fz_u8(b) % 8]; break;
  case 1:
  case 2: {
    const char *f = frags[fz_u8(b) % (sizeof frags / sizeof *frags)];
    ev.kind = PD_EV_UP_DATA;
    ev.data = (const uint8_t *)f;
    ev.len = strlen(f);
    break;
  }
  case 3: ev.kind = PD_EV_UP_END; break;
  case 4: ev.kind = PD_EV_UP_ERROR; ev.uperr = (pd_upstream_error_t)(fz_u8(b) % 4); break;
  case 5: expire(w); return;
  case 6: ev.kind = PD_EV_CLIENT_GONE; ev.req_id = fz_u8(b) % MAX_REQS; break;
  case 7:
    ev.kind = PD_EV_CLIENT_BLOCKED;
    ev.req_id = fz_u8(b) % MAX_REQS;
    ev.status = fz_u8(b) & 1;
    break;
  default: w->now += (uint64_t)fz_u8(b) * 1000000ull; return;
  }
  feed(w, ev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader_t b = fz_reader(data, size);
  world_t w;
  memset(&w, 0, sizeof w);
  pd_prng_t rng;
  pd_prng_init(&rng, fz_u8(&b));
  pd_gw_config_t c;
  uint8_t mb = fz_u8(&b);
  pd_gw_config_default(&c, (pd_mode_t)(mb % PD_MODE_COUNT));
  if (c.mode == PD_MODE_REFERENCE && (mb / PD_MODE_COUNT) % 2) c.protocol = PD_PROTOCOL_VLLM;
  w.gw = pd_gw_new(NULL, &c, &rng);
  if (!w.gw) return 0;
  pd_gw_add_worker(w.gw, PD_ROLE_PREFILL, "p0", "p0", 8998);
  pd_gw_add_worker(w.gw, PD_ROLE_PREFILL, "p1", "p1", 8998);
  pd_gw_add_worker(w.gw, PD_ROLE_DECODE, "d0", "d0", -1);
  pd_gw_add_worker(w.gw, PD_ROLE_DECODE, "d1", "d1", -1);
  pd_actbuf_init(&w.out, NULL);
  static const char *const bodies[] = {
      "{\"text\":\"a\",\"stream\":true}", "{\"text\":\"a\",\"stream\":false}",
      "{\"text\":\"a\",\"stream\":true,\"return_logprob\":true}",
      "{\"text\":[\"a\",\"b\"],\"stream\":false,\"return_logprob\":true}"};
  static const char *const sf_bodies[] = { /* source-first: the OpenAI routes only */
      "{\"prompt\":\"a\",\"stream\":true}", "{\"prompt\":\"a\",\"stream\":false}",
      "{\"prompt\":\"a\",\"stream\":true,\"min_tokens\":2,\"stream_options\":{}}",
      "{\"prompt\":[\"a\",\"b\"],\"stream\":false,\"max_tokens\":3}"};
  int is_sf = c.protocol == PD_PROTOCOL_VLLM;
  int n_req = 1 + fz_u8(&b) % MAX_REQS;
  for (int r = 0; r < n_req; r++) {
    const char *body = (is_sf ? sf_bodies : bodies)[fz_u8(&b) % 4];
    pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = (uint64_t)r,
                     .path = is_sf ? "/v1/completions" : "/generate",
                     .data = (const uint8_t *)body, .len = strlen(body)};
    feed(&w, ev);
  }
  for (int i = 0; i < 4096 && b.n; i++) step(&w, &b);
  /* Quiesce: clients leave, every leg errors out, the deadlines fire. */
  for (int round = 0; round < 64; round++) {
    for (int r = 0; r < n_req; r++) feed(&w, (pd_event_t){.kind = PD_EV_CLIENT_GONE, .req_id = (uint64_t)r});
    for (int l = 0; l < w.n_legs; l++)
      feed(&w, (pd_event_t){.kind = PD_EV_UP_ERROR, .req_id = w.leg_req[l], .leg_id = w.legs[l]});
    for (int r = 0; r < n_req; r++) expire(&w);
    if (pd_gw_requests_live(w.gw) == 0) break;
  }
  if (pd_gw_requests_live(w.gw) != 0) __builtin_trap(); /* something never ended */
  if (pd_gw_deadlines_armed(w.gw) != 0 || pd_gw_get_expiry(w.gw) != UINT64_MAX)
    __builtin_trap(); /* a deadline outlived its request */
  if (w.load != 0) __builtin_trap();                     /* a load never released */
  for (uint32_t i = 0; i < 2; i++)
    if (pd_gw_load(w.gw, PD_ROLE_PREFILL, i) || pd_gw_load(w.gw, PD_ROLE_DECODE, i)) __builtin_trap();
  pd_actbuf_free(&w.out);
  pd_gw_del(w.gw);
  return 0;
}
