/* The bootstrap rendezvous over TCP (docs/mock.md, "Bootstrap protocol"). A prefill mock
 * listens on its bootstrap port; each waiting decode request connects and sends one line
 *   REG <room> <hash:16 hex> <flags>\n
 * and the prefill answers on the same connection with
 *   PAIR <room>\n   (its request for the room took the registration: forward pass started)
 *   KV <room>\n     (the KV transfer is done: decode may produce tokens), then closes
 *   FAIL <room>\n   (the KV transfer failed: both sides answer 500), then closes.
 * Either side closing early means its request left. All I/O is non-blocking, run by the
 * engine thread under m->mu; the worker's decisions are the worker engine's (pd_mock_drive.c).
 * A vLLM mock uses the same listener, connection table and line reader for its KV side
 * channel, whose lines pd_mock_kv.c speaks. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pd_mock_int.h"

#define LISTENER UINT32_MAX

int pd_mock_bootstrap_init(pd_mock_t *m) {
  m->boot_listen = -1;
  m->bc = calloc(PD_MOCK_MAX_BOOT_CONNS, sizeof *m->bc);
  if (!m->bc) return -1;
  for (uint32_t i = 0; i < PD_MOCK_MAX_BOOT_CONNS; i++) {
    m->bc[i].fd = -1;
    m->bc_free[i] = PD_MOCK_MAX_BOOT_CONNS - 1 - i;
  }
  m->n_bc_free = PD_MOCK_MAX_BOOT_CONNS;
  return 0;
}

void pd_mock_bootstrap_free(pd_mock_t *m) {
  if (!m->bc) return;
  pd_mock_bootstrap_close_all(m);
  if (m->boot_listen >= 0) close(m->boot_listen);
  m->boot_listen = -1;
  free(m->bc);
  m->bc = NULL;
}

int pd_mock_bootstrap_listen(pd_mock_t *m, char *err, size_t errlen) {
  uint16_t port = 0; /* a restart binds the port bound first, so boot_port never changes */
  int rc = pd_mock_listen(m->cfg.listen_host, m->boot_port ? m->boot_port : m->cfg.bootstrap_port,
                          &m->boot_listen, &port, err, errlen);
  if (rc == 0 && !m->boot_port) m->boot_port = port;
  return rc;
}

pd_mock_bootstrap_conn_t *pd_mock_bootstrap_get(pd_mock_t *m, int bc) { return &m->bc[bc]; }

static int bc_new(pd_mock_t *m, int fd, pd_mock_bootstrap_conn_state_t state) {
  if (!m->n_bc_free) return -1;
  uint32_t i = m->bc_free[--m->n_bc_free];
  pd_mock_bootstrap_conn_t *b = &m->bc[i];
  memset(b, 0, sizeof *b);
  b->fd = fd;
  b->state = state;
  b->live_idx = m->n_bc_live;
  m->bc_live[m->n_bc_live++] = i;
  return (int)i;
}

void pd_mock_bootstrap_close(pd_mock_t *m, int bc) {
  pd_mock_bootstrap_conn_t *b = &m->bc[bc];
  if (b->state == BOOTSTRAP_CONN_FREE) return;
  int was_registered = m->cfg.role == PD_ROLE_PREFILL && b->seq &&
                       (b->state == BOOTSTRAP_CONN_REGISTERED || b->state == BOOTSTRAP_CONN_PAIRED);
  uint64_t token = pd_mock_drive_token(m, bc);
  close(b->fd);
  uint32_t last = m->bc_live[--m->n_bc_live];
  m->bc_live[b->live_idx] = last;
  m->bc[last].live_idx = b->live_idx;
  b->fd = -1;
  b->state = BOOTSTRAP_CONN_FREE;
  b->leg = NULL;
  b->seq = 0;
  m->bc_free[m->n_bc_free++] = (uint32_t)bc;
  if (was_registered) pd_mock_drive_unregistered(m, token); /* NOT_FOUND when it was done */
}

