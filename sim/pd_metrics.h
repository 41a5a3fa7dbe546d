/* pd_metrics: what a run cost the cluster, from the records the checker judges (pd_check.h):
 * the client's request (arrival, first data, end, clean or not) and each leg's worker slot
 * and gateway connection times. Figures carry vLLM bench's names (TTFT, TPOT, ITL, E2E,
 * goodput); the capacity held by stranded rooms is per worker; the time to recover is
 * measured after a fault burst. Definitions: docs/metrics.md. No clock, no globals.
 *
 * Memory: a latency distribution keeps its samples exactly up to PD_METRICS_EXACT_MAX (then
 * percentiles are exact, numpy's linear interpolation), past that a fixed log-linear
 * histogram (PD_METRICS_BUCKETS counters, relative error below 1/128); the goodput series
 * keeps one counter per bin of simulated time (a tenth of goodput_window_ms), at most
 * PD_METRICS_MAX_BINS. So memory is bounded however many requests a run has. */
#ifndef PD_METRICS_H
#define PD_METRICS_H
#include <stddef.h>
#include <stdint.h>

#include "pd_scenario.h"

#define PD_METRICS_EXACT_MAX 65536u
#define PD_METRICS_SUB_BITS 7u
#define PD_METRICS_SUB (1u << PD_METRICS_SUB_BITS)
#define PD_METRICS_BUCKETS (PD_METRICS_SUB + (64u - PD_METRICS_SUB_BITS) * PD_METRICS_SUB)
#define PD_METRICS_MAX_BINS (1u << 20)
#define PD_METRICS_WINDOW_BINS 10u /* bins per goodput window */
#define PD_METRICS_RECOVERED 0.95  /* back within 5 % of the pre-burst level */
#define PD_METRICS_RELAPSE 0.5     /* a later window under half the level: not recovered yet */

/* One latency distribution, in ns. */
typedef struct pd_metrics_hist {
  uint64_t n, min, max;
  double sum;
  uint64_t *exact;   /* the first samples, while n <= PD_METRICS_EXACT_MAX */
  size_t cap_exact;
  uint64_t *buckets; /* PD_METRICS_BUCKETS counters once the samples outgrew exact */
  int is_nomem;      /* a sample could not be kept: the figures are incomplete */
} pd_metrics_hist_t;

/* Per request, kept in its record while it runs: the gaps between its stream's data chunks
 * (ITL counts only for requests that complete, so they wait here until the end). */
typedef struct pd_metrics_req {
  uint64_t t_last;
  int has_last;
  uint32_t n, cap;
  uint64_t *gaps;
} pd_metrics_req_t;

/* Capacity one worker held, in ns of held time summed over its legs. */
typedef struct pd_metrics_worker {
  uint64_t slot_ns;          /* slot held, in all */
  uint64_t slot_after_end_ns; /* slot held after the client's end (stranded) */
  uint64_t slot_beyond_grace_ns; /* ... more than grace_ms after the client's end (I3's part) */
  uint64_t leg_ns;           /* gateway leg open, in all */
  uint64_t leg_after_end_ns; /* leg open after the client's end (I2's cost) */
  uint64_t leg_beyond_grace_ns;
  /* KV pages held, in page-seconds (the leg's kv_page_ns plus its current hold, at
   * retirement; doubles: an hour of a large pool overflows 64-bit page-ns) */
  double kv_page_s;
  double kv_after_end_page_s;    /* ... after the client's end */
  double kv_beyond_grace_page_s; /* ... more than grace_ms after it (I18's part) */
} pd_metrics_worker_t;

/* The most a worker held at once, from pd_metrics_note_capacity (0 when never noted). */
typedef struct pd_metrics_peak {
  uint32_t running, queued;
  uint64_t kv_pages, kv_total_pages;
} pd_metrics_peak_t;

/* One worker's capacity after a step of its engine, kept for the trace's counter tracks. */
typedef struct pd_metrics_cap_sample {
  uint64_t t, kv_pages;
  uint32_t worker, running, queued;
} pd_metrics_cap_sample_t;

