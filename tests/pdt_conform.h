/* A socket run's judge wired by hand, as the conform runner wires it, for tests that feed it
 * the legs the mocks would have logged (test_conform_judge.c, test_conform_sf.c). No process
 * starts. */
#ifndef PDT_CONFORM_H
#define PDT_CONFORM_H
#include <stdlib.h>
#include <string.h>

#include "pd_conform.h"
#include "pd_conform_int.h"
#include "pd_sse.h"
#include "pdt_net.h"

#define PDT_MS_NS 1000000ull

/* The part every such fixture has: the library scenario, its scaled copy (grace 100 ms), the
 * mode's options and result, and the runner over the caller's requests and leg log. */
typedef struct pdt_cfx {
  pd_scenario_t *s, ss;
  pd_conform_opts_t o;
  pd_conform_result_t r;
  pd_conform_runner_t run;
} pdt_cfx_t;

/* Wire c for n streaming requests of 8 tokens over reqs, logging into legs (cap_legs); a run
 * bound of bound_ms, and deadline_ms on the scaled copy unless 0. Arrival times are the
 * caller's. 0, or -1 (nothing to free). */
static inline int pdt_cfx_init(pdt_cfx_t *c, const char *scenario, const char *mode,
                               pd_conform_req_t *reqs, uint32_t n, pd_conform_logged_leg_t *legs,
                               uint32_t cap_legs, uint32_t bound_ms, uint32_t deadline_ms) {
  memset(c, 0, sizeof *c);
  c->s = pdt_load_scenario(scenario);
  if (!c->s) return -1;
  pd_conform_opts_default(&c->o);
  pd_conform_set_label(&c->o, mode);
  c->r.judged = pd_conform_judged_mask(&c->o);
  c->ss = *c->s;
  if (deadline_ms) c->ss.config.deadline_ms = deadline_ms;
  c->ss.config.grace_ms = 100;
  pd_conform_runner_t *run = &c->run;
  run->s = c->s;
  run->ss = &c->ss;
  run->o = &c->o;
  run->r = &c->r;
  run->grace_ns = 100 * PDT_MS_NS;
  run->bound_ns = bound_ms * PDT_MS_NS;
  run->t_gw_stop = 12400 * PDT_MS_NS;
  run->reqs = reqs;
  run->n_reqs = n;
  run->legs = legs;
  run->cap_legs = cap_legs;
  pd_conform_judge_init(run); /* as the runner does, on the scaled copy */
  for (uint32_t i = 0; i < n; i++) {
    pd_conform_req_t *q = &reqs[i];
    memset(q, 0, sizeof *q);
    q->run = run;
    q->c.id = i;
    q->c.is_stream = 1;
    q->c.tokens = 8;
    pd_sse_init(&q->c.sse, NULL);
  }
  return 0;
}

static inline void pdt_cfx_free(pdt_cfx_t *c) {
  for (uint32_t i = 0; i < c->run.n_reqs; i++) {
    pd_sse_free(&c->run.reqs[i].c.sse);
    free(c->run.reqs[i].units);
  }
  free(c->s);
}

#endif
