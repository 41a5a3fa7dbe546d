/* The worker engine's capacity (docs/capacity.md): a running-request limit, a KV pool in
 * pages, decode's prealloc queue (destination first: decode reserves the prompt's pages
 * before it tells prefill, FIFO with head-of-line blocking, S2.4-S2.6) and prefill's waiting
 * queue served by one forward pass at a time over a batch (S2.2-S2.3). With capacity_per_rank
 * each DP rank has its own share of the slots and the pool, and its own head of line
 * (R-CAP-RANK, S2.16); the ranks' forward passes run in step, as one. */
#include <assert.h>

#include "pd_wengine_int.h"

uint64_t pd_wengine_pages(const pd_wengine_t *e, uint64_t tokens) {
  return (tokens + e->page_tokens - 1) / e->page_tokens;
}

void pd_wqueue_push(pd_wengine_queue_t *q, pd_wengine_leg_t *l) {
  assert(!l->queue);
  l->queue = q;
  l->qnext = NULL;
  l->qprev = q->tail;
  if (q->tail) q->tail->qnext = l;
  else q->head = l;
  q->tail = l;
  q->n++;
}

void pd_wqueue_remove(pd_wengine_leg_t *l) {
  pd_wengine_queue_t *q = l->queue;
  if (!q) return;
  if (l->qprev) l->qprev->qnext = l->qnext;
  else q->head = l->qnext;
  if (l->qnext) l->qnext->qprev = l->qprev;
  else q->tail = l->qprev;
  q->n--;
  l->queue = NULL;
  l->qprev = l->qnext = NULL;
}

void pd_wengine_set_kv(pd_wengine_t *e, pd_wengine_leg_t *l, uint64_t pages, pd_wact_buf_t *out) {
  if (pages == l->kv_pages) return;
  assert(e->kv_used >= l->kv_pages);
  e->kv_used = e->kv_used - l->kv_pages + pages;
  if (e->ranks > 1) e->rank_kv_used[l->rank] = e->rank_kv_used[l->rank] - l->kv_pages + pages;
  l->kv_pages = pages;
  pd_wengine_act(e, out, PD_WACT_KV, l, (uint32_t)(pages > UINT32_MAX ? UINT32_MAX : pages),
                 pages, 0);
}

void pd_wengine_set_running(pd_wengine_t *e, pd_wengine_leg_t *l, int on, pd_wact_buf_t *out) {
  if (l->is_running == on) return;
  l->is_running = on;
  uint32_t *rank = e->ranks > 1 ? &e->rank_running[l->rank] : NULL;
  if (on) {
    e->running++;
    if (rank) ++*rank;
  } else {
    assert(e->running > 0 && (!rank || *rank > 0));
    e->running--;
    if (rank) --*rank;
  }
  pd_wengine_act(e, out, PD_WACT_RUNNING, l, (uint32_t)on, 0, 0);
}

static uint64_t prompt_pages(const pd_wengine_t *e, const pd_wengine_leg_t *l) {
  return pd_wengine_pages(e, l->rq.prompt_tokens ? l->rq.prompt_tokens : 1);
}

int pd_wengine_too_large(const pd_wengine_t *e, const pd_wengine_leg_t *l) {
  uint64_t need = prompt_pages(e, l) + (e->role == PD_ROLE_DECODE ? e->reserve_pages : 0);
  return need > (e->ranks > 1 ? e->rank_kv_total : e->kv_total); /* R-CAP-RANK: its rank's */
}

/* R-CAP-RANK: l's rank has a running slot and room for `pages` more in its share of the pool
 * (always, when the ranks share one pool). */
static int rank_fits(const pd_wengine_t *e, const pd_wengine_leg_t *l, uint64_t pages) {
  return e->ranks <= 1 || (e->rank_running[l->rank] < e->rank_max_running &&
                           e->rank_kv_used[l->rank] + pages <= e->rank_kv_total);
}

int pd_wengine_is_rank_bound(const pd_wengine_t *e, uint64_t id) {
  const pd_wengine_leg_t *l = pd_map_get(&e->legs, id);
  if (!l || e->ranks <= 1 || (l->queue != &e->waiting && l->queue != &e->prealloc)) return 0;
  for (uint32_t r = 0; r < e->ranks; r++)
    if (r != l->rank && e->rank_running[r] < e->rank_max_running) return 1;
  return 0;
}

/* Every rank's bit: a scan of a queue is over when each rank's head is blocked. */
static uint64_t all_ranks(const pd_wengine_t *e) {
  return e->ranks >= 64 ? ~0ull : (1ull << e->ranks) - 1;
}

