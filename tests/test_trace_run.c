/* The trace of a simulated run: the row's trace hash (I13) is the same for the same seed,
 * whether or not a file is written, and moves when one timing moves. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "pd_scenario.h"
#include "pd_trace.h"
#include "pd_world.h"
#include "pdt.h"

static pd_scenario_t *load(const char *name) {
  pd_scenario_t *s = malloc(sizeof *s);
  char path[1024], err[512];
  snprintf(path, sizeof path, "%s/scenarios/%s.json", PD_SOURCE_DIR, name);
  PDT_TRUE(s != NULL);
  if (s && pd_scenario_load(s, path, err, sizeof err) != 0) {
    printf("\n%s\n", err);
    free(s);
    s = NULL;
  }
  PDT_TRUE(s != NULL);
  return s;
}

/* One run; f NULL: hash only. Returns the hash; *v the violated set. */
static uint64_t run(const pd_scenario_t *s, pd_mode_t m, FILE *f, uint32_t *v) {
  pd_world_stats_t st;
  uint64_t h = 0;
  *v = 0;
  PDT_EQ_INT(pd_world_run(s, m, s->config.seed, f, &st, v, &h), 0);
  return h;
}

/* Crashes and restarts, aborts and client disconnects are all instants of the hash: each run
 * hashes the same with a file written and without. */
static void test_hash_is_the_same_with_and_without_a_file(void) {
  static const char *const names[] = {"decode-crash-and-restart",
                                      "abort-overtakes-late-prefill-request",
                                      "client-disconnect-during-decode-stream"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    pd_scenario_t *s = load(names[i]);
    if (!s) continue;
    for (int m = 0; m < PD_MODE_COUNT; m++) {
      if (!pd_mode_speaks((pd_mode_t)m, pd_scenario_protocol(s))) continue;
      char *text = NULL;
      size_t len = 0;
      FILE *f = open_memstream(&text, &len);
      uint32_t v1, v2, v3;
      uint64_t with = run(s, (pd_mode_t)m, f, &v1);
      fclose(f);
      uint64_t without = run(s, (pd_mode_t)m, NULL, &v2);
      uint64_t again = run(s, (pd_mode_t)m, NULL, &v3);
      char msg[160];
      snprintf(msg, sizeof msg, "%s %s: %016llx with a file, %016llx without", names[i],
               pd_mode_name((pd_mode_t)m), (unsigned long long)with, (unsigned long long)without);
      CU_assertImplementation(with == without && without == again, __LINE__, msg, __FILE__, "",
                              CU_FALSE);
      PDT_EQ_INT(v1, v2);
      PDT_TRUE(len > 2); /* the file was written */
      free(text);
    }
    free(s);
  }
}

/* The network's one-way latency up by 1 us: the same verdict, another hash; back, the same. */
static void test_one_timing_moves_the_hash(void) {
  pd_scenario_t *s = load("happy-path-stream");
  if (!s) return;
  uint32_t v1, v2, v3;
  uint64_t base = run(s, PD_MODE_REFERENCE, NULL, &v1);
  s->config.net_us += 1;
  uint64_t moved = run(s, PD_MODE_REFERENCE, NULL, &v2);
  s->config.net_us -= 1;
  PDT_EQ_U64(run(s, PD_MODE_REFERENCE, NULL, &v3), base);
  PDT_TRUE(moved != base);
  PDT_EQ_INT(v1, v2);
  PDT_EQ_INT(v1, 0);
  free(s);
}

int pdt_suite_trace_run(void) {
  static const pdt_case_t cases[] = {
      {"a run's hash is the same with and without a trace file",
       test_hash_is_the_same_with_and_without_a_file},
      {"one timing 1 us later moves the hash, not the verdict", test_one_timing_moves_the_hash},
  };
  return PDT_SUITE("trace_run", cases);
}
