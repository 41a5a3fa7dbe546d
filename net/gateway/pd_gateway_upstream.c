/* The worker side of the gateway: libcurl multi driven by the loop's epoll (socket and timer
 * callbacks). Core legs stream their head (header callback, at the blank line after a final
 * status) and body bytes (write callback) straight into the core. Adding and removing easy
 * handles is never done inside a libcurl callback: transfers are marked dirty and the loop
 * flushes them between turns (pd_gateway_upstream_flush). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "pd_err.h"
#include "pd_gateway_int.h"

/* libcurl's receive buffer per transfer (allocated per easy handle): an SSE event is a few
 * hundred bytes, so 4 KiB takes a dozen at once; a prefill leg's answer is one event or a
 * small JSON body, read in 1 KiB (libcurl's least). At 512 streams the 8 KiB of before cost
 * 6.4 MB (heaptrack). */
#define PD_GATEWAY_UPSTREAM_BUF_BYTES 4096u
#define PD_GATEWAY_UPSTREAM_PREFILL_BUF_BYTES 1024u
/* Transfers handled per flush: a bound on the loop, far above what one turn produces. */
#define PD_GATEWAY_UPSTREAM_MAX_FLUSH 1000000u

/* ---------- transfer objects ---------- */

static void mark_dirty(pd_gateway_t *g, pd_gateway_transfer_t *leg) {
  if (leg->is_dirty) return;
  leg->is_dirty = 1; /* FIFO: legs start in the order the core opened them (prefill first) */
  leg->next_dirty = NULL;
  if (g->dirty)
    g->dirty_tail->next_dirty = leg;
  else
    g->dirty = leg;
  g->dirty_tail = leg;
}

/* ---------- easy handles and sockets ----------
 * A core leg's easy handle goes back to its role's pool when its transfer ended well, and the
 * next leg of that role takes it with its options (libcurl resets a handle's transfer state
 * at each transfer; options stay until changed), instead of curl_easy_init + a dozen setopts
 * + curl_easy_cleanup per leg (~13,000 instructions and a dozen allocations each,
 * callgrind). One pool per role, so a handle's receive buffer size
 * (PD_GATEWAY_UPSTREAM_BUF_BYTES or _PREFILL_BUF_BYTES) never changes. A cut, failed or
 * unstarted transfer's handle is cleaned up, never reused. */
#define PD_GATEWAY_UPSTREAM_POOL_MAX 1024u

/* A pooled handle keeps the options every core leg of its role sets alike (*is_pooled = 1):
 * the caller sets only the leg's own (URL, body, headers, callback data, connect timeout). */
static CURL *easy_take(pd_gateway_t *g, int pool_role, int *is_pooled) {
  *is_pooled = 0;
  if (pool_role >= 0 && g->n_easy_pool[pool_role]) {
    *is_pooled = 1;
    return g->easy_pool[pool_role][--g->n_easy_pool[pool_role]];
  }
  return curl_easy_init();
}

static void easy_give(pd_gateway_t *g, pd_gateway_transfer_t *leg) {
  int r = leg->pool_role;
  if (r >= 0 && leg->is_ok && g->easy_pool[r] && g->n_easy_pool[r] < g->cap_easy_pool) {
    curl_easy_setopt(leg->easy, CURLOPT_HTTPHEADER, NULL); /* leg->hdrs is freed next */
    g->easy_pool[r][g->n_easy_pool[r]++] = leg->easy;
  } else {
    curl_easy_cleanup(leg->easy);
  }
  leg->easy = NULL;
}

/* libcurl's sockets in the loop's epoll set, by fd (g->curl_fds): a pooled keep-alive
 * connection's socket stays registered (for input) between its transfers, so a leg that
 * reuses it costs no EPOLL_CTL_DEL at its end and no EPOLL_CTL_ADD at its start (two system
 * calls per leg, ~1.6 us each on the bench's VM). An idle socket that becomes readable (the
 * worker closed it) is taken out by the loop (pd_gateway_upstream_is_watched); a socket
 * libcurl closes leaves the set by itself and its entry is cleared (close_cb), so a new
 * socket with the same number is added afresh. */
