/* pd_metrics: percentiles on known inputs (exact and past the exact store), goodput at the
 * SLO edges, capacity held after the client's end on a hand-built request, recovery on a
 * scripted series, and the trace's counter tracks from a real run. */
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_metrics.h"
#include "pd_scenario_write.h"
#include "pd_world.h"
#include "pdt.h"

#define MS 1000000ull

static int near(double got, double want, double tol) {
  double d = got > want ? got - want : want - got;
  return d <= tol;
}

/* 1..100: numpy's linear interpolation gives p50 50.5 and p99 99.01; the mean is 50.5. */
static void test_percentiles_exact_on_known_inputs(void) {
  pd_metrics_hist_t h;
  memset(&h, 0, sizeof h);
  for (uint64_t v = 100; v >= 1; v--) pd_metrics_hist_add(&h, v); /* unsorted order */
  PDT_TRUE(near(pd_metrics_hist_percentile(&h, 50), 50.5, 1e-9));
  PDT_TRUE(near(pd_metrics_hist_percentile(&h, 99), 99.01, 1e-9));
  PDT_TRUE(near(pd_metrics_hist_percentile(&h, 0), 1, 1e-9));
  PDT_TRUE(near(pd_metrics_hist_percentile(&h, 100), 100, 1e-9));
  PDT_TRUE(near(pd_metrics_hist_mean(&h), 50.5, 1e-9));
  PDT_TRUE(h.buckets == NULL);
  pd_metrics_hist_free(&h);
  PDT_TRUE(pd_metrics_hist_percentile(&h, 50) == 0); /* empty */
}

/* Past PD_METRICS_EXACT_MAX samples the store becomes the fixed histogram: memory stops
 * growing, and percentiles stay within the bucket's relative error (1/128). */
static void test_percentiles_bounded_past_the_exact_store(void) {
  pd_metrics_hist_t h;
  memset(&h, 0, sizeof h);
  uint64_t n = 4ull * PD_METRICS_EXACT_MAX;
  for (uint64_t i = 1; i <= n; i++) pd_metrics_hist_add(&h, i * 1000); /* 1 us .. n us */
  PDT_TRUE(h.buckets != NULL);
  PDT_TRUE(h.exact == NULL && h.cap_exact == 0);
  PDT_EQ_U64(h.n, n);
  double p50 = pd_metrics_hist_percentile(&h, 50), want50 = (double)n * 1000 / 2;
  double p99 = pd_metrics_hist_percentile(&h, 99), want99 = (double)n * 1000 * 0.99;
  PDT_TRUE(near(p50, want50, want50 / 128));
  PDT_TRUE(near(p99, want99, want99 / 128));
  PDT_TRUE(near(pd_metrics_hist_mean(&h), ((double)n + 1) * 500, 1));
  for (uint64_t i = 0; i < 1000000; i++) pd_metrics_hist_add(&h, 7 * MS); /* no more memory */
  PDT_TRUE(h.exact == NULL && !h.is_nomem);
  pd_metrics_hist_free(&h);
}

/* A clean stream request, arriving at 0 with its first data at ttft and its end at e2e. */
static void clean_request(pd_client_request_t *rq, uint64_t ttft, uint64_t e2e) {
  memset(rq, 0, sizeof *rq);
  rq->is_stream = 1;
  rq->tokens = 5;
  rq->is_clean = rq->ended = rq->has_first_data = 1;
  rq->t_first_data = ttft;
  rq->t_end = e2e;
}

