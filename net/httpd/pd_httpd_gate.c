/* The accept gate of pd_httpd.h: a new connection is held until its first request head is
 * in the socket (MSG_PEEK: nothing is consumed), checked, and only then handed to
 * libmicrohttpd. libmicrohttpd 0.9.75 answers a bad Content-Length, an over-long request line
 * or header block itself (HTML, and for Content-Length its head twice); the gate answers
 * those with one JSON error first. Later requests on a kept-alive connection are not seen
 * here (pd_httpd_framing covers what libmicrohttpd lets through). */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pd_err.h"
#include "pd_httpd.h"
#include "pd_httpd_int.h"

#define GATE_LISTEN_TAG (1ull << 40)

/* ---------- the head check (pure) ---------- */

static size_t line_end(const char *p, size_t n, size_t from) {
  const char *e = memchr(p + from, '\n', n - from);
  return e ? (size_t)(e - p) : n;
}

/* A Content-Length value: 1..18 digits between optional blanks. */
static int is_length(const char *v, size_t n) {
  while (n && (*v == ' ' || *v == '\t')) v++, n--;
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r')) n--;
  if (!n || n > 18) return 0;
  for (size_t i = 0; i < n; i++)
    if (v[i] < '0' || v[i] > '9') return 0;
  return 1;
}

static int bad(char *msg, size_t cap, unsigned status, const char *why) {
  snprintf(msg, cap, "%s", why);
  return (int)status;
}

/* The name of the field on line [at, e) for a message: up to its colon, cut, printable. */
static void field_name(const char *p, size_t at, size_t e, char *out, size_t cap) {
  size_t k = 0;
  while (e > at && p[e - 1] != ':' && memchr(p + at, ':', e - at)) e--; /* up to the colon */
  while (e > at && (p[e - 1] == ':' || p[e - 1] == ' ' || p[e - 1] == '\t')) e--;
  for (size_t i = at; i < e && k + 1 < cap && k < 40; i++)
    out[k++] = (p[i] > 0x20 && p[i] < 0x7f && p[i] != '\'' && p[i] != '"') ? p[i] : '?';
  out[k] = 0;
}

/* The field lines of a first head, raw: what libmicrohttpd 0.9.75 would take silently. A NUL
 * cuts a value where libmicrohttpd stores it (X-Request-Id was forwarded cut); an obsolete
 * folded line (RFC 9112 section 5.2: a server rejects it or replaces it) and a blank before
 * the colon (section 5.1) are refused with 400 naming the header. */
static int check_fields(const char *p, size_t n, char *msg, size_t cap) {
  size_t first = line_end(p, n, 0);
  char name[48], why[128];
  if (memchr(p, 0, first)) return bad(msg, cap, 400, "header: NUL in the request line");
  size_t at = first + 1, prev = 0, prev_e = 0;
  while (at < n) {
    size_t e = line_end(p, n, at), len = e - at;
    if (len == 0 || (len == 1 && p[at] == '\r')) break; /* the blank line */
    const char *colon = memchr(p + at, ':', len);
    if (p[at] == ' ' || p[at] == '\t') {
      field_name(p, prev, prev_e, name, sizeof name);
      snprintf(why, sizeof why, "header '%s': obsolete line folding", prev ? name : "?");
      return bad(msg, cap, 400, why);
    }
    field_name(p, at, e, name, sizeof name);
    if (memchr(p + at, 0, len)) {
      snprintf(why, sizeof why, "header '%s': NUL in the field", name);
      return bad(msg, cap, 400, why);
    }
    if (colon && colon > p + at && (colon[-1] == ' ' || colon[-1] == '\t')) {
      snprintf(why, sizeof why, "framing: whitespace before the colon in header '%s'", name);
      return bad(msg, cap, 400, why);
    }
    if (colon && (size_t)(colon - (p + at)) == 14 && !strncasecmp(p + at, "Content-Length", 14) &&
        !is_length(colon + 1, (size_t)(p + e - colon - 1)))
      return bad(msg, cap, 400, "framing: Content-Length is not a non-negative integer");
    prev = at;
    prev_e = e;
    at = e + 1;
  }
  return 1;
}

int pd_httpd_head_check(const char *p, size_t n, size_t max_line, size_t max_head, char *msg,
                        size_t cap) {
  size_t first = line_end(p, n, 0);
  if (first > max_line) return bad(msg, cap, 414, "request line too long");
  const char *end = NULL;
  for (size_t i = first; i + 1 < n && !end; i++)
    if (p[i] == '\n' && (p[i + 1] == '\n' || (p[i + 1] == '\r' && i + 2 < n && p[i + 2] == '\n')))
      end = p + i + 1;
  if (!end) return n >= max_head ? bad(msg, cap, 431, "request header fields too large") : 0;
  if ((size_t)(end - p) > max_head) return bad(msg, cap, 431, "request header fields too large");
  if (first == n) return 0;
  return check_fields(p, (size_t)(end - p), msg, cap);
}

