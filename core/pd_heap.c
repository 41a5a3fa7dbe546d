#include "pd_heap.h"

#include <assert.h>

#include "pd_err.h"

/* Default bound on queued events: 64 Mi items (3 GiB of 48-byte items) is far past any
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
  h->track = NULL;
}

void pd_heap_set_track(pd_heap_t *h, pd_heap_track_fn track) {
  assert(h->n == 0);
  h->track = track;
}

void pd_heap_free(pd_heap_t *h) {
  pd_free(h->alloc, h->v);
  h->v = NULL;
  h->n = 0;
  h->cap = 0;
}

/* Grows the array to cap items (cap > h->cap, <= max_items). Cold path, kept out of line. */
static int heap_resize(pd_heap_t *h, size_t cap) {
  if (cap > (size_t)-1 / sizeof(pd_heap_item_t)) return PD_ERR_NOMEM;
  pd_heap_item_t *v = pd_realloc(h->alloc, h->v, cap * sizeof(pd_heap_item_t));
  if (!v) return PD_ERR_NOMEM;
  h->v = v;
  h->cap = cap;
  return 0;
}

/* Doubles capacity (capped at max_items). */
static int heap_grow(pd_heap_t *h) {
  size_t cap = h->cap ? h->cap * 2 : PD_HEAP_MIN_CAP;
  if (cap < h->cap || cap > h->max_items) cap = h->max_items;
  return heap_resize(h, cap);
}

int pd_heap_reserve(pd_heap_t *h, size_t n) {
  if (n > h->max_items) return PD_ERR_LIMIT;
  if (n <= h->cap) return 0;
  /* one allocation; doubling when that is enough, so a reserve before each push is amortised */
  size_t cap = h->cap ? h->cap * 2 : PD_HEAP_MIN_CAP;
  if (cap < n || cap > h->max_items) cap = n;
  return heap_resize(h, cap);
}

/* Move x up from the hole at i: parents that x precedes move down into the hole. is_tracked
 * is a constant at each call, so the plain (simulator) heap pays nothing for tracking. */
static inline void sift_up(pd_heap_t *h, size_t i, const pd_heap_item_t *x, int is_tracked) {
  pd_heap_item_t *v = h->v;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!heap_less(x, &v[p])) break;
    v[i] = v[p];
    if (is_tracked) h->track(&v[i], i);
    i = p;
  }
  v[i] = *x;
  if (is_tracked) h->track(&v[i], i);
}

/* Move x down from the hole at i among the first n items: smaller children move up. */
static inline void sift_down(pd_heap_t *h, size_t i, size_t n, const pd_heap_item_t *x,
                             int is_tracked) {
  pd_heap_item_t *v = h->v;
  size_t c = 2 * i + 1;
  while (c < n) {
    if (c + 1 < n && heap_less(&v[c + 1], &v[c])) c++;
    if (!heap_less(&v[c], x)) break;
    v[i] = v[c];
    if (is_tracked) h->track(&v[i], i);
    i = c;
    c = 2 * i + 1;
  }
  v[i] = *x;
  if (is_tracked) h->track(&v[i], i);
}

int pd_heap_push(pd_heap_t *h, const pd_heap_item_t *it) {
  if (h->n >= h->max_items) return PD_ERR_LIMIT;
  if (h->n == h->cap) {
    int rc = heap_grow(h);
    if (rc) return rc;
  }
  pd_heap_item_t x = *it;
  x.seq = h->next_seq++;
  /* The new item carries the largest seq ever assigned, so it precedes a parent only on a
   * smaller (time, tie). */
  size_t i = h->n++;
  if (h->track)
    sift_up(h, i, &x, 1);
  else
    sift_up(h, i, &x, 0);
  return 0;
}

size_t pd_heap_filter(pd_heap_t *h, pd_heap_keep_fn keep, void *ud) {
  size_t n = 0;
  for (size_t i = 0; i < h->n; i++) {
    if (keep(ud, &h->v[i])) h->v[n++] = h->v[i];
    else if (h->track) h->track(&h->v[i], PD_HEAP_NONE);
  }
  size_t dropped = h->n - n;
  h->n = n;
  /* Floyd's heapify; (t_ns, tie, seq) is a total order (seq is unique), so the pop order of
   * the survivors does not depend on where they sit */
  for (size_t i = n / 2; i-- > 0;) {
    const pd_heap_item_t x = h->v[i];
    sift_down(h, i, n, &x, 0);
  }
  for (size_t i = 0; h->track && i < n; i++) h->track(&h->v[i], i);
  return dropped;
}

int pd_heap_pop(pd_heap_t *h, pd_heap_item_t *out) {
  if (h->n == 0) return 0;
  pd_heap_remove(h, 0, out);
  return 1;
}

/* Fill the hole at i (among n items) with x, which does not precede the hole's parent:
 * bottom-up (Wegener): walk the hole down along the lesser children to a leaf, one comparison
 * per level, then let x climb back from there. x is usually a leaf's item (the last one), so
 * it climbs a level or two: about half the comparisons of sifting x down from i. The pop order
 * is the same either way: (t_ns, tie, seq) is a total order. */
static inline void fill_down(pd_heap_t *h, size_t i, size_t n, const pd_heap_item_t *x,
                             int is_tracked) {
  pd_heap_item_t *v = h->v;
  size_t c = 2 * i + 1;
  while (c < n) {
    if (c + 1 < n && heap_less(&v[c + 1], &v[c])) c++;
    v[i] = v[c];
    if (is_tracked) h->track(&v[i], i);
    i = c;
    c = 2 * i + 1;
  }
  sift_up(h, i, x, is_tracked);
}

void pd_heap_remove(pd_heap_t *h, size_t index, pd_heap_item_t *out) {
  assert(index < h->n);
  pd_heap_item_t *v = h->v;
  if (h->track) h->track(&v[index], PD_HEAP_NONE);
  if (out) *out = v[index];
  size_t n = --h->n;
  if (index == n) return;
  /* The last item fills the hole: up if it precedes the hole's parent, else down. */
  const pd_heap_item_t last = v[n];
  int is_up = index > 0 && heap_less(&last, &v[(index - 1) / 2]);
  if (h->track) {
    if (is_up)
      sift_up(h, index, &last, 1);
    else
      fill_down(h, index, n, &last, 1);
  } else if (is_up) {
    sift_up(h, index, &last, 0);
  } else {
    fill_down(h, index, n, &last, 0);
  }
}

void pd_heap_rekey(pd_heap_t *h, size_t index, uint64_t t_ns) {
  assert(index < h->n);
  pd_heap_item_t x = h->v[index];
  const pd_heap_item_t old = x;
  x.t_ns = t_ns;
  x.seq = h->next_seq++; /* as a push would give it: it sorts as if removed and pushed again */
  if (heap_less(&old, &x)) { /* later: down from here (its old place precedes its children) */
    if (h->track)
      sift_down(h, index, h->n, &x, 1);
    else
      sift_down(h, index, h->n, &x, 0);
  } else if (h->track) {
    sift_up(h, index, &x, 1);
  } else {
    sift_up(h, index, &x, 0);
  }
}

const pd_heap_item_t *pd_heap_peek(const pd_heap_t *h) { return h->n ? &h->v[0] : NULL; }

size_t pd_heap_len(const pd_heap_t *h) { return h->n; }
