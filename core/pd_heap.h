/* pd_heap: a binary min-heap keyed by (time, tie, insertion sequence): equal times pop by the
 * caller's tie key, then in insertion order, so a run is deterministic. With tie 0
 * everywhere, equal times pop in insertion order. O(log n). The simulator's event queue uses
 * it plainly; the core's deadlines (core/pd_feed.c) use it indexed: a tracking callback tells
 * the user of the heap where each item sits, so an item can be removed before it is due. */
#ifndef PD_HEAP_H
#define PD_HEAP_H
#include <stddef.h>
#include <stdint.h>

#include "pd_alloc.h"

/* The index reported for an item that left the heap (popped or removed). */
#define PD_HEAP_NONE SIZE_MAX

typedef struct pd_heap_item {
  uint64_t t_ns;
  uint64_t seq; /* assigned by pd_heap_push */
  uint32_t kind;
  uint32_t a;
  uint64_t b;
  uint64_t c;
  uint64_t tie; /* orders equal times before seq (0 for all: insertion order) */
} pd_heap_item_t;

/* Called with an item and its new index each time it lands somewhere in the heap, and with
 * PD_HEAP_NONE when it leaves it. */
typedef void (*pd_heap_track_fn)(const pd_heap_item_t *it, size_t index);

typedef struct pd_heap {
  const pd_alloc_t *alloc;
  pd_heap_item_t *v;
  size_t n, cap;
  uint64_t next_seq;
  size_t max_items;         /* named limit; push beyond it fails with PD_ERR_LIMIT */
  pd_heap_track_fn track;   /* NULL: not indexed */
} pd_heap_t;

/* max_items: the bound on queued items (0 = 1<<26). */
void pd_heap_init(pd_heap_t *h, const pd_alloc_t *alloc, size_t max_items);
/* Make the heap indexed (before the first push): track is told every move. */
void pd_heap_set_track(pd_heap_t *h, pd_heap_track_fn track);
void pd_heap_free(pd_heap_t *h);
/* Make room for n items, so that pushes up to n items cannot fail. 0, PD_ERR_NOMEM or
 * PD_ERR_LIMIT (n > max_items). */
int pd_heap_reserve(pd_heap_t *h, size_t n);
/* Push a copy of *it (its seq is overwritten). 0, PD_ERR_NOMEM or PD_ERR_LIMIT. */
int pd_heap_push(pd_heap_t *h, const pd_heap_item_t *it);
/* Pop the least (t_ns, tie, seq). Returns 1 and fills *out (if out), or 0 when empty. */
int pd_heap_pop(pd_heap_t *h, pd_heap_item_t *out);
/* Remove the item at index (as reported by the tracking callback); fills *out if out. The
 * order of the others is unchanged. index must be < pd_heap_len. */
void pd_heap_remove(pd_heap_t *h, size_t index, pd_heap_item_t *out);
/* Give the item at index the deadline t_ns and a new seq, as pd_heap_remove and pd_heap_push
 * of it would (the same pop order after), in one sift instead of two. */
void pd_heap_rekey(pd_heap_t *h, size_t index, uint64_t t_ns);
/* Keep the items keep(ud, item) returns nonzero for and drop the others (a tracked heap is
 * told: PD_HEAP_NONE for each dropped, then every survivor's new index). The survivors pop in
 * the same order as before. O(n). Returns how many were dropped. */
typedef int (*pd_heap_keep_fn)(void *ud, const pd_heap_item_t *it);
size_t pd_heap_filter(pd_heap_t *h, pd_heap_keep_fn keep, void *ud);
/* Least item without removing it; NULL when empty. */
const pd_heap_item_t *pd_heap_peek(const pd_heap_t *h);
size_t pd_heap_len(const pd_heap_t *h);

#endif
