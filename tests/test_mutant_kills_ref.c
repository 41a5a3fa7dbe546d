/* Tests written to kill survivors of `make mutate` in the reference set (core/, docs/mutation.md,
 * tests/mutants.json) that no scenario can reach: an allocation failure, a decode stream with
 * no token, a leak only an allocator that counts can see. Each names the mutant it kills and
 * the behaviour a user could name that the mutant breaks. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "pd_dispatch.h"
#include "pd_err.h"
#include "pd_policy.h"
#include "pd_prng.h"
#include "pd_sse.h"
#include "pdt.h"

#include "pdt_alloc.h"
#include "pdt_harness.h"

/* core/pd_feed.c render: `return rc` -> `return 0` survived (and pd_gw_begin's 500 -> 499,
 * seed 2): the simulator never fails an allocation. When the buffer for the legs' body cannot be had, no leg may go out with an
 * empty body (the core answers the client 500 instead): every allocation of the request's
 * step is failed in turn, every PD_ACT_OPEN_LEG that does go out carries a JSON object, and
 * a client head, if any, is 500. */
static void test_no_leg_opens_with_an_empty_body_when_render_fails(void) {
  for (unsigned n = 1; n < 400; n++) {
    pdt_alloc_t f = {0};
    pd_alloc_t a = pdt_alloc(&f);
    harness_t h;
    h_init(&h, PD_MODE_REFERENCE, &a);
    PDT_TRUE(h.gw != NULL);
    if (!h.gw) return;
    f.fail_at = f.calls + n; /* the request's own n-th allocation */
    h_request(&h, STREAM);
    int reached = f.calls >= f.fail_at;
    PDT_TRUE(h.head_status == 0 || h.head_status == 500); /* R-STATUS: internal error, 500 */
    for (size_t i = 0; i < h.out.n; i++) {
      const pd_action_t *o = &h.out.v[i];
      if (o->kind != PD_ACT_OPEN_LEG) continue;
      PDT_TRUE(o->len > 2 && o->data && o->data[0] == '{' && o->data[o->len - 1] == '}');
    }
    pd_event_t gone = {.kind = PD_EV_CLIENT_GONE, .req_id = 7};
    f.fail_at = 0;
    h_feed(&h, gone);
    h_free(&h);
    PDT_EQ_INT(f.live, 0);
    if (!reached) break; /* the step made fewer than n allocations: every one was failed */
  }
}

/* core/pd_mode_ref.c decode_events: `d->body.len == 0` -> `== 1` survived: no worker of the
 * simulator ends a stream without a token (a workload asks for at least one). A decode
 * stream that sends [DONE] before any token has nothing to say: before commit it fails the
 * attempt with 502 (recorded against decode) and the client gets no 200 head. */
static void test_decode_done_without_a_token_fails_it_502(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, DONE);
  int status = 0;
  PDT_EQ_INT(h_outcome_of(&h, 2, &status), PD_OUTCOME_FAILURE);
  PDT_EQ_INT(status, 502);
  PDT_EQ_INT(h.head_status, 0); /* nothing committed: the attempt is retried */
  h_free(&h);
}

/* R-ZERO-TOKENS: a client that states 0 output tokens (SGLang accepts it) asked for no token;
 * a decode stream that ends with [DONE] alone has answered it, and the reference commits and
 * forwards that end: 200, [DONE], decode and prefill recorded as successes. Before the rule
 * the reference failed decode with 502, retried the healthy pair and fed the breakers
 * (zero-new-tokens-openai-stream: I4, I12, I15). The same [DONE] for a client that stated
 * nothing (or 1) still fails decode with 502 (the test above). */
static void test_decode_done_for_zero_tokens_is_the_answer(void) {
  static const char *bodies[] = {
      "{\"text\":\"hi\",\"stream\":true,\"sampling_params\":{\"max_new_tokens\":0}}",
      "{\"prompt\":\"hi\",\"stream\":true,\"max_tokens\":0}",
  };
  static const char *paths[] = {"/generate", "/v1/completions"};
  for (size_t i = 0; i < 2; i++) {
    harness_t h;
    h_init(&h, PD_MODE_REFERENCE, NULL);
    pd_event_t rq = {.kind = PD_EV_CLIENT_REQUEST, .req_id = 7, .path = paths[i],
                     .data = (const uint8_t *)bodies[i], .len = strlen(bodies[i])};
    h_feed(&h, rq);
    h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
    h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
    h_leg(&h, PD_EV_UP_DATA, 2, 0, DONE);
    int status = 0;
    PDT_EQ_INT(h_outcome_of(&h, 2, &status), PD_OUTCOME_SUCCESS);
    PDT_EQ_INT(h.head_status, 200);
    PDT_TRUE(strstr(h.client, "[DONE]") != NULL);
    PDT_TRUE(h.ended);
    h_free(&h);
  }
}