void pd_mock_bootstrap_close_all(pd_mock_t *m) {
  for (uint32_t n = m->n_bc_live; n-- > 0;) { /* each close removes one */
    int bc = (int)m->bc_live[n];
    pd_mock_leg_t *leg = m->bc[bc].leg;
    if (leg && leg->boot == bc) leg->boot = -1;
    pd_mock_bootstrap_close(m, bc);
  }
}

/* The peer closed, or the socket failed (why): tell the leg that used it. */
static void bc_lost(pd_mock_t *m, int bc, const char *why) {
  if (m->is_vllm) {
    pd_mock_kv_lost(m, bc, why);
    return;
  }
  pd_mock_leg_t *leg = m->bc[bc].leg;
  int is_mine = leg && leg->boot == bc;
  if (is_mine) leg->boot = -1;
  pd_mock_bootstrap_close(m, bc);
  if (is_mine && m->cfg.role == PD_ROLE_DECODE) pd_mock_drive_boot_lost(m, leg);
}

int pd_mock_bootstrap_send_line(pd_mock_t *m, int bc, const char *line) {
  size_t len = strlen(line);
  ssize_t n = send(m->bc[bc].fd, line, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n == (ssize_t)len) return 0;
  bc_lost(m, bc, "send"); /* a few bytes that do not fit an empty socket buffer: the peer is gone */
  return -1;
}

int pd_mock_bootstrap_send(pd_mock_t *m, int bc, const char *verb, uint64_t room) {
  char line[64];
  snprintf(line, sizeof line, "%s %" PRIu64 "\n", verb, room);
  return pd_mock_bootstrap_send_line(m, bc, line);
}

/* ---------- decode side ---------- */

static void on_connected(pd_mock_t *m, int bc) {
  if (m->is_vllm) {
    pd_mock_kv_connected(m, bc);
    return;
  }
  pd_mock_bootstrap_conn_t *b = &m->bc[bc];
  char line[96];
  snprintf(line, sizeof line, "REG %" PRIu64 " %016" PRIx64 " %" PRIu32 "\n", b->room, b->hash,
           b->flags);
  b->state = BOOTSTRAP_CONN_REGISTERED;
  pd_mock_leg_t *d = b->leg;
  if (pd_mock_bootstrap_send_line(m, bc, line) == 0) pd_mock_log_room(m, "room_registered", d, d->room);
}

static int open_socket(const char *host, int port, int *fd_out) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res = NULL;
  char ps[8];
  snprintf(ps, sizeof ps, "%d", port);
  if (getaddrinfo(host, ps, &hints, &res) != 0 || !res) return -1;
  int fd = socket(res->ai_family, SOCK_STREAM, 0);
  int rc = fd < 0 || fcntl(fd, F_SETFL, O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0
               ? -1
               : connect(fd, res->ai_addr, res->ai_addrlen);
  int is_pending = rc < 0 && errno == EINPROGRESS;
  freeaddrinfo(res);
  if (rc < 0 && !is_pending) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *fd_out = fd;
  return rc == 0 ? 1 : 0; /* 1 connected at once, 0 in progress */
}

