/* The worker engine (mock_workers/pd_wengine.h) driven through its header only: a tiny
 * driver feeds events at a virtual `now`, fires every deadline the engine names
 * (pd_wengine_next_expiry / pd_wengine_expire, bounded), and logs each action with the time
 * it came out. The tests read that log: what a prefill and a decode leg answer and when,
 * the capacity queues (running limit, KV pool, prefill batching), close / abort / crash, and
 * a status fault. Times below are scenario ms (time_scale 1: 1 ms = 1e6 ns). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_scenario.h"
#include "pd_wengine.h"
#include "pd_worker_shared.h"
#include "pdt.h"
#include "pdt_alloc.h"

#define MS 1000000ull
#define LOG_MAX 4096u
#define EXPIRE_STEPS_MAX 100000u
#define HASH(room) ((room) * 31u + 7u)

typedef struct rec {
  pd_wact_t a;
  uint64_t at_ms;
} rec_t;

typedef struct drv {
  pd_scenario_worker_t spec;
  pd_wengine_config_t cfg;
  pd_prng_t rng;
  pd_wengine_t *e;
  pd_wact_buf_t out;
  rec_t *log;
  size_t n;
  int overflow, stuck;
  uint64_t now;
} drv_t;

/* The scenario's default worker of that role (forward 20 ms, kv 5 ms, first token 10 ms,
 * token 5 ms, SGLang's capacity defaults), bootstrap timeout 1 s, waiting timeout 2 s. */
static void drv_init(drv_t *d, pd_role_t role) {
  memset(d, 0, sizeof *d);
  pd_scenario_t *s = calloc(1, sizeof *s);
  PDT_TRUE(s != NULL);
  if (s) {
    pd_scenario_defaults(s);
    d->spec = s->workers[role == PD_ROLE_PREFILL ? 0 : 1];
  }
  free(s);
  PDT_EQ_INT(d->spec.role, role);
  pd_prng_init(&d->rng, 12);
  d->cfg.spec = &d->spec;
  d->cfg.bootstrap_timeout_ms = 1000;
  d->cfg.waiting_timeout_ms = 2000;
  d->cfg.fault_rng = &d->rng;
  d->cfg.time_scale = 1.0;
  d->cfg.reconnect_ms = 50;
  d->log = calloc(LOG_MAX, sizeof *d->log);
  pd_wact_buf_init(&d->out, NULL);
}

/* After the spec and cfg are final. */
static int drv_start(drv_t *d) {
  d->e = pd_wengine_new(&d->cfg, NULL);
  PDT_TRUE(d->e != NULL && d->log != NULL);
  return d->e && d->log ? 0 : -1;
}

static void drv_free(drv_t *d) {
  if (d->e) pd_wengine_del(d->e);
  pd_wact_buf_free(&d->out);
  free(d->log);
}

static void drv_take(drv_t *d) {
  PDT_EQ_INT(d->out.err, 0);
  for (size_t i = 0; i < d->out.n; i++) {
    if (d->n >= LOG_MAX) { d->overflow = 1; break; }
    d->log[d->n].a = d->out.v[i];
    d->log[d->n++].at_ms = d->now / MS;
  }
  pd_wact_buf_reset(&d->out);
}

/* Fire every deadline up to t_ms, then stand at t_ms. */
static void drv_to(drv_t *d, uint64_t t_ms) {
  uint64_t t = t_ms * MS;
  for (unsigned i = 0; i < EXPIRE_STEPS_MAX; i++) {
    uint64_t nx = pd_wengine_next_expiry(d->e);
    if (nx == UINT64_MAX || nx > t) break;
    if (nx > d->now) d->now = nx;
    PDT_EQ_INT(pd_wengine_expire(d->e, d->now, &d->out), 0);
    drv_take(d);
    if (i + 1 == EXPIRE_STEPS_MAX) d->stuck = 1;
  }
  PDT_FALSE(d->stuck);
  if (t > d->now) d->now = t;
}

static pd_wengine_req_t req_prefill(uint64_t room, uint32_t prompt, int is_stream) {
  pd_wengine_req_t r = {0};
  r.is_stream = is_stream;
  r.has_room = 1;
  r.room = room;
  r.rooms_hash = HASH(room);
  r.prompt_tokens = prompt;
  r.request = PD_TRAFFIC_FAULT_ANY;
  r.leg_no = 1;
  return r;
}

static pd_wengine_req_t req_decode(uint64_t room, uint32_t tokens, uint32_t prompt,
                                   int is_stream) {
  pd_wengine_req_t r = req_prefill(room, prompt, is_stream);
  r.tokens = tokens;
  r.can_connect = 1;
  return r;
}

static int drv_open(drv_t *d, uint64_t t_ms, uint64_t id, pd_wengine_req_t r) {
  drv_to(d, t_ms);
  int rc = pd_wengine_open(d->e, d->now, id, &r, &d->out);
  drv_take(d);
  return rc;
}

static int drv_register(drv_t *d, uint64_t t_ms, uint64_t token, uint64_t room,
                        uint32_t flags) {
  drv_to(d, t_ms);
  int rc = pd_wengine_register(d->e, d->now, token, room, HASH(room), flags, &d->out);
  drv_take(d);
  return rc;
}

/* pd_wengine_paired then pd_wengine_kv(ok): the prefill paired and the KV arrived. */
static void drv_kv(drv_t *d, uint64_t t_ms, uint64_t id, int ok) {
  drv_to(d, t_ms);
  PDT_EQ_INT(pd_wengine_paired(d->e, d->now, id, &d->out), 0);
  PDT_EQ_INT(pd_wengine_kv(d->e, d->now, id, ok, &d->out), 0);
  drv_take(d);
}

static int drv_close(drv_t *d, uint64_t t_ms, uint64_t id) {
  drv_to(d, t_ms);
  int rc = pd_wengine_close(d->e, d->now, id, &d->out);
  drv_take(d);
  return rc;
}

static int drv_abort(drv_t *d, uint64_t t_ms, uint64_t id) {
  drv_to(d, t_ms);
  int rc = pd_wengine_abort(d->e, d->now, id, &d->out);
  drv_take(d);
  return rc;
}

