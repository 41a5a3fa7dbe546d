/* A scripted driver for the dispatch core: feed one request's events, collect the actions
 * and what the client saw. Shared by the dispatch test files. */
#ifndef PDT_HARNESS_H
#define PDT_HARNESS_H
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "pd_dispatch.h"
#include "pdt.h"

#define MS 1000000ull

typedef struct harness {
  pd_prng_t rng;
  pd_gw_t *gw;
  pd_actbuf_t out;
  uint64_t now;
  char client[8192]; /* client bytes so far */
  size_t client_len;
  int head_status, ended, aborted;
} harness_t;

static inline void h_init(harness_t *h, pd_mode_t mode, const pd_alloc_t *alloc) {
  memset(h, 0, sizeof *h);
  pd_prng_init(&h->rng, 42);
  pd_gw_config_t c;
  pd_gw_config_default(&c, mode);
  h->gw = pd_gw_new(alloc, &c, &h->rng);
  if (!h->gw) return;
  pd_gw_add_worker(h->gw, PD_ROLE_PREFILL, "p0", "p0", 8998);
  pd_gw_add_worker(h->gw, PD_ROLE_PREFILL, "p1", "p1", 8998);
  pd_gw_add_worker(h->gw, PD_ROLE_DECODE, "d0", "d0", -1);
  pd_gw_add_worker(h->gw, PD_ROLE_DECODE, "d1", "d1", -1);
  pd_actbuf_init(&h->out, alloc);
}

static inline void h_free(harness_t *h) {
  pd_actbuf_free(&h->out);
  pd_gw_del(h->gw);
}

/* The last TIMER action in the buffer, if it is due now: the end of the instant (legs given
 * up are settled then, R-CANCEL). It is taken out of the buffer and returned. */
static inline int h_take_due_timer(harness_t *h, uint64_t *gen) {
  size_t last = SIZE_MAX;
  for (size_t i = 0; i < h->out.n; i++)
    if (h->out.v[i].kind == PD_ACT_TIMER) last = i;
  if (last == SIZE_MAX || h->out.v[last].deadline_ns > h->now) return 0;
  *gen = h->out.v[last].timer_gen;
  size_t k = 0;
  for (size_t i = 0; i < h->out.n; i++)
    if (h->out.v[i].kind != PD_ACT_TIMER || h->out.v[i].deadline_ns > h->now)
      h->out.v[k++] = h->out.v[i];
  h->out.n = k;
  return 1;
}

/* Feed one event, without running the end of the instant. */
static inline void h_feed_raw(harness_t *h, pd_event_t ev) {
  pd_actbuf_reset(&h->out);
  pd_gw_feed(h->gw, h->now, &ev, &h->out);
}

/* Record client-visible output of the actions in the buffer. */
static inline void h_observe(harness_t *h) {
  for (size_t i = 0; i < h->out.n; i++) {
    const pd_action_t *a = &h->out.v[i];
    if (a->kind == PD_ACT_CLIENT_HEAD) h->head_status = a->status;
    if (a->kind == PD_ACT_CLIENT_DATA && h->client_len + a->len < sizeof h->client) {
      memcpy(h->client + h->client_len, a->data, a->len);
      h->client_len += a->len;
      h->client[h->client_len] = 0;
    }
    if (a->kind == PD_ACT_CLIENT_END) {
      h->ended = 1;
      h->aborted = a->flag;
    }
  }
}

/* Feed one event and then the end of its instant, as a driver's timer at the same time
 * would (a timer due now); the actions of both steps stay in the buffer, without that
 * same-instant TIMER; record client-visible output. */
static inline void h_feed(harness_t *h, pd_event_t ev) {
  h_feed_raw(h, ev);
  uint64_t gen;
  for (int guard = 0; guard < 8 && h_take_due_timer(h, &gen); guard++) {
    pd_event_t t = {.kind = PD_EV_TIMER, .req_id = ev.req_id, .timer_gen = gen};
    pd_gw_feed(h->gw, h->now, &t, &h->out);
  }
  h_observe(h);
}

static inline const pd_action_t *h_find(harness_t *h, pd_action_kind_t k, int nth) {
  for (size_t i = 0; i < h->out.n; i++)
    if (h->out.v[i].kind == k && nth-- == 0) return &h->out.v[i];
  return NULL;
}

static inline size_t h_count(harness_t *h, pd_action_kind_t k) {
  size_t n = 0;
  for (size_t i = 0; i < h->out.n; i++) n += h->out.v[i].kind == k;
  return n;
}

static inline void h_request(harness_t *h, const char *body) {
  pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = 7, .path = "/generate",
                   .data = (const uint8_t *)body, .len = strlen(body)};
  h_feed(h, ev);
}

static inline void h_leg(harness_t *h, pd_event_kind_t k, uint64_t leg, int status, const char *data) {
  pd_event_t ev = {.kind = k, .req_id = 7, .leg_id = leg, .status = status,
                   .data = (const uint8_t *)data, .len = data ? strlen(data) : 0};
  h_feed(h, ev);
}

/* A transport error on one leg of request 7. */
static inline void h_uperr(harness_t *h, uint64_t leg, pd_uperr_t e) {
  pd_event_t ev = {.kind = PD_EV_UP_ERROR, .req_id = 7, .leg_id = leg, .uperr = e};
  h_feed(h, ev);
}

#define STREAM "{\"text\":\"hi\",\"stream\":true}"
#define TOK0 "data: {\"text\":\"a\",\"index\":0}\n\n"
#define TOK1 "data: {\"text\":\"b\",\"index\":1}\n\n"
#define DONE "data: [DONE]\n\n"

/* Start a reference stream request; legs are 1 (prefill) and 2 (decode). */
static inline void start(harness_t *h, pd_mode_t mode, const char *body) {
  h_init(h, mode, NULL);
  h_request(h, body);
}


/* Fire the request's armed timer (the last TIMER action seen), at its deadline. */
static inline int h_fire(harness_t *h, const pd_action_t *t) {
  if (!t) return 0;
  uint64_t at = t->deadline_ns, gen = t->timer_gen;
  if (at > h->now) h->now = at;
  pd_event_t ev = {.kind = PD_EV_TIMER, .req_id = 7, .timer_gen = gen};
  h_feed(h, ev);
  return 1;
}

#endif