enum {
  PD_GATEWAY_CURL_FD_SET = 1,  /* in the epoll set */
  PD_GATEWAY_CURL_FD_IN = 2,   /* registered for EPOLLIN */
  PD_GATEWAY_CURL_FD_OUT = 4,  /* registered for EPOLLOUT */
  PD_GATEWAY_CURL_FD_OWNED = 8 /* libcurl watches it now */
};
#define PD_GATEWAY_CURL_FDS 65536u

static uint8_t *curl_fd(const pd_gateway_t *g, curl_socket_t s) {
  return s >= 0 && (uint32_t)s < g->n_curl_fds ? &g->curl_fds[s] : NULL;
}

int pd_gateway_upstream_is_watched(const pd_gateway_t *g, int fd) {
  const uint8_t *st = curl_fd(g, fd);
  return !st || (*st & PD_GATEWAY_CURL_FD_OWNED) || !(*st & PD_GATEWAY_CURL_FD_SET);
}

static int close_cb(void *ud, curl_socket_t s) {
  pd_gateway_t *g = ud;
  uint8_t *st = curl_fd(g, s);
  if (st) *st = 0;
  return close(s);
}

static void leg_del(pd_gateway_t *g, pd_gateway_transfer_t *leg) {
  if (leg->prev)
    leg->prev->next = leg->next;
  else
    g->legs = leg->next;
  if (leg->next) leg->next->prev = leg->prev;
  if (leg->kind == PD_GATEWAY_UPSTREAM_ABORT && g->n_aborts) g->n_aborts--;
  if (leg->easy) easy_give(g, leg);
  curl_slist_free_all(leg->hdrs);
  pd_buf_free(NULL, &leg->resp);
  free(leg);
}

static size_t header_cb(char *buf, size_t size, size_t n, void *ud);
static size_t write_cb(char *p, size_t size, size_t n, void *ud);
static int prereq_cb(void *ud, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
                     int conn_local_port);

static char *join_url(const char *base, const char *path) {
  size_t a = strlen(base), b = strlen(path);
  char *u = malloc(a + b + 1);
  if (!u) return NULL;
  memcpy(u, base, a);
  memcpy(u + a, path, b + 1);
  return u;
}

/* A new transfer, linked and dirty (added at the next flush). leg->easy is NULL when libcurl
 * could not make a handle; the flush then reports the failure to the owner. */
static pd_gateway_transfer_t *leg_new(pd_gateway_t *g, pd_gateway_upstream_kind_t kind,
                                      const char *base, const char *path, int pool_role) {
  pd_gateway_transfer_t *leg = calloc(1, sizeof *leg);
  if (!leg) return NULL;
  leg->g = g;
  leg->kind = kind;
  leg->pool_role = pool_role;
  pd_buf_init(&leg->resp, PD_GATEWAY_UPSTREAM_MAX_INFO_BYTES);
  leg->next = g->legs;
  if (g->legs) g->legs->prev = leg;
  g->legs = leg;
  mark_dirty(g, leg);
  char *url = join_url(base, path);
  int is_pooled = 0;
  CURL *e = url ? easy_take(g, pool_role, &is_pooled) : NULL;
  if (e && !is_pooled) {
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROXY, ""); /* workers are direct, whatever http_proxy says */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE,
                     pool_role == PD_ROLE_PREFILL ? (long)PD_GATEWAY_UPSTREAM_PREFILL_BUF_BYTES
                                                  : (long)PD_GATEWAY_UPSTREAM_BUF_BYTES);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, close_cb);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, g);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
  }
  if (e) { /* the leg's own */
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, leg);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, leg);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, leg);
    if (is_pooled) curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 0L); /* default, unless set */
  }
  free(url);
  leg->easy = e;
  return leg;
}

