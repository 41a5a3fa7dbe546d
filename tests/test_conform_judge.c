/* The judge of a socket run (net/conform/pd_conform_judge.c) on hand-built mock logs: legs tied to
 * requests without X-Request-Id, and I6 read from the client's commit window. No process
 * starts: a fixture holds the run, its requests and the legs the mocks would have logged. */
#include <stdlib.h>
#include <string.h>

#include "pd_conform.h"
#include "pd_conform_int.h"
#include "pd_mock_int.h"
#include "pdt.h"
#include "pdt_conform.h"
#include "pdt_net.h"

#define MS_NS 1000000ull
#define FX_REQS 4
#define FX_LEGS 16

typedef struct fx {
  pdt_cfx_t c;
  pd_conform_req_t reqs[FX_REQS];
  pd_conform_logged_leg_t legs[FX_LEGS];
  uint32_t p0, d0; /* worker indices of happy-path-stream's p0 and d0 */
} fx_t;

/* happy-path-stream's two workers, the mode's settings, n requests sent every 1.1 ms from 8.1
 * ms, each a stream of 8 tokens. 0, or -1 (nothing to free). */
static int fx_init(fx_t *f, const char *mode, uint32_t n) {
  memset(f, 0, sizeof *f);
  if (n > FX_REQS ||
      pdt_cfx_init(&f->c, "happy-path-stream", mode, f->reqs, n, f->legs, FX_LEGS, 12350, 12000))
    return -1;
  f->p0 = f->c.s->workers[0].role == PD_ROLE_PREFILL ? 0 : 1;
  f->d0 = 1 - f->p0;
  for (uint32_t i = 0; i < n; i++) {
    pd_conform_req_t *q = &f->reqs[i];
    q->c.t_arrival = (uint64_t)((8.1 + 1.1 * i) * MS_NS);
    q->t_bound = q->c.t_arrival + f->c.run.bound_ns;
  }
  return 0;
}

static void fx_free(fx_t *f) { pdt_cfx_free(&f->c); }

static pd_conform_logged_leg_t *fx_leg(fx_t *f, uint32_t worker, const char *room, double arrive_ms,
                            double closed_ms, int fault, int end_status, pd_truth_t truth) {
  pd_conform_runner_t *run = &f->c.run;
  pd_conform_logged_leg_t *l = &run->legs[run->n_legs++];
  memset(l, 0, sizeof *l);
  l->worker = worker;
  l->role = run->s->workers[worker].role;
  l->req = run->n_legs;
  snprintf(l->rid, sizeof l->rid, "%032zx", run->n_legs); /* made up: no rid_given */
  snprintf(l->room_s, sizeof l->room_s, "%s", room);
  l->room = strtoull(room, NULL, 10);
  l->has_room = 1;
  l->n_rooms = 1;
  l->is_stream = 1;
  l->rid_given = 0;
  l->boot_port = 8998;
  snprintf(l->host, sizeof l->host, "127.0.0.1");
  l->t_arrive = (uint64_t)(arrive_ms * MS_NS);
  l->t_peer_closed = (uint64_t)(closed_ms * MS_NS);
  l->fault = fault;
  l->end_status = end_status;
  l->truth = truth;
  l->client = l->unit = l->partner = l->resend_of = -1;
  return l;
}

/* The client's view of request i: head status, SSE or not, first byte and end (ms). */
static void fx_ended(fx_t *f, uint32_t i, int status, int sse, double first_ms, double end_ms) {
  pd_client_request_t *c = &f->reqs[i].c;
  c->ended = 1;
  c->head_status = status;
  c->is_sse_head = sse;
  c->t_head = c->t_first_data = (uint64_t)(first_ms * MS_NS);
  c->t_end = (uint64_t)(end_ms * MS_NS);
}

static uint32_t fx_got(const fx_t *f) { return f->c.run.violations & f->c.r.judged; }

static int fx_judge(fx_t *f) {
  char err[200] = "";
  int rc = pd_conform_judge(&f->c.run, err, sizeof err);
  if (rc) fprintf(stderr, "  pd_conform_judge: %s\n", err);
  return rc;
}

