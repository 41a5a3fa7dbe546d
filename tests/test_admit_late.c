/* R-ADMIT-QUEUE's service estimate (docs/spec.md): a queued request whose turn comes so late
 * that an attempt started then would pass its commit deadline before the measured start ->
 * commit time of served requests is shed with 503 at its turn, not started to end in a 504
 * (sim explore seeds 4962, 6520: I15). */
#include <stdlib.h>
#include <string.h>

#include "pd_dispatch.h"
#include "pdt.h"

#include "pdt_harness.h"

#define MS 1000000ull

static void send(harness_t *h, uint64_t id) {
  pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = id, .path = "/generate",
                   .data = (const uint8_t *)STREAM, .len = strlen(STREAM)};
  h_feed(h, ev);
}

static void leg_ev(harness_t *h, uint64_t req, uint64_t leg, pd_event_kind_t k, int status,
                   const char *data) {
  pd_event_t ev = {.kind = k, .req_id = req, .leg_id = leg, .status = status,
                   .data = (const uint8_t *)data, .len = data ? strlen(data) : 0};
  h_feed(h, ev);
}

/* What the last feed did for request 2: 1 its legs opened, -1 its 503, 2 another head, 0
 * nothing. */
static int scan(const harness_t *h) {
  int got = 0;
  for (size_t k = 0; k < h->out.n; k++) {
    const pd_action_t *a = &h->out.v[k];
    if (a->req_id != 2) continue;
    if (a->kind == PD_ACT_OPEN_LEG && !got) got = 1;
    if (a->kind == PD_ACT_CLIENT_HEAD) got = a->status == 503 ? -1 : 2;
  }
  return got;
}

/* Both requests arrive at T0 (100 ms, not 0: an attempt's start must be stamped for the
 * service time to be measured from it, not from time 0). Request 1 on (p0, d0) commits 300 ms
 * after its start (its first token) and ends end_ms after T0; request 2 waits for d0's one
 * slot. Its commit deadline (or, is_total, its total deadline, with no commit deadline) is
 * 1000 ms after its arrival. What request 2's turn brings: 1 its legs opened, -1 its 503, 0
 * nothing yet. */
#define T0 (100 * MS)
static int turn_of_second(uint64_t end_ms, int is_total) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.commit_timeout_ns = is_total ? 0 : 1000 * MS; /* 0: none */
  if (is_total) c.total_timeout_ns = 1000 * MS;
  harness_t h;
  h_init_cfg(&h, &c, 1);
  pd_gw_set_worker_limit(h.gw, PD_ROLE_DECODE, 0, 1);
  h.now = T0;
  send(&h, 1);
  send(&h, 2);
  h.now = T0 + 300 * MS; /* decode's head and first token: request 1 commits at 300 ms */
  leg_ev(&h, 1, 2, PD_EV_UP_HEAD, 200, NULL);
  leg_ev(&h, 1, 2, PD_EV_UP_DATA, 0, TOK0);
  h.now = T0 + end_ms * MS;
  leg_ev(&h, 1, 2, PD_EV_UP_DATA, 0, DONE); /* request 1 ends: d0's slot is free */
  int got = scan(&h);
  for (int i = 0; i < 6 && !got && h_fire(&h); i++) got = scan(&h);
  h_free(&h);
  return got;
}

/* Turn 600 ms after arrival: 600 + 300 < 1000, its attempt starts (were the service time
 * measured from time 0, not from request 1's start, it would be 400 and shed this one). Turn at
 * 800 ms: 800 + 300 >= 1000, it is shed with 503 at once instead of running into its commit
 * deadline (504); the same against the total deadline alone. */
static void test_a_turn_too_late_for_the_commit_deadline_is_shed(void) {
  for (int is_total = 0; is_total < 2; is_total++) {
    PDT_EQ_INT(turn_of_second(600, is_total), 1);
    PDT_EQ_INT(turn_of_second(800, is_total), -1);
  }
}

int pdt_suite_admit_late(void) {
  static const pdt_case_t cases[] = {
      {"a queued request's turn too late for its commit deadline is shed, not started",
       test_a_turn_too_late_for_the_commit_deadline_is_shed},
  };
  return PDT_SUITE("admit_late", cases);
}
