/* The prompt's length on the wire (docs/capacity.md): each request's length from the workload
 * and the seed (pd_scenario_prompt_tokens), the client's body padded to it
 * (pd_world_client_body, byte-identical to the short bodies when 0), and the worker's count
 * of it from the body it receives (pd_worker_body_read), through a simulated run too. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_scenario.h"
#include "pd_worker_body.h"
#include "pd_world.h"
#include "pdt.h"

static void test_prompt_length_is_a_pure_hash_of_seed_and_index(void) {
  pd_scenario_workload_t wl;
  memset(&wl, 0, sizeof wl);
  PDT_EQ_U64(pd_scenario_prompt_tokens(&wl, 1, 0), 0); /* the short default prompt */
  wl.prompt_tokens = 300;
  PDT_EQ_U64(pd_scenario_prompt_tokens(&wl, 1, 7), 300);
  wl.prompt_tokens_max = 300; /* equal: fixed */
  PDT_EQ_U64(pd_scenario_prompt_tokens(&wl, 9, 7), 300);
  wl.prompt_tokens = 10;
  wl.prompt_tokens_max = 13;
  uint32_t seen[4] = {0}, differ = 0;
  for (uint64_t i = 0; i < 400; i++) {
    uint32_t n = pd_scenario_prompt_tokens(&wl, 42, i);
    PDT_TRUE(n >= 10 && n <= 13);
    if (n >= 10 && n <= 13) seen[n - 10]++;
    PDT_EQ_U64(pd_scenario_prompt_tokens(&wl, 42, i), n); /* pure */
    differ += pd_scenario_prompt_tokens(&wl, 43, i) != n;
  }
  for (int k = 0; k < 4; k++) PDT_TRUE(seen[k] > 60); /* both ends included, ~100 each */
  PDT_TRUE(differ > 200);                              /* another seed, other lengths */
}

static size_t body(pd_route_t route, uint32_t batch, uint32_t prompt, const char *tag,
                   char *buf, size_t cap) {
  pd_scenario_workload_t wl;
  memset(&wl, 0, sizeof wl);
  wl.route = route;
  wl.batch = batch;
  pd_client_request_t rq;
  memset(&rq, 0, sizeof rq);
  rq.tokens = 4;
  rq.is_stream = 1;
  rq.prompt_tokens = prompt;
  return pd_world_client_body(&rq, &wl, tag, buf, cap);
}

/* prompt_tokens 0: exactly the bodies the client sent before prompts had a length. */
static void test_short_bodies_are_unchanged(void) {
  char b[1024];
  PDT_TRUE(body(PD_ROUTE_GENERATE, 0, 0, NULL, b, sizeof b) > 0);
  PDT_EQ_STR(b, "{\"text\":\"hello\",\"stream\":true,\"return_logprob\":false,"
                "\"sampling_params\":{\"max_new_tokens\":4}}");
  PDT_TRUE(body(PD_ROUTE_GENERATE, 2, 0, "x-1", b, sizeof b) > 0);
  PDT_EQ_STR(b, "{\"text\":[\"x-1 p0\",\"x-1 p1\"],\"stream\":true,\"return_logprob\":false,"
                "\"sampling_params\":{\"max_new_tokens\":4}}");
  PDT_TRUE(body(PD_ROUTE_COMPLETIONS, 0, 0, "x-1", b, sizeof b) > 0);
  PDT_EQ_STR(b, "{\"model\":\"m\",\"prompt\":\"x-1 hello\",\"max_tokens\":4,\"stream\":true}");
  PDT_TRUE(body(PD_ROUTE_COMPLETIONS, 2, 0, NULL, b, sizeof b) > 0);
  PDT_EQ_STR(b, "{\"model\":\"m\",\"prompt\":[\"p0\",\"p1\"],\"max_tokens\":4,\"stream\":true}");
  PDT_TRUE(body(PD_ROUTE_CHAT, 0, 0, NULL, b, sizeof b) > 0);
  PDT_EQ_STR(b, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                "\"max_tokens\":4,\"stream\":true,\"logprobs\":false,\"n\":1}");
  PDT_EQ_U64(body(PD_ROUTE_GENERATE, 0, 0, NULL, b, 20), 0); /* no room: 0, never cut */
  PDT_EQ_U64(body(PD_ROUTE_GENERATE, 0, 500, NULL, b, 600), 0);
}

