/* pd_buf: a growable byte buffer, the one every module appends to: a leg's held body in the
 * core, a client's output in the gateway, an answer in conform, a rendered file in sim. The
 * bytes stay NUL-terminated, so text reads as a C string; each buffer has a named limit. */
#ifndef PD_BUF_H
#define PD_BUF_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_alloc.h"

/* The limit of a buffer whose max_len is 0: the core's per-leg bound on held bytes
 * (PD_MAX_LEG_BUFFER_BYTES), several times the largest request or answer we hold whole. */
#define PD_BUF_DEFAULT_MAX_BYTES (8u * 1024u * 1024u)

typedef struct pd_buf {
  uint8_t *p;     /* len bytes then a NUL; NULL until the first growth */
  size_t len;
  size_t cap;     /* bytes allocated at p (len + 1 at least once allocated) */
  size_t max_len; /* named limit on len: growth past it fails (0: PD_BUF_DEFAULT_MAX_BYTES) */
} pd_buf_t;

/* An empty buffer that may hold max_len bytes (0: PD_BUF_DEFAULT_MAX_BYTES). A zeroed
 * pd_buf_t is the same as pd_buf_init(b, 0). Allocates nothing. */
void pd_buf_init(pd_buf_t *b, size_t max_len);
/* Room for `more` bytes past len (and the NUL), doubling from 256. 0; PD_ERR_TOO_LARGE when
 * len + more passes the limit; PD_ERR_NOMEM. On error the buffer is unchanged. */
int pd_buf_reserve(const pd_alloc_t *a, pd_buf_t *b, size_t more);
/* Append n bytes from p (n 0: nothing, not even an allocation). 0, PD_ERR_TOO_LARGE or
 * PD_ERR_NOMEM (nothing appended). */
int pd_buf_append(const pd_alloc_t *a, pd_buf_t *b, const void *p, size_t n);
/* Append printf output. 0, PD_ERR_TOO_LARGE, PD_ERR_NOMEM or PD_ERR_INVAL (bad format). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int pd_buf_printf(const pd_alloc_t *a, pd_buf_t *b, const char *fmt, ...);
int pd_buf_vprintf(const pd_alloc_t *a, pd_buf_t *b, const char *fmt, va_list ap);
/* The bytes as a C string ("" before the first growth). */
const char *pd_buf_str(const pd_buf_t *b);
/* Free the bytes; the buffer is empty and keeps its limit. */
void pd_buf_free(const pd_alloc_t *a, pd_buf_t *b);

#endif
