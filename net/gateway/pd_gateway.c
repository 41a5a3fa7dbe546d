/* The gateway's event loop: one epoll set over libmicrohttpd's epoll fd, libcurl's sockets,
 * the client sockets being watched for hang-ups and a wake-up eventfd, and a wait bounded by
 * the core's next deadline (pd_gw_get_expiry). Every core event goes through pd_gateway_feed and
 * every expiry through expire; both carry out the actions. */
#define _GNU_SOURCE /* EPOLLRDHUP, eventfd */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "pd_err.h"
#include "pd_gateway_int.h"

#define PD_GATEWAY_SLOT_BITS 24u
#define PD_GATEWAY_MAX_WAIT_MS 1000
#define PD_GATEWAY_EVENTS 256
/* MHD_run calls per turn while it has work at once (a head, then a first chunk MHD sends, go
 * out in the turn that produced them, not one turn apart). */
#define PD_GATEWAY_MHD_RUNS 4
/* Times per turn new legs are sent at once (libcurl's timer at 0) instead of next turn. */
#define PD_GATEWAY_SEND_NOW 2

uint64_t pd_gateway_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void pd_gateway_log(const pd_gateway_t *g, const char *fmt, ...) {
  if (g && !g->cfg.is_verbose) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("pdref gateway: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* ---------- configuration ---------- */

void pd_gateway_config_default(pd_gateway_config_t *c, pd_mode_t mode) {
  memset(c, 0, sizeof *c);
  pd_gw_config_default(&c->core, mode);
  c->core.settle_ns = PD_GATEWAY_DEFAULT_SETTLE_NS;
  c->listen_host = "127.0.0.1";
  c->max_body_bytes = PD_GATEWAY_DEFAULT_MAX_BODY_BYTES;
  c->max_connections = PD_GATEWAY_DEFAULT_MAX_CONNECTIONS;
  c->client_timeout_s = PD_GATEWAY_DEFAULT_CLIENT_TIMEOUT_S;
  c->client_deadline_s = PD_GATEWAY_DEFAULT_CLIENT_DEADLINE_S;
  c->abort_timeout_ms = PD_GATEWAY_DEFAULT_ABORT_TIMEOUT_MS;
  c->info_timeout_ms = PD_GATEWAY_DEFAULT_INFO_TIMEOUT_MS;
}

int pd_gateway_parse_worker(char *spec, int *port) {
  *port = -1;
  if (strncmp(spec, "http://", 7) != 0 || !spec[7] || spec[7] == '/') return PD_ERR_INVAL;
  char *at = strrchr(spec, '@');
  if (at && at > spec + 7 && at[1] && strspn(at + 1, "0123456789") == strlen(at + 1)) {
    long p = strtol(at + 1, NULL, 10);
    if (strlen(at + 1) > 5 || p < 1 || p > 65535) return PD_ERR_INVAL;
    *port = (int)p;
    *at = 0;
  }
  size_t n = strlen(spec);
  while (n > 7 && spec[n - 1] == '/')
    spec[--n] = 0;
  return strchr(spec + 7, '/') ? PD_ERR_INVAL : 0; /* a base URL has no path */
}

/* Host part of "http://host[:port]" for the bootstrap address ("[v6]" keeps no brackets). */
static void url_host(const char *url, char *out, size_t cap) {
  const char *h = url + 7;
  const char *at = strchr(h, '@');
  if (at) h = at + 1;
  size_t n;
  if (*h == '[') {
    h++;
    n = strcspn(h, "]");
  } else {
    n = strcspn(h, ":/");
  }
  snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), h);
}

/* ---------- request table ---------- */

pd_gateway_request_t *pd_gateway_req_new(pd_gateway_t *g) {
  if (!g->n_free) return NULL;
  pd_gateway_request_t *rq = calloc(1, sizeof *rq);
  if (!rq) return NULL;
  uint32_t s = g->free_slots[--g->n_free];
  g->gens[s] = (g->gens[s] + 1) & 0xffffffu;
  rq->id = ((uint64_t)g->gens[s] << PD_GATEWAY_SLOT_BITS) | s;
  g->slots[s] = rq;
  return rq;
}

pd_gateway_request_t *pd_gateway_req_find(pd_gateway_t *g, uint64_t id) {
  uint32_t s = (uint32_t)(id & ((1u << PD_GATEWAY_SLOT_BITS) - 1));
  if (s >= g->n_slots || !g->slots[s] || g->slots[s]->id != id) return NULL;
  return g->slots[s];
}