static uint32_t worker_count(const char *text, size_t len) {
  cJSON *j = cJSON_ParseWithLength(text, len);
  pd_worker_body_t b;
  PDT_TRUE(j != NULL);
  (void)pd_worker_body_read(&b, j, text, len, NULL, NULL, 0);
  cJSON_Delete(j);
  free(b.rooms);
  return b.prompt_tokens;
}

/* What the client renders, the worker counts: per prompt, times the batch's prompts. */
static void test_worker_counts_the_rendered_prompt(void) {
  static const pd_route_t routes[] = {PD_ROUTE_GENERATE, PD_ROUTE_COMPLETIONS, PD_ROUTE_CHAT};
  static const char *const tags[] = {NULL, "pdconf-abc-1"};
  for (size_t r = 0; r < 3; r++)
    for (size_t t = 0; t < 2; t++)
      for (uint32_t batch = 0; batch <= 3; batch += 3) {
        pd_scenario_workload_t wl = {.batch = batch};
        size_t cap = pd_world_client_body_cap(&wl, 700, tags[t] ? strlen(tags[t]) : 0);
        char *b = malloc(cap);
        if (!b) return;
        size_t n = body(routes[r], batch, 700, tags[t], b, cap);
        PDT_TRUE(n > 1400);
        uint32_t prompts = routes[r] != PD_ROUTE_CHAT && batch ? batch : 1;
        PDT_EQ_U64(worker_count(b, n), 700u * prompts);
        n = body(routes[r], batch, 0, tags[t], b, cap); /* the short prompt: 1 word, or 2 */
        PDT_EQ_U64(worker_count(b, n), (tags[t] ? 2u : 1u) * prompts);
        free(b);
      }
}

static void test_worker_reads_every_prompt_shape(void) {
#define COUNT(lit) worker_count(lit, sizeof lit - 1)
  PDT_EQ_U64(COUNT("{\"text\":\"  a  bb\\tc\\n\"}"), 3);
  PDT_EQ_U64(COUNT("{\"text\":[\"a b\",\"c\"]}"), 3);
  PDT_EQ_U64(COUNT("{\"input_ids\":[1,2,3,4]}"), 4);
  PDT_EQ_U64(COUNT("{\"input_ids\":[[1,2],[3]]}"), 3);
  PDT_EQ_U64(COUNT("{\"prompt\":[\"a b\",\"c d e\"]}"), 5);
  PDT_EQ_U64(COUNT("{\"prompt\":[5,6,7]}"), 3);
  PDT_EQ_U64(COUNT("{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                   "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x y z\"}]}]}"),
             5);
  PDT_EQ_U64(COUNT("{\"text\":\"\"}"), 1); /* at least 1 */
  PDT_EQ_U64(COUNT("{\"stream\":true}"), 1);
#undef COUNT
}

typedef struct legs_seen {
  uint32_t n, bad;
  uint32_t lo, hi;
} legs_seen_t;

static void on_leg(void *ud, const pd_worker_leg_t *leg, const char *worker) {
  legs_seen_t *s = ud;
  (void)worker;
  s->n++;
  s->bad += leg->prompt_tokens < s->lo || leg->prompt_tokens > s->hi;
}

/* In a run, every leg carries its request's length as its worker read it from the body. */
static void test_a_run_gives_each_leg_its_prompt_length(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s) return;
  pd_scenario_defaults(s);
  s->workload.requests = 20;
  s->workload.interval_ms = 5;
  s->workload.prompt_tokens = 200;
  s->workload.prompt_tokens_max = 260;
  legs_seen_t seen = {0, 0, 200, 260};
  pd_world_stats_t st;
  uint32_t v = 1;
  PDT_EQ_INT(pd_world_run_legs(s, PD_MODE_REFERENCE, 3, NULL, on_leg, &seen, &st, &v, NULL), 0);
  PDT_EQ_U64(v, 0);
  PDT_EQ_U64(st.clean_success, 20);
  PDT_EQ_U64(seen.n, 40);
  PDT_EQ_U64(seen.bad, 0);
  free(s);
}

int pdt_suite_capacity_prompt(void) {
  static const pdt_case_t cases[] = {
      {"a prompt length is a pure hash of seed and index",
       test_prompt_length_is_a_pure_hash_of_seed_and_index},
      {"short bodies are byte-identical", test_short_bodies_are_unchanged},
      {"the worker counts the rendered prompt", test_worker_counts_the_rendered_prompt},
      {"the worker reads every prompt shape", test_worker_reads_every_prompt_shape},
      {"a run gives each leg its prompt length", test_a_run_gives_each_leg_its_prompt_length},
  };
  return PDT_SUITE("capacity_prompt", cases);
}