/* cJSON's allocations counted against the same allocator (as test_dispatch_nomem.c). */
static pdt_alloc_t *g_count;
static void *cj_malloc(size_t n) { return pdt_alloc_malloc(n, g_count); }
static void cj_free(void *p) { pdt_alloc_free(p, g_count); }

#define LP_STREAM "{\"text\":\"hi\",\"stream\":true,\"return_logprob\":true}"
#define P_LP "data: {\"text\":\"\",\"meta_info\":{\"input_token_logprobs\":[[-0.5,1,null]]}}\n\n"
#define D_LP(i)                                                                                    \
  "data: {\"text\":\"" #i "\",\"meta_info\":{\"input_token_logprobs\":[[null,1,null],[-0." #i    \
  ",2,null]]}}\n\n"

/* core/pd_mode_ref.c prefill_read: `rq->has_lp_read = 1` -> 0 survived: prefill's logprobs
 * are read once for the whole stream (R-LOGPROB); reading them again for every decode event
 * gives the same bytes but drops the previous read's texts on the floor. A logprob stream of
 * several events, every allocation counted (the core's and cJSON's), leaves nothing live. */
static void test_logprob_stream_reads_prefill_once_and_frees_it(void) {
  pdt_alloc_t f = {0};
  g_count = &f;
  cJSON_Hooks hooks = {cj_malloc, cj_free};
  cJSON_InitHooks(&hooks);
  pd_alloc_t a = pdt_alloc(&f);
  harness_t h;
  h_init(&h, PD_MODE_REFERENCE, &a);
  if (h.gw) {
    h_request(&h, LP_STREAM);
    h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
    h_leg(&h, PD_EV_UP_DATA, 1, 0, P_LP);
    h_leg(&h, PD_EV_UP_DATA, 1, 0, DONE);
    h_leg(&h, PD_EV_UP_END, 1, 0, NULL);
    h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
    h_leg(&h, PD_EV_UP_DATA, 2, 0, D_LP(1));
    h_leg(&h, PD_EV_UP_DATA, 2, 0, D_LP(2));
    h_leg(&h, PD_EV_UP_DATA, 2, 0, D_LP(3));
    h_leg(&h, PD_EV_UP_DATA, 2, 0, DONE);
    h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
    PDT_EQ_INT(h.head_status, 200);
    PDT_TRUE(h.ended);
    PDT_TRUE(strstr(h.client, "[[-0.5,1,null],[null,1,null],[-0.3,2,null]]") != NULL);
    h_free(&h);
  }
  cJSON_InitHooks(NULL);
  g_count = NULL;
  PDT_EQ_INT(f.live, 0);
}

/* core/pd_mode_ref.c prefill_events: the loop guard `guard < 1u << 20` -> `1u << 19` survived:
 * the simulator and the socket gateway hand the core a few KiB at a time, so no chunk frames
 * that many events. The core itself takes a chunk of any size: a prefill stream whose one
 * chunk holds 600,000 small events and then [DONE] is framed whole, and prefill succeeds
 * (a loop that stopped early would leave [DONE] unread and fail it at its end). */
static void test_prefill_chunk_of_many_events_is_framed_whole(void) {
  enum { N_EVENTS = 600000 };
  static const char ev[] = "data: x\n\n";
  size_t ev_len = sizeof ev - 1, n = N_EVENTS * ev_len + strlen(DONE);
  char *big = malloc(n + 1);
  PDT_TRUE(big != NULL);
  if (!big) return;
  for (size_t i = 0; i < N_EVENTS; i++) memcpy(big + i * ev_len, ev, ev_len);
  memcpy(big + N_EVENTS * ev_len, DONE, strlen(DONE) + 1);
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 1, 0, big);
  h_leg(&h, PD_EV_UP_END, 1, 0, NULL);
  int status = -1;
  PDT_EQ_INT(h_outcome_of(&h, 1, &status), PD_OUTCOME_SUCCESS);
  free(big);
  h_free(&h);
}

