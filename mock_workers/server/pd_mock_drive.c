/* The mock's worker: one worker engine (mock_workers/pd_wengine.h) per mock, fed the HTTP
 * and bootstrap events with the monotonic clock as its `now`, its actions turned into HTTP
 * output (pd_mock_output_*), bootstrap lines (pd_bootstrap.c) and event-log lines. The
 * simulator drives the same engine (sim/pd_world_worker.c); docs/mock.md lists what real
 * sockets change. Everything runs under m->mu. */
#include <stdio.h>
#include <string.h>

#include "pd_err.h"
#include "pd_mock_int.h"

/* Engine leg id = mock leg id << 12 | its slot; a prefill's registration token = the
 * bootstrap connection's registration number << 12 | its index. */
#define ID_BITS 12u
#define ID_MASK ((1u << ID_BITS) - 1u)
_Static_assert(PD_MOCK_MAX_LEGS <= 1u << ID_BITS, "leg slots fit the engine id");
_Static_assert(PD_MOCK_MAX_BOOT_CONNS <= 1u << ID_BITS, "connections fit the token");
/* Actions one apply carries out: every action of one engine step, whose size the engine
 * bounds by its timers (pd_wengine_expire pops at most 2^20: with token_ms 0 one step streams
 * every running leg to its end, two actions a token). Past this, the rest is reported. */
#define APPLY_MAX (1u << 24)

static uint64_t eng_id(const pd_mock_leg_t *leg) { return leg->id << ID_BITS | leg->slot; }

static pd_mock_leg_t *leg_of(pd_mock_t *m, uint64_t id) {
  pd_mock_leg_t *leg = m->legs[id & ID_MASK];
  return leg && leg->id == id >> ID_BITS ? leg : NULL;
}

uint64_t pd_mock_drive_token(const pd_mock_t *m, int bc) {
  return m->bc[bc].seq << ID_BITS | (uint64_t)bc;
}

/* The live bootstrap connection behind a token, or -1. */
static int bc_of(pd_mock_t *m, uint64_t token) {
  int bc = (int)(token & ID_MASK);
  const pd_mock_bootstrap_conn_t *b = &m->bc[bc];
  return b->state != BOOTSTRAP_CONN_FREE && b->seq == token >> ID_BITS ? bc : -1;
}

/* The engine's clock: monotonic time, never behind what it was given before. */
static uint64_t eng_now(pd_mock_t *m, uint64_t t) {
  if (t > m->eng_now) m->eng_now = t;
  return m->eng_now;
}
static uint64_t now(pd_mock_t *m) { return eng_now(m, pd_mock_now_ns()); }

int pd_mock_drive_start(pd_mock_t *m) {
  pd_wengine_config_t c = {0};
  c.spec = &m->worker;
  c.worker_index = m->cfg.worker_index;
  c.bootstrap_timeout_ms = m->cfg.bootstrap_timeout_ms;
  c.waiting_timeout_ms = m->cfg.waiting_timeout_ms;
  c.fault_rate = m->cfg.fault_rate;
  c.tfaults = m->tfaults;
  c.n_tfaults = m->cfg.n_tfaults;
  c.tf_owner = m->ledger.owner;
  c.fault_rng = &m->fault_rng;
  c.time_scale = m->cfg.speed;
  c.reconnect_ms = PD_MOCK_BOOT_RETRY_MS; /* real time, as the engine takes it */
  pd_wact_buf_init(&m->acts, NULL);
  m->eng = pd_wengine_new(&c, NULL);
  return m->eng ? 0 : PD_ERR_NOMEM;
}

void pd_mock_drive_free(pd_mock_t *m) {
  pd_map_free(&m->pin_pages);
  pd_wengine_del(m->eng);
  m->eng = NULL;
  pd_wact_buf_free(&m->acts);
}

/* ---------- actions ---------- */

static void log_fault(pd_mock_t *m, const pd_mock_leg_t *leg, const pd_wact_t *a) {
  if (a->c >> 32)
    pd_mock_log_str(m, "fault", leg, "kind", pd_fault_kind_name(PD_FAULT_PREFILL_LAG));
  if (a->c & 0xffffffffu)
    pd_mock_log_str(m, "fault", leg, "kind", pd_fault_kind_name(PD_FAULT_SLOW_DRIP));
  if (a->a) pd_mock_log_str(m, "fault", leg, "kind", pd_fault_kind_name((pd_fault_kind_t)(a->a - 1)));
  if (a->b) pd_mock_log_int(m, "traffic_fault", leg, "index", (long long)a->b - 1);
}