/* Goodput counts a completed request whose TTFT and E2E are at most the SLOs (inclusive). */
static void test_goodput_slo_edges(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  pd_scenario_defaults(s);
  s->config.slo_ttft_ms = 100;
  s->config.slo_e2e_ms = 1000;
  pd_metrics_t m;
  pd_metrics_init(&m, 0);
  pd_metrics_run_begin(&m, s);
  pd_client_request_t rq;
  clean_request(&rq, 100 * MS, 1000 * MS); /* both on the edge: good */
  pd_metrics_add_request(&m, &rq, 0);
  clean_request(&rq, 100 * MS + 1, 500 * MS); /* TTFT 1 ns over */
  pd_metrics_add_request(&m, &rq, 0);
  clean_request(&rq, 50 * MS, 1000 * MS + 1); /* E2E 1 ns over */
  pd_metrics_add_request(&m, &rq, 0);
  clean_request(&rq, 10 * MS, 2000 * MS); /* ends last, not clean: not completed */
  rq.is_clean = 0;
  pd_metrics_add_request(&m, &rq, 0);
  pd_metrics_run_end(&m);
  PDT_EQ_U64(m.requests, 4);
  PDT_EQ_U64(m.completed, 3);
  PDT_EQ_U64(m.good, 1);
  PDT_TRUE(near(m.duration_s, 2.0, 1e-12)); /* first arrival 0 to the last client end */
  /* TPOT (E2E - TTFT) / 4 of the three completed: 225, 100 and 237.5 ms */
  PDT_EQ_U64(m.tpot.n, 3);
  PDT_TRUE(near(pd_metrics_hist_mean(&m.tpot), 187.5 * MS, 1)); /* ns, integer division */
  /* TTFT and E2E distributions hold the three completed requests only: TTFT 100 ms,
   * 100 ms + 1 ns, 50 ms (mean 83.3 ms); E2E 1000, 500, 1000 ms + 1 ns (mean 833.3 ms). The
   * histograms keep exact values while small, so the means are exact to the nanosecond. */
  PDT_EQ_U64(m.ttft.n, 3);
  PDT_EQ_U64(m.e2e.n, 3);
  PDT_TRUE(near(pd_metrics_hist_mean(&m.ttft), (250.0 * MS + 1) / 3, 1));
  PDT_TRUE(near(pd_metrics_hist_mean(&m.e2e), (2500.0 * MS + 1) / 3, 1));
  pd_metrics_free(&m);
  free(s);
}

/* One request ended at 10 ms; its prefill leg on worker 0 held the slot 5 ms .. 2010 ms and
 * the gateway kept the leg open 5 ms .. 3010 ms. grace 1000 ms. */
static void test_stranded_capacity_on_a_hand_built_request(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  pd_scenario_defaults(s);
  pd_metrics_t m;
  pd_metrics_init(&m, 0);
  pd_metrics_run_begin(&m, s);
  pd_client_request_t rq;
  clean_request(&rq, 8 * MS, 10 * MS);
  pd_worker_leg_t leg;
  memset(&leg, 0, sizeof leg);
  leg.worker = 0;
  leg.fault = -1;
  leg.slot_taken = leg.is_slot_freed = 1;
  leg.t_slot_taken = 5 * MS;
  leg.t_slot_freed = 2010 * MS;
  leg.t_open = 5 * MS;
  leg.t_gw_closed = 3010 * MS;
  pd_worker_leg_t d = leg; /* a decode leg on worker 1 still open at the run's end, 4000 ms */
  d.worker = 1;
  d.is_slot_freed = 0;
  d.t_slot_freed = 0;
  d.gw_open = 1;
  leg.next_in_req = &d;
  rq.legs = &leg;
  pd_metrics_add_request(&m, &rq, 4000 * MS);
  PDT_EQ_U64(m.w[0].slot_ns, 2005 * MS);
  PDT_EQ_U64(m.w[0].slot_after_end_ns, 2000 * MS);
  PDT_EQ_U64(m.w[0].slot_beyond_grace_ns, 1000 * MS);
  PDT_EQ_U64(m.w[0].leg_ns, 3005 * MS);
  PDT_EQ_U64(m.w[0].leg_after_end_ns, 3000 * MS);
  PDT_EQ_U64(m.w[0].leg_beyond_grace_ns, 2000 * MS);
  PDT_EQ_U64(m.w[1].slot_after_end_ns, 3990 * MS); /* held to the run's end */
  PDT_EQ_U64(m.w[1].leg_beyond_grace_ns, 2990 * MS);
  pd_metrics_free(&m);
  free(s);
}

/* 1 s bins, 10-bin windows: 10 good/s until a burst 30..40 s with none, 5/s for 40..44 s,
 * 10/s again from 44 s. The window starting at 43 s holds 5 + 9 x 10 = 95: 9.5/s, back
 * within 5 % of 10/s: recovered 3 s after the burst's end. */
