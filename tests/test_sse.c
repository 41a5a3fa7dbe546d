/* SSE framer: every script is fed whole, byte by byte and at seeded random split points, and
 * must yield the same events. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_alloc.h"
#include "pd_err.h"
#include "pd_prng.h"
#include "pd_sse.h"
#include "pdt.h"
#include "pdt_alloc.h"

#define REC_MAX_EVENTS 16
#define REC_MAX_BYTES 512
#define SPLIT_SEEDS 64

typedef struct {
  int kind;
  size_t len, raw_len;
  char data[REC_MAX_BYTES];
  char raw[REC_MAX_BYTES];
} rec_t;

typedef struct {
  size_t n;
  int rc; /* first error from feed/next, else 0 */
  size_t pending;
  rec_t ev[REC_MAX_EVENTS];
} run_t;

enum { SPLIT_WHOLE, SPLIT_BYTES, SPLIT_RANDOM };

static void drain(pd_sse_t *s, run_t *out) {
  pd_sse_event_t ev;
  int rc;
  for (int guard = 0; guard < 1000 && (rc = pd_sse_next(s, &ev)) == 1; guard++) {
    if (out->n >= REC_MAX_EVENTS || ev.len >= REC_MAX_BYTES || ev.raw_len >= REC_MAX_BYTES) {
      out->rc = PD_ERR_LIMIT; /* test buffer too small: fail loudly */
      return;
    }
    rec_t *r = &out->ev[out->n++];
    r->kind = (int)ev.kind;
    r->len = ev.len;
    memcpy(r->data, ev.data, ev.len + 1);
    r->raw_len = ev.raw_len;
    memcpy(r->raw, ev.raw, ev.raw_len);
    r->raw[ev.raw_len] = '\0';
  }
  if (rc < 0 && out->rc == 0) out->rc = rc;
}

/* Feed `in` in the given way, draining after every chunk. */
static void run(const char *in, int mode, uint64_t seed, run_t *out) {
  size_t len = strlen(in), pos = 0;
  pd_prng_t prng;
  pd_prng_init(&prng, seed);
  pd_sse_t s;
  pd_sse_init(&s, pd_alloc_default());
  memset(out, 0, sizeof *out);
  while (pos < len && out->rc == 0) {
    size_t chunk = mode == SPLIT_WHOLE ? len - pos
                   : mode == SPLIT_BYTES ? 1
                                         : 1 + (size_t)pd_prng_below(&prng, len - pos);
    int rc = pd_sse_feed(&s, (const uint8_t *)in + pos, chunk);
    if (rc < 0) out->rc = rc;
    pos += chunk;
    drain(&s, out);
  }
  out->pending = pd_sse_pending(&s);
  pd_sse_free(&s);
}

static void assert_same(const run_t *a, const run_t *b, const char *how, uint64_t seed) {
  char m[PDT_MSG_MAX];
  int same = a->n == b->n && a->rc == b->rc && a->pending == b->pending;
  for (size_t i = 0; same && i < a->n; i++) {
    const rec_t *x = &a->ev[i], *y = &b->ev[i];
    same = x->kind == y->kind && x->len == y->len && x->raw_len == y->raw_len &&
           memcmp(x->data, y->data, x->len) == 0 && memcmp(x->raw, y->raw, x->raw_len) == 0;
  }
  snprintf(m, sizeof m, "whole feed and %s feed (seed %" PRIu64 ") give the same events", how,
           seed);
  CU_assertImplementation(same, __LINE__, m, __FILE__, "", CU_FALSE);
}

/* Run whole, then check byte-by-byte and SPLIT_SEEDS random splits agree with it. */
static void run_all_ways(const char *in, run_t *whole) {
  run_t *other = malloc(sizeof *other);
  PDT_TRUE(other != NULL);
  if (!other) return;
  run(in, SPLIT_WHOLE, 0, whole);
  run(in, SPLIT_BYTES, 0, other);
  assert_same(whole, other, "byte-by-byte", 0);
  uint64_t base = 0x5EEDu; /* replay one split: run(in, SPLIT_RANDOM, seed, ...) */
  for (uint64_t k = 0; k < SPLIT_SEEDS; k++) {
    run(in, SPLIT_RANDOM, base + k, other);
    assert_same(whole, other, "random-split", base + k);
  }
  free(other);
}

static run_t *new_run(void) { return calloc(1, sizeof(run_t)); }

