/* The mock's lifecycle and its engine thread: one loop that accepts HTTP connections, fires
 * the worker engine's deadlines and its own I/O timers (crash, restart, a held request)
 * from a min-heap, serves the bootstrap sockets, resumes connections that have output, and
 * watches suspended connections for clients that left.
 * Every loop is bounded per turn; the thread sleeps in ppoll until the next deadline. */
#define _GNU_SOURCE /* POLLRDHUP, ppoll */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pd_err.h"
#include "pd_mock_int.h"

#define MS_NS 1000000ull
#define TIMERS_PER_TURN 4096u
#define RESUMES_PER_BATCH 64u
#define PEER_POLL_BATCH 256u

uint64_t pd_mock_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t pd_mock_scaled_ns(const pd_mock_t *m, uint64_t ms) {
  double ns = (double)ms * 1e6 * m->cfg.speed;
  return ns >= 9.2e18 ? (uint64_t)9.2e18 : ns <= 0 ? 0 : (uint64_t)ns;
}

void pd_mock_config_default(pd_mock_config_t *c) {
  memset(c, 0, sizeof *c);
  c->role = PD_ROLE_PREFILL;
  c->seed = 1;
  c->default_tokens = 8;
  c->bootstrap_timeout_ms = 300000;
  c->waiting_timeout_ms = 300000;
  c->speed = 1.0;
  c->listen_host = "127.0.0.1";
}

void pd_mock_wake(pd_mock_t *m) {
  char b = 1;
  ssize_t n = write(m->wake[1], &b, 1); /* a full pipe already wakes the engine */
  (void)n;
}

void pd_mock_accept_failed(pd_mock_t *m, int err) {
  if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM)
    m->accept_pause_until_ns = pd_mock_now_ns() + 10 * MS_NS;
}

int pd_mock_accept_paused(const pd_mock_t *m) {
  return m->accept_pause_until_ns && pd_mock_now_ns() < m->accept_pause_until_ns;
}

int pd_mock_on_engine(const pd_mock_t *m) {
  return m->is_engine_running && pthread_equal(pthread_self(), m->engine_tid);
}

void pd_mock_timer(pd_mock_t *m, pd_mock_leg_t *leg, int kind, uint64_t delay_ns) {
  pd_heap_item_t it = {pd_mock_now_ns() + delay_ns, 0, (uint32_t)kind, leg ? leg->slot : 0,
                       leg ? leg->id : 0, leg ? leg->tgen : 0, 0};
  if (pd_heap_push(&m->timers, &it) < 0) {
    fprintf(stderr, "pdref mock: timer heap full\n");
    return;
  }
  if (!pd_mock_on_engine(m) && m->engine_asleep && it.t_ns < m->poll_deadline_ns) pd_mock_wake(m);
}

/* ---------- legs ---------- */

pd_mock_leg_t *pd_mock_leg_new(pd_mock_t *m) {
  if (!m->n_free) return NULL;
  pd_mock_leg_t *leg = calloc(1, sizeof *leg);
  if (!leg) return NULL;
  leg->m = m;
  leg->slot = m->free_slots[--m->n_free];
  leg->id = ++m->next_id;
  leg->fd = -1;
  leg->boot = -1;
  leg->wstate = PD_WORKER_LEG_NEW;
  pd_buf_init(&leg->out, PD_MOCK_MAX_OUT_BYTES);
  leg->live_idx = m->n_live;
  m->live[m->n_live++] = leg;
  m->legs[leg->slot] = leg;
  /* a sleeping engine must start watching this leg's client (peer_check) */
  if (!pd_mock_on_engine(m) && m->engine_asleep &&
      m->poll_deadline_ns > pd_mock_now_ns() + PD_MOCK_PEER_CHECK_MS * MS_NS)
    pd_mock_wake(m);
  return leg;
}

static void leg_del(pd_mock_t *m, pd_mock_leg_t *leg) {
  if (leg->boot >= 0) pd_mock_bootstrap_close(m, leg->boot);
  pd_mock_leg_t *last = m->live[--m->n_live];
  m->live[leg->live_idx] = last;
  last->live_idx = leg->live_idx;
  m->legs[leg->slot] = NULL;
  m->free_slots[m->n_free++] = leg->slot;
  pd_buf_free(NULL, &leg->out);
  free(leg->rid_json);
  free(leg->rooms);
  free(leg);
}