static void test_recovery_on_a_scripted_series(void) {
  uint32_t bins[100];
  for (int i = 0; i < 100; i++) bins[i] = i >= 30 && i < 40 ? 0 : i >= 40 && i < 44 ? 5 : 10;
  pd_metrics_recovery_t r =
      pd_metrics_recovery(bins, 100, 1000 * MS, 10, 0, 100000 * MS, 30000 * MS, 40000 * MS);
  PDT_EQ_INT(r.status, PD_METRICS_REC_OK);
  PDT_EQ_U64(r.after_ns, 3000 * MS);
  PDT_TRUE(near(r.pre_rps, 10, 1e-9));
  PDT_TRUE(near(r.min_rps, 0, 1e-9));
  bins[44] = 4; /* windows at 43 and 44 s hold 89 and 94: the first back starts at 45 s */
  r = pd_metrics_recovery(bins, 100, 1000 * MS, 10, 0, 100000 * MS, 30000 * MS, 40000 * MS);
  PDT_EQ_U64(r.after_ns, 5000 * MS);
  /* back at 45 s for a while, then 0 for 60..70 s (a relapse after the trigger): not
   * recovered until the windows are back for good, from 70 s; the lowest window is 0 */
  for (int i = 60; i < 70; i++) bins[i] = 0;
  r = pd_metrics_recovery(bins, 100, 1000 * MS, 10, 0, 100000 * MS, 30000 * MS, 40000 * MS);
  PDT_EQ_INT(r.status, PD_METRICS_REC_OK);
  PDT_EQ_U64(r.after_ns, 30000 * MS);
  PDT_TRUE(near(r.min_rps, 0, 1e-9));
  for (int i = 60; i < 70; i++) bins[i] = 6; /* a dip to 60 %, not a relapse: back at 45 s */
  r = pd_metrics_recovery(bins, 100, 1000 * MS, 10, 0, 100000 * MS, 30000 * MS, 40000 * MS);
  PDT_EQ_U64(r.after_ns, 5000 * MS);
  for (int i = 0; i < 100; i++) bins[i] = 10; /* no dip: back at the burst's end, not before */
  r = pd_metrics_recovery(bins, 100, 1000 * MS, 10, 0, 100000 * MS, 30000 * MS, 40000 * MS);
  PDT_EQ_INT(r.status, PD_METRICS_REC_OK);
  PDT_EQ_U64(r.after_ns, 0);
  PDT_TRUE(near(r.min_rps, 10, 1e-9));
  r = pd_metrics_recovery(bins, 100, 1000 * MS, 10, 0, 45000 * MS, 30000 * MS, 40000 * MS);
  PDT_EQ_INT(r.status, PD_METRICS_REC_NEVER); /* no whole window between 40 s and the last arrival */
  for (int i = 40; i < 100; i++) bins[i] = 9; /* 90 %: never back within 5 % */
  r = pd_metrics_recovery(bins, 100, 1000 * MS, 10, 0, 100000 * MS, 30000 * MS, 40000 * MS);
  PDT_EQ_INT(r.status, PD_METRICS_REC_NEVER);
  r = pd_metrics_recovery(bins, 100, 1000 * MS, 10, 0, 100000 * MS, 0, 40000 * MS);
  PDT_EQ_INT(r.status, PD_METRICS_REC_NO_BASE); /* the burst starts the run */
}

/* A detached prefill stranded in pr1150 (the bundled scenario): the trace has counter
 * tracks per worker, and the stranded-slot counter rises to 1 and falls back to 0. */
static void test_trace_counters_show_the_stranded_slot(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[256];
  PDT_EQ_INT(pd_scenario_load(s, PD_SOURCE_DIR "/scenarios/decode-503-while-prefill-detached.json", err,
                              sizeof err), 0);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  pd_metrics_t m;
  pd_metrics_init(&m, 1);
  pd_world_opts_t o = {f, NULL, NULL, 0, 0, &m};
  pd_world_stats_t st;
  uint32_t v = 0;
  PDT_EQ_INT(pd_world_run_opts(s, PD_MODE_PR1150, s->config.seed, &o, &st, &v, NULL), 0);
  fclose(f);
  PDT_TRUE(text && strstr(text, "{\"pid\":10,\"name\":\"capacity\",\"ph\":\"C\"") != NULL);
  PDT_TRUE(text && strstr(text, "\"stranded slots\":1}") != NULL);
  PDT_TRUE(m.w[0].slot_beyond_grace_ns > 290000 * MS); /* ~300 s bootstrap timeout */
  PDT_EQ_U64(m.requests, 1);
  free(text);
  pd_metrics_free(&m);
  free(s);
}

