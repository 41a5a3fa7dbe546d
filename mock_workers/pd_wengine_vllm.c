/* The worker engine's vLLM half (pd_wengine.h, "vLLM protocol"): source first. A prefill
 * with do_remote_decode answers one token with kv_transfer_params and pins its prompt's KV
 * until decode's notification or the expiry (V1.5, V1.11-V1.16); a decode with valid params
 * reserves, reads, notifies and streams, and computes the prompt itself without them (V1.8,
 * V1.9, V1.15, V1.17, V1.18, V1.22). The SGLang path never comes here. */
#include <assert.h>
#include <stdlib.h>

#include "pd_wengine_int.h"
#include "pd_worker_shared.h"

#define MAX_RENDERED_BLOCKS PD_WIRE_MAX_BLOCKS

static int step_end(pd_wengine_t *e, pd_wact_buf_t *out) {
  int err = e->err ? e->err : out->err;
  e->err = 0;
  return err;
}

void pd_wengine_act_id(pd_wengine_t *e, pd_wact_buf_t *out, uint32_t kind, uint64_t id,
                       uint32_t a, uint64_t b, uint64_t c) {
  size_t n = out->n;
  pd_wengine_act(e, out, kind, NULL, a, b, c);
  if (out->n > n) out->v[n].id = id;
}

/* ---------- prefill: pins ---------- */

static uint64_t expiry_ms(const pd_scenario_worker_t *s) {
  if (s->kv_expiry == PD_KV_EXPIRY_LEASE)
    return s->kv_lease_ms ? s->kv_lease_ms : PD_WORKER_DEFAULT_KV_LEASE_MS;
  return s->kv_abort_timeout_ms ? s->kv_abort_timeout_ms : PD_WORKER_DEFAULT_KV_ABORT_TIMEOUT_MS;
}

static void pin_arm(pd_wengine_t *e, pd_wengine_pinned_t *pin) {
  pd_heap_item_t it = {.t_ns = pin->expiry, .kind = WE_PIN_EXPIRY};
  it.b = pin->serial;
  it.c = pin->gen;
  pd_wengine_arm_item(e, &it);
}

int pd_wengine_pin_timer_is_live(const pd_wengine_t *e, const pd_heap_item_t *it) {
  const pd_wengine_pinned_t *pin = pd_map_get(&e->pins, it->b);
  return pin && pin->gen == it->c;
}

static void unpin(pd_wengine_t *e, pd_wengine_pinned_t *pin, pd_wengine_pin_t reason, uint64_t now,
                  pd_wact_buf_t *out) {
  assert(e->kv_used >= pin->pages && e->kv_pinned >= pin->pages);
  e->kv_used -= pin->pages;
  e->kv_pinned -= pin->pages;
  pd_wengine_act_id(e, out, PD_WACT_PIN, pin->leg_id, (uint32_t)reason, 0, pin->key);
  if (pd_map_get(&e->pin_keys, pin->key) == pin) pd_map_remove(&e->pin_keys, pin->key);
  pd_map_remove(&e->pins, pin->serial);
  pd_free(e->alloc, pin);
  if (!e->is_crashing) pd_wengine_schedule(e, now, out); /* what waited for those pages */
}

/* The leg's pages move to a pin (the pool still holds them; the leg no longer does). */
static void pin_take(pd_wengine_t *e, pd_wengine_leg_t *p, uint64_t now, pd_wact_buf_t *out) {
  pd_wengine_pinned_t *pin = pd_calloc(e->alloc, 1, sizeof *pin);
  if (!pin) {
    e->err = PD_ERR_NOMEM; /* the pages are freed with the leg instead */
    return;
  }
  pin->serial = ++e->pin_serial;
  pin->key = p->rq.kv_key;
  pin->leg_id = p->id;
  pin->pages = p->kv_pages;
  pin->is_kv_fail = p->fault == (int)PD_FAULT_KV_FAIL;
  pin->expiry = now + pd_wengine_ms(e, expiry_ms(e->spec));
  if (pd_map_put(&e->pins, pin->serial, pin) < 0) {
    pd_free(e->alloc, pin);
    e->err = PD_ERR_NOMEM;
    return;
  }
  /* the first pin of a key keeps it (a later one expires unread) */
  if (!pd_map_get(&e->pin_keys, pin->key) && pd_map_put(&e->pin_keys, pin->key, pin) < 0)
    e->err = PD_ERR_NOMEM;
  p->kv_pages = 0;
  e->kv_pinned += pin->pages;
  pd_wengine_act_id(e, out, PD_WACT_PIN, p->id, PD_WENGINE_PIN_HELD, pin->pages, pin->key);
  pin_arm(e, pin);
}