void pd_mock_leg_del_if_unused(pd_mock_t *m, pd_mock_leg_t *leg) {
  int is_worker_done =
      leg->wstate == PD_WORKER_LEG_DONE || (leg->wstate == PD_WORKER_LEG_NEW && !leg->is_held);
  if (is_worker_done && !leg->is_attached && !leg->has_response && !leg->want_resume)
    leg_del(m, leg);
}

void pd_mock_want_resume(pd_mock_t *m, pd_mock_leg_t *leg) {
  if (!leg->is_suspended || leg->want_resume) return;
  leg->want_resume = 1;
  m->resume[m->n_resume++] = leg; /* at most once per leg: bounded by PD_MOCK_MAX_LEGS */
  if (!pd_mock_on_engine(m)) pd_mock_wake(m);
}

/* ---------- the worker model's output ---------- */

/* pd_mock_output_*: the model fills a leg's buffer under m->mu; pd_mock_http.c drains it. */

int pd_mock_output_can_send(const pd_mock_leg_t *leg) {
  return leg->is_attached && !leg->is_peer_closed && leg->end == PD_MOCK_OUTPUT_END_NONE;
}

void pd_mock_output_head(pd_mock_t *m, pd_mock_leg_t *leg, int status, int is_sse) {
  if (!pd_mock_output_can_send(leg) || leg->head_status) return;
  leg->head_status = status;
  leg->head_is_sse = is_sse;
  pd_mock_want_resume(m, leg);
}

/* Room for `more` bytes of output; an output fully handed over starts again at the front. */
static int out_reserve(pd_mock_leg_t *leg, size_t more) {
  if (leg->out_off == leg->out.len) leg->out_off = leg->out.len = 0;
  return pd_buf_reserve(NULL, &leg->out, more);
}

void pd_mock_output_render(pd_mock_t *m, pd_mock_leg_t *leg, int kind, uint32_t arg) {
  if (!pd_mock_output_can_send(leg)) return;
  pd_wire_leg_t r = {leg->rid_json, leg->is_stream, leg->has_logprob, leg->tokens,
                     &leg->api};
  /* vLLM: the prefill's answer names our side channel and our name (V1.5) */
  pd_wire_vllm_t v = {m->name_json, m->cfg.listen_host, m->boot_port};
  size_t need = pd_wire_render_cap(&r, kind);
  if (out_reserve(leg, need) < 0) return;
  leg->out.len += pd_wire_render_vllm(&r, m->is_vllm ? &v : NULL, kind, arg,
                                      (char *)leg->out.p + leg->out.len, need);
  pd_mock_want_resume(m, leg);
}

void pd_mock_output_end(pd_mock_t *m, pd_mock_leg_t *leg, pd_mock_output_end_t end) {
  if (!pd_mock_output_can_send(leg)) return;
  leg->end = end;
  pd_mock_want_resume(m, leg);
}

uint32_t pd_mock_live_slots(pd_mock_t *m) {
  pthread_mutex_lock(&m->mu);
  uint32_t n = m->live_slots;
  pthread_mutex_unlock(&m->mu);
  return n;
}

uint16_t pd_mock_port(const pd_mock_t *m) { return m->port; }
uint16_t pd_mock_bootstrap_port(const pd_mock_t *m) { return m->boot_port; }

/* ---------- engine ---------- */

/* Resume, outside m->mu, the connections whose legs have output (or must close). */
static void do_resumes(pd_mock_t *m) {
  while (m->n_resume) { /* each batch shrinks the list; new entries need new output */
    struct MHD_Connection *cs[RESUMES_PER_BATCH];
    uint32_t n = 0;
    while (m->n_resume && n < RESUMES_PER_BATCH) {
      pd_mock_leg_t *leg = m->resume[--m->n_resume];
      leg->want_resume = 0;
      if (leg->is_suspended && leg->is_attached && leg->conn) cs[n++] = leg->conn;
      leg->is_suspended = 0;
      pd_mock_leg_del_if_unused(m, leg);
    }
    pthread_mutex_unlock(&m->mu);
    for (uint32_t i = 0; i < n; i++) MHD_resume_connection(cs[i]);
    pthread_mutex_lock(&m->mu);
  }
}