/* Recovery after a fault burst (pd_metrics_recovery). */
typedef struct pd_metrics_recovery {
  int status;            /* PD_METRICS_REC_* */
  double pre_rps;        /* goodput before the burst */
  double min_rps;        /* the lowest window's goodput from the burst's start to recovery */
  uint64_t after_ns;     /* burst end -> the window back at >= 95 % with none after < 50 % */
} pd_metrics_recovery_t;
enum {
  PD_METRICS_REC_NONE = 0,   /* no burst in the run */
  PD_METRICS_REC_OK = 1,     /* recovered after after_ns */
  PD_METRICS_REC_NEVER = 2,  /* not back within the run's arrivals */
  PD_METRICS_REC_NO_BASE = 3 /* no good completion before the burst: nothing to recover to */
};

/* A run's load step (workload.steps above factor 1, until a step brings it back): the
 * cluster's capacity from the worker model and what was asked and served in the step
 * (pd_metrics_overload.c, docs/metrics.md "Overload"). */
typedef struct pd_metrics_overload {
  int has;               /* the run has a load step that ends */
  uint64_t from_ns, to_ns;
  double capacity_rps;   /* pd_metrics_capacity_rps of the scenario (0: unbounded) */
  uint32_t arrivals;     /* client requests arriving in [from, to) (client retries too) */
  uint32_t good;         /* good completions ending in [from, to) */
  /* shed, over the whole run: answered 503 or 429 with no leg to any worker (admission) */
  uint32_t shed;
  uint64_t shed_ns_sum, shed_ns_max; /* arrival -> the error's head */
} pd_metrics_overload_t;

/* A change of a worker's capacity, kept for the trace's counter tracks. */
typedef struct pd_metrics_trace_ev {
  uint64_t t;
  uint32_t worker;
  int kind;  /* 0 slots held, 1 open legs, 2 stranded slots */
  int delta; /* +1 / -1 */
} pd_metrics_trace_ev_t;

struct pd_metrics_series; /* per-bin TTFT and stranded slots (pd_metrics_series.c) */

typedef struct pd_metrics {
  int keep_trace;                     /* keep per-leg intervals for the trace's counters */
  uint32_t runs;
  const pd_scenario_t *scen;          /* the current run's scenario as given (its faults) */
  /* settings of the current run (scenario config) */
  uint64_t slo_ttft_ns, slo_e2e_ns, grace_ns, window_ns;
  pd_metrics_hist_t ttft, tpot, itl, e2e;
  pd_metrics_hist_t shed;             /* arrival -> head of requests shed (pd_metrics_overload) */
  uint64_t requests, completed, good;
  double duration_s;                  /* summed over runs */
  /* current run */
  int has_arrival;
  uint64_t t_first_arrival, t_last_arrival, t_last_end;
  pd_metrics_worker_t w[PD_SCENARIO_MAX_WORKERS];
  uint32_t n_workers;
  pd_metrics_worker_t total;          /* every worker of every ended run */
  uint32_t *bins;                     /* good completions per bin of window_ns / 10 */
  size_t n_bins, cap_bins;
  int is_bins_cut;                    /* a completion past PD_METRICS_MAX_BINS was not binned */
  int has_burst;
  uint64_t burst_from, burst_to;
  pd_metrics_recovery_t rec;          /* of the last run */
  pd_metrics_overload_t ovl;          /* of the last run */
  pd_metrics_trace_ev_t *tev;         /* keep_trace: capacity changes per worker */
  size_t n_tev, cap_tev;
  /* pd_metrics_note_capacity: peaks of the current run and of every ended run; with
   * keep_trace, the samples of the current run (on change only; past
   * PD_METRICS_MAX_CAP_SAMPLES every other one is dropped and the gap kept per worker
   * doubles, so memory stays bounded) */
  int has_capacity;                   /* a note came in some run */
  pd_metrics_peak_t peak[PD_SCENARIO_MAX_WORKERS];
  pd_metrics_peak_t peak_total;       /* per field, the largest of any worker in any run */
  pd_metrics_cap_sample_t last[PD_SCENARIO_MAX_WORKERS]; /* each worker's latest note */
  uint64_t t_kept[PD_SCENARIO_MAX_WORKERS]; /* when its last sample was kept */
  uint8_t has_last[PD_SCENARIO_MAX_WORKERS];
  pd_metrics_cap_sample_t *cs;
  size_t n_cs, cap_cs;
  uint64_t cs_gap_ns;                 /* the least time between two kept samples of a worker */
  struct pd_metrics_series *series;   /* the current run's timelines for the report; NULL
                                       * until the first sample (or out of memory) */
} pd_metrics_t;

