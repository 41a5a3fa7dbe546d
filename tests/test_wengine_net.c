/* The worker engine's network faults (net_reset, response_lost: pd_worker.h) through its
 * header only: the engine cuts the leg's path when the fault strikes (PD_WACT_FIRED, then
 * PD_WACT_NET), writes nothing more on it, ignores the close that follows, and runs the
 * request to its own end as if its client were still there; only an abort or its own
 * timeouts end it early. A fault whose leg ended first never fires. Times are scenario ms. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_scenario.h"
#include "pd_wengine.h"
#include "pdt.h"

#define MS 1000000ull
#define LOG_MAX 2048u

typedef struct {
  pd_scenario_worker_t spec;
  pd_wengine_config_t cfg;
  pd_prng_t rng;
  pd_wengine_t *e;
  pd_wact_buf_t out;
  pd_wact_t log[LOG_MAX];
  uint64_t at_ms[LOG_MAX];
  size_t n;
  uint64_t now;
} nd_t;

/* The scenario's default worker of that role with one fault on its first request. */
static int nd_start(nd_t *d, pd_role_t role, pd_fault_kind_t kind, uint64_t ms, uint32_t after) {
  memset(d, 0, sizeof *d);
  pd_scenario_t *s = calloc(1, sizeof *s);
  if (!s) return -1;
  pd_scenario_defaults(s);
  d->spec = s->workers[role == PD_ROLE_PREFILL ? 0 : 1];
  free(s);
  d->spec.faults[0] = (pd_fault_t){.kind = kind, .ms = ms, .after_tokens = after, .nth_from = 1,
                                   .nth_to = 1, .prob = 1.0};
  d->spec.n_faults = 1;
  pd_prng_init(&d->rng, 5);
  d->cfg = (pd_wengine_config_t){.spec = &d->spec, .bootstrap_timeout_ms = 1000,
                                 .waiting_timeout_ms = 2000, .fault_rng = &d->rng,
                                 .time_scale = 1.0, .reconnect_ms = 50};
  pd_wact_buf_init(&d->out, NULL);
  d->e = pd_wengine_new(&d->cfg, NULL);
  PDT_TRUE(d->e != NULL);
  return d->e ? 0 : -1;
}

static void nd_free(nd_t *d) {
  pd_wengine_del(d->e);
  pd_wact_buf_free(&d->out);
}

static void nd_take(nd_t *d, int rc) {
  PDT_EQ_INT(rc, 0);
  for (size_t i = 0; i < d->out.n && d->n < LOG_MAX; i++) {
    d->log[d->n] = d->out.v[i];
    d->at_ms[d->n++] = d->now / MS;
  }
  pd_wact_buf_reset(&d->out);
}

/* Fire every deadline up to t_ms (bounded), then stand at t_ms. */
static void nd_to(nd_t *d, uint64_t t_ms) {
  for (unsigned i = 0; i < 100000; i++) {
    uint64_t nx = pd_wengine_next_expiry(d->e);
    if (nx == UINT64_MAX || nx > t_ms * MS) break;
    if (nx > d->now) d->now = nx;
    nd_take(d, pd_wengine_expire(d->e, d->now, &d->out));
  }
  if (t_ms * MS > d->now) d->now = t_ms * MS;
}

static pd_wengine_req_t req(int is_stream, uint32_t tokens) {
  pd_wengine_req_t r = {.is_stream = is_stream, .has_room = 1, .room = 9, .rooms_hash = 99,
                        .tokens = tokens, .prompt_tokens = 4, .request = PD_TRAFFIC_FAULT_ANY,
                        .leg_no = 1, .can_connect = 1};
  return r;
}

/* Index of the first action of kind on leg 1 from `from`, or -1. */
static long find(const nd_t *d, uint32_t kind, size_t from) {
  for (size_t i = from; i < d->n; i++)
    if (d->log[i].kind == kind && d->log[i].id == 1) return (long)i;
  return -1;
}

/* Bytes the worker wrote on leg 1 from index `from` (HEAD, SEND, END). */
static size_t writes_from(const nd_t *d, size_t from) {
  size_t c = 0;
  for (size_t i = from; i < d->n; i++)
    c += d->log[i].id == 1 && (d->log[i].kind == PD_WACT_HEAD || d->log[i].kind == PD_WACT_SEND ||
                               d->log[i].kind == PD_WACT_END);
  return c;
}

/* The cut: FIRED then NET (how) at t_ms; returns the NET's index. */
static long expect_cut(const nd_t *d, uint32_t how, uint64_t t_ms) {
  long f = find(d, PD_WACT_FIRED, 0), n = find(d, PD_WACT_NET, 0);
  PDT_TRUE(f >= 0 && n == f + 1);
  PDT_EQ_U64(n >= 0 ? d->log[n].a : 0, how);
  PDT_EQ_U64(n >= 0 ? d->at_ms[n] : 0, t_ms);
  return n;
}

static void expect_done(const nd_t *d, pd_truth_t truth, uint64_t t_ms) {
  long done = find(d, PD_WACT_DONE, 0);
  PDT_EQ_INT(done >= 0 ? (int)d->log[done].a : -1, truth);
  PDT_EQ_U64(done >= 0 ? d->at_ms[done] : 0, t_ms);
  pd_wengine_stats_t st;
  pd_wengine_stats(d->e, &st);
  PDT_EQ_U64(st.legs, 0);
  PDT_EQ_U64(st.kv_used_pages, 0);
}

/* net_reset at arrival on a stream prefill: cut before its 200 head; the close that follows
 * leaves it in bootstrap; paired later it runs to its answer (written to nobody): ok. */