void pd_gateway_req_del(pd_gateway_t *g, pd_gateway_request_t *rq) {
  uint32_t s = (uint32_t)(rq->id & ((1u << PD_GATEWAY_SLOT_BITS) - 1));
  pd_gateway_upstream_detach_req(g, rq);
  pd_gateway_conn_t *c = rq->conn;
  if (c) { /* the core is done with it; a client not answered by now never will be */
    c->rq = NULL;
    if (!c->is_out_wait && !c->is_deferred) { /* else a direct stream still sends */
      if (c->is_ended && !c->is_gone && !c->is_abort)
        pd_gateway_unwatch_keep(g, c); /* answered: the connection may carry the next one */
      else
        pd_gateway_unwatch(g, c);
    }
    if (!c->is_ended) {
      c->is_gone = 1;
      pd_gateway_http_wake(c);
    }
  }
  g->slots[s] = NULL;
  g->free_slots[g->n_free++] = s;
  free(rq);
}

/* ---------- actions ---------- */

static void on_outcome(pd_gateway_t *g, const pd_action_t *a) {
  if (a->worker < PD_MAX_WORKERS && (unsigned)a->flag < 4)
    g->metrics.outcomes[a->role][a->worker][a->flag]++;
}

static void apply(pd_gateway_t *g, const pd_action_t *a) {
  pd_gateway_request_t *rq = pd_gateway_req_find(g, a->req_id);
  switch (a->kind) {
  case PD_ACT_OPEN_LEG:
    if (rq) pd_gateway_upstream_open(g, rq, a);
    break;
  case PD_ACT_CLOSE_LEG: pd_gateway_upstream_close(g, rq, a); break;
  case PD_ACT_CLIENT_HEAD:
  case PD_ACT_CLIENT_DATA:
  case PD_ACT_CLIENT_END:
    if (rq && rq->conn) pd_gateway_http_client_action(g, rq->conn, a);
    break;
  case PD_ACT_OUTCOME: on_outcome(g, a); break;
  case PD_ACT_BREAKER:
    if (a->worker < PD_MAX_WORKERS) g->metrics.breaker_changes[a->role][a->worker]++;
    break;
  case PD_ACT_ATTEMPT:
    g->metrics.attempts++;
    if (a->status > 1) g->metrics.retries++;
    break;
  case PD_ACT_LOAD: break; /* read from the core at scrape time */
  case PD_ACT_DONE:
    if (rq) pd_gateway_req_del(g, rq);
    break;
  }
}

static void apply_all(pd_gateway_t *g) {
  if (g->acts.is_overflow) pd_gateway_log(g, "core: action buffer overflow");
  for (size_t i = 0; i < g->acts.n; i++)
    apply(g, &g->acts.v[i]);
  pd_actbuf_reset(&g->acts);
}

static int feed_one(pd_gateway_t *g, const pd_event_t *ev) {
  pd_actbuf_reset(&g->acts);
  int rc = pd_gw_feed(g->core, pd_gateway_now_ns(), ev, &g->acts);
  if (rc)
    pd_gateway_log(g, "core: event %d of request %llu: %s", (int)ev->kind,
               (unsigned long long)ev->req_id, pd_strerror(rc));
  apply_all(g);
  return rc;
}

/* Slow readers found while applying: now they are fed as gone, outside the batch. */
static void feed_gone_pending(pd_gateway_t *g) {
  for (uint32_t guard = 0; guard < 1024 && g->n_gone_pending; guard++) {
    pd_event_t gone = {.kind = PD_EV_CLIENT_GONE, .req_id = g->gone_pending[--g->n_gone_pending]};
    feed_one(g, &gone);
  }
}

int pd_gateway_feed(pd_gateway_t *g, const pd_event_t *ev) {
  if (g->in_feed) { /* never expected: actions do not call back into the loop */
    pd_gateway_log(g, "reentrant feed dropped (event %d)", (int)ev->kind);
    return PD_ERR_FATAL;
  }
  g->in_feed = 1;
  int rc = feed_one(g, ev);
  feed_gone_pending(g);
  g->in_feed = 0;
  return rc;
}

/* Fire the core's deadlines that the clock has passed (once per loop turn, after the turn's
 * socket events: those of the same instant reach the core first). */