/* Index of the first action of kind on leg id from index `from` (a < 0: any a), or -1. */
static long find_a(const drv_t *d, uint32_t kind, uint64_t id, long a, size_t from) {
  for (size_t i = from; i < d->n; i++)
    if (d->log[i].a.kind == kind && d->log[i].a.id == id && (a < 0 || d->log[i].a.a == a))
      return (long)i;
  return -1;
}
static long find(const drv_t *d, uint32_t kind, uint64_t id) { return find_a(d, kind, id, -1, 0); }

static long last(const drv_t *d, uint32_t kind, uint64_t id) {
  for (size_t i = d->n; i-- > 0;)
    if (d->log[i].a.kind == kind && d->log[i].a.id == id) return (long)i;
  return -1;
}

static size_t count(const drv_t *d, uint32_t kind, uint64_t id) {
  size_t c = 0;
  for (size_t i = 0; i < d->n; i++) c += d->log[i].a.kind == kind && d->log[i].a.id == id;
  return c;
}

/* Time of action i (ms); UINT64_MAX when it never came. */
static uint64_t at(const drv_t *d, long i) { return i < 0 ? UINT64_MAX : d->log[i].at_ms; }

/* The leg's bytes-writing actions (HEAD, SEND) from index from. */
static size_t writes_from(const drv_t *d, uint64_t id, size_t from) {
  size_t c = 0;
  for (size_t i = from; i < d->n; i++)
    c += d->log[i].a.id == id && (d->log[i].a.kind == PD_WACT_HEAD || d->log[i].a.kind == PD_WACT_SEND);
  return c;
}

/* The leg ended once, at t_ms, with this truth; its slot, running slot and KV freed; DONE is
 * its last action. */
static void expect_done(const drv_t *d, uint64_t id, pd_truth_t truth, uint64_t t_ms) {
  long done = find(d, PD_WACT_DONE, id);
  PDT_EQ_U64(count(d, PD_WACT_DONE, id), 1);
  PDT_EQ_INT(done >= 0 ? d->log[done].a.a : 99, truth);
  PDT_EQ_U64(at(d, done), t_ms);
  long end = d->n ? (long)d->n - 1 : -1;
  while (end >= 0 && d->log[end].a.id != id) end--;
  PDT_EQ_INT(end, done);
  long s = last(d, PD_WACT_SLOT, id), r = last(d, PD_WACT_RUNNING, id), kv = last(d, PD_WACT_KV, id);
  if (s >= 0) PDT_EQ_INT(d->log[s].a.a, 0);
  if (r >= 0) PDT_EQ_INT(d->log[r].a.a, 0);
  if (kv >= 0) PDT_EQ_INT(d->log[kv].a.a, 0);
  PDT_EQ_INT(pd_wengine_leg_state(d->e, id), PD_WORKER_LEG_DONE);
}

/* A non-stream error answer at t_ms: the status head, SGLang's JSON error body, a clean end. */
static void expect_error_answer(const drv_t *d, uint64_t id, uint32_t status, uint64_t t_ms) {
  long h = find_a(d, PD_WACT_HEAD, id, status, 0);
  long b = find_a(d, PD_WACT_SEND, id, PD_WIRE_ERROR_BODY, 0);
  long e = find_a(d, PD_WACT_END, id, PD_WENGINE_END_CLEAN, 0);
  PDT_EQ_U64(at(d, h), t_ms);
  PDT_TRUE(h >= 0 && b > h && e > b);
  if (b >= 0) PDT_EQ_U64(d->log[b].a.b, status);
}

/* Nothing held, nothing queued. */
static void expect_idle(const drv_t *d) {
  pd_wengine_stats_t st;
  pd_wengine_stats(d->e, &st);
  PDT_EQ_U64(st.legs, 0);
  PDT_EQ_U64(st.running, 0);
  PDT_EQ_U64(st.queued, 0);
  PDT_EQ_U64(st.inflight, 0);
  PDT_EQ_U64(st.kv_used_pages, 0);
  PDT_FALSE(d->overflow);
}

/* ---------- prefill ---------- */

/* docs/scenarios.md `fault_rate`: with no scripted fault a leg draws one of a fixed set of
 * twelve, each in turn over enough draws, and its statuses (503, 500, 429) answer at once:
 * none is deferred after the KV on a non-stream decode. */
static void test_fault_rate_draws_its_fixed_set(void) {
  pd_scenario_worker_t spec;
  memset(&spec, 0, sizeof spec);
  pd_prng_t rng;
  pd_prng_init(&rng, 7);
  uint32_t kinds = 0, statuses = 0, lags = 0, drips = 0;
  for (uint32_t nth = 1; nth <= 4000; nth++) {
    pd_fault_choice_t c;
    memset(&c, 0, sizeof c);
    PDT_EQ_INT(pd_worker_pick_fault(&spec, nth, 1.0, NULL, &rng, &c), -1);
    if (c.lag_ms) lags++;
    if (c.drip_ms) drips++;
    if (c.fault < 0) continue;
    kinds |= 1u << c.fault;
    if (c.fault != PD_FAULT_STATUS) continue;
    PDT_TRUE(c.fp->status == 503 || c.fp->status == 500 || c.fp->status == 429);
    statuses |= c.fp->status == 503 ? 1u : c.fp->status == 500 ? 2u : 4u;
    PDT_FALSE(pd_worker_status_is_deferred(c.fp, 1, 0));
  }
  PDT_EQ_INT(statuses, 7);
  PDT_TRUE(lags > 0 && drips > 0);
  static const pd_fault_kind_t want[] = {
      PD_FAULT_STATUS, PD_FAULT_RESET_BEFORE_HEAD, PD_FAULT_RESET_MID_STREAM,
      PD_FAULT_SSE_ERROR, PD_FAULT_TRUNCATE, PD_FAULT_HANG_BEFORE_HEAD,
      PD_FAULT_HANG_MID_STREAM, PD_FAULT_KV_FAIL};
  uint32_t want_mask = 0;
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) want_mask |= 1u << want[i];
  PDT_EQ_INT(kinds, want_mask);
}