void pd_wengine_pin_expired(pd_wengine_t *e, uint64_t serial, uint64_t now, pd_wact_buf_t *out) {
  pd_wengine_pinned_t *pin = pd_map_get(&e->pins, serial);
  if (pin && pin->expiry <= now) unpin(e, pin, PD_WENGINE_PIN_EXPIRED, now, out);
}

void pd_wengine_vllm_forward_done(pd_wengine_t *e, pd_wengine_leg_t *p, uint64_t now,
                                  pd_wact_buf_t *out) {
  pd_wengine_set_state(e, p, PD_WORKER_LEG_LAG, out);
  if (p->fault == (int)PD_FAULT_HANG_MID_STREAM) {
    pd_wengine_set_state(e, p, PD_WORKER_LEG_HUNG, out);
    pd_wengine_act(e, out, PD_WACT_FIRED, p, 0, 0, 0);
    return;
  }
  pd_wengine_arm(e, p, WE_RESPOND,
                 now + pd_wengine_ms(e, p->lag_ms + pd_worker_late_error_ms(p->fault, p->fp)));
}

uint32_t pd_wengine_vllm_answer(pd_wengine_t *e, pd_wengine_leg_t *p, uint64_t now,
                                pd_wact_buf_t *out) {
  /* V1.5/V1.6: only a request that ended capped by length keeps its blocks for decode; a
     worker whose one token ends as a stop (kv_params null) never does */
  int is_capped = p->rq.kv_mode == PD_KV_MODE_REMOTE_DECODE && p->rq.max_tokens == 1 &&
                  e->spec->kv_params != PD_KV_PARAMS_NULL;
  if (!is_capped || !p->kv_pages) return 0;
  uint64_t pages = p->kv_pages;
  pin_take(e, p, now, out);
  if (p->kv_pages) return 0; /* could not pin: it answers null params */
  uint32_t blocks = pages > MAX_RENDERED_BLOCKS ? MAX_RENDERED_BLOCKS : (uint32_t)pages;
  return blocks | (e->spec->kv_params == PD_KV_PARAMS_INVALID ? PD_WIRE_NO_RID : 0) /* V1.8 */
         | (e->spec->kv_params == PD_KV_PARAMS_UNKNOWN_ENGINE ? PD_WIRE_UNKNOWN_ENGINE : 0);
}

/* ---------- decode ---------- */

static uint64_t heartbeat_ms(const pd_scenario_worker_t *s) {
  uint64_t lease = s->kv_lease_ms ? s->kv_lease_ms : PD_WORKER_DEFAULT_KV_LEASE_MS;
  uint64_t ms = s->kv_heartbeat_ms ? s->kv_heartbeat_ms : lease / 6;
  return ms ? ms : 1;
}

static int wants_heartbeats(const pd_wengine_t *e, const pd_wengine_leg_t *d) {
  return e->spec->kv_expiry == PD_KV_EXPIRY_LEASE &&
         d->rq.kv_mode == PD_KV_MODE_REMOTE_PREFILL && d->vstage < WV_SETTLED;
}

/* V1.13: decode tracks the request from its arrival, while still queued. */
void pd_wengine_vllm_decode_open(pd_wengine_t *e, pd_wengine_leg_t *d, uint64_t now) {
  d->is_tracked = 1;
  if (wants_heartbeats(e, d))
    pd_wengine_arm(e, d, WE_HEARTBEAT, now + pd_wengine_ms(e, heartbeat_ms(e->spec)));
}