/* Feed request 7's leg one chunk the SSE framer refuses: past PD_SSE_MAX_EVENT_BYTES with
 * no event boundary. is_raw: without the end of the instant (h_feed_raw). */
static void feed_unframeable(harness_t *h, uint64_t leg, int is_raw) {
  size_t n = PD_SSE_MAX_EVENT_BYTES + 16;
  char *big = malloc(n);
  PDT_TRUE(big != NULL);
  if (!big) return;
  memset(big, 'x', n);
  pd_event_t data = {.kind = PD_EV_UP_DATA, .req_id = 7, .leg_id = leg,
                     .data = (const uint8_t *)big, .len = n};
  if (is_raw) h_feed_raw(h, data);
  else h_feed(h, data);
  free(big);
}

/* core/pd_mode_ref.c doomed_data: a given-up stream leg whose data breaks the SSE framer
 * (an event past PD_SSE_MAX_EVENT_BYTES) reports its own failure in the instant it was given
 * up: recorded as failure with 502 (R-OUTCOME), not hidden under `cancelled`. Dropping that
 * doomed_result call, or 502 -> 503, survived (seed 2): no simulated worker sends an event
 * that large. Prefill's 500 head gives decode up; decode's oversized data comes in the same
 * instant. */
static void test_doomed_leg_breaking_the_framer_fails_it_502(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  pd_event_t p500 = {.kind = PD_EV_UP_HEAD, .req_id = 7, .leg_id = 1, .status = 500};
  h_feed_raw(&h, p500); /* decode is given up, settled at the end of this instant */
  feed_unframeable(&h, 2, 1);
  int status = 0;
  PDT_EQ_INT(h_outcome_of(&h, 2, &status), PD_OUTCOME_FAILURE);
  PDT_EQ_INT(status, 502);
  h_free(&h);
}

/* core/pd_mode_ref.c ref_on_data: a live decode leg whose data breaks the SSE framer (an
 * event past PD_SSE_MAX_EVENT_BYTES) is a bad answer: before commit the attempt fails with
 * 502 against decode (R-FAIL-PRECOMMIT) and nothing reaches the client yet. Dropping that
 * bad_answer call survived make mutate --files (seed 4): no simulated worker sends an event
 * that large, and the leg then hung until a deadline. */
static void test_live_decode_breaking_the_framer_fails_it_502(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  feed_unframeable(&h, 2, 0);
  int status = 0;
  PDT_EQ_INT(h_outcome_of(&h, 2, &status), PD_OUTCOME_FAILURE);
  PDT_EQ_INT(status, 502);
  PDT_EQ_INT(h.head_status, 0);
  h_free(&h);
}

/* core/pd_mode_ref.c ref_on_deadline: each deadline names itself in the client's error
 * (R-STATUS: what and where). An idle stream is "decode made no progress in time", not "no
 * first token in time"; `which == DL_IDLE` -> `DL_TOTAL` survived (seed 4): no verdict
 * compares the message. Non-stream: decode's head came, then nothing within the idle budget
 * after prefill's answer (R-PROGRESS), so the 504's body names the idle deadline. */
static void test_an_idle_timeout_names_itself(void) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.idle_timeout_ns = 30 * MS;
  c.retry.max_attempts = 1;
  harness_t h;
  h_init_cfg(&h, &c, 1);
  h_request(&h, NONSTREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 1, 0, "{\"text\":\"\"}");
  h_leg(&h, PD_EV_UP_END, 1, 0, NULL);
  for (int i = 0; i < 8 && !h.ended; i++) h_fire(&h);
  PDT_TRUE(h.ended);
  PDT_EQ_INT(h.head_status, 504);
  PDT_TRUE(strstr(h.client, "decode made no progress in time") != NULL);
  h_free(&h);
}

/* core/pd_mode_ref.c total_moves_on: its early `return 0` -> `return 1` survived (seed 2):
 * no scenario can set the token budget to 0 (0 there means the mode's default), while
 * `pdref gateway --token-budget-ms 0` turns R-PROGRESS's pace off (0 = none, as for every
 * timeout). Then the total cap is a plain cap: a committed stream still running when it
 * fires is ended with an SSE error event, code 504 (R-TIMEOUT, R-STATUS; its 504 -> 503
 * survived seed 2 too), not left without a deadline. */
