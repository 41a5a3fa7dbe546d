/* I18 (docs/spec.md): KV pages a leg holds after its request's end beyond the grace, judged
 * by the checker from hand-made legs (the KV fields the simulator's worker engine fills:
 * kv_pages, kv_pages_max, t_kv_freed). */
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pdt.h"

#define MS 1000000ull
#define I18 (1u << (PD_INVARIANT_STRANDED_KV - 1))

typedef struct kv_case {
  pd_scenario_t s;
  pd_judge_t j;
  pd_world_stats_t st;
  pd_client_request_t rq;
  pd_worker_leg_t leg[2]; /* prefill p0, decode d0 */
} kv_case_t;

/* A non-stream request of 3 tokens that ended cleanly at 200 ms, both legs done and closed
 * by 190 ms, judged at 5 s; each leg held 8 KV pages and freed them at 150 ms. */
static kv_case_t *served(void) {
  kv_case_t *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  pd_scenario_defaults(&k->s); /* grace 1000 ms */
  k->j = (pd_judge_t){.s = &k->s, .mode = PD_MODE_JOINED, .max_attempts = 1, .now = 5000 * MS,
                      .stats = &k->st};
  pd_client_request_t *r = &k->rq;
  static const char body[] = "{\"text\":\"ok\",\"meta_info\":{\"completion_tokens\":3}}";
  pd_buf_init(&r->body, 1024);
  (void)pd_buf_append(NULL, &r->body, body, sizeof body - 1);
  r->tokens = 3;
  r->ended = r->core_done = 1;
  r->head_status = 200;
  r->t_end = 200 * MS;
  r->attempts = 1;
  for (uint32_t i = 0; i < 2; i++) {
    pd_worker_leg_t *l = &k->leg[i];
    l->attempt = 1;
    l->role = i ? PD_ROLE_DECODE : PD_ROLE_PREFILL;
    l->worker = i;
    l->truth = PD_TRUTH_OK;
    l->wstate = PD_WORKER_LEG_DONE;
    l->fault = l->tfault = -1;
    l->t_gw_closed = 190 * MS;
    l->kv_pages_max = 8;
    l->t_kv_freed = 150 * MS;
    l->next_in_req = i ? NULL : &k->leg[1];
  }
  r->legs = &k->leg[0];
  r->n_legs = 2;
  return k;
}

static uint32_t judge(kv_case_t *k, char *reason, size_t cap) {
  uint32_t v = pd_check_request(&k->j, &k->rq, reason, cap);
  pd_buf_free(NULL, &k->rq.body);
  return v;
}

static void test_kv_held_past_the_grace_is_i18(void) {
  char reason[200];
  kv_case_t *k = served();
  if (!k) return;
  PDT_EQ_U64(judge(k, reason, sizeof reason), 0); /* freed before the end */
  free(k);

  k = served(); /* freed exactly at t_end + grace: still in time */
  if (!k) return;
  k->leg[1].t_kv_freed = 1200 * MS;
  PDT_EQ_U64(judge(k, reason, sizeof reason), 0);
  free(k);

  k = served(); /* freed 1 ns late */
  if (!k) return;
  k->leg[1].t_kv_freed = 1200 * MS + 1;
  PDT_EQ_U64(judge(k, reason, sizeof reason), I18);
  PDT_EQ_STR(reason, "I18 8 KV pages of a decode leg on d0 held 1000.0 ms after the client's end");
  free(k);

  k = served(); /* still held when judged: measured to now */
  if (!k) return;
  k->leg[0].kv_pages = 5;
  k->leg[0].t_kv_freed = 0;
  PDT_EQ_U64(judge(k, reason, sizeof reason), I18);
  PDT_EQ_STR(reason, "I18 5 KV pages of a prefill leg on p0 still held when judged 4800.0 ms "
                     "after the client's end");
  free(k);

  k = served(); /* taken again after a free, and still held: judged on what it holds now */
  if (!k) return;
  k->leg[1].kv_pages = 2;
  PDT_EQ_U64(judge(k, reason, sizeof reason), I18);
  free(k);
}

/* A leg that never held a page is not judged, whatever its KV times say (a record from a
 * socket run's logs, a worker without capacity). */
static void test_a_leg_that_held_no_kv_is_not_judged(void) {
  char reason[200];
  kv_case_t *k = served();
  if (!k) return;
  for (int i = 0; i < 2; i++) {
    k->leg[i].kv_pages_max = 0;
    k->leg[i].t_kv_freed = 90000 * MS;
  }
  PDT_EQ_U64(judge(k, reason, sizeof reason), 0);
  PDT_EQ_STR(reason, "");
  free(k);
}

/* A request cut off by the horizon has no end to measure from: I1 only. */
static void test_i18_needs_an_end(void) {
  char reason[200];
  kv_case_t *k = served();
  if (!k) return;
  k->rq.ended = 0;
  k->leg[0].kv_pages = 4;
  k->j.now = 200000 * MS;
  PDT_EQ_U64(judge(k, reason, sizeof reason), 1u << (PD_INVARIANT_TERMINATION - 1));
  free(k);
}

static void test_i18_is_named(void) {
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_STRANDED_KV), "stranded-kv");
  PDT_EQ_INT(pd_invariant_parse("I18"), PD_INVARIANT_STRANDED_KV);
  PDT_EQ_INT(pd_invariant_parse("I20"), 0);
}

int pdt_suite_capacity_check(void) {
  static const pdt_case_t cases[] = {
      {"I18: KV held past the grace", test_kv_held_past_the_grace_is_i18},
      {"I18: a leg that held no KV is not judged", test_a_leg_that_held_no_kv_is_not_judged},
      {"I18: a request without an end is judged on I1 only", test_i18_needs_an_end},
      {"I18 has a name and an ID", test_i18_is_named},
  };
  return PDT_SUITE("capacity_check", cases);
}
