/* Priority classes in the reference's admission (docs/spec.md R-ADMIT-PRIO): the queue
 * orders critical before standard before sheddable, FIFO within a class; a full queue gives
 * its newest lower-class request up to a higher-class arrival (503 naming the limit and the
 * class); sheddable requests are shed at arrival once the backlog holds half the queue. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_dispatch.h"
#include "pd_err.h"
#include "pdt.h"

#include "pd_scenario.h"
#include "pd_world.h"
#include "pdt_harness.h"

/* One prefill and one decode, decode admitting 1 request in flight, queue `qmax`. */
static void prio_init(harness_t *h, uint32_t qmax) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.admit_queue_max = qmax;
  h_init_cfg(h, &c, 1);
  pd_gw_set_worker_limit(h->gw, PD_ROLE_DECODE, 0, 1);
}

static void send_prio(harness_t *h, uint64_t id, pd_prio_t prio) {
  pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = id, .path = "/generate",
                   .data = (const uint8_t *)STREAM, .len = strlen(STREAM), .prio = prio};
  h_feed(h, ev);
}

static const pd_action_t *act_for(harness_t *h, pd_action_kind_t k, uint64_t id) {
  for (size_t i = 0; i < h->out.n; i++)
    if (h->out.v[i].kind == k && h->out.v[i].req_id == id) return &h->out.v[i];
  return NULL;
}

static uint64_t started_of(harness_t *h, const uint64_t *cand, int n) {
  for (int i = 0; i < n; i++)
    if (cand[i] && h_decode_leg_of(h, cand[i])) return cand[i];
  return 0;
}

/* Request id's legs (prefill leg - 1, decode leg) answer and decode ends: its slot frees.
 * Returns the request among cand[0..n) whose decode leg opened from it (0: none). */
static uint64_t finish(harness_t *h, uint64_t id, uint64_t leg, const uint64_t *cand, int n) {
  pd_event_t evs[4] = {
      {.kind = PD_EV_UP_HEAD, .req_id = id, .leg_id = leg - 1, .status = 200},
      {.kind = PD_EV_UP_HEAD, .req_id = id, .leg_id = leg, .status = 200},
      {.kind = PD_EV_UP_DATA, .req_id = id, .leg_id = leg, .data = (const uint8_t *)TOK0 DONE,
       .len = strlen(TOK0 DONE)},
      {.kind = PD_EV_UP_END, .req_id = id, .leg_id = leg},
  };
  uint64_t got = 0;
  for (int i = 0; i < 4 && !got; i++) {
    h_feed(h, evs[i]);
    got = started_of(h, cand, n);
  }
  h->now += 1;
  for (int g = 0; g < 3 && !got && h_fire(h); g++) got = started_of(h, cand, n);
  return got;
}

/* Higher class first, FIFO within a class: with 1 running, the queue holds standard 2,
 * sheddable 3, critical 4, standard 5; capacity frees one at a time and they start in the
 * order 4, 2, 5, 3. */
static void test_queue_serves_higher_class_first_fifo_within(void) {
  harness_t h;
  prio_init(&h, 8);
  send_prio(&h, 1, PD_PRIO_STANDARD);
  uint64_t leg = h_decode_leg_of(&h, 1);
  PDT_TRUE(leg != 0);
  send_prio(&h, 2, PD_PRIO_STANDARD);
  send_prio(&h, 3, PD_PRIO_SHEDDABLE); /* backlog 1 < (8 + 1) / 2: it waits */
  send_prio(&h, 4, PD_PRIO_CRITICAL);
  send_prio(&h, 5, PD_PRIO_STANDARD);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLIENT_HEAD), 0);
  pd_admit_stats_t st;
  pd_gw_admit_stats(h.gw, &st);
  PDT_EQ_U64(st.now_queued, 4);
  const uint64_t want[4] = {4, 2, 5, 3};
  uint64_t cand[4] = {2, 3, 4, 5}, cur = 1;
  for (int k = 0; k < 4; k++) {
    uint64_t next = finish(&h, cur, leg, cand, 4);
    PDT_EQ_U64(next, want[k]);
    if (!next) break;
    leg = h_decode_leg_of(&h, next);
    for (int i = 0; i < 4; i++)
      if (cand[i] == next) cand[i] = 0; /* started: no longer a candidate */
    cur = next;
  }
  pd_gw_admit_stats(h.gw, &st);
  PDT_EQ_U64(st.dequeued, 4);
  PDT_EQ_U64(st.evicted, 0);
  h_free(&h);
}

