/* I23 goodput-floor (docs/spec.md; sim/pd_check_goodput.c): a load step's goodput, judged from
 * the client's side against the worker model's capacity, on hand-built requests. */
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pd_metrics.h"
#include "pd_world.h"
#include "pdt.h"
#include "pdt_cli.h"

#define MS 1000000ull
#define I23 (1u << (PD_INVARIANT_GOODPUT_FLOOR - 1))

/* 1P1D, the decode running 2 requests of 1 token held 25 + 10 = 35 ms... made simple: the
 * capacity is set by hand after begin (the model's formula has its own test in metrics). A
 * step 10 s long from 10 s, SLOs 1 s / 5 s, floor 0.9. */
static pd_scenario_t *step_scenario(double floor) {
  pd_scenario_t *s = malloc(sizeof *s);
  pd_scenario_defaults(s);
  s->n_workers = 0;
  pd_scenario_worker_defaults(&s->workers[s->n_workers++], "p0", PD_ROLE_PREFILL);
  pd_scenario_worker_defaults(&s->workers[s->n_workers++], "d0", PD_ROLE_DECODE);
  s->workers[1].max_running = 2;
  s->workload.n_steps = 2;
  s->workload.steps[0] = (pd_scenario_step_t){10000, 3.0, 0};
  s->workload.steps[1] = (pd_scenario_step_t){20000, 1.0, 0};
  s->config.slo_ttft_ms = 1000;
  s->config.slo_e2e_ms = 5000;
  s->config.goodput_floor = floor;
  return s;
}

static void served(pd_client_request_t *rq, uint64_t arrive_ms, uint64_t ttft_ms, uint64_t e2e_ms) {
  memset(rq, 0, sizeof *rq);
  rq->is_clean = rq->ended = rq->has_first_data = 1;
  rq->t_arrival = arrive_ms * MS;
  rq->t_first_data = (arrive_ms + ttft_ms) * MS;
  rq->t_end = (arrive_ms + e2e_ms) * MS;
}

/* Capacity 4/s, 60 offered in the 10 s step (6/s, above it): the floor is 0.9 x 4 = 3.6/s,
 * 36 good requests. 36 pass; 35 and 30 are I23, and the reason names the figures. */
static void test_floor_kept_and_missed(void) {
  pd_scenario_t *s = step_scenario(0.9);
  for (int good = 30; good <= 36; good += good == 30 ? 5 : 1) { /* 30, 35, 36 */
    pd_goodput_t g;
    pd_goodput_begin(&g, s);
    PDT_EQ_INT(g.is_on, 1);
    g.capacity_rps = 4.0;
    pd_client_request_t rq;
    for (int i = 0; i < 60; i++) {
      served(&rq, 10000 + (uint64_t)i * 150, 100, 500);
      if (i >= good) rq.is_clean = 0; /* the rest: answered, not clean (a 503, a cut stream) */
      pd_goodput_note(&g, &rq);
    }
    char why[200] = "";
    uint32_t v = pd_goodput_judge(&g, why, sizeof why);
    if (good == 36) {
      PDT_EQ_INT((int)v, 0);
    } else if (good == 30) {
      PDT_EQ_INT((int)v, (int)I23);
      PDT_HAS(why, "I23 goodput in the load step 3.00/s is 75 % of 4.00/s (offered 6.00/s");
    } else {
      PDT_EQ_INT((int)v, (int)I23);
      PDT_HAS(why, "I23 goodput in the load step 3.50/s is 88 % of 4.00/s");
      PDT_HAS(why, "under the floor of 90 %");
    }
  }
  free(s);
}

/* Counted good: clean, first byte within slo_ttft, end within slo_e2e, ending inside the step.
 * Under the capacity (1/s offered of 4/s), the share is of what was asked: 9 of 10 = 0.9 kept. */
static void test_only_clean_answers_within_both_slos_count(void) {
  pd_scenario_t *s = step_scenario(0.9);
  pd_goodput_t g;
  pd_goodput_begin(&g, s);
  g.capacity_rps = 4.0;
  pd_client_request_t rq;
  for (int i = 0; i < 10; i++) { /* 10 arrive in the step, 1/s */
    if (i == 0) served(&rq, 10000, 1000, 5000); /* both SLOs on the edge: good */
    else served(&rq, 10000 + (uint64_t)i * 1000, 100, 200);
    if (i == 9) rq.t_end = 20000 * MS + 1; /* ends after the step: not counted */
    pd_goodput_note(&g, &rq);
  }
  served(&rq, 9000, 100, 1100); /* arrived before the step, ends in it: good, not offered */
  pd_goodput_note(&g, &rq);
  PDT_EQ_INT((int)g.arrivals, 10);
  PDT_EQ_INT((int)g.good, 10);
  PDT_EQ_INT((int)pd_goodput_judge(&g, NULL, 0), 0);
  pd_goodput_begin(&g, s);
  g.capacity_rps = 4.0;
  for (int i = 0; i < 10; i++) {
    served(&rq, 10000 + (uint64_t)i * 900, i == 0 ? 1001 : 100, i == 1 ? 5001 : 200);
    pd_goodput_note(&g, &rq); /* 0: TTFT past its SLO; 1: E2E past its SLO */
  }
  PDT_EQ_INT((int)g.good, 8);
  PDT_EQ_INT((int)pd_goodput_judge(&g, NULL, 0), (int)I23);
  free(s);
}

