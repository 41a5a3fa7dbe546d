/* pdt_judge: a hand-made served request for the checker's tests (test_capacity_check.c,
 * test_check_sf.c, test_late_pins.c): a non-stream request of 3 tokens that ended cleanly at
 * 200 ms, its prefill (p0) and decode (d0) legs done and closed by 190 ms, each having held 8
 * KV pages freed at 150 ms; each test then changes what it is about. Header-only. */
#ifndef PDT_JUDGE_H
#define PDT_JUDGE_H
#include <stdlib.h>

#include "pd_check.h"
#include "pdt.h"

#define PDT_JUDGE_MS 1000000ull

typedef struct pdt_judged {
  pd_scenario_t s; /* defaults: grace 1000 ms */
  pd_judge_t j;
  pd_world_stats_t st;
  pd_client_request_t rq;
  pd_worker_leg_t leg[2]; /* prefill p0, decode d0 */
} pdt_judged_t;

/* The served request, judged under mode at judged_ms (calloc'd: free() it after
 * pdt_judge). NULL when out of memory. */
static inline pdt_judged_t *pdt_served(pd_mode_t mode, int is_outcome_blind, uint64_t judged_ms) {
  pdt_judged_t *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  pd_scenario_defaults(&k->s);
  k->j = (pd_judge_t){.s = &k->s, .mode = mode, .is_outcome_blind = is_outcome_blind,
                      .max_attempts = 1, .now = judged_ms * PDT_JUDGE_MS, .stats = &k->st};
  pd_client_request_t *r = &k->rq;
  static const char body[] = "{\"text\":\"ok\",\"meta_info\":{\"completion_tokens\":3}}";
  pd_buf_init(&r->body, 1024);
  (void)pd_buf_append(NULL, &r->body, body, sizeof body - 1);
  r->tokens = 3;
  r->ended = r->core_done = 1;
  r->head_status = 200;
  r->t_end = 200 * PDT_JUDGE_MS;
  r->attempts = 1;
  for (uint32_t i = 0; i < 2; i++) {
    pd_worker_leg_t *l = &k->leg[i];
    l->attempt = 1;
    l->role = i ? PD_ROLE_DECODE : PD_ROLE_PREFILL;
    l->worker = i;
    l->truth = PD_TRUTH_OK;
    l->wstate = PD_WORKER_LEG_DONE;
    l->fault = l->tfault = -1;
    l->t_gw_closed = 190 * PDT_JUDGE_MS;
    l->kv_pages_max = 8;
    l->t_kv_freed = 150 * PDT_JUDGE_MS;
    l->next_in_req = i ? NULL : &k->leg[1];
  }
  r->legs = &k->leg[0];
  r->n_legs = 2;
  return k;
}

/* Judge it (once: the body is freed); the violated mask, the first reason in reason. */
static inline uint32_t pdt_judge(pdt_judged_t *k, char *reason, size_t cap) {
  uint32_t v = pd_check_request(&k->j, &k->rq, reason, cap);
  pd_buf_free(NULL, &k->rq.body);
  return v;
}

#endif
