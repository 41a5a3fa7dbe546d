/* pd_gw_metrics: the gateway's counters and their Prometheus text rendering (`GET /metrics`).
 * Plain counters updated by the loop thread only; gauges (load, breaker state) are read from
 * the core at scrape time. Names are listed in docs/gateway.md. */
#ifndef PD_GW_METRICS_H
#define PD_GW_METRICS_H
#include <stddef.h>
#include <stdint.h>

#include "pd_dispatch.h"

typedef enum {
  PD_GWM_R_GENERATE = 0,
  PD_GWM_R_COMPLETIONS,
  PD_GWM_R_CHAT,
  PD_GWM_R_HEALTH,
  PD_GWM_R_READINESS,
  PD_GWM_R_METRICS,
  PD_GWM_R_INFO,
  PD_GWM_R_OTHER,
  PD_GWM_R_COUNT,
} pd_gwm_route_t;

/* HTTP statuses counted exactly: 100..599. */
#define PD_GWM_STATUS_MIN 100
#define PD_GWM_STATUS_SLOTS 500
/* TTFT histogram upper bounds in seconds (+Inf is implied). */
#define PD_GWM_TTFT_BUCKETS 14

typedef struct pd_gwm {
  uint64_t requests[PD_GWM_R_COUNT][PD_GWM_STATUS_SLOTS];
  uint64_t attempts, retries;
  uint64_t outcomes[2][PD_MAX_WORKERS][4]; /* [role][worker][pd_outcome_t] */
  uint64_t breaker_changes[2][PD_MAX_WORKERS];
  uint64_t upstream_errors[2][4]; /* [role][pd_uperr_t] */
  uint64_t legs_opened[2], legs_cancelled[2];
  uint64_t client_disconnects, slow_clients, rejected_connections;
  uint64_t aborts_sent, aborts_ok, aborts_failed, aborts_dropped;
  uint64_t resends_refused;
  uint64_t pauses; /* decode legs paused for a slow client (backpressure) */ /* libcurl resends of a generation POST refused (prereq_cb) */
  uint64_t ttft_bucket[PD_GWM_TTFT_BUCKETS + 1];
  uint64_t ttft_count;
  double ttft_sum_s;
} pd_gwm_t;

const char *pd_gwm_route_label(pd_gwm_route_t r);
void pd_gwm_request(pd_gwm_t *m, int route, int status);
void pd_gwm_ttft(pd_gwm_t *m, uint64_t ns);

/* What the scrape needs besides the counters. */
typedef struct pd_gwm_view {
  pd_gw_t *core;
  char *const *names[2]; /* worker URLs per role */
  uint32_t n[2];
  uint64_t now_ns;
  uint32_t connections, requests_live;
  uint64_t buffered_bytes, buffered_max; /* client output not yet sent: total, largest */
} pd_gwm_view_t;

/* Render the exposition text into a malloc'd buffer (*out, *len; free()). 0 or PD_ERR_NOMEM. */
int pd_gwm_render(const pd_gwm_t *m, const pd_gwm_view_t *v, char **out, size_t *len);

#endif