static void expire(pd_gateway_t *g) {
  assert(!g->in_feed); /* called from the loop only, never while actions are carried out */
  uint64_t now = pd_gateway_now_ns();
  if (pd_gw_get_expiry(g->core) > now) return;
  g->in_feed = 1;
  pd_actbuf_reset(&g->acts);
  pd_gw_handle_expiry(g->core, now, &g->acts);
  apply_all(g);
  feed_gone_pending(g);
  g->in_feed = 0;
}

/* ---------- epoll ---------- */

/* The watch registration of a client socket outlives its request on a keep-alive
 * connection: g->watch_fds[fd] is 1 while the fd is in the epoll set with EPOLLRDHUP (no
 * EPOLLOUT), so the next request on that connection costs no EPOLL_CTL_ADD, and the end of
 * this one no EPOLL_CTL_DEL. MHD's NOTIFY_CLOSED forgets it (pd_gateway_watch_forget); a hang-up
 * on a socket no request owns takes it out (on_watch). */
static uint8_t *watch_slot(pd_gateway_t *g, int fd, int is_grow) {
  if (fd < 0) return NULL;
  if ((uint32_t)fd >= g->n_watch_fds) {
    if (!is_grow || fd >= (1 << 24)) return NULL;
    uint32_t n = g->n_watch_fds ? g->n_watch_fds : 1024u;
    while (n <= (uint32_t)fd) n *= 2u;
    uint8_t *p = realloc(g->watch_fds, n);
    if (!p) return NULL; /* no keeping: ADD and DEL per request, as before */
    memset(p + g->n_watch_fds, 0, n - g->n_watch_fds);
    g->watch_fds = p;
    g->n_watch_fds = n;
  }
  return &g->watch_fds[fd];
}

void pd_gateway_watch(pd_gateway_t *g, pd_gateway_conn_t *c) {
  if (c->is_watched || c->fd < 0) return;
  uint8_t *w = watch_slot(g, c->fd, 1);
  if (w && *w) { /* still registered from this connection's previous request */
    c->is_watched = 1;
    return;
  }
  struct epoll_event ev = {.events = EPOLLRDHUP,
                           .data.u64 = PD_GATEWAY_TAG(PD_GATEWAY_TAG_WATCH, (uint32_t)c->fd)};
  if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, c->fd, &ev) == 0 ||
      (errno == EEXIST && epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)) {
    c->is_watched = 1;
    if (w) *w = 1;
  }
}

int pd_gateway_add_fd(pd_gateway_t *g, int fd, uint64_t tag) {
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
  return epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) ? PD_ERR_IO : 0;
}

void pd_gateway_unwatch(pd_gateway_t *g, pd_gateway_conn_t *c) {
  if (c->is_out_wait) {
    assert(g->n_out_wait > 0);
    g->n_out_wait--;
    c->is_out_wait = 0;
  }
  if (!c->is_watched) return;
  epoll_ctl(g->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  c->is_watched = 0;
  uint8_t *w = watch_slot(g, c->fd, 0);
  if (w) *w = 0;
}

void pd_gateway_unwatch_keep(pd_gateway_t *g, pd_gateway_conn_t *c) {
  uint8_t *w = c->is_watched ? watch_slot(g, c->fd, 0) : NULL;
  if (!w || !*w) {
    pd_gateway_unwatch(g, c);
    return;
  }
  if (c->is_out_wait) { /* back to EPOLLRDHUP alone */
    struct epoll_event ev = {.events = EPOLLRDHUP,
                             .data.u64 = PD_GATEWAY_TAG(PD_GATEWAY_TAG_WATCH, (uint32_t)c->fd)};
    if (epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->fd, &ev)) {
      pd_gateway_unwatch(g, c);
      return;
    }
    assert(g->n_out_wait > 0);
    g->n_out_wait--;
    c->is_out_wait = 0;
  }
  c->is_watched = 0;
}

void pd_gateway_watch_forget(pd_gateway_t *g, int fd) {
  uint8_t *w = watch_slot(g, fd, 0);
  if (!w || !*w) return;
  *w = 0;
  epoll_ctl(g->epfd, EPOLL_CTL_DEL, fd, NULL); /* the close would do it; MHD may close later */
}

/* A watched client socket hung up. Hang-ups are rare, so the connection is looked up by
 * its fd in the list; a registration nobody owns any more is dropped (it is level-triggered
 * and would otherwise wake every turn). */