/* The config keys: defaults, a round trip through the writer, and the window's lower bound. */
static void test_slo_keys_parse_default_and_round_trip(void) {
  static const char base[] = "{\"name\":\"x\",\"workers\":[{\"name\":\"p0\",\"role\":"
                             "\"prefill\"},{\"name\":\"d0\",\"role\":\"decode\"}],\"expect\":{}";
  pd_scenario_t *s = malloc(sizeof *s), *t = malloc(sizeof *t);
  char err[256], txt[512];
  snprintf(txt, sizeof txt, "%s}", base);
  PDT_EQ_INT(pd_scenario_parse(s, "a", txt, strlen(txt), err, sizeof err), 0);
  PDT_EQ_U64(s->config.slo_ttft_ms, 1000);
  PDT_EQ_U64(s->config.slo_e2e_ms, 10000);
  PDT_EQ_U64(s->config.goodput_window_ms, 10000);
  snprintf(txt, sizeof txt, "%s,\"config\":{\"slo_ttft_ms\":250,\"slo_e2e_ms\":0,"
           "\"goodput_window_ms\":10}}", base);
  PDT_EQ_INT(pd_scenario_parse(s, "b", txt, strlen(txt), err, sizeof err), 0);
  char *out = NULL;
  size_t len = 0;
  PDT_EQ_INT(pd_scenario_write_json(s, &out, &len), 0);
  PDT_EQ_INT(out ? pd_scenario_parse(t, "c", out, len, err, sizeof err) : -1, 0);
  PDT_EQ_U64(t->config.slo_ttft_ms, 250);
  PDT_EQ_U64(t->config.slo_e2e_ms, 0);
  PDT_EQ_U64(t->config.goodput_window_ms, 10);
  free(out);
  snprintf(txt, sizeof txt, "%s,\"config\":{\"goodput_window_ms\":9}}", base);
  PDT_EQ_INT(pd_scenario_parse(s, "d", txt, strlen(txt), err, sizeof err), PD_ERR_FIELD);
  free(s);
  free(t);
}

/* A load spike (workload.steps above 1, then back) is the burst: recovery counts from the
 * step that brings the load back (its ramp included), not from the last request it touched. */
static void test_load_step_is_the_burst(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  pd_scenario_defaults(s);
  s->workload.n_steps = 3;
  s->workload.steps[0] = (pd_scenario_step_t){20000, 4.0, 0};
  s->workload.steps[1] = (pd_scenario_step_t){30000, 2.0, 0};
  s->workload.steps[2] = (pd_scenario_step_t){35000, 1.0, 500};
  pd_metrics_t m;
  pd_metrics_init(&m, 0);
  pd_metrics_run_begin(&m, s);
  PDT_EQ_INT(m.has_burst, 1);
  PDT_EQ_U64(m.burst_from, 20000 * MS);
  PDT_EQ_U64(m.burst_to, 35500 * MS);
  pd_metrics_free(&m);
  free(s);
}

/* The capacity of a 1P2D cluster from its worker model: each decode runs 4 requests, each
 * holding its slot for prefill's forward pass and transfer (20 + 5 ms), the first token (10 ms)
 * and 99 more tokens at 10 ms: 1025 ms, so 2 x 4 / 1.025 s = 7.80/s. A prefill that runs 1
 * request for 25 ms bounds it at 40/s (above); one that runs 1 for 500 ms at 2/s (below). */
static void test_capacity_from_the_worker_model(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  pd_scenario_defaults(s);
  s->n_workers = 0;
  pd_scenario_worker_defaults(&s->workers[s->n_workers++], "p0", PD_ROLE_PREFILL);
  for (int i = 0; i < 2; i++) {
    pd_scenario_worker_t *d = &s->workers[s->n_workers++];
    pd_scenario_worker_defaults(d, i ? "d1" : "d0", PD_ROLE_DECODE);
    d->max_running = 4;
    d->token_ms = 10;
  }
  s->workload.tokens = 100;
  PDT_TRUE(near(pd_metrics_capacity_rps(s), 8.0 / 1.025, 1e-9));
  s->workers[0].kv_ms = 15; /* prefill's transfer, not decode's (5), is in decode's hold */
  PDT_TRUE(near(pd_metrics_capacity_rps(s), 8.0 / 1.035, 1e-9));
  s->workers[0].kv_ms = 5;
  s->workers[0].max_running = 1;
  PDT_TRUE(near(pd_metrics_capacity_rps(s), 8.0 / 1.025, 1e-9)); /* prefill bound 40/s */
  s->workers[0].forward_ms = 495;
  /* the decodes now hold 495 + 5 + 10 + 990 ms: 5.33/s; prefill 1 / 0.5 s = 2/s */
  PDT_TRUE(near(pd_metrics_capacity_rps(s), 2.0, 1e-9));
  s->workers[0].forward_ms = 20;
  s->workers[0].max_running = 2048;
  s->workers[1].max_running = 1; /* one decode of one slot held 2.025 s: below 1/s */
  s->workers[2].max_running = 0; /* not counted */
  s->workers[1].first_token_ms = 1010;
  PDT_TRUE(near(pd_metrics_capacity_rps(s), 1.0 / 2.025, 1e-9));
  s->n_workers = 1; /* no decode: no capacity to state */
  PDT_TRUE(pd_metrics_capacity_rps(s) == 0);
  free(s);
}

