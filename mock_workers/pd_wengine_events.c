/* The worker engine's entry points (pd_wengine.h): life cycle, events, deadlines. */
#include <string.h>

#include "pd_wengine_int.h"
#include "pd_worker_shared.h"
#include "pd_worker_step.h"

pd_wengine_t *pd_wengine_new(const pd_wengine_config_t *cfg, const pd_alloc_t *alloc) {
  if (!alloc) alloc = pd_alloc_default();
  pd_wengine_t *e = pd_calloc(alloc, 1, sizeof *e);
  if (!e) return NULL;
  e->cfg = *cfg;
  e->spec = cfg->spec;
  e->role = cfg->spec->role;
  e->alloc = alloc;
  pd_map_init(&e->legs, alloc, 0);
  pd_map_init(&e->rooms, alloc, 0);
  pd_map_init(&e->regs, alloc, 0);
  pd_map_init(&e->tokens, alloc, 0);
  pd_heap_init(&e->timers, alloc, 0);
  pd_map_init(&e->pins, alloc, 0);
  pd_map_init(&e->pin_keys, alloc, 0);
  e->is_vllm = cfg->spec->protocol == PD_PROTOCOL_VLLM;
  e->page_tokens = cfg->spec->page_size ? cfg->spec->page_size : 1;
  e->max_running = cfg->spec->max_running ? cfg->spec->max_running : UINT32_MAX;
  e->kv_total = cfg->spec->kv_tokens ? cfg->spec->kv_tokens / e->page_tokens : UINT64_MAX / 4;
  e->reserve_pages = pd_wengine_pages(e, cfg->spec->reserved_decode_tokens);
  uint32_t dp = cfg->spec->dp_size; /* R-CAP-RANK (S2.16): SGLang's ranks, each its own share */
  e->ranks = !e->is_vllm && cfg->spec->capacity_per_rank != 0 && dp > 1
                 ? (dp < PD_WENGINE_MAX_RANKS ? dp : PD_WENGINE_MAX_RANKS)
                 : 1;
  e->rank_max_running = e->max_running / e->ranks ? e->max_running / e->ranks : 1;
  e->rank_kv_total = e->kv_total / e->ranks ? e->kv_total / e->ranks : 1;
  return e;
}

void pd_wengine_del(pd_wengine_t *e) {
  if (!e) return;
  void *v;
  for (size_t s = 0; pd_map_next(&e->legs, &s, NULL, &v);) pd_free(e->alloc, v);
  for (size_t s = 0; pd_map_next(&e->tokens, &s, NULL, &v);) pd_free(e->alloc, v);
  pd_map_free(&e->legs);
  pd_map_free(&e->rooms);
  pd_map_free(&e->regs);
  pd_map_free(&e->tokens);
  pd_heap_free(&e->timers);
  pd_wengine_vllm_free(e);
  pd_free(e->alloc, e);
}

static int step_end(pd_wengine_t *e, pd_wact_buf_t *out) {
  int err = e->err ? e->err : out->err;
  e->err = 0;
  return err;
}

int pd_wengine_open(pd_wengine_t *e, uint64_t now, uint64_t id, const pd_wengine_req_t *req,
                    pd_wact_buf_t *out) {
  if (pd_map_get(&e->legs, id)) return PD_ERR_INVAL;
  pd_wengine_leg_t *l = pd_calloc(e->alloc, 1, sizeof *l);
  if (!l) return PD_ERR_NOMEM;
  l->id = id;
  l->rq = *req;
  l->fault = -1;
  l->st = PD_WORKER_LEG_NEW;
  l->is_conn_open = 1;
  if (pd_map_put(&e->legs, id, l) < 0) {
    pd_free(e->alloc, l);
    return PD_ERR_NOMEM;
  }
  pd_wengine_open_leg(e, l, now, out);
  return step_end(e, out);
}

int pd_wengine_close(pd_wengine_t *e, uint64_t now, uint64_t id, pd_wact_buf_t *out) {
  pd_wengine_leg_t *l = pd_map_get(&e->legs, id);
  if (!l) return PD_ERR_NOT_FOUND;
  if (l->is_path_cut) return step_end(e, out); /* a cut path: the close never reaches it */
  l->is_conn_open = 0;
  if (pd_wengine_ignores_abort(e, l)) return step_end(e, out); /* past commit: a no-op */
  if (l->st == PD_WORKER_LEG_BOOTSTRAP) { /* still queued in bootstrap: a disconnect does not
                                             remove it; only /abort_request or the timeout does */
    l->is_stalled_closed = 1;
    return step_end(e, out);
  }
  /* SGLang aborts a request whose client left */
  pd_wengine_finish(e, l, pd_worker_interrupted_truth(l->st, l->drip_ms), now, out);
  return step_end(e, out);
}