static pd_mock_output_end_t output_end(uint32_t how) {
  switch (how) {
  case PD_WENGINE_END_CLEAN: return PD_MOCK_OUTPUT_END_CLEAN;
  case PD_WENGINE_END_READ: return PD_MOCK_OUTPUT_END_READ;
  case PD_WENGINE_END_RESET: return PD_MOCK_OUTPUT_END_RESET;
  default: return PD_MOCK_OUTPUT_END_REFUSED;
  }
}

/* Prefill: the engine's word to the decode behind a token, then (KV, FAIL) the line is done. */
static void to_decode(pd_mock_t *m, pd_mock_leg_t *leg, const pd_wact_t *a) {
  int bc = bc_of(m, a->b);
  if (a->kind == PD_WACT_PAIRED) {
    if (bc < 0) return; /* gone meanwhile: the engine was told (unregister) */
    pd_mock_bootstrap_conn_t *b = pd_mock_bootstrap_get(m, bc);
    b->state = BOOTSTRAP_CONN_PAIRED;
    b->leg = leg;
    if (leg) leg->boot = bc;
    pd_mock_bootstrap_send(m, bc, "PAIR", a->room); /* a failure unregisters: see bc_lost */
    return;
  }
  if (bc >= 0 && a->kind == PD_WACT_KV_SEND)
    pd_mock_bootstrap_send(m, bc, a->a ? "KV" : "FAIL", a->room);
  if (leg && leg->boot >= 0 && (bc < 0 || leg->boot == bc)) leg->boot = -1;
  if (bc_of(m, a->b) >= 0) pd_mock_bootstrap_close(m, bc); /* KV_SEND, UNPAIR: done */
}

static const char *kv_from_name(int from) {
  switch (from) {
  case PD_WENGINE_KV_FROM_READ: return "read";
  case PD_WENGINE_KV_FROM_STALE: return "stale";
  case PD_WENGINE_KV_FROM_LOCAL: return "local";
  default: return "none";
  }
}

static void on_done(pd_mock_t *m, pd_mock_leg_t *leg, pd_truth_t truth) {
  leg->wstate = PD_WORKER_LEG_DONE;
  leg->truth = truth;
  if (leg->slot_taken && m->is_vllm && m->cfg.role == PD_ROLE_DECODE)
    pd_mock_log_str2(m, "slot_freed", leg, "truth", pd_mock_log_truth(truth), "kv_from",
                     kv_from_name(leg->kv_from));
  else if (leg->slot_taken)
    pd_mock_log_str(m, "slot_freed", leg, "truth", pd_mock_log_truth(truth));
  if (leg->boot >= 0) pd_mock_bootstrap_close(m, leg->boot);
  leg->boot = -1;
}

static void on_slot(pd_mock_t *m, pd_mock_leg_t *leg, uint32_t is_taken) {
  if (is_taken && !leg->slot_taken) {
    leg->slot_taken = 1;
    m->live_slots++;
    pd_mock_log(m, "slot_taken", leg);
  } else if (!is_taken && leg->slot_taken) {
    m->live_slots--; /* logged with its truth at DONE */
  }
}

/* For I18 on sockets: when the leg first held KV pages, and when it freed them. */
static void on_kv(pd_mock_t *m, pd_mock_leg_t *leg, uint64_t pages) {
  if (pages && !leg->kv_pages && !leg->kv_pages_max)
    pd_mock_log_int(m, "kv_taken", leg, "pages", (long long)pages);
  if (!pages && leg->kv_pages)
    pd_mock_log_int(m, "kv_freed", leg, "pages_max", (long long)leg->kv_pages_max);
  leg->kv_pages = pages;
  if (pages > leg->kv_pages_max) leg->kv_pages_max = pages;
}

static const char *pin_reason(uint32_t why) {
  switch (why) {
  case PD_WENGINE_PIN_READ: return "read";
  case PD_WENGINE_PIN_EMPTY: return "empty";
  case PD_WENGINE_PIN_REJECTED: return "rejected";
  case PD_WENGINE_PIN_EXPIRED: return "expired";
  default: return "crash";
  }
}