static void t_single_event(void) {
  const char *in = "data: {\"text\":\"hi\"}\n\n";
  run_t *r = new_run();
  run_all_ways(in, r);
  PDT_EQ_U64(r->n, 1);
  PDT_EQ_INT(r->ev[0].kind, PD_SSE_DATA);
  PDT_EQ_STR(r->ev[0].data, "{\"text\":\"hi\"}");
  PDT_EQ_STR(r->ev[0].raw, in);
  PDT_EQ_U64(r->pending, 0);
  free(r);
}

static void t_split_across_three_chunks_comes_out_once(void) {
  const char *parts[] = {"data: {\"te", "xt\":\"hi\"}\n", "\n"};
  pd_sse_t s;
  pd_sse_event_t ev;
  int got = 0;
  pd_sse_init(&s, NULL);
  for (size_t i = 0; i < 3; i++) {
    PDT_EQ_INT(pd_sse_feed(&s, (const uint8_t *)parts[i], strlen(parts[i])), 0);
    int rc;
    for (int g = 0; g < 4 && (rc = pd_sse_next(&s, &ev)) == 1; g++) {
      got++;
      PDT_EQ_U64(i, 2); /* only the last chunk completes it */
      PDT_EQ_STR(ev.data, "{\"text\":\"hi\"}");
      PDT_EQ_U64(ev.raw_len, strlen("data: {\"text\":\"hi\"}\n\n"));
    }
  }
  PDT_EQ_INT(got, 1);
  PDT_EQ_INT(pd_sse_next(&s, &ev), 0);
  pd_sse_free(&s);
}

static void t_two_events_in_one_chunk_come_out_in_order(void) {
  run_t *r = new_run();
  run_all_ways("data: {\"i\":1}\n\ndata: {\"i\":2}\n\n", r);
  PDT_EQ_U64(r->n, 2);
  PDT_EQ_STR(r->ev[0].data, "{\"i\":1}");
  PDT_EQ_STR(r->ev[1].data, "{\"i\":2}");
  PDT_EQ_STR(r->ev[1].raw, "data: {\"i\":2}\n\n");
  free(r);
}

static void t_crlf_and_mixed_terminators(void) {
  run_t *r = new_run();
  run_all_ways("data: a\r\n\r\ndata: b\n\r\ndata: c\r\n\n", r);
  PDT_EQ_U64(r->n, 3);
  PDT_EQ_STR(r->ev[0].data, "a");
  PDT_EQ_STR(r->ev[0].raw, "data: a\r\n\r\n");
  PDT_EQ_STR(r->ev[1].data, "b");
  PDT_EQ_STR(r->ev[1].raw, "data: b\n\r\n");
  PDT_EQ_STR(r->ev[2].data, "c");
  PDT_EQ_STR(r->ev[2].raw, "data: c\r\n\n");
  free(r);
}

static void t_data_lines_join_with_newline(void) {
  run_t *r = new_run();
  run_all_ways("data: a\ndata:b\r\ndata:  c\ndata\n\n", r);
  PDT_EQ_U64(r->n, 1);
  PDT_EQ_STR(r->ev[0].data, "a\nb\n c\n"); /* one space stripped; bare "data" is empty */
  free(r);
}

static void t_comments_and_other_fields_are_ignored(void) {
  const char *in = ": keep-alive\n\nevent: x\nid: 7\n: note\ndata: y\nretry: 5\n\n";
  run_t *r = new_run();
  run_all_ways(in, r);
  PDT_EQ_U64(r->n, 1); /* the comment-only event is skipped */
  PDT_EQ_STR(r->ev[0].data, "y");
  PDT_EQ_STR(r->ev[0].raw, "event: x\nid: 7\n: note\ndata: y\nretry: 5\n\n");
  free(r);
}

static void t_stray_blank_lines_are_skipped(void) {
  run_t *r = new_run();
  run_all_ways("\n\r\ndata: a\n\n\n\ndata: b\n\n", r);
  PDT_EQ_U64(r->n, 2);
  PDT_EQ_STR(r->ev[0].data, "a");
  PDT_EQ_STR(r->ev[1].data, "b");
  free(r);
}

static void t_empty_data_line_is_an_event(void) {
  run_t *r = new_run();
  run_all_ways("data:\n\n", r);
  PDT_EQ_U64(r->n, 1);
  PDT_EQ_U64(r->ev[0].len, 0);
  free(r);
}

