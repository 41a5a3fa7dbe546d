/* What running at scale needs besides the CLI: the arrival spacing in ns that sim bench
 * --rate sets (pd_scenario_workload_t.interval_ns); a heap that drops items in place and pops
 * the rest in the same order (pd_heap_filter); a worker engine whose queue of timers does not
 * keep the moot ones (a timeout its leg got past, a leg that ended) until their deadline; and
 * the shared JSON printers of sim run and conform (cli/cli_json.c). The binary runs of
 * `pdref sim bench --scenario` are in test_cli.c. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli_json.h"
#include "pd_heap.h"
#include "pd_prng.h"
#include "pd_scenario.h"
#include "pd_wengine.h"
#include "pd_wengine_int.h"
#include "pdt.h"

#define MS 1000000ull

static void test_interval_ns_replaces_interval_ms(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s) return;
  pd_scenario_defaults(s);
  pd_prng_t rng;
  pd_prng_init(&rng, 1);
  s->workload.interval_ms = 3;
  PDT_EQ_U64(pd_scenario_arrival_gap_ns(&s->workload, 1, &rng), 3000000);
  s->workload.interval_ns = 250000; /* 4,000 requests/s */
  PDT_EQ_U64(pd_scenario_arrival_gap_ns(&s->workload, 0, &rng), 0); /* the first at 0 */
  PDT_EQ_U64(pd_scenario_arrival_gap_ns(&s->workload, 1, &rng), 250000);
  PDT_EQ_U64(pd_scenario_arrival_gap_ns(&s->workload, 7, &rng), 250000);
  s->workload.poisson = 1; /* exponential with the same mean */
  double sum = 0;
  const int n = 20000;
  for (int i = 1; i <= n; i++) sum += (double)pd_scenario_arrival_gap_ns(&s->workload, (uint32_t)i, &rng);
  double mean = sum / n;
  PDT_TRUE(mean > 240000 && mean < 260000);
  free(s);
}

static int keep_even_b(void *ud, const pd_heap_item_t *it) {
  (void)ud;
  return it->b % 2 == 0;
}

static size_t g_where[64]; /* item b -> its index in the tracked heap */
static void track(const pd_heap_item_t *it, size_t index) { g_where[it->b] = index; }

/* 64 items at 8 times and 2 ties (many equal keys: seq decides), the odd b dropped: the
 * survivors pop exactly as they do from a heap that never held the others; a tracked heap
 * knows where each survivor is. */
static void test_heap_filter_keeps_the_pop_order(void) {
  pd_heap_t h, ref;
  pd_heap_init(&h, NULL, 0);
  pd_heap_init(&ref, NULL, 0);
  pd_heap_set_track(&h, track);
  for (uint64_t b = 0; b < 64; b++) {
    pd_heap_item_t it = {.t_ns = (b * 37) % 8, .b = b, .tie = b % 3 == 0};
    PDT_EQ_INT(pd_heap_push(&h, &it), 0);
    if (b % 2 == 0) PDT_EQ_INT(pd_heap_push(&ref, &it), 0);
  }
  PDT_EQ_U64(pd_heap_filter(&h, keep_even_b, NULL), 32);
  PDT_EQ_U64(pd_heap_len(&h), 32);
  for (uint64_t b = 0; b < 64; b++) {
    if (b % 2) PDT_EQ_U64(g_where[b], PD_HEAP_NONE);
    else PDT_TRUE(g_where[b] < 32 && h.v[g_where[b]].b == b);
  }
  pd_heap_item_t x, y;
  while (pd_heap_pop(&ref, &y)) {
    PDT_EQ_INT(pd_heap_pop(&h, &x), 1);
    PDT_EQ_U64(x.b, y.b);
  }
  PDT_EQ_U64(pd_heap_len(&h), 0);
  pd_heap_free(&h);
  pd_heap_free(&ref);
}

/* A decode worker with the default 300 s waiting timeout: 20,000 legs each open and aborted
 * in the same millisecond leave 20,000 moot timeouts; the queue keeps only what is live (at
 * most twice that plus 1024), while leg 0, left waiting, still times out at 300 s. */
