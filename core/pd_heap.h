/* pd_heap: the simulator's event queue. A binary min-heap keyed by (time, tie, insertion
 * sequence): equal times pop by the caller's tie key, then in insertion order, so a run is
 * deterministic. With tie 0 everywhere, equal times pop in insertion order. O(log n). */
#ifndef PD_HEAP_H
#define PD_HEAP_H
#include <stddef.h>
#include <stdint.h>

#include "pd_alloc.h"

typedef struct pd_heap_item {
  uint64_t t_ns;
  uint64_t seq; /* assigned by pd_heap_push */
  uint32_t kind;
  uint32_t a;
  uint64_t b;
  uint64_t c;
  uint64_t tie; /* orders equal times before seq (0 for all: insertion order) */
} pd_heap_item_t;

typedef struct pd_heap {
  const pd_alloc_t *alloc;
  pd_heap_item_t *v;
  size_t n, cap;
  uint64_t next_seq;
  size_t max_items; /* named limit; push beyond it fails with PD_ERR_LIMIT */
} pd_heap_t;

/* max_items: the bound on queued events (0 = 1<<26). */
void pd_heap_init(pd_heap_t *h, const pd_alloc_t *alloc, size_t max_items);
void pd_heap_free(pd_heap_t *h);
/* Push a copy of *it (its seq is overwritten). 0, PD_ERR_NOMEM or PD_ERR_LIMIT. */
int pd_heap_push(pd_heap_t *h, const pd_heap_item_t *it);
/* Pop the least (t_ns, tie, seq). Returns 1 and fills *out, or 0 when empty. */
int pd_heap_pop(pd_heap_t *h, pd_heap_item_t *out);
/* Least item without removing it; NULL when empty. */
const pd_heap_item_t *pd_heap_peek(const pd_heap_t *h);
size_t pd_heap_len(const pd_heap_t *h);

#endif