/* vLLM prefill: pinned KV held (its pages stay on the leg, as the simulator keeps them, so
 * the leg's kv_freed comes when the pin is freed) or freed (the leg may be gone by then: its
 * req from the engine id). */
static void on_pin(pd_mock_t *m, pd_mock_leg_t *leg, const pd_wact_t *a) {
  pd_wengine_stats_t st;
  pd_wengine_stats(m->eng, &st);
  uint64_t req = a->id >> ID_BITS;
  if (a->a == PD_WENGINE_PIN_HELD) {
    uint64_t most = leg && leg->kv_pages_max > a->b ? leg->kv_pages_max : a->b;
    if (most && pd_map_put(&m->pin_pages, a->id, (void *)(uintptr_t)most) < 0)
      fprintf(stderr, "pdref mock: out of memory (a pin)\n");
    pd_mock_log_kv(m, "kv_pinned", leg, req, a->c, NULL, NULL, "pages", (long long)a->b);
    return;
  }
  uint64_t most = (uint64_t)(uintptr_t)pd_map_remove(&m->pin_pages, a->id);
  pd_mock_log_kv(m, "kv_unpinned", leg, req, a->c, "reason", pin_reason(a->a), "pinned_pages",
                 (long long)st.kv_pinned_pages);
  if (leg) on_kv(m, leg, 0);
  else if (most && m->log) pd_mock_log_kv(m, "kv_freed", NULL, req, a->c, NULL, NULL, "pages_max",
                                          (long long)most);
}

static void apply_vllm(pd_mock_t *m, pd_mock_leg_t *leg, const pd_wact_t *a) {
  switch (a->kind) {
  case PD_WACT_PIN: on_pin(m, leg, a); return;
  case PD_WACT_PULLED: pd_mock_kv_answer(m, bc_of(m, a->b), leg, a->c, (int)a->a); return;
  case PD_WACT_KV_FROM:
    if (!leg) return;
    leg->kv_from = (int)a->a;
    pd_mock_log_str(m, "kv_from", leg, "from", kv_from_name(leg->kv_from));
    return;
  default: /* PULL, NOTIFY, HEARTBEAT */
    if (leg) pd_mock_kv_act(m, leg, a);
    return;
  }
}

/* A network fault cut the path (docs/mock.md, "Network faults"): the mock resets the
 * connection after what it already wrote (net_reset) or writes nothing more and leaves it
 * open (response_lost); the engine keeps the request as if its client were still there and
 * ignores the close that follows (pd_wengine_close). */
static void on_net(pd_mock_t *m, pd_mock_leg_t *leg, uint32_t how) {
  pd_mock_log_str(m, "net_cut", leg, "gateway_sees", how == PD_WENGINE_NET_RESET ? "reset" : "nothing");
  leg->is_path_cut = 1;
  if (how == PD_WENGINE_NET_RESET) pd_mock_output_end(m, leg, PD_MOCK_OUTPUT_END_RESET);
}

static void apply_one(pd_mock_t *m, const pd_wact_t *a) {
  pd_mock_leg_t *leg = leg_of(m, a->id);
  if (a->kind == PD_WACT_NET) {
    if (leg) on_net(m, leg, a->a);
    return;
  }
  if (a->kind >= PD_WACT_PIN) { /* the vLLM actions close the list (then PD_WACT_NET) */
    apply_vllm(m, leg, a);
    return;
  }
  if (a->kind == PD_WACT_PAIRED || a->kind == PD_WACT_KV_SEND ||
      (a->kind == PD_WACT_UNPAIR && m->cfg.role == PD_ROLE_PREFILL)) {
    to_decode(m, leg, a);
    return;
  }
  if (!leg) return;
  switch (a->kind) {
  case PD_WACT_HEAD: pd_mock_output_head(m, leg, (int)a->a, (int)a->b); return;
  case PD_WACT_SEND: pd_mock_output_render(m, leg, (int)a->a, (uint32_t)a->b); return;
  case PD_WACT_END: pd_mock_output_end(m, leg, output_end(a->a)); return;
  case PD_WACT_CONNECT: pd_mock_bootstrap_connect(m, leg, a->a); return;
  case PD_WACT_UNPAIR: /* decode: its own connection */
    if (leg->boot >= 0) pd_mock_bootstrap_close(m, leg->boot);
    leg->boot = -1;
    return;
  case PD_WACT_STATE: leg->wstate = (pd_worker_leg_state_t)a->a; return;
  case PD_WACT_FAULT: log_fault(m, leg, a); return;
  case PD_WACT_SLOT: on_slot(m, leg, a->a); return;
  case PD_WACT_KV: on_kv(m, leg, a->b); return;
  case PD_WACT_REJECT: pd_mock_log_int(m, "reject", leg, "status", a->a); return;
  case PD_WACT_DONE: on_done(m, leg, (pd_truth_t)a->a); return;
  default: return; /* FIRED, STATUS, RUNNING: the engine's stats have them */
  }
}

