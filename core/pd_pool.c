/* pd_pool: size-class free lists over 64 KiB slabs. Each block is preceded by a 16-byte header
 * holding its class (PD_POOL_CLASSES: from malloc), which keeps blocks 16-aligned. */
#include "pd_pool.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HEADER 16u
#define LARGE ((size_t)PD_POOL_CLASSES)

void pd_pool_init(pd_pool_t *p) { memset(p, 0, sizeof *p); }

static size_t class_of(size_t n) {
  size_t c = 0;
  for (size_t size = 16; size < n && c < LARGE; size <<= 1) c++; /* at most 6 turns */
  return c;
}

static void *carve(pd_pool_t *p, size_t c) {
  size_t need = HEADER + ((size_t)16 << c);
  if (p->end - p->at < (ptrdiff_t)need) {
    char *slab = malloc(PD_POOL_SLAB_BYTES);
    if (!slab) return NULL;
    memcpy(slab, &p->slabs, sizeof p->slabs); /* the list of slabs */
    p->slabs = slab;
    p->n_slabs++;
    p->at = slab + HEADER;
    p->end = slab + PD_POOL_SLAB_BYTES;
  }
  char *h = p->at;
  p->at += need;
  return h;
}

void *pd_pool_malloc(pd_pool_t *p, size_t n) {
  size_t c = class_of(n);
  char *h;
  if (c == LARGE) {
    if (n > SIZE_MAX - HEADER) return NULL;
    h = malloc(HEADER + n);
  } else if (p->free_list[c]) {
    void **b = p->free_list[c];
    p->free_list[c] = *b;
    return b;
  } else {
    h = carve(p, c);
  }
  if (!h) return NULL;
  memcpy(h, &c, sizeof c);
  return h + HEADER;
}

void pd_pool_release(pd_pool_t *p, void *block) {
  if (!block) return;
  char *h = (char *)block - HEADER;
  size_t c;
  memcpy(&c, h, sizeof c);
  assert(c <= LARGE);
  if (c == LARGE) {
    free(h);
    return;
  }
  memcpy(block, &p->free_list[c], sizeof(void *)); /* the header stays: the class */
  p->free_list[c] = block;
}

void pd_pool_free(pd_pool_t *p) {
  for (size_t i = 0; i < p->n_slabs && p->slabs; i++) {
    void *next;
    memcpy(&next, p->slabs, sizeof next);
    free(p->slabs);
    p->slabs = next;
  }
  pd_pool_init(p);
}