/* The load step's share: good completions ending in the step over min(offered, capacity), and
 * a request answered 503 with no leg to a worker counts as shed with its time to the head. */
static void test_overload_share_and_shed(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  pd_scenario_defaults(s);
  s->workload.n_steps = 2;
  s->workload.steps[0] = (pd_scenario_step_t){10000, 2.0, 0};
  s->workload.steps[1] = (pd_scenario_step_t){20000, 1.0, 0};
  pd_metrics_t m;
  pd_metrics_init(&m, 0);
  pd_metrics_run_begin(&m, s);
  PDT_EQ_INT(m.ovl.has, 1);
  PDT_EQ_U64(m.ovl.from_ns, 10000 * MS);
  PDT_EQ_U64(m.ovl.to_ns, 20000 * MS);
  m.ovl.capacity_rps = 2.0; /* 20 in the 10 s step */
  pd_client_request_t rq;
  for (int i = 0; i < 30; i++) { /* 30 arrive in the step: 3/s offered, above capacity */
    clean_request(&rq, 10 * MS, 100 * MS);
    rq.t_arrival = 10000 * MS + (uint64_t)i * 300 * MS;
    rq.t_first_data = rq.t_arrival + 10 * MS;
    rq.t_end = rq.t_arrival + 100 * MS;
    if (i >= 18) { /* the last 12 are shed: 503 heads after 0.5 s, no leg */
      memset(&rq, 0, sizeof rq);
      rq.t_arrival = 10000 * MS + (uint64_t)i * 300 * MS;
      rq.has_head = rq.ended = 1;
      rq.head_status = 503;
      rq.t_head = rq.t_end = rq.t_arrival + 500 * MS;
    }
    pd_metrics_add_request(&m, &rq, rq.t_end);
    pd_metrics_req_free(&rq.metrics);
  }
  memset(&rq, 0, sizeof rq); /* the gateway's own 400 without a leg: an answer, not a shed */
  rq.t_arrival = 12000 * MS;
  rq.has_head = rq.ended = 1;
  rq.head_status = 400;
  rq.t_head = rq.t_end = rq.t_arrival;
  pd_metrics_add_request(&m, &rq, rq.t_end);
  clean_request(&rq, 10 * MS, 100 * MS); /* arrives and ends after the step: not counted */
  rq.t_arrival = 20000 * MS;
  rq.t_end = 20100 * MS;
  pd_metrics_add_request(&m, &rq, rq.t_end);
  pd_metrics_req_free(&rq.metrics);
  PDT_EQ_INT((int)m.ovl.arrivals, 31);
  PDT_EQ_INT((int)m.ovl.good, 18);
  PDT_TRUE(near(pd_metrics_overload_share(&m.ovl), 18.0 / 20.0, 1e-9)); /* 3.1/s > 2/s */
  PDT_EQ_INT((int)m.ovl.shed, 12);
  PDT_EQ_U64(m.ovl.shed_ns_max, 500 * MS);
  m.ovl.capacity_rps = 10.0; /* capacity above the offered 3/s: the share is of what was asked */
  PDT_TRUE(near(pd_metrics_overload_share(&m.ovl), 18.0 / 31.0, 1e-9));
  pd_metrics_free(&m);
  free(s);
}

int pdt_suite_metrics(void) {
  static const pdt_case_t cases[] = {
      {"percentiles are exact (linear interpolation) on known inputs",
       test_percentiles_exact_on_known_inputs},
      {"past the exact store the histogram bounds memory and error",
       test_percentiles_bounded_past_the_exact_store},
      {"goodput counts requests within both SLOs, edges inclusive", test_goodput_slo_edges},
      {"capacity held after the client's end, with and beyond grace",
       test_stranded_capacity_on_a_hand_built_request},
      {"recovery time on a scripted goodput series", test_recovery_on_a_scripted_series},
      {"the trace gets per-worker capacity counters", test_trace_counters_show_the_stranded_slot},
      {"the SLO and window keys parse, default and round-trip",
       test_slo_keys_parse_default_and_round_trip},
      {"a load spike is the burst, until the step back", test_load_step_is_the_burst},
      {"the cluster's capacity from the worker model", test_capacity_from_the_worker_model},
      {"goodput share of a load step and the requests shed", test_overload_share_and_shed},
  };
  return PDT_SUITE("metrics", cases);
}
