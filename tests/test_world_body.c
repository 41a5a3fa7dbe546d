/* The simulator's worker reads a leg body once per distinct bytes (sim/pd_world_loop.c,
 * read_body): prefill and decode of an attempt share their body, so the second takes the
 * first's reading. Each leg must still own its own room array with the same rooms, and a
 * reading must never be taken for another request's body (a rid names one attempt). */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pd_worker_body.h"
#include "pd_world.h"
#include "pdt.h"
#include "pdt_net.h"

#define MAX_LEGS 256

typedef struct {
  pd_worker_leg_t legs[MAX_LEGS];
  uint64_t rooms[MAX_LEGS][4];
  const uint64_t *ptr[MAX_LEGS];
  size_t n;
} seen_t;

static void on_leg(void *ud, const pd_worker_leg_t *leg, const char *worker) {
  (void)worker;
  seen_t *s = ud;
  if (s->n >= MAX_LEGS) return;
  s->legs[s->n] = *leg;
  s->ptr[s->n] = leg->rooms;
  for (int i = 0; i < leg->n_rooms && i < 4 && leg->rooms; i++) s->rooms[s->n][i] = leg->rooms[i];
  s->n++;
}

static void run(const char *name, seen_t *s) {
  pd_scenario_t *sc = pdt_load_scenario(name);
  PDT_TRUE(sc != NULL);
  if (!sc) return;
  pd_world_stats_t st;
  uint32_t viol = 0;
  pd_world_opts_t wo = {NULL, NULL, NULL, 0, 0, NULL};
  PDT_EQ_INT(pd_world_run_legs(sc, PD_MODE_REFERENCE, sc->config.seed, &wo, on_leg, s, &st,
                               &viol, NULL),
             0);
  free(sc);
}

static void t_legs_sharing_a_body_read_it_alike_and_own_their_rooms(void) {
  static seen_t s;
  memset(&s, 0, sizeof s);
  run("batch-generate-text-array", &s);
  unsigned pairs = 0;
  for (size_t i = 0; i < s.n; i++)
    for (size_t j = i + 1; j < s.n; j++) {
      const pd_worker_leg_t *a = &s.legs[i], *b = &s.legs[j];
      if (strcmp(a->rid, b->rid) != 0) continue;
      PDT_EQ_U64(a->req_id, b->req_id); /* a rid is one attempt's: never a stale reading */
      PDT_EQ_INT(a->n_rooms, b->n_rooms);
      PDT_EQ_U64(a->room, b->room);
      PDT_EQ_U64(a->rooms_hash, b->rooms_hash);
      if (a->n_rooms > 1) {
        PDT_TRUE(s.ptr[i] && s.ptr[j] && s.ptr[i] != s.ptr[j]); /* each owns its copy */
        PDT_TRUE(memcmp(s.rooms[i], s.rooms[j], sizeof s.rooms[i]) == 0);
        pairs++;
      }
    }
  PDT_TRUE(pairs > 0);
}

static pd_worker_body_t body_of(const char *text) {
  cJSON *j = cJSON_Parse(text);
  pd_worker_body_t b;
  (void)pd_worker_body_read(&b, j, text, strlen(text), NULL, NULL, 0);
  cJSON_Delete(j);
  free(b.rooms);
  return b;
}

/* The reader finds its members in one pass; each is the first of its name, as
 * cJSON_GetObjectItemCaseSensitive would find it, and a body that is no object has none. */
static void t_the_body_reader_takes_each_members_first_occurrence(void) {
  pd_worker_body_t b = body_of(
      "{\"stream\":false,\"rid\":\"a\",\"stream\":true,\"rid\":\"b\",\"text\":\"x y\","
      "\"text\":\"1 2 3 4\",\"model\":\"m1\",\"model\":\"m2\",\"max_tokens\":5,"
      "\"max_tokens\":9,\"bootstrap_port\":7,\"bootstrap_port\":8,\"logprobs\":null,\"logprobs\":true}");
  PDT_EQ_INT(b.is_stream, 0);
  PDT_EQ_STR(b.rid, "a");
  PDT_EQ_U64(b.prompt_tokens, 2);
  PDT_EQ_STR(b.api.model, "m1");
  PDT_EQ_U64(b.max_tokens, 5);
  PDT_EQ_INT(b.boot_port, 7);
  PDT_EQ_INT(b.has_logprob, 0);
  b = body_of("[{\"stream\":true},\"rid\"]");
  PDT_EQ_INT(b.is_stream, 0);
  PDT_EQ_INT(b.has_rid, 0);
  b = body_of("{\"input_ids\":[1,2,3],\"stream\":true,\"return_logprob\":true,\"rid\":\"r\"}");
  PDT_EQ_INT(b.is_stream, 1);
  PDT_EQ_INT(b.has_logprob, 1);
  PDT_EQ_U64(b.prompt_tokens, 3);
}

int pdt_suite_world_body(void) {
  static const pdt_case_t cases[] = {
      {"legs sharing a body read it alike and own their rooms",
       t_legs_sharing_a_body_read_it_alike_and_own_their_rooms},
      {"the body reader takes each member's first occurrence",
       t_the_body_reader_takes_each_members_first_occurrence},
  };
  return PDT_SUITE("world_body", cases);
}
