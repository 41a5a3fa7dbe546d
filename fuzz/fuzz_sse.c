/* Fuzz the SSE framer: the stream fed whole, at fuzz-chosen cut points and (optionally) byte
 * by byte must yield identical event sequences, and each whole-feed event's raw bytes must
 * be the input's bytes at increasing offsets.
 * Input: byte 0 = (cuts & 7) | (8 if byte-by-byte too), then cuts x u16 cut points, then the
 * stream. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pd_alloc.h"
#include "pd_buf.h"
#include "pd_sse.h"
#include "fuzz_reader.h"

#define MAX_CUTS 7

/* A growable log of events: kind, len, data, raw_len, raw, then the final rc and pending. */
typedef pd_buf_t log_t;

static void log_put(log_t *l, const void *p, size_t n) {
  FZ_CHECK(pd_buf_append(NULL, l, p, n) == 0); /* a log is a few times the input's size */
}

static void log_event(log_t *l, const pd_sse_event_t *ev) {
  int kind = (int)ev->kind;
  log_put(l, &kind, sizeof kind);
  log_put(l, &ev->len, sizeof ev->len);
  log_put(l, ev->data, ev->len);
  log_put(l, &ev->raw_len, sizeof ev->raw_len);
  log_put(l, ev->raw, ev->raw_len);
}

/* Check one event of a whole feed against the input it came from. */
static void check_whole_event(const pd_sse_t *s, const pd_sse_event_t *ev, const uint8_t *in,
                              size_t *next_off) {
  size_t off = (size_t)(ev->raw - s->buf);
  FZ_CHECK(ev->raw >= s->buf && off >= *next_off && off + ev->raw_len <= s->len);
  FZ_CHECK(memcmp(ev->raw, in + off, ev->raw_len) == 0);
  FZ_CHECK(ev->raw_len >= 2 && ev->raw[ev->raw_len - 1] == '\n');
  FZ_CHECK(ev->len < ev->raw_len && ev->data[ev->len] == '\0');
  FZ_CHECK(ev->kind == pd_sse_classify(ev->data, ev->len));
  *next_off = off + ev->raw_len;
}

/* Feed in[0, len) in pieces ending at cuts[] (sorted), draining after each piece. */
static void run(const uint8_t *in, size_t len, const size_t *cuts, size_t ncuts, log_t *l,
                int whole) {
  pd_sse_t s;
  pd_sse_event_t ev;
  pd_sse_init(&s, pd_alloc_default());
  size_t pos = 0, next_off = 0;
  int rc = 0;
  for (size_t c = 0; c <= ncuts && rc >= 0; c++) {
    size_t end = c < ncuts ? cuts[c] : len;
    rc = pd_sse_feed(&s, in + pos, end - pos);
    pos = end;
    for (size_t g = 0; g <= len && rc >= 0; g++) {
      int nr = pd_sse_next(&s, &ev);
      if (nr <= 0) {
        rc = nr;
        break;
      }
      if (whole) check_whole_event(&s, &ev, in, &next_off);
      log_event(l, &ev);
    }
  }
  size_t pending = pd_sse_pending(&s);
  FZ_CHECK(pending <= len);
  log_put(l, &rc, sizeof rc);
  log_put(l, &pending, sizeof pending);
  pd_sse_free(&s);
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader_t f = fz_reader(data, size);
  uint8_t mode = fz_u8(&f);
  size_t ncuts = mode & MAX_CUTS, cuts[MAX_CUTS];
  uint16_t raw_cuts[MAX_CUTS];
  for (size_t i = 0; i < ncuts; i++) raw_cuts[i] = fz_u16(&f);
  const uint8_t *in = f.p;
  size_t len = f.n;
  for (size_t i = 0; i < ncuts; i++) cuts[i] = raw_cuts[i] % (len + 1);
  qsort(cuts, ncuts, sizeof cuts[0], cmp_size);

  log_t whole = {0}, split = {0};
  run(in, len, NULL, 0, &whole, 1);
  run(in, len, cuts, ncuts, &split, 0);
  FZ_CHECK(whole.len == split.len && memcmp(whole.p, split.p, whole.len) == 0);
  if (mode & 8) {
    size_t *every = malloc((len ? len : 1) * sizeof *every);
    FZ_CHECK(every != NULL);
    for (size_t i = 0; i < len; i++) every[i] = i;
    log_t bytewise = {0};
    run(in, len, every, len, &bytewise, 0);
    FZ_CHECK(whole.len == bytewise.len && memcmp(whole.p, bytewise.p, whole.len) == 0);
    pd_buf_free(NULL, &bytewise);
    free(every);
  }
  pd_buf_free(NULL, &whole);
  pd_buf_free(NULL, &split);
  return 0;
}
