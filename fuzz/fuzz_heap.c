/* Smoke fuzz target for pd_heap: bytes drive a simulator-like loop (pop the least event,
 * push follow-ups at now + delta, drop a share of the queued items with pd_heap_filter) under
 * a small max_items and a failing allocator; every pop must come strictly after the previous
 * one in (t_ns, seq) order. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "pd_err.h"
#include "pd_heap.h"
#include "fuzz_reader.h"

/* Bounds one input's work: a burst pushes at most this many items, and max_items (from the
 * first byte) stays small enough to reach PD_ERR_LIMIT after a few doublings. */
#define FZ_BURST_MAX 16

typedef struct fz_alloc {
  unsigned calls, fail_at;
  int failed;
} fz_alloc_t;

/* Fails the fail_at-th acquisition (1-based; 0 = never). */
static int fz_should_fail(fz_alloc_t *f) {
  if (++f->calls != f->fail_at) return 0;
  f->failed = 1;
  return 1;
}

static void *fz_malloc(size_t n, void *ud) { return fz_should_fail(ud) ? NULL : malloc(n); }

static void *fz_realloc(void *p, size_t n, void *ud) {
  return fz_should_fail(ud) ? NULL : realloc(p, n);
}

static void fz_free(void *p, void *ud) {
  (void)ud;
  free(p);
}

typedef struct fz_state {
  pd_heap_t h;
  fz_alloc_t *fa;
  uint64_t now_ns, last_seq, next_seq, live;
  int has_last;
} fz_state_t;

static void fz_push(fz_state_t *s, uint64_t delta_ns) {
  pd_heap_item_t it = {s->now_ns + delta_ns, 12345, 7, 0, s->next_seq, 0, 0};
  int was_failed = s->fa->failed;
  int rc = pd_heap_push(&s->h, &it);
  if (rc == 0) {
    s->next_seq++;
    s->live++;
  } else if (rc == PD_ERR_LIMIT) {
    FZ_CHECK(s->live == s->h.max_items);
  } else {
    FZ_CHECK(rc == PD_ERR_NOMEM && !was_failed && s->fa->failed);
  }
  FZ_CHECK(pd_heap_len(&s->h) == s->live);
}

static void fz_pop(fz_state_t *s) {
  pd_heap_item_t out;
  const pd_heap_item_t *top = pd_heap_peek(&s->h);
  int got = pd_heap_pop(&s->h, &out);
  if (s->live == 0) {
    FZ_CHECK(got == 0 && top == NULL);
    return;
  }
  FZ_CHECK(got == 1);
  s->live--;
  FZ_CHECK(out.seq == out.b && out.kind == 7);
  FZ_CHECK(out.t_ns >= s->now_ns);
  FZ_CHECK(!s->has_last || out.t_ns > s->now_ns || out.seq > s->last_seq);
  s->now_ns = out.t_ns;
  s->last_seq = out.seq;
  s->has_last = 1;
  FZ_CHECK(pd_heap_len(&s->h) == s->live);
}

static int fz_keep(void *ud, const pd_heap_item_t *it) {
  return it->b % *(const unsigned *)ud != 0;
}

/* Drop the items whose seq is a multiple of 2 + k % 7. */
static void fz_filter(fz_state_t *s, unsigned k) {
  unsigned m = 2 + k % 7;
  uint64_t drop = 0;
  for (size_t i = 0; i < pd_heap_len(&s->h); i++) drop += s->h.v[i].b % m == 0;
  FZ_CHECK(pd_heap_filter(&s->h, fz_keep, &m) == drop);
  s->live -= drop;
  FZ_CHECK(pd_heap_len(&s->h) == s->live);
}

static void fz_op(fz_state_t *s, fz_reader_t *b) {
  uint8_t op = fz_u8(b);
  switch (op & 3) {
  case 0:
  case 1: fz_push(s, fz_u8(b)); break;
  case 2:
    if (op & 4) fz_filter(s, op >> 3);
    else fz_pop(s);
    break;
  default: {
    unsigned k = 1 + (op >> 2) % FZ_BURST_MAX;
    for (unsigned i = 0; i < k; i++) fz_push(s, (uint64_t)(op >> 6)); /* many equal times */
    break;
  }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader_t b = fz_reader(data, size);
  uint8_t lim = fz_u8(&b);
  fz_alloc_t fa = {0, fz_u8(&b), 0};
  pd_alloc_t a = {fz_malloc, fz_realloc, fz_free, &fa};
  fz_state_t s = {.fa = &fa};
  pd_heap_init(&s.h, &a, (size_t)lim * 16 + 1); /* up to 4081: keeps an input cheap */
  while (b.n > 0) fz_op(&s, &b); /* each op consumes at least one byte */
  uint64_t left = s.live;
  for (uint64_t i = 0; i <= left; i++) fz_pop(&s);
  FZ_CHECK(s.live == 0 && pd_heap_len(&s.h) == 0);
  pd_heap_free(&s.h);
  return 0;
}