/* A minilb swarm under load, reduced to two requests the gateway took out of order (seen in
 * swarm-random-faults-stream at --timeout-scale 0.1, checked against X-Request-Id): request 0
 * was given up still open with no head (its prefill hung before the head, its decode waited
 * for the KV until the gateway stopped); request 1, sent 1 ms later, got mini_lb's 500 at
 * 62 ms (its decode was reset before the head; the session closed its prefill at 68 ms).
 * Request 1's attempt reached the workers first. FIFO alone tied it to request 0 and request
 * 0's pair to request 1: a decode leg "open 12 s after the client's end" (I2) that the
 * simulator never reports. Each attempt must go where it explains how the request ended. */
static void test_judge_ties_attempts_by_how_requests_ended(void) {
  fx_t f;
  PDT_EQ_INT(fx_init(&f, "minilb", 2), 0);
  if (!f.c.s) return;
  f.reqs[0].is_cut = 1; /* never a head, given up at its bound */
  fx_ended(&f, 1, 500, 0, 62, 65);
  snprintf(f.reqs[1].first, sizeof f.reqs[1].first, "%s",
           "{\"error\":{\"type\":\"Internal Server Error\",\"code\":\"internal_error\"}}");
  /* request 1's attempt, first at the workers */
  fx_leg(&f, f.p0, "111", 42.7, 68.2, -1, 200, PD_TRUTH_PENDING);
  fx_leg(&f, f.d0, "111", 41.9, 42.6, PD_FAULT_RESET_BEFORE_HEAD, 0, PD_TRUTH_FAILED);
  /* request 0's, open until the gateway stopped */
  fx_leg(&f, f.p0, "222", 44.4, 12378.3, PD_FAULT_HANG_BEFORE_HEAD, 0, PD_TRUTH_STALLED);
  fx_leg(&f, f.d0, "222", 65.3, 12369.2, -1, 200, PD_TRUTH_STALLED);
  PDT_EQ_INT(fx_judge(&f), 0);
  uint32_t got = fx_got(&f);
  PDT_TRUE(got & PD_CONFORM_BIT(PD_INVARIANT_TERMINATION)); /* request 0 never ended */
  PDT_FALSE(got & PD_CONFORM_BIT(PD_INVARIANT_ORPHAN_LEG)); /* no leg outlived its client */
  PDT_FALSE(got & PD_CONFORM_BIT(PD_INVARIANT_ATTEMPTS));
  PDT_EQ_INT(f.legs[0].unit, f.legs[1].unit);
  PDT_EQ_INT(f.reqs[0].n_units, 1);
  PDT_EQ_INT(f.reqs[1].n_units, 1);
  fx_free(&f);
}

/* Issue 9 item 5, seen with `pdref gateway --mode reference` when the only prefill is down
 * (every connect refused, so no prefill leg is logged): the gateway's fifth attempt fails at
 * its prefill connect and the client gets 502 at 50.66 ms, while that attempt's decode request,
 * opened before, reaches its mock at 50.80 ms. An attempt is opened when the gateway opens
 * it, not when a leg arrives: no I6. The same arrival inside an SSE response that is still
 * going is a retry after commit. */
static void test_judge_no_i6_for_a_leg_arriving_after_the_clients_end(void) {
  static const double arrive[5] = {10.9, 16.7, 24.4, 35.9, 50.8};
  for (int sse = 0; sse < 2; sse++) {
    fx_t f;
    PDT_EQ_INT(fx_init(&f, "reference", 1), 0);
    if (!f.c.s) return;
    snprintf(f.reqs[0].xrid, sizeof f.reqs[0].xrid, "pdconf-abc-0");
    if (sse) fx_ended(&f, 0, 200, 1, 40.0, 60.0); /* a stream committed at 40 ms, open to 60 */
    else fx_ended(&f, 0, 502, 0, 50.66, 50.70);
    for (int k = 0; k < 5; k++) {
      char room[16];
      snprintf(room, sizeof room, "%d", 100 + k);
      pd_conform_logged_leg_t *l = fx_leg(&f, f.d0, room, arrive[k], arrive[k] + 0.3, -1, 200,
                               PD_TRUTH_CANCELLED);
      snprintf(l->xrid, sizeof l->xrid, "%s", f.reqs[0].xrid); /* the header, forwarded */
    }
    PDT_EQ_INT(fx_judge(&f), 0);
    PDT_EQ_INT(f.reqs[0].n_units, 5);
    if (sse) PDT_TRUE(fx_got(&f) & PD_CONFORM_BIT(PD_INVARIANT_COMMIT));
    else PDT_FALSE(fx_got(&f) & PD_CONFORM_BIT(PD_INVARIANT_COMMIT));
    fx_free(&f);
  }
}