static void test_prefill_waits_in_bootstrap_until_its_room_registers(void) {
  drv_t d;
  drv_init(&d, PD_ROLE_PREFILL);
  if (drv_start(&d) == 0) {
    PDT_EQ_INT(drv_open(&d, 0, 1, req_prefill(7, 10, 0)), 0);
    PDT_EQ_U64(at(&d, find_a(&d, PD_WACT_SLOT, 1, 1, 0)), 0); /* taken at arrival */
    PDT_EQ_INT(pd_wengine_leg_state(d.e, 1), PD_WORKER_LEG_BOOTSTRAP);
    PDT_EQ_INT(drv_register(&d, 10, 900, 8, 0), 0); /* another room: no pairing */
    drv_to(&d, 100);
    PDT_EQ_INT(pd_wengine_leg_state(d.e, 1), PD_WORKER_LEG_BOOTSTRAP);
    PDT_EQ_U64(count(&d, PD_WACT_PAIRED, 1) + writes_from(&d, 1, 0), 0);
    PDT_EQ_INT(drv_register(&d, 100, 901, 7, 0), 0);
    long p = find(&d, PD_WACT_PAIRED, 1);
    PDT_EQ_U64(at(&d, p), 100);
    if (p >= 0) PDT_EQ_U64(d.log[p].a.b, 901);
    PDT_EQ_INT(pd_wengine_leg_state(d.e, 1), PD_WORKER_LEG_FORWARD);
    PDT_EQ_U64(at(&d, find_a(&d, PD_WACT_KV, 1, 10, 0)), 100); /* 10 prompt tokens, page 1 */
    drv_to(&d, 124);
    PDT_EQ_INT(find(&d, PD_WACT_KV_SEND, 1), -1);
    drv_to(&d, 125); /* forward_ms 20 + kv_ms 5 */
    long kv = find(&d, PD_WACT_KV_SEND, 1);
    PDT_EQ_U64(at(&d, kv), 125);
    if (kv >= 0) { PDT_EQ_INT(d.log[kv].a.a, 1); PDT_EQ_U64(d.log[kv].a.b, 901); }
    long h = find_a(&d, PD_WACT_HEAD, 1, 200, 0);
    long body = find_a(&d, PD_WACT_SEND, 1, PD_WIRE_PREFILL_BODY, 0);
    long end = find_a(&d, PD_WACT_END, 1, PD_WENGINE_END_CLEAN, 0);
    PDT_TRUE(kv >= 0 && h > kv && body > h && end > body);
    PDT_TRUE(last(&d, PD_WACT_KV, 1) < h); /* KV freed, then the answer */
    PDT_EQ_U64(count(&d, PD_WACT_RUNNING, 1), 2);
    expect_done(&d, 1, PD_TRUTH_OK, 125);
    PDT_EQ_INT(pd_wengine_unregister(d.e, d.now, 900, &d.out), 0);
    drv_take(&d);
    expect_idle(&d);
  }
  drv_free(&d);
}

static void test_bootstrap_timeout_answers_500(void) {
  drv_t d;
  drv_init(&d, PD_ROLE_PREFILL);
  if (drv_start(&d) == 0) {
    PDT_EQ_INT(drv_open(&d, 0, 1, req_prefill(7, 10, 0)), 0);
    drv_to(&d, 10); /* a decode of another pair: the hash differs, no pairing */
    PDT_EQ_INT(pd_wengine_register(d.e, d.now, 900, 7, HASH(7) + 1, 0, &d.out), 0);
    drv_take(&d);
    PDT_EQ_INT(drv_open(&d, 300, 2, req_prefill(8, 10, 1)), 0);
    PDT_EQ_U64(at(&d, find_a(&d, PD_WACT_HEAD, 2, 200, 0)), 300); /* stream: head at once */
    drv_to(&d, 999);
    PDT_EQ_U64(count(&d, PD_WACT_PAIRED, 1) + writes_from(&d, 1, 0), 0);
    drv_to(&d, 1000);
    expect_error_answer(&d, 1, 500, 1000);
    expect_done(&d, 1, PD_TRUTH_FAILED, 1000);
    drv_to(&d, 1299);
    PDT_EQ_U64(writes_from(&d, 2, 0), 1);
    drv_to(&d, 1300); /* stream: an error event and [DONE] under the 200 head */
    long ev = find_a(&d, PD_WACT_SEND, 2, PD_WIRE_ERROR_EVENT, 0);
    long dn = find_a(&d, PD_WACT_SEND, 2, PD_WIRE_DONE_EVENT, 0);
    PDT_EQ_U64(at(&d, ev), 1300);
    PDT_TRUE(ev >= 0 && dn > ev && find_a(&d, PD_WACT_END, 2, PD_WENGINE_END_CLEAN, 0) > dn);
    if (ev >= 0) PDT_EQ_U64(d.log[ev].a.b, 500);
    expect_done(&d, 2, PD_TRUTH_FAILED, 1300);
    PDT_EQ_INT(pd_wengine_unregister(d.e, d.now, 900, &d.out), 0);
    drv_take(&d);
    expect_idle(&d);
  }
  drv_free(&d);
}

/* ---------- decode ---------- */

static void test_decode_connects_at_once_and_times_out(void) {
  drv_t d;
  drv_init(&d, PD_ROLE_DECODE);
  if (drv_start(&d) == 0) {
    PDT_EQ_INT(drv_open(&d, 5, 1, req_decode(7, 3, 10, 0)), 0);
    long c = find(&d, PD_WACT_CONNECT, 1);
    PDT_EQ_U64(at(&d, c), 5);
    if (c >= 0) {
      PDT_EQ_U64(d.log[c].a.room, 7);
      PDT_EQ_U64(d.log[c].a.b, HASH(7));
      PDT_EQ_INT(d.log[c].a.a, 0);
    }
    PDT_EQ_U64(at(&d, find_a(&d, PD_WACT_SLOT, 1, 1, 0)), 5);
    PDT_EQ_U64(at(&d, find_a(&d, PD_WACT_RUNNING, 1, 1, 0)), 5);
    PDT_EQ_INT(pd_wengine_leg_state(d.e, 1), PD_WORKER_LEG_WAIT_KV);
    drv_to(&d, 2004);
    PDT_EQ_U64(writes_from(&d, 1, 0), 0);
    drv_to(&d, 2005); /* waiting_timeout_ms after the CONNECT */
    expect_error_answer(&d, 1, 500, 2005);
    expect_done(&d, 1, PD_TRUTH_FAILED, 2005);
    expect_idle(&d);
  }
  drv_free(&d);
}