/* Decode admission (S2.5, simplified): the prompt's pages plus one decode reserve for every
 * admitted request, this one included, must fit the pool; and a running slot (S2.6). */
static int decode_fits(const pd_wengine_t *e, const pd_wengine_leg_t *d) {
  if (e->running >= e->max_running) return 0;
  uint64_t need = prompt_pages(e, d) + e->reserve_pages * ((uint64_t)e->running + 1);
  uint64_t rneed = prompt_pages(e, d) + e->reserve_pages * ((uint64_t)e->rank_running[d->rank] + 1);
  return e->kv_used + need <= e->kv_total && rank_fits(e, d, rneed);
}

/* FIFO: the head blocks; per rank with capacity_per_rank (a rank's head blocks only the later
 * requests of its rank). The queue is scanned afresh after each admission, which may change it. */
static void admit_decodes(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out) {
  for (;;) {
    pd_wengine_leg_t *d = e->prealloc.head;
    uint64_t blocked = 0;
    while (d && ((blocked >> d->rank & 1) || !decode_fits(e, d))) {
      blocked |= 1ull << d->rank;
      d = blocked == all_ranks(e) ? NULL : d->qnext;
    }
    if (!d) return;
    pd_wqueue_remove(d);
    pd_wengine_set_running(e, d, 1, out);
    pd_wengine_set_kv(e, d, prompt_pages(e, d), out);
    pd_wengine_decode_admitted(e, d, now, out);
  }
}

/* One forward pass over the waiting requests that fit: running slots, their prompts' pages,
 * max_prefill_tokens (the first always goes), in arrival order (the head blocks; per rank with
 * capacity_per_rank, R-CAP-RANK). */
static void start_forward(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out) {
  uint64_t tokens = 0, rank_tokens[PD_WENGINE_MAX_RANKS] = {0}, blocked = 0;
  for (pd_wengine_leg_t *p = e->waiting.head, *next; p && blocked != all_ranks(e); p = next) {
    next = p->qnext;
    uint64_t t = p->rq.prompt_tokens ? p->rq.prompt_tokens : 1, *rt = &rank_tokens[p->rank];
    int fits = !(blocked >> p->rank & 1) && e->running < e->max_running &&
               e->kv_used + prompt_pages(e, p) <= e->kv_total &&
               rank_fits(e, p, prompt_pages(e, p)) &&
               !(*rt && *rt + t > e->spec->max_prefill_tokens); /* each rank's first goes */
    if (!fits) { /* the head of its rank's line blocks the rest of that rank */
      blocked |= 1ull << p->rank;
      continue;
    }
    *rt += t;
    if (*rt > tokens) tokens = *rt; /* the ranks run in step: the longest batch sets the time */
    pd_wqueue_remove(p);
    pd_wqueue_push(&e->batch, p);
    pd_wengine_set_running(e, p, 1, out);
    pd_wengine_set_kv(e, p, prompt_pages(e, p), out);
    pd_wengine_set_state(e, p, PD_WORKER_LEG_FORWARD, out);
  }
  if (!e->batch.n) return;
  e->is_forwarding = 1;
  e->forward_no++;
  uint64_t us = e->spec->forward_us_per_token * tokens;
  pd_wengine_arm(e, NULL, WE_FORWARD_END,
                 now + pd_wengine_ms(e, e->spec->forward_ms) + pd_wengine_ms(e, us) / 1000);
}

void pd_wengine_schedule(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out) {
  if (e->is_down) return;
  if (e->role == PD_ROLE_DECODE) admit_decodes(e, now, out);
  else if (!e->is_forwarding) start_forward(e, now, out);
}

void pd_wengine_forward_end(pd_wengine_t *e, uint64_t now, uint64_t no, pd_wact_buf_t *out) {
  if (!e->is_forwarding || no != e->forward_no) return;
  e->is_forwarding = 0;
  while (e->batch.head) {
    pd_wengine_leg_t *p = e->batch.head;
    pd_wqueue_remove(p);
    pd_wengine_forward_done(e, p, now, out);
  }
  pd_wengine_schedule(e, now, out);
}

void pd_wengine_release(pd_wengine_t *e, pd_wengine_leg_t *l, pd_wact_buf_t *out) {
  pd_wqueue_remove(l);
  pd_wengine_set_kv(e, l, 0, out);
  pd_wengine_set_running(e, l, 0, out);
}
