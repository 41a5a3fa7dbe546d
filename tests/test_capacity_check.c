/* I18 (docs/spec.md): KV pages a leg holds after its request's end beyond the grace, judged
 * by the checker from hand-made legs (the KV fields the simulator's worker engine fills:
 * kv_pages, kv_pages_max, t_kv_freed). */
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pdt.h"
#include "pdt_judge.h"

#define MS 1000000ull
#define I18 (1u << (PD_INVARIANT_STRANDED_KV - 1))

typedef pdt_judged_t kv_case_t;

/* The served request (pdt_judge.h), judged under joined at 5 s. */
static kv_case_t *served(void) { return pdt_served(PD_MODE_JOINED, 0, 5000); }

static uint32_t judge(kv_case_t *k, char *reason, size_t cap) { return pdt_judge(k, reason, cap); }

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
  PDT_EQ_INT(pd_invariant_parse("I99"), 0);
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
