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

/* A gateway with config c: one prefill p0 and n_decode decode workers (d0, d1). */
static inline void h_init_cfg(harness_t *h, const pd_gw_config_t *c, int n_decode) {
  memset(h, 0, sizeof *h);
  pd_prng_init(&h->rng, 42);
  h->gw = pd_gw_new(NULL, c, &h->rng);
  pd_gw_add_worker(h->gw, PD_ROLE_PREFILL, "p0", "p0", 8998);
  pd_gw_add_worker(h->gw, PD_ROLE_DECODE, "d0", "d0", -1);
  if (n_decode > 1) pd_gw_add_worker(h->gw, PD_ROLE_DECODE, "d1", "d1", -1);
  pd_actbuf_init(&h->out, NULL);
}

static inline void h_free(harness_t *h) {
  pd_actbuf_free(&h->out);
  pd_gw_del(h->gw);
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

/* The end of the instant: fire what is due now (legs given up are settled then, R-CANCEL),
 * as a driver does once it has no other event of this instant; the actions stay in the
 * buffer. */
static inline void h_settle(harness_t *h) {
  for (int guard = 0; guard < 8 && pd_gw_get_expiry(h->gw) <= h->now; guard++)
    pd_gw_handle_expiry(h->gw, h->now, &h->out);
}

/* Feed one event and then the end of its instant; the actions of both stay in the buffer;
 * record client-visible output. */
static inline void h_feed(harness_t *h, pd_event_t ev) {
  h_feed_raw(h, ev);
  h_settle(h);
  h_observe(h);
}

/* The core's next deadline (UINT64_MAX: none). */
static inline uint64_t h_expiry(const harness_t *h) { return pd_gw_get_expiry(h->gw); }

/* A deadline is armed later than now (a backoff, a timeout still to come). */
static inline int h_armed_later(const harness_t *h) {
  return h_expiry(h) != UINT64_MAX && h_expiry(h) > h->now;
}

/* Handle the expiry at now and then the end of the instant, as one step of the driver. */
static inline void h_expire(harness_t *h) {
  pd_actbuf_reset(&h->out);
  pd_gw_handle_expiry(h->gw, h->now, &h->out);
  h_settle(h);
  h_observe(h);
}

static inline const pd_action_t *h_find(harness_t *h, pd_action_kind_t k, int nth) {
  for (size_t i = 0; i < h->out.n; i++)
    if (h->out.v[i].kind == k && nth-- == 0) return &h->out.v[i];
  return NULL;
}

/* The outcome recorded for leg (its status in *status if not NULL), or -1 if none. */
static inline int h_outcome_of(harness_t *h, uint64_t leg, int *status) {
  const pd_action_t *o;
  for (int i = 0; (o = h_find(h, PD_ACT_OUTCOME, i)); i++)
    if (o->leg_id == leg) {
      if (status) *status = o->status;
      return o->flag;
    }
  return -1;
}

/* The CLOSE_LEG action for leg, or NULL. */
static inline const pd_action_t *h_close_of(harness_t *h, uint64_t leg) {
  const pd_action_t *c;
  for (int i = 0; (c = h_find(h, PD_ACT_CLOSE_LEG, i)); i++)
    if (c->leg_id == leg) return c;
  return NULL;
}

/* The decode leg the last feed opened for request id (0: none). */
static inline uint64_t h_decode_leg_of(const harness_t *h, uint64_t id) {
  for (size_t i = 0; i < h->out.n; i++)
    if (h->out.v[i].kind == PD_ACT_OPEN_LEG && h->out.v[i].req_id == id &&
        h->out.v[i].role == PD_ROLE_DECODE)
      return h->out.v[i].leg_id;
  return 0;
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
static inline void h_uperr(harness_t *h, uint64_t leg, pd_upstream_error_t e) {
  pd_event_t ev = {.kind = PD_EV_UP_ERROR, .req_id = 7, .leg_id = leg, .uperr = e};
  h_feed(h, ev);
}

#define STREAM "{\"text\":\"hi\",\"stream\":true}"

/* The reference with one attempt and a breaker that opens after `threshold` failures (the
 * default rate), one worker of each role (R-BREAKER-BUSY's tests). */
static inline void h_init_ref_breaker(harness_t *h, uint32_t threshold) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, PD_MODE_REFERENCE);
  c.breaker.failure_threshold = threshold;
  c.retry.max_attempts = 1;
  h_init_cfg(h, &c, 1);
}

/* Open a stream request id at h->now; its prefill and decode leg ids in *p, *d. */
static inline void h_open_stream(harness_t *h, uint64_t id, uint64_t *p, uint64_t *d) {
  pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = id, .path = "/generate",
                   .data = (const uint8_t *)STREAM, .len = strlen(STREAM)};
  h_feed(h, ev);
  *p = *d = 0;
  const pd_action_t *a;
  for (int i = 0; (a = h_find(h, PD_ACT_OPEN_LEG, i)); i++)
    *(a->role == PD_ROLE_PREFILL ? p : d) = a->leg_id;
}

/* An upstream event k (head with status st, data s, end) on leg of request id. */
static inline void h_up(harness_t *h, pd_event_kind_t k, uint64_t id, uint64_t leg, int st,
                        const char *s) {
  pd_event_t ev = {.kind = k, .req_id = id, .leg_id = leg, .status = st,
                   .data = (const uint8_t *)s, .len = s ? strlen(s) : 0};
  h_feed(h, ev);
}

#define NONSTREAM "{\"text\":\"hi\",\"stream\":false}"
#define TOK0 "data: {\"text\":\"a\",\"index\":0}\n\n"
#define TOK1 "data: {\"text\":\"b\",\"index\":1}\n\n"
#define DONE "data: [DONE]\n\n"

/* Start a reference stream request; legs are 1 (prefill) and 2 (decode). */
static inline void start(harness_t *h, pd_mode_t mode, const char *body) {
  h_init(h, mode, NULL);
  h_request(h, body);
}


/* Move the clock to the core's next deadline (if later) and fire it. 0: none armed. */
static inline int h_fire(harness_t *h) {
  uint64_t at = h_expiry(h);
  if (at == UINT64_MAX) return 0;
  if (at > h->now) h->now = at;
  h_expire(h);
  return 1;
}

/* Request id gets its prefill head but no decode head: its head deadline (5 s) runs out; checks
 * the decode leg was recorded a timeout and returns the decode breaker's state then. */
static inline pd_breaker_state_t h_time_out_decode(harness_t *h, uint64_t id, uint64_t p,
                                                   uint64_t d) {
  h_up(h, PD_EV_UP_HEAD, id, p, 200, NULL);
  for (int guard = 0; guard < 8 && h_outcome_of(h, d, NULL) < 0; guard++)
    if (!h_fire(h)) break;
  PDT_EQ_INT(h_outcome_of(h, d, NULL), PD_OUTCOME_TIMEOUT);
  return pd_gw_breaker_state(h->gw, PD_ROLE_DECODE, 0, h->now);
}

#endif