static void set_post(pd_gateway_transfer_t *leg, const void *body, size_t len) {
  if (!leg->easy) return;
  leg->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
  if (leg->hdrs) leg->hdrs = curl_slist_append(leg->hdrs, "Expect:"); /* no 100-continue wait */
  curl_easy_setopt(leg->easy, CURLOPT_HTTPHEADER, leg->hdrs);
  curl_easy_setopt(leg->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  curl_easy_setopt(leg->easy, CURLOPT_COPYPOSTFIELDS, len ? (const char *)body : "");
}

static void detach(pd_gateway_request_t *rq, pd_gateway_transfer_t *leg) {
  for (uint32_t i = 0; i < rq->n_legs; i++)
    if (rq->legs[i] == leg) {
      rq->legs[i] = rq->legs[--rq->n_legs];
      break;
    }
  leg->rq = NULL;
}

/* ---------- actions ---------- */

void pd_gateway_upstream_open(pd_gateway_t *g, pd_gateway_request_t *rq, const pd_action_t *a) {
  uint32_t n = a->role == PD_ROLE_PREFILL ? g->cfg.n_prefill : g->cfg.n_decode;
  /* The core opens legs only on workers it was given and at most PD_MAX_LEGS per request. */
  assert(a->worker < n && rq->n_legs < PD_MAX_LEGS);
  if (a->worker >= n || rq->n_legs >= PD_MAX_LEGS) { /* release build: say so, not hang */
    pd_gateway_log(g, "core bug: request %llu opened a leg on worker %u of %u (%u legs)",
               (unsigned long long)rq->id, (unsigned)a->worker, (unsigned)n, (unsigned)rq->n_legs);
    return;
  }
  pd_gateway_transfer_t *leg = leg_new(g, PD_GATEWAY_UPSTREAM_CORE, g->urls[a->role][a->worker],
                                       a->str ? a->str : "", (int)a->role);
  if (!leg) return;
  leg->rq = rq;
  leg->leg_id = a->leg_id;
  leg->role = a->role;
  leg->worker = a->worker;
  rq->legs[rq->n_legs++] = leg;
  g->metrics.legs_opened[a->role]++;
  set_post(leg, a->data, a->len);
  char own[96]; /* the core's own X-Request-Id replaces every forwarded header (toy proxy) */
  if (a->xrid && leg->hdrs &&
      snprintf(own, sizeof own, "X-Request-Id: %s", a->xrid) < (int)sizeof own) {
    struct curl_slist *l = curl_slist_append(leg->hdrs, own);
    if (l) leg->hdrs = l;
    if (rq->conn && rq->conn->is_xrid_own) /* the legs' id is the one echoed (R-XRID) */
      snprintf(rq->conn->xrid, sizeof rq->conn->xrid, "%s", a->xrid);
  }
  for (const struct curl_slist *h = rq->conn && !a->xrid ? rq->conn->fwd : NULL; h && leg->hdrs;
       h = h->next) {
    struct curl_slist *l = curl_slist_append(leg->hdrs, h->data);
    if (!l) break; /* out of memory: the leg goes without the rest */
    leg->hdrs = l;
  }
  if (leg->easy) {
    curl_easy_setopt(leg->easy, CURLOPT_HTTPHEADER, leg->hdrs);
    curl_easy_setopt(leg->easy, CURLOPT_PREREQFUNCTION, prereq_cb);
    curl_easy_setopt(leg->easy, CURLOPT_PREREQDATA, leg);
  }
  if (leg->easy && a->deadline_ns) {
    uint64_t now = pd_gateway_now_ns();
    long ms = a->deadline_ns > now ? (long)((a->deadline_ns - now) / 1000000ull) : 1;
    curl_easy_setopt(leg->easy, CURLOPT_CONNECTTIMEOUT_MS, ms > 0 ? ms : 1L);
  }
}

static void abort_post(pd_gateway_t *g, pd_role_t role, uint32_t worker, const char *rid) {
  uint32_t n = role == PD_ROLE_PREFILL ? g->cfg.n_prefill : g->cfg.n_decode;
  if (worker >= n) return;
  if (g->n_aborts >= PD_GATEWAY_UPSTREAM_MAX_ABORTS) {
    g->metrics.aborts_dropped++;
    return;
  }
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "rid", rid);
  char *body = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  pd_gateway_transfer_t *leg =
      body ? leg_new(g, PD_GATEWAY_UPSTREAM_ABORT, g->urls[role][worker], "/abort_request", -1)
           : NULL;
  if (leg) {
    g->n_aborts++;
    g->metrics.aborts_sent++;
    leg->role = role;
    leg->worker = worker;
    set_post(leg, body, strlen(body));
    if (leg->easy) curl_easy_setopt(leg->easy, CURLOPT_TIMEOUT_MS, (long)g->cfg.abort_timeout_ms);
  } else {
    g->metrics.aborts_dropped++;
  }
  cJSON_free(body);
}

