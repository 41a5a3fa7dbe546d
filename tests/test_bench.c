/* sim bench's parts that are not the CLI itself: the arrival spacing in ns that --rate sets
 * (pd_scenario_workload_t.interval_ns), and the shared JSON printers of sim run and conform
 * (cli/cli_json.c): key order and values as the tables give them. The binary runs of
 * `pdref sim bench --scenario` are in test_cli.c. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli_json.h"
#include "pd_prng.h"
#include "pd_scenario.h"
#include "pdt.h"

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

static void test_json_row_head_nums_summary_in_order(void) {
  cJSON *root = cJSON_CreateObject(), *rows = cJSON_CreateArray(), *row = cJSON_CreateObject();
  pd_cli_json_row_head(row, "n", "f.json", "reference");
  const pd_cli_json_num_t nums[] = {{"b", 2}, {"a", 1.5}, {"c", 0}};
  pd_cli_json_add_nums(row, nums, sizeof nums / sizeof nums[0]);
  cJSON_AddItemToArray(rows, row);
  pd_cli_json_add_summary(root, rows, 3, 1, 2);
  char *t = cJSON_PrintUnformatted(root);
  PDT_EQ_STR(t, "{\"rows\":[{\"scenario\":\"n\",\"file\":\"f.json\",\"mode\":\"reference\","
                "\"b\":2,\"a\":1.5,\"c\":0}],\"passed\":3,\"failed\":1,\"not_exercised\":2}");
  cJSON_free(t);
  cJSON_Delete(root);
}

int pdt_suite_bench(void) {
  static const pdt_case_t cases[] = {
      {"interval_ns replaces interval_ms (fixed and Poisson)", test_interval_ns_replaces_interval_ms},
      {"cli_json: row head, numbers, summary in order", test_json_row_head_nums_summary_in_order},
  };
  return PDT_SUITE("bench", cases);
}
