/* pd_buf: appends keep every byte and a NUL, growth doubles, the named limit refuses what
 * would pass it, allocation failure leaves the buffer as it was, printf appends. */
#include "pd_buf.h"
#include "pd_err.h"
#include "pdt.h"
#include "pdt_alloc.h"

static void test_append_keeps_bytes_and_nul(void) {
  pd_buf_t b;
  pd_buf_init(&b, 0);
  PDT_EQ_STR(pd_buf_str(&b), ""); /* before the first growth */
  PDT_EQ_INT(pd_buf_append(NULL, &b, "", 0), 0);
  PDT_TRUE(b.p == NULL); /* nothing appended, nothing allocated */
  PDT_EQ_INT(pd_buf_append(NULL, &b, "hello", 5), 0);
  PDT_EQ_INT(pd_buf_append(NULL, &b, ", world", 7), 0);
  PDT_EQ_U64(b.len, 12);
  PDT_EQ_STR(pd_buf_str(&b), "hello, world");
  const uint8_t bin[3] = {0, 0xff, 0};
  PDT_EQ_INT(pd_buf_append(NULL, &b, bin, 3), 0); /* binary bytes, NULs included */
  PDT_EQ_U64(b.len, 15);
  PDT_TRUE(memcmp(b.p + 12, bin, 3) == 0 && b.p[15] == 0);
  pd_buf_free(NULL, &b);
  PDT_EQ_U64(b.len, 0);
  PDT_EQ_STR(pd_buf_str(&b), "");
}

static void test_growth_doubles_from_256(void) {
  pd_buf_t b;
  pd_buf_init(&b, 0);
  char chunk[300];
  memset(chunk, 'x', sizeof chunk);
  PDT_EQ_INT(pd_buf_append(NULL, &b, chunk, 1), 0);
  PDT_EQ_U64(b.cap, 256);
  PDT_EQ_INT(pd_buf_append(NULL, &b, chunk, 254), 0); /* 255 bytes and the NUL: still fits */
  PDT_EQ_U64(b.cap, 256);
  PDT_EQ_INT(pd_buf_append(NULL, &b, chunk, 1), 0);
  PDT_EQ_U64(b.cap, 512);
  for (int i = 0; i < 100; i++) PDT_EQ_INT(pd_buf_append(NULL, &b, chunk, 100), 0);
  PDT_EQ_U64(b.len, 256 + 100 * 100);
  PDT_EQ_U64(b.cap, 16384); /* the first power of two past len + 1, from 256 */
  size_t xs = 0;
  for (size_t i = 0; i < b.len; i++) xs += b.p[i] == 'x';
  PDT_EQ_U64(xs, b.len);
  PDT_EQ_INT(pd_buf_reserve(NULL, &b, 100000), 0);
  PDT_TRUE(b.cap >= b.len + 100001);
  PDT_EQ_U64(b.len, 256 + 100 * 100); /* reserve adds room, not bytes */
  pd_buf_free(NULL, &b);
}

static void test_limit_refuses_and_keeps_contents(void) {
  pd_buf_t b;
  pd_buf_init(&b, 10);
  PDT_EQ_INT(pd_buf_append(NULL, &b, "0123456", 7), 0);
  PDT_EQ_INT(pd_buf_append(NULL, &b, "789A", 4), PD_ERR_TOO_LARGE);
  PDT_EQ_STR(pd_buf_str(&b), "0123456");
  PDT_EQ_INT(pd_buf_append(NULL, &b, "789", 3), 0); /* exactly the limit */
  PDT_EQ_STR(pd_buf_str(&b), "0123456789");
  PDT_EQ_INT(pd_buf_append(NULL, &b, "x", 1), PD_ERR_TOO_LARGE);
  PDT_EQ_INT(pd_buf_reserve(NULL, &b, SIZE_MAX), PD_ERR_TOO_LARGE); /* no overflow */
  PDT_EQ_INT(pd_buf_printf(NULL, &b, "%d", 1), PD_ERR_TOO_LARGE);
  PDT_EQ_STR(pd_buf_str(&b), "0123456789");
  pd_buf_free(NULL, &b);
  PDT_EQ_U64(b.max_len, 10); /* freeing keeps the limit */
  PDT_EQ_INT(pd_buf_append(NULL, &b, "0123456789A", 11), PD_ERR_TOO_LARGE);
  pd_buf_t z = {0}; /* zeroed: the default limit */
  PDT_EQ_INT(pd_buf_reserve(NULL, &z, PD_BUF_DEFAULT_MAX_BYTES + 1), PD_ERR_TOO_LARGE);
  PDT_TRUE(z.p == NULL);
}

static void test_alloc_failure_leaves_buffer_unchanged(void) {
  char chunk[300];
  memset(chunk, 'y', sizeof chunk);
  for (unsigned fail = 1; fail <= 4; fail++) {
    pdt_alloc_t f = {.fail_at = fail};
    pd_alloc_t a = pdt_alloc(&f);
    pd_buf_t b;
    pd_buf_init(&b, 0);
    size_t n = 0;
    int rc = 0;
    for (; n < 20 && (rc = pd_buf_append(&a, &b, chunk, sizeof chunk)) == 0; n++) {}
    PDT_EQ_INT(rc, PD_ERR_NOMEM);
    PDT_EQ_U64(b.len, n * sizeof chunk); /* every earlier append kept, the failed one not */
    PDT_TRUE(n == 0 || (b.p[0] == 'y' && b.p[b.len] == 0));
    pd_buf_free(&a, &b);
    PDT_EQ_INT(f.live, 0);
  }
}

static void test_printf_appends_any_length(void) {
  pd_buf_t b;
  pd_buf_init(&b, 0);
  PDT_EQ_INT(pd_buf_printf(NULL, &b, "%s=%d;", "a", 1), 0);
  PDT_EQ_INT(pd_buf_printf(NULL, &b, "%s=%llu", "b", 18446744073709551615ull), 0);
  PDT_EQ_STR(pd_buf_str(&b), "a=1;b=18446744073709551615");
  char big[1000];
  memset(big, 'z', sizeof big - 1);
  big[sizeof big - 1] = 0;
  PDT_EQ_INT(pd_buf_printf(NULL, &b, "[%s]", big), 0); /* past the current capacity */
  PDT_EQ_U64(b.len, 26 + 1001);
  PDT_TRUE(b.p[26] == '[' && b.p[27 + 999] == ']' && b.p[b.len] == 0);
  pd_buf_free(NULL, &b);
  pdt_alloc_t f = {.fail_at = 2}; /* the second allocation fails: the growth for the long line */
  pd_alloc_t a = pdt_alloc(&f);
  PDT_EQ_INT(pd_buf_printf(&a, &b, "%s", "short"), 0);
  PDT_EQ_INT(pd_buf_printf(&a, &b, "%s", big), PD_ERR_NOMEM);
  PDT_EQ_STR(pd_buf_str(&b), "short"); /* the partial line is not kept */
  pd_buf_free(&a, &b);
  PDT_EQ_INT(f.live, 0);
}

int pdt_suite_buf(void) {
  static const pdt_case_t cases[] = {
      {"appends keep every byte and a NUL after them", test_append_keeps_bytes_and_nul},
      {"capacity doubles from 256", test_growth_doubles_from_256},
      {"growth past max_len fails with PD_ERR_TOO_LARGE", test_limit_refuses_and_keeps_contents},
      {"allocation failure returns PD_ERR_NOMEM and keeps the bytes",
       test_alloc_failure_leaves_buffer_unchanged},
      {"printf appends output of any length", test_printf_appends_any_length},
  };
  return PDT_SUITE("buf", cases);
}