static void on_watch(pd_gateway_t *g, int fd, uint32_t events) {
  for (pd_gateway_conn_t *c = g->conns; c; c = c->next)
    if (c->is_watched && c->fd == fd) {
      if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        pd_gateway_http_client_hup(g, c);
      else
        pd_gateway_http_client_writable(g, c); /* a full socket has room (slow readers) */
      return;
    }
  uint8_t *w = watch_slot(g, fd, 0); /* e.g. kept from an ended request: the client closed it */
  if (w) *w = 0;
  epoll_ctl(g->epfd, EPOLL_CTL_DEL, fd, NULL);
}

static int wait_ms(pd_gateway_t *g) {
  if (g->mhd_kick) return 0;
  uint64_t now = pd_gateway_now_ns(), t = now + (uint64_t)PD_GATEWAY_MAX_WAIT_MS * 1000000ull;
  uint64_t resume = g->has_httpd ? pd_httpd_gate_resume_ns(&g->httpd) : 0;
  if (resume && resume < t) t = resume;
  uint64_t expiry = pd_gw_get_expiry(g->core);
  if (expiry < t) t = expiry;
  if (g->curl_deadline_ns && g->curl_deadline_ns < t) t = g->curl_deadline_ns;
  MHD_UNSIGNED_LONG_LONG mt;
  if (MHD_get_timeout(g->mhd, &mt) == MHD_YES && mt < PD_GATEWAY_MAX_WAIT_MS &&
      now + mt * 1000000ull < t)
    t = now + mt * 1000000ull;
  if (t <= now) return 0;
  return (int)((t - now + 999999ull) / 1000000ull); /* round up: never wake early and spin */
}

static void on_events(pd_gateway_t *g, const struct epoll_event *evs, int n) {
  for (int i = 0; i < n; i++) {
    uint64_t d = evs[i].data.u64;
    uint64_t v = d & ((1ull << 56) - 1);
    switch ((int)(d >> 56)) {
    case PD_GATEWAY_TAG_CURL: pd_gateway_upstream_on_socket(g, (int)v, evs[i].events); break;
    case PD_GATEWAY_TAG_WATCH: on_watch(g, (int)v, evs[i].events); break;
    case PD_GATEWAY_TAG_WAKE: {
      uint64_t x;
      ssize_t r = read(g->wakefd, &x, sizeof x); /* EAGAIN: nothing to drain */
      (void)r;
      break;
    }
    default: /* MHD_run or the gate below */
      if (v == 1)
        g->is_gate_ready = 1;
      else
        g->is_mhd_ready = 1;
      break;
    }
  }
}

/* The gate runs when its fd is ready (a connection to accept or to look at), or when
 * accepting resumes after running out of descriptors; not every turn. */
static void run_gate(pd_gateway_t *g) {
  uint64_t resume = g->has_httpd ? pd_httpd_gate_resume_ns(&g->httpd) : 0;
  if (!g->is_gate_ready && !(resume && resume <= pd_gateway_now_ns())) return;
  g->is_gate_ready = 0;
  pd_gateway_http_gate(g);
}

static int is_mhd_due(pd_gateway_t *g) {
  MHD_UNSIGNED_LONG_LONG mt;
  return MHD_get_timeout(g->mhd, &mt) == MHD_YES && mt == 0;
}

/* MHD_run when it has something to do: its fd was ready, a connection was resumed or handed
 * in, or a timeout (or a connection it marked ready) is due. A turn with worker bytes only
 * for the core skips it; a turn that queued a head runs it again for the first chunk. */
static void run_mhd(pd_gateway_t *g) {
  for (int i = 0; i < PD_GATEWAY_MHD_RUNS; i++) {
    if (!g->is_mhd_ready && !g->mhd_kick && !is_mhd_due(g)) return;
    g->is_mhd_ready = g->mhd_kick = 0;
    MHD_run(g->mhd);
  }
}

/* Add and remove transfers; legs just added (libcurl's timer at 0) go out in this turn. */
static void run_flush(pd_gateway_t *g) {
  pd_gateway_upstream_flush(g);
  for (int i = 0; i < PD_GATEWAY_SEND_NOW && g->curl_deadline_ns &&
                  g->curl_deadline_ns <= pd_gateway_now_ns();
       i++) {
    pd_gateway_upstream_on_timeout(g);
    pd_gateway_upstream_drain(g);
    pd_gateway_upstream_flush(g);
  }
}