void pd_wengine_vllm_decode_admitted(pd_wengine_t *e, pd_wengine_leg_t *d, uint64_t now,
                                     pd_wact_buf_t *out) {
  pd_wengine_set_state(e, d, PD_WORKER_LEG_WAIT_KV, out); /* WAITING_FOR_REMOTE_KVS (V1.9) */
  if (d->fault == (int)PD_FAULT_NEVER_CONNECT) { /* never reads: its prefill times out */
    pd_wengine_act(e, out, PD_WACT_FIRED, d, 0, 0, 0);
    return;
  }
  if (d->rq.kv_mode == PD_KV_MODE_REMOTE_PREFILL) {
    d->vstage = WV_PULLING;
    pd_wengine_act(e, out, PD_WACT_PULL, d, 0, d->rq.kv_key, 0);
    return;
  }
  /* no params, or invalid ones (V1.8): the prompt is computed here */
  d->vstage = WV_SETTLED;
  pd_wengine_act(e, out, PD_WACT_KV_FROM, d, PD_WENGINE_KV_FROM_LOCAL, 0, 0);
  uint64_t us = e->spec->forward_us_per_token * (d->rq.prompt_tokens ? d->rq.prompt_tokens : 1);
  pd_wengine_arm(e, d, WE_LOCAL_DONE,
                 now + pd_wengine_ms(e, e->spec->forward_ms) + pd_wengine_ms(e, us) / 1000);
}

void pd_wengine_vllm_timer(pd_wengine_t *e, pd_wengine_leg_t *l, int kind, uint64_t now,
                           pd_wact_buf_t *out) {
  switch (kind) {
  case WE_HEARTBEAT:
    if (!wants_heartbeats(e, l)) return;
    pd_wengine_act(e, out, PD_WACT_HEARTBEAT, l, 0, l->rq.kv_key, 0);
    pd_wengine_arm(e, l, WE_HEARTBEAT, now + pd_wengine_ms(e, heartbeat_ms(e->spec)));
    return;
  case WE_READ_DONE:
    if (l->st != PD_WORKER_LEG_WAIT_KV || l->vstage != WV_READING) return;
    l->vstage = WV_SETTLED;
    pd_wengine_act(e, out, PD_WACT_NOTIFY, l, PD_WENGINE_NOTIFY_READ, l->rq.kv_key, 0);
    if (!l->is_stale) pd_wengine_act(e, out, PD_WACT_KV_FROM, l, PD_WENGINE_KV_FROM_READ, 0, 0);
    pd_wengine_kv_arrived(e, l, now, out);
    return;
  case WE_LOCAL_DONE:
    if (l->st == PD_WORKER_LEG_WAIT_KV) pd_wengine_kv_arrived(e, l, now, out);
    return;
  default: return;
  }
}

void pd_wengine_vllm_finish(pd_wengine_t *e, pd_wengine_leg_t *l, pd_wact_buf_t *out) {
  if (e->role != PD_ROLE_DECODE || l->rq.kv_mode != PD_KV_MODE_REMOTE_PREFILL || e->is_crashing)
    return;
  uint32_t kind = 0;
  if (l->is_rejected) kind = PD_WENGINE_NOTIFY_REJECT;                       /* V1.18 */
  else if (l->vstage == WV_NONE && l->is_tracked) kind = PD_WENGINE_NOTIFY_EMPTY; /* V1.17 */
  else if (l->vstage == WV_PULLING || l->vstage == WV_READING) kind = PD_WENGINE_NOTIFY_READ;
  if (kind) pd_wengine_act(e, out, PD_WACT_NOTIFY, l, kind, l->rq.kv_key, 0);
  l->vstage = WV_SETTLED;
}

/* ---------- events ---------- */

int pd_wengine_pull(pd_wengine_t *e, uint64_t now, uint64_t token, uint64_t key,
                    pd_wact_buf_t *out) {
  (void)now;
  pd_wengine_pinned_t *pin = e->is_down ? NULL : pd_map_get(&e->pin_keys, key);
  uint32_t r = e->is_down ? PD_WENGINE_READ_FAILED
               : !pin     ? PD_WENGINE_READ_STALE /* V1.15: "potentially invalid KV blocks" */
               : pin->is_kv_fail ? PD_WENGINE_READ_FAILED
                                 : PD_WENGINE_READ_OK;
  if (pin && pin->is_kv_fail) pd_wengine_act_id(e, out, PD_WACT_FIRED, pin->leg_id, 0, 0, 0);
  pd_wengine_act_id(e, out, PD_WACT_PULLED, pin ? pin->leg_id : 0, r, token, key);
  return step_end(e, out);
}