static void test_decode_streams_tokens_after_the_kv(void) {
  drv_t d;
  drv_init(&d, PD_ROLE_DECODE);
  if (drv_start(&d) == 0) {
    PDT_EQ_INT(drv_open(&d, 0, 1, req_decode(7, 3, 10, 1)), 0);
    PDT_EQ_U64(at(&d, find_a(&d, PD_WACT_HEAD, 1, 200, 0)), 0);
    drv_kv(&d, 2, 1, 1);
    PDT_EQ_INT(pd_wengine_leg_state(d.e, 1), PD_WORKER_LEG_STREAM);
    drv_to(&d, 11);
    PDT_EQ_INT(find(&d, PD_WACT_SEND, 1), -1);
    drv_to(&d, 30);
    static const uint64_t want_ms[] = {12, 17, 22}; /* first_token_ms, then token_ms */
    long t = -1;
    for (uint32_t k = 0; k < 3; k++) {
      t = find_a(&d, PD_WACT_SEND, 1, PD_WIRE_TOKEN, (size_t)(t + 1));
      PDT_EQ_U64(at(&d, t), want_ms[k]);
      if (t >= 0) PDT_EQ_U64(d.log[t].a.b, (uint64_t)k << 2);
    }
    long dn = find_a(&d, PD_WACT_SEND, 1, PD_WIRE_DONE_EVENT, 0);
    PDT_TRUE(t >= 0 && dn > t && find_a(&d, PD_WACT_END, 1, PD_WENGINE_END_CLEAN, 0) > dn);
    PDT_EQ_U64(count(&d, PD_WACT_SEND, 1), 4);
    expect_done(&d, 1, PD_TRUTH_OK, 22);
    /* non-stream: the whole answer once the tokens are made */
    PDT_EQ_INT(drv_open(&d, 100, 2, req_decode(8, 3, 10, 0)), 0);
    drv_kv(&d, 100, 2, 1);
    drv_to(&d, 119);
    PDT_EQ_U64(writes_from(&d, 2, 0), 0);
    drv_to(&d, 3000); /* and no waiting timeout after it */
    long h = find_a(&d, PD_WACT_HEAD, 2, 200, 0);
    PDT_EQ_U64(at(&d, h), 120);
    PDT_TRUE(h >= 0 && find_a(&d, PD_WACT_SEND, 2, PD_WIRE_DECODE_BODY, (size_t)h) > h);
    PDT_EQ_U64(writes_from(&d, 2, 0), 2);
    expect_done(&d, 2, PD_TRUTH_OK, 120);
    expect_idle(&d);
  }
  drv_free(&d);
}

/* max_running 1: decode legs wait for the slot in arrival order, without a timer; each one's
 * waiting timeout counts from its own CONNECT. */
static void test_running_limit_queues_decode_in_order(void) {
  drv_t d;
  drv_init(&d, PD_ROLE_DECODE);
  d.spec.max_running = 1;
  d.spec.token_ms = 50;
  d.cfg.waiting_timeout_ms = 100;
  if (drv_start(&d) == 0) {
    PDT_EQ_INT(drv_open(&d, 0, 1, req_decode(1, 3, 10, 0)), 0);
    PDT_EQ_INT(drv_open(&d, 1, 2, req_decode(2, 3, 10, 0)), 0);
    PDT_EQ_INT(drv_open(&d, 2, 3, req_decode(3, 3, 10, 0)), 0);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_CONNECT, 1)), 0);
    pd_wengine_stats_t st;
    pd_wengine_stats(d.e, &st);
    PDT_EQ_U64(st.running, 1);
    PDT_EQ_U64(st.queued, 2);
    PDT_EQ_U64(st.legs, 3);
    drv_kv(&d, 10, 1, 1); /* tokens at 20, 70, 120 */
    drv_to(&d, 119);
    PDT_EQ_U64(count(&d, PD_WACT_CONNECT, 2) + count(&d, PD_WACT_CONNECT, 3), 0);
    PDT_EQ_U64(writes_from(&d, 2, 0) + writes_from(&d, 3, 0), 0); /* no timer while queued */
    drv_to(&d, 120);
    expect_done(&d, 1, PD_TRUTH_OK, 120);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_CONNECT, 2)), 120);
    PDT_EQ_INT(find(&d, PD_WACT_CONNECT, 3), -1);
    drv_to(&d, 219);
    PDT_EQ_U64(writes_from(&d, 2, 0), 0);
    drv_to(&d, 220);
    expect_error_answer(&d, 2, 500, 220);
    expect_done(&d, 2, PD_TRUTH_FAILED, 220);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_CONNECT, 3)), 220);
    drv_to(&d, 320);
    expect_done(&d, 3, PD_TRUTH_FAILED, 320);
    expect_idle(&d);
  }
  drv_free(&d);
}

/* 1024 tokens in pages of 16 (64 pages), 64 tokens (4 pages) decode reserve per request. */
static void test_kv_pool_admits_head_of_line_and_rejects_what_never_fits(void) {
  drv_t d;
  drv_init(&d, PD_ROLE_DECODE);
  d.spec.kv_tokens = 1024;
  d.spec.page_size = 16;
  d.spec.reserved_decode_tokens = 64;
  if (drv_start(&d) == 0) {
    PDT_EQ_INT(drv_open(&d, 0, 1, req_decode(1, 3, 512, 0)), 0);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_CONNECT, 1)), 0);
    PDT_EQ_U64(at(&d, find_a(&d, PD_WACT_KV, 1, 32, 0)), 0);
    pd_wengine_stats_t st;
    pd_wengine_stats(d.e, &st);
    PDT_EQ_U64(st.kv_total_pages, 64);
    PDT_EQ_U64(st.kv_used_pages, 32);
    PDT_EQ_INT(drv_open(&d, 1, 2, req_decode(2, 3, 512, 0)), 0); /* 32 + 4 pages: no room */
    PDT_EQ_INT(drv_open(&d, 2, 3, req_decode(3, 3, 16, 0)), 0);  /* fits, but behind leg 2 */
    PDT_EQ_INT(drv_open(&d, 3, 4, req_decode(4, 3, 2000, 0)), 0); /* larger than the pool */
    PDT_EQ_U64(count(&d, PD_WACT_CONNECT, 2) + count(&d, PD_WACT_CONNECT, 3), 0);
    PDT_EQ_U64(count(&d, PD_WACT_CONNECT, 4), 0);
    long rj = find_a(&d, PD_WACT_REJECT, 4, 400, 0);
    PDT_EQ_U64(at(&d, rj), 3);
    PDT_TRUE(rj >= 0 && find(&d, PD_WACT_DONE, 4) > rj);
    PDT_EQ_U64(at(&d, find_a(&d, PD_WACT_HEAD, 4, 400, 0)), 3);
    drv_to(&d, 100);
    PDT_EQ_U64(count(&d, PD_WACT_CONNECT, 2) + count(&d, PD_WACT_CONNECT, 3), 0);
    PDT_EQ_INT(drv_abort(&d, 100, 1), 0); /* frees 32 pages: both fit now, in order */
    expect_done(&d, 1, PD_TRUTH_STALLED, 100);
    long c2 = find(&d, PD_WACT_CONNECT, 2), c3 = find(&d, PD_WACT_CONNECT, 3);
    PDT_EQ_U64(at(&d, c2), 100);
    PDT_EQ_U64(at(&d, c3), 100);
    PDT_TRUE(c2 >= 0 && c3 > c2);
    pd_wengine_stats(d.e, &st);
    PDT_EQ_U64(st.kv_used_pages, 33);
    PDT_EQ_U64(st.queued, 0);
    drv_to(&d, 2100);
    expect_done(&d, 2, PD_TRUTH_FAILED, 2100);
    expect_done(&d, 3, PD_TRUTH_FAILED, 2100);
    expect_idle(&d);
  }
  drv_free(&d);
}