static void test_total_cap_cuts_a_stream_without_a_token_budget(void) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.token_budget_ns = 0;
  c.total_timeout_ns = 2000 * MS;
  harness_t h;
  h_init_cfg(&h, &c, 1);
  h_request(&h, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h.now = 10 * MS;
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0); /* commits */
  PDT_EQ_INT(h.head_status, 200);
  for (int i = 0; i < 20 && !h.ended; i++) { /* a token every 100 ms, then the cap */
    h.now += 100 * MS;
    if (h_expiry(&h) <= h.now) h_expire(&h);
    else h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK1);
  }
  PDT_TRUE(h.ended);
  PDT_TRUE(h.now >= 2000 * MS && h.now <= 2100 * MS);
  PDT_TRUE(strstr(h.client, "request deadline exceeded") != NULL);
  PDT_TRUE(strstr(h.client, "\"code\":504") != NULL); /* R-STATUS: a deadline is 504 */
  h_free(&h);
}

/* core/pd_mode_ref.c doomed_data: its loop guard starting at 1 instead of 0 survived (seed
 * 2). A given-up stream leg frames at most 2^20 events of one chunk (a bound on the work of
 * one step; pdref's drivers hand the core a few KiB at a time): a chunk of exactly that many,
 * the last its [DONE], is read to the [DONE], so the leg's clean end is its success. */
static void test_doomed_leg_reads_a_full_chunk_to_its_done(void) {
  enum { N_EVENTS = 1 << 20 };
  static const char ev[] = "data: x\n\n";
  size_t ev_len = sizeof ev - 1, n = (N_EVENTS - 1) * ev_len + strlen(DONE);
  char *big = malloc(n + 1);
  PDT_TRUE(big != NULL);
  if (!big) return;
  for (size_t i = 0; i + 1 < N_EVENTS; i++) memcpy(big + i * ev_len, ev, ev_len);
  memcpy(big + (N_EVENTS - 1) * ev_len, DONE, strlen(DONE) + 1);
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  pd_event_t p500 = {.kind = PD_EV_UP_HEAD, .req_id = 7, .leg_id = 1, .status = 500};
  h_feed_raw(&h, p500); /* decode is given up, settled at the end of this instant */
  pd_event_t data = {.kind = PD_EV_UP_DATA, .req_id = 7, .leg_id = 2,
                     .data = (const uint8_t *)big, .len = n};
  h_feed_raw(&h, data);
  pd_event_t end = {.kind = PD_EV_UP_END, .req_id = 7, .leg_id = 2};
  h_feed_raw(&h, end);
  int status = -1;
  PDT_EQ_INT(h_outcome_of(&h, 2, &status), PD_OUTCOME_SUCCESS);
  free(big);
  h_free(&h);
}

/* core/pd_policy.c as_worker: -1 -> -2 survived (seed 2): the core's candidates are worker
 * indices below PD_MAX_WORKERS. pd_policy_pick's contract (pd_policy.h) is -1 for no pick,
 * and an index that does not fit its int32_t result is no pick: refused, not wrapped. */
static void test_policy_refuses_an_index_past_int32_with_minus_1(void) {
  pd_policy_t p;
  pd_policy_init(&p, PD_POLICY_ROUND_ROBIN);
  const uint32_t cand[] = {(uint32_t)INT32_MAX + 1u};
  PDT_EQ_INT(pd_policy_pick(&p, cand, 1, NULL, NULL), -1);
}

/* core/pd_policy.c pd_policy_pick: `!rng && n > 1` -> `n >= 1` survived (seed 2): the core
 * always passes its PRNG. pd_policy.h: power_of_two with one candidate returns it without
 * drawing, so it needs no PRNG; with two it cannot pick without one. */
static void test_power_of_two_with_one_candidate_needs_no_rng(void) {
  pd_policy_t p;
  pd_policy_init(&p, PD_POLICY_POWER_OF_TWO);
  const uint32_t cand[] = {5, 6};
  const uint32_t load[8] = {0};
  PDT_EQ_INT(pd_policy_pick(&p, cand, 1, load, NULL), 5);
  PDT_EQ_INT(pd_policy_pick(&p, cand, 2, load, NULL), -1);
}

/* core/pd_policy.c pick_power_of_two: `if (!load) return i1;` -> `return 0` survived (seed 1
 * on 1370b96): the core always passes loads. R1.19 without loads: every load reads as equal,
 * so the first of the two random positions wins; the pick is not stuck on position 0. The
 * mirror PRNG draws the same first position. */
