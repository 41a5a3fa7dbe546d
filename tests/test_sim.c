/* The simulator end to end: every scenario file meets its expectation, runs are
 * deterministic, and reference holds every invariant under a large faulty load. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pd_world_int.h"
#include "pd_trace.h"
#include "pdt.h"
#include "pdt_net.h"

#define BIT_I(i) (1u << ((i) - 1))

#ifndef PD_SOURCE_DIR
#define PD_SOURCE_DIR "."
#endif

static void test_every_scenario_meets_its_expectation(void) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/scenarios", PD_SOURCE_DIR);
  DIR *d = opendir(dir);
  PDT_TRUE(d != NULL);
  if (!d) return;
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0) continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(l - 5), e->d_name);
    pd_scenario_t *s = pdt_load_scenario(name);
    PDT_TRUE(s != NULL);
    if (!s) continue;
    files++;
    for (int m = 0; m < PD_MODE_COUNT; m++) {
      if (!pd_mode_speaks((pd_mode_t)m, pd_scenario_protocol(s))) continue;
      pd_world_stats_t st;
      uint32_t got = 0;
      uint64_t h = 0;
      PDT_EQ_INT(pd_world_run(s, (pd_mode_t)m, s->config.seed, NULL, &st, &got, &h), 0);
      if (!s->expect[m].is_set) { /* only memory pressure leaves a mode out (R-OWN-FAILURE) */
        PDT_TRUE(s->config.alloc_fail_for_ms && m != PD_MODE_REFERENCE);
        continue;
      }
      if (got != s->expect[m].violated_mask)
        fprintf(stderr, "  %s under %s: violated mask %#x, expected %#x (%s)\n", s->name,
                pd_mode_name((pd_mode_t)m), got, s->expect[m].violated_mask, st.first_reason);
      PDT_EQ_U64(got, s->expect[m].violated_mask);
      /* every fault entry fires, unless the file declares the mode unexercised (and then one
         really does not) */
      int exercised = st.faults_exercised == st.faults_total && st.requests_served > 0;
      if (exercised == (s->unexercised[m][0] != 0))
        fprintf(stderr, "  %s under %s: faults exercised %u/%u, served %llu; declared: %s\n",
                s->name, pd_mode_name((pd_mode_t)m), st.faults_exercised, st.faults_total,
                (unsigned long long)st.requests_served, s->unexercised[m]);
      PDT_EQ_INT(exercised, s->unexercised[m][0] == 0);
    }
    free(s);
  }
  closedir(d);
  PDT_TRUE(files >= 30);
}

static void test_same_seed_same_trace_different_seed_different_rooms(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s) return;
  pd_scenario_defaults(s);
  snprintf(s->name, sizeof s->name, "determinism");
  s->workload.requests = 50;
  s->workload.fault_rate = 0.2;
  uint64_t h1 = 0, h2 = 0, h3 = 0;
  uint32_t v;
  pd_world_stats_t st;
  for (int m = 0; m < PD_MODE_COUNT; m++) {
    if (!pd_mode_speaks((pd_mode_t)m, PD_PROTOCOL_SGLANG)) continue; /* SGLang workers */
    pd_world_run(s, (pd_mode_t)m, 7, NULL, &st, &v, &h1);
    pd_world_run(s, (pd_mode_t)m, 7, NULL, &st, &v, &h2);
    pd_world_run(s, (pd_mode_t)m, 8, NULL, &st, &v, &h3);
    PDT_EQ_U64(h1, h2);
    PDT_TRUE(h1 != h3);
  }
  free(s);
}

static void test_trace_file_hash_equals_hash_only_run(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s) return;
  pd_scenario_defaults(s);
  s->workload.requests = 5;
  FILE *f = tmpfile();
  uint64_t h1 = 0, h2 = 0;
  uint32_t v;
  pd_world_stats_t st;
  pd_world_run(s, PD_MODE_REFERENCE, 3, f, &st, &v, &h1);
  pd_world_run(s, PD_MODE_REFERENCE, 3, NULL, &st, &v, &h2);
  PDT_TRUE(f && ftell(f) > 100);
  PDT_EQ_U64(h1, h2);
  if (f) fclose(f);
  free(s);
}