/* forward pass = 20 ms + 1 ms per batch token; P0 (10 tokens) runs 0..30; P1 (10) and P2
 * (30), paired during it, go together 30..90; P3, paired at 40, waits for the pass after. */
static void test_prefill_batches_the_waiting_legs(void) {
  drv_t d;
  drv_init(&d, PD_ROLE_PREFILL);
  d.spec.forward_us_per_token = 1000;
  if (drv_start(&d) == 0) {
    PDT_EQ_INT(drv_open(&d, 0, 10, req_prefill(10, 10, 0)), 0);
    PDT_EQ_INT(drv_register(&d, 0, 100, 10, 0), 0);
    PDT_EQ_INT(drv_open(&d, 1, 11, req_prefill(11, 10, 0)), 0);
    PDT_EQ_INT(drv_open(&d, 1, 12, req_prefill(12, 30, 0)), 0);
    PDT_EQ_INT(drv_open(&d, 1, 13, req_prefill(13, 10, 0)), 0);
    PDT_EQ_INT(drv_register(&d, 5, 101, 11, 0), 0);
    PDT_EQ_INT(drv_register(&d, 5, 102, 12, 0), 0);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_PAIRED, 11)), 5);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_PAIRED, 12)), 5);
    PDT_EQ_INT(drv_register(&d, 40, 103, 13, 0), 0);
    drv_to(&d, 500);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_KV_SEND, 10)), 35);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_KV_SEND, 11)), 95);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_KV_SEND, 12)), 95);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_KV_SEND, 13)), 125);
    expect_done(&d, 10, PD_TRUTH_OK, 35);
    expect_done(&d, 11, PD_TRUTH_OK, 95);
    expect_done(&d, 12, PD_TRUTH_OK, 95);
    expect_done(&d, 13, PD_TRUTH_OK, 125);
    expect_idle(&d);
  }
  drv_free(&d);
}

/* ---------- close, abort, crash, faults ---------- */

static void test_close_keeps_a_bootstrapping_leg_abort_frees_it(void) {
  drv_t d;
  drv_init(&d, PD_ROLE_PREFILL);
  if (drv_start(&d) == 0) {
    PDT_EQ_INT(drv_open(&d, 0, 1, req_prefill(1, 10, 0)), 0);
    PDT_EQ_INT(drv_open(&d, 0, 2, req_prefill(2, 10, 0)), 0);
    PDT_EQ_INT(drv_close(&d, 10, 1), 0);
    size_t closed_at = d.n;
    PDT_EQ_INT(drv_abort(&d, 10, 2), 0); /* its client is there: the 500 path (S2.10) */
    expect_error_answer(&d, 2, 500, 10);
    expect_done(&d, 2, PD_TRUTH_STALLED, 10);
    PDT_EQ_INT(find(&d, PD_WACT_DONE, 1), -1);
    PDT_EQ_INT(pd_wengine_leg_state(d.e, 1), PD_WORKER_LEG_BOOTSTRAP);
    pd_wengine_stats_t st;
    pd_wengine_stats(d.e, &st);
    PDT_EQ_U64(st.legs, 1);
    drv_to(&d, 999);
    PDT_EQ_INT(find(&d, PD_WACT_DONE, 1), -1);
    drv_to(&d, 1000); /* the bootstrap timeout frees it; nobody to write to */
    expect_done(&d, 1, PD_TRUTH_STALLED, 1000);
    PDT_EQ_U64(writes_from(&d, 1, closed_at), 0);
    PDT_EQ_INT(drv_abort(&d, 1100, 1), PD_ERR_NOT_FOUND);
    PDT_EQ_INT(drv_close(&d, 1100, 77), PD_ERR_NOT_FOUND);
    expect_idle(&d);
  }
  drv_free(&d);
}

static void test_decode_close_mid_stream_cancels_abort_while_waiting_stalls(void) {
  drv_t d;
  drv_init(&d, PD_ROLE_DECODE);
  if (drv_start(&d) == 0) {
    PDT_EQ_INT(drv_open(&d, 0, 1, req_decode(1, 100, 10, 1)), 0);
    PDT_EQ_INT(drv_open(&d, 0, 2, req_decode(2, 100, 10, 1)), 0);
    drv_kv(&d, 0, 1, 1); /* tokens from 10 ms, every 5 ms */
    PDT_EQ_INT(drv_close(&d, 13, 1), 0);
    size_t closed_at = d.n;
    expect_done(&d, 1, PD_TRUTH_CANCELLED, 13);
    PDT_EQ_U64(count(&d, PD_WACT_SEND, 1), 1);
    PDT_EQ_INT(drv_abort(&d, 13, 2), 0); /* waiting for the KV: the 500 path (S2.10) */
    long ev = find_a(&d, PD_WACT_SEND, 2, PD_WIRE_ERROR_EVENT, 0);
    PDT_EQ_U64(at(&d, ev), 13);
    PDT_TRUE(ev >= 0 && find_a(&d, PD_WACT_SEND, 2, PD_WIRE_DONE_EVENT, (size_t)ev) > ev);
    expect_done(&d, 2, PD_TRUTH_STALLED, 13);
    /* generating: finish_reason abort, then the clean end */
    PDT_EQ_INT(drv_open(&d, 20, 3, req_decode(3, 100, 10, 1)), 0);
    drv_kv(&d, 20, 3, 1);
    PDT_EQ_INT(drv_abort(&d, 40, 3), 0);
    long ab = find_a(&d, PD_WACT_SEND, 3, PD_WIRE_ABORT_EVENT, 0);
    PDT_EQ_U64(at(&d, ab), 40);
    PDT_TRUE(ab >= 0 && find_a(&d, PD_WACT_END, 3, PD_WENGINE_END_CLEAN, (size_t)ab) > ab);
    expect_done(&d, 3, PD_TRUTH_CANCELLED, 40);
    drv_to(&d, 5000);
    PDT_EQ_U64(writes_from(&d, 1, closed_at), 0);
    expect_idle(&d);
  }
  drv_free(&d);
}