static void test_power_of_two_without_loads_picks_the_first_draw(void) {
  pd_prng_t r, mirror;
  pd_prng_init(&r, 0x5eed0006ULL);
  pd_prng_init(&mirror, 0x5eed0006ULL);
  pd_policy_t p;
  pd_policy_init(&p, PD_POLICY_POWER_OF_TWO);
  const uint32_t cand[] = {7, 5, 3, 1};
  int not_first = 0;
  for (int round = 0; round < 64; round++) {
    uint32_t i1 = (uint32_t)pd_prng_below(&mirror, 4);
    (void)pd_prng_below(&mirror, 3);
    int32_t got = pd_policy_pick(&p, cand, 4, NULL, &r);
    PDT_EQ_INT(got, (int32_t)cand[i1]);
    not_first += got != (int32_t)cand[0];
  }
  PDT_TRUE(not_first > 0);
}

/* core/pd_gw.c pd_gw_breaker_state: `w >= n_workers` -> `w > n_workers` survived (make mutate
 * --files on def0240). pd_dispatch.h: a worker index past the role's count reads as closed,
 * never from the table's unused rows. The gateway is allocated poisoned (0xA5), so a read of
 * the row after the last worker would not say closed. */
static void test_breaker_state_past_the_last_worker_reads_closed(void) {
  pdt_alloc_t f = {0};
  f.poison = 1;
  pd_alloc_t a = pdt_alloc(&f);
  harness_t h;
  h_init(&h, PD_MODE_REFERENCE, &a); /* 2 prefill, 2 decode */
  PDT_TRUE(h.gw != NULL);
  if (!h.gw) return;
  for (int r = 0; r < 2; r++) {
    PDT_EQ_INT(pd_gw_breaker_state(h.gw, (pd_role_t)r, 1, h.now), PD_BREAKER_CLOSED);
    PDT_EQ_INT(pd_gw_breaker_state(h.gw, (pd_role_t)r, 2, h.now), PD_BREAKER_CLOSED);
    PDT_EQ_INT(pd_gw_breaker_state(h.gw, (pd_role_t)r, UINT32_MAX, h.now), PD_BREAKER_CLOSED);
  }
  h_free(&h);
  PDT_EQ_INT(f.live, 0);
}

/* Seeded bugs (docs/mutation.md) are the reference's only, and named: the same healthy stream
 * with repeat_first_event shows its first token twice under the reference and once under
 * joined; with leak_decode_load, which sits in code every mode shares, the reference keeps
 * decode's load after the request and joined, whose pd_gw_new clears the switch, does not.
 * The names parse both ways and an unknown one is refused. */
/* One healthy stream through a gateway of config c: both heads, prefill's answer (joined
 * reads it first, R1.35), then decode's events d_events and its end. 0, or -1 (no gateway). */