/* ---------- the pending connections ---------- */

int pd_httpd_gate_init(pd_httpd_t *h, int listen_fd, pd_httpd_hand_fn hand, void *ctx) {
  h->gate_ep = epoll_create1(EPOLL_CLOEXEC);
  h->gate = calloc(h->max_conns, sizeof *h->gate);
  h->listen_fd = listen_fd;
  h->hand = hand;
  h->hand_ctx = ctx;
  if (h->gate_ep < 0 || !h->gate) return PD_ERR_NOMEM;
  for (uint32_t i = 0; i < h->max_conns; i++) h->gate[i].fd = -1;
  if (listen_fd >= 0) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = GATE_LISTEN_TAG};
    if (epoll_ctl(h->gate_ep, EPOLL_CTL_ADD, listen_fd, &ev)) return PD_ERR_IO;
  }
  return 0;
}

void pd_httpd_gate_free(pd_httpd_t *h) {
  pd_httpd_gate_quiesce(h);
  free(h->gate);
  h->gate = NULL;
  if (h->gate_ep >= 0) close(h->gate_ep);
  h->gate_ep = -1;
}

void pd_httpd_gate_add(pd_httpd_t *h, int fd, const struct sockaddr *a, socklen_t alen) {
  pthread_mutex_lock(&h->mu);
  uint32_t slot = h->max_conns;
  for (uint32_t i = 0; i < h->max_conns && slot == h->max_conns; i++)
    if (h->gate[(h->gate_next + i) % h->max_conns].fd < 0) slot = (h->gate_next + i) % h->max_conns;
  int ok = slot < h->max_conns && alen <= sizeof h->gate[0].addr;
  if (ok) {
    pd_httpd_pending_t *e = &h->gate[slot];
    e->fd = fd;
    e->t0_ns = pd_httpd_now_ns();
    memcpy(&e->addr, a, alen);
    e->alen = alen;
    pd_httpd_peer_of(a, alen, &e->peer);
    h->gate_next = slot + 1;
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET | EPOLLRDHUP, .data.u64 = slot};
    if (epoll_ctl(h->gate_ep, EPOLL_CTL_ADD, fd, &ev)) e->fd = -1, ok = 0;
  }
  if (!ok && h->n_conns) h->n_conns--;
  pthread_mutex_unlock(&h->mu);
  if (!ok) close(fd);
}

void pd_httpd_gate_quiesce(pd_httpd_t *h) {
  pthread_mutex_lock(&h->mu);
  if (h->listen_fd >= 0) {
    epoll_ctl(h->gate_ep, EPOLL_CTL_DEL, h->listen_fd, NULL);
    close(h->listen_fd);
    h->listen_fd = -1;
  }
  for (uint32_t i = 0; h->gate && i < h->max_conns; i++) {
    if (h->gate[i].fd < 0) continue;
    epoll_ctl(h->gate_ep, EPOLL_CTL_DEL, h->gate[i].fd, NULL);
    close(h->gate[i].fd);
    h->gate[i].fd = -1;
    if (h->n_conns) h->n_conns--;
  }
  pthread_mutex_unlock(&h->mu);
}

/* Past the deadline (sweeper, h->mu held): 408 and shut down; the gate closes it. */
void pd_httpd_gate_sweep(pd_httpd_t *h, uint64_t now) {
  for (uint32_t i = 0; h->gate && i < h->max_conns; i++) {
    pd_httpd_pending_t *e = &h->gate[i];
    if (e->fd < 0 || e->is_killed || now - e->t0_ns < h->request_ns) continue;
    e->is_killed = 1;
    h->timed_out++;
    pd_httpd_raw_error(e->fd, 408, "request_timeout", "the request was not complete in time");
    shutdown(e->fd, SHUT_RDWR);
  }
}

#define GATE_WAIT (-2) /* nothing readable yet */

/* What the bytes in fd's socket say (nothing consumed): GATE_WAIT or 0 (keep waiting), 1 (a
 * good first head: hand it over), -1 (closed before a whole head), or an HTTP status to
 * refuse it with (msg filled). */