/* One turn of the loop. */
static int step(pd_gateway_t *g, int max_wait_ms) {
  struct epoll_event evs[PD_GATEWAY_EVENTS];
  int ms = wait_ms(g);
  if (ms > max_wait_ms) ms = max_wait_ms;
  int n = epoll_wait(g->epfd, evs, PD_GATEWAY_EVENTS, ms);
  if (n < 0 && errno != EINTR) return PD_ERR_IO;
  if (n > 0) on_events(g, evs, n);
  if (g->curl_deadline_ns && g->curl_deadline_ns <= pd_gateway_now_ns())
    pd_gateway_upstream_on_timeout(g);
  pd_gateway_upstream_drain(g);
  expire(g);
  if (g->n_out_wait) pd_gateway_http_client_stuck(g);
  run_gate(g);
  run_mhd(g);
  if (g->n_corked) pd_gateway_http_uncork_all(g); /* never held past the turn */
  run_flush(g);
  return 0;
}

int pd_gateway_run(pd_gateway_t *g) {
  int rc = 0;
  while (!atomic_load(&g->stop) && rc == 0)
    rc = step(g, PD_GATEWAY_MAX_WAIT_MS);
  /* shutdown: stop accepting, cancel every live request, let the aborts go out */
  MHD_socket lfd = MHD_quiesce_daemon(g->mhd);
  if (lfd != MHD_INVALID_SOCKET) close(lfd);
  pd_gateway_http_cancel_all(g);
  uint64_t until =
      pd_gateway_now_ns() + (uint64_t)g->cfg.abort_timeout_ms * 1000000ull + 100000000ull;
  for (uint32_t guard = 0; guard < 100000 && pd_gateway_now_ns() < until; guard++) {
    if (!g->n_aborts && !g->dirty) break;
    if (step(g, 20)) break;
  }
  return rc;
}

void pd_gateway_stop(pd_gateway_t *g) {
  atomic_store(&g->stop, 1);
  uint64_t one = 1;
  ssize_t r = write(g->wakefd, &one, sizeof one); /* if it fails, the flag stops it in 1 s */
  (void)r;
}

uint16_t pd_gateway_port(const pd_gateway_t *g) {
  return g->port;
}

/* ---------- lifecycle ---------- */

static int add_workers(pd_gateway_t *g, char *err, size_t errlen) {
  for (int r = 0; r < 2; r++) {
    uint32_t n = r == 0 ? g->cfg.n_prefill : g->cfg.n_decode;
    const pd_gateway_worker_t *ws = r == 0 ? g->cfg.prefill : g->cfg.decode;
    for (uint32_t i = 0; i < n; i++) {
      char spec[2048], host[256];
      snprintf(spec, sizeof spec, "%s", ws[i].url ? ws[i].url : "");
      int port_in_url;
      if (pd_gateway_parse_worker(spec, &port_in_url)) {
        snprintf(err, errlen, "%s worker %u: '%s' is not a base URL http://host:port",
                 pd_role_name((pd_role_t)r), i, ws[i].url ? ws[i].url : "");
        return PD_ERR_INVAL;
      }
      g->urls[r][i] = strdup(spec);
      if (!g->urls[r][i]) return PD_ERR_NOMEM;
      url_host(spec, host, sizeof host);
      int bp = r == 0 ? (ws[i].bootstrap_port >= 0 ? ws[i].bootstrap_port : port_in_url) : -1;
      int rc = pd_gw_add_worker(g->core, (pd_role_t)r, spec, host, bp);
      if (rc < 0) return rc;
      const uint32_t *grp = r == 0 ? g->cfg.prefill_group : g->cfg.decode_group;
      if (grp[i]) pd_gw_set_worker_group(g->core, (pd_role_t)r, (uint32_t)rc, grp[i] - 1);
      if (r == 0 && g->cfg.prefill_abort_ignored[i] > 1) /* R-ABORT-COMMITTED */
        pd_gw_set_worker_abort_ignored(g->core, (uint32_t)rc, 1);
      uint32_t limit = r == 0 ? g->cfg.prefill_limit : g->cfg.decode_limit;
      if (limit) pd_gw_set_worker_limit(g->core, (pd_role_t)r, (uint32_t)rc, limit);
    }
  }
  return 0;
}