static void test_net_reset_at_arrival_keeps_the_prefill_running(void) {
  nd_t d;
  if (nd_start(&d, PD_ROLE_PREFILL, PD_FAULT_NET_RESET, 0, 0) != 0) return;
  pd_wengine_req_t r = req(1, 0);
  nd_take(&d, pd_wengine_open(d.e, 0, 1, &r, &d.out));
  long cut = expect_cut(&d, PD_WENGINE_NET_RESET, 0);
  PDT_TRUE(find(&d, PD_WACT_SLOT, 0) >= 0 && find(&d, PD_WACT_SLOT, 0) < cut);
  PDT_EQ_U64(writes_from(&d, 0), 0); /* not even the stream's head */
  nd_to(&d, 10);
  nd_take(&d, pd_wengine_close(d.e, d.now, 1, &d.out)); /* lost on the path */
  PDT_EQ_INT(pd_wengine_leg_state(d.e, 1), PD_WORKER_LEG_BOOTSTRAP);
  nd_to(&d, 20);
  nd_take(&d, pd_wengine_register(d.e, d.now, 77, 9, 99, 0, &d.out));
  nd_to(&d, 500); /* forward 20 ms + kv 5 ms, then the answer */
  PDT_TRUE(find(&d, PD_WACT_KV_SEND, 0) >= 0);
  PDT_EQ_U64(writes_from(&d, 0), 0);
  expect_done(&d, PD_TRUTH_OK, 45);
  nd_free(&d);
}

/* net_reset 30 ms after arrival on a decode waiting for its KV: nothing at 29 ms, the cut at
 * 30; an abort still reaches it (stalled: it waited on its partner). */
static void test_net_reset_after_ms_then_abort(void) {
  nd_t d;
  if (nd_start(&d, PD_ROLE_DECODE, PD_FAULT_NET_RESET, 30, 0) != 0) return;
  pd_wengine_req_t r = req(0, 8);
  nd_take(&d, pd_wengine_open(d.e, 0, 1, &r, &d.out));
  nd_to(&d, 29);
  PDT_EQ_INT(find(&d, PD_WACT_NET, 0), -1);
  nd_to(&d, 30);
  expect_cut(&d, PD_WENGINE_NET_RESET, 30);
  nd_take(&d, pd_wengine_close(d.e, d.now, 1, &d.out));
  PDT_EQ_INT(pd_wengine_leg_state(d.e, 1), PD_WORKER_LEG_WAIT_KV);
  nd_to(&d, 40);
  size_t before = d.n;
  nd_take(&d, pd_wengine_abort(d.e, d.now, 1, &d.out));
  PDT_EQ_U64(writes_from(&d, before), 0); /* its 500 goes nowhere */
  expect_done(&d, PD_TRUTH_STALLED, 40);
  nd_free(&d);
}

/* response_lost after 2 events on a decode stream: head and two tokens written, then the
 * silent cut; the worker streams the rest to nobody and ends ok. */
static void test_response_lost_after_two_events(void) {
  nd_t d;
  if (nd_start(&d, PD_ROLE_DECODE, PD_FAULT_RESPONSE_LOST, 0, 2) != 0) return;
  pd_wengine_req_t r = req(1, 6);
  nd_take(&d, pd_wengine_open(d.e, 0, 1, &r, &d.out));
  nd_take(&d, pd_wengine_paired(d.e, 0, 1, &d.out));
  nd_take(&d, pd_wengine_kv(d.e, 0, 1, 1, &d.out));
  nd_to(&d, 1000);
  long cut = expect_cut(&d, PD_WENGINE_NET_LOST, 20); /* first token 10 ms, then 5 ms each */
  PDT_EQ_U64(writes_from(&d, 0), 3);                 /* the head, tok0, tok1 */
  PDT_EQ_U64(writes_from(&d, cut >= 0 ? (size_t)cut : 0), 0);
  expect_done(&d, PD_TRUTH_OK, 35); /* tok5 at 35 ms, then [DONE] at once */
  nd_free(&d);
}

/* A cut due after the leg ended never fires (the row would say NOT EXERCISED). */
static void test_cut_after_the_end_never_fires(void) {
  nd_t d;
  if (nd_start(&d, PD_ROLE_DECODE, PD_FAULT_NET_RESET, 500, 0) != 0) return;
  pd_wengine_req_t r = req(1, 2);
  nd_take(&d, pd_wengine_open(d.e, 0, 1, &r, &d.out));
  nd_take(&d, pd_wengine_paired(d.e, 0, 1, &d.out));
  nd_take(&d, pd_wengine_kv(d.e, 0, 1, 1, &d.out));
  nd_to(&d, 1000);
  expect_done(&d, PD_TRUTH_OK, 15);
  PDT_EQ_INT(find(&d, PD_WACT_FIRED, 0), -1);
  PDT_EQ_INT(find(&d, PD_WACT_NET, 0), -1);
  nd_free(&d);
}

int pdt_suite_wengine_net(void) {
  static const pdt_case_t cases[] = {
      {"net_reset at arrival: cut before the head, close ignored, the prefill runs on to ok",
       test_net_reset_at_arrival_keeps_the_prefill_running},
      {"net_reset after 30 ms on a waiting decode; an abort still reaches it",
       test_net_reset_after_ms_then_abort},
      {"response_lost after 2 events: silent cut, the decode streams to nobody and ends ok",
       test_response_lost_after_two_events},
      {"a cut due after the leg ended never fires", test_cut_after_the_end_never_fires},
  };
  return PDT_SUITE("wengine_net", cases);
}
