/* pdt_check: the hand-built record the checker tests share: one streaming request of
 * 2 tokens on (p0, d0) that went perfectly, and a judge over it. Header-only (static inline);
 * used by tests/test_check.c and tests/test_mutant_kills_chk.c. */
#ifndef PDT_CHECK_H
#define PDT_CHECK_H
#include <stdlib.h>

#include "pd_check.h"
#include "pd_world_int.h" /* the I17 quiescence check reads a world */

#define MS 1000000ull
#define BIT(i) (1u << ((i) - 1))

typedef struct fixture {
  pd_scenario_t s;
  pd_judge_t j;
  struct pd_world w; /* I17 only */
  pd_world_stats_t st;
  pd_client_request_t rq;
  pd_worker_leg_t p, d;
} fixture_t;

/* One streaming request of 2 tokens on (p0, d0) that went perfectly, judged at t = 1 s. */
static inline fixture_t *clean(void) {
  fixture_t *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  pd_scenario_defaults(&f->s);
  f->j = (pd_judge_t){.s = &f->s, .mode = PD_MODE_REFERENCE, .max_attempts = 5,
                      .now = 1000 * MS, .stats = &f->st};
  pd_client_request_t *r = &f->rq;
  r->is_stream = 1;
  r->tokens = 2;
  r->next_token = 2;
  r->ended = 1;
  r->t_end = 100 * MS;
  r->head_status = 200;
  r->is_sse_head = 1;
  r->saw_done = 1;
  r->core_done = 1;
  r->attempts = 1;
  pd_worker_leg_t *legs[2] = {&f->p, &f->d};
  for (int i = 0; i < 2; i++) {
    pd_worker_leg_t *l = legs[i];
    l->leg_id = (uint64_t)i + 1;
    l->attempt = 1;
    l->role = i ? PD_ROLE_DECODE : PD_ROLE_PREFILL;
    l->worker = (uint32_t)i; /* defaults: p0 then d0 */
    l->room = 42;
    l->rooms_hash = 4242;
    l->n_rooms = 1;
    l->truth = PD_TRUTH_OK;
    l->wstate = PD_WORKER_LEG_DONE;
    l->slot_taken = 1;
    l->t_slot_taken = 1 * MS;
    l->t_slot_freed = 90 * MS;
    l->t_open = 1 * MS;
    l->t_gw_closed = 95 * MS;
    l->outcomes = 1;
    l->outcome = PD_OUTCOME_SUCCESS;
    l->fault = -1;
  }
  f->p.next_in_req = &f->d;
  r->legs = &f->p;
  r->n_legs = 2;
  r->load_w[0][0] = 1;
  r->load_w[1][0] = 1;
  r->load_t_rel[0][0] = 95 * MS;
  r->load_t_rel[1][0] = 95 * MS;
  return f;
}

static inline uint32_t judge(fixture_t *f) {
  char reason[160];
  return pd_check_request(&f->j, &f->rq, reason, sizeof reason);
}

#endif
