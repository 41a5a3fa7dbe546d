/* Out of memory anywhere in a source-first request (core/pd_sf.c, pd_mode_sf.c,
 * pd_mode_sfref.c): every allocation, the core's own and cJSON's (the prefill and decode
 * bodies, prefill's answer, its kv_transfer_params), is failed in turn, in each source-first
 * mode, on a stream and a non-stream request. Each run must end with nothing live. The same
 * scheme as test_dispatch_nomem.c (cJSON's hooks share the injected allocator's countdown). */
#include <cjson/cJSON.h>

#include "pd_err.h"
#include "pdt_alloc.h"
#include "pdt_sf.h"

static pdt_alloc_t *g_failing; /* the run cJSON's hooks count against (tests only) */

static void *cj_malloc(size_t n) { return pdt_alloc_malloc(n, g_failing); }
static void cj_free(void *p) { pdt_alloc_free(p, g_failing); }

static const pd_mode_t sf_modes[] = {PD_MODE_VLLM_TOY_PROXY, PD_MODE_MOONCAKE_PROXY,
                                     PD_MODE_LLMD_SIDECAR, PD_MODE_REFERENCE};

/* One request through mode m (protocol vllm), failing allocation n (1-based; 0 = none).
 * Returns the client's head status. */
static int run_one(pd_mode_t m, int is_stream, unsigned n, pdt_alloc_t *f) {
  memset(f, 0, sizeof *f);
  f->fail_at = n;
  g_failing = f;
  cJSON_Hooks hooks = {cj_malloc, cj_free};
  cJSON_InitHooks(&hooks);
  pd_alloc_t a = pdt_alloc(f);
  pd_gw_config_t c;
  pd_gw_config_default(&c, m);
  c.protocol = PD_PROTOCOL_VLLM;
  harness_t h;
  sf_init_alloc(&h, &c, &a);
  int status = -1;
  if (h.gw) {
    sf_request(&h, "/v1/completions", is_stream ? SF_COMPLETIONS : SF_COMPLETIONS_NS);
    sf_answer(&h, 1, 200, SF_KV);
    h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
    h_leg(&h, PD_EV_UP_DATA, 2, 0, is_stream ? SF_CHUNK0 : "{\"choices\":[]}");
    if (is_stream) h_leg(&h, PD_EV_UP_DATA, 2, 0, "data: [DONE]\n\n");
    h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
    status = h.head_status;
    h_feed(&h, (pd_event_t){.kind = PD_EV_CLIENT_GONE, .req_id = 7});
    for (int guard = 0; guard < 8 && h_fire(&h); guard++) {
    }
    h_free(&h);
  }
  cJSON_InitHooks(NULL);
  g_failing = NULL;
  return status;
}

static void test_every_allocation_failure_in_a_source_first_request_is_survived(void) {
  for (size_t i = 0; i < sizeof sf_modes / sizeof sf_modes[0]; i++) {
    for (int is_stream = 0; is_stream < 2; is_stream++) {
      pdt_alloc_t f;
      PDT_EQ_INT(run_one(sf_modes[i], is_stream, 0, &f), 200); /* the script, nothing failed */
      unsigned total = f.calls;
      PDT_EQ_INT(f.live, 0);
      PDT_TRUE(total > 10);
      for (unsigned n = 1; n <= total; n++) {
        run_one(sf_modes[i], is_stream, n, &f);
        char what[96];
        snprintf(what, sizeof what, "%s %s: allocation %u of %u failed, %ld blocks live",
                 pd_mode_name(sf_modes[i]), is_stream ? "stream" : "non-stream", n, total,
                 f.live);
        CU_assertImplementation(f.live == 0, __LINE__, what, __FILE__, "", CU_FALSE);
      }
    }
  }
}

int pdt_suite_dispatch_sf_nomem(void) {
  static const pdt_case_t cases[] = {
      {"every allocation failure in a source-first request is survived",
       test_every_allocation_failure_in_a_source_first_request_is_survived},
  };
  return PDT_SUITE("dispatch_sf_nomem", cases);
}
