/* Fuzz request parsing and leg rendering through the calls the dispatch core makes.
 * Input: byte 0 = route (% 3) | rule ((>> 2) % 3) | rid (bit 4) | dp rank (bit 5) |
 * null port (bit 6) | query string (bit 7); 8 bytes of room seed; then the body.
 * Properties: errors come with a message; a parsed request's batch is within the limit;
 * the rendered body re-parses as an object carrying exactly the injected bootstrap fields. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_alloc.h"
#include "pd_err.h"
#include "pd_request.h"
#include "fuzz_reader.h"

#define ROOM_MASK ((UINT64_C(1) << 53) - 1)

static const char *const paths[] = {"/generate", "/v1/completions", "/v1/chat/completions"};
static const char *const queried[] = {"/generate?a=1", "/v1/completions?",
                                      "/v1/chat/completions?x"};

static void check_room(const cJSON *it, uint64_t room) {
  FZ_CHECK(cJSON_IsNumber(it) && it->valuedouble == (double)room);
}

static void check_scalars(const cJSON *doc, const pd_bootstrap_t *b) {
  const cJSON *port = cJSON_GetObjectItemCaseSensitive(doc, "bootstrap_port");
  const char *host = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "bootstrap_host"));
  FZ_CHECK(host && strcmp(host, b->host) == 0);
  FZ_CHECK(b->port < 0 ? cJSON_IsNull(port) : cJSON_IsNumber(port) && port->valueint == b->port);
  check_room(cJSON_GetObjectItemCaseSensitive(doc, "bootstrap_room"), b->rooms[0]);
  const char *rid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "rid"));
  if (b->rid) FZ_CHECK(rid && strcmp(rid, b->rid) == 0);
}

static void check_arrays(const cJSON *doc, const pd_bootstrap_t *b, int n) {
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(doc, "bootstrap_host");
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(doc, "bootstrap_port");
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(doc, "bootstrap_room");
  const cJSON *rid = cJSON_GetObjectItemCaseSensitive(doc, "rid");
  FZ_CHECK(cJSON_GetArraySize(h) == n && cJSON_GetArraySize(p) == n && cJSON_GetArraySize(r) == n);
  FZ_CHECK(!b->rid || cJSON_GetArraySize(rid) == n);
  if (b->rid) {
    const char *last = cJSON_GetStringValue(cJSON_GetArrayItem(rid, n - 1));
    char want[64];
    snprintf(want, sizeof want, "%s-%04x", b->rid, (unsigned)(n - 1));
    FZ_CHECK(last && strcmp(last, want) == 0);
  }
  const cJSON *hi = h->child, *pi = p->child, *ri = r->child;
  for (int i = 0; i < n; i++, hi = hi->next, pi = pi->next, ri = ri->next) {
    FZ_CHECK(strcmp(cJSON_GetStringValue(hi), b->host) == 0);
    FZ_CHECK(b->port < 0 ? cJSON_IsNull(pi) : pi->valueint == b->port);
    check_room(ri, b->rooms[i]);
  }
}

static void check_render(pd_request_t *r, const pd_bootstrap_t *b, const char *path,
                         pd_batch_rule_t rule) {
  char *out = NULL;
  size_t n = 0;
  int rc = pd_request_render(r, b, &out, &n);
  FZ_CHECK(rc == 0 || rc == PD_ERR_NOMEM);
  if (rc) return;
  FZ_CHECK(n == strlen(out));
  /* R-BADINPUT: a leg body passes the rules its client body passed (a worker sharing the
   * parser, as pdref mock does, accepts it): valid UTF-8, no control bytes, no NUL, a prompt */
  pd_request_t again;
  char err[128];
  rc = pd_request_parse(&again, NULL, path, out, n, rule, err, sizeof err);
  FZ_CHECK(rc == 0 || rc == PD_ERR_NOMEM);
  if (rc == 0) {
    FZ_CHECK(again.batch_size == r->batch_size && again.is_stream == r->is_stream);
    pd_request_free(&again);
  }
  const char *end = NULL;
  cJSON *doc = cJSON_ParseWithLengthOpts(out, n, &end, 0);
  FZ_CHECK(cJSON_IsObject(doc) && end == out + n);
  if (r->batch_size)
    check_arrays(doc, b, (int)r->batch_size);
  else
    check_scalars(doc, b);
  const cJSON *dp = cJSON_GetObjectItemCaseSensitive(doc, "routed_dp_rank");
  FZ_CHECK(b->dp_rank < 0 ? 1 : cJSON_IsNumber(dp) && dp->valueint == b->dp_rank);
  cJSON_Delete(doc);
  pd_free(r->alloc, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader_t f = fz_reader(data, size);
  uint8_t m = fz_u8(&f);
  uint64_t seed = fz_u64(&f);
  const char *path = (m & 0x80) ? queried[(m & 3) % 3] : paths[(m & 3) % 3];
  pd_batch_rule_t rule = (pd_batch_rule_t)(((m >> 2) & 3) % 3);
  pd_request_t r;
  char err[128];
  int rc = pd_request_parse(&r, NULL, path, (const char *)f.p, f.n, rule, err, sizeof err);
  if (rc != 0) {
    FZ_CHECK(rc == PD_ERR_JSON || rc == PD_ERR_NOT_OBJECT || rc == PD_ERR_FIELD ||
          rc == PD_ERR_LIMIT || rc == PD_ERR_NOMEM);
    FZ_CHECK(err[0] != '\0' && r.json == NULL);
    return 0;
  }
  FZ_CHECK(r.batch_size <= PD_REQUEST_MAX_BATCH);
  FZ_CHECK(r.is_stream == 0 || r.is_stream == 1);
  uint64_t rooms[PD_REQUEST_MAX_BATCH];
  for (size_t i = 0; i < PD_REQUEST_MAX_BATCH; i++)
    rooms[i] = (seed + i * UINT64_C(0x9E3779B97F4A7C15)) & ROOM_MASK;
  pd_bootstrap_t b = {"10.0.0.1", (m & 0x40) ? -1 : 8998, rooms, (m & 0x10) ? "pd-7" : NULL,
                      (m & 0x20) ? 3 : -1, 0};
  check_render(&r, &b, path, rule);
  pd_request_free(&r);
  return 0;
}
