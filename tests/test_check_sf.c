/* I19 (docs/spec.md): a decode leg served in full from KV read off blocks its prefill had
 * already freed (V1.15), judged by the checker from hand-made legs (kv_from, the field the
 * simulator's worker engine fills with PD_WACT_KV_FROM). */
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pd_wengine.h"
#include "pdt.h"
#include "pdt_judge.h"

#define MS 1000000ull
#define I19 (1u << (PD_INVARIANT_FREED_BLOCKS - 1))

typedef pdt_judged_t sf_case_t;

/* The served request (pdt_judge.h), judged under the reference at 300 ms, outcome-blind;
 * its decode read the pinned blocks. */
static sf_case_t *served(void) {
  sf_case_t *k = pdt_served(PD_MODE_REFERENCE, 1, 300);
  if (k) k->leg[1].kv_from = PD_WENGINE_KV_FROM_READ;
  return k;
}

static uint32_t judge(sf_case_t *k, char *reason, size_t cap) { return pdt_judge(k, reason, cap); }

/* The decode read freed blocks and answered in full: I19, even though the client's answer
 * looks clean (nothing else can tell). */
static void test_a_decode_served_from_freed_blocks_is_i19(void) {
  char reason[200];
  sf_case_t *k = served();
  if (!k) return;
  PDT_EQ_U64(judge(k, reason, sizeof reason), 0); /* read from pinned blocks */
  PDT_EQ_STR(reason, "");
  free(k);

  k = served();
  if (!k) return;
  k->leg[1].kv_from = PD_WENGINE_KV_FROM_STALE;
  PDT_EQ_U64(judge(k, reason, sizeof reason), I19);
  PDT_EQ_STR(reason, "I19 decode on d0 answered in full from KV read off freed blocks (attempt 1)");
  PDT_EQ_U64(k->st.clean_success, 1); /* the client cannot tell */
  free(k);
}

/* Computed locally (params missing or invalid, V1.6, V1.8), a stale read that then failed,
 * or a leg with no kv_from (a socket run's record, an SGLang worker): not I19. */
static void test_only_a_stale_read_answered_in_full_is_i19(void) {
  char reason[200];
  static const int froms[] = {PD_WENGINE_KV_FROM_LOCAL, 0};
  for (size_t i = 0; i < sizeof froms / sizeof froms[0]; i++) {
    sf_case_t *k = served();
    if (!k) return;
    k->leg[1].kv_from = froms[i];
    PDT_EQ_U64(judge(k, reason, sizeof reason), 0);
    free(k);
  }
  sf_case_t *k = served();
  if (!k) return;
  k->leg[1].kv_from = PD_WENGINE_KV_FROM_STALE;
  k->leg[1].truth = PD_TRUTH_FAILED; /* it read stale blocks, then failed */
  k->rq.head_status = 500;
  PDT_EQ_U64(judge(k, reason, sizeof reason) & I19, 0);
  free(k);
}

static void test_i19_is_named(void) {
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_FREED_BLOCKS), "freed-blocks");
  PDT_EQ_INT(pd_invariant_parse("I19"), PD_INVARIANT_FREED_BLOCKS);
  PDT_EQ_INT(PD_INVARIANT_COUNT, PD_INVARIANT_RECOVERY); /* the last one (I26) */
}

int pdt_suite_check_sf(void) {
  static const pdt_case_t cases[] = {
      {"I19: a decode served from freed blocks", test_a_decode_served_from_freed_blocks_is_i19},
      {"I19: only a stale read answered in full", test_only_a_stale_read_answered_in_full_is_i19},
      {"I19 has a name and an ID", test_i19_is_named},
  };
  return PDT_SUITE("check_sf", cases);
}
