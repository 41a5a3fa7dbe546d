/* pd_bw: a bounded writer appending text to a caller's fixed buffer, for bodies rendered on
 * the hot path without printf (the simulator's client bodies, the wire's OpenAI events). Once
 * a write does not fit, it and every later one are refused (is_short) and the text written so
 * far stays NUL-terminated. Header-only: every function is a few lines. */
#ifndef PD_BW_H
#define PD_BW_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct pd_bw {
  char *buf;
  size_t cap, off; /* off bytes written, below cap while not short */
  int is_short;
} pd_bw_t;

/* A writer over buf (cap 0: short from the start). */
static inline pd_bw_t pd_bw_over(char *buf, size_t cap) {
  pd_bw_t w = {buf, cap, 0, cap == 0};
  return w;
}

/* Append the C string s (and its NUL, not counted). */
static inline void pd_bw_s(pd_bw_t *w, const char *s) {
  if (w->is_short) return;
  size_t n = strlen(s);
  if (n >= w->cap - w->off) {
    w->is_short = 1;
    return;
  }
  memcpy(w->buf + w->off, s, n + 1);
  w->off += n;
}

/* Append v in decimal, as "%llu" would. */
static inline void pd_bw_u(pd_bw_t *w, uint64_t v) {
  char d[24];
  size_t k = sizeof d - 1;
  d[k] = '\0';
  do d[--k] = (char)('0' + v % 10); while ((v /= 10) && k);
  pd_bw_s(w, d + k);
}

/* The length written, or 0 when a write did not fit. */
static inline size_t pd_bw_done(const pd_bw_t *w) { return w->is_short ? 0 : w->off; }

#endif