static void t_sglang_stream_with_done(void) {
  const char *in =
      "data: {\"text\":\"Hel\",\"meta_info\":{\"id\":\"r1\",\"completion_tokens\":1}}\n\n"
      "data: {\"text\":\"Hello\",\"meta_info\":{\"id\":\"r1\",\"completion_tokens\":2}}\n\n"
      "data: {\"text\":\"Hello!\",\"meta_info\":{\"finish_reason\":{\"type\":\"stop\"}}}\n\n"
      "data: [DONE]\n\n";
  run_t *r = new_run();
  run_all_ways(in, r);
  PDT_EQ_U64(r->n, 4);
  PDT_EQ_INT(r->ev[0].kind, PD_SSE_DATA);
  PDT_EQ_INT(r->ev[2].kind, PD_SSE_DATA);
  PDT_EQ_INT(r->ev[3].kind, PD_SSE_DONE);
  size_t total = 0;
  for (size_t i = 0; i < r->n; i++) total += r->ev[i].raw_len;
  PDT_EQ_U64(total, strlen(in)); /* forwarding raw events reproduces the stream exactly */
  free(r);
}

static void t_error_event_is_classified(void) {
  run_t *r = new_run();
  run_all_ways("data: {\"error\":{\"message\":\"bad\",\"code\":400}}\n\ndata: [DONE]\n\n", r);
  PDT_EQ_U64(r->n, 2);
  PDT_EQ_INT(r->ev[0].kind, PD_SSE_ERROR);
  PDT_EQ_INT(r->ev[1].kind, PD_SSE_DONE);
  free(r);
}

static void t_classify_only_top_level_error_objects(void) {
  const char *data_cases[] = {"{\"text\":\"error\"}", "{\"meta\":{\"error\":1}}",
                              "{\"error\":1} trailing", "[\"error\"]", "\"error\"",
                              "[DONE] x", "{\"Error\":1}"};
  for (size_t i = 0; i < sizeof data_cases / sizeof data_cases[0]; i++)
    PDT_EQ_INT(pd_sse_classify(data_cases[i], strlen(data_cases[i])), PD_SSE_DATA);
  PDT_EQ_INT(pd_sse_classify(" {\"error\":null} ", 16), PD_SSE_ERROR);
  PDT_EQ_INT(pd_sse_classify("[DONE]", 6), PD_SSE_DONE);
  PDT_EQ_INT(pd_sse_classify(" [DONE]\r", 8), PD_SSE_DONE);
  /* length-delimited: bytes past len are not read as part of the payload */
  PDT_EQ_INT(pd_sse_classify("[DONE]]", 6), PD_SSE_DONE);
  PDT_EQ_INT(pd_sse_classify("{\"error\":1}", 10), PD_SSE_DATA);
}

static void t_pending_counts_only_the_partial_event(void) {
  pd_sse_t s;
  pd_sse_event_t ev;
  pd_sse_init(&s, NULL);
  const char *in = "data: {}\n\ndata: x";
  PDT_EQ_INT(pd_sse_feed(&s, (const uint8_t *)in, strlen(in)), 0);
  PDT_EQ_U64(pd_sse_pending(&s), 7); /* before draining too */
  PDT_EQ_INT(pd_sse_next(&s, &ev), 1);
  PDT_EQ_INT(pd_sse_next(&s, &ev), 0);
  PDT_EQ_U64(pd_sse_pending(&s), 7);
  PDT_EQ_INT(pd_sse_feed(&s, (const uint8_t *)"\n\n", 2), 0);
  PDT_EQ_U64(pd_sse_pending(&s), 0);
  PDT_EQ_INT(pd_sse_next(&s, &ev), 1);
  PDT_EQ_STR(ev.data, "x");
  pd_sse_free(&s);
}

static void t_raw_stays_valid_until_next_feed(void) {
  pd_sse_t s;
  pd_sse_event_t a, b;
  pd_sse_init(&s, NULL);
  const char *in = "data: 1\n\ndata: 2\n\n";
  PDT_EQ_INT(pd_sse_feed(&s, (const uint8_t *)in, strlen(in)), 0);
  PDT_EQ_INT(pd_sse_next(&s, &a), 1);
  PDT_EQ_INT(pd_sse_next(&s, &b), 1);
  PDT_EQ_U64(a.raw_len, 9);
  PDT_TRUE(memcmp(a.raw, "data: 1\n\n", 9) == 0);
  PDT_TRUE(memcmp(b.raw, "data: 2\n\n", 9) == 0);
  pd_sse_free(&s);
}

