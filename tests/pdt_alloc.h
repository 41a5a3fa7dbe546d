/* pdt_alloc: an allocator for tests that fails exactly the fail_at-th acquisition (1-based;
 * 0 = never) and counts live blocks, so a test can fail each allocation in turn and see every
 * acquire released; `poison` fills new blocks with 0xA5. Use: pdt_alloc_t f = {0}; pd_alloc_t a = pdt_alloc(&f); */
#ifndef PDT_ALLOC_H
#define PDT_ALLOC_H
#include <stdlib.h>
#include <string.h>

#include "pd_alloc.h"

typedef struct pdt_alloc {
  unsigned calls;   /* acquisitions asked for (malloc and realloc) */
  unsigned fail_at; /* which one returns NULL (1-based; 0 = none) */
  long live;        /* blocks held */
  int poison;       /* fill each new block with 0xA5, so a read of memory nobody wrote shows */
} pdt_alloc_t;

static inline int pdt_alloc_should_fail(pdt_alloc_t *f) { return ++f->calls == f->fail_at; }

static inline void *pdt_alloc_malloc(size_t n, void *ud) {
  pdt_alloc_t *f = ud;
  if (pdt_alloc_should_fail(f)) return NULL;
  void *p = malloc(n);
  if (p) f->live++;
  if (p && f->poison) memset(p, 0xA5, n);
  return p;
}

static inline void *pdt_alloc_realloc(void *p, size_t n, void *ud) {
  pdt_alloc_t *f = ud;
  if (pdt_alloc_should_fail(f)) return NULL;
  void *q = realloc(p, n);
  if (q && !p) f->live++;
  return q;
}

static inline void pdt_alloc_free(void *p, void *ud) {
  pdt_alloc_t *f = ud;
  if (p) f->live--;
  free(p);
}

static inline pd_alloc_t pdt_alloc(pdt_alloc_t *f) {
  pd_alloc_t a = {pdt_alloc_malloc, pdt_alloc_realloc, pdt_alloc_free, f};
  return a;
}

#endif
