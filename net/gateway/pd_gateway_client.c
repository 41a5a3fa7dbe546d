/* The gateway's client connections from the loop's side: the core's client actions (head,
 * data, end) fill a connection's buffer, a hang-up or the shutdown cancels its request in the
 * core, an info proxy's answer completes it; each then wakes the connection for
 * libmicrohttpd (pd_gateway_http.c), which drains the buffer. */
#define _GNU_SOURCE /* EPOLLRDHUP */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "pd_gateway_int.h"

/* The client is cut off while an action is being carried out (no feeding from here): its
 * CLIENT_GONE is fed after the batch. */
static void drop_client(pd_gateway_t *g, pd_gateway_conn_t *c) {
  c->is_gone = 1;
  pd_gateway_unwatch(g, c);
  if (c->rq && g->n_gone_pending < sizeof g->gone_pending / sizeof g->gone_pending[0])
    g->gone_pending[g->n_gone_pending++] = c->rq->id;
}

/* Room for n more bytes at the end of c->out: sent bytes at its front are dropped first. */
static int out_append(pd_gateway_conn_t *c, const void *p, size_t n) {
  if (c->out_off && c->out_off == c->out.len) c->out.len = c->out_off = 0;
  if (c->out_off >= PD_GATEWAY_HTTP_COMPACT_BYTES) { /* a reader that never quite catches up */
    memmove(c->out.p, c->out.p + c->out_off, c->out.len - c->out_off);
    c->out.len -= c->out_off;
    c->out_off = 0;
  }
  return pd_buf_append(NULL, &c->out, p, n);
}

/* ---------- direct streams ----------
 * Once MHD has sent an SSE stream's head, the reader (pd_gateway_http.c) writes the first
 * chunk here itself (pd_gateway_http_direct_first; TCP_CORK joins it to the head), or, with
 * nothing to send yet, only marks the stream direct; either way the connection stays
 * suspended and each later chunk is written here, in the
 * turn its bytes came from the worker: one sendmsg per chunk, no resume, no MHD_run, no copy.
 * Framing is HTTP/1.1 chunked, as MHD's. What the socket does not take waits in c->out (the
 * backlog backpressure looks at) and goes out on EPOLLOUT; a reader that takes nothing for
 * --client-timeout-s is cut, as MHD would. MHD is resumed only to end the stream. */

static void out_wait(pd_gateway_t *g, pd_gateway_conn_t *c, int is_on) {
  if (c->is_out_wait == is_on || !c->is_watched) return;
  struct epoll_event ev = {.events = EPOLLRDHUP | (is_on ? EPOLLOUT : 0u),
                           .data.u64 = PD_GATEWAY_TAG(PD_GATEWAY_TAG_WATCH, (uint32_t)c->fd)};
  if (epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->fd, &ev)) return;
  c->is_out_wait = is_on;
  g->n_out_wait = is_on ? g->n_out_wait + 1 : g->n_out_wait - 1;
  if (is_on) c->out_wait_ns = pd_gateway_now_ns();
}

/* A direct stream's end (or cut): MHD takes the connection back once nothing waits. */
static void direct_end(pd_gateway_t *g, pd_gateway_conn_t *c) {
  if (pd_gateway_http_backlog(c) && !c->is_abort && !c->is_gone) return; /* after the flush */
  if (c->is_abort || c->is_gone)
    pd_gateway_unwatch(g, c);
  else
    pd_gateway_unwatch_keep(g, c); /* the connection may carry the next request */
  pd_gateway_http_wake(c);
}

/* Write one chunk (framed) to a direct stream's socket; what it does not take waits in c->out.
 * 0, or -1 when the socket failed (reset, closed) or memory ran out: the caller drops it. */
static int direct_write(pd_gateway_t *g, pd_gateway_conn_t *c, const void *p, size_t len) {
  char hd[24];
  int hn = snprintf(hd, sizeof hd, "%zx\r\n", len);
  struct iovec iov[3] = {{hd, (size_t)hn}, {(void *)(uintptr_t)p, len}, {"\r\n", 2}};
  size_t sent = 0;
  if (g->is_deferring && (c->is_deferred || g->n_defer < PD_GATEWAY_DEFER_MAX)) {
    for (int i = 0; i < 3; i++) /* sent with the stream's other chunks of this libcurl call */
      if (out_append(c, iov[i].iov_base, iov[i].iov_len)) return -1; /* out of memory */
    if (!c->is_deferred) {
      c->is_deferred = 1;
      g->defer[g->n_defer++] = c;
    }
    return 0;
  }
  if (!pd_gateway_http_backlog(c)) { /* else the socket is full: queue behind what waits */
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 3};
    ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return -1; /* reset or closed: the watch reports it too */
    sent = n > 0 ? (size_t)n : 0;
  }
  for (int i = 0; i < 3; i++) { /* the rest waits for room */
    size_t skip = sent < iov[i].iov_len ? sent : iov[i].iov_len;
    sent -= skip;
    if (iov[i].iov_len > skip &&
        out_append(c, (const char *)iov[i].iov_base + skip, iov[i].iov_len - skip))
      return -1; /* out of memory */
  }
  if (pd_gateway_http_backlog(c)) out_wait(g, c, 1);
  return 0;
}

static void direct_send(pd_gateway_t *g, pd_gateway_conn_t *c, const void *p, size_t len) {
  if (direct_write(g, c, p, len)) drop_client(g, c);
}