/* 10,000 concurrent requests (all arrive at once) over 4+4 workers with 5 % faulted legs. */
static void test_reference_holds_every_invariant_under_10000_faulty_requests(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s) return;
  pd_scenario_defaults(s);
  snprintf(s->name, sizeof s->name, "load-10000");
  pd_scenario_set_workers(s, 4, 4);
  s->workload.requests = 10000;
  s->workload.interval_ms = 0;
  s->workload.stream = 0.7;
  s->workload.logprob = 0.2;
  s->workload.fault_rate = 0.05;
  s->config.total_timeout_ms = 60000; /* below the client's 120 s patience (I1) */
  pd_world_stats_t st;
  uint32_t v = 1;
  uint64_t h;
  PDT_EQ_INT(pd_world_run(s, PD_MODE_REFERENCE, 11, NULL, &st, &v, &h), 0);
  if (v) fprintf(stderr, "  load: violated %#x: %s (seed 11)\n", v, st.first_reason);
  PDT_EQ_U64(v, 0);
  PDT_EQ_U64(st.requests_done, 10000);
  PDT_TRUE(st.peak_live >= 5000); /* they really were concurrent */
  free(s);
}

/* The prompt count of a batch body: `batch` items on every route that has a prompt array. */
static int body_items(pd_route_t route, uint32_t batch, const char *key) {
  pd_scenario_workload_t wl;
  memset(&wl, 0, sizeof wl);
  wl.route = route;
  wl.batch = batch;
  pd_client_request_t rq;
  memset(&rq, 0, sizeof rq);
  rq.tokens = 4;
  char buf[8192];
  size_t n = pd_world_client_body(&rq, &wl, "t-1", buf, sizeof buf);
  cJSON *j = cJSON_ParseWithLength(buf, n);
  int items = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, key));
  cJSON_Delete(j);
  return items;
}

static void test_a_batch_of_5_sends_5_prompts_on_generate_and_completions(void) {
  PDT_EQ_INT(body_items(PD_ROUTE_GENERATE, 5, "text"), 5);
  PDT_EQ_INT(body_items(PD_ROUTE_COMPLETIONS, 5, "prompt"), 5);
  PDT_EQ_INT(body_items(PD_ROUTE_COMPLETIONS, 2, "prompt"), 2);
  PDT_EQ_INT(body_items(PD_ROUTE_GENERATE, 300, "text"), 300);
  PDT_EQ_INT(body_items(PD_ROUTE_COMPLETIONS, 0, "prompt"), 0); /* a scalar prompt */
}

/* A fault on a worker that no request reaches never fires: the run says which one. */
static void test_a_fault_no_request_reaches_is_reported_unexercised(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s) return;
  pd_scenario_defaults(s);
  pd_scenario_set_workers(s, 1, 2); /* round robin: the one request goes to d0 */
  s->workers[2].faults[0] = (pd_fault_t){PD_FAULT_STATUS, 503, 0, 0, 0, 0, 1.0};
  s->workers[2].n_faults = 1;
  s->workers[1].crash_at_ms = 100000; /* long after the request: hits nothing */
  pd_world_stats_t st;
  uint32_t v = 0;
  PDT_EQ_INT(pd_world_run(s, PD_MODE_REFERENCE, 1, NULL, &st, &v, NULL), 0);
  PDT_EQ_U64(st.faults_total, 2);
  PDT_EQ_U64(st.faults_exercised, 0);
  PDT_EQ_U64(st.requests_served, 1);
  PDT_EQ_STR(st.unexercised, "d0 crash_at_ms"); /* the first of the two, in worker order */
  s->workers[2].faults[0].nth_from = 0;
  s->workers[1].crash_at_ms = 0;
  s->workers[1].faults[0] = s->workers[2].faults[0]; /* now on d0, which the request reaches */
  s->workers[1].n_faults = 1;
  s->workers[2].n_faults = 0;
  PDT_EQ_INT(pd_world_run(s, PD_MODE_REFERENCE, 1, NULL, &st, &v, NULL), 0);
  PDT_EQ_U64(st.faults_exercised, 1);
  PDT_EQ_U64(st.faults_total, 1);
  /* chosen but never acting: a mid-stream fault after 5 events on a 2-token request */
  s->workers[1].faults[0] = (pd_fault_t){PD_FAULT_SSE_ERROR, 0, 5, 0, 0, 0, 1.0};
  s->workload.tokens = 2;
  PDT_EQ_INT(pd_world_run(s, PD_MODE_REFERENCE, 1, NULL, &st, &v, NULL), 0);
  PDT_EQ_U64(st.faults_exercised, 0);
  PDT_EQ_STR(st.unexercised, "d0 faults[0] sse_error");
  /* a traffic fault for a request that never comes: the top-level entry is unexercised */
  s->workers[1].n_faults = 0;
  s->tfaults[0].f = (pd_fault_t){PD_FAULT_STATUS, 503, 0, 0, 1, 1, 1.0};
  s->tfaults[0].role = PD_ROLE_DECODE;
  s->tfaults[0].request = 5;
  s->n_tfaults = 1;
  PDT_EQ_INT(pd_world_run(s, PD_MODE_REFERENCE, 1, NULL, &st, &v, NULL), 0);
  PDT_EQ_U64(st.faults_total, 1);
  PDT_EQ_U64(st.faults_exercised, 0);
  PDT_EQ_STR(st.unexercised, "faults[0] status (decode)");
  s->tfaults[0].request = 0; /* request 0's first decode leg: it fires */
  PDT_EQ_INT(pd_world_run(s, PD_MODE_REFERENCE, 1, NULL, &st, &v, NULL), 0);
  PDT_EQ_U64(st.faults_exercised, 1);
  free(s);
}

