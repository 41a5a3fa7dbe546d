/* I19 (docs/spec.md): a decode leg served in full from KV read off blocks its prefill had
 * already freed (V1.15), judged by the checker from hand-made legs (kv_from, the field the
 * simulator's worker engine fills with PD_WACT_KV_FROM). */
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pd_wengine.h"
#include "pdt.h"

#define MS 1000000ull
#define I19 (1u << (PD_INVARIANT_FREED_BLOCKS - 1))

typedef struct sf_case {
  pd_scenario_t s;
  pd_judge_t j;
  pd_world_stats_t st;
  pd_client_request_t rq;
  pd_worker_leg_t leg[2]; /* prefill p0, decode d0 */
} sf_case_t;

/* A source-first non-stream request of 3 tokens that ended cleanly at 200 ms: prefill
 * answered (its pin freed by decode's read at 150 ms), decode read the pinned blocks and
 * answered in full; both legs closed by 190 ms, judged at 300 ms. */
static sf_case_t *served(void) {
  sf_case_t *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  pd_scenario_defaults(&k->s);
  k->j = (pd_judge_t){.s = &k->s, .mode = PD_MODE_REFERENCE, .is_outcome_blind = 1,
                      .max_attempts = 1, .now = 300 * MS, .stats = &k->st};
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
  k->leg[1].kv_from = PD_WENGINE_KV_FROM_READ;
  r->legs = &k->leg[0];
  r->n_legs = 2;
  return k;
}

static uint32_t judge(sf_case_t *k, char *reason, size_t cap) {
  uint32_t v = pd_check_request(&k->j, &k->rq, reason, cap);
  pd_buf_free(NULL, &k->rq.body);
  return v;
}

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
  PDT_EQ_INT(PD_INVARIANT_COUNT, 19);
}

int pdt_suite_check_sf(void) {
  static const pdt_case_t cases[] = {
      {"I19: a decode served from freed blocks", test_a_decode_served_from_freed_blocks_is_i19},
      {"I19: only a stale read answered in full", test_only_a_stale_read_answered_in_full_is_i19},
      {"I19 has a name and an ID", test_i19_is_named},
  };
  return PDT_SUITE("check_sf", cases);
}
