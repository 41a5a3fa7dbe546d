#include "pd_heap.h"

#include "pd_err.h"

/* Default bound on queued events: 64 Mi items (2.5 GiB of 40-byte items) is far past any
 * scenario we run and stops a runaway event loop before it exhausts memory. */
#define PD_HEAP_DEFAULT_MAX ((size_t)1 << 26)
/* First allocation: one page-ish worth of items, so small runs grow at most a few times. */
#define PD_HEAP_MIN_CAP ((size_t)64)

static inline int heap_less(const pd_heap_item_t *x, const pd_heap_item_t *y) {
  if (x->t_ns != y->t_ns) return x->t_ns < y->t_ns;
  return x->tie != y->tie ? x->tie < y->tie : x->seq < y->seq;
}

void pd_heap_init(pd_heap_t *h, const pd_alloc_t *alloc, size_t max_items) {
  h->alloc = alloc;
  h->v = NULL;
  h->n = 0;
  h->cap = 0;
  h->next_seq = 0;
  h->max_items = max_items ? max_items : PD_HEAP_DEFAULT_MAX;
}

void pd_heap_free(pd_heap_t *h) {
  pd_free(h->alloc, h->v);
  h->v = NULL;
  h->n = 0;
  h->cap = 0;
}

/* Doubles capacity (capped at max_items). Cold path, kept out of line. */
static int heap_grow(pd_heap_t *h) {
  size_t cap = h->cap ? h->cap * 2 : PD_HEAP_MIN_CAP;
  if (cap < h->cap || cap > h->max_items) cap = h->max_items;
  if (cap > (size_t)-1 / sizeof(pd_heap_item_t)) return PD_ERR_NOMEM;
  pd_heap_item_t *v = pd_realloc(h->alloc, h->v, cap * sizeof(pd_heap_item_t));
  if (!v) return PD_ERR_NOMEM;
  h->v = v;
  h->cap = cap;
  return 0;
}

int pd_heap_push(pd_heap_t *h, const pd_heap_item_t *it) {
  if (h->n >= h->max_items) return PD_ERR_LIMIT;
  if (h->n == h->cap) {
    int rc = heap_grow(h);
    if (rc) return rc;
  }
  pd_heap_item_t *v = h->v;
  pd_heap_item_t x = *it;
  x.seq = h->next_seq++;
  size_t i = h->n++;
  /* The new item carries the largest seq ever assigned, so it precedes a parent only on a
   * smaller (time, tie). Parents move down into the hole. */
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!heap_less(&x, &v[p])) break;
    v[i] = v[p];
    i = p;
  }
  v[i] = x;
  return 0;
}

int pd_heap_pop(pd_heap_t *h, pd_heap_item_t *out) {
  if (h->n == 0) return 0;
  pd_heap_item_t *v = h->v;
  if (out) *out = v[0];
  size_t n = --h->n;
  if (n == 0) return 1;
  /* Sift the last item down from the root through a hole: smaller children move up. */
  const pd_heap_item_t last = v[n];
  size_t i = 0;
  size_t c = 1;
  while (c < n) {
    if (c + 1 < n && heap_less(&v[c + 1], &v[c])) c++;
    if (!heap_less(&v[c], &last)) break;
    v[i] = v[c];
    i = c;
    c = 2 * i + 1;
  }
  v[i] = last;
  return 1;
}

const pd_heap_item_t *pd_heap_peek(const pd_heap_t *h) { return h->n ? &h->v[0] : NULL; }

size_t pd_heap_len(const pd_heap_t *h) { return h->n; }