static int setup_loop(pd_gateway_t *g, char *err, size_t errlen) {
  g->epfd = epoll_create1(EPOLL_CLOEXEC);
  g->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (g->epfd < 0 || g->wakefd < 0) {
    snprintf(err, errlen, "epoll/eventfd: %s", strerror(errno));
    return PD_ERR_IO;
  }
  if (pd_gateway_add_fd(g, g->wakefd, PD_GATEWAY_TAG(PD_GATEWAY_TAG_WAKE, 0))) return PD_ERR_IO;
  uint32_t cap = g->cfg.max_connections * PD_GATEWAY_INFLIGHT_PER_CONN;
  if (cap > (1u << PD_GATEWAY_SLOT_BITS)) cap = 1u << PD_GATEWAY_SLOT_BITS;
  g->slots = calloc(cap, sizeof *g->slots);
  g->gens = calloc(cap, sizeof *g->gens);
  g->free_slots = calloc(cap, sizeof *g->free_slots);
  if (!g->slots || !g->gens || !g->free_slots) return PD_ERR_NOMEM;
  g->n_slots = cap;
  for (uint32_t i = 0; i < cap; i++)
    g->free_slots[g->n_free++] = cap - 1 - i;
  pd_actbuf_init(&g->acts, NULL);
  return 0;
}

static int check_config(const pd_gateway_config_t *c, char *err, size_t errlen) {
  if (!c->n_prefill || !c->n_decode) {
    snprintf(err, errlen, "need at least one --prefill and one --decode worker");
    return PD_ERR_INVAL;
  }
  if (c->n_prefill > PD_MAX_WORKERS || c->n_decode > PD_MAX_WORKERS) {
    snprintf(err, errlen, "at most %u workers per role", PD_MAX_WORKERS);
    return PD_ERR_INVAL;
  }
  if (c->max_conns_per_peer > c->max_connections) {
    snprintf(err, errlen, "--max-connections-per-peer must be at most --max-connections");
    return PD_ERR_INVAL;
  }
  if (!c->max_connections || c->max_connections > 65536) {
    snprintf(err, errlen, "--max-connections must be 1..65536");
    return PD_ERR_INVAL;
  }
  if (!c->client_deadline_s || c->client_deadline_s > 3600) {
    snprintf(err, errlen, "--client-deadline-s must be 1..3600");
    return PD_ERR_INVAL;
  }
  return 0;
}

int pd_gateway_new(const pd_gateway_config_t *cfg, pd_gateway_t **out, char *err, size_t errlen) {
  *out = NULL;
  int rc = check_config(cfg, err, errlen);
  if (rc) return rc;
  pd_gateway_t *g = calloc(1, sizeof *g);
  if (!g) return PD_ERR_NOMEM;
  g->cfg = *cfg;
  if (!g->cfg.listen_host) g->cfg.listen_host = "127.0.0.1";
  g->epfd = g->wakefd = -1;
  atomic_init(&g->stop, 0);
  pd_prng_init(&g->rng, cfg->seed);
  /* ids must differ across runs and restarts, not be replayable: the clock and pid mix in */
  pd_prng_init(&g->xrid_rng, cfg->seed ^ pd_gateway_now_ns() ^ ((uint64_t)getpid() << 32));
  g->core = pd_gw_new(NULL, &cfg->core, &g->rng);
  if (!g->core) rc = PD_ERR_NOMEM;
  if (!rc) rc = add_workers(g, err, errlen);
  if (!rc) rc = setup_loop(g, err, errlen);
  if (!rc) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK)
      g->is_curl_init = 1;
    else
      rc = PD_ERR_IO;
  }
  if (!rc) rc = pd_gateway_upstream_init(g);
  if (!rc) rc = pd_gateway_http_start(g, err, errlen);
  if (rc) {
    if (!err[0]) snprintf(err, errlen, "%s", pd_strerror(rc));
    pd_gateway_del(g);
    return rc;
  }
  *out = g;
  return 0;
}

void pd_gateway_del(pd_gateway_t *g) {
  if (!g) return;
  pd_gateway_http_stop(g); /* resumes and closes every client connection (CLIENT_GONE fed) */
  for (uint32_t s = 0; s < g->n_slots; s++)
    if (g->slots[s]) pd_gateway_req_del(g, g->slots[s]);
  if (g->multi) pd_gateway_upstream_free(g);
  if (g->is_curl_init) curl_global_cleanup();
  pd_gw_del(g->core);
  pd_actbuf_free(&g->acts);
  for (int r = 0; r < 2; r++)
    for (uint32_t i = 0; i < PD_MAX_WORKERS; i++)
      free(g->urls[r][i]);
  free(g->slots);
  free(g->watch_fds);
  free(g->gens);
  free(g->free_slots);
  if (g->epfd >= 0) close(g->epfd);
  if (g->wakefd >= 0) close(g->wakefd);
  free(g);
}