/* Carry out what the engine said. Bootstrap I/O may report a connection lost meanwhile; its
 * engine event appends to the same list, handled in this loop. Legs the worker is done with
 * are noted for pd_mock_drive_reap (a caller may still hold one). */
static void apply(pd_mock_t *m) {
  if (m->is_applying) return;
  m->is_applying = 1;
  for (size_t i = 0; i < m->acts.n && i < APPLY_MAX; i++) {
    pd_wact_t a = m->acts.v[i]; /* a copy: a nested event may move the list */
    apply_one(m, &a);
  }
  for (size_t i = 0; i < m->acts.n && i < APPLY_MAX; i++)
    if (m->acts.v[i].kind == PD_WACT_DONE) {
      if (m->n_reap < PD_MOCK_MAX_LEGS) m->reap[m->n_reap++] = m->acts.v[i].id;
      else m->is_reap_all = 1;
    }
  if (m->acts.err) fprintf(stderr, "pdref mock: out of memory for the worker's actions\n");
  if (m->acts.n > APPLY_MAX)
    fprintf(stderr, "pdref mock: %zu worker actions dropped\n", m->acts.n - APPLY_MAX);
  pd_wact_buf_reset(&m->acts);
  m->is_applying = 0;
  if (!pd_mock_on_engine(m) && m->engine_asleep && pd_wengine_next_expiry(m->eng) < m->poll_deadline_ns)
    pd_mock_wake(m);
}

static void check(int rc, const char *what) {
  if (rc == PD_ERR_NOMEM) fprintf(stderr, "pdref mock: out of memory (%s)\n", what);
}

/* ---------- events ---------- */

/* Collisions the engine counted during one event become room_collision lines. */
static uint32_t collisions(const pd_mock_t *m) {
  pd_wengine_stats_t st;
  pd_wengine_stats(m->eng, &st);
  return st.collisions;
}

static void open_leg(pd_mock_t *m, pd_mock_leg_t *leg) {
  pd_wengine_req_t rq = {0};
  rq.is_stream = leg->is_stream;
  rq.has_room = leg->has_room;
  rq.room = leg->room;
  rq.rooms_hash = leg->rooms_hash;
  rq.tokens = leg->tokens;
  rq.prompt_tokens = leg->prompt_tokens;
  rq.request = leg->req_index;
  if (m->cfg.n_tfaults && !pd_wengine_is_down(m->eng))
    rq.leg_no = pd_mock_ledger_next_leg(&m->ledger, leg->req_index, m->cfg.role);
  rq.can_connect = leg->boot_host[0] && leg->boot_port > 0;
  rq.is_direct = m->cfg.is_direct;
  rq.kv_mode = leg->kv_mode;
  rq.kv_key = leg->kv_key;
  rq.max_tokens = leg->max_tokens;
  rq.has_routed_rank = leg->routed_dp_rank >= 0;
  rq.routed_rank = leg->routed_dp_rank >= 0 ? (uint32_t)leg->routed_dp_rank : 0;
  rq.has_prefill_rank = leg->prefill_dp_rank >= 0;
  rq.prefill_rank = leg->prefill_dp_rank >= 0 ? (uint32_t)leg->prefill_dp_rank : 0;
  leg->truth = PD_TRUTH_PENDING;
  leg->boot = -1;
  uint32_t c0 = collisions(m);
  int rc = pd_wengine_open(m->eng, now(m), eng_id(leg), &rq, &m->acts);
  check(rc, "a request");
  if (rc == 0 && leg->has_room && collisions(m) > c0) /* another request holds the room */
    pd_mock_log(m, "room_collision", leg);
  apply(m);
  if (rc < 0) { /* not taken: refuse it as a worker that cannot hold it */
    pd_mock_output_end(m, leg, PD_MOCK_OUTPUT_END_RESET);
    leg->wstate = PD_WORKER_LEG_DONE;
    leg->truth = PD_TRUTH_FAILED;
  }
}

