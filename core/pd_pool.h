/* pd_pool: a small-block allocator for many short-lived blocks of a few sizes (cJSON's nodes
 * and strings, by the hundred thousand in a simulator run). A freed block goes on its size
 * class's free list and is handed out again; slabs go back to the system only at
 * pd_pool_free, so memory is bounded by the most blocks live at once. Not thread-safe: one
 * pool per thread. */
#ifndef PD_POOL_H
#define PD_POOL_H
#include <stddef.h>

#define PD_POOL_CLASSES 6               /* block sizes 16, 32, 64, 128, 256, 512 bytes */
#define PD_POOL_SLAB_BYTES (64u * 1024u) /* carved into blocks as they are first needed */

typedef struct pd_pool {
  void *free_list[PD_POOL_CLASSES]; /* freed blocks of each class (a block holds the next) */
  char *at, *end;                   /* the current slab's uncarved part */
  void *slabs;                      /* every slab, each starting with the previous one's address */
  size_t n_slabs;
} pd_pool_t;

void pd_pool_init(pd_pool_t *p);
/* n bytes, 16-aligned; larger than the largest class: from malloc (returned at release).
 * NULL when the system has no memory. */
void *pd_pool_malloc(pd_pool_t *p, size_t n);
/* Give back a block from pd_pool_malloc of this pool (NULL: nothing). */
void pd_pool_release(pd_pool_t *p, void *block);
/* Return every slab (every block must be dead). */
void pd_pool_free(pd_pool_t *p);

#endif
