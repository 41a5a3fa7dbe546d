/* pd_gateway_metrics: the gateway's counters and their Prometheus text rendering (`GET /metrics`).
 * Plain counters updated by the loop thread only; gauges (load, breaker state) are read from
 * the core at scrape time. Names are listed in docs/gateway.md. */
#ifndef PD_GATEWAY_METRICS_H
#define PD_GATEWAY_METRICS_H
#include <stddef.h>
#include <stdint.h>

#include "pd_dispatch.h"

typedef enum {
  PD_GATEWAY_ROUTE_GENERATE = 0,
  PD_GATEWAY_ROUTE_COMPLETIONS,
  PD_GATEWAY_ROUTE_CHAT,
  PD_GATEWAY_ROUTE_HEALTH,
  PD_GATEWAY_ROUTE_READINESS,
  PD_GATEWAY_ROUTE_METRICS,
  PD_GATEWAY_ROUTE_INFO,
  PD_GATEWAY_ROUTE_OTHER,
  PD_GATEWAY_ROUTE_COUNT,
} pd_gateway_route_t;

/* HTTP statuses counted exactly: 100..599. */
#define PD_GATEWAY_METRICS_STATUS_MIN 100
#define PD_GATEWAY_METRICS_STATUS_SLOTS 500
/* TTFT histogram upper bounds in seconds (+Inf is implied). */
#define PD_GATEWAY_METRICS_TTFT_BUCKETS 14

typedef struct pd_gateway_metrics {
  uint64_t requests[PD_GATEWAY_ROUTE_COUNT][PD_GATEWAY_METRICS_STATUS_SLOTS];
  uint64_t attempts, retries;
  uint64_t outcomes[2][PD_MAX_WORKERS][4]; /* [role][worker][pd_outcome_t] */
  uint64_t breaker_changes[2][PD_MAX_WORKERS];
  uint64_t upstream_errors[2][4]; /* [role][pd_upstream_error_t] */
  uint64_t legs_opened[2], legs_cancelled[2];
  uint64_t client_disconnects, slow_clients, rejected_connections;
  uint64_t aborts_sent, aborts_ok, aborts_failed, aborts_dropped;
  uint64_t resends_refused;
  uint64_t pauses; /* decode legs paused for a slow client (backpressure) */ /* libcurl resends of a generation POST refused (prereq_cb) */
  uint64_t ttft_bucket[PD_GATEWAY_METRICS_TTFT_BUCKETS + 1];
  uint64_t ttft_count;
  double ttft_sum_s;
} pd_gateway_metrics_t;

const char *pd_gateway_route_label(pd_gateway_route_t r);
void pd_gateway_metrics_request(pd_gateway_metrics_t *m, int route, int status);
void pd_gateway_metrics_ttft(pd_gateway_metrics_t *m, uint64_t ns);

/* What the scrape needs besides the counters. */
typedef struct pd_gateway_metrics_view {
  pd_gw_t *core;
  char *const *names[2]; /* worker URLs per role */
  uint32_t n[2];
  uint64_t now_ns;
  uint32_t connections, requests_live;
  uint64_t buffered_bytes, buffered_max; /* client output not yet sent: total, largest */
} pd_gateway_metrics_view_t;

/* Render the exposition text into a malloc'd buffer (*out, *len; free()). 0 or PD_ERR_NOMEM. */
int pd_gateway_metrics_render(const pd_gateway_metrics_t *m, const pd_gateway_metrics_view_t *v,
                              char **out, size_t *len);

#endif
