/* Capacity in the cost figures (docs/metrics.md): KV page-seconds per worker from hand-made
 * legs at retirement (held, after the client's end, beyond the grace), and the engines'
 * gauges noted after each worker step (pd_metrics_note_capacity): per-worker peaks in the
 * JSON and the line, counter tracks in the trace, memory bounded however many steps. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_metrics.h"
#include "pd_trace.h"
#include "pd_world.h"
#include "pdt.h"

#define MS 1000000ull
#define NEAR(a, b) ((a) - (b) < 1e-9 && (b) - (a) < 1e-9)

typedef struct kv_run {
  pd_scenario_t s;
  pd_metrics_t m;
  pd_client_request_t rq;
  pd_worker_leg_t p, d;
} kv_run_t;

/* A request that ended at 1 s (grace 1 s) with a prefill leg on p0 and a decode leg on d0. */
static kv_run_t *kv_run(void) {
  kv_run_t *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  pd_scenario_defaults(&k->s);
  pd_metrics_init(&k->m, 0);
  pd_metrics_run_begin(&k->m, &k->s);
  k->rq.ended = 1;
  k->rq.t_end = 1000 * MS;
  k->p = (pd_worker_leg_t){.role = PD_ROLE_PREFILL, .worker = 0, .fault = -1, .tfault = -1};
  k->d = (pd_worker_leg_t){.role = PD_ROLE_DECODE, .worker = 1, .fault = -1, .tfault = -1};
  k->p.next_in_req = &k->d;
  k->rq.legs = &k->p;
  return k;
}

static void kv_run_del(kv_run_t *k) {
  pd_metrics_free(&k->m);
  free(k);
}

static void test_kv_page_seconds_per_worker(void) {
  kv_run_t *k = kv_run();
  if (!k) return;
  /* prefill: 10 pages for 200 ms, freed before the end */
  k->p.kv_pages_max = 10;
  k->p.kv_page_ns = 10 * 200 * MS;
  k->p.t_kv_changed = k->p.t_kv_freed = 300 * MS;
  /* decode: 40 pages since 500 ms, still held when the run ends at 4 s (stranded: exact) */
  k->d.kv_pages = k->d.kv_pages_max = 40;
  k->d.kv_page_ns = 0;
  k->d.t_kv_changed = 500 * MS;
  pd_metrics_add_request(&k->m, &k->rq, 4000 * MS);
  pd_metrics_run_end(&k->m);
  PDT_TRUE(NEAR(k->m.w[0].kv_page_s, 2.0));
  PDT_TRUE(NEAR(k->m.w[0].kv_after_end_page_s, 0.0));
  PDT_TRUE(NEAR(k->m.w[1].kv_page_s, 40 * 3.5));
  PDT_TRUE(NEAR(k->m.w[1].kv_after_end_page_s, 40 * 3.0));
  PDT_TRUE(NEAR(k->m.w[1].kv_beyond_grace_page_s, 40 * 2.0));
  PDT_TRUE(NEAR(k->m.total.kv_page_s, 142.0));
  cJSON *j = pd_metrics_json(&k->m, &k->s);
  const cJSON *cap = cJSON_GetObjectItemCaseSensitive(j, "capacity");
  const cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cap, "workers"), 1);
  PDT_TRUE(NEAR(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(cap, "kv_page_s")), 142.0));
  PDT_TRUE(NEAR(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(d0, "stranded_kv_page_s")),
                120.0));
  PDT_TRUE(cJSON_GetObjectItemCaseSensitive(cap, "peak_running") == NULL); /* never noted */
  cJSON_Delete(j);
  kv_run_del(k);
}

/* A hold that changed after the end is bounded by the most the leg held; a leg that never
 * held a page adds nothing; a request without an end strands nothing. */
static void test_kv_after_a_change_past_the_end_is_bounded(void) {
  kv_run_t *k = kv_run();
  if (!k) return;
  /* decode: 20 pages until 1.5 s, then 30 until freed at 2.5 s: 20 x 1.5 + 30 x 1 page-s */
  k->d.kv_pages_max = 30;
  k->d.kv_page_ns = (20 * 1500 + 30 * 1000) * MS;
  k->d.t_kv_changed = k->d.t_kv_freed = 2500 * MS;
  k->p.t_kv_freed = 9000 * MS; /* no pages held: not counted whatever its times */
  pd_metrics_add_request(&k->m, &k->rq, 4000 * MS);
  pd_metrics_run_end(&k->m);
  PDT_TRUE(NEAR(k->m.w[1].kv_page_s, 60.0));
  PDT_TRUE(NEAR(k->m.w[1].kv_after_end_page_s, 45.0)); /* 30 pages x 1.5 s: the bound */
  PDT_TRUE(NEAR(k->m.w[1].kv_beyond_grace_page_s, 15.0)); /* 30 x 0.5 s */
  PDT_TRUE(NEAR(k->m.w[0].kv_page_s, 0.0));
  kv_run_del(k);

  k = kv_run();
  if (!k) return;
  k->rq.ended = 0; /* cut off by the horizon: no end */
  k->d.kv_pages = k->d.kv_pages_max = 5;
  pd_metrics_add_request(&k->m, &k->rq, 2000 * MS);
  pd_metrics_run_end(&k->m);
  PDT_TRUE(NEAR(k->m.w[1].kv_page_s, 10.0));
  PDT_TRUE(NEAR(k->m.w[1].kv_after_end_page_s, 0.0));
  kv_run_del(k);
}