static void test_engine_drops_moot_timers(void) {
  pd_scenario_worker_t spec;
  memset(&spec, 0, sizeof spec);
  spec.role = PD_ROLE_DECODE;
  spec.first_token_ms = 10;
  spec.token_ms = 5;
  spec.max_running = PD_WORKER_DEFAULT_MAX_RUNNING;
  spec.kv_tokens = PD_WORKER_DEFAULT_KV_TOKENS;
  spec.page_size = PD_WORKER_DEFAULT_PAGE_SIZE;
  spec.max_prefill_tokens = PD_WORKER_DEFAULT_MAX_PREFILL_TOKENS;
  pd_prng_t rng;
  pd_prng_init(&rng, 3);
  pd_wengine_config_t cfg = {.spec = &spec, .bootstrap_timeout_ms = 300000,
                             .waiting_timeout_ms = 300000, .fault_rng = &rng, .time_scale = 1.0,
                             .reconnect_ms = 50};
  pd_wengine_t *e = pd_wengine_new(&cfg, NULL);
  pd_wact_buf_t out;
  pd_wact_buf_init(&out, NULL);
  PDT_TRUE(e != NULL);
  if (!e) return;
  pd_wengine_req_t r = {.is_stream = 1, .has_room = 1, .tokens = 4, .prompt_tokens = 8,
                        .can_connect = 1, .request = PD_TRAFFIC_FAULT_ANY, .leg_no = 1};
  size_t most = 0;
  for (uint64_t id = 0; id <= 20000; id++) {
    r.room = r.rooms_hash = id + 1;
    PDT_EQ_INT(pd_wengine_open(e, id * MS, id, &r, &out), 0);
    if (id) PDT_EQ_INT(pd_wengine_abort(e, id * MS, id, &out), 0);
    pd_wact_buf_reset(&out);
    if (pd_heap_len(&e->timers) > most) most = pd_heap_len(&e->timers);
  }
  PDT_TRUE(most <= 2 * 1 + 1024 + 1);
  PDT_EQ_INT(pd_wengine_leg_state(e, 0), PD_WORKER_LEG_WAIT_KV);
  PDT_EQ_U64(pd_wengine_next_expiry(e), 300000 * MS);
  PDT_EQ_INT(pd_wengine_expire(e, 300000 * MS, &out), 0);
  PDT_EQ_INT(pd_wengine_leg_state(e, 0), PD_WORKER_LEG_DONE);
  PDT_EQ_INT(pd_wengine_expire(e, 321000 * MS, &out), 0); /* the last moot ones, harmless */
  PDT_EQ_U64(pd_heap_len(&e->timers), 0);
  pd_wact_buf_free(&out);
  pd_wengine_del(e);
}

static void test_json_row_head_nums_summary_in_order(void) {
  cJSON *root = cJSON_CreateObject(), *rows = cJSON_CreateArray(), *row = cJSON_CreateObject();
  pd_cli_json_row_head(row, "n", "f.json", "reference");
  const pd_cli_json_num_t nums[] = {{"b", 2}, {"a", 1.5}, {"c", 0}};
  pd_cli_json_add_nums(row, nums, sizeof nums / sizeof nums[0]);
  cJSON_AddItemToArray(rows, row);
  const pd_cli_json_num_t counts[] = {{"as_expected", 3}, {"unexpected", 1}, {"not_exercised", 2}};
  pd_cli_json_add_summary(root, rows, counts, 3);
  char *t = cJSON_PrintUnformatted(root);
  PDT_EQ_STR(t, "{\"rows\":[{\"scenario\":\"n\",\"file\":\"f.json\",\"mode\":\"reference\","
                "\"b\":2,\"a\":1.5,\"c\":0}],\"as_expected\":3,\"unexpected\":1,\"not_exercised\":2}");
  cJSON_free(t);
  cJSON_Delete(root);
}

int pdt_suite_bench(void) {
  static const pdt_case_t cases[] = {
      {"interval_ns replaces interval_ms (fixed and Poisson)", test_interval_ns_replaces_interval_ms},
      {"heap filter keeps the pop order (and the tracked indices)", test_heap_filter_keeps_the_pop_order},
      {"engine drops moot timers; a live one still fires", test_engine_drops_moot_timers},
      {"cli_json: row head, numbers, summary in order", test_json_row_head_nums_summary_in_order},
  };
  return PDT_SUITE("bench", cases);
}