/* Worker index by name in the fixture's scenario. */
static uint32_t fx_worker(const fx_t *f, const char *name) {
  for (uint32_t i = 0; i < f->c.s->n_workers; i++)
    if (!strcmp(f->c.s->workers[i].name, name)) return i;
  return 0;
}

/* I16 over sockets, from the worker logs alone (retry-picks-same-failed-pair: p0, d0, d1;
 * smg's retry re-picks the failed pair, G15): request 0's first attempt fails on d0's 503,
 * the second goes back to d0 while d1 was untried and had failed nothing: I16. When d1 had
 * failed another request before (its breaker may be open), the logs cannot tell that it was
 * eligible: no I16. Before, I16 was not judged on sockets at all. */
static void test_judge_i16_from_the_worker_logs(void) {
  for (int d1_failed = 0; d1_failed < 2; d1_failed++) {
    fx_t f;
    memset(&f, 0, sizeof f);
    if (pdt_cfx_init(&f.c, "retry-picks-same-failed-pair", "joined", f.reqs, 2, f.legs, FX_LEGS,
                     12350, 12000))
      return;
    uint32_t p0 = fx_worker(&f, "p0"), d0 = fx_worker(&f, "d0"), d1 = fx_worker(&f, "d1");
    for (uint32_t i = 0; i < 2; i++) {
      f.reqs[i].c.t_arrival = (uint64_t)((1.0 + 50.0 * i) * MS_NS);
      f.reqs[i].t_bound = f.reqs[i].c.t_arrival + f.c.run.bound_ns;
      snprintf(f.reqs[i].xrid, sizeof f.reqs[i].xrid, "pdconf-t-%u", i);
    }
    fx_ended(&f, 0, 503, 0, 30.0, 30.5);
    fx_ended(&f, 1, 503, 0, 70.0, 70.5);
    const struct { uint32_t w; const char *room; double at, closed; int fault; pd_truth_t t; int req; } legs[] = {
        {p0, "1", 2.0, 10.0, -1, PD_TRUTH_CANCELLED, 0},
        {d0, "1", 2.1, 9.0, PD_FAULT_STATUS, PD_TRUTH_FAILED, 0},
        {p0, "2", 12.0, 20.0, -1, PD_TRUTH_CANCELLED, 0},
        {d0, "2", 12.1, 19.0, PD_FAULT_STATUS, PD_TRUTH_FAILED, 0},
        {p0, "3", 52.0, 60.0, -1, PD_TRUTH_CANCELLED, 1}, /* the other request, later */
        {d1, "3", 52.1, 59.0, PD_FAULT_STATUS, PD_TRUTH_FAILED, 1},
    };
    for (size_t k = 0; k < sizeof legs / sizeof legs[0]; k++) {
      pd_conform_logged_leg_t *l = fx_leg(&f, legs[k].w, legs[k].room,
                                          legs[k].at - (d1_failed && legs[k].req ? 51.0 : 0),
                                          legs[k].closed - (d1_failed && legs[k].req ? 51.0 : 0),
                                          legs[k].fault, legs[k].fault >= 0 ? 503 : 200, legs[k].t);
      if (legs[k].fault >= 0) l->fired = 1u << legs[k].fault;
      snprintf(l->xrid, sizeof l->xrid, "%s", f.reqs[legs[k].req].xrid);
    }
    if (d1_failed) { /* request 1 arrives first and fails on d1 before request 0's retry */
      f.reqs[1].c.t_arrival = (uint64_t)(0.5 * MS_NS);
      f.reqs[1].c.t_end = (uint64_t)(9.5 * MS_NS);
    }
    PDT_EQ_INT(fx_judge(&f), 0);
    PDT_TRUE(f.c.r.judged & PD_CONFORM_BIT(16));
    PDT_EQ_INT(!!(fx_got(&f) & PD_CONFORM_BIT(16)), !d1_failed);
    if (!d1_failed)
      PDT_TRUE(strstr(f.c.run.stats.first_reason,
                      "I16 attempt 2 went back to d0, which failed it, while d1 was untried") != NULL);
    fx_free(&f);
  }
}

