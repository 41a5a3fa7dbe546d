#include "pd_alloc.h"

#include <stdlib.h>
#include <string.h>

static void *libc_malloc(size_t n, void *ud) { (void)ud; return malloc(n); }
static void *libc_realloc(void *p, size_t n, void *ud) { (void)ud; return realloc(p, n); }
static void libc_free(void *p, void *ud) { (void)ud; free(p); }

static const pd_alloc_t libc_alloc = {libc_malloc, libc_realloc, libc_free, NULL};

const pd_alloc_t *pd_alloc_default(void) { return &libc_alloc; }

static void *refuse_malloc(size_t n, void *ud) {
  (void)n, (void)ud;
  return NULL;
}
static void *refuse_realloc(void *p, size_t n, void *ud) {
  (void)p, (void)n, (void)ud;
  return NULL;
}
static const pd_alloc_t refusing_alloc = {refuse_malloc, refuse_realloc, libc_free, NULL};

const pd_alloc_t *pd_alloc_refusing(void) { return &refusing_alloc; }

void *pd_malloc(const pd_alloc_t *a, size_t size) {
  if (!a) a = &libc_alloc;
  return a->malloc_fn(size ? size : 1, a->ud);
}

void *pd_calloc(const pd_alloc_t *a, size_t n, size_t size) {
  if (size && n > (size_t)-1 / size) return NULL;
  void *p = pd_malloc(a, n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

void *pd_realloc(const pd_alloc_t *a, void *p, size_t size) {
  if (!a) a = &libc_alloc;
  return a->realloc_fn(p, size ? size : 1, a->ud);
}

void pd_free(const pd_alloc_t *a, void *p) {
  if (!p) return;
  if (!a) a = &libc_alloc;
  a->free_fn(p, a->ud);
}

char *pd_strndup(const pd_alloc_t *a, const char *s, size_t len) {
  char *d = pd_malloc(a, len + 1);
  if (!d) return NULL;
  if (len) memcpy(d, s, len);
  d[len] = '\0';
  return d;
}
