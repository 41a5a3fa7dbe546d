/* Connection limit, request deadline and framing checks shared by the gateway's and the
 * mock's libmicrohttpd daemons (pd_httpd.h). */
#include "pd_httpd.h"

#include <errno.h>
#include <netinet/in.h>
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pd_err.h"
#include "pd_httpd_int.h"

#define NS_PER_S 1000000000ull

/* One connection libmicrohttpd holds (its socket_context). */
struct pd_httpd_conn {
  pd_httpd_conn_t *prev, *next;
  int fd;
  int is_whole;  /* the current request is whole: no clock */
  int is_killed; /* refused or timed out: the socket is shut down, MHD closes it */
  int is_idle;   /* kept alive between requests: a response is over, no new request begun */
  int is_evicted; /* closed to make room (counted in h->n_leaving until MHD closes it) */
  pd_httpd_peer_t peer;
  uint64_t since_ns, bound_ns;
};

uint64_t pd_httpd_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static const char *phrase(unsigned status) {
  switch (status) {
  case 400: return "Bad Request";
  case 408: return "Request Timeout";
  case 414: return "URI Too Long";
  case 431: return "Request Header Fields Too Large";
  case 413: return "Content Too Large";
  case 503: return "Service Unavailable";
  default: return "Error";
  }
}