void pd_gateway_upstream_close(pd_gateway_t *g, pd_gateway_request_t *rq, const pd_action_t *a) {
  if ((unsigned)a->role < 2) g->metrics.legs_cancelled[a->role]++;
  for (uint32_t i = 0; rq && i < rq->n_legs; i++) {
    pd_gateway_transfer_t *leg = rq->legs[i];
    if (leg->leg_id != a->leg_id) continue;
    detach(rq, leg);
    leg->is_closed = 1; /* the write callback refuses more; the flush removes the handle */
    mark_dirty(g, leg);
    break;
  }
  if (a->str) abort_post(g, a->role, a->worker, a->str);
}

void pd_gateway_upstream_detach_req(pd_gateway_t *g, pd_gateway_request_t *rq) {
  for (uint32_t guard = 0; guard < PD_MAX_LEGS && rq->n_legs; guard++) {
    pd_gateway_transfer_t *leg = rq->legs[0];
    detach(rq, leg);
    leg->is_closed = 1;
    mark_dirty(g, leg);
  }
}

int pd_gateway_upstream_info_start(pd_gateway_t *g, pd_gateway_conn_t *c, const char *path) {
  pd_gateway_transfer_t *leg =
      leg_new(g, PD_GATEWAY_UPSTREAM_INFO, g->urls[PD_ROLE_PREFILL][0], path, -1);
  if (!leg) return PD_ERR_NOMEM;
  leg->conn = c;
  c->info = leg;
  if (leg->easy) curl_easy_setopt(leg->easy, CURLOPT_TIMEOUT_MS, (long)g->cfg.info_timeout_ms);
  return 0;
}

void pd_gateway_upstream_info_cancel(pd_gateway_t *g, pd_gateway_conn_t *c) {
  pd_gateway_transfer_t *leg = c->info;
  c->info = NULL;
  if (!leg) return;
  leg->conn = NULL;
  leg->is_closed = 1;
  mark_dirty(g, leg);
}

/* ---------- libcurl callbacks ---------- */

static void feed_leg(pd_gateway_t *g, pd_gateway_transfer_t *leg, pd_event_kind_t kind,
                     const void *p, size_t len, int status, pd_upstream_error_t e) {
  pd_event_t ev = {.kind = kind,
                   .req_id = leg->rq->id,
                   .leg_id = leg->leg_id,
                   .status = status,
                   .uperr = e,
                   .data = p,
                   .len = len};
  pd_gateway_feed(g, &ev);
}

/* Tell the core its client holds decode back (1) or takes the response again (0). */
static void feed_blocked(pd_gateway_t *g, const pd_gateway_transfer_t *leg, int is_blocked) {
  pd_event_t ev = {.kind = PD_EV_CLIENT_BLOCKED, .req_id = leg->rq->id, .status = is_blocked};
  pd_gateway_feed(g, &ev);
}

