/* The invariant checker on hand-built records: a clean request violates nothing, and each
 * single defect trips exactly its own invariant (so every detector is shown to fire). */
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pd_err.h"
#include "pd_world_int.h"
#include "pdt.h"
#include "pdt_check.h"

#define EXPECT_ONLY(f, inv)                         \
  do {                                              \
    uint32_t got_ = judge(f);                       \
    PDT_EQ_U64(got_, (inv) ? BIT(inv) : 0);         \
  } while (0)

static void test_a_clean_request_violates_nothing(void) {
  fixture_t *f = clean();
  EXPECT_ONLY(f, 0);
  free(f);
}

static void test_each_defect_trips_its_own_invariant(void) {
  struct {
    const char *what;
    int inv;
    void (*apply)(fixture_t *);
  } cases[] = {
      {"late end", PD_INVARIANT_TERMINATION, NULL},
      {"leg open", PD_INVARIANT_ORPHAN_LEG, NULL},
      {"slot late", PD_INVARIANT_STRANDED_SLOT, NULL},
      {"blame", PD_INVARIANT_OUTCOME, NULL},
      {"short clean", PD_INVARIANT_FALSE_SUCCESS, NULL},
      {"retry after commit", PD_INVARIANT_COMMIT, NULL},
      {"attempts", PD_INVARIANT_ATTEMPTS, NULL},
      {"rooms", PD_INVARIANT_ROOMS, NULL},
      {"load kept", PD_INVARIANT_LOAD_BALANCE, NULL},
      {"load late", PD_INVARIANT_LOAD_TRUTH, NULL},
      {"logprobs", PD_INVARIANT_LOGPROBS, NULL},
      {"silent failure", PD_INVARIANT_ERROR_VISIBLE, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    fixture_t *f = clean();
    if (!f) return;
    switch (cases[i].inv) {
    case PD_INVARIANT_TERMINATION:
      f->rq.t_end = 130000 * MS;
      f->p.t_gw_closed = f->d.t_gw_closed = 129999 * MS;
      f->p.t_slot_freed = f->d.t_slot_freed = 129999 * MS;
      f->rq.load_t_rel[0][0] = f->rq.load_t_rel[1][0] = 129999 * MS; f->j.now = 200000 * MS; break;
    case PD_INVARIANT_ORPHAN_LEG:
      f->p.t_gw_closed = 5000 * MS;
      f->rq.load_t_rel[0][0] = 5000 * MS;
      break;
    case PD_INVARIANT_STRANDED_SLOT: f->p.t_slot_freed = 0; break;
    case PD_INVARIANT_OUTCOME:
      f->p.truth = PD_TRUTH_CANCELLED;
      f->p.outcome = PD_OUTCOME_FAILURE;
      break;
    case PD_INVARIANT_FALSE_SUCCESS: f->rq.next_token = 1; f->rq.tokens = 2; break;
    case PD_INVARIANT_COMMIT: f->rq.retry_after_commit = 1; break;
    case PD_INVARIANT_ATTEMPTS: f->rq.attempts = 6; f->p.attempt = f->d.attempt = 6; break;
    case PD_INVARIANT_ROOMS: f->d.rooms_hash = 1; break;
    case PD_INVARIANT_LOAD_BALANCE: f->rq.load_bal[1][0] = 1; break;
    case PD_INVARIANT_LOAD_TRUTH: f->rq.load_t_rel[0][0] = 2000 * MS; break;
    case PD_INVARIANT_LOGPROBS: f->rq.wants_logprob = 1; f->rq.logprob_state = -1; break;
    case PD_INVARIANT_ERROR_VISIBLE: f->rq.saw_done = 0; f->d.truth = PD_TRUTH_FAILED;
      f->d.outcome = PD_OUTCOME_FAILURE; break;
    default: break;
    }
    uint32_t got = judge(f);
    if (got != BIT(cases[i].inv)) fprintf(stderr, "  check %s: mask %#x\n", cases[i].what, got);
    PDT_EQ_U64(got, BIT(cases[i].inv));
    free(f);
  }
}

static void test_cancelled_is_neutral_for_every_truth(void) {
  pd_truth_t truths[] = {PD_TRUTH_OK, PD_TRUTH_FAILED, PD_TRUTH_STALLED, PD_TRUTH_CANCELLED};
  for (size_t i = 0; i < 4; i++) {
    fixture_t *f = clean();
    if (!f) return;
    f->p.truth = truths[i];
    f->p.outcome = PD_OUTCOME_CANCELLED;
    EXPECT_ONLY(f, 0);
    free(f);
  }
}

/* Q10: the reference records an outcome for every leg it opened; a leg without one is I4.
 * The upstream models are not held to it (minilb records none), nor a socket run whose
 * records carry no outcomes (conform judges I4 from /metrics instead). */
static void test_reference_must_record_an_outcome_for_every_leg(void) {
  for (int m = 0; m < 3; m++) {
    fixture_t *f = clean();
    if (!f) return;
    f->j.mode = m == 0 ? PD_MODE_JOINED : PD_MODE_REFERENCE;
    f->j.is_outcome_blind = m == 2;
    f->d.outcomes = 0;
    PDT_EQ_U64(judge(f), m == 1 ? BIT(PD_INVARIANT_OUTCOME) : 0u);
    free(f);
  }
}

/* net_us 0: everything of a request can happen at virtual time 0; closed at 0 is closed. */
static void test_a_leg_closed_and_a_slot_freed_at_time_zero_count(void) {
  fixture_t *f = clean();
  if (!f) return;
  f->rq.ended = 1;
  f->rq.t_end = 0;
  f->rq.is_stream = 0;
  f->rq.head_status = 502;
  f->rq.is_sse_head = 0;
  f->rq.load_t_rel[0][0] = f->rq.load_t_rel[1][0] = 0;
  f->p.fault = PD_FAULT_SSE_ERROR; /* the reason for the 502 (the workers were not healthy) */
  pd_worker_leg_t *legs[2] = {&f->p, &f->d};
  for (int i = 0; i < 2; i++) {
    legs[i]->t_open = legs[i]->t_gw_closed = legs[i]->t_slot_taken = legs[i]->t_slot_freed = 0;
    legs[i]->is_slot_freed = 1;
    legs[i]->outcome = PD_OUTCOME_CANCELLED;
    legs[i]->truth = PD_TRUTH_CANCELLED;
  }
  EXPECT_ONLY(f, 0);
  f->d.gw_open = 1; /* still open: I2 */
  EXPECT_ONLY(f, PD_INVARIANT_ORPHAN_LEG);
  f->d.gw_open = 0;
  f->p.is_slot_freed = 0; /* never freed: I3 */
  EXPECT_ONLY(f, PD_INVARIANT_STRANDED_SLOT);
  free(f);
}

/* G18: a batch of n gets n distinct rooms on both legs, none reused by another attempt. */
static void test_batch_rooms_are_judged_item_by_item(void) {
  static uint64_t good[3] = {7, 8, 9}, dup[3] = {7, 8, 7}, prev[3] = {100, 101, 102},
                  prev_reused[3] = {100, 9, 102};
  for (int c = 0; c < 4; c++) {
    fixture_t *f = clean();
    if (!f) return;
    f->s.workload.batch = 3;
    f->rq.attempts = 2;
    pd_worker_leg_t *legs[2] = {&f->p, &f->d};
    for (int i = 0; i < 2; i++) {
      legs[i]->is_room_scalar = c == 1;
      legs[i]->n_rooms = c == 1 ? 1 : 3;
      legs[i]->rooms = c == 1 ? NULL : c == 2 ? dup : good;
      legs[i]->room = 7;
      legs[i]->attempt = 2;
    }
    pd_worker_leg_t old = f->d; /* attempt 1: a decode leg whose second room is 9 in case 3 */
    old.attempt = 1;
    old.n_rooms = 3;
    old.rooms = c == 3 ? prev_reused : prev;
    old.room = 100;
    old.truth = PD_TRUTH_CANCELLED;
    old.outcome = PD_OUTCOME_CANCELLED;
    old.next_in_req = NULL;
    f->d.next_in_req = &old;
    f->rq.load_w[1][1] = 0;
    /* 0: good; 1: scalar room for a batch; 2: one room twice; 3: a room of attempt 1 reused */
    char why[160];
    uint32_t got = pd_check_request(&f->j, &f->rq, why, sizeof why);
    if (got != (c == 0 ? 0u : BIT(PD_INVARIANT_ROOMS))) fprintf(stderr, "  case %d: %s\n", c, why);
    PDT_EQ_U64(got, (c == 0 ? 0u : BIT(PD_INVARIANT_ROOMS)));
    free(f);
  }
}

/* I8: a batch of 3 whose legs both carry an array of 2 distinct rooms (not a scalar, agreeing
 * with each other) is still short of a room per item (make mutate's survivor
 * sim/pd_check.c:324:50:bool:||→&&, which judged the count only for scalar rooms). */
static void test_a_batch_with_an_array_of_too_few_rooms_is_i8(void) {
  static uint64_t two[2] = {7, 8};
  fixture_t *f = clean();
  if (!f) return;
  f->s.workload.batch = 3;
  pd_worker_leg_t *legs[2] = {&f->p, &f->d};
  for (int i = 0; i < 2; i++) {
    legs[i]->n_rooms = 2;
    legs[i]->rooms = two;
    legs[i]->room = 7;
  }
  EXPECT_ONLY(f, PD_INVARIANT_ROOMS);
  legs[0]->n_rooms = legs[1]->n_rooms = 3; /* the control: three rooms pass */
  static uint64_t three[3] = {7, 8, 9};
  legs[0]->rooms = legs[1]->rooms = three;
  EXPECT_ONLY(f, 0);
  free(f);
}

/* The run's TTFT counts clean streams only: a stream that sent its first bytes and then ended
 * without [DONE] adds nothing (make mutate's survivor sim/pd_check.c:536:13:bool:&&→||, which
 * averaged every stream's first bytes in). */
static void test_ttft_counts_clean_streams_only(void) {
  for (int is_clean = 0; is_clean < 2; is_clean++) {
    fixture_t *f = clean();
    if (!f) return;
    f->rq.has_first_data = 1;
    f->rq.t_first_data = 30 * MS;
    f->rq.saw_done = is_clean;
    judge(f);
    PDT_EQ_U64(f->st.ttft_n, is_clean ? 1 : 0);
    PDT_EQ_U64(f->st.ttft_sum_ns, is_clean ? 30 * MS : 0);
    PDT_EQ_U64(f->st.clean_success, is_clean ? 1 : 0);
    free(f);
  }
}

/* I15: a request the workload expects to succeed gets a clean answer while all is healthy. */
static void test_an_unserved_request_while_every_worker_was_healthy_is_i15(void) {
  for (int c = 0; c < 6; c++) {
    fixture_t *f = clean();
    if (!f) return;
    f->rq.was_healthy = c != 2;
    f->rq.head_status = 404; /* e.g. a gateway without the route: nothing reached a worker */
    f->rq.is_sse_head = 0;
    f->rq.saw_done = 0;
    f->rq.legs = NULL;
    f->rq.load_w[0][0] = f->rq.load_w[1][0] = 0;
    if (c == 1) { /* the same with a 502 after both legs were sent and answered */
      f->rq.legs = &f->p;
      f->rq.head_status = 502;
      f->p.outcome = f->d.outcome = PD_OUTCOME_CANCELLED;
      f->rq.load_w[0][0] = f->rq.load_w[1][0] = 1;
    }
    if (c == 3) { /* a fault on a leg: the failure may be the worker's */
      f->rq.legs = &f->p;
      f->d.fault = PD_FAULT_RESET_BEFORE_HEAD;
      f->d.truth = PD_TRUTH_FAILED;
      f->d.outcome = PD_OUTCOME_FAILURE;
      f->rq.load_w[0][0] = f->rq.load_w[1][0] = 1;
    }
    if (c == 4) f->rq.gone = 1, f->rq.ended = 0; /* the client left: no success expected */
    if (c == 5) { /* the decode refused the request (a prompt larger than its pool): 400 */
      f->rq.legs = &f->p;
      f->rq.head_status = 400;
      f->d.injected_status = 400;
      f->d.truth = PD_TRUTH_OK;
      f->d.outcome = PD_OUTCOME_SUCCESS;
      f->rq.load_w[0][0] = f->rq.load_w[1][0] = 1;
    }
    /* 0, 1: I15; 2: the world was unhealthy; 3: a faulted leg; 4: the client left; 5: a
     * worker refused it (R-CAP-TOO-LARGE) */
    PDT_EQ_U64(judge(f), (c <= 1 ? BIT(PD_INVARIANT_SERVED) : 0u));
    free(f);
  }
}

/* I16 (G15): a retry back onto the worker that failed while an untried one was eligible.
 * c 5: the failed leg was closed only after the retry leg opened (a drain leg runs beside
 * the retry, R-SF-KV-DRAIN): the retry could not know it failed. c 6: d1 had a leg of
 * attempt 2 already, opened before this one (the decode whose read failed, before its drain):
 * it is no untried worker. */
static void test_a_retry_onto_the_failed_worker_is_i16_when_an_untried_one_was_eligible(void) {
  for (int c = 0; c < 7; c++) {
    fixture_t *f = clean();
    if (!f) return;
    pd_scenario_set_workers(&f->s, 1, 2); /* p0, d0, d1: nodes 0, 1, 2 */
    f->rq.attempts = 2;
    f->p.attempt = f->d.attempt = 2;
    pd_worker_leg_t p1 = f->p, d1 = f->d; /* attempt 1 on (p0, d0): d0 answered 503 */
    p1.attempt = d1.attempt = 1;
    p1.room = d1.room = 43;
    p1.truth = PD_TRUTH_CANCELLED;
    p1.outcome = PD_OUTCOME_CANCELLED;
    d1.outcome = PD_OUTCOME_FAILURE;
    d1.truth = PD_TRUTH_FAILED;
    d1.fault = PD_FAULT_HANG_MID_STREAM; /* c 2: a fault still pending when the partner's */
    d1.is_fault_fired = c != 2;          /* KV failure failed the leg: not its own failure */
    d1.is_failed_at_close = 1;           /* its 503 reached the gateway */
    d1.injected_status = 503;
    d1.worker = c == 3 ? 2 : 1; /* c 3: attempt 1 had d1, so nothing was untried */
    f->d.next_in_req = &p1;
    p1.next_in_req = &d1;
    d1.next_in_req = NULL;
    f->d.has_eligible = 1; /* attempt 2's decode leg: d0 again, d1 eligible unless c 1 */
    f->d.eligible_nodes = c == 1 ? 1ull << 1 : (1ull << 1 | 1ull << 2);
    if (c == 3) f->d.worker = 1;
    f->d.has_eligible = c != 4; /* c 4: no breaker view (a socket run): not judged */
    f->d.t_open = 300000000ull; /* the retry leg opens at 300 ms */
    d1.t_gw_closed = c == 5 ? 301000000ull : 300000000ull; /* closed by then, or just after */
    pd_worker_leg_t d2 = f->d; /* c 6: attempt 2's first decode, on d1, before this leg */
    d2.worker = 2;
    d2.t_open = 250000000ull;
    d2.has_eligible = 0;
    if (c == 6) {
      d1.next_in_req = &d2;
      d2.next_in_req = NULL;
    }
    PDT_EQ_U64(judge(f), (c == 0 ? BIT(PD_INVARIANT_RETRY_FAILED) : 0u));
    free(f);
  }
}

/* I17: after the healed phase nothing may be held: a slot, a bootstrap room, a load, a
 * running slot or KV pages in a worker engine. */
static void test_anything_left_held_after_the_healed_phase_is_i17(void) {
  for (int c = 0; c < 5; c++) {
    fixture_t *f = clean();
    if (!f) return;
    pd_prng_t rng;
    pd_prng_init(&rng, 1);
    pd_gw_config_t cfg;
    pd_gw_config_default(&cfg, PD_MODE_REFERENCE);
    f->w.s = &f->s;
    f->w.stats = &f->st;
    f->w.gw = pd_gw_new(NULL, &cfg, &rng);
    f->w.n_nodes = f->s.n_workers;
    for (uint32_t i = 0; i < f->w.n_nodes; i++) {
      f->w.nodes[i].spec = &f->s.workers[i];
      f->w.nodes[i].role = f->s.workers[i].role;
      f->w.nodes[i].role_index = (uint32_t)pd_gw_add_worker(f->w.gw, f->s.workers[i].role,
                                                            f->s.workers[i].name, "h", 1);
    }
    PDT_EQ_INT(pd_world_workers_init(&f->w), 0);
    uint32_t pn = f->w.nodes[0].role == PD_ROLE_PREFILL ? 0 : 1, dn = 1 - pn;
    pd_wact_buf_t acts;
    pd_wact_buf_init(&acts, NULL);
    if (c == 1) f->w.nodes[1].live_slots = 1; /* a decode slot never freed */
    if (c == 2) /* a decode's room left registered on a prefill */
      PDT_EQ_INT(pd_wengine_register(f->w.nodes[pn].eng, 0, 7, 42, 1, 0, &acts), 0);
    if (c == 3) f->w.nodes[0].live_slots = 2;
    if (c == 4) { /* a decode request admitted (running slot, KV pages) and never finished */
      pd_wengine_req_t r = {.has_room = 1, .room = 42, .tokens = 4, .prompt_tokens = 16};
      PDT_EQ_INT(pd_wengine_open(f->w.nodes[dn].eng, 0, 9, &r, &acts), 0);
    }
    pd_wact_buf_free(&acts);
    pd_world_check_quiet(&f->w);
    PDT_EQ_U64(f->w.violations, (c == 0 ? 0u : BIT(PD_INVARIANT_QUIESCENCE)));
    if (c) PDT_TRUE(strstr(f->st.first_reason, "I17 after the healed phase") != NULL);
    if (c == 2) PDT_TRUE(strstr(f->st.first_reason, "entr") != NULL);
    if (c == 4) PDT_TRUE(strstr(f->st.first_reason, "KV page") != NULL);
    pd_world_workers_free(&f->w);
    pd_gw_del(f->w.gw);
    free(f);
  }
}

static void test_a_request_cut_off_by_the_horizon_is_judged_on_termination_only(void) {
  fixture_t *f = clean();
  if (!f) return;
  f->rq.ended = 0;
  f->rq.t_end = 0;
  f->p.gw_open = 1;
  f->rq.load_bal[0][0] = 1;
  f->j.now = 200000 * MS;
  EXPECT_ONLY(f, PD_INVARIANT_TERMINATION);
  free(f);
}

/* A JSON body the checker could not keep is counted lost when judged (the driver then makes
 * the run an error); a later chunk is refused too, so a body is never judged from its tail. */
static void test_a_lost_client_record_is_counted(void) {
  fixture_t *f = clean();
  if (!f) return;
  f->rq.is_stream = 0;
  f->rq.is_sse_head = 0;
  PDT_EQ_INT(pd_check_client_data(&f->rq, (const uint8_t *)"{", 1), 0);
  PDT_EQ_U64(f->rq.body.len, 1);
  f->rq.is_record_lost = 1; /* as after a failed realloc */
  PDT_EQ_INT(pd_check_client_data(&f->rq, (const uint8_t *)"}", 1), PD_ERR_NOMEM);
  PDT_EQ_U64(f->rq.body.len, 1);
  judge(f);
  PDT_EQ_U64(f->st.records_lost, 1);
  judge(f);
  PDT_EQ_U64(f->st.records_lost, 2); /* per judged request */
  pd_buf_free(NULL, &f->rq.body);
  f->rq.is_record_lost = 0; /* a body past its limit is lost the same way */
  pd_buf_init(&f->rq.body, 1);
  PDT_EQ_INT(pd_check_client_data(&f->rq, (const uint8_t *)"{}", 2), PD_ERR_TOO_LARGE);
  PDT_TRUE(f->rq.is_record_lost);
  free(f);
}

/* A stream is read by the request's flag under a 2xx head, whatever its media type (vLLM's toy
 * and Mooncake proxies answer streams as application/json); an error head's JSON body is kept
 * whole. */
static void test_a_stream_under_a_json_head_is_read_as_sse(void) {
  static const char sse[] = "data: {\"text\":\"a\",\"index\":0}\n\n"
                            "data: {\"text\":\"b\",\"index\":1}\n\ndata: [DONE]\n\n";
  fixture_t *f = clean();
  if (!f) return;
  pd_sse_init(&f->rq.sse, NULL);
  f->rq.is_sse_head = 0; /* 200 application/json */
  f->rq.saw_done = 0;
  f->rq.next_token = 0;
  PDT_EQ_INT(pd_check_client_data(&f->rq, (const uint8_t *)sse, sizeof sse - 1), 0);
  PDT_TRUE(f->rq.saw_done);
  PDT_EQ_U64(f->rq.next_token, 2);
  PDT_EQ_U64(f->rq.body.len, 0);
  EXPECT_ONLY(f, 0);
  pd_sse_free(&f->rq.sse);
  f->rq.head_status = 503; /* an error head: its body is kept whole */
  PDT_EQ_INT(pd_check_client_data(&f->rq, (const uint8_t *)"{}", 2), 0);
  PDT_EQ_U64(f->rq.body.len, 2);
  pd_buf_free(NULL, &f->rq.body);
  free(f);
}

/* I14 asks the client's error for the status a worker injected in the last attempt, but only
 * one the gateway could have seen: an attempt given up in the instant it started (its legs
 * closed before the request reached the worker, explore seed 562 with admission: the queue
 * wait used up the commit budget) answers 504 while the decode answers 503 to nobody. A
 * socket run has no shared clock (is_close_order_known 0): every injected status counts. */
static void test_i14_asks_only_a_status_the_gateway_could_see(void) {
  for (int c = 0; c < 3; c++) {
    fixture_t *f = clean();
    if (!f) return;
    f->rq.is_stream = 0;
    f->rq.saw_done = 0;
    f->rq.head_status = 504;
    f->rq.is_sse_head = 0;
    f->d.truth = PD_TRUTH_FAILED;
    f->d.injected_status = 503;
    f->d.outcome = PD_OUTCOME_CANCELLED;
    f->p.truth = PD_TRUTH_CANCELLED;
    f->p.outcome = PD_OUTCOME_CANCELLED;
    f->d.t_open_arrive = 50 * MS;
    f->d.t_gw_closed = c == 0 ? 50 * MS : 50 * MS - 1; /* 0: closed as it arrived: seen */
    f->j.is_close_order_known = c != 2;
    uint32_t got = judge(f);
    PDT_EQ_U64(got & BIT(PD_INVARIANT_ERROR_VISIBLE), c == 1 ? 0u : BIT(PD_INVARIANT_ERROR_VISIBLE));
    free(f);
  }
}

/* I24: with a declared queue deadline of 1 s, the first attempt's leg must reach its worker by
 * then (plus its way there and 1 ms); a request that sent no leg and was shed for capacity (its
 * body says admission_*) or never answered must have its answer by then, a 503 of another
 * cause is not I24's; a client that left first asked nothing more; one that arrived while a
 * role had no worker to select waited on selection failures, not in the queue; without a
 * declared queue, nothing is judged. */
static void test_i24_a_request_leaves_the_queue_by_its_deadline(void) {
  static char shed_body[] = "{\"error\":{\"code\":\"admission_queue_timeout\"}}";
  static char other_body[] = "{\"error\":{\"code\":\"no_available_workers\"}}";
  for (int c = 0; c < 9; c++) {
    fixture_t *f = clean();
    if (!f) return;
    f->j.admit_queue_ns = c == 5 ? 0 : 1000 * MS;
    f->s.config.net_us = 100;
    f->rq.t_arrival = 0;
    f->p.t_open_arrive = f->d.t_open_arrive = c == 1 ? 1001 * MS + 100000 + 1 : 1001 * MS + 100000;
    int want = c == 1 || c == 3 || c == 7;
    if (c >= 2) { /* no leg: the gateway's own answer */
      f->rq.legs = NULL;
      f->rq.n_legs = 0;
      f->rq.head_status = 503;
      f->rq.is_sse_head = 0;
      f->rq.saw_done = 0;
      f->rq.load_w[0][0] = f->rq.load_w[1][0] = 0;
      f->rq.t_head = f->rq.t_end = c == 3 || c == 5 || c == 6 ? 4000 * MS : 1001 * MS;
      /* the gateway's words: an admission shed (2, 3, 5), or a 503 of another cause (6: a
       * selection that found no worker, no queue wait), or no answer at all (7) */
      char *b = c == 6 ? other_body : shed_body;
      f->rq.body.p = (uint8_t *)b;
      f->rq.body.len = strlen(b);
      if (c == 7 || c == 8) { /* 8: the same, but a role had no worker to select when it
                                  arrived (every decode down): its attempts failed at
                                  selection, no queue wait (explore seed 80279) */
        f->rq.head_status = 0;
        f->rq.ended = 0;
        f->j.now = 4000 * MS;
        f->rq.is_unselectable_at_arrival = c == 8;
      }
      if (c == 4) { /* the client left at 900 ms, before the deadline; the 503 came later */
        f->rq.gone = 1;
        f->rq.ended = 0;
        f->rq.head_status = 0;
        f->rq.t_end = 900 * MS;
      }
    }
    char reason[160] = "";
    uint32_t got = pd_check_queue_deadline(&f->j, &f->rq, reason, sizeof reason);
    PDT_EQ_U64(got, want ? BIT(PD_INVARIANT_QUEUE_DEADLINE) : 0u);
    if (c == 1) PDT_TRUE(strstr(reason, "I24 the first leg reached p0 1001.1 ms after arrival") != NULL);
    if (c == 3) PDT_TRUE(strstr(reason, "I24 answered 4000.0 ms after arrival and no leg sent") != NULL);
    if (c == 7) PDT_TRUE(strstr(reason, "I24 still waiting 4000.0 ms after arrival") != NULL);
    f->rq.body.p = NULL; /* static: not the fixture's */
    free(f);
  }
}

int pdt_suite_check(void) {
  static const pdt_case_t cases[] = {
      {"a clean request violates nothing", test_a_clean_request_violates_nothing},
      {"I24: a request leaves the gateway's queue by its deadline",
       test_i24_a_request_leaves_the_queue_by_its_deadline},
      {"I14: only a status the gateway could have seen is asked of the client",
       test_i14_asks_only_a_status_the_gateway_could_see},
      {"each single defect trips exactly its own invariant", test_each_defect_trips_its_own_invariant},
      {"a cancelled outcome is neutral whatever the worker did", test_cancelled_is_neutral_for_every_truth},
      {"a request cut off by the horizon is judged on I1 only",
       test_a_request_cut_off_by_the_horizon_is_judged_on_termination_only},
      {"a leg closed and a slot freed at virtual time 0 count as closed and freed",
       test_a_leg_closed_and_a_slot_freed_at_time_zero_count},
      {"a batch's rooms are judged item by item (count, distinct, not reused)",
       test_batch_rooms_are_judged_item_by_item},
      {"a batch of 3 with an array of 2 rooms is I8", test_a_batch_with_an_array_of_too_few_rooms_is_i8},
      {"the run's TTFT counts clean streams only", test_ttft_counts_clean_streams_only},
      {"I15: a request unserved while every worker was healthy",
       test_an_unserved_request_while_every_worker_was_healthy_is_i15},
      {"I16: a retry onto the worker that failed while an untried one was eligible",
       test_a_retry_onto_the_failed_worker_is_i16_when_an_untried_one_was_eligible},
      {"I17: a slot or room left held after the healed phase",
       test_anything_left_held_after_the_healed_phase_is_i17},
      {"a client record the checker could not keep is counted lost",
       test_a_lost_client_record_is_counted},
      {"a stream under a 2xx application/json head is read as SSE",
       test_a_stream_under_a_json_head_is_read_as_sse},
      {"the reference must record an outcome for every leg (Q10)",
       test_reference_must_record_an_outcome_for_every_leg},
  };
  return PDT_SUITE("check", cases);
}