#define PD_METRICS_MAX_CAP_SAMPLES (1u << 18)

struct pd_client_request;
struct pd_trace;

void pd_metrics_init(pd_metrics_t *m, int keep_trace);
void pd_metrics_free(pd_metrics_t *m);
/* A worker's capacity after a step of its engine (the simulator's driver calls it after each
 * one): running slots, queue entries (bootstrap + waiting, or pre-allocation), KV pages used of
 * its pool. Feeds the per-worker peaks of the cost output and, with keep_trace, the trace's
 * counter tracks "<worker> engine". Cheap when nothing changed. */
void pd_metrics_note_capacity(pd_metrics_t *m, uint32_t worker, uint64_t now, uint32_t running,
                              uint32_t queued, uint64_t kv_used_pages, uint64_t kv_total_pages);
/* Start a run of s (its SLOs, grace, window, workers, crash windows); totals carry over. */
void pd_metrics_run_begin(pd_metrics_t *m, const pd_scenario_t *s);
/* The client received data of rq at now (the simulator's on_client). */
void pd_metrics_on_data(pd_metrics_t *m, struct pd_client_request *rq, uint64_t now);
/* A request's record is final (retired, or left at the run's end, now): add it. */
void pd_metrics_add_request(pd_metrics_t *m, const struct pd_client_request *rq, uint64_t now);
/* End the run: its duration, and the recovery after its burst. */
void pd_metrics_run_end(pd_metrics_t *m);
void pd_metrics_req_free(pd_metrics_req_t *x);

void pd_metrics_hist_add(pd_metrics_hist_t *h, uint64_t v);
/* One more in bin b of a growable count array (*n_bins in use of *cap_bins): 0, or -1 when b
 * is past PD_METRICS_MAX_BINS or memory ran out (the count is lost; the caller marks its
 * series cut). The goodput series and I26's use it. */
int pd_metrics_bin_add(uint32_t **bins, size_t *n_bins, size_t *cap_bins, uint64_t b);
/* The p-th percentile (0..100) in ns; 0 when empty. */
double pd_metrics_hist_percentile(const pd_metrics_hist_t *h, double p);
double pd_metrics_hist_mean(const pd_metrics_hist_t *h);
void pd_metrics_hist_free(pd_metrics_hist_t *h);

/* Recovery on a series of good completions per bin (bin i covers [i, i+1) * bin_ns): the
 * pre-burst level is the goodput of the bins wholly between t0 and burst_from; windows of
 * win_bins bins start at each bin boundary from burst_to on and must end by t_stop (the last
 * arrival); the recovery is the first window at >= PD_METRICS_RECOVERED of the level after
 * which no window falls under PD_METRICS_RELAPSE of it (min_rps: the lowest until then). */
pd_metrics_recovery_t pd_metrics_recovery(const uint32_t *bins, size_t n_bins, uint64_t bin_ns,
                                          uint32_t win_bins, uint64_t t0, uint64_t t_stop,
                                          uint64_t burst_from, uint64_t burst_to);