/* A full queue (2: standard 2 and 3) and a critical arrival 4: the newest lower-class
 * request, 3, is evicted at once (503, Retry-After, admission_queue_evicted naming the limit
 * and its class) and its object freed though its queue deadline was armed (ASan: no use
 * after free when later deadlines fire); 4 waits. A standard arrival 5 finds no lower class
 * to evict: it is shed (queue full). 4 then starts before 2. */
static void test_full_queue_evicts_the_newest_lower_class(void) {
  harness_t h;
  prio_init(&h, 2);
  send_prio(&h, 1, PD_PRIO_STANDARD);
  uint64_t leg = h_decode_leg_of(&h, 1);
  PDT_TRUE(leg != 0);
  send_prio(&h, 2, PD_PRIO_STANDARD);
  send_prio(&h, 3, PD_PRIO_STANDARD);
  h.now += 5 * MS;
  h.client_len = 0;
  h.client[0] = 0;
  send_prio(&h, 4, PD_PRIO_CRITICAL);
  const pd_action_t *hd = act_for(&h, PD_ACT_CLIENT_HEAD, 3);
  PDT_TRUE(hd != NULL && hd->status == 503);
  if (hd) PDT_EQ_U64(hd->deadline_ns, 1000000000ull); /* Retry-After: 1 s */
  PDT_TRUE(act_for(&h, PD_ACT_CLIENT_HEAD, 4) == NULL);
  PDT_TRUE(strstr(h.client, "\"code\":\"admission_queue_evicted\"") != NULL);
  PDT_TRUE(strstr(h.client, "admit_queue_max 2") != NULL);
  PDT_TRUE(strstr(h.client, "class: standard") != NULL);
  PDT_TRUE(act_for(&h, PD_ACT_DONE, 3) != NULL); /* freed at the end of the instant */
  send_prio(&h, 5, PD_PRIO_STANDARD);
  hd = act_for(&h, PD_ACT_CLIENT_HEAD, 5);
  PDT_TRUE(hd != NULL && hd->status == 503);
  PDT_TRUE(strstr(h.client, "\"code\":\"admission_queue_full\"") != NULL);
  pd_admit_stats_t st;
  pd_gw_admit_stats(h.gw, &st);
  PDT_EQ_U64(st.evicted, 1);
  PDT_EQ_U64(st.shed_full, 1);
  PDT_EQ_U64(st.shed_by_class[PD_PRIO_STANDARD], 2);
  PDT_EQ_U64(st.shed_by_class[PD_PRIO_CRITICAL], 0);
  PDT_EQ_U64(st.now_queued, 2);
  const uint64_t cand[2] = {2, 4};
  PDT_EQ_U64(finish(&h, 1, leg, cand, 2), 4);
  /* the rest of the deadlines fire on live requests only (ASan would see a freed one) */
  for (int i = 0; i < 32 && h_fire(&h); i++) {
  }
  h_free(&h);
}

/* A critical arrival into a full queue of critical requests evicts nobody: shed, its class
 * named. */
static void test_no_eviction_within_a_class(void) {
  harness_t h;
  prio_init(&h, 1);
  send_prio(&h, 1, PD_PRIO_CRITICAL);
  send_prio(&h, 2, PD_PRIO_CRITICAL);
  send_prio(&h, 3, PD_PRIO_CRITICAL);
  const pd_action_t *hd = act_for(&h, PD_ACT_CLIENT_HEAD, 3);
  PDT_TRUE(hd != NULL && hd->status == 503);
  PDT_TRUE(strstr(h.client, "class: critical") != NULL);
  pd_admit_stats_t st;
  pd_gw_admit_stats(h.gw, &st);
  PDT_EQ_U64(st.evicted, 0);
  PDT_EQ_U64(st.shed_by_class[PD_PRIO_CRITICAL], 1);
  h_free(&h);
}

/* Queue 4: a sheddable request waits while the backlog is under (4 + 1) / 2 = 2 and is shed
 * at arrival from 2 on (admission_queue_sheddable, naming the limit and the class), while a
 * standard one still queues. */
