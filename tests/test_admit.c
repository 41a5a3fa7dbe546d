/* Reference admission (docs/spec.md R-ADMIT-*) through the core's feed API: per-worker
 * in-flight limits, both legs admitted together, the queue with late binding, and the 503
 * that sheds naming its limit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_dispatch.h"
#include "pd_err.h"
#include "pdt.h"

#include "pdt_harness.h"
#include "pdt_sf.h"

/* One prefill p0 and one decode d0, decode admitting `limit` requests, queue `qmax`. */
static void admit_init(harness_t *h, uint32_t limit, uint32_t qmax) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.admit_queue_max = qmax;
  h_init_cfg(h, &c, 1);
  pd_gw_set_worker_limit(h->gw, PD_ROLE_DECODE, 0, limit);
}

static void send(harness_t *h, uint64_t id) {
  pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = id, .path = "/generate",
                   .data = (const uint8_t *)STREAM, .len = strlen(STREAM)};
  h_feed(h, ev);
}

static size_t opens_for(harness_t *h, uint64_t id) {
  size_t n = 0;
  for (size_t i = 0; i < h->out.n; i++)
    n += h->out.v[i].kind == PD_ACT_OPEN_LEG && h->out.v[i].req_id == id;
  return n;
}

static const pd_action_t *head_for(harness_t *h, uint64_t id) {
  for (size_t i = 0; i < h->out.n; i++)
    if (h->out.v[i].kind == PD_ACT_CLIENT_HEAD && h->out.v[i].req_id == id) return &h->out.v[i];
  return NULL;
}

/* R-ADMIT-BOTH: decode holds one; the second request sends neither leg, not even prefill,
 * until the first one's decode ends; then its pair is picked (late binding). */
static void test_full_decode_holds_both_legs_at_the_gateway(void) {
  harness_t h;
  admit_init(&h, 1, 8);
  send(&h, 1);
  PDT_EQ_U64(opens_for(&h, 1), 2);
  send(&h, 2);
  PDT_EQ_U64(opens_for(&h, 2), 0); /* no prefill for a decode that cannot take it */
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0); /* waiting, not answered */
  pd_admit_stats_t st;
  pd_gw_admit_stats(h.gw, &st);
  PDT_EQ_U64(st.queued, 1);
  /* request 1 runs to its end: its decode load is released */
  pd_event_t ev = {.kind = PD_EV_UP_HEAD, .req_id = 1, .leg_id = 2, .status = 200};
  h_feed(&h, ev);
  ev = (pd_event_t){.kind = PD_EV_UP_DATA, .req_id = 1, .leg_id = 2,
                    .data = (const uint8_t *)TOK0 DONE, .len = strlen(TOK0 DONE)};
  h_feed(&h, ev);
  ev = (pd_event_t){.kind = PD_EV_UP_END, .req_id = 1, .leg_id = 2};
  h_feed(&h, ev);
  h.now += 1;
  for (int i = 0; i < 4 && !opens_for(&h, 2); i++) h_fire(&h);
  PDT_EQ_U64(opens_for(&h, 2), 2); /* both legs of request 2 go out now */
  pd_gw_admit_stats(h.gw, &st);
  PDT_EQ_U64(st.dequeued, 1);
  h_free(&h);
}

/* R-ADMIT-SHED: a request the full queue cannot hold is answered at once: 503, a
 * Retry-After, and a JSON body naming the limit. */
static void test_full_queue_sheds_at_once_naming_the_limit(void) {
  harness_t h;
  admit_init(&h, 1, 1);
  send(&h, 1);
  send(&h, 2); /* queued */
  send(&h, 3); /* the queue is full */
  const pd_action_t *hd = head_for(&h, 3);
  PDT_TRUE(hd != NULL);
  if (hd) {
    PDT_EQ_INT(hd->status, 503);
    PDT_EQ_U64(hd->deadline_ns, 1000000000ull); /* Retry-After: 1 s */
  }
  PDT_TRUE(strstr(h.client, "\"code\":\"admission_queue_full\"") != NULL);
  PDT_TRUE(strstr(h.client, "admit_queue_max 1") != NULL);
  PDT_EQ_U64(opens_for(&h, 3), 0);
  h_free(&h);
}

/* R-ADMIT-QUEUE: a request still queued at its absolute deadline (20 s after arrival by
 * default) is shed then, not left to time out minutes later. */
