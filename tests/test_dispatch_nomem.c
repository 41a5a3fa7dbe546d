/* Out of memory anywhere in the core: every allocation, the core's own (through its injected
 * allocator) and cJSON's (parsing bodies, rendering legs, merging logprobs), is failed in turn,
 * in every mode, on a stream and a non-stream request with logprobs. Each run must end with
 * nothing live. cJSON's allocator is process-wide (cJSON_InitHooks), so the test installs
 * hooks that share the injected allocator's countdown and puts cJSON's defaults back after. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "pd_dispatch.h"
#include "pd_err.h"
#include "pdt.h"

#include "pdt_alloc.h"
#include "pdt_harness.h"

static pdt_alloc_t *g_failing; /* the run cJSON's hooks count against (tests only) */
static long g_json_calls;

static void *cj_malloc(size_t n) {
  g_json_calls++;
  return pdt_alloc_malloc(n, g_failing);
}
static void cj_free(void *p) { pdt_alloc_free(p, g_failing); }

#define LP_STREAM "{\"text\":\"hi\",\"stream\":true,\"return_logprob\":true}"
#define LP_NONSTREAM "{\"text\":\"hi\",\"stream\":false,\"return_logprob\":true}"
#define P_CHUNK "data: {\"text\":\"\",\"meta_info\":{\"input_token_logprobs\":[[-0.5,1,null]]}}\n\n"
#define P_BODY "{\"text\":\"\",\"meta_info\":{\"input_token_logprobs\":[[-0.5,1,null]]}}"
#define D_BODY "{\"text\":\"ab\",\"meta_info\":{\"input_token_logprobs\":[[null,1,null]]}}"

/* One request through mode m, failing allocation number n (1-based; 0 = none). Returns the
 * client's head status. */
static int run_one(pd_mode_t m, int is_stream, unsigned n, pdt_alloc_t *f) {
  memset(f, 0, sizeof *f);
  f->fail_at = n;
  g_failing = f;
  g_json_calls = 0;
  cJSON_Hooks hooks = {cj_malloc, cj_free};
  cJSON_InitHooks(&hooks);
  pd_alloc_t a = pdt_alloc(f);
  harness_t h;
  h_init(&h, m, &a);
  int status = -1;
  if (h.gw) {
    h_request(&h, is_stream ? LP_STREAM : LP_NONSTREAM);
    h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
    h_leg(&h, PD_EV_UP_DATA, 1, 0, is_stream ? P_CHUNK : P_BODY);
    if (is_stream) h_leg(&h, PD_EV_UP_DATA, 1, 0, DONE);
    h_leg(&h, PD_EV_UP_END, 1, 0, NULL);
    h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
    h_leg(&h, PD_EV_UP_DATA, 2, 0, is_stream ? TOK0 : D_BODY);
    if (is_stream) h_leg(&h, PD_EV_UP_DATA, 2, 0, DONE);
    h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
    status = h.head_status;
    pd_event_t ev = {.kind = PD_EV_CLIENT_GONE, .req_id = 7};
    h_feed(&h, ev);
    h_free(&h);
  }
  cJSON_InitHooks(NULL);
  g_failing = NULL;
  return status;
}

static void test_every_core_and_cjson_allocation_failure_is_survived(void) {
  for (int m = 0; m < PD_MODE_COUNT; m++) {
    if (!pd_mode_speaks((pd_mode_t)m, PD_PROTOCOL_SGLANG)) continue; /* test_dispatch_sf.c */
    for (int is_stream = 0; is_stream < 2; is_stream++) {
      pdt_alloc_t f;
      int ok = run_one((pd_mode_t)m, is_stream, 0, &f); /* the script, nothing failed */
      unsigned total = f.calls;
      PDT_EQ_INT(ok, 200);
      PDT_EQ_INT(f.live, 0);
      PDT_TRUE(g_json_calls > 0); /* cJSON's allocations are in the count */
      for (unsigned n = 1; n <= total; n++) {
        run_one((pd_mode_t)m, is_stream, n, &f);
        char what[96];
        snprintf(what, sizeof what, "%s %s: allocation %u of %u failed, %ld blocks live",
                 pd_mode_name((pd_mode_t)m), is_stream ? "stream" : "non-stream", n, total, f.live);
        CU_assertImplementation(f.live == 0, __LINE__, what, __FILE__, "", CU_FALSE);
      }
    }
  }
}