static void t_long_event_fed_byte_by_byte_comes_out_once(void) {
  /* 256 KiB one byte at a time: a framer that rescans its buffer would take ~3e10 steps. */
  enum { N = 256 * 1024 };
  pd_sse_t s;
  pd_sse_event_t ev;
  pd_sse_init(&s, NULL);
  const uint8_t head[] = "data: ", tail[] = "\n\n", x = 'x';
  int rc = pd_sse_feed(&s, head, 6), events = 0;
  for (size_t i = 0; i < N && rc == 0; i++) {
    rc = pd_sse_feed(&s, &x, 1);
    int nr = pd_sse_next(&s, &ev);
    if (nr < 0) rc = nr;
    else events += nr;
  }
  for (size_t i = 0; i < 2 && rc == 0; i++) {
    rc = pd_sse_feed(&s, tail + i, 1);
    if (pd_sse_next(&s, &ev) == 1) {
      events++;
      PDT_EQ_U64(ev.len, N);
    }
  }
  PDT_EQ_INT(rc, 0);
  PDT_EQ_INT(events, 1);
  pd_sse_free(&s);
}

static void t_oversized_event_breaks_the_framer(void) {
  size_t chunk = 1024 * 1024;
  uint8_t *buf = malloc(chunk);
  PDT_TRUE(buf != NULL);
  if (!buf) return;
  memset(buf, 'x', chunk);
  pd_sse_t s;
  pd_sse_event_t ev;
  pd_sse_init(&s, NULL);
  int rc = pd_sse_feed(&s, (const uint8_t *)"data: ", 6);
  for (int i = 0; i < 5 && rc == 0; i++) rc = pd_sse_feed(&s, buf, chunk);
  PDT_EQ_INT(rc, PD_ERR_TOO_LARGE);
  PDT_EQ_INT(pd_sse_feed(&s, (const uint8_t *)"\n\n", 2), PD_ERR_TOO_LARGE);
  PDT_EQ_INT(pd_sse_next(&s, &ev), PD_ERR_TOO_LARGE);
  pd_sse_free(&s);
  free(buf);
}

static void t_many_small_events_in_one_huge_chunk_are_fine(void) {
  /* The limit is per event, not per feed: 5 MiB of 10-byte events in one chunk. */
  size_t n = 5u * 1024u * 1024u / 10u, len = n * 10u;
  uint8_t *buf = malloc(len);
  PDT_TRUE(buf != NULL);
  if (!buf) return;
  for (size_t i = 0; i < n; i++) memcpy(buf + i * 10, "data: 42\n\n", 10);
  pd_sse_t s;
  pd_sse_event_t ev;
  pd_sse_init(&s, NULL);
  PDT_EQ_INT(pd_sse_feed(&s, buf, len), 0);
  size_t got = 0;
  for (size_t i = 0; i <= n && pd_sse_next(&s, &ev) == 1; i++) got++;
  PDT_EQ_U64(got, n);
  pd_sse_free(&s);
  free(buf);
}

/* Fail each allocation in turn (tests/pdt_alloc.h). */
static void t_each_failed_allocation_is_reported_and_nothing_leaks(void) {
  const char *in = "data: {\"a\":1}\n\ndata: [DONE]\n\n";
  int saw_nomem = 0, saw_ok = 0;
  for (long k = 0; k < 16; k++) {
    pdt_alloc_t f = {.fail_at = (unsigned)k + 1}; /* the k-th acquisition from 0 fails */
    pd_alloc_t a = pdt_alloc(&f);
    pd_sse_t s;
    pd_sse_event_t ev;
    pd_sse_init(&s, &a);
    int rc = 0, n = 0;
    for (size_t i = 0; in[i] && rc >= 0; i++) { /* byte by byte: several growths */
      rc = pd_sse_feed(&s, (const uint8_t *)in + i, 1);
      for (int g = 0; g < 4 && rc >= 0 && (rc = pd_sse_next(&s, &ev)) == 1; g++) n++;
    }
    if (rc == PD_ERR_NOMEM) saw_nomem = 1;
    if (rc >= 0) {
      saw_ok = 1;
      PDT_EQ_INT(n, 2);
    }
    pd_sse_free(&s);
    PDT_EQ_INT(f.live, 0);
  }
  PDT_TRUE(saw_nomem);
  PDT_TRUE(saw_ok);
}

/* pd_sse_classify's error pre-check (a skipping search) against a plain one: texts over the
 * needle's own bytes, so every shift of the skip is taken. */