void pd_mock_drive_arrive(pd_mock_t *m, pd_mock_leg_t *leg) {
  open_leg(m, leg);
  if (pd_mock_drive_was_aborted(m, leg->rid)) { /* the abort overtook its request */
    pd_mock_log_str(m, "abort", leg, "prefix", "(remembered)");
    pd_mock_drive_abort(m, leg);
  }
}

void pd_mock_drive_open_due(pd_mock_t *m, pd_mock_leg_t *leg) {
  if (leg->wstate != PD_WORKER_LEG_NEW || !leg->is_held) return;
  leg->is_held = 0;
  pd_mock_drive_arrive(m, leg);
  if (leg->is_closed_early) pd_mock_drive_close(m, leg);
}

void pd_mock_drive_close(pd_mock_t *m, pd_mock_leg_t *leg) {
  if (leg->wstate == PD_WORKER_LEG_NEW) { /* held back (open_delay_ms): the close follows its */
    leg->is_closed_early = 1;             /* request on the same connection: after it opens */
    return;
  }
  if (leg->wstate == PD_WORKER_LEG_DONE) return;
  check(pd_wengine_close(m->eng, now(m), eng_id(leg), &m->acts), "a close");
  apply(m);
}

void pd_mock_drive_abort(pd_mock_t *m, pd_mock_leg_t *leg) {
  leg->aborts++;
  if (leg->wstate == PD_WORKER_LEG_DONE || leg->wstate == PD_WORKER_LEG_NEW) return;
  check(pd_wengine_abort(m->eng, now(m), eng_id(leg), &m->acts), "an abort");
  apply(m);
}

/* Prefill: a decode registered a room on our bootstrap server. */
void pd_mock_drive_registered(pd_mock_t *m, int bc) {
  pd_mock_bootstrap_conn_t *b = pd_mock_bootstrap_get(m, bc);
  pd_mock_leg_t *p = NULL; /* the request waiting in bootstrap for that room, for the log */
  for (uint32_t i = 0; i < m->n_live; i++) {
    pd_mock_leg_t *l = m->live[i];
    if (l->wstate == PD_WORKER_LEG_BOOTSTRAP && l->has_room && l->room == b->room &&
        (!p || l->id < p->id))
      p = l;
  }
  pd_mock_log_room(m, "room_registered", p, b->room);
  b->state = BOOTSTRAP_CONN_REGISTERED;
  b->seq = ++m->next_seq;
  uint32_t c0 = collisions(m);
  int rc = pd_wengine_register(m->eng, now(m), pd_mock_drive_token(m, bc), b->room, b->hash,
                               b->flags,
                               &m->acts);
  check(rc, "a registration");
  if (rc == 0 && collisions(m) > c0) pd_mock_log_room(m, "room_collision", NULL, b->room);
  apply(m);
}

/* Prefill: a registered decode's connection closed. */
void pd_mock_drive_unregistered(pd_mock_t *m, uint64_t token) {
  if (!m->eng) return;
  (void)pd_wengine_unregister(m->eng, now(m), token, &m->acts); /* NOT_FOUND: done with it */
  apply(m);
}

void pd_mock_drive_paired(pd_mock_t *m, pd_mock_leg_t *d) {
  if (d->wstate == PD_WORKER_LEG_DONE) return;
  check(pd_wengine_paired(m->eng, now(m), eng_id(d), &m->acts), "a pairing");
  apply(m);
}

void pd_mock_drive_kv(pd_mock_t *m, pd_mock_leg_t *d, int is_ok) {
  if (d->boot >= 0) pd_mock_bootstrap_close(m, d->boot); /* the link has done its work */
  d->boot = -1;
  if (d->wstate == PD_WORKER_LEG_DONE) return;
  check(pd_wengine_kv(m->eng, now(m), eng_id(d), is_ok, &m->acts), "the KV");
  apply(m);
}

void pd_mock_drive_boot_lost(pd_mock_t *m, pd_mock_leg_t *d) {
  d->boot = -1;
  if (d->wstate == PD_WORKER_LEG_DONE) return;
  check(pd_wengine_boot_lost(m->eng, now(m), eng_id(d), &m->acts), "a lost connection");
  apply(m);
}