/* No floor stated, or a step that never comes back: not judged, whatever was served. */
static void test_off_without_a_floor_or_an_ending_step(void) {
  pd_scenario_t *s = step_scenario(0);
  pd_goodput_t g;
  pd_goodput_begin(&g, s);
  PDT_EQ_INT(g.is_on, 0);
  s->config.goodput_floor = 0.9;
  s->workload.n_steps = 1; /* up, never back */
  pd_goodput_begin(&g, s);
  PDT_EQ_INT(g.is_on, 0);
  pd_client_request_t rq;
  served(&rq, 10000, 100, 200);
  rq.is_clean = 0;
  pd_goodput_note(&g, &rq);
  PDT_EQ_INT((int)pd_goodput_judge(&g, NULL, 0), 0);
  free(s);
}

/* I25: 100 requests inside one window (9 s of the 10 s budget window), a 20 % budget with a
 * floor of 10: any gateway keeping it sends at most 1 x (10 + 1) + 3 x 20 % x 100 = 71
 * retries that reach workers. 71 pass, 72 are I25. A leg that never reached its worker, a
 * second leg of the same attempt and a budget of 0 (the models declare none) count nothing. */
static void test_retries_beyond_any_kept_budget_are_i25(void) {
  static pd_worker_leg_t legs[3];
  for (int extra = 71; extra <= 72; extra++) {
    pd_retry_budget_t b;
    pd_retry_budget_begin(&b, 20, 10, 10000 * MS);
    for (int i = 0; i < 100; i++) {
      pd_client_request_t rq;
      memset(&rq, 0, sizeof rq);
      memset(legs, 0, sizeof legs);
      rq.t_arrival = (uint64_t)i * 10 * MS;
      for (int k = 0; k < 3; k++) {
        legs[k].attempt = k == 0 ? 1 : 2;
        legs[k].is_reached = 1;
        legs[k].t_open_arrive = rq.t_arrival + (uint64_t)k * MS;
        legs[k].next_in_req = k < 2 ? &legs[k + 1] : NULL;
      }
      legs[1].is_reached = i < extra; /* attempt 2 reached a worker for the first `extra` */
      legs[2].is_reached = i < extra;
      rq.legs = &legs[0];
      pd_retry_budget_note(&b, &rq);
    }
    PDT_EQ_U64(b.retries, (uint64_t)extra);
    char why[200] = "";
    PDT_EQ_INT((int)pd_retry_budget_judge(&b, why, sizeof why),
               extra == 71 ? 0 : (int)(1u << (PD_INVARIANT_RETRY_BUDGET - 1)));
    if (extra == 72) PDT_HAS(why, "I25 72 retries reached workers for 100 requests");
  }
  pd_retry_budget_t none;
  pd_retry_budget_begin(&none, 0, 10, 10000 * MS);
  pd_client_request_t rq;
  memset(&rq, 0, sizeof rq);
  rq.legs = &legs[0];
  pd_retry_budget_note(&none, &rq);
  PDT_EQ_U64(none.requests, 0);
  PDT_EQ_INT((int)pd_retry_budget_judge(&none, NULL, 0), 0);
}

/* I26: a load step from 10 s to 20 s, windows of 1 s (bins of 100 ms), bound 2 s. One good
 * answer every 100 ms before the step (10/s), none in it; after it they come back at 3 s
 * after its end (late: I26), at 1 s (in time), or never (I26). No answer before the step: no
 * baseline, not judged. */
static int recovery_case(uint64_t back_after_ms, int has_base, char *why, size_t cap) {
  pd_scenario_t *s = step_scenario(0);
  s->config.recover_within_ms = 2000;
  s->config.goodput_window_ms = 1000;
  pd_recovery_check_t r;
  pd_recovery_begin(&r, s);
  PDT_EQ_INT(r.is_on, 1);
  pd_client_request_t rq;
  for (uint64_t t = 0; t < 40000; t += 100) {
    int in_step = t >= 10000 && t < 20000 + back_after_ms;
    served(&rq, t, 50, 80);
    if (in_step || (!has_base && t < 10000)) rq.is_clean = 0;
    pd_recovery_note(&r, &rq);
  }
  uint32_t v = pd_recovery_judge(&r, why, cap);
  pd_recovery_free(&r);
  free(s);
  return v != 0;
}

static void test_recovery_late_or_never_is_i26(void) {
  char why[200] = "";
  PDT_EQ_INT(recovery_case(1000, 1, why, sizeof why), 0);
  PDT_EQ_INT(recovery_case(3000, 1, why, sizeof why), 1);
  PDT_HAS(why, "I26 goodput back 3.0 s after the trigger ended (10.0/s before it), later than 2.0 s");
  PDT_EQ_INT(recovery_case(100000, 1, why, sizeof why), 1);
  PDT_HAS(why, "I26 goodput never back within 5 % of its 10.0/s before the trigger");
  PDT_EQ_INT(recovery_case(100000, 0, why, sizeof why), 0);
  pd_scenario_t *s = step_scenario(0); /* no bound stated: off */
  pd_recovery_check_t r;
  pd_recovery_begin(&r, s);
  PDT_EQ_INT(r.is_on, 0);
  free(s);
}

int pdt_suite_check_goodput(void) {
  static const pdt_case_t cases[] = {
      {"I23: the floor kept at 36 good, missed at 35", test_floor_kept_and_missed},
      {"I23: only clean answers within both SLOs, ending in the step, count",
       test_only_clean_answers_within_both_slos_count},
      {"I23: off without a floor or a step that ends", test_off_without_a_floor_or_an_ending_step},
      {"I25: retries beyond any kept budget", test_retries_beyond_any_kept_budget_are_i25},
      {"I26: goodput back late or never after the trigger", test_recovery_late_or_never_is_i26},
  };
  return PDT_SUITE("check_goodput", cases);
}