/* joined gives a hung decode 30 minutes per attempt (R4.1): three attempts outlast the safety
 * horizon. The request is judged there (I1) and runs on into the healed phase, where it ends:
 * nothing is left held, so no I17. */
static void test_a_request_outliving_the_horizon_ends_in_the_healed_phase(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s) return;
  pd_scenario_defaults(s);
  s->config.max_attempts = 3;
  s->config.bootstrap_timeout_ms = s->config.waiting_timeout_ms = 1000;
  s->workers[1].faults[0] = (pd_fault_t){PD_FAULT_HANG_BEFORE_HEAD, 0, 0, 0, 0, 0, 1.0};
  s->workers[1].n_faults = 1;
  s->workload.tokens = 1;
  pd_world_stats_t st;
  uint32_t v = 0;
  PDT_EQ_INT(pd_world_run(s, PD_MODE_JOINED, 13, NULL, &st, &v, NULL), 0);
  PDT_EQ_U64(v, BIT_I(PD_INVARIANT_TERMINATION));
  PDT_EQ_U64(st.requests_done, 1);
  free(s);
}

/* Read a whole stream (a trace file) into a string; NULL on failure. */
static char *slurp(FILE *f) {
  long n = ftell(f);
  char *t = n > 0 ? malloc((size_t)n + 1) : NULL;
  if (!t) return NULL;
  rewind(f);
  size_t got = fread(t, 1, (size_t)n, f);
  t[got] = 0;
  return t;
}

/* G18 in the trace: a batch leg's span lists every room, not just the first. */
static void test_the_trace_lists_every_room_of_a_batch(void) {
  pd_scenario_t *s = pdt_load_scenario("batch-generate-text-array");
  PDT_TRUE(s != NULL);
  if (!s) return;
  FILE *f = tmpfile();
  uint32_t v = 0;
  pd_world_stats_t st;
  PDT_EQ_INT(pd_world_run(s, PD_MODE_REFERENCE, 1, f, &st, &v, NULL), 0);
  char *t = f ? slurp(f) : NULL;
  cJSON *j = t ? cJSON_Parse(t) : NULL;
  int legs = 0;
  for (const cJSON *e = j ? j->child : NULL; e; e = e->next) {
    const cJSON *rooms = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), "rooms");
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
    if (!cJSON_IsNumber(pid) || pid->valuedouble != PD_TRACE_GATEWAY || !cJSON_IsString(ph) ||
        strcmp(ph->valuestring, "X") != 0)
      continue; /* the gateway legs' spans only */
    legs++;
    PDT_EQ_INT(cJSON_GetArraySize(rooms), 4);
    const char *r0 = cJSON_GetStringValue(cJSON_GetArrayItem(rooms, 0)); /* ids are strings */
    const char *r3 = cJSON_GetStringValue(cJSON_GetArrayItem(rooms, 3));
    PDT_TRUE(r0 && r3 && strcmp(r0, r3) != 0);
  }
  PDT_EQ_INT(legs, 2); /* the prefill leg and the decode leg */
  cJSON_Delete(j);
  free(t);
  if (f) fclose(f);
  free(s);
}

int pdt_suite_sim(void) {
  static const pdt_case_t cases[] = {
      {"every scenario file meets its expectation in every mode", test_every_scenario_meets_its_expectation},
      {"same seed same trace hash; another seed another", test_same_seed_same_trace_different_seed_different_rooms},
      {"a trace file run hashes like a hash-only run", test_trace_file_hash_equals_hash_only_run},
      {"a request outliving the horizon ends in the healed phase: I1, not I17",
       test_a_request_outliving_the_horizon_ends_in_the_healed_phase},
      {"the trace lists every room of a batch", test_the_trace_lists_every_room_of_a_batch},
      {"a fault no request reaches is reported unexercised",
       test_a_fault_no_request_reaches_is_reported_unexercised},
      {"a batch of 5 sends 5 prompts on /generate and /v1/completions",
       test_a_batch_of_5_sends_5_prompts_on_generate_and_completions},
      {"reference holds every invariant under 10,000 faulty concurrent requests",
       test_reference_holds_every_invariant_under_10000_faulty_requests},
  };
  return PDT_SUITE("sim", cases);
}