static int gate_peek(int fd, char *msg, size_t cap) {
  char buf[PD_HTTPD_MAX_HEAD + 1];
  ssize_t n = recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return GATE_WAIT;
  return n > 0 ? pd_httpd_head_check(buf, (size_t)n, PD_HTTPD_MAX_LINE, PD_HTTPD_MAX_HEAD, msg, cap)
               : -1;
}

/* A connection out of the gate with verdict v (not 0 or GATE_WAIT): handed to the server, or
 * answered and closed. It is no longer in the pending table. */
static void gate_finish(pd_httpd_t *h, int fd, const struct sockaddr *a, socklen_t alen, int v,
                        const char *msg) {
  if (v == 1) {
    if (h->hand(h->hand_ctx, fd, a, alen)) pd_httpd_unadmit(h);
    return;
  }
  pthread_mutex_lock(&h->mu);
  if (h->n_conns) h->n_conns--;
  if (v > 1) h->bad_framing++;
  pthread_mutex_unlock(&h->mu);
  if (v > 1)
    pd_httpd_raw_error(fd, (unsigned)v, v == 400 ? (strncmp(msg, "header", 6) ? "bad_framing" : "bad_header") : v == 414 ? "uri_too_long"
                                                                            : "header_too_large",
                       msg);
  char buf[4096];
  for (int i = 0; i < 16 && recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0; i++) {
  } /* what came is read: the close is a FIN, not a reset that could cut the answer */
  close(fd);
}

/* Look at one pending connection: hand it over, refuse it, or keep waiting. */
static void gate_look(pd_httpd_t *h, uint32_t slot) {
  char msg[160];
  pthread_mutex_lock(&h->mu);
  pd_httpd_pending_t e = h->gate[slot];
  pthread_mutex_unlock(&h->mu);
  if (e.fd < 0) return;
  int v = gate_peek(e.fd, msg, sizeof msg);
  if (e.is_killed) v = -1; /* shut down past the deadline: the 408 is out */
  if (v == 0 || v == GATE_WAIT) return;
  pthread_mutex_lock(&h->mu);
  epoll_ctl(h->gate_ep, EPOLL_CTL_DEL, e.fd, NULL);
  h->gate[slot].fd = -1;
  h->gate[slot].is_killed = 0;
  pthread_mutex_unlock(&h->mu);
  gate_finish(h, e.fd, (struct sockaddr *)&e.addr, e.alen, v, msg);
}

/* Accept what is waiting. A connection whose first head is already in (the common case: a
 * client writes its request right after the handshake) is judged at once, with no trip
 * through the pending table: three system calls (accept4, recv, the hand-off) per healthy
 * connection instead of nine on this path, which is most of the gate's cost under load. */
static void gate_accept(pd_httpd_t *h) {
  for (int i = 0; i < 64; i++) { /* bounded per turn */
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    int fd = accept4(h->listen_fd, (struct sockaddr *)&a, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) { /* pause rather than spin */
      struct epoll_event ev = {.events = 0, .data.u64 = GATE_LISTEN_TAG};
      epoll_ctl(h->gate_ep, EPOLL_CTL_MOD, h->listen_fd, &ev);
      h->accept_resume_ns = pd_httpd_now_ns() + 10000000ull;
    }
    if (fd < 0) return;
    if (!pd_httpd_admit(h, fd, (struct sockaddr *)&a, len)) continue;
    char msg[160];
    int v = gate_peek(fd, msg, sizeof msg);
    if (v == 0 || v == GATE_WAIT)
      pd_httpd_gate_add(h, fd, (struct sockaddr *)&a, len);
    else
      gate_finish(h, fd, (struct sockaddr *)&a, len, v, msg);
  }
}

uint64_t pd_httpd_gate_resume_ns(const pd_httpd_t *h) {
  return h->listen_fd >= 0 ? h->accept_resume_ns : 0;
}

int pd_httpd_gate_run(pd_httpd_t *h, int timeout_ms) {
  struct epoll_event evs[64];
  if (h->accept_resume_ns && pd_httpd_now_ns() >= h->accept_resume_ns && h->listen_fd >= 0) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = GATE_LISTEN_TAG};
    epoll_ctl(h->gate_ep, EPOLL_CTL_MOD, h->listen_fd, &ev);
    h->accept_resume_ns = 0;
  }
  int n = epoll_wait(h->gate_ep, evs, 64, timeout_ms);
  for (int i = 0; i < n; i++) {
    if (evs[i].data.u64 == GATE_LISTEN_TAG)
      gate_accept(h);
    else if (evs[i].data.u64 < h->max_conns)
      gate_look(h, (uint32_t)evs[i].data.u64);
  }
  return n;
}