int pd_mock_bootstrap_dial(pd_mock_t *m, const char *host, int port, pd_mock_leg_t *leg,
                           int *is_open) {
  int fd = -1, rc = open_socket(host, port, &fd);
  int bc = rc < 0 ? -1 : bc_new(m, fd, BOOTSTRAP_CONN_CONNECTING);
  if (bc < 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  m->bc[bc].leg = leg;
  *is_open = rc == 1;
  if (!pd_mock_on_engine(m)) pd_mock_wake(m); /* the engine polls the new socket now, not at
                                                 its next 20 ms peer check */
  return bc;
}

void pd_mock_bootstrap_connect(pd_mock_t *m, pd_mock_leg_t *d, uint32_t flags) {
  int is_open = 0, bc = pd_mock_bootstrap_dial(m, d->boot_host, d->boot_port, d, &is_open);
  if (bc < 0) {
    pd_mock_drive_boot_lost(m, d); /* refused or no room in the table: retry later */
    return;
  }
  pd_mock_bootstrap_conn_t *b = &m->bc[bc];
  b->room = d->room;
  b->hash = d->rooms_hash;
  b->flags = flags; /* PD_WENGINE_REG_*: kv_fail and the pairing topology */
  d->boot = bc;
  if (is_open) on_connected(m, bc);
}

static void connect_done(pd_mock_t *m, int bc) {
  int e = 0;
  socklen_t len = sizeof e;
  if (getsockopt(m->bc[bc].fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0 || e) bc_lost(m, bc, "refused");
  else on_connected(m, bc);
}

/* ---------- lines ---------- */

static int parse_verb_room(const char *line, const char *verb, uint64_t *room) {
  size_t vl = strlen(verb);
  if (strncmp(line, verb, vl) != 0 || line[vl] != ' ') return 0;
  char *end = NULL;
  *room = strtoull(line + vl + 1, &end, 10);
  return end && end != line + vl + 1;
}

static void on_line_prefill(pd_mock_t *m, int bc, const char *line) {
  pd_mock_bootstrap_conn_t *b = &m->bc[bc];
  uint64_t room, hash;
  uint32_t flags;
  if (b->state != BOOTSTRAP_CONN_OPEN ||
      sscanf(line, "REG %" SCNu64 " %" SCNx64 " %" SCNu32, &room, &hash, &flags) != 3) {
    bc_lost(m, bc, "protocol"); /* protocol error */
    return;
  }
  b->room = room;
  b->hash = hash;
  b->flags = flags;
  pd_mock_drive_registered(m, bc);
}

static void on_line_decode(pd_mock_t *m, int bc, const char *line) {
  pd_mock_leg_t *d = m->bc[bc].leg;
  uint64_t room = 0;
  if (!d || d->boot != bc) { bc_lost(m, bc, "protocol"); return; }
  if (parse_verb_room(line, "PAIR", &room) && room == d->room) pd_mock_drive_paired(m, d);
  else if (parse_verb_room(line, "KV", &room) && room == d->room) pd_mock_drive_kv(m, d, 1);
  else if (parse_verb_room(line, "FAIL", &room) && room == d->room) pd_mock_drive_kv(m, d, 0);
  else bc_lost(m, bc, "protocol");
}

/* Read what is there and handle each complete line; stops when the connection goes. */
static void on_readable(pd_mock_t *m, int bc, int fd) {
  pd_mock_bootstrap_conn_t *b = &m->bc[bc];
  for (int round = 0; round < 8; round++) { /* bounded per engine turn */
    ssize_t n = recv(fd, b->rbuf + b->rlen, sizeof b->rbuf - 1 - b->rlen, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) { bc_lost(m, bc, "closed"); return; }
    b->rlen += (size_t)n;
    char *nl;
    while (b->state != BOOTSTRAP_CONN_FREE && b->fd == fd &&
           (nl = memchr(b->rbuf, '\n', b->rlen))) {
      char line[PD_MOCK_LINE_MAX];
      size_t ll = (size_t)(nl - b->rbuf);
      memcpy(line, b->rbuf, ll);
      line[ll] = 0;
      b->rlen -= ll + 1;
      memmove(b->rbuf, nl + 1, b->rlen);
      if (m->is_vllm) pd_mock_kv_on_line(m, bc, line);
      else if (m->cfg.role == PD_ROLE_PREFILL) on_line_prefill(m, bc, line);
      else on_line_decode(m, bc, line);
    }
    if (b->state == BOOTSTRAP_CONN_FREE || b->fd != fd) return;
    if (b->rlen >= sizeof b->rbuf - 1) { bc_lost(m, bc, "line too long"); return; }
  }
}

/* ---------- polling ---------- */

size_t pd_mock_bootstrap_pollfds(pd_mock_t *m, struct pollfd *p, size_t cap, uint32_t *idx) {
  size_t n = 0;
  for (uint32_t i = 0; i < m->n_bc_live && n < cap; i++) {
    const pd_mock_bootstrap_conn_t *b = &m->bc[m->bc_live[i]];
    p[n].fd = b->fd;
    p[n].events = (short)(b->state == BOOTSTRAP_CONN_CONNECTING ? POLLOUT : POLLIN);
    p[n].revents = 0;
    idx[n++] = m->bc_live[i];
  }
  if (m->boot_listen >= 0 && n < cap && !pd_mock_accept_paused(m)) { /* last: accepting may reuse a slot closed above */
    p[n] = (struct pollfd){m->boot_listen, POLLIN, 0};
    idx[n++] = LISTENER;
  }
  return n;
}

uint64_t pd_mock_bootstrap_expire(pd_mock_t *m, uint64_t now_ns) {
  uint64_t ttl = (uint64_t)PD_MOCK_BOOT_REG_TIMEOUT_MS * 1000000ull, next = UINT64_MAX;
  for (uint32_t n = m->n_bc_live; n-- > 0;) { /* from the end: a close moves the last here */
    if (n >= m->n_bc_live) continue; /* a lost READ's answer closed more than one */
    int bc = (int)m->bc_live[n];
    const pd_mock_bootstrap_conn_t *b = &m->bc[bc];
    if (b->kv_deadline_ns && now_ns >= b->kv_deadline_ns) { /* a READ unanswered */
      bc_lost(m, bc, "timeout");
      continue;
    }
    if (b->kv_deadline_ns && b->kv_deadline_ns < next) next = b->kv_deadline_ns;
    if (b->state != BOOTSTRAP_CONN_OPEN || m->cfg.role != PD_ROLE_PREFILL) continue;
    if (now_ns >= b->t_open_ns + ttl) pd_mock_bootstrap_close(m, bc); /* no leg refers to it yet */
    else if (b->t_open_ns + ttl < next) next = b->t_open_ns + ttl;
  }
  return next;
}

/* At PD_MOCK_BOOT_MAX_UNREGISTERED connections without their REG line, close the oldest. */
static void evict_unregistered(pd_mock_t *m) {
  uint32_t count = 0;
  int oldest = -1;
  for (uint32_t i = 0; i < m->n_bc_live; i++) {
    int bc = (int)m->bc_live[i];
    if (m->bc[bc].state != BOOTSTRAP_CONN_OPEN) continue;
    count++;
    if (oldest < 0 || m->bc[bc].t_open_ns < m->bc[oldest].t_open_ns) oldest = bc;
  }
  if (count >= PD_MOCK_BOOT_MAX_UNREGISTERED && oldest >= 0) pd_mock_bootstrap_close(m, oldest);
}

static void accept_some(pd_mock_t *m) {
  for (int i = 0; i < 64; i++) { /* bounded per engine turn */
    int fd = accept(m->boot_listen, NULL, NULL);
    if (fd < 0) {
      pd_mock_accept_failed(m, errno);
      return;
    }
    evict_unregistered(m);
    int bc = fcntl(fd, F_SETFL, O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0
                 ? -1
                 : bc_new(m, fd, BOOTSTRAP_CONN_OPEN);
    if (bc < 0) close(fd); /* table full: the decode sees EOF and retries */
    else m->bc[bc].t_open_ns = pd_mock_now_ns();
  }
}

void pd_mock_bootstrap_on_poll(pd_mock_t *m, const struct pollfd *p, const uint32_t *idx,
                               size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!p[i].revents) continue;
    if (idx[i] == LISTENER) {
      if (m->boot_listen == p[i].fd) accept_some(m);
      continue;
    }
    int bc = (int)idx[i];
    pd_mock_bootstrap_conn_t *b = &m->bc[bc];
    if (b->state == BOOTSTRAP_CONN_FREE || b->fd != p[i].fd)
      continue; /* closed earlier in this turn */
    if (b->state == BOOTSTRAP_CONN_CONNECTING) connect_done(m, bc);
    else on_readable(m, bc, p[i].fd);
  }
}
