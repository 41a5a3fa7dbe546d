/* I4 from a gateway's /metrics (net/conform/pd_conform_metrics.c). */
#ifndef PD_CONFORM_METRICS_H
#define PD_CONFORM_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct pd_conform_runner;

/* GET http://127.0.0.1:port/metrics: the body (malloc'd, NUL-terminated; free()) or NULL
 * when the gateway has no such route, answers non-200, or takes longer than timeout_ms. */
char *pd_conform_scrape_metrics(uint16_t port, unsigned timeout_ms);

/* Could the recorded outcomes of one worker (success, failure+timeout) each be given their
 * own leg whose truth class (ok, failed/never, stalled/pending, cancelled, open when the run
 * stopped) agrees? 1 yes, 0 no (*bad_set: the outcome classes, bit per class, that do not
 * fit). */
int pd_conform_outcomes_feasible(const uint64_t rec[2], const uint64_t legs[5], unsigned *bad_set);

/* Judge I4 from an exposition against the run's legs: -1 not judged (the exposition has no
 * pdref_worker_outcomes_total for the run's workers, or a leg was still open when the
 * gateway was stopped), 0 no violation shown, 1 violated (reason filled). */
int pd_conform_judge_metrics(const struct pd_conform_runner *run, const char *text, char *reason,
                             size_t cap);

/* The exposition shows work held: a pdref_worker_load or pdref_requests_in_flight above 0. */
int pd_conform_metrics_busy(const char *text);

/* Quiescence from an exposition (docs/conformance.md "Quiescence"): -1 not judged (no
 * pdref_worker_load for the run's workers), 0 every load and pdref_requests_in_flight is 0,
 * 1 something is still held (reason names it). */
int pd_conform_judge_quiescence(const struct pd_conform_runner *run, const char *text, char *reason,
                                size_t cap);

#endif