/* Timelines of one run (pd_metrics_series.c), on the goodput series' bins (window_ns / 10),
 * at most PD_METRICS_SERIES_MAX_BINS of them (later samples are dropped and the JSON says
 * "cut"): the TTFT of the completed requests by arrival bin, and the slot time held after
 * the client's end (stranded) per bin. Out of memory drops samples silently (figures only). */
#define PD_METRICS_SERIES_MAX_BINS (1u << 16)
#define PD_METRICS_SERIES_MAX_POINTS 240u /* points per series in the JSON (bins merged) */
void pd_metrics_series_ttft(pd_metrics_t *m, uint64_t t_arrival, uint64_t ttft_ns);
void pd_metrics_series_stranded(pd_metrics_t *m, uint64_t t0, uint64_t t1);
void pd_metrics_series_reset(pd_metrics_t *m); /* a new run */
void pd_metrics_series_free(pd_metrics_t *m);
/* Add "series" (goodput, mean TTFT and stranded slots per merged bin) to the JSON object o
 * when the metrics hold one run with some bins; nothing otherwise. */
void pd_metrics_series_json(const pd_metrics_t *m, void *o);

/* Reporting (pd_metrics_report.c). names: s's worker names for the per-worker list, or NULL
 * (totals only, e.g. pooled over explore's worlds). The JSON is a cJSON object. */
void *pd_metrics_json(const pd_metrics_t *m, const pd_scenario_t *names);
/* One line: "goodput 9.9/s (990/1000 good), ttft p50 ... p99 ... ms, ..." */
void pd_metrics_line(const pd_metrics_t *m, char *buf, size_t cap);
/* Counter tracks per worker (slots held, open legs, stranded) into the trace. */
void pd_metrics_trace(const pd_metrics_t *m, struct pd_trace *t, const pd_scenario_t *s);

/* Capacity (pd_metrics_capacity.c), used by the two files above. */
struct pd_worker_leg;
/* KV page-seconds of leg l (its request ended at t_end when has_end) into w, at now. */
void pd_metrics_kv_held(pd_metrics_worker_t *w, const struct pd_worker_leg *l, int has_end,
                        uint64_t t_end, uint64_t grace, uint64_t now);
/* KV pages a leg kept pinned after its request retired (vLLM): held from since (its
 * retirement, where pd_metrics_kv_held stopped counting) to release, counted like
 * pd_metrics_kv_held counts a hold. */
void pd_metrics_kv_late(pd_metrics_t *m, uint32_t worker, uint64_t pages, uint64_t since,
                        uint64_t release, int has_end, uint64_t t_end);
/* The cluster's service rate in requests/s from its worker model: the smaller of the decode
 * bound (each decode's max_running over the time a request holds its slot: first token and
 * the tokens after it, plus prefill's forward pass and transfer for an SGLang decode, which
 * pre-allocates before prefill runs, S2.6) and the prefill bound (max_running over forward +
 * transfer). An upper bound: queueing, batching limits and KV pages can only lower it.
 * 0 when a role has no worker. */
double pd_metrics_capacity_rps(const pd_scenario_t *s);
void pd_metrics_overload_begin(pd_metrics_t *m, const pd_scenario_t *s);
void pd_metrics_overload_arrival(pd_metrics_t *m, const struct pd_client_request *rq);
void pd_metrics_overload_good(pd_metrics_t *m, uint64_t t_end);
/* Goodput in the step over what the cluster could serve of what was asked: good completions
 * per second in the step / min(arrivals per second in it, capacity). 0 without a step. */
double pd_metrics_overload_share(const pd_metrics_overload_t *o);
void pd_metrics_capacity_begin(pd_metrics_t *m); /* a new run: samples and peaks reset */
void pd_metrics_capacity_end(pd_metrics_t *m);   /* fold the run's peaks into peak_total */
/* The engine counter tracks "<worker> engine" into the trace. */
void pd_metrics_capacity_trace(const pd_metrics_t *m, struct pd_trace *t, const pd_scenario_t *s);

#endif
