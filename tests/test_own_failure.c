/* R-OWN-FAILURE: the reference's own allocation failures while it serves a request. Every
 * allocation of the request's life after its arrival is failed in turn, on a logprob request
 * streamed and not, with both legs healthy. Whatever fails, the gateway blames no worker (no
 * OUTCOME failure or timeout: the workers answered well), the client gets an answer (a 200
 * whose logprobs are prefill's and decode's merged, a 200 stream that ends with an error
 * event, or a 500), and nothing it allocated is left when it is freed. Before the rule a lost
 * chunk of prefill's stream failed prefill with 502 and a failed merge forwarded decode's
 * logprobs unmerged in a clean 200 (scenario gateway-memory-pressure: I4, I11). */
#include <stdio.h>
#include <string.h>

#include "pd_dispatch.h"
#include "pdt.h"

#include "pdt_alloc.h"
#include "pdt_harness.h"

#define LP_BODY(stream) "{\"text\":\"hi\",\"stream\":" stream ",\"return_logprob\":true}"
#define P_JSON "{\"text\":\"\",\"meta_info\":{\"input_token_logprobs\":[[-0.5,1,null]]}}"
#define D_JSON(i)                                                                                  \
  "{\"text\":\"" #i "\",\"meta_info\":{\"input_token_logprobs\":[[null,1,null],[-0." #i ",2,null]]}}"
#define MERGED(i) "[[-0.5,1,null],[null,1,null],[-0." #i ",2,null]]"

/* One step; 1 if it recorded a failure or a timeout against a worker. */
static int step(harness_t *h, pd_event_kind_t k, uint64_t leg, int status, const char *data) {
  h_leg(h, k, leg, status, data);
  const pd_action_t *o;
  int blamed = 0;
  for (int i = 0; (o = h_find(h, PD_ACT_OUTCOME, i)); i++)
    blamed |= o->flag == PD_OUTCOME_FAILURE || o->flag == PD_OUTCOME_TIMEOUT;
  return blamed;
}

/* Run the request with the n-th allocation after its arrival failed. Returns 0 when the
 * step made fewer than n allocations (nothing failed). */
static int run_with_failure(int is_stream, unsigned n) {
  pdt_alloc_t f = {0};
  pd_alloc_t a = pdt_alloc(&f);
  harness_t h;
  h_init(&h, PD_MODE_REFERENCE, &a);
  PDT_TRUE(h.gw != NULL);
  if (!h.gw) return 0;
  h_request(&h, is_stream ? LP_BODY("true") : LP_BODY("false"));
  f.fail_at = f.calls + n;
  int blamed = 0;
  blamed |= step(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  blamed |= step(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  if (is_stream) {
    blamed |= step(&h, PD_EV_UP_DATA, 1, 0, "data: " P_JSON "\n\n" DONE);
    blamed |= step(&h, PD_EV_UP_END, 1, 0, NULL);
    blamed |= step(&h, PD_EV_UP_DATA, 2, 0, "data: " D_JSON(1) "\n\n");
    blamed |= step(&h, PD_EV_UP_DATA, 2, 0, "data: " D_JSON(2) "\n\ndata: " D_JSON(3) "\n\n");
    blamed |= step(&h, PD_EV_UP_DATA, 2, 0, DONE);
  } else {
    blamed |= step(&h, PD_EV_UP_DATA, 1, 0, P_JSON);
    blamed |= step(&h, PD_EV_UP_END, 1, 0, NULL);
    blamed |= step(&h, PD_EV_UP_DATA, 2, 0, D_JSON(1));
  }
  blamed |= step(&h, PD_EV_UP_END, 2, 0, NULL);
  for (int guard = 0; guard < 16 && h_fire(&h); guard++) { /* settles, tails */
  }
  int failed = f.calls >= f.fail_at;
  PDT_EQ_INT(blamed, 0);
  PDT_TRUE(h.ended);
  PDT_TRUE(h.head_status == 200 || h.head_status == 500);
  if (h.head_status == 200 && !strstr(h.client, "\"error\"")) { /* a clean answer is whole */
    PDT_TRUE(strstr(h.client, MERGED(1)) != NULL);
    if (is_stream) PDT_TRUE(strstr(h.client, MERGED(2)) && strstr(h.client, MERGED(3)));
  }
  if (failed && (blamed || !h.ended)) printf("    (allocation %u of the %s request)\n", n,
                                             is_stream ? "stream" : "non-stream");
  h_free(&h);
  PDT_EQ_INT(f.live, 0);
  return failed;
}

static void test_own_allocation_failures_blame_no_worker(void) {
  for (int is_stream = 0; is_stream < 2; is_stream++) {
    unsigned n = 1;
    for (; n < 400 && run_with_failure(is_stream, n); n++) {
    }
    PDT_TRUE(n > 3 && n < 400); /* the request did allocate, and every one was failed */
  }
}

int pdt_suite_own_failure(void) {
  static const pdt_case_t cases[] = {
      {"the reference's own allocation failures blame no worker (R-OWN-FAILURE)",
       test_own_allocation_failures_blame_no_worker},
  };
  return PDT_SUITE("own_failure", cases);
}
