/* Prometheus text exposition of the gateway counters. */
#include "pd_gateway_metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_buf.h"
#include "pd_err.h"

static const double ttft_le[PD_GATEWAY_METRICS_TTFT_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};

static const char *const route_labels[PD_GATEWAY_ROUTE_COUNT] = {"/generate",
                                                         "/v1/completions",
                                                         "/v1/chat/completions",
                                                         "/health",
                                                         "/readiness",
                                                         "/metrics",
                                                         "info",
                                                         "other"};

const char *pd_gateway_route_label(pd_gateway_route_t r) {
  return (unsigned)r < PD_GATEWAY_ROUTE_COUNT ? route_labels[r] : "other";
}

void pd_gateway_metrics_request(pd_gateway_metrics_t *m, int route, int status) {
  if (route < 0 || route >= PD_GATEWAY_ROUTE_COUNT) route = PD_GATEWAY_ROUTE_OTHER;
  int i = status - PD_GATEWAY_METRICS_STATUS_MIN;
  if (i < 0 || i >= PD_GATEWAY_METRICS_STATUS_SLOTS) return;
  m->requests[route][i]++;
}

void pd_gateway_metrics_ttft(pd_gateway_metrics_t *m, uint64_t ns) {
  double s = (double)ns / 1e9;
  int b = 0;
  while (b < PD_GATEWAY_METRICS_TTFT_BUCKETS && s > ttft_le[b])
    b++;
  m->ttft_bucket[b]++;
  m->ttft_count++;
  m->ttft_sum_s += s;
}

/* ---------- text buffer ---------- */

typedef struct tbuf {
  pd_buf_t b; /* the default limit (8 MiB) is far past 2 x 256 workers' lines */
  int is_failed;
} tbuf_t;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
put(tbuf_t *b, const char *fmt, ...) {
  if (b->is_failed) return;
  va_list ap;
  va_start(ap, fmt);
  if (pd_buf_vprintf(NULL, &b->b, fmt, ap)) b->is_failed = 1;
  va_end(ap);
}

/* Label values are worker URLs: escape backslash, quote and newline. */
static void put_label(tbuf_t *b, const char *s) {
  char esc[512];
  size_t j = 0;
  for (; s && *s && j + 2 < sizeof esc; s++) {
    if (*s == '\\' || *s == '"') esc[j++] = '\\';
    if (*s == '\n') {
      esc[j++] = '\\';
      esc[j++] = 'n';
      continue;
    }
    esc[j++] = *s;
  }
  esc[j] = 0;
  put(b, "%s", esc);
}

