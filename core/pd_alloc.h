/* pd_alloc: the allocator every constructor takes, so tests can count and fail allocations.
 * NULL means the libc allocator. */
#ifndef PD_ALLOC_H
#define PD_ALLOC_H
#include <stddef.h>

typedef struct pd_alloc {
  void *(*malloc_fn)(size_t size, void *ud);
  void *(*realloc_fn)(void *p, size_t size, void *ud);
  void (*free_fn)(void *p, void *ud);
  void *ud;
} pd_alloc_t;

/* The libc allocator. */
const pd_alloc_t *pd_alloc_default(void);
/* An allocator that refuses every acquisition (frees with libc): tests and fuzz targets use it
 * to drive the out-of-memory paths. */
const pd_alloc_t *pd_alloc_refusing(void);

void *pd_malloc(const pd_alloc_t *a, size_t size);
void *pd_calloc(const pd_alloc_t *a, size_t n, size_t size);
void *pd_realloc(const pd_alloc_t *a, void *p, size_t size);
void pd_free(const pd_alloc_t *a, void *p);
/* Copy of s[0..len) plus a NUL; NULL on allocation failure. */
char *pd_strndup(const pd_alloc_t *a, const char *s, size_t len);

#endif