static void deliver_head(pd_gateway_t *g, pd_gateway_transfer_t *leg) {
  leg->is_head_sent = 1;
  curl_easy_getinfo(leg->easy, CURLINFO_RESPONSE_CODE, &leg->status);
  if (leg->kind == PD_GATEWAY_UPSTREAM_CORE && leg->rq && !leg->is_closed)
    feed_leg(g, leg, PD_EV_UP_HEAD, NULL, 0, (int)leg->status, PD_UPSTREAM_ERROR_READ);
}

/* Called before each send of the request. libcurl silently sends a request again when the
 * reused keep-alive connection it went out on dies before the first response byte; a worker
 * that had read it would then see the same room twice, and the gateway would never hear of
 * the first failure (conform's socket-only I8 finding). A generation POST is not idempotent:
 * the second send is refused and the leg fails as a reset, which the core judges as such.
 * Connections stay pooled (a fresh connection per leg would cost a connect on the TTFT path
 * and a TIME_WAIT port per leg). */
static int prereq_cb(void *ud, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
                     int conn_local_port) {
  (void)conn_primary_ip;
  (void)conn_local_ip;
  (void)conn_primary_port;
  (void)conn_local_port;
  pd_gateway_transfer_t *leg = ud;
  if (leg->n_sends++ == 0) return CURL_PREREQFUNC_OK;
  leg->g->metrics.resends_refused++;
  return CURL_PREREQFUNC_ABORT;
}

static size_t header_cb(char *buf, size_t size, size_t n, void *ud) {
  pd_gateway_transfer_t *leg = ud;
  size_t len = size * n;
  if (leg->is_head_sent || len > 2 || (len && buf[0] != '\r' && buf[0] != '\n')) return len;
  long code = 0;
  curl_easy_getinfo(leg->easy, CURLINFO_RESPONSE_CODE, &code);
  if (code >= 200) deliver_head(leg->g, leg); /* 1xx interim heads are not the head */
  return len;
}

static size_t write_cb(char *p, size_t size, size_t n, void *ud) {
  pd_gateway_transfer_t *leg = ud;
  pd_gateway_t *g = leg->g;
  size_t len = size * n;
  switch (leg->kind) {
  case PD_GATEWAY_UPSTREAM_CORE:
    if (leg->is_closed || !leg->rq) return 0; /* stop the transfer: libcurl closes it */
    if (!leg->is_head_sent) deliver_head(g, leg);
    if (leg->rq && !leg->is_closed && leg->role == PD_ROLE_DECODE && leg->rq->conn &&
        pd_gateway_http_backlog(leg->rq->conn) > PD_GATEWAY_HTTP_PAUSE_BYTES) {
      leg->is_paused = 1; /* libcurl keeps these bytes and hands them over again on resume */
      g->metrics.pauses++;
      feed_blocked(g, leg, 1); /* the idle deadline is not decode's while we hold it back */
      return CURL_WRITEFUNC_PAUSE;
    }
    if (leg->rq && !leg->is_closed)
      feed_leg(g, leg, PD_EV_UP_DATA, p, len, 0, PD_UPSTREAM_ERROR_READ);
    return len;
  case PD_GATEWAY_UPSTREAM_INFO:
    if (!leg->conn || leg->resp.len + len > PD_GATEWAY_UPSTREAM_MAX_INFO_BYTES) return 0;
    return pd_buf_append(NULL, &leg->resp, p, len) ? 0 : len;
  default: return len;
  }
}

/* libcurl's socketp marks a socket already in the epoll set (curl_multi_assign), so a new
 * socket is added, a known one modified: one epoll_ctl per change. libcurl forgets socketp
 * at CURL_POLL_REMOVE, which comes before it closes the socket. */