static void head(tbuf_t *b, const char *name, const char *type, const char *help) {
  put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One series without labels: its HELP and TYPE lines and its value. */
static void scalar(tbuf_t *b, const char *name, const char *type, const char *help, uint64_t v) {
  head(b, name, type, help);
  put(b, "%s %llu\n", name, (unsigned long long)v);
}

static void worker_labels(tbuf_t *b, const pd_gateway_metrics_view_t *v, int r, uint32_t w) {
  put(b, "role=\"%s\",worker=\"", pd_role_name((pd_role_t)r));
  put_label(b, v->names[r][w]);
  put(b, "\"");
}

static void render_requests(tbuf_t *b, const pd_gateway_metrics_t *m) {
  head(b, "pdref_requests_total", "counter",
       "Client requests answered, by route and HTTP status (499: client left before a head).");
  for (int r = 0; r < PD_GATEWAY_ROUTE_COUNT; r++)
    for (int s = 0; s < PD_GATEWAY_METRICS_STATUS_SLOTS; s++)
      if (m->requests[r][s])
        put(b, "pdref_requests_total{route=\"%s\",status=\"%d\"} %llu\n", route_labels[r],
            s + PD_GATEWAY_METRICS_STATUS_MIN, (unsigned long long)m->requests[r][s]);
  scalar(b, "pdref_attempts_total", "counter", "Attempts started (selection failures included).",
         m->attempts);
  scalar(b, "pdref_retries_total", "counter", "Attempts after the first of their request.",
         m->retries);
}

static void render_workers(tbuf_t *b, const pd_gateway_metrics_t *m,
                           const pd_gateway_metrics_view_t *v) {
  head(b, "pdref_worker_outcomes_total", "counter",
       "Outcomes recorded per worker by the core (success, failure, timeout, cancelled).");
  for (int r = 0; r < 2; r++)
    for (uint32_t w = 0; w < v->n[r]; w++)
      for (int o = 0; o < 4; o++) {
        put(b, "pdref_worker_outcomes_total{");
        worker_labels(b, v, r, w);
        put(b, ",outcome=\"%s\"} %llu\n", pd_outcome_name((pd_outcome_t)o),
            (unsigned long long)m->outcomes[r][w][o]);
      }
  head(b, "pdref_worker_breaker_state", "gauge", "Circuit breaker: 0 closed, 1 open, 2 half-open.");
  for (int r = 0; r < 2; r++)
    for (uint32_t w = 0; w < v->n[r]; w++) {
      put(b, "pdref_worker_breaker_state{");
      worker_labels(b, v, r, w);
      put(b, "} %d\n", (int)pd_gw_breaker_state(v->core, (pd_role_t)r, w, v->now_ns));
    }
  head(b, "pdref_worker_breaker_transitions_total", "counter", "Breaker state changes.");
  for (int r = 0; r < 2; r++)
    for (uint32_t w = 0; w < v->n[r]; w++) {
      put(b, "pdref_worker_breaker_transitions_total{");
      worker_labels(b, v, r, w);
      put(b, "} %llu\n", (unsigned long long)m->breaker_changes[r][w]);
    }
  head(b, "pdref_worker_load", "gauge", "Requests the core counts against the worker now.");
  for (int r = 0; r < 2; r++)
    for (uint32_t w = 0; w < v->n[r]; w++) {
      put(b, "pdref_worker_load{");
      worker_labels(b, v, r, w);
      put(b, "} %u\n", pd_gw_load(v->core, (pd_role_t)r, w));
    }
}

static void render_legs(tbuf_t *b, const pd_gateway_metrics_t *m) {
  static const char *const kinds[4] = {"connect", "reset", "timeout", "read"};
  head(b, "pdref_upstream_errors_total", "counter", "Transport errors of worker legs by kind.");
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < 4; k++)
      put(b, "pdref_upstream_errors_total{role=\"%s\",kind=\"%s\"} %llu\n",
          pd_role_name((pd_role_t)r), kinds[k], (unsigned long long)m->upstream_errors[r][k]);
  head(b, "pdref_legs_opened_total", "counter", "Worker legs opened.");
  for (int r = 0; r < 2; r++)
    put(b, "pdref_legs_opened_total{role=\"%s\"} %llu\n", pd_role_name((pd_role_t)r),
        (unsigned long long)m->legs_opened[r]);
  head(b, "pdref_legs_cancelled_total", "counter", "Worker legs closed by the gateway.");
  for (int r = 0; r < 2; r++)
    put(b, "pdref_legs_cancelled_total{role=\"%s\"} %llu\n", pd_role_name((pd_role_t)r),
        (unsigned long long)m->legs_cancelled[r]);
  scalar(b, "pdref_upstream_pauses_total", "counter",
         "Times a worker leg stopped being read because its client had too much unsent output.",
         m->pauses);
  scalar(b, "pdref_upstream_resends_refused_total", "counter",
         "Generation requests libcurl would have sent again on a fresh connection after a reused "
         "one failed before the response; refused, the leg fails as a reset.",
         m->resends_refused);
  head(b, "pdref_abort_requests_total", "counter",
       "POST /abort_request by result (ok, failed, dropped over the in-flight limit).");
  put(b, "pdref_abort_requests_total{result=\"ok\"} %llu\n", (unsigned long long)m->aborts_ok);
  put(b, "pdref_abort_requests_total{result=\"failed\"} %llu\n",
      (unsigned long long)m->aborts_failed);
  put(b, "pdref_abort_requests_total{result=\"dropped\"} %llu\n",
      (unsigned long long)m->aborts_dropped);
}