void pd_gateway_http_cork(pd_gateway_t *g, pd_gateway_conn_t *c, int is_on) {
  if (c->is_corked == is_on || c->fd < 0) return;
  int v = is_on;
  if (setsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &v, sizeof v) && is_on) return;
  c->is_corked = is_on;
  g->n_corked = is_on ? g->n_corked + 1 : g->n_corked - 1;
}

void pd_gateway_http_uncork_all(pd_gateway_t *g) {
  uint32_t guard = 0;
  for (pd_gateway_conn_t *c = g->conns; c && g->n_corked && guard < (1u << 24);
       c = c->next, guard++)
    if (c->is_corked) pd_gateway_http_cork(g, c, 0);
}

int pd_gateway_http_direct_first(pd_gateway_t *g, pd_gateway_conn_t *c) {
  char first[PD_GATEWAY_HTTP_DIRECT_FIRST_MAX];
  size_t n = pd_gateway_http_backlog(c);
  if (!n || n > sizeof first) return 1;
  memcpy(first, c->out.p + c->out_off, n);
  c->out.len = c->out_off = 0;
  c->is_direct = 1;
  if (direct_write(g, c, first, n)) {
    c->is_gone = 1; /* MHD closes it; NOTIFY_COMPLETED feeds CLIENT_GONE */
    return -1;
  }
  return 0;
}

void pd_gateway_http_client_writable(pd_gateway_t *g, pd_gateway_conn_t *c) {
  size_t n0 = pd_gateway_http_backlog(c);
  ssize_t n = n0 ? send(c->fd, c->out.p + c->out_off, n0, MSG_NOSIGNAL | MSG_DONTWAIT) : 0;
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    pd_gateway_http_client_hup(g, c);
    return;
  }
  if (n > 0) {
    c->out_off += (size_t)n;
    c->out_wait_ns = pd_gateway_now_ns();
  }
  if (c->rq && !c->is_ended && pd_gateway_http_backlog(c) <= PD_GATEWAY_HTTP_RESUME_BYTES)
    pd_gateway_upstream_resume_req(g, c->rq); /* backpressure: decode may be read again */
  if (pd_gateway_http_backlog(c)) return;
  c->out.len = c->out_off = 0;
  out_wait(g, c, 0);
  if (c->is_ended) direct_end(g, c);
}

void pd_gateway_http_flush_deferred(pd_gateway_t *g) {
  for (uint32_t i = 0; i < g->n_defer; i++) {
    pd_gateway_conn_t *c = g->defer[i];
    c->is_deferred = 0;
    if (c->is_gone || c->is_out_wait) continue; /* EPOLLOUT sends what waits */
    pd_gateway_http_client_writable(g, c);
    if (pd_gateway_http_backlog(c) && !c->is_gone) out_wait(g, c, 1);
  }
  g->n_defer = 0;
}

void pd_gateway_http_client_stuck(pd_gateway_t *g) {
  uint64_t now = pd_gateway_now_ns();
  if (now < g->next_stuck_ns) return;
  g->next_stuck_ns = now + 1000000000ull;
  uint64_t limit = (uint64_t)g->cfg.client_timeout_s * 1000000000ull;
  uint32_t guard = 0;
  for (pd_gateway_conn_t *c = g->conns; c && guard < (1u << 24); c = c->next, guard++)
    if (c->is_out_wait && now - c->out_wait_ns >= limit) {
      g->metrics.slow_clients++;
      pd_gateway_http_client_hup(g, c); /* cancelled like a disconnect; MHD closes it */
    }
}

static void client_data(pd_gateway_t *g, pd_gateway_conn_t *c, const pd_action_t *a) {
  if (c->is_gone) return;
  if (c->out.len - c->out_off + a->len > PD_GATEWAY_HTTP_MAX_OUT_BYTES) { /* reader too slow */
    g->metrics.slow_clients++;
    drop_client(g, c);
    return;
  }
  if (c->is_direct) {
    direct_send(g, c, a->data, a->len);
  } else if (out_append(c, a->data, a->len)) {
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
    if (a->deadline_ns && (a->status == 503 || a->status == 429)) /* R-ADMIT-SHED */
      c->retry_after_s = (uint32_t)((a->deadline_ns + 999999999u) / 1000000000u);
    if (c->is_sse && c->is_http11 && c->is_watched && !c->is_queued) pd_gateway_http_cork(g, c, 1);
    break;
  case PD_ACT_CLIENT_DATA:
    client_data(g, c, a);
    if (c->is_direct && !c->is_gone) return; /* written: MHD stays suspended */
    break;
  case PD_ACT_CLIENT_END:
    c->is_ended = 1;
    c->is_abort = a->flag;
    if (c->is_direct) {
      direct_end(g, c);
      return;
    }
    if (c->is_abort || c->is_gone)
      pd_gateway_unwatch(g, c); /* nothing left to cancel; MHD sees the rest */
    else
      pd_gateway_unwatch_keep(g, c);
    break;
  default: return;
  }
  pd_gateway_http_wake(c);
}

void pd_gateway_http_client_hup(pd_gateway_t *g, pd_gateway_conn_t *c) {
  pd_gateway_unwatch(g, c);
  if (c->is_direct && c->is_ended && !c->is_gone) { /* its end waited for room: cut it */
    c->is_gone = 1;
    pd_gateway_http_wake(c);
    return;
  }
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