int pd_wengine_abort(pd_wengine_t *e, uint64_t now, uint64_t id, pd_wact_buf_t *out) {
  pd_wengine_leg_t *l = pd_map_get(&e->legs, id);
  if (!l) return PD_ERR_NOT_FOUND;
  if (pd_wengine_ignores_abort(e, l)) return step_end(e, out); /* 200, nothing done (S2.10) */
  pd_wengine_abort_leg(e, l, now, out);
  return step_end(e, out);
}

int pd_wengine_register(pd_wengine_t *e, uint64_t now, uint64_t token, uint64_t room,
                        uint64_t hash, uint32_t flags, pd_wact_buf_t *out) {
  if (pd_map_get(&e->tokens, token)) return PD_ERR_INVAL;
  if (e->is_down) return step_end(e, out); /* nobody listens: the decode waits (S5.5) */
  pd_wengine_reg_t *r = pd_calloc(e->alloc, 1, sizeof *r);
  if (!r) return PD_ERR_NOMEM;
  *r = (pd_wengine_reg_t){token, room, hash, flags, 0};
  if (pd_map_put(&e->tokens, token, r) < 0) {
    pd_free(e->alloc, r);
    return PD_ERR_NOMEM;
  }
  pd_wengine_leg_t *p = pd_map_get(&e->rooms, room);
  if (p && pd_wengine_can_pair(e, p, r)) {
    pd_wengine_pair_with(e, p, r, now, out);
    return step_end(e, out);
  }
  /* the first decode to register a room keeps it (a second one never pairs: a collision) */
  if (pd_map_get(&e->regs, room)) e->collisions++;
  else if (pd_map_put(&e->regs, room, r) == 0) r->is_pending = 1;
  return step_end(e, out);
}

int pd_wengine_unregister(pd_wengine_t *e, uint64_t now, uint64_t token, pd_wact_buf_t *out) {
  (void)now;
  pd_wengine_reg_t *r = pd_map_get(&e->tokens, token);
  if (!r) return PD_ERR_NOT_FOUND;
  if (!r->is_pending) { /* paired: the prefill leg finds out at its transfer (S5.3) */
    void *v;
    for (size_t s = 0; pd_map_next(&e->legs, &s, NULL, &v);) {
      pd_wengine_leg_t *p = v;
      if (p->has_partner && p->partner == token) p->is_partner_lost = 1;
    }
  }
  if (r->is_pending && pd_map_get(&e->regs, r->room) == r) pd_map_remove(&e->regs, r->room);
  pd_map_remove(&e->tokens, token);
  pd_free(e->alloc, r);
  return step_end(e, out);
}

int pd_wengine_paired(pd_wengine_t *e, uint64_t now, uint64_t id, pd_wact_buf_t *out) {
  (void)now;
  pd_wengine_leg_t *l = pd_map_get(&e->legs, id);
  if (!l) return PD_ERR_NOT_FOUND;
  l->is_paired = 1;
  return step_end(e, out);
}

int pd_wengine_kv(pd_wengine_t *e, uint64_t now, uint64_t id, int ok, pd_wact_buf_t *out) {
  pd_wengine_leg_t *d = pd_map_get(&e->legs, id);
  if (!d) return PD_ERR_NOT_FOUND;
  if (d->st != PD_WORKER_LEG_WAIT_KV) return step_end(e, out);
  d->is_connected = 0; /* the link has done its work */
  if (ok) {
    pd_wengine_kv_arrived(e, d, now, out);
  } else {
    if (d->fault == (int)PD_FAULT_KV_FAIL) pd_wengine_act(e, out, PD_WACT_FIRED, d, 0, 0, 0);
    pd_wengine_answer_error(e, d, 500, now, out); /* KVPoll.Failed */
  }
  return step_end(e, out);
}