static void expect_reset(const drv_t *d, uint64_t id, uint64_t t_ms) {
  long e = find_a(d, PD_WACT_END, id, PD_WENGINE_END_RESET, 0);
  PDT_EQ_U64(at(d, e), t_ms);
  expect_done(d, id, PD_TRUTH_FAILED, t_ms);
}

static void test_crash_resets_every_leg_restart_accepts(void) {
  drv_t d, p;
  drv_init(&d, PD_ROLE_DECODE);
  drv_init(&p, PD_ROLE_PREFILL);
  if (drv_start(&d) == 0 && drv_start(&p) == 0) {
    PDT_EQ_INT(drv_open(&d, 0, 1, req_decode(1, 100, 10, 1)), 0); /* waiting for the KV */
    PDT_EQ_INT(drv_open(&d, 0, 2, req_decode(2, 100, 10, 1)), 0);
    drv_kv(&d, 0, 2, 1); /* streaming */
    PDT_EQ_INT(drv_open(&p, 0, 1, req_prefill(1, 10, 0)), 0); /* bootstrapping */
    drv_to(&d, 20);
    size_t before = d.n;
    PDT_EQ_INT(pd_wengine_crash(d.e, d.now, &d.out), 0);
    drv_take(&d);
    drv_to(&p, 20);
    PDT_EQ_INT(pd_wengine_crash(p.e, p.now, &p.out), 0);
    drv_take(&p);
    expect_reset(&d, 1, 20);
    expect_reset(&d, 2, 20);
    expect_reset(&p, 1, 20);
    PDT_TRUE(pd_wengine_is_down(d.e));
    expect_idle(&d);
    expect_idle(&p);
    PDT_EQ_INT(drv_open(&d, 30, 3, req_decode(3, 3, 10, 0)), 0); /* refused while down */
    PDT_EQ_U64(at(&d, find_a(&d, PD_WACT_END, 3, PD_WENGINE_END_REFUSED, 0)), 30);
    expect_done(&d, 3, PD_TRUTH_NEVER, 30);
    PDT_EQ_U64(count(&d, PD_WACT_SLOT, 3), 0);
    drv_to(&d, 3000);
    PDT_EQ_U64(writes_from(&d, 1, before) + writes_from(&d, 2, before), 0);
    PDT_EQ_INT(pd_wengine_restart(d.e, d.now, &d.out), 0);
    drv_take(&d);
    PDT_FALSE(pd_wengine_is_down(d.e));
    PDT_EQ_INT(drv_open(&d, 3000, 4, req_decode(4, 3, 10, 0)), 0);
    PDT_EQ_U64(at(&d, find_a(&d, PD_WACT_SLOT, 4, 1, 0)), 3000);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_CONNECT, 4)), 3000);
    /* a room registered while the prefill is down is not kept: after the restart a prefill
       leg of that room waits in bootstrap instead of pairing with a decode long gone */
    PDT_EQ_INT(drv_register(&p, 40, 77, 5, 0), 0);
    PDT_EQ_INT(pd_wengine_restart(p.e, p.now, &p.out), 0);
    drv_take(&p);
    PDT_EQ_INT(drv_open(&p, 50, 5, req_prefill(5, 10, 0)), 0);
    PDT_EQ_INT(find(&p, PD_WACT_PAIRED, 5), -1);
    PDT_EQ_INT(pd_wengine_leg_state(p.e, 5), PD_WORKER_LEG_BOOTSTRAP);
  }
  drv_free(&d);
  drv_free(&p);
}

/* faults[0]: 503 on the worker's first request; faults[1]: 400 on its second (a correct
 * refusal: the worker is healthy); the third has none. */
static void test_status_fault_answers_at_arrival(void) {
  drv_t d;
  drv_init(&d, PD_ROLE_PREFILL);
  d.spec.faults[0] = (pd_fault_t){.kind = PD_FAULT_STATUS, .status = 503, .nth_from = 1,
                                  .nth_to = 1, .prob = 1.0};
  d.spec.faults[1] = (pd_fault_t){.kind = PD_FAULT_STATUS, .status = 400, .nth_from = 2,
                                  .nth_to = 2, .prob = 1.0};
  d.spec.n_faults = 2;
  if (drv_start(&d) == 0) {
    PDT_EQ_INT(drv_open(&d, 0, 1, req_prefill(1, 10, 0)), 0);
    expect_error_answer(&d, 1, 503, 0);
    PDT_TRUE(find_a(&d, PD_WACT_STATUS, 1, 503, 0) >= 0);
    PDT_TRUE(find_a(&d, PD_WACT_FAULT, 1, PD_FAULT_STATUS + 1, 0) >= 0);
    PDT_TRUE(find(&d, PD_WACT_FIRED, 1) >= 0);
    PDT_EQ_U64(count(&d, PD_WACT_SLOT, 1), 0);
    expect_done(&d, 1, PD_TRUTH_FAILED, 0);
    PDT_EQ_INT(drv_open(&d, 1, 2, req_prefill(2, 10, 0)), 0);
    expect_error_answer(&d, 2, 400, 1);
    expect_done(&d, 2, PD_TRUTH_OK, 1);
    PDT_EQ_INT(drv_open(&d, 2, 3, req_prefill(3, 10, 0)), 0);
    PDT_EQ_U64(count(&d, PD_WACT_STATUS, 3) + count(&d, PD_WACT_FIRED, 3), 0);
    PDT_EQ_INT(pd_wengine_leg_state(d.e, 3), PD_WORKER_LEG_BOOTSTRAP);
  }
  drv_free(&d);
}

