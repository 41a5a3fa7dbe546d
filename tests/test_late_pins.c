/* KV a vLLM prefill keeps pinned after its request retired (sim/pd_world_worker.c "KV pinned
 * past its request"): I18 is judged on the real release time, not guessed at retirement, and
 * the pin's page-seconds reach the cost figures. The checker leaves a pin still held within
 * the grace to the world (pd_judge_t.is_kv_deferred); the world judges it when the engine
 * frees it, or at the run's end. */
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pd_metrics.h"
#include "pd_world.h"
#include "pdt.h"
#include "pdt_judge.h"
#include "pdt_net.h"

#define MS 1000000ull
#define I18 (1u << (PD_INVARIANT_STRANDED_KV - 1))

/* The served request (pdt_judge.h: ended at 200 ms, grace 1000 ms) whose prefill leg still
 * holds its 8 pinned pages, judged at judged_ms. */
static uint32_t judge_pinned(uint64_t judged_ms, int deferred, char *reason, size_t cap) {
  pdt_judged_t *k = pdt_served(PD_MODE_REFERENCE, 1, judged_ms);
  if (!k) return ~0u;
  k->j.is_kv_deferred = deferred;
  k->leg[0].kv_pages = 8;
  uint32_t v = pdt_judge(k, reason, cap);
  free(k);
  return v;
}

static void test_a_pin_held_within_the_grace_is_left_to_the_world(void) {
  char reason[200] = "";
  PDT_EQ_U64(judge_pinned(300, 1, reason, sizeof reason) & I18, 0); /* not yet known */
  PDT_EQ_U64(judge_pinned(300, 0, reason, sizeof reason) & I18, I18); /* conform: judged now */
  PDT_TRUE(strstr(reason, "still held when judged 100.0 ms after") != NULL);
  reason[0] = 0;
  PDT_EQ_U64(judge_pinned(1300, 1, reason, sizeof reason) & I18, I18); /* past the grace */
  PDT_TRUE(strstr(reason, "I18 8 KV pages of a prefill leg") != NULL);
}

/* Run scenarios/<name>.json under mode with metrics; fills the total beyond-grace page-s. */
static uint32_t run_metrics(const char *name, pd_mode_t mode, double *beyond, char *first,
                            size_t cap) {
  pd_scenario_t *s = pdt_load_scenario(name);
  if (!s) return ~0u;
  pd_metrics_t m;
  pd_metrics_init(&m, 0);
  pd_world_opts_t o = {.metrics = &m};
  pd_world_stats_t st;
  uint32_t v = 0;
  PDT_EQ_INT(pd_world_run_opts(s, mode, s->config.seed, &o, &st, &v, NULL), 0);
  *beyond = m.total.kv_beyond_grace_page_s;
  snprintf(first, cap, "%s", st.first_reason);
  pd_metrics_free(&m);
  free(s);
  return v;
}

/* The Mooncake-style proxy's decode cannot use the params it gets, so prefill's pin waits for
 * vLLM's 480 s timer long after the client left: I18 with the real time, and its
 * page-seconds counted (before, the run counted none: the pin outlived the request). The toy
 * proxy's decode reads the pin: nothing stranded. */
static void test_a_pin_that_outlives_its_request_is_judged_and_counted(void) {
  char first[200];
  double beyond = 0;
  uint32_t v = run_metrics("sf-client-disconnect-during-decode-queue", PD_MODE_MOONCAKE_PROXY,
                           &beyond, first, sizeof first);
  PDT_TRUE(v != ~0u && (v & I18));
  PDT_TRUE(strstr(first, "pinned until 4797") != NULL); /* 480 s timer, from the pin */
  PDT_TRUE(beyond > 940.0 && beyond < 962.0); /* 2 requests: 1 page each, ~479 s past the grace */
  if (!(v & I18) || beyond <= 940.0 || beyond >= 962.0) fprintf(stderr, "late pins: %#x %.1f %s\n", v, beyond, first);
  v = run_metrics("sf-client-disconnect-during-decode-queue", PD_MODE_VLLM_TOY_PROXY, &beyond,
                  first, sizeof first);
  PDT_EQ_U64(v & I18, 0);
  PDT_TRUE(beyond < 1e-9);
}

static void test_kv_late_counts_after_the_end_and_the_grace(void) {
  pd_metrics_t m;
  pd_metrics_init(&m, 0);
  pd_scenario_t *s = calloc(1, sizeof *s);
  if (!s) return;
  pd_scenario_defaults(s);
  pd_metrics_run_begin(&m, s);
  /* 4 pages from retirement at 500 ms to 3500 ms; the client ended at 200 ms, grace 1 s */
  pd_metrics_kv_late(&m, 0, 4, 500 * MS, 3500 * MS, 1, 200 * MS);
  pd_metrics_kv_late(&m, 0, 4, 500 * MS, 400 * MS, 1, 200 * MS); /* released before: nothing */
  pd_metrics_run_end(&m);
  PDT_TRUE(m.total.kv_page_s > 11.999 && m.total.kv_page_s < 12.001);           /* 4 x 3 s */
  PDT_TRUE(m.total.kv_after_end_page_s > 11.999 && m.total.kv_after_end_page_s < 12.001);
  PDT_TRUE(m.total.kv_beyond_grace_page_s > 9.199 && m.total.kv_beyond_grace_page_s < 9.201);
  pd_metrics_free(&m);
  free(s);
}

int pdt_suite_late_pins(void) {
  static const pdt_case_t cases[] = {
      {"a pin held within the grace is left to the world",
       test_a_pin_held_within_the_grace_is_left_to_the_world},
      {"a pin that outlives its request is judged and counted",
       test_a_pin_that_outlives_its_request_is_judged_and_counted},
      {"kv_late counts after the end and the grace", test_kv_late_counts_after_the_end_and_the_grace},
  };
  return PDT_SUITE("late_pins", cases);
}