static void test_sheddable_shed_at_half_the_queue(void) {
  harness_t h;
  prio_init(&h, 4);
  send_prio(&h, 1, PD_PRIO_STANDARD);
  send_prio(&h, 2, PD_PRIO_SHEDDABLE); /* backlog 0: waits */
  PDT_TRUE(act_for(&h, PD_ACT_CLIENT_HEAD, 2) == NULL);
  send_prio(&h, 3, PD_PRIO_STANDARD); /* backlog 1 */
  send_prio(&h, 4, PD_PRIO_SHEDDABLE); /* backlog 2: shed */
  const pd_action_t *hd = act_for(&h, PD_ACT_CLIENT_HEAD, 4);
  PDT_TRUE(hd != NULL && hd->status == 503);
  PDT_TRUE(strstr(h.client, "\"code\":\"admission_queue_sheddable\"") != NULL);
  PDT_TRUE(strstr(h.client, "sheddable_queue_max 2") != NULL);
  PDT_TRUE(strstr(h.client, "class: sheddable") != NULL);
  send_prio(&h, 5, PD_PRIO_STANDARD); /* standard still queues */
  PDT_TRUE(act_for(&h, PD_ACT_CLIENT_HEAD, 5) == NULL);
  pd_admit_stats_t st;
  pd_gw_admit_stats(h.gw, &st);
  PDT_EQ_U64(st.shed_sheddable, 1);
  PDT_EQ_U64(st.shed_by_class[PD_PRIO_SHEDDABLE], 1);
  PDT_EQ_U64(st.now_queued, 3);
  h_free(&h);
}

static void test_class_names(void) {
  PDT_EQ_INT(pd_prio_parse("critical"), PD_PRIO_CRITICAL);
  PDT_EQ_INT(pd_prio_parse("standard"), PD_PRIO_STANDARD);
  PDT_EQ_INT(pd_prio_parse("sheddable"), PD_PRIO_SHEDDABLE);
  PDT_EQ_INT(pd_prio_parse("Critical"), -1);
  PDT_EQ_INT(pd_prio_parse(""), -1);
  PDT_EQ_INT(pd_prio_parse(NULL), -1);
  PDT_TRUE(pd_prio_name(3) == NULL);
  PDT_TRUE(strcmp(pd_prio_name(PD_PRIO_SHEDDABLE), "sheddable") == 0);
}

/* The library's overload-priority-classes (2x overload, 20 % critical, 40 % sheddable) from
 * the client's side: the reference serves every critical request clean and sheds none of
 * them, while sheddable requests take most of the shedding; joined (no classes) sheds none. */
static void test_library_scenario_protects_critical(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[256] = "";
  if (!s) return;
  int rc = pd_scenario_load(s, PD_SOURCE_DIR "/scenarios/overload-priority-classes.json", err,
                            sizeof err);
  PDT_EQ_INT(rc, 0);
  PDT_EQ_STR(err, "");
  if (rc) {
    free(s);
    return;
  }
  pd_world_stats_t st;
  uint32_t v = 0;
  PDT_EQ_INT(pd_world_run(s, PD_MODE_REFERENCE, s->config.seed, NULL, &st, &v, NULL), 0);
  PDT_EQ_U64(v, 0);
  PDT_TRUE(st.class_n[PD_PRIO_CRITICAL] >= 80);
  PDT_EQ_U64(st.class_shed[PD_PRIO_CRITICAL], 0);
  PDT_EQ_U64(st.class_clean[PD_PRIO_CRITICAL], st.class_n[PD_PRIO_CRITICAL]);
  /* sheddable absorbs the shedding: most of its requests, more than standard's share */
  PDT_TRUE(st.class_shed[PD_PRIO_SHEDDABLE] * 2 > st.class_n[PD_PRIO_SHEDDABLE]);
  PDT_TRUE(st.class_shed[PD_PRIO_SHEDDABLE] * st.class_n[PD_PRIO_STANDARD] >
           st.class_shed[PD_PRIO_STANDARD] * st.class_n[PD_PRIO_SHEDDABLE]);
  PDT_EQ_INT(pd_world_run(s, PD_MODE_JOINED, s->config.seed, NULL, &st, &v, NULL), 0);
  PDT_EQ_U64(st.class_shed[PD_PRIO_SHEDDABLE] + st.class_shed[PD_PRIO_CRITICAL], 0);
  free(s);
}

int pdt_suite_admit_prio(void) {
  static const pdt_case_t cases[] = {
      {"the queue serves the higher class first, FIFO within", test_queue_serves_higher_class_first_fifo_within},
      {"a full queue evicts the newest lower-class request", test_full_queue_evicts_the_newest_lower_class},
      {"no eviction within a class", test_no_eviction_within_a_class},
      {"sheddable is shed at half the queue", test_sheddable_shed_at_half_the_queue},
      {"class names", test_class_names},
      {"library scenario: critical served, sheddable shed", test_library_scenario_protects_critical},
  };
  return PDT_SUITE("admit_prio", cases);
}