/* A decode that will fail the transfer says so when it registers; the prefill's transfer
 * then fails and it answers 500; the decode fails on KVPoll.Failed. */
static void test_kv_failure_fails_both_sides(void) {
  drv_t d, p;
  drv_init(&d, PD_ROLE_DECODE);
  drv_init(&p, PD_ROLE_PREFILL);
  d.spec.faults[0] = (pd_fault_t){.kind = PD_FAULT_KV_FAIL, .prob = 1.0};
  d.spec.n_faults = 1;
  if (drv_start(&d) == 0 && drv_start(&p) == 0) {
    PDT_EQ_INT(drv_open(&d, 0, 1, req_decode(1, 3, 10, 0)), 0);
    long c = find(&d, PD_WACT_CONNECT, 1);
    PDT_EQ_INT(c >= 0 ? d.log[c].a.a : 99, PD_WENGINE_REG_KV_FAIL);
    PDT_EQ_INT(drv_open(&p, 0, 1, req_prefill(1, 10, 0)), 0);
    PDT_EQ_INT(drv_register(&p, 0, 500, 1, c >= 0 ? d.log[c].a.a : 0), 0);
    drv_to(&p, 100);
    long kv = find(&p, PD_WACT_KV_SEND, 1);
    PDT_EQ_U64(at(&p, kv), 25);
    PDT_EQ_INT(kv >= 0 ? p.log[kv].a.a : 99, 0);
    expect_error_answer(&p, 1, 500, 25);
    expect_done(&p, 1, PD_TRUTH_FAILED, 25);
    drv_kv(&d, 25, 1, 0);
    expect_error_answer(&d, 1, 500, 25);
    expect_done(&d, 1, PD_TRUTH_FAILED, 25);
    expect_idle(&d);
    expect_idle(&p);
  }
  drv_free(&d);
  drv_free(&p);
}

/* Every allocation fails in turn: each event is applied or refused with NOMEM, nothing
 * leaks, and the engine stays usable. */
static void test_failed_allocations_leak_nothing(void) {
  int saw_nomem = 0;
  for (unsigned fail_at = 1; fail_at <= 64; fail_at++) {
    pdt_alloc_t f = {0};
    f.fail_at = fail_at;
    pd_alloc_t a = pdt_alloc(&f);
    drv_t d;
    drv_init(&d, PD_ROLE_PREFILL);
    pd_wengine_t *e = pd_wengine_new(&d.cfg, &a);
    if (e) {
      for (uint64_t id = 1; id <= 8; id++) {
        pd_wengine_req_t r = req_prefill(id, 10, 0);
        int rc = pd_wengine_open(e, id * MS, id, &r, &d.out);
        saw_nomem |= rc == PD_ERR_NOMEM;
        PDT_TRUE(rc == 0 || rc == PD_ERR_NOMEM);
        rc = pd_wengine_register(e, id * MS, 100 + id, id, HASH(id), 0, &d.out);
        PDT_TRUE(rc == 0 || rc == PD_ERR_NOMEM);
      }
      for (unsigned i = 0; i < 64 && pd_wengine_next_expiry(e) <= 100 * MS; i++)
        (void)pd_wengine_expire(e, pd_wengine_next_expiry(e), &d.out);
      PDT_EQ_INT(pd_wengine_crash(e, 200 * MS, &d.out), 0);
      pd_wengine_del(e);
    } else {
      saw_nomem = 1;
    }
    PDT_EQ_INT(f.live, 0);
    drv_free(&d);
  }
  PDT_TRUE(saw_nomem);
}

/* R-CAP-OVERLOAD: in PD mode SGLang has no queue limit (S2.13): 200 decode requests against
 * one running slot all queue; none is answered 503 (or anything) while it waits, and each is
 * admitted in turn. */
static void test_a_full_decode_queues_every_request_and_sheds_none(void) {
  drv_t d;
  drv_init(&d, PD_ROLE_DECODE);
  d.spec.max_running = 1;
  d.cfg.waiting_timeout_ms = 100000;
  if (drv_start(&d) == 0) {
    for (uint64_t id = 1; id <= 200; id++)
      PDT_EQ_INT(drv_open(&d, 0, id, req_decode(id, 2, 10, 0)), 0);
    pd_wengine_stats_t st;
    pd_wengine_stats(d.e, &st);
    PDT_EQ_U64(st.running, 1);
    PDT_EQ_U64(st.queued, 199);
    PDT_EQ_U64(st.legs, 200);
    size_t answered = 0;
    for (uint64_t id = 1; id <= 200; id++) answered += writes_from(&d, id, 0);
    PDT_EQ_U64(answered, 0); /* no 503, no head: a non-stream request waits in silence */
    for (uint64_t id = 1; id <= 200; id++) { /* each, once admitted, gets its KV and ends */
      PDT_TRUE(at(&d, find(&d, PD_WACT_CONNECT, id)) <= d.now / MS); /* admitted by now */
      if (id < 200) PDT_EQ_INT(find(&d, PD_WACT_CONNECT, id + 1), -1); /* the next still waits */
      drv_kv(&d, d.now / MS, id, 1);
      drv_to(&d, d.now / MS + 20); /* first token 10 ms, then 5 ms per token */
      expect_done(&d, id, PD_TRUTH_OK, at(&d, find(&d, PD_WACT_DONE, id)));
      PDT_EQ_INT(find_a(&d, PD_WACT_HEAD, id, 503, 0), -1);
    }
    expect_idle(&d);
  }
  drv_free(&d);
}

/* A worker of role with 2 DP ranks and 2 running slots, capacity per rank or shared; 0, or
 * -1 with d freed. */
static int rank_drv(drv_t *d, pd_role_t role, int per_rank) {
  drv_init(d, role);
  d->spec.max_running = 2;
  d->spec.dp_size = 2;
  d->spec.capacity_per_rank = per_rank;
  if (drv_start(d) == 0) return 0;
  drv_free(d);
  return -1;
}

