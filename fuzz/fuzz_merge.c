/* Fuzz the logprob merges. Input: byte 0 = flags (bit 0: fail the output allocation),
 * u16 split, then text split into prefill [0, split) and decode [split, end).
 * Properties: a successful merge re-parses as an object whose input_token_logprobs holds
 * prefill's then decode's elements; smg chunk output is "data: <one JSON value>\n\n";
 * both are deterministic; a failed allocation gives PD_ERR_NOMEM and leaks nothing; and
 * pd_json_print, which every merge prints with, gives cJSON's own bytes for either text. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pd_alloc.h"
#include "pd_err.h"
#include "pd_json.h"
#include "pd_merge.h"
#include "fuzz_reader.h"



/* Size of meta_info.input_token_logprobs if text is exactly one object carrying it, else -1. */
static int logprob_count(const char *text, size_t len) {
  while (len && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\n' ||
                 text[len - 1] == '\r'))
    len--;
  const char *end = NULL;
  cJSON *doc = len ? cJSON_ParseWithLengthOpts(text, len, &end, 0) : NULL;
  int n = -1;
  if (doc && end == text + len) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(doc, "meta_info");
    const cJSON *a = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, "input_token_logprobs")
                                       : NULL;
    if (cJSON_IsObject(doc) && cJSON_IsArray(a)) n = cJSON_GetArraySize(a);
  }
  cJSON_Delete(doc);
  return n;
}

static void check_merge(const char *p, size_t plen, const char *d, size_t dlen, int fail) {
  pd_alloc_t nul = *pd_alloc_refusing();
  char *out = NULL, *again = NULL;
  size_t n = 0, n2 = 0;
  int rc = pd_merge_logprobs(fail ? &nul : NULL, p, plen, d, dlen, &out, &n);
  FZ_CHECK(rc != 0 || pd_merge_may_carry(d, dlen)); /* the reference's skip loses no merge */
  FZ_CHECK(rc == 0 || rc == PD_ERR_JSON || rc == PD_ERR_NOT_OBJECT || rc == PD_ERR_NOT_FOUND ||
        rc == PD_ERR_NOMEM);
  if (rc != 0) {
    FZ_CHECK(out == NULL);
    return;
  }
  FZ_CHECK(!fail && n == strlen(out));
  int pc = logprob_count(p, plen), dc = logprob_count(d, dlen);
  FZ_CHECK(pc >= 0 && dc >= 0);
  FZ_CHECK(logprob_count(out, n) == pc + dc);
  FZ_CHECK(pd_merge_logprobs(NULL, p, plen, d, dlen, &again, &n2) == 0);
  FZ_CHECK(n2 == n && memcmp(out, again, n) == 0);
  pd_free(NULL, again);
  pd_free(NULL, out);
}

static void check_smg(const char *p, size_t plen, const char *c, size_t clen, int fail) {
  pd_alloc_t nul = *pd_alloc_refusing();
  char *out = NULL;
  size_t n = 0;
  int rc = pd_merge_smg_chunk(fail ? &nul : NULL, p, plen, c, clen, &out, &n);
  FZ_CHECK(rc == 0 || rc == PD_ERR_JSON || rc == PD_ERR_NOT_FOUND || rc == PD_ERR_NOMEM);
  if (rc != 0) {
    FZ_CHECK(out == NULL);
    return;
  }
  FZ_CHECK(!fail && n >= 9 && n == strlen(out));
  FZ_CHECK(memcmp(out, "data: ", 6) == 0 && memcmp(out + n - 2, "\n\n", 2) == 0);
  const char *end = NULL;
  cJSON *doc = cJSON_ParseWithLengthOpts(out + 6, n - 8, &end, 0);
  FZ_CHECK(doc != NULL && end == out + n - 2);
  cJSON_Delete(doc);
  pd_free(NULL, out);
}

/* pd_json_print(doc) is cJSON_PrintUnformatted(doc), and doc prints the same after it. */
static void check_print(const char *text, size_t len) {
  cJSON *doc = len ? cJSON_ParseWithLength(text, len) : NULL;
  if (!doc) return;
  char *want = cJSON_PrintUnformatted(doc), *got = pd_json_print(doc);
  char *again = cJSON_PrintUnformatted(doc);
  FZ_CHECK(want && got && again && strcmp(want, got) == 0 && strcmp(want, again) == 0);
  cJSON_free(want);
  cJSON_free(got);
  cJSON_free(again);
  cJSON_Delete(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader_t f = fz_reader(data, size);
  uint8_t flags = fz_u8(&f);
  size_t split = (size_t)fz_u8(&f) << 8;
  split |= fz_u8(&f);
  split = f.n ? split % (f.n + 1) : 0;
  const char *p = (const char *)f.p, *d = (const char *)f.p + split;
  size_t plen = split, dlen = f.n - split;
  check_merge(p, plen, d, dlen, flags & 1);
  check_smg(p, plen, d, dlen, flags & 1);
  check_print(p, plen);
  check_print(d, dlen);
  return 0;
}