int pd_wengine_pulled(pd_wengine_t *e, uint64_t now, uint64_t id, int r, pd_wact_buf_t *out) {
  pd_wengine_leg_t *d = pd_map_get(&e->legs, id);
  if (!d) return PD_ERR_NOT_FOUND;
  if (d->st != PD_WORKER_LEG_WAIT_KV || d->vstage != WV_PULLING) return step_end(e, out);
  if (r == PD_WENGINE_READ_FAILED || d->fault == (int)PD_FAULT_KV_FAIL) {
    d->vstage = WV_SETTLED; /* the prefill frees by its timer (V1.22) */
    if (d->fault == (int)PD_FAULT_KV_FAIL) pd_wengine_act(e, out, PD_WACT_FIRED, d, 0, 0, 0);
    pd_wengine_answer_error(e, d, 500, now, out); /* kv_load_failure_policy fail */
    return step_end(e, out);
  }
  d->vstage = WV_READING;
  if (r == PD_WENGINE_READ_STALE) {
    d->is_stale = 1;
    pd_wengine_act(e, out, PD_WACT_KV_FROM, d, PD_WENGINE_KV_FROM_STALE, 0, 0);
  }
  pd_wengine_arm(e, d, WE_READ_DONE, now + pd_wengine_ms(e, e->spec->kv_ms));
  return step_end(e, out);
}

int pd_wengine_notify(pd_wengine_t *e, uint64_t now, uint64_t key, int kind, pd_wact_buf_t *out) {
  pd_wengine_pinned_t *pin = pd_map_get(&e->pin_keys, key);
  pd_wengine_pin_t reason = kind == PD_WENGINE_NOTIFY_EMPTY    ? PD_WENGINE_PIN_EMPTY
                            : kind == PD_WENGINE_NOTIFY_REJECT ? PD_WENGINE_PIN_REJECTED
                                                               : PD_WENGINE_PIN_READ;
  /* abort_after_commit_ignored: the pin is the commit; a receiver's abort (an empty read) is
   * a no-op, only a read or the expiry frees the blocks */
  if (pin && !(reason == PD_WENGINE_PIN_EMPTY && e->spec->abort_after_commit_ignored != 0))
    unpin(e, pin, reason, now, out);
  return step_end(e, out);
}

int pd_wengine_heartbeat(pd_wengine_t *e, uint64_t now, uint64_t key, pd_wact_buf_t *out) {
  pd_wengine_pinned_t *pin = pd_map_get(&e->pin_keys, key);
  if (!pin || e->spec->kv_expiry != PD_KV_EXPIRY_LEASE) return step_end(e, out);
  uint64_t t = now + pd_wengine_ms(e, expiry_ms(e->spec) * 2 / 3); /* V1.13 */
  if (t > pin->expiry) {
    pin->expiry = t;
    pin->gen++;
    pin_arm(e, pin);
  }
  return step_end(e, out);
}

static int by_serial(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* Every pin freed, smallest serial first: the order does not depend on the map's layout. */
void pd_wengine_vllm_crash(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out) {
  size_t n = pd_map_len(&e->pins), k = 0;
  if (!n) return;
  uint64_t *serials = pd_malloc(e->alloc, n * sizeof *serials);
  if (!serials) { /* without memory: one smallest at a time */
    for (void *v; pd_map_len(&e->pins);) {
      pd_wengine_pinned_t *first = NULL;
      for (size_t s = 0; pd_map_next(&e->pins, &s, NULL, &v);)
        if (!first || ((pd_wengine_pinned_t *)v)->serial < first->serial) first = v;
      unpin(e, first, PD_WENGINE_PIN_CRASH, now, out);
    }
    return;
  }
  void *v;
  for (size_t s = 0; k < n && pd_map_next(&e->pins, &s, NULL, &v);)
    serials[k++] = ((pd_wengine_pinned_t *)v)->serial;
  qsort(serials, k, sizeof *serials, by_serial);
  for (size_t i = 0; i < k; i++) unpin(e, pd_map_get(&e->pins, serials[i]), PD_WENGINE_PIN_CRASH, now, out);
  pd_free(e->alloc, serials);
}

void pd_wengine_vllm_free(pd_wengine_t *e) {
  void *v;
  for (size_t s = 0; pd_map_next(&e->pins, &s, NULL, &v);) pd_free(e->alloc, v);
  pd_map_free(&e->pins);
  pd_map_free(&e->pin_keys);
}