static int healthy_stream(harness_t *h, const pd_gw_config_t *c, const char *d_events) {
  h_init_cfg(h, c, 1);
  PDT_TRUE(h->gw != NULL);
  if (!h->gw) return -1;
  h_request(h, STREAM);
  h_leg(h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(h, PD_EV_UP_DATA, 1, 0, TOK0 DONE);
  h_leg(h, PD_EV_UP_END, 1, 0, NULL);
  h_leg(h, PD_EV_UP_DATA, 2, 0, d_events);
  h_leg(h, PD_EV_UP_END, 2, 0, NULL);
  return 0;
}

static void test_a_seeded_bug_is_the_references_only(void) {
  for (int m = 0; m < 2; m++) {
    pd_gw_config_t c;
    pd_gw_config_default(&c, m ? PD_MODE_JOINED : PD_MODE_REFERENCE);
    harness_t h;
    for (int leak = 0; leak < 2; leak++) {
      c.seeded_bug = leak ? PD_BUG_LEAK_DECODE_LOAD : PD_BUG_NONE;
      if (healthy_stream(&h, &c, TOK0 DONE)) return;
      PDT_TRUE(h.ended);
      PDT_EQ_INT(pd_gw_load(h.gw, PD_ROLE_DECODE, 0), leak && !m ? 1 : 0);
      h_free(&h);
    }
    c.seeded_bug = PD_BUG_REPEAT_FIRST_EVENT;
    if (healthy_stream(&h, &c, TOK0 TOK1 DONE)) return;
    int tok0 = 0, tok1 = 0;
    for (const char *at = h.client; (at = strstr(at, TOK0)) != NULL; at++) tok0++;
    for (const char *at = h.client; (at = strstr(at, TOK1)) != NULL; at++) tok1++;
    PDT_EQ_INT(tok0, m ? 1 : 2);
    PDT_EQ_INT(tok1, 1);
    h_free(&h);
  }
  for (int b = 0; b < PD_BUG_COUNT; b++) {
    pd_seeded_bug_t got = PD_BUG_COUNT;
    PDT_EQ_INT(pd_seeded_bug_parse(pd_seeded_bug_name((pd_seeded_bug_t)b), &got), 0);
    PDT_EQ_INT(got, b);
  }
  pd_seeded_bug_t got = PD_BUG_NONE;
  PDT_EQ_INT(pd_seeded_bug_parse("leak_prefill_load", &got), PD_ERR_INVAL);
  PDT_EQ_STR(pd_seeded_bug_name(PD_BUG_COUNT), "?");
}

/* core/pd_feed.c client_request: `PD_RQ_SET(gw, rq, RQ_END)` for a request refused at once
 * -> dropped survived (make mutate --files, seed 3): the refused request is answered (400)
 * but the driver never hears it is over (PD_ACT_DONE), so a socket gateway would keep its
 * request record; the simulator retires a request on that action. Malformed JSON and an
 * unknown route both end with exactly one PD_ACT_DONE and nothing live. */
static void test_a_request_refused_at_once_is_done(void) {
  static const char *const bodies[] = {"{\"text\":", NULL};
  for (int i = 0; i < 2; i++) {
    harness_t h;
    h_init(&h, PD_MODE_REFERENCE, NULL);
    PDT_TRUE(h.gw != NULL);
    if (!h.gw) return;
    const char *body = bodies[i] ? bodies[i] : STREAM;
    pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = 7,
                     .path = bodies[i] ? "/generate" : "/nope",
                     .data = (const uint8_t *)body, .len = strlen(body)};
    h_feed(&h, ev);
    PDT_EQ_INT(h.head_status, bodies[i] ? 400 : 404);
    PDT_TRUE(h.ended);
    PDT_EQ_U64(h_count(&h, PD_ACT_DONE), 1);
    PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
    h_free(&h);
  }
}

int pdt_suite_mutant_kills_ref(void) {
  static const pdt_case_t cases[] = {
      {"an allocation failure opens no leg with an empty body",
       test_no_leg_opens_with_an_empty_body_when_render_fails},
      {"a decode [DONE] before any token fails decode with 502",
       test_decode_done_without_a_token_fails_it_502},
      {"a decode [DONE] for a stated 0 tokens is the answer (R-ZERO-TOKENS)",
       test_decode_done_for_zero_tokens_is_the_answer},
      {"a logprob stream reads prefill's logprobs once and frees them",
       test_logprob_stream_reads_prefill_once_and_frees_it},
      {"a prefill chunk of 600,000 events is framed whole",
       test_prefill_chunk_of_many_events_is_framed_whole},
      {"a given-up leg that breaks the SSE framer fails with 502",
       test_doomed_leg_breaking_the_framer_fails_it_502},
      {"without a token budget the total cap cuts a committed stream",
       test_total_cap_cuts_a_stream_without_a_token_budget},
      {"a given-up leg reads a chunk of 2^20 events to its [DONE]",
       test_doomed_leg_reads_a_full_chunk_to_its_done},
      {"a live decode breaking the SSE framer fails with 502",
       test_live_decode_breaking_the_framer_fails_it_502},
      {"an idle timeout names itself in the client's error", test_an_idle_timeout_names_itself},
      {"a policy refuses a worker index past INT32_MAX with -1",
       test_policy_refuses_an_index_past_int32_with_minus_1},
      {"power of two with one candidate needs no PRNG",
       test_power_of_two_with_one_candidate_needs_no_rng},
      {"power_of_two without loads picks its first random position",
       test_power_of_two_without_loads_picks_the_first_draw},
      {"the breaker state of a worker past the last reads closed",
       test_breaker_state_past_the_last_worker_reads_closed},
      {"a request refused at once is answered and done",
       test_a_request_refused_at_once_is_done},
      {"a seeded bug is the reference's only, and named",
       test_a_seeded_bug_is_the_references_only},
  };
  return PDT_SUITE("mutant_kills_ref", cases);
}