/* libmicrohttpd does not watch suspended sockets: look for clients that left. */
static void peer_check(pd_mock_t *m) {
  struct pollfd pf[PEER_POLL_BATCH];
  pd_mock_leg_t *who[PEER_POLL_BATCH];
  for (uint32_t start = 0; start < m->n_live;) {
    uint32_t n = 0;
    for (; start < m->n_live && n < PEER_POLL_BATCH; start++) {
      pd_mock_leg_t *leg = m->live[start];
      if (!leg->is_suspended || !leg->is_attached || leg->fd < 0 || leg->is_peer_closed) continue;
      pf[n] = (struct pollfd){leg->fd, POLLRDHUP, 0};
      who[n++] = leg;
    }
    if (!n || poll(pf, n, 0) <= 0) continue;
    for (uint32_t i = 0; i < n; i++) {
      if (!(pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
      who[i]->is_peer_closed = 1;
      pd_mock_log(m, "peer_closed", who[i]);
      pd_mock_drive_close(m, who[i]);
      pd_mock_want_resume(m, who[i]); /* libmicrohttpd then closes it */
    }
  }
}

static void crash(pd_mock_t *m) {
  pd_mock_log(m, "crash", NULL);
  pd_mock_drive_crash(m);
  if (m->http_listen >= 0) close(m->http_listen); /* new connections are refused */
  m->http_listen = -1;
  pd_mock_bootstrap_close_all(m);
  if (m->boot_listen >= 0) close(m->boot_listen);
  m->boot_listen = -1;
}

static void restart(pd_mock_t *m) {
  char err[256];
  pd_mock_log(m, "restart", NULL);
  pd_mock_drive_restart(m);
  uint16_t port = 0;
  if (m->http_listen < 0 &&
      pd_mock_listen(m->cfg.listen_host, m->port, &m->http_listen, &port, err, sizeof err) < 0)
    fprintf(stderr, "pdref mock: restart: %s\n", err);
  if (m->cfg.role == PD_ROLE_PREFILL && m->boot_listen < 0 &&
      pd_mock_bootstrap_listen(m, err, sizeof err) < 0)
    fprintf(stderr, "pdref mock: restart: %s\n", err);
}

/* The mock's timers and the worker engine's deadlines due by now, earliest first (the
 * mock's first on a tie: a crash before what was due at its instant). */
static void fire_timers(pd_mock_t *m, uint64_t now) {
  for (uint32_t i = 0; i < TIMERS_PER_TURN; i++) {
    const pd_heap_item_t *top = pd_heap_peek(&m->timers);
    uint64_t t_eng = pd_mock_drive_next_ns(m);
    if (top && top->t_ns <= now && top->t_ns <= t_eng) {
      pd_heap_item_t it;
      pd_heap_pop(&m->timers, &it);
      if (it.kind == MT_CRASH) crash(m);
      else if (it.kind == MT_RESTART) restart(m);
      pd_mock_leg_t *leg = it.kind == MT_OPEN && it.a < PD_MOCK_MAX_LEGS ? m->legs[it.a] : NULL;
      if (leg && leg->id == it.b && leg->tgen == it.c) pd_mock_drive_open_due(m, leg);
    } else if (t_eng <= now) {
      pd_mock_drive_expire(m, t_eng);
    } else {
      break;
    }
  }
  pd_mock_drive_reap(m);
}

/* How long to sleep: until the next timer, and no longer than the peer check while there
 * are legs whose clients could leave. */
static uint64_t sleep_ns(pd_mock_t *m, uint64_t now) {
  uint64_t until = now + 3600ull * 1000 * MS_NS;
  const pd_heap_item_t *top = pd_heap_peek(&m->timers);
  if (top && top->t_ns < until) until = top->t_ns;
  if (pd_mock_drive_next_ns(m) < until) until = pd_mock_drive_next_ns(m);
  if (m->n_live && m->next_peer_check_ns < until) until = m->next_peer_check_ns;
  if (pd_mock_accept_paused(m) && m->accept_pause_until_ns < until) until = m->accept_pause_until_ns;
  if (m->boot_expiry_ns < until) until = m->boot_expiry_ns;
  return until > now ? until - now : 0;
}

static void drain_wake(pd_mock_t *m) {
  char b[64];
  for (int i = 0; i < 16 && read(m->wake[0], b, sizeof b) == (ssize_t)sizeof b; i++) {
  }
}

static void engine_turn(pd_mock_t *m, struct pollfd *pf, uint32_t *idx, size_t cap) {
  uint64_t now = pd_mock_now_ns();
  fire_timers(m, now);
  if (now >= m->next_peer_check_ns) {
    peer_check(m);
    m->next_peer_check_ns = now + PD_MOCK_PEER_CHECK_MS * MS_NS;
  }
  do_resumes(m);
  m->boot_expiry_ns = pd_mock_bootstrap_expire(m, now);
  size_t n = 0;
  pf[n++] = (struct pollfd){m->wake[0], POLLIN, 0};
  int http = pd_mock_accept_paused(m) ? -1 : m->http_listen;
  if (http >= 0) pf[n++] = (struct pollfd){http, POLLIN, 0};
  size_t nb = pd_mock_bootstrap_pollfds(m, pf + n, cap - n, idx);
  uint64_t ns = sleep_ns(m, pd_mock_now_ns());
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  m->poll_deadline_ns = pd_mock_now_ns() + ns;
  m->engine_asleep = 1;
  pthread_mutex_unlock(&m->mu);
  int rc = ppoll(pf, n + nb, &ts, NULL);
  if (rc > 0 && http >= 0 && pf[1].revents) pd_mock_http_accept(m);
  pthread_mutex_lock(&m->mu);
  m->engine_asleep = 0;
  if (rc <= 0) return;
  if (pf[0].revents) drain_wake(m);
  pd_mock_bootstrap_on_poll(m, pf + n, idx, nb);
  pd_mock_drive_reap(m);
}

static void *engine_main(void *arg) {
  pd_mock_t *m = arg;
  size_t cap = PD_MOCK_MAX_BOOT_CONNS + 4;
  struct pollfd *pf = calloc(cap, sizeof *pf);
  uint32_t *idx = calloc(cap, sizeof *idx);
  pthread_mutex_lock(&m->mu);
  m->engine_tid = pthread_self();
  m->is_engine_running = 1;
  while (pf && idx && !m->stopping) engine_turn(m, pf, idx, cap - 2);
  m->is_engine_running = 0;
  pthread_mutex_unlock(&m->mu);
  free(pf);
  free(idx);
  return NULL;
}

/* ---------- lifecycle ---------- */

static void init_rng(pd_mock_t *m) {
  pd_prng_t root, faults, rids;
  pd_prng_init(&root, m->cfg.seed);
  pd_prng_fork(&root, 3, &faults); /* the simulator's fault stream label */
  pd_prng_fork(&faults, m->cfg.worker_index + 1u, &m->fault_rng);
  pd_prng_fork(&root, 4, &rids); /* made-up rids: one stream per worker, never shared */
  pd_prng_fork(&rids, m->cfg.worker_index + 1u, &m->rid_rng);
}

static int init_state(pd_mock_t *m, const pd_mock_config_t *c) {
  m->cfg = *c;
  if (c->worker) {
    m->worker = *c->worker;
  } else {
    pd_scenario_t *s = calloc(1, sizeof *s);
    if (!s) return -1;
    pd_scenario_defaults(s);
    m->worker = s->workers[c->role == PD_ROLE_PREFILL ? 0 : 1];
    free(s);
  }
  m->cfg.worker = &m->worker;
  m->is_vllm = m->worker.protocol == PD_PROTOCOL_VLLM;
  m->name_json = pd_mock_req_escape(m->worker.name);
  if (!m->name_json || strlen(m->name_json) >= PD_WIRE_NAME_MAX) return -1;
  m->cfg.n_tfaults =
      c->tfaults && c->n_tfaults <= PD_SCENARIO_MAX_TRAFFIC_FAULTS ? c->n_tfaults : 0;
  if (m->cfg.n_tfaults) memcpy(m->tfaults, c->tfaults, m->cfg.n_tfaults * sizeof *m->tfaults);
  m->cfg.tfaults = m->tfaults;
  if (!m->cfg.listen_host) m->cfg.listen_host = "127.0.0.1";
  m->log = c->log;
  m->http_listen = m->boot_listen = m->wake[0] = m->wake[1] = -1;
  init_rng(m);
  for (uint32_t i = 0; i < PD_MOCK_MAX_LEGS; i++) m->free_slots[i] = PD_MOCK_MAX_LEGS - 1 - i;
  m->n_free = PD_MOCK_MAX_LEGS;
  pd_heap_init(&m->timers, NULL, 0);
  if (pipe(m->wake) < 0) return -1;
  for (int i = 0; i < 2; i++)
    if (fcntl(m->wake[i], F_SETFL, O_NONBLOCK) < 0 || fcntl(m->wake[i], F_SETFD, FD_CLOEXEC) < 0)
      return -1;
  return pd_mock_bootstrap_init(m);
}

static void schedule_crash(pd_mock_t *m) {
  if (m->worker.crash_at_ms)
    pd_mock_timer(m, NULL, MT_CRASH, pd_mock_scaled_ns(m, m->worker.crash_at_ms));
  if (m->worker.crash_at_ms && m->worker.restart_at_ms > m->worker.crash_at_ms)
    pd_mock_timer(m, NULL, MT_RESTART, pd_mock_scaled_ns(m, m->worker.restart_at_ms));
}

int pd_mock_clock_start(pd_mock_t *m) {
  if (!m->cfg.is_clock_on_start || m->is_clock_started) return 0;
  m->is_clock_started = 1;
  schedule_crash(m);
  return 1;
}

pd_mock_t *pd_mock_new(const pd_mock_config_t *c, char *err, size_t errlen) {
  pd_mock_t *m = calloc(1, sizeof *m);
  if (!m) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&m->mu, NULL);
  if (init_state(m, c) < 0) {
    snprintf(err, errlen, "cannot set up the mock: %s", strerror(errno));
    pd_mock_del(m);
    return NULL;
  }
  if ((m->cfg.n_tfaults && pd_mock_ledger_open(&m->ledger, c->ledger_path,
                                            c->n_requests ? c->n_requests : 1, err, errlen) < 0) ||
      (pd_mock_drive_start(m) < 0 && snprintf(err, errlen, "out of memory") >= 0) ||
      (m->cfg.role == PD_ROLE_PREFILL && pd_mock_bootstrap_listen(m, err, errlen) < 0) ||
      pd_mock_http_start(m, err, errlen) < 0) {
    pd_mock_del(m);
    return NULL;
  }
  m->t0_ns = pd_mock_now_ns();
  m->next_peer_check_ns = m->t0_ns;
  if (!m->cfg.is_clock_on_start) schedule_crash(m);
  if (pthread_create(&m->engine, NULL, engine_main, m) != 0) {
    snprintf(err, errlen, "cannot start the engine thread");
    pd_mock_del(m);
    return NULL;
  }
  m->engine_started = 1;
  return m;
}

/* Resume every suspended connection (libmicrohttpd requires it before stopping). With
 * stopping set no callback suspends again, so each batch leaves fewer. */
static void resume_all(pd_mock_t *m) {
  pthread_mutex_lock(&m->mu);
  m->stopping = 1;
  for (uint32_t round = 0; round <= PD_MOCK_MAX_LEGS; round++) {
    struct MHD_Connection *cs[RESUMES_PER_BATCH];
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->n_live && n < RESUMES_PER_BATCH; i++) {
      pd_mock_leg_t *leg = m->live[i];
      if (!leg->is_suspended || !leg->conn) continue;
      leg->is_suspended = 0;
      cs[n++] = leg->conn;
    }
    if (!n) break;
    pthread_mutex_unlock(&m->mu);
    for (uint32_t i = 0; i < n; i++) MHD_resume_connection(cs[i]);
    pthread_mutex_lock(&m->mu);
  }
  m->n_resume = 0;
  for (uint32_t i = 0; i < m->n_live; i++) m->live[i]->want_resume = 0;
  pthread_mutex_unlock(&m->mu);
}

void pd_mock_del(pd_mock_t *m) {
  if (!m) return;
  pthread_mutex_lock(&m->mu);
  m->stopping = 1;
  pthread_mutex_unlock(&m->mu);
  if (m->engine_started) {
    pd_mock_wake(m);
    pthread_join(m->engine, NULL);
    m->engine_started = 0;
  }
  if (m->daemon) {
    resume_all(m);
    pd_mock_http_stop(m);
  }
  if (m->daemon) pd_mock_log_int(m, "shutdown", NULL, "live_slots", m->live_slots);
  for (uint32_t n = m->n_live; n-- > 0;) leg_del(m, m->live[n]); /* stuck in bootstrap */
  pd_mock_bootstrap_free(m);
  pd_mock_drive_free(m); /* after the bootstrap connections: they withdraw registrations */
  if (m->http_listen >= 0) close(m->http_listen);
  for (int i = 0; i < 2; i++)
    if (m->wake[i] >= 0) close(m->wake[i]);
  pd_heap_free(&m->timers);
  pd_mock_ledger_close(&m->ledger);
  pthread_mutex_destroy(&m->mu);
  free(m->name_json);
  free(m);
}