/* R-ADMIT-*: the reference's admission queue and what it shed, by reason (the core's counts). */
static void render_admission(tbuf_t *b, const pd_gateway_metrics_view_t *v) {
  pd_admit_stats_t a;
  pd_gw_admit_stats(v->core, &a);
  scalar(b, "pdref_admission_queued_total", "counter",
         "Requests that waited in the admission queue for a pair with room.", a.queued);
  scalar(b, "pdref_admission_dequeued_total", "counter",
         "Queued requests that started when capacity freed.", a.dequeued);
  scalar(b, "pdref_admission_queue_length", "gauge", "Requests waiting right now.",
         a.now_queued);
  head(b, "pdref_admission_shed_total", "counter",
       "Requests answered 503 by admission, by reason (docs/spec.md R-ADMIT-SHED, R-ADMIT-EARLY).");
  put(b, "pdref_admission_shed_total{reason=\"queue_full\"} %llu\n", (unsigned long long)a.shed_full);
  put(b, "pdref_admission_shed_total{reason=\"queue_timeout\"} %llu\n",
      (unsigned long long)a.shed_timeout);
  put(b, "pdref_admission_shed_total{reason=\"queue_wait\"} %llu\n", (unsigned long long)a.shed_wait);
  head(b, "pdref_admission_shed_by_class_total", "counter",
       "Requests answered 503 by admission, by priority class, evictions included (docs/spec.md "
       "R-ADMIT-PRIO).");
  for (int k = 0; k < PD_PRIO_COUNT; k++)
    put(b, "pdref_admission_shed_by_class_total{class=\"%s\"} %llu\n", pd_prio_name(k),
        (unsigned long long)a.shed_by_class[k]);
  scalar(b, "pdref_admission_evicted_total", "counter",
         "Queued requests evicted by a higher class's arrival into the full queue (R-ADMIT-PRIO).",
         a.evicted);
  scalar(b, "pdref_retry_denied_total", "counter",
         "Retries the retry budget refused (docs/spec.md R-RETRY-BUDGET).", a.retry_denied);
  head(b, "pdref_admission_wait_seconds", "summary",
       "Time requests waited in the admission queue before they started or left.");
  put(b, "pdref_admission_wait_seconds_sum %.9f\n", (double)a.wait_ns_sum / 1e9);
  put(b, "pdref_admission_wait_seconds_count %llu\n",
      (unsigned long long)(a.dequeued + a.shed_timeout));
}

static void render_clients(tbuf_t *b, const pd_gateway_metrics_t *m,
                           const pd_gateway_metrics_view_t *v) {
  scalar(b, "pdref_client_disconnects_total", "counter",
         "Clients that went away before their response ended.", m->client_disconnects);
  scalar(b, "pdref_slow_clients_total", "counter",
         "Clients cut off because their unread output exceeded the buffer limit.", m->slow_clients);
  scalar(b, "pdref_rejected_connections_total", "counter",
         "Requests answered 503 because the connection limit was reached.",
         m->rejected_connections);
  scalar(b, "pdref_connections", "gauge", "Open client connections.", v->connections);
  scalar(b, "pdref_requests_in_flight", "gauge",
         "Requests the core holds (incl. supervised tails).", v->requests_live);
  render_admission(b, v);
  scalar(b, "pdref_client_buffered_bytes", "gauge",
         "Response bytes held for clients that have not taken them yet (all connections).",
         v->buffered_bytes);
  scalar(b, "pdref_client_buffered_bytes_max", "gauge",
         "The most response bytes held for one client connection right now.", v->buffered_max);
}

static void render_ttft(tbuf_t *b, const pd_gateway_metrics_t *m) {
  head(b, "pdref_ttft_seconds", "histogram",
       "Time from the complete client request to its first response byte (2xx heads).");
  uint64_t cum = 0;
  for (int i = 0; i < PD_GATEWAY_METRICS_TTFT_BUCKETS; i++) {
    cum += m->ttft_bucket[i];
    put(b, "pdref_ttft_seconds_bucket{le=\"%g\"} %llu\n", ttft_le[i], (unsigned long long)cum);
  }
  cum += m->ttft_bucket[PD_GATEWAY_METRICS_TTFT_BUCKETS];
  put(b, "pdref_ttft_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
  put(b, "pdref_ttft_seconds_sum %.9f\n", m->ttft_sum_s);
  put(b, "pdref_ttft_seconds_count %llu\n", (unsigned long long)m->ttft_count);
}

int pd_gateway_metrics_render(const pd_gateway_metrics_t *m, const pd_gateway_metrics_view_t *v,
                              char **out, size_t *len) {
  tbuf_t b = {{0}, 0};
  render_requests(&b, m);
  render_workers(&b, m, v);
  render_legs(&b, m);
  render_clients(&b, m, v);
  render_ttft(&b, m);
  if (b.is_failed || !b.b.p) {
    pd_buf_free(NULL, &b.b);
    return PD_ERR_NOMEM;
  }
  *out = (char *)b.b.p;
  *len = b.b.len;
  return 0;
}