static int sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp) {
  (void)e;
  pd_gateway_t *g = userp;
  uint8_t *st = curl_fd(g, s);
  if (what == CURL_POLL_REMOVE) {
    if (st && (*st & PD_GATEWAY_CURL_FD_SET) && !(*st & PD_GATEWAY_CURL_FD_OUT)) {
      *st &= (uint8_t)~PD_GATEWAY_CURL_FD_OWNED; /* idle: stays in the set (see curl_fd) */
      return 0;
    }
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, s, NULL);
    if (st) *st = 0;
    return 0;
  }
  uint8_t want = PD_GATEWAY_CURL_FD_SET | PD_GATEWAY_CURL_FD_OWNED |
                 ((what & CURL_POLL_IN) ? PD_GATEWAY_CURL_FD_IN : 0) |
                 ((what & CURL_POLL_OUT) ? PD_GATEWAY_CURL_FD_OUT : 0);
  const uint8_t io = PD_GATEWAY_CURL_FD_IN | PD_GATEWAY_CURL_FD_OUT;
  if (st && (*st & PD_GATEWAY_CURL_FD_SET) && (*st & io) == (want & io)) {
    *st = want; /* registered as wanted already (a pooled connection's next transfer) */
  } else {
    struct epoll_event ev = {.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) |
                                       ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u),
                             .data.u64 = PD_GATEWAY_TAG(PD_GATEWAY_TAG_CURL, (uint32_t)s)};
    int is_in = st ? (*st & PD_GATEWAY_CURL_FD_SET) != 0 : socketp != NULL;
    int op = is_in ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(g->epfd, op, s, &ev) != 0 && errno == (op == EPOLL_CTL_ADD ? EEXIST : ENOENT))
      epoll_ctl(g->epfd, op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &ev);
    if (st) *st = want;
  }
  if (!socketp) curl_multi_assign(g->multi, s, g);
  return 0;
}

static int timer_cb(CURLM *m, long timeout_ms, void *userp) {
  (void)m;
  pd_gateway_t *g = userp;
  g->curl_deadline_ns =
      timeout_ms < 0 ? 0 : pd_gateway_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  return 0;
}

void pd_gateway_upstream_on_socket(pd_gateway_t *g, int fd, uint32_t events) {
  if (!pd_gateway_upstream_is_watched(g, fd)) { /* an idle pooled socket: closed or junk */
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, fd, NULL);
    g->curl_fds[fd] = 0; /* libcurl finds out itself when it next looks at the connection */
    return;
  }
  int flags = 0;
  if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) flags |= CURL_CSELECT_IN;
  if (events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
  if (events & EPOLLERR) flags |= CURL_CSELECT_ERR;
  int running = 0;
  g->is_deferring = 1;
  curl_multi_socket_action(g->multi, fd, flags, &running);
  g->is_deferring = 0;
  pd_gateway_http_flush_deferred(g);
}