/* Legs tied by arrival order alone (no X-Request-Id, rids made up): request 0's first
 * attempt fails at 12 ms, and an attempt comes at 13 ms while request 0 (a retry) and request
 * 1 (its first) could both own it. FIFO gives it to request 1; the tie is ambiguous, and a row
 * whose verdict rests on it is not exercised (never a silent pass). With ids: no ambiguity. */
static void test_judge_flags_ambiguous_fifo_ties(void) {
  for (int ids = 0; ids < 2; ids++) {
    fx_t f;
    PDT_EQ_INT(fx_init(&f, "reference", 2), 0);
    if (!f.c.s) return;
    if (ids)
      for (uint32_t i = 0; i < 2; i++) snprintf(f.reqs[i].xrid, sizeof f.reqs[i].xrid, "pdconf-a-%u", i);
    fx_ended(&f, 0, 200, 1, 25.0, 30.0);
    fx_ended(&f, 1, 200, 1, 26.0, 31.0);
    const struct { uint32_t w; const char *room; double at, closed; int fault, st; pd_truth_t t; int req; } legs[] = {
        {f.p0, "1", 10.0, 12.5, -1, 200, PD_TRUTH_CANCELLED, 0},
        {f.d0, "1", 10.1, 12.0, PD_FAULT_STATUS, 503, PD_TRUTH_FAILED, 0},
        {f.p0, "2", 13.0, 20.0, -1, 200, PD_TRUTH_OK, 0},
        {f.d0, "2", 13.1, 30.0, -1, 200, PD_TRUTH_OK, 0},
        {f.p0, "3", 14.0, 21.0, -1, 200, PD_TRUTH_OK, 1},
        {f.d0, "3", 14.1, 31.0, -1, 200, PD_TRUTH_OK, 1},
    };
    for (size_t k = 0; k < sizeof legs / sizeof legs[0]; k++) {
      pd_conform_logged_leg_t *l = fx_leg(&f, legs[k].w, legs[k].room, legs[k].at,
                                          legs[k].closed, legs[k].fault, legs[k].st, legs[k].t);
      if (ids) snprintf(l->xrid, sizeof l->xrid, "%s", f.reqs[legs[k].req].xrid);
    }
    PDT_EQ_INT(fx_judge(&f), 0);
    if (ids) {
      PDT_EQ_INT(f.c.r.legs_ambiguous, 0);
    } else {
      PDT_TRUE(f.c.r.legs_by_timing == 6);
      PDT_TRUE(f.c.r.legs_ambiguous >= 2);
      f.c.r.status = PD_CONFORM_RAN;
      f.c.r.exercised = f.c.r.matched = f.c.r.want_set = 1;
      PDT_EQ_INT(pd_conform_verdict(&f.c.r), PD_CONFORM_NOT_EXERCISED);
    }
    fx_free(&f);
  }
}

/* A client's body the checker could not keep (out of memory) leaves no trustworthy verdict:
 * the run is an error naming it, not a row that passes or fails. */
static void test_judge_a_lost_client_record_makes_the_run_an_error(void) {
  for (int lost = 0; lost < 2; lost++) {
    fx_t f;
    PDT_EQ_INT(fx_init(&f, "reference", 1), 0);
    if (!f.c.s) return;
    fx_ended(&f, 0, 200, 1, 20.0, 30.0);
    f.reqs[0].c.is_record_lost = lost;
    char err[200] = "";
    PDT_EQ_INT(pd_conform_judge(&f.c.run, err, sizeof err), lost ? -1 : 0);
    PDT_EQ_U64(f.c.run.stats.records_lost, (uint64_t)lost);
    if (lost) PDT_TRUE(strstr(err, "1 client bodies lost") != NULL);
    fx_free(&f);
  }
}