static void test_queue_deadline_sheds_the_waiting_request(void) {
  harness_t h;
  admit_init(&h, 1, 8);
  send(&h, 1);
  send(&h, 2);
  int shed = 0;
  for (int i = 0; i < 16 && !shed; i++) {
    if (!h_fire(&h)) break;
    const pd_action_t *hd = head_for(&h, 2);
    if (hd) {
      shed = 1;
      PDT_EQ_INT(hd->status, 503);
      /* by its deadline: 20 s from arrival, or at once when a retry finds it passed */
      PDT_TRUE(h.now >= 20000 * MS && h.now < 21000 * MS);
    }
  }
  PDT_TRUE(shed);
  PDT_TRUE(strstr(h.client, "admission_queue_timeout") != NULL);
  h_free(&h);
}

/* Request id's legs (prefill leg - 1, decode leg) answer their heads at once (within the
 * 5 s head deadline). */
static void decode_head(harness_t *h, uint64_t id, uint64_t leg) {
  pd_event_t ev = {.kind = PD_EV_UP_HEAD, .req_id = id, .leg_id = leg - 1, .status = 200};
  h_feed(h, ev);
  ev.leg_id = leg;
  h_feed(h, ev);
}

/* The decode leg a step opened for request id (0: none). */
/* ... and runs to its end: a token and [DONE], end. Returns the decode leg that request
 * `next` got from the capacity it freed (0: none yet). */
static uint64_t finish_decode(harness_t *h, uint64_t id, uint64_t leg, uint64_t next) {
  pd_event_t ev = {.kind = PD_EV_UP_DATA, .req_id = id, .leg_id = leg,
                   .data = (const uint8_t *)TOK0 DONE, .len = strlen(TOK0 DONE)};
  h_feed(h, ev);
  uint64_t got = h_decode_leg_of(h, next);
  ev = (pd_event_t){.kind = PD_EV_UP_END, .req_id = id, .leg_id = leg};
  h_feed(h, ev);
  return got ? got : h_decode_leg_of(h, next);
}

/* R-ADMIT-EARLY: a backlog that drained one request every 3 s (decode admits 1, each request
 * takes 3 s) starts a newcomer behind n others at the (n + 1)-th departure, about 3(n + 1) s
 * on, and the gateway keeps a newcomer only when that is within half its 20 s queue deadline
 * (the margin for a pace measured from clumpy starts): newcomers behind 0, 1 and 2 others
 * wait (3, 6, 9 s); the one behind 3 (12 s, past 10) is shed at once, 503
 * admission_queue_wait, not 20 s later. */
static void test_a_request_the_backlog_would_keep_past_its_deadline_is_shed_at_once(void) {
  harness_t h;
  admit_init(&h, 1, 16);
  uint64_t leg = 0;
  for (uint64_t id = 1; id <= 3; id++) {
    send(&h, id);
    if (id == 1) leg = h_decode_leg_of(&h, 1);
  }
  PDT_TRUE(leg != 0);
  decode_head(&h, 1, leg);
  for (uint64_t id = 1; id <= 2; id++) { /* two departures 3 s apart, the backlog lasting */
    h.now += 3000 * MS;
    leg = finish_decode(&h, id, leg, id + 1);
    for (int i = 0; i < 4 && !leg; i++) {
      h_fire(&h);
      leg = h_decode_leg_of(&h, id + 1);
    }
    PDT_TRUE(leg != 0);
    decode_head(&h, id + 1, leg);
  }
  /* now: request 3 runs, the queue is empty; 4, 5 and 6 queue behind 0, 1 and 2 others */
  for (uint64_t id = 4; id <= 7; id++) {
    send(&h, id);
    const pd_action_t *hd = head_for(&h, id);
    if (id < 7) {
      PDT_TRUE(hd == NULL);
    } else {
      PDT_TRUE(hd != NULL && hd->status == 503);
      PDT_EQ_U64(opens_for(&h, 7), 0);
    }
  }
  PDT_TRUE(strstr(h.client, "\"code\":\"admission_queue_wait\"") != NULL);
  pd_admit_stats_t st;
  pd_gw_admit_stats(h.gw, &st);
  PDT_EQ_U64(st.shed_wait, 1);
  PDT_EQ_U64(st.queued, 5); /* 2, 3, 4, 5, 6 */
  h_free(&h);
}