/* R-CAP-RANK: a decode with 2 DP ranks and 2 running slots. Per rank (1 slot each) a second
 * request of rank 0 waits while one of rank 1 (its room, or a routed_dp_rank) goes at once, and
 * the waiting one is rank-bound while rank 1 has room. Shared (the key off) the second of
 * rank 0 takes the second slot and the third waits behind it. */
static void test_per_rank_capacity_queues_only_the_full_rank(void) {
  for (int per_rank = 1; per_rank >= 0; per_rank--) {
    drv_t d;
    if (rank_drv(&d, PD_ROLE_DECODE, per_rank) != 0) continue;
    pd_wengine_req_t routed = req_decode(5, 3, 10, 0); /* room 5 is rank 1; pinned to 0 */
    routed.has_routed_rank = 1;
    routed.routed_rank = 0;
    PDT_EQ_INT(drv_open(&d, 0, 1, req_decode(0, 3, 10, 0)), 0); /* rank 0 */
    PDT_EQ_INT(drv_open(&d, 1, 2, req_decode(2, 3, 10, 0)), 0); /* rank 0 */
    PDT_EQ_INT(pd_wengine_is_rank_bound(d.e, 2), per_rank);
    PDT_EQ_INT(drv_open(&d, 2, 3, req_decode(1, 3, 10, 0)), 0); /* rank 1 */
    PDT_EQ_INT(drv_open(&d, 3, 4, routed), 0);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_CONNECT, 1)), 0);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_CONNECT, 2)), per_rank ? UINT64_MAX : 1);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_CONNECT, 3)), per_rank ? 2 : UINT64_MAX);
    PDT_EQ_INT(find(&d, PD_WACT_CONNECT, 4), -1);
    PDT_EQ_INT(pd_wengine_is_rank_bound(d.e, 2), 0); /* rank 1 full now (or shared) */
    pd_wengine_stats_t st;
    pd_wengine_stats(d.e, &st);
    PDT_EQ_U64(st.running, 2);
    PDT_EQ_U64(st.queued, 2);
    drv_to(&d, 10000); /* every leg times out in its turn (no KV comes) */
    for (uint64_t id = 1; id <= 4; id++) PDT_TRUE(find(&d, PD_WACT_DONE, id) >= 0);
    expect_idle(&d);
    drv_free(&d);
  }
}

/* R-CAP-RANK on prefill: 2 ranks, 2 running slots (1 each; a slot is held through the 5 ms
 * transfer), forward 20 ms. Legs 20 and 22 (rank 0) and 21 (rank 1) pair at 0 in that order;
 * 20's pass runs 0-20. Per rank, at 20 rank 0 is still full (20 transfers until 25), so 21
 * (rank 1) goes next (KV at 45) and 22 after it (65); shared, 22 takes the second slot (45)
 * and 21 waits (65). */
static void test_per_rank_capacity_forward_passes(void) {
  for (int per_rank = 1; per_rank >= 0; per_rank--) {
    drv_t d;
    if (rank_drv(&d, PD_ROLE_PREFILL, per_rank) != 0) continue;
    static const uint64_t order[] = {20, 22, 21};
    for (int i = 0; i < 3; i++) PDT_EQ_INT(drv_open(&d, 0, order[i], req_prefill(order[i], 1, 0)), 0);
    for (int i = 0; i < 3; i++) PDT_EQ_INT(drv_register(&d, 0, 100 + order[i], order[i], 0), 0);
    drv_to(&d, 500);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_KV_SEND, 20)), 25);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_KV_SEND, 21)), per_rank ? 45 : 65);
    PDT_EQ_U64(at(&d, find(&d, PD_WACT_KV_SEND, 22)), per_rank ? 65 : 45);
    for (uint64_t id = 20; id <= 22; id++) PDT_TRUE(find(&d, PD_WACT_DONE, id) >= 0);
    expect_idle(&d);
    drv_free(&d);
  }
}

int pdt_suite_wengine(void) {
  static const pdt_case_t cases[] = {
      {"fault_rate draws its fixed set; its statuses answer at once",
       test_fault_rate_draws_its_fixed_set},
      {"prefill takes its slot at arrival and waits in bootstrap until its room registers, "
       "then forward + KV, then answers 200", test_prefill_waits_in_bootstrap_until_its_room_registers},
      {"bootstrap timeout answers 500 (S5.4), stream as an error event", test_bootstrap_timeout_answers_500},
      {"decode connects at once; waiting timeout 500 counts from the connect",
       test_decode_connects_at_once_and_times_out},
      {"decode streams tokens after the KV: first_token_ms, token_ms, [DONE], all freed",
       test_decode_streams_tokens_after_the_kv},
      {"max_running 1: decode legs wait in order, each timeout from its own connect",
       test_running_limit_queues_decode_in_order},
      {"KV pool: prompt + reserve waits head-of-line; larger than the pool gets 400",
       test_kv_pool_admits_head_of_line_and_rejects_what_never_fits},
      {"prefill batches the legs waiting for a forward pass; its length grows per token",
       test_prefill_batches_the_waiting_legs},
      {"close keeps a bootstrapping prefill (stalled) until its timeout; abort answers 500 and "
       "frees at once",
       test_close_keeps_a_bootstrapping_leg_abort_frees_it},
      {"decode closed mid-stream is cancelled; aborted: 500 while waiting, finish_reason abort "
       "while generating",
       test_decode_close_mid_stream_cancels_abort_while_waiting_stalls},
      {"crash resets every live leg and refuses; restart accepts again",
       test_crash_resets_every_leg_restart_accepts},
      {"a status fault answers its status at arrival, without a slot", test_status_fault_answers_at_arrival},
      {"a KV failure fails the prefill and the decode with 500", test_kv_failure_fails_both_sides},
      {"every failed allocation leaks nothing", test_failed_allocations_leak_nothing},
      {"a full decode queues every request and sheds none (no 503 in PD, S2.13)",
       test_a_full_decode_queues_every_request_and_sheds_none},
      {"per-rank capacity: a full rank queues its own requests only (R-CAP-RANK)",
       test_per_rank_capacity_queues_only_the_full_rank},
      {"per-rank capacity: a prefill pass takes the free rank's leg first (R-CAP-RANK)",
       test_per_rank_capacity_forward_passes},
  };
  return PDT_SUITE("wengine", cases);
}