static int ref_has_error(const char *h, size_t n) {
  for (size_t i = 0; i + 7 <= n; i++)
    if (memcmp(h + i, "\"error\"", 7) == 0) return 1;
  return 0;
}

static void t_classify_finds_the_error_key_anywhere(void) {
  static const char alphabet[] = "\"erro{}:1 x";
  pd_prng_t r;
  pd_prng_init(&r, 7);
  unsigned errors = 0;
  for (unsigned i = 0; i < 50000; i++) {
    char t[48];
    size_t n = 2 + (size_t)pd_prng_below(&r, 40);
    t[0] = '{';
    for (size_t k = 1; k < n; k++) t[k] = alphabet[pd_prng_below(&r, sizeof alphabet - 1)];
    if (pd_prng_below(&r, 4) == 0) { /* plant the key somewhere, a valid object sometimes */
      size_t at = 1 + (size_t)pd_prng_below(&r, n);
      if (at + 7 > sizeof t - 1) at = sizeof t - 8;
      memcpy(t + at, "\"error\"", 7);
      if (at + 7 > n) n = at + 7;
    }
    t[n] = '\0';
    if (pd_prng_below(&r, 3) == 0) { /* a valid object, its "error" key at any alignment */
      char key[12];
      size_t kn = (size_t)pd_prng_below(&r, sizeof key);
      for (size_t k = 0; k < kn; k++) key[k] = "erox"[pd_prng_below(&r, 4)];
      key[kn] = '\0';
      snprintf(t, sizeof t, "{\"%s\":%u,\"error\":{}}", key, i % 1000);
      n = strlen(t);
    }
    pd_sse_kind_t k = pd_sse_classify(t, n), want = PD_SSE_DATA;
    if (ref_has_error(t, n)) { /* then classify parses: an object naming "error" */
      const char *end = NULL;
      cJSON *j = cJSON_ParseWithLengthOpts(t, n, &end, 0);
      if (j && end == t + n && cJSON_IsObject(j) && cJSON_GetObjectItemCaseSensitive(j, "error"))
        want = PD_SSE_ERROR;
      cJSON_Delete(j);
    }
    PDT_EQ_INT(k, want);
    errors += k == PD_SSE_ERROR;
  }
  PDT_TRUE(errors > 1000);
  const char *a = "{\"a\":\"xerror\",\"error\":1}", *b = "{\"errorr\":1}";
  PDT_EQ_INT(pd_sse_classify(a, strlen(a)), PD_SSE_ERROR);
  PDT_EQ_INT(pd_sse_classify(b, strlen(b)), PD_SSE_DATA);
}

int pdt_suite_sse(void) {
  static const pdt_case_t cases[] = {
      {"classify finds the error key anywhere", t_classify_finds_the_error_key_anywhere},
      {"one event comes out whole and split", t_single_event},
      {"an event split across three chunks comes out once",
       t_split_across_three_chunks_comes_out_once},
      {"two events in one chunk come out in order", t_two_events_in_one_chunk_come_out_in_order},
      {"CRLF, LF and mixed blank lines end events", t_crlf_and_mixed_terminators},
      {"data lines join with newline, one space stripped", t_data_lines_join_with_newline},
      {"comments and other fields are ignored, raw keeps them",
       t_comments_and_other_fields_are_ignored},
      {"stray blank lines produce no events", t_stray_blank_lines_are_skipped},
      {"an empty data line is an event", t_empty_data_line_is_an_event},
      {"an SGLang stream ends with DONE and raw bytes add up", t_sglang_stream_with_done},
      {"an error payload is classified as error", t_error_event_is_classified},
      {"only a top-level error member makes an error event",
       t_classify_only_top_level_error_objects},
      {"pending counts only the partial event", t_pending_counts_only_the_partial_event},
      {"raw stays valid across next until the next feed", t_raw_stays_valid_until_next_feed},
      {"a 256 KiB event fed byte by byte comes out once",
       t_long_event_fed_byte_by_byte_comes_out_once},
      {"an event over 4 MiB breaks the framer", t_oversized_event_breaks_the_framer},
      {"5 MiB of small events in one chunk is fine",
       t_many_small_events_in_one_huge_chunk_are_fine},
      {"each failed allocation is reported and nothing leaks",
       t_each_failed_allocation_is_reported_and_nothing_leaks},
  };
  return PDT_SUITE("sse", cases);
}