/* Admission off (queue 0): the second request is sent at once, as before. */
static void test_admission_off_sends_at_once(void) {
  harness_t h;
  admit_init(&h, 1, 0);
  send(&h, 1);
  send(&h, 2);
  PDT_EQ_U64(opens_for(&h, 2), 2);
  h_free(&h);
}

static void ev_for(harness_t *h, uint64_t id, uint64_t leg, pd_event_kind_t k, int status,
                   const char *data) {
  pd_event_t ev = {.kind = k, .req_id = id, .leg_id = leg, .status = status,
                   .data = (const uint8_t *)data, .len = data ? strlen(data) : 0};
  h_feed(h, ev);
}

static uint64_t open_leg_of(harness_t *h, uint64_t id) {
  for (size_t i = 0; i < h->out.n; i++)
    if (h->out.v[i].kind == PD_ACT_OPEN_LEG && h->out.v[i].req_id == id) return h->out.v[i].leg_id;
  return 0;
}

/* R-ADMIT-SF: source-first, two decodes admitting one each. Two requests are admitted, each
 * holding a decode slot from its prefill on; the third sends no prefill (its KV would wait in
 * a full decode's queue past its lease, V1.13) until a decode ends; a decode picked for a
 * request whose prefill answered goes at once. */
static void test_sf_no_prefill_without_a_decode_slot(void) {
  harness_t h;
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.protocol = PD_PROTOCOL_VLLM;
  c.admit_queue_max = 8;
  sf_init_cfg(&h, &c);
  pd_gw_set_worker_limit(h.gw, PD_ROLE_DECODE, 0, 1);
  pd_gw_set_worker_limit(h.gw, PD_ROLE_DECODE, 1, 1);
  uint64_t p[4] = {0};
  for (uint64_t id = 1; id <= 3; id++) {
    sf_request_id(&h, id, "/v1/completions", SF_COMPLETIONS);
    p[id] = open_leg_of(&h, id);
  }
  PDT_TRUE(p[1] && p[2]);
  PDT_EQ_U64(p[3], 0); /* two slots, both held: request 3 waits, unanswered */
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0);
  char body[512];
  snprintf(body, sizeof body, "{\"choices\":[{\"index\":0,\"text\":\"a\"}],"
                              "\"kv_transfer_params\":%s}", SF_KV);
  ev_for(&h, 1, p[1], PD_EV_UP_HEAD, 200, NULL);
  ev_for(&h, 1, p[1], PD_EV_UP_DATA, 0, body);
  ev_for(&h, 1, p[1], PD_EV_UP_END, 0, NULL);
  uint64_t d1 = open_leg_of(&h, 1);
  PDT_TRUE(d1 != 0);                   /* its decode goes at once */
  PDT_EQ_U64(open_leg_of(&h, 3), 0); /* its slot became its load: still none free */
  ev_for(&h, 1, d1, PD_EV_UP_HEAD, 200, NULL);
  ev_for(&h, 1, d1, PD_EV_UP_DATA, 0, SF_CHUNK0 "data: [DONE]\n\n");
  ev_for(&h, 1, d1, PD_EV_UP_END, 0, NULL);
  h.now += 1;
  uint64_t p3 = open_leg_of(&h, 3);
  for (int i = 0; i < 4 && !p3; i++) {
    h_fire(&h);
    p3 = open_leg_of(&h, 3);
  }
  PDT_TRUE(p3 != 0); /* d's slot is free: request 3's prefill goes */
  h_free(&h);
}

int pdt_suite_admit(void) {
  static const pdt_case_t cases[] = {
      {"a full decode holds both legs at the gateway", test_full_decode_holds_both_legs_at_the_gateway},
      {"a full queue sheds at once naming the limit", test_full_queue_sheds_at_once_naming_the_limit},
      {"the queue deadline sheds the waiting request", test_queue_deadline_sheds_the_waiting_request},
      {"admission off sends at once", test_admission_off_sends_at_once},
      {"a request the backlog would keep past its deadline is shed at once",
       test_a_request_the_backlog_would_keep_past_its_deadline_is_shed_at_once},
      {"source-first: no prefill without a decode slot (R-ADMIT-SF)",
       test_sf_no_prefill_without_a_decode_slot},
  };
  return PDT_SUITE("admit", cases);
}
