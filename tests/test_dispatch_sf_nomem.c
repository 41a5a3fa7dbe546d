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

/* The prefill body is the client's rewritten (V1.1, V1.2, V1.25): kv_transfer_params asking
 * for a remote decode, stream false, one token. */
static int is_prefill_body(const pd_action_t *a) {
  cJSON *j = cJSON_ParseWithLength((const char *)a->data, a->len);
  const cJSON *kv = cJSON_GetObjectItemCaseSensitive(j, "kv_transfer_params");
  int ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(kv, "do_remote_decode")) &&
           cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "stream")) &&
           sf_num(j, "max_tokens") == 1;
  cJSON_Delete(j);
  return ok;
}

/* core/pd_sf.c rewrite_prefill: `return rc` -> `return 0` survived. Its only errors are cJSON
 * allocations (a member, the params object, a value), failed here through cJSON's hooks, each
 * in turn while the client's request opens prefill: the prefill leg goes out with the whole
 * rewrite or not at all (the client gets an error), never with the client's own body (a stream
 * prefill without kv_transfer_params would decode the whole answer and pin nothing), and the
 * request ends with nothing live. */
static void test_a_prefill_body_short_of_memory_is_never_sent_half_rewritten(void) {
  for (size_t i = 0; i < sizeof sf_modes / sizeof sf_modes[0]; i++) {
    for (int is_stream = 0; is_stream < 2; is_stream++) {
      unsigned total = 0, refused = 0;
      for (unsigned n = 0; n == 0 || n <= total; n++) {
        pdt_alloc_t f = {0};
        f.fail_at = n;
        g_failing = &f;
        cJSON_Hooks hooks = {cj_malloc, cj_free};
        cJSON_InitHooks(&hooks);
        pd_alloc_t a = pdt_alloc(&f);
        pd_gw_config_t c;
        pd_gw_config_default(&c, sf_modes[i]);
        c.protocol = PD_PROTOCOL_VLLM;
        harness_t h;
        sf_init_alloc(&h, &c, &a);
        const pd_action_t *open = NULL;
        unsigned before = f.calls;
        if (h.gw) {
          sf_request(&h, "/v1/completions", is_stream ? SF_COMPLETIONS : SF_COMPLETIONS_NS);
          for (int k = 0; !open && h_find(&h, PD_ACT_OPEN_LEG, k); k++)
            if (h_find(&h, PD_ACT_OPEN_LEG, k)->role == PD_ROLE_PREFILL)
              open = h_find(&h, PD_ACT_OPEN_LEG, k);
        }
        if (n == 0) { /* nothing failed: the count of the request's allocations */
          total = f.calls;
          PDT_TRUE(open != NULL && is_prefill_body(open));
          PDT_TRUE(total > before);
        } else if (h.gw) {
          char what[112];
          snprintf(what, sizeof what, "%s %s: allocation %u of %u failed: prefill %s, head %d",
                   pd_mode_name(sf_modes[i]), is_stream ? "stream" : "non-stream", n, total,
                   open ? (is_prefill_body(open) ? "rewritten" : "NOT REWRITTEN") : "not sent",
                   h.head_status);
          /* not sent: 500 (the body or the leg), 400 (cJSON failing inside the client's
           * request reads as malformed JSON, pd_request_parse), or no answer yet (the core
           * refused the event whole, or the request waits) */
          int ok = open ? is_prefill_body(open)
                        : h.head_status == 500 || h.head_status == 400 || h.head_status == 0;
          refused += !open && h.head_status == 500;
          CU_assertImplementation(ok, __LINE__, what, __FILE__, "", CU_FALSE);
        }
        if (h.gw) {
          h_feed(&h, (pd_event_t){.kind = PD_EV_CLIENT_GONE, .req_id = 7});
          for (int guard = 0; guard < 8 && h_fire(&h); guard++) {
          }
          h_free(&h);
        }
        cJSON_InitHooks(NULL);
        g_failing = NULL;
        PDT_EQ_INT(f.live, 0);
      }
      PDT_TRUE(refused > 0); /* some failure did fall on the body and was answered 500 */
    }
  }
}

int pdt_suite_dispatch_sf_nomem(void) {
  static const pdt_case_t cases[] = {
      {"every allocation failure in a source-first request is survived",
       test_every_allocation_failure_in_a_source_first_request_is_survived},
      {"a prefill body short of memory is never sent half rewritten",
       test_a_prefill_body_short_of_memory_is_never_sent_half_rewritten},
  };
  return PDT_SUITE("dispatch_sf_nomem", cases);
}