size_t pd_httpd_error_json(char *buf, size_t cap, unsigned status, const char *code,
                           const char *msg) {
  if (!cap) return 0;
  char esc[256];
  size_t n = 0;
  for (const char *p = msg; *p && n + 2 < sizeof esc; p++) { /* msg is ours: ASCII */
    if (*p == '"' || *p == '\\') esc[n++] = '\\';
    esc[n++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
  }
  esc[n] = 0;
  int k = snprintf(buf, cap,
                   "{\"error\":{\"type\":\"%s\",\"code\":\"%s\",\"message\":\"%s\",\"status\":%u}}",
                   phrase(status), code, esc, status);
  if (k < 0) k = 0;
  return (size_t)k < cap ? (size_t)k : cap - 1;
}

/* A whole response written straight to the socket (nothing else is being written to it:
 * libmicrohttpd has not read a request yet, or the request is incomplete). Best effort. */
void pd_httpd_raw_error(int fd, unsigned status, const char *code, const char *msg) {
  char body[512], all[768];
  size_t bn = pd_httpd_error_json(body, sizeof body, status, code, msg);
  int n = snprintf(all, sizeof all,
                   "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
                   "Content-Length: %zu\r\n\r\n%s",
                   status, phrase(status), bn, body);
  if (n > 0 && (size_t)n < sizeof all) {
    ssize_t w = send(fd, all, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w;
  }
}

int pd_httpd_init(pd_httpd_t *h, uint32_t max_conns, uint32_t request_s, uint32_t idle_s,
                  int is_counted_at_accept) {
  memset(h, 0, sizeof *h);
  h->gate_ep = h->listen_fd = -1;
  h->max_conns = max_conns ? max_conns : 1;
  h->max_per_peer = h->max_conns;
  h->request_ns = (uint64_t)(request_s ? request_s : 1) * NS_PER_S;
  h->idle_ns = (uint64_t)idle_s * NS_PER_S;
  h->is_counted_at_accept = is_counted_at_accept;
  if (pthread_mutex_init(&h->mu, NULL)) return PD_ERR_NOMEM;
  if (pthread_cond_init(&h->cv, NULL)) {
    pthread_mutex_destroy(&h->mu);
    return PD_ERR_NOMEM;
  }
  return 0;
}

void pd_httpd_set_per_peer(pd_httpd_t *h, uint32_t n) {
  h->max_per_peer = n ? n : 1;
}

void pd_httpd_peer_of(const struct sockaddr *a, socklen_t alen, pd_httpd_peer_t *out) {
  memset(out, 0, sizeof *out);
  if (a && a->sa_family == AF_INET6 && alen >= (socklen_t)sizeof(struct sockaddr_in6)) {
    memcpy(out->a, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
  } else if (a && a->sa_family == AF_INET && alen >= (socklen_t)sizeof(struct sockaddr_in)) {
    out->a[10] = out->a[11] = 0xff;
    memcpy(out->a + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
  }
}

unsigned int pd_httpd_mhd_limit(const pd_httpd_t *h) {
  return h->max_conns + PD_HTTPD_MHD_HEADROOM;
}

uint32_t pd_httpd_count(pd_httpd_t *h) {
  pthread_mutex_lock(&h->mu);
  uint32_t n = h->n_conns;
  pthread_mutex_unlock(&h->mu);
  return n;
}

/* ---------- the sweeper ---------- */

static void sweep(pd_httpd_t *h, uint64_t now) {
  pd_httpd_gate_sweep(h, now);
  for (pd_httpd_conn_t *c = h->head; c; c = c->next) {
    if (c->is_whole || c->is_killed || now - c->since_ns < c->bound_ns) continue;
    c->is_killed = 1;
    h->timed_out++;
    pd_httpd_raw_error(c->fd, 408, "request_timeout", "the request was not complete in time");
    shutdown(c->fd, SHUT_RDWR); /* libmicrohttpd sees the end and closes it */
  }
}

/* After a peak of connections (h->mu held; unlocks it around the trim): once the count has
 * fallen by PD_HTTPD_TRIM_DROP or more to a quarter of its peak, the allocator is asked to
 * return the freed pages (glibc keeps them: the gateway held 23.9 MB after 1,000 kept-alive
 * connections closed, 11.3 MB after malloc_trim; docs/gateway.md, "Memory after a peak").
 * Rare by construction: one trim per such fall. */
#define PD_HTTPD_TRIM_DROP 64u
static void trim_after_peak(pd_httpd_t *h) {
  if (h->n_conns > h->peak_conns) h->peak_conns = h->n_conns;
  if (h->peak_conns - h->n_conns < PD_HTTPD_TRIM_DROP || h->n_conns > h->peak_conns / 4) return;
  h->peak_conns = h->n_conns;
  h->trims++;
#ifdef __GLIBC__
  pthread_mutex_unlock(&h->mu);
  malloc_trim(0);
  pthread_mutex_lock(&h->mu);
#endif
}

static void *sweeper_main(void *arg) {
  pd_httpd_t *h = arg;
  pthread_mutex_lock(&h->mu);
  while (!h->stopping && h->is_gate_in_sweeper) {
    pthread_mutex_unlock(&h->mu);
    pd_httpd_gate_run(h, (int)PD_HTTPD_SWEEP_MS);
    pthread_mutex_lock(&h->mu);
    uint64_t now = pd_httpd_now_ns();
    if (now - h->last_sweep_ns >= PD_HTTPD_SWEEP_MS * 1000000ull) {
      sweep(h, now);
      trim_after_peak(h);
      h->last_sweep_ns = now;
    }
  }
  while (!h->stopping) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)PD_HTTPD_SWEEP_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    if (!h->stopping) sweep(h, pd_httpd_now_ns());
    if (!h->stopping) trim_after_peak(h);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

int pd_httpd_start(pd_httpd_t *h) {
  if (pthread_create(&h->sweeper, NULL, sweeper_main, h)) return PD_ERR_IO;
  h->has_sweeper = 1;
  return 0;
}

void pd_httpd_stop(pd_httpd_t *h) {
  if (!h->has_sweeper) return;
  pthread_mutex_lock(&h->mu);
  h->stopping = 1;
  pthread_cond_signal(&h->cv);
  pthread_mutex_unlock(&h->mu);
  pthread_join(h->sweeper, NULL);
  h->has_sweeper = 0;
}

void pd_httpd_free(pd_httpd_t *h) {
  pd_httpd_stop(h);
  pd_httpd_conn_t *c = h->head; /* normally none: MHD_stop_daemon notified every close */
  while (c) {
    pd_httpd_conn_t *n = c->next;
    free(c);
    c = n;
  }
  h->head = NULL;
  pd_httpd_gate_free(h);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
}

/* ---------- connections ---------- */

/* At the limit (h->mu held): the longest-idle kept-alive connection is shut down to make
 * room, as mature servers do (an idle connection may be closed at any time, RFC 9112 section
 * 9.6); libmicrohttpd sees the end and closes it. 1 when one was. Connections that are
 * mid-request, held by the gate, or already leaving are never taken; at most
 * PD_HTTPD_MHD_HEADROOM / 2 may be leaving at once so libmicrohttpd's limit stays ahead. */
static int evict_idle(pd_httpd_t *h, const pd_httpd_peer_t *only) {
  if (h->n_leaving >= PD_HTTPD_MHD_HEADROOM / 2) return 0;
  pd_httpd_conn_t *v = NULL;
  for (pd_httpd_conn_t *c = h->head; c; c = c->next)
    if (c->is_idle && !c->is_killed && c->fd >= 0 && (!v || c->since_ns < v->since_ns) &&
        (!only || !memcmp(&c->peer, only, sizeof *only)))
      v = c;
  if (!v) return 0;
  v->is_killed = v->is_evicted = 1;
  h->n_leaving++;
  h->evicted++;
  shutdown(v->fd, SHUT_RDWR);
  return 1;
}

/* Connections from peer p that hold room (h->mu held): in the gate or with libmicrohttpd,
 * not shut down already. */
static uint32_t peer_count(const pd_httpd_t *h, const pd_httpd_peer_t *p) {
  uint32_t n = 0;
  for (uint32_t i = 0; h->gate && i < h->max_conns; i++)
    n += h->gate[i].fd >= 0 && !h->gate[i].is_killed && !memcmp(&h->gate[i].peer, p, sizeof *p);
  for (const pd_httpd_conn_t *c = h->head; c; c = c->next)
    n += !c->is_killed && !memcmp(&c->peer, p, sizeof *p);
  return n;
}

int pd_httpd_admit(pd_httpd_t *h, int fd, const struct sockaddr *a, socklen_t alen) {
  pd_httpd_peer_t peer;
  pd_httpd_peer_of(a, alen, &peer);
  pthread_mutex_lock(&h->mu);
  /* one address at its bound: its own longest-idle makes room, or it is refused (the others'
   * room is not its to take); a bound at max_conns is no bound (no scan) */
  int is_peer_ok = h->max_per_peer >= h->max_conns || peer_count(h, &peer) < h->max_per_peer ||
                   evict_idle(h, &peer);
  int ok = is_peer_ok && (h->n_conns - h->n_leaving < h->max_conns || evict_idle(h, NULL));
  if (ok)
    h->n_conns++;
  else
    h->refused++;
  if (!is_peer_ok) h->refused_peer++;
  uint32_t bound = h->max_per_peer;
  pthread_mutex_unlock(&h->mu);
  if (!ok) {
    char msg[96];
    snprintf(msg, sizeof msg, "connection limit per client address reached (%u)", (unsigned)bound);
    if (is_peer_ok)
      pd_httpd_raw_error(fd, 503, "overloaded", "connection limit reached");
    else
      pd_httpd_raw_error(fd, 503, "per_peer_limit", msg);
    close(fd);
  }
  return ok;
}

void pd_httpd_unadmit(pd_httpd_t *h) {
  pthread_mutex_lock(&h->mu);
  if (h->n_conns) h->n_conns--;
  pthread_mutex_unlock(&h->mu);
}

static int conn_fd(struct MHD_Connection *mc) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  return ci ? ci->connect_fd : -1;
}

static void on_started(pd_httpd_t *h, struct MHD_Connection *mc, void **socket_ctx) {
  pd_httpd_conn_t *c = calloc(1, sizeof *c);
  int fd = conn_fd(mc);
  pthread_mutex_lock(&h->mu);
  int is_over = 0;
  if (!h->is_counted_at_accept) is_over = ++h->n_conns > h->max_conns;
  if (c) {
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ai && ai->client_addr)
      pd_httpd_peer_of(ai->client_addr, ai->client_addr->sa_family == AF_INET6
                                            ? (socklen_t)sizeof(struct sockaddr_in6)
                                            : (socklen_t)sizeof(struct sockaddr_in),
                       &c->peer);
    c->fd = fd;
    c->since_ns = pd_httpd_now_ns();
    c->bound_ns = h->request_ns;
    c->next = h->head;
    if (h->head) h->head->prev = c;
    h->head = c;
    *socket_ctx = c;
  }
  if (is_over || !c) {
    if (c) c->is_killed = 1;
    h->refused++;
    pd_httpd_raw_error(fd, 503, "overloaded", "connection limit reached");
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
  }
  pthread_mutex_unlock(&h->mu);
}

static void on_closed(pd_httpd_t *h, void **socket_ctx) {
  pd_httpd_conn_t *c = *socket_ctx;
  pthread_mutex_lock(&h->mu);
  if (h->n_conns) h->n_conns--;
  if (c && c->is_evicted && h->n_leaving) h->n_leaving--;
  if (c) {
    if (c->prev)
      c->prev->next = c->next;
    else
      h->head = c->next;
    if (c->next) c->next->prev = c->prev;
  }
  pthread_mutex_unlock(&h->mu);
  free(c);
  *socket_ctx = NULL;
}

void pd_httpd_notify(pd_httpd_t *h, struct MHD_Connection *mc, void **socket_ctx,
                     enum MHD_ConnectionNotificationCode toe) {
  if (toe == MHD_CONNECTION_NOTIFY_STARTED)
    on_started(h, mc, socket_ctx);
  else
    on_closed(h, socket_ctx);
}

static pd_httpd_conn_t *conn_of(struct MHD_Connection *mc) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

void pd_httpd_request_begin(pd_httpd_t *h, struct MHD_Connection *mc) {
  pd_httpd_conn_t *c = conn_of(mc);
  if (!c) return;
  pthread_mutex_lock(&h->mu);
  c->is_idle = 0;
  pthread_mutex_unlock(&h->mu);
}

void pd_httpd_request_whole(pd_httpd_t *h, struct MHD_Connection *mc) {
  pd_httpd_conn_t *c = conn_of(mc);
  if (!c) return;
  pthread_mutex_lock(&h->mu);
  c->is_whole = 1;
  c->is_idle = 0;
  pthread_mutex_unlock(&h->mu);
}

void pd_httpd_request_over(pd_httpd_t *h, struct MHD_Connection *mc) {
  pd_httpd_conn_t *c = conn_of(mc);
  if (!c) return;
  pthread_mutex_lock(&h->mu);
  c->is_whole = 0;
  c->is_idle = 1;
  c->since_ns = pd_httpd_now_ns();
  c->bound_ns = h->idle_ns > h->request_ns ? h->idle_ns : h->request_ns;
  pthread_mutex_unlock(&h->mu);
}

int pd_httpd_gate_fd(const pd_httpd_t *h) { return h->gate_ep; }

int pd_httpd_is_killed(pd_httpd_t *h, struct MHD_Connection *mc) {
  pd_httpd_conn_t *c = conn_of(mc);
  if (!c) return 0;
  pthread_mutex_lock(&h->mu);
  int k = c->is_killed;
  pthread_mutex_unlock(&h->mu);
  return k;
}

/* ---------- framing ---------- */

typedef struct framing {
  const char *cl, *te;
  int n_cl, n_te, cl_differs;
  char spaced[48]; /* a field name with a blank in it (RFC 9112 section 5.1), cut */
} framing_t;

/* libmicrohttpd 0.9.75 keeps a blank before the colon in the field name
 * ("Transfer-Encoding " for "Transfer-Encoding : chunked") and so does not frame the body by
 * it: a smuggling vector (RFC 9112 section 5.1 says answer 400). Its own rejection exists only
 * at MHD_OPTION_STRICT_FOR_CLIENT -1 ("as tolerant as possible", which relaxes the rest) and
 * answers HTML; the name is checked here instead, for every request on a connection. */
static enum MHD_Result framing_iter(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value) {
  (void)kind;
  framing_t *f = cls;
  if (!key || !value) return MHD_YES;
  if (!f->spaced[0] && strpbrk(key, " \t")) {
    size_t n = strcspn(key, " \t");
    snprintf(f->spaced, sizeof f->spaced, "%.*s", (int)(n < 40 ? n : 40), key);
    if (!f->spaced[0]) f->spaced[0] = '?';
  }
  if (!strcasecmp(key, "Content-Length")) {
    if (f->n_cl++ && strcmp(f->cl, value) != 0) f->cl_differs = 1;
    if (!f->cl) f->cl = value;
  } else if (!strcasecmp(key, "Transfer-Encoding")) {
    f->n_te++;
    if (!f->te) f->te = value;
  }
  return MHD_YES;
}

int pd_httpd_framing(pd_httpd_t *h, struct MHD_Connection *mc, char *msg, size_t cap) {
  framing_t f = {0};
  MHD_get_connection_values(mc, MHD_HEADER_KIND, framing_iter, &f);
  const char *why = NULL;
  char spaced[96];
  if (f.spaced[0]) {
    snprintf(spaced, sizeof spaced, "whitespace before the colon in header '%s'", f.spaced);
    why = spaced;
  } else if (f.cl_differs)
    why = "two different Content-Length headers";
  else if (f.n_te > 1)
    why = "more than one Transfer-Encoding header";
  else if (f.te && strcasecmp(f.te, "chunked") != 0)
    why = "Transfer-Encoding: only chunked is supported";
  else if (f.te && f.n_cl)
    why = "both Transfer-Encoding and Content-Length";
  if (!why) return 0;
  snprintf(msg, cap, "framing: %s", why);
  pthread_mutex_lock(&h->mu);
  h->bad_framing++;
  pthread_mutex_unlock(&h->mu);
  return 400;
}