/* vLLM decode: its READ's answer (or failure). */
void pd_mock_drive_pulled(pd_mock_t *m, pd_mock_leg_t *d, int r) {
  if (d->wstate == PD_WORKER_LEG_DONE) return;
  check(pd_wengine_pulled(m->eng, now(m), eng_id(d), r, &m->acts), "a read");
  apply(m);
}

/* vLLM prefill: a decode's READ, NOTIFY or HEARTBEAT (a key nobody pinned is the engine's
 * to judge: a stale read, a notification or heartbeat that changes nothing). */
void pd_mock_drive_pull(pd_mock_t *m, int bc, uint64_t key) {
  check(pd_wengine_pull(m->eng, now(m), pd_mock_drive_token(m, bc), key, &m->acts), "a read");
  apply(m);
}

void pd_mock_drive_notify(pd_mock_t *m, uint64_t key, int kind) {
  check(pd_wengine_notify(m->eng, now(m), key, kind, &m->acts), "a notification");
  apply(m);
}

void pd_mock_drive_heartbeat(pd_mock_t *m, uint64_t key) {
  check(pd_wengine_heartbeat(m->eng, now(m), key, &m->acts), "a heartbeat");
  apply(m);
}

void pd_mock_drive_crash(pd_mock_t *m) {
  m->is_down = 1;
  check(pd_wengine_crash(m->eng, now(m), &m->acts), "a crash");
  apply(m);
}

void pd_mock_drive_restart(pd_mock_t *m) {
  m->is_down = 0;
  check(pd_wengine_restart(m->eng, now(m), &m->acts), "a restart");
  apply(m);
}

void pd_mock_drive_reap(pd_mock_t *m) {
  if (m->is_reap_all) {
    for (uint32_t i = m->n_live; i-- > 0;)
      if (i < m->n_live) pd_mock_leg_del_if_unused(m, m->live[i]);
  } else {
    for (uint32_t i = 0; i < m->n_reap; i++) {
      pd_mock_leg_t *leg = leg_of(m, m->reap[i]); /* NULL: freed meanwhile */
      if (leg) pd_mock_leg_del_if_unused(m, leg);
    }
  }
  m->n_reap = 0;
  m->is_reap_all = 0;
}

uint64_t pd_mock_drive_next_ns(const pd_mock_t *m) { return pd_wengine_next_expiry(m->eng); }

void pd_mock_drive_expire(pd_mock_t *m, uint64_t t_ns) {
  check(pd_wengine_expire(m->eng, eng_now(m, t_ns), &m->acts), "a deadline");
  apply(m);
}

/* ---------- /abort_request ---------- */

static int has_prefix(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

uint32_t pd_mock_drive_abort_prefix(pd_mock_t *m, const char *prefix) {
  if (prefix[0]) { /* remember it, in case its request is still on the way */
    pd_aborted_t *a = &m->aborted[m->aborted_next++ % PD_MOCK_ABORT_MEMORY];
    snprintf(a->rid, sizeof a->rid, "%s", prefix);
    a->t_ns = pd_mock_now_ns();
  }
  uint32_t n = 0;
  for (uint32_t i = m->n_live; i-- > 0;) {
    if (i >= m->n_live) continue; /* an abort freed more than one leg */
    pd_mock_leg_t *leg = m->live[i];
    if (!has_prefix(leg->rid, prefix) || leg->wstate == PD_WORKER_LEG_NEW)
      continue; /* not here yet */
    n++;
    pd_mock_log_str(m, "abort", leg, "prefix", prefix);
    pd_mock_drive_abort(m, leg);
    pd_mock_leg_del_if_unused(m, leg);
  }
  if (!n) pd_mock_log_str(m, "abort", NULL, "prefix", prefix);
  return n;
}

int pd_mock_drive_was_aborted(pd_mock_t *m, const char *rid) {
  uint64_t t = pd_mock_now_ns(), keep = (uint64_t)PD_MOCK_ABORT_MEMORY_MS * 1000000ull;
  for (uint32_t i = 0; i < PD_MOCK_ABORT_MEMORY; i++) {
    const pd_aborted_t *a = &m->aborted[i];
    if (a->t_ns && a->rid[0] && t - a->t_ns <= keep && has_prefix(rid, a->rid)) return 1;
  }
  return 0;
}
