#include "pd_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pd_err.h"

/* First allocation: small enough for a short answer, doubling from there. */
#define PD_BUF_MIN_CAP ((size_t)256)

static size_t limit(const pd_buf_t *b) {
  return b->max_len ? b->max_len : PD_BUF_DEFAULT_MAX_BYTES;
}

void pd_buf_init(pd_buf_t *b, size_t max_len) {
  b->p = NULL;
  b->len = b->cap = 0;
  b->max_len = max_len;
}

int pd_buf_reserve(const pd_alloc_t *a, pd_buf_t *b, size_t more) {
  if (more > limit(b) || b->len > limit(b) - more) return PD_ERR_TOO_LARGE;
  size_t need = b->len + more + 1; /* and the NUL */
  if (need <= b->cap) return 0;
  size_t nc = b->cap ? b->cap : PD_BUF_MIN_CAP;
  while (nc < need) nc *= 2; /* bounded: need is at most the limit + 1 */
  uint8_t *np = pd_realloc(a, b->p, nc);
  if (!np) return PD_ERR_NOMEM;
  if (!b->p) np[0] = '\0';
  b->p = np;
  b->cap = nc;
  return 0;
}

int pd_buf_append(const pd_alloc_t *a, pd_buf_t *b, const void *p, size_t n) {
  if (n == 0) return 0; /* nothing to keep: no allocation either */
  int rc = pd_buf_reserve(a, b, n);
  if (rc) return rc;
  memcpy(b->p + b->len, p, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 0;
}

int pd_buf_vprintf(const pd_alloc_t *a, pd_buf_t *b, const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(b->p ? (char *)b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
  int rc = 0;
  if (n < 0) {
    rc = PD_ERR_INVAL;
  } else if (b->p && (size_t)n < b->cap - b->len && (size_t)n <= limit(b) - b->len) {
    b->len += (size_t)n; /* it fitted */
  } else if ((rc = pd_buf_reserve(a, b, (size_t)n)) == 0) {
    vsnprintf((char *)b->p + b->len, b->cap - b->len, fmt, again);
    b->len += (size_t)n;
  }
  if (rc && b->p) b->p[b->len] = '\0'; /* a partial output is not kept */
  va_end(again);
  return rc;
}

int pd_buf_printf(const pd_alloc_t *a, pd_buf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = pd_buf_vprintf(a, b, fmt, ap);
  va_end(ap);
  return rc;
}

const char *pd_buf_str(const pd_buf_t *b) { return b->p ? (const char *)b->p : ""; }

void pd_buf_free(const pd_alloc_t *a, pd_buf_t *b) {
  pd_free(a, b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}