/* An attempt holds PD_CONFORM_UNIT_LEGS legs; a leg re-sent to its worker more often than that
 * is judged with no request, and counted so (it was dropped silently before). */
static void test_judge_counts_legs_resent_past_an_attempts_room(void) {
  fx_t f;
  PDT_EQ_INT(fx_init(&f, "reference", 1), 0);
  if (!f.c.s) return;
  fx_ended(&f, 0, 200, 1, 20.0, 30.0);
  pd_conform_logged_leg_t *p = fx_leg(&f, f.p0, "300", 10.0, 25.0, -1, 200, PD_TRUTH_OK);
  fx_leg(&f, f.d0, "300", 10.5, 29.0, -1, 200, PD_TRUTH_OK);
  for (int k = 0; k < 6; k++) { /* the same body to p0 again: resends of p */
    pd_conform_logged_leg_t *r = fx_leg(&f, f.p0, "300", 11.0 + k, 12.0 + k, -1, 200, PD_TRUTH_OK);
    snprintf(r->rid, sizeof r->rid, "%s", p->rid);
  }
  PDT_EQ_INT(fx_judge(&f), 0);
  PDT_EQ_U64(f.c.r.legs_resent, 6);
  PDT_EQ_U64(f.c.r.legs_unattributed, 8 - PD_CONFORM_UNIT_LEGS); /* 2 + 6 legs, room for 6 */
  fx_free(&f);
}

/* Issue 9 item 4: the mock logs the runner's id in the prompt when the gateway's own
 * X-Request-Id (a uuid4, as vLLM's proxies send) is not the runner's. */
static void test_mock_prefers_the_runners_id_to_a_foreign_header(void) {
  static const char body[] = "{\"text\":\"pdconf-1a2b-7 hello\",\"stream\":true}";
  char out[PD_MOCK_XRID_MAX];
  pd_mock_req_pick_xrid("3f2a9c0d5e6b47a8b9c0d1e2f3a4b5c6", body, sizeof body - 1, out, sizeof out);
  PDT_EQ_STR(out, "pdconf-1a2b-7");
  pd_mock_req_pick_xrid("pdconf-1a2b-9", body, sizeof body - 1, out, sizeof out); /* forwarded */
  PDT_EQ_STR(out, "pdconf-1a2b-9");
  pd_mock_req_pick_xrid(NULL, body, sizeof body - 1, out, sizeof out);
  PDT_EQ_STR(out, "pdconf-1a2b-7");
  pd_mock_req_pick_xrid("abc", "{\"text\":\"hi\"}", 13, out, sizeof out); /* not a conform run */
  PDT_EQ_STR(out, "abc");
  pd_mock_req_pick_xrid(NULL, "{}", 2, out, sizeof out);
  PDT_EQ_STR(out, "");
}

int pdt_suite_conform_judge(void) {
  static const pdt_case_t cases[] = {
      {"judge ties attempts by how requests ended", test_judge_ties_attempts_by_how_requests_ended},
      {"judge: no I6 for a leg arriving after the client's end",
       test_judge_no_i6_for_a_leg_arriving_after_the_clients_end},
      {"judge: I16 from the worker logs alone", test_judge_i16_from_the_worker_logs},
      {"judge: ambiguous FIFO ties are flagged", test_judge_flags_ambiguous_fifo_ties},
      {"judge: a client record lost to memory makes the run an error",
       test_judge_a_lost_client_record_makes_the_run_an_error},
      {"judge: legs re-sent past an attempt's room are counted unattributed",
       test_judge_counts_legs_resent_past_an_attempts_room},
      {"mock prefers the runner's id to a foreign X-Request-Id",
       test_mock_prefers_the_runners_id_to_a_foreign_header},
  };
  return PDT_SUITE("conform_judge", cases);
}