/* A reference gateway (allocator a, rng seeded 42) with one prefill p0 and one decode d0. */
static pd_gw_t *one_pair(const pd_alloc_t *a, pd_prng_t *rng) {
  pd_prng_init(rng, 42);
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  pd_gw_t *gw = pd_gw_new(a, &c, rng);
  if (gw) {
    pd_gw_add_worker(gw, PD_ROLE_PREFILL, "p0", "p0", 8998);
    pd_gw_add_worker(gw, PD_ROLE_DECODE, "d0", "d0", -1);
  }
  return gw;
}

/* No room for a step's actions: the event is refused whole (PD_ERR_NOMEM, nothing done, no
 * action half-written), and fed again once there is memory it runs as if new. */
static void test_no_room_for_actions_refuses_the_event_whole(void) {
  pdt_alloc_t f = {0};
  pd_alloc_t a = pdt_alloc(&f);
  pd_prng_t rng;
  pd_gw_t *gw = one_pair(NULL, &rng);
  PDT_TRUE(gw != NULL);
  if (!gw) return;
  pd_actbuf_t out;
  pd_actbuf_init(&out, &a);
  pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = 7, .path = "/generate",
                   .data = (const uint8_t *)STREAM, .len = strlen(STREAM)};
  f.fail_at = 1;
  PDT_EQ_INT(pd_gw_feed(gw, 0, &ev, &out), PD_ERR_NOMEM);
  PDT_EQ_U64(out.n, 0);
  PDT_EQ_U64(pd_gw_deadlines_armed(gw), 0); /* the request was not taken */
  f.fail_at = 0;
  PDT_EQ_INT(pd_gw_feed(gw, 0, &ev, &out), 0);
  size_t opens = 0;
  for (size_t i = 0; i < out.n; i++) opens += out.v[i].kind == PD_ACT_OPEN_LEG;
  PDT_EQ_U64(opens, 2);
  pd_actbuf_free(&out);
  pd_gw_del(gw);
  PDT_EQ_INT(f.live, 0);
}

/* A client request the core cannot take for want of memory is refused whole (PD_ERR_NOMEM,
 * nothing emitted) or taken and answered (legs or a 500): never taken in silence, which would
 * leave its client waiting for an answer nobody owes it. Each of the core's allocations while
 * taking the request is failed in turn (core/pd_feed.c: `return rc` after the map's growth ->
 * `return 0` survived make mutate on 1370b96). */
static void test_a_request_the_core_cannot_take_is_refused_or_answered(void) {
  unsigned total = 0;
  for (unsigned k = 0; k == 0 || k <= total; k++) {
    pdt_alloc_t f = {0};
    pd_alloc_t a = pdt_alloc(&f);
    pd_prng_t rng;
    pd_gw_t *gw = one_pair(&a, &rng);
    PDT_TRUE(gw != NULL);
    if (!gw) return;
    pd_actbuf_t out;
    pd_actbuf_init(&out, NULL);
    pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = 7, .path = "/generate",
                     .data = (const uint8_t *)STREAM, .len = strlen(STREAM)};
    unsigned before = f.calls;
    if (k) f.fail_at = before + k;
    int rc = pd_gw_feed(gw, 0, &ev, &out);
    if (!k) {
      total = f.calls - before; /* the allocations taking a request makes */
      PDT_TRUE(total >= 2);     /* the request, the live-request map at least */
      PDT_EQ_INT(rc, 0);
    }
    char what[96];
    snprintf(what, sizeof what, "allocation %u of %u failed: rc %d, %zu actions", k, total, rc,
             out.n);
    CU_assertImplementation((rc == PD_ERR_NOMEM && out.n == 0) || (rc == 0 && out.n > 0),
                            __LINE__, what, __FILE__, "", CU_FALSE);
    pd_actbuf_free(&out);
    pd_gw_del(gw);
    PDT_EQ_INT(f.live, 0);
  }
}

int pdt_suite_dispatch_nomem(void) {
  static const pdt_case_t cases[] = {
      {"every core and cJSON allocation failure is survived, every mode",
       test_every_core_and_cjson_allocation_failure_is_survived},
      {"no room for a step's actions refuses the event whole",
       test_no_room_for_actions_refuses_the_event_whole},
      {"a request the core cannot take is refused whole or answered",
       test_a_request_the_core_cannot_take_is_refused_or_answered},
  };
  return PDT_SUITE("dispatch_nomem", cases);
}