int pd_wengine_boot_lost(pd_wengine_t *e, uint64_t now, uint64_t id, pd_wact_buf_t *out) {
  pd_wengine_leg_t *d = pd_map_get(&e->legs, id);
  if (!d) return PD_ERR_NOT_FOUND;
  d->is_connected = 0;
  if (d->st == PD_WORKER_LEG_WAIT_KV && !d->is_paired)
    pd_wengine_arm(e, d, WE_RECONNECT, now + e->cfg.reconnect_ms * 1000000ull);
  return step_end(e, out);
}

int pd_wengine_crash(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out) {
  e->is_down = 1;
  e->is_crashing = 1;
  void *v;
  /* finishing a leg removes it from the map, so each round takes the smallest id left: the
   * order does not depend on the map's layout (a scan per leg: quadratic in the legs live at
   * the crash, a few hundred in the library's crash scenarios) */
  for (;;) {
    pd_wengine_leg_t *first = NULL;
    for (size_t s = 0; pd_map_next(&e->legs, &s, NULL, &v);) {
      pd_wengine_leg_t *l = v;
      if (!first || l->id < first->id) first = l;
    }
    if (!first) break;
    if (first->is_conn_open) pd_wengine_cut(e, first, PD_WENGINE_END_RESET, PD_TRUTH_FAILED, now, out);
    else pd_wengine_finish(e, first, PD_TRUTH_FAILED, now, out);
  }
  for (size_t s = 0; pd_map_next(&e->tokens, &s, NULL, &v);) pd_free(e->alloc, v);
  pd_map_free(&e->tokens);
  pd_map_free(&e->regs);
  pd_map_init(&e->tokens, e->alloc, 0);
  pd_map_init(&e->regs, e->alloc, 0);
  pd_wengine_vllm_crash(e, now, out); /* the process's memory is gone, pinned KV too */
  e->is_crashing = 0;
  e->is_forwarding = 0;
  return step_end(e, out);
}

int pd_wengine_restart(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out) {
  (void)now;
  e->is_down = 0;
  return step_end(e, out);
}

uint64_t pd_wengine_next_expiry(const pd_wengine_t *e) {
  const pd_heap_item_t *it = pd_heap_peek(&e->timers);
  return it ? it->t_ns : UINT64_MAX;
}

int pd_wengine_expire(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out) {
  for (uint32_t guard = 0; guard < 1u << 20; guard++) {
    const pd_heap_item_t *top = pd_heap_peek(&e->timers);
    if (!top || top->t_ns > now) break;
    pd_heap_item_t it;
    pd_heap_pop(&e->timers, &it);
    if (it.kind == WE_FORWARD_END) {
      pd_wengine_forward_end(e, now, it.c, out);
      continue;
    }
    if (!pd_wengine_timer_is_live(e, &it)) continue; /* moot */
    if (it.kind == WE_PIN_EXPIRY) pd_wengine_pin_expired(e, it.b, now, out);
    else pd_wengine_step_timer(e, pd_map_get(&e->legs, it.b), (int)it.kind, now, out);
  }
  return step_end(e, out);
}

void pd_wengine_stats(const pd_wengine_t *e, pd_wengine_stats_t *st) {
  memset(st, 0, sizeof *st);
  st->legs = (uint32_t)pd_map_len(&e->legs);
  st->running = e->running;
  st->max_running = e->max_running;
  st->queued = e->waiting.n + e->prealloc.n + (uint32_t)pd_map_len(&e->rooms);
  st->inflight = e->batch.n;
  st->kv_used_pages = e->kv_used;
  st->kv_total_pages = e->kv_total;
  st->is_down = (uint32_t)e->is_down;
  st->collisions = e->collisions;
  st->registrations = (uint32_t)pd_map_len(&e->regs);
  st->pinned = (uint32_t)pd_map_len(&e->pins);
  st->kv_pinned_pages = e->kv_pinned;
}

void pd_wengine_reconfigure(pd_wengine_t *e, const pd_wengine_config_t *cfg) {
  e->cfg = *cfg;
  e->spec = cfg->spec; /* its protocol stays the engine's */
}

int pd_wengine_is_down(const pd_wengine_t *e) { return e->is_down; }

uint32_t pd_wengine_room(const pd_wengine_t *e) {
  return e->running >= e->max_running ? 0 : e->max_running - e->running;
}

pd_worker_leg_state_t pd_wengine_leg_state(const pd_wengine_t *e, uint64_t id) {
  const pd_wengine_leg_t *l = pd_map_get(&e->legs, id);
  return l ? l->st : PD_WORKER_LEG_DONE;
}