static void test_capacity_notes_give_peaks_and_samples_on_change(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  pd_metrics_t m;
  if (!s) return;
  pd_scenario_defaults(s);
  pd_metrics_init(&m, 1);
  pd_metrics_run_begin(&m, s);
  pd_metrics_note_capacity(&m, 1, 10, 1, 0, 100, 1000);
  pd_metrics_note_capacity(&m, 1, 20, 1, 0, 100, 1000); /* unchanged: no sample */
  pd_metrics_note_capacity(&m, 1, 30, 3, 2, 700, 1000);
  pd_metrics_note_capacity(&m, 0, 30, 2, 5, 50, 4096);
  pd_metrics_note_capacity(&m, 1, 40, 0, 0, 0, 1000);
  pd_metrics_note_capacity(&m, 99, 40, 9, 9, 9, 9); /* no such worker: ignored */
  PDT_EQ_U64(m.n_cs, 4);
  PDT_EQ_U64(m.peak[1].running, 3);
  PDT_EQ_U64(m.peak[1].queued, 2);
  PDT_EQ_U64(m.peak[1].kv_pages, 700);
  PDT_EQ_U64(m.peak[0].queued, 5);
  pd_metrics_run_end(&m);
  PDT_EQ_U64(m.peak_total.queued, 5);
  PDT_EQ_U64(m.peak_total.kv_pages, 700);
  PDT_EQ_U64(m.peak_total.kv_total_pages, 4096);
  char line[512];
  pd_metrics_line(&m, line, sizeof line);
  PDT_TRUE(strstr(line, "peak running 3, queued 5, KV pages 700 of 4096") != NULL);
  cJSON *j = pd_metrics_json(&m, s);
  const cJSON *cap = cJSON_GetObjectItemCaseSensitive(j, "capacity");
  const cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cap, "workers"), 1);
  PDT_EQ_INT((int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(d0, "peak_kv_pages")), 700);
  PDT_EQ_INT((int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(cap, "peak_queued")), 5);
  cJSON_Delete(j);
  /* the trace: one counter sample per kept change, per worker's track, and each final state */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  pd_trace_t t;
  if (f) {
    pd_trace_init(&t, f);
    pd_metrics_capacity_trace(&m, &t, s);
    pd_trace_finish(&t);
    fclose(f);
    /* on each worker's own process: p0 is PD_TRACE_WORKER + 0, d0 + 1 */
    PDT_TRUE(strstr(buf, "{\"pid\":10,\"name\":\"engine\"") &&
             strstr(buf, "{\"pid\":11,\"name\":\"engine\""));
    PDT_TRUE(strstr(buf, "\"running\":3,\"queued\":2,\"kv pages used\":700") != NULL);
    size_t n_c = 0;
    for (const char *p = buf; (p = strstr(p, "\"ph\":\"C\"")) != NULL; p++) n_c++;
    PDT_EQ_U64(n_c, 6); /* 4 changes + the 2 workers' final states */
    PDT_EQ_U64(t.events, 0); /* counters are written, not hashed */
  }
  free(buf);
  pd_metrics_free(&m);
  free(s);
}

/* A million changes on one worker keep at most PD_METRICS_MAX_CAP_SAMPLES samples, in time
 * order, spread over the whole run; its final state is still the last one written. */
static void test_capacity_samples_stay_bounded(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  pd_metrics_t m;
  if (!s) return;
  pd_scenario_defaults(s);
  pd_metrics_init(&m, 1);
  pd_metrics_run_begin(&m, s);
  const uint32_t n = 1u << 20;
  for (uint32_t i = 0; i < n; i++) pd_metrics_note_capacity(&m, 0, (uint64_t)i * 1000, i & 7, 0, i, n);
  PDT_TRUE(m.n_cs <= PD_METRICS_MAX_CAP_SAMPLES && m.n_cs > PD_METRICS_MAX_CAP_SAMPLES / 8);
  PDT_TRUE(m.cap_cs <= PD_METRICS_MAX_CAP_SAMPLES);
  int ordered = 1;
  for (size_t i = 1; i < m.n_cs; i++) ordered &= m.cs[i].t > m.cs[i - 1].t;
  PDT_TRUE(ordered);
  PDT_TRUE(m.n_cs && m.cs[m.n_cs - 1].t > (uint64_t)(n - n / 8) * 1000); /* reaches the end */
  PDT_EQ_U64(m.last[0].kv_pages, n - 1);
  PDT_EQ_U64(m.peak[0].kv_pages, n - 1);
  pd_metrics_free(&m);
  free(s);
}

int pdt_suite_capacity_metrics(void) {
  static const pdt_case_t cases[] = {
      {"KV page-seconds per worker", test_kv_page_seconds_per_worker},
      {"KV after a change past the end is bounded", test_kv_after_a_change_past_the_end_is_bounded},
      {"capacity notes give peaks, samples on change and trace counters",
       test_capacity_notes_give_peaks_and_samples_on_change},
      {"capacity samples stay bounded", test_capacity_samples_stay_bounded},
  };
  return PDT_SUITE("capacity_metrics", cases);
}
