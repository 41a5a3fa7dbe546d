/* The gateway's client connections from the loop's side: the core's client actions (head,
 * data, end) fill a connection's buffer, a hang-up or the shutdown cancels its request in the
 * core, an info proxy's answer completes it; each then wakes the connection for
 * libmicrohttpd (pd_gateway_http.c), which drains the buffer. */
#include <string.h>

#include "pd_gateway_int.h"

static void client_data(pd_gateway_t *g, pd_gateway_conn_t *c, const pd_action_t *a) {
  if (c->is_gone) return;
  if (c->out.len - c->out_off + a->len > PD_GATEWAY_HTTP_MAX_OUT_BYTES) { /* reader too slow */
    c->is_gone = 1;
    g->metrics.slow_clients++;
    pd_gateway_unwatch(g, c);
    if (c->rq && g->n_gone_pending < sizeof g->gone_pending / sizeof g->gone_pending[0])
      g->gone_pending[g->n_gone_pending++] = c->rq->id;
    return;
  }
  if (c->out_off && c->out_off == c->out.len) c->out.len = c->out_off = 0;
  if (c->out_off >= PD_GATEWAY_HTTP_COMPACT_BYTES) { /* a reader that never quite catches up */
    memmove(c->out.p, c->out.p + c->out_off, c->out.len - c->out_off);
    c->out.len -= c->out_off;
    c->out_off = 0;
  }
  if (pd_buf_append(NULL, &c->out, a->data, a->len)) {
    c->is_gone = 1; /* out of memory: drop the client, NOTIFY_COMPLETED cancels the legs */
    return;
  }
  if (!c->saw_data && c->head_status >= 200 && c->head_status < 300)
    pd_gateway_metrics_ttft(&g->metrics, pd_gateway_now_ns() - c->t_start_ns);
  c->saw_data = 1;
}

void pd_gateway_http_client_action(pd_gateway_t *g, pd_gateway_conn_t *c, const pd_action_t *a) {
  switch (a->kind) {
  case PD_ACT_CLIENT_HEAD:
    if (c->head_status) return; /* one head per response */
    c->head_status = a->status;
    c->is_sse = a->flag;
    break;
  case PD_ACT_CLIENT_DATA: client_data(g, c, a); break;
  case PD_ACT_CLIENT_END:
    c->is_ended = 1;
    c->is_abort = a->flag;
    pd_gateway_unwatch(g, c); /* nothing left to cancel; MHD sees the rest */
    break;
  default: return;
  }
  pd_gateway_http_wake(c);
}

void pd_gateway_http_client_hup(pd_gateway_t *g, pd_gateway_conn_t *c) {
  pd_gateway_unwatch(g, c);
  if (c->is_ended || c->is_gone || !c->rq) return;
  c->is_gone = 1;
  g->metrics.client_disconnects++;
  pd_event_t ev = {.kind = PD_EV_CLIENT_GONE, .req_id = c->rq->id};
  pd_gateway_feed(g, &ev);
  pd_gateway_http_wake(c); /* MHD closes it: handler or reader now refuse */
}

void pd_gateway_http_info_done(pd_gateway_t *g, pd_gateway_conn_t *c, long status,
                               const pd_buf_t *body) {
  (void)g;
  c->info = NULL;
  if (status == 0) { /* transport error: smg's proxy_request_failed (W6.1) */
    const char *m = "{\"error\":{\"type\":\"Internal Server Error\",\"code\":"
                    "\"proxy_request_failed\",\"message\":\"prefill worker unreachable\","
                    "\"status\":500}}";
    c->head_status = 500;
    pd_buf_append(NULL, &c->out, m, strlen(m));
  } else {
    int s = (int)status;
    int keep = (s >= 200 && s < 300) || s == 400 || s == 404 || s == 500 || s == 502 || s == 503;
    c->head_status = keep ? s : 500;
    if (body->len) pd_buf_append(NULL, &c->out, body->p, body->len);
  }
  c->is_ended = 1;
  pd_gateway_http_wake(c);
}

static const char shutdown_json[] =
    "{\"error\":{\"type\":\"Service Unavailable\",\"code\":\"shutting_down\","
    "\"message\":\"the gateway is shutting down\",\"status\":503}}";

/* Shutdown: every request not yet answered is cancelled in the core (legs closed, aborts
 * posted); a client still without a head gets a 503, a stream already started is cut. */
void pd_gateway_http_cancel_all(pd_gateway_t *g) {
  if (g->has_httpd) pd_httpd_gate_quiesce(&g->httpd); /* no new connections */
  for (pd_gateway_conn_t *c = g->conns; c; c = c->next) {
    if (c->rq && !c->is_ended && !c->is_gone) {
      c->is_gone = 1;
      pd_gateway_unwatch(g, c);
      pd_event_t ev = {.kind = PD_EV_CLIENT_GONE, .req_id = c->rq->id};
      pd_gateway_feed(g, &ev);
    }
    if (c->info) pd_gateway_upstream_info_cancel(g, c);
    if (!c->head_status && !c->is_queued && c->kind != PD_GATEWAY_HTTP_LOCAL) {
      c->is_gone = 0;
      c->head_status = 503;
      c->is_sse = 0;
      c->is_ended = 1;
      pd_buf_append(NULL, &c->out, shutdown_json, sizeof shutdown_json - 1);
    } else if (!c->is_ended) {
      c->is_gone = 1;
    }
    pd_gateway_http_wake(c);
  }
}