void pd_gateway_upstream_on_timeout(pd_gateway_t *g) {
  g->curl_deadline_ns = 0;
  int running = 0;
  g->is_deferring = 1;
  curl_multi_socket_action(g->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  g->is_deferring = 0;
  pd_gateway_http_flush_deferred(g);
}

/* ---------- finished transfers ---------- */

static pd_upstream_error_t map_error(CURLcode rc, CURL *e) {
  switch (rc) {
  case CURLE_COULDNT_CONNECT:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
  case CURLE_FAILED_INIT: return PD_UPSTREAM_ERROR_CONNECT;
  case CURLE_OPERATION_TIMEDOUT: {
    curl_off_t t = 0; /* never connected: a connect timeout (pd_dispatch.h: connect) */
    curl_easy_getinfo(e, CURLINFO_CONNECT_TIME_T, &t);
    return t == 0 ? PD_UPSTREAM_ERROR_CONNECT : PD_UPSTREAM_ERROR_TIMEOUT;
  }
  case CURLE_ABORTED_BY_CALLBACK: /* prereq_cb refused a resend: the first send was reset */
  case CURLE_GOT_NOTHING:
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR: return PD_UPSTREAM_ERROR_RESET;
  default: return PD_UPSTREAM_ERROR_READ; /* truncated chunked body, bad framing, ... */
  }
}

static void core_done(pd_gateway_t *g, pd_gateway_transfer_t *leg, CURLcode rc) {
  if (leg->is_closed || !leg->rq) return;
  if (rc == CURLE_OK && !leg->is_head_sent) deliver_head(g, leg);
  if (!leg->rq || leg->is_closed) return;
  pd_gateway_request_t *rq = leg->rq;
  uint64_t req_id = rq->id;
  detach(rq, leg);
  pd_event_t ev = {.req_id = req_id, .leg_id = leg->leg_id, .kind = PD_EV_UP_END};
  if (rc != CURLE_OK) {
    ev.kind = PD_EV_UP_ERROR;
    ev.uperr = leg->easy ? map_error(rc, leg->easy) : PD_UPSTREAM_ERROR_CONNECT;
    g->metrics.upstream_errors[leg->role][ev.uperr]++;
    pd_gateway_log(g, "%s leg %llu: %s", pd_role_name(leg->role), (unsigned long long)leg->leg_id,
               curl_easy_strerror(rc));
  }
  pd_gateway_feed(g, &ev);
}

static void leg_done(pd_gateway_t *g, pd_gateway_transfer_t *leg, CURLcode rc) {
  leg->is_finished = 1;
  leg->is_ok = rc == CURLE_OK && !leg->is_closed && !leg->is_paused;
  mark_dirty(g, leg);
  if (leg->kind == PD_GATEWAY_UPSTREAM_CORE) {
    core_done(g, leg, rc);
  } else if (leg->kind == PD_GATEWAY_UPSTREAM_ABORT) {
    long code = 0;
    if (leg->easy) curl_easy_getinfo(leg->easy, CURLINFO_RESPONSE_CODE, &code);
    if (rc == CURLE_OK && code >= 200 && code < 300)
      g->metrics.aborts_ok++;
    else
      g->metrics.aborts_failed++;
  } else if (leg->conn) {
    pd_gateway_conn_t *c = leg->conn;
    leg->conn = NULL;
    long code = 0;
    if (rc == CURLE_OK && leg->easy) curl_easy_getinfo(leg->easy, CURLINFO_RESPONSE_CODE, &code);
    pd_gateway_http_info_done(g, c, code, &leg->resp);
  }
}

void pd_gateway_upstream_drain(pd_gateway_t *g) {
  int left = 0;
  CURLMsg *m;
  for (uint32_t guard = 0;
       guard < PD_GATEWAY_UPSTREAM_MAX_FLUSH && (m = curl_multi_info_read(g->multi, &left));
       guard++) {
    if (m->msg != CURLMSG_DONE) continue;
    char *priv = NULL;
    CURLcode rc = m->data.result;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
    pd_gateway_transfer_t *leg = (pd_gateway_transfer_t *)(void *)priv;
    if (leg && !leg->is_finished) leg_done(g, leg, rc);
  }
}

void pd_gateway_upstream_resume_req(pd_gateway_t *g, pd_gateway_request_t *rq) {
  for (uint32_t i = 0; i < rq->n_legs; i++) {
    pd_gateway_transfer_t *leg = rq->legs[i];
    if (!leg->is_paused || leg->want_resume) continue;
    leg->want_resume = 1;
    mark_dirty(g, leg);
  }
}

void pd_gateway_upstream_flush(pd_gateway_t *g) {
  for (uint32_t guard = 0; guard < PD_GATEWAY_UPSTREAM_MAX_FLUSH && g->dirty; guard++) {
    pd_gateway_transfer_t *leg = g->dirty;
    g->dirty = leg->next_dirty;
    if (!g->dirty) g->dirty_tail = NULL;
    leg->next_dirty = NULL;
    leg->is_dirty = 0;
    int is_over = leg->is_closed || leg->is_finished;
    if (leg->want_resume) {
      leg->want_resume = 0;
      if (!is_over && leg->is_paused && leg->state == PD_GATEWAY_UPSTREAM_ACTIVE) {
        leg->is_paused = 0;
        if (leg->rq) feed_blocked(g, leg, 0);
        if (leg->is_closed || !leg->rq) continue; /* closed meanwhile: freed on a later pass */
        /* libcurl may call write_cb from here (the kept bytes): the core is fed, which may
         * close this leg or pause it again; a closed leg is dirty again, freed on a later
         * pass of this loop. */
        curl_easy_pause(leg->easy, CURLPAUSE_CONT);
        continue;
      }
    }
    if (leg->state == PD_GATEWAY_UPSTREAM_NEW && !is_over) {
      if (leg->easy && curl_multi_add_handle(g->multi, leg->easy) == CURLM_OK) {
        leg->state = PD_GATEWAY_UPSTREAM_ACTIVE;
        continue;
      }
      leg_done(g, leg, CURLE_FAILED_INIT); /* the owner hears of it like a connect failure */
      continue;                            /* dirty again: freed on a later pass */
    }
    if (!is_over) continue;
    if (leg->state == PD_GATEWAY_UPSTREAM_ACTIVE) curl_multi_remove_handle(g->multi, leg->easy);
    leg_del(g, leg);
  }
}

int pd_gateway_upstream_init(pd_gateway_t *g) {
  g->multi = curl_multi_init();
  if (!g->multi) return PD_ERR_NOMEM;
  curl_multi_setopt(g->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
  curl_multi_setopt(g->multi, CURLMOPT_SOCKETDATA, g);
  curl_multi_setopt(g->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(g->multi, CURLMOPT_TIMERDATA, g);
  curl_multi_setopt(g->multi, CURLMOPT_MAXCONNECTS, (long)(4u * g->cfg.max_connections));
  g->n_curl_fds = PD_GATEWAY_CURL_FDS;
  g->curl_fds = calloc(g->n_curl_fds, 1);
  g->cap_easy_pool = g->cfg.max_connections < PD_GATEWAY_UPSTREAM_POOL_MAX
                         ? g->cfg.max_connections
                         : PD_GATEWAY_UPSTREAM_POOL_MAX;
  for (int r = 0; r < 2; r++)
    g->easy_pool[r] = calloc(g->cap_easy_pool, sizeof *g->easy_pool[r]);
  if (!g->curl_fds || !g->easy_pool[0] || !g->easy_pool[1]) return PD_ERR_NOMEM;
  return 0;
}

void pd_gateway_upstream_free(pd_gateway_t *g) {
  for (uint32_t guard = 0; guard < PD_GATEWAY_UPSTREAM_MAX_FLUSH && g->legs; guard++) {
    pd_gateway_transfer_t *leg = g->legs;
    if (leg->state == PD_GATEWAY_UPSTREAM_ACTIVE) curl_multi_remove_handle(g->multi, leg->easy);
    leg_del(g, leg);
  }
  g->dirty = g->dirty_tail = NULL;
  for (int r = 0; r < 2; r++) {
    for (uint32_t i = 0; i < g->n_easy_pool[r]; i++)
      curl_easy_cleanup(g->easy_pool[r][i]);
    free(g->easy_pool[r]);
    g->easy_pool[r] = NULL;
    g->n_easy_pool[r] = 0;
  }
  curl_multi_cleanup(g->multi); /* closes the pooled connections: close_cb still needs curl_fds */
  g->multi = NULL;
  free(g->curl_fds);
  g->curl_fds = NULL;
  g->n_curl_fds = 0;
}
