/* One parser of a generation request body for every worker (see pd_worker_body.h). */
#include "pd_worker_body.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_hash.h"
#include "pd_request.h"
#include "pd_worker.h"
#include "pd_worker_shared.h"

/* snprintf(dst, cap, "%.*s", cap - 1, src) without the format: at most cap - 1 bytes. */
static void copy_cut(char *dst, size_t cap, const char *src) {
  const char *nul = memchr(src, 0, cap - 1);
  size_t n = nul ? (size_t)(nul - src) : cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static size_t count_occurrences(const char *s, size_t len, const char *pat, const char **first) {
  size_t n = 0, pl = strlen(pat);
  *first = NULL;
  for (size_t i = 0; i + pl <= len; i++) { /* i only grows */
    const char *c = memchr(s + i, pat[0], len - pl - i + 1); /* skip to a first byte */
    if (!c) break;
    i = (size_t)(c - s);
    if (memcmp(s + i, pat, pl) != 0) continue;
    if (!n) *first = s + i;
    n++;
  }
  return n;
}

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

static uint64_t room_of_double(double d) {
  if (!(d >= 0)) return 0;
  return d >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)d;
}

/* The first room as written, when the key occurs once in the text and its value (or the
 * first item of its array) is a plain integer that agrees with cJSON's double. */
static uint64_t exact_room(const char *body, size_t len, double d) {
  uint64_t fallback = room_of_double(d);
  const char *k, *end = body + len;
  if (!body || count_occurrences(body, len, "\"bootstrap_room\"", &k) != 1) return fallback;
  const char *p = skip_ws(k + 16, end);
  if (p >= end || *p != ':') return fallback;
  p = skip_ws(p + 1, end);
  if (p < end && *p == '[') p = skip_ws(p + 1, end);
  char digits[24];
  size_t n = 0;
  while (p + n < end && n < 21 && p[n] >= '0' && p[n] <= '9') {
    digits[n] = p[n];
    n++;
  }
  if (!n || n > 20 || (p + n < end && p[n] && strchr(".eE", p[n]))) return fallback;
  digits[n] = 0;
  uint64_t v = strtoull(digits, NULL, 10);
  return fabs((double)v - d) <= fabs(d) * 1e-15 + 1.0 ? v : fallback;
}

/* Record the first problem only; later fields are still read. */
static int fail(int rc, int code, char *err, size_t errlen, const char *msg) {
  if (rc < 0) return rc;
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return code;
}

/* Every room of a batch (each item must get its own, G18): the first exact, the rest
 * through cJSON's double; an item that is not a non-negative number reads as 0. */
static int read_rooms(pd_worker_body_t *b, const cJSON *room, const pd_alloc_t *a, int rc,
                      char *err, size_t errlen) {
  b->rooms = pd_malloc(a, (size_t)b->n_rooms * sizeof *b->rooms);
  if (!b->rooms) {
    b->n_rooms = 1;
    return fail(rc, PD_ERR_NOMEM, err, errlen, "out of memory");
  }
  int i = 0;
  for (const cJSON *it = room->child; it && i < b->n_rooms; it = it->next, i++) {
    double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
    if (d < 0)
      rc = fail(rc, PD_ERR_FIELD, err, errlen,
                "bootstrap_room: expected an array of non-negative integers");
    b->rooms[i] = i ? room_of_double(d) : b->room;
  }
  return rc;
}

static int read_room(pd_worker_body_t *b, const cJSON *room, const char *body, size_t len,
                     const pd_alloc_t *a, int rc, char *err, size_t errlen) {
  if (!room) return rc;
  b->has_room_key = 1;
  const cJSON *first = room;
  b->n_rooms = 1;
  if (cJSON_IsArray(room)) {
    b->is_room_array = 1;
    b->n_rooms = cJSON_GetArraySize(room);
    first = cJSON_GetArrayItem(room, 0);
  }
  if (cJSON_IsNull(room)) return rc;
  if (!cJSON_IsNumber(first) || first->valuedouble < 0)
    rc = fail(rc, PD_ERR_FIELD, err, errlen,
              "bootstrap_room: expected a non-negative integer or an array of them");
  else b->has_room = 1;
  if (b->has_room) b->room = exact_room(body, len, first->valuedouble);
  return b->n_rooms > 1 ? read_rooms(b, room, a, rc, err, errlen) : rc;
}

static int read_address(pd_worker_body_t *b, const cJSON *host, const cJSON *port, int rc,
                        char *err, size_t errlen) {
  /* a batch carries arrays, one entry per item (R1.25, M8.2): the first item's address is
   * the batch's, as the first room keys the rendezvous */
  if (cJSON_IsArray(host)) host = cJSON_GetArrayItem(host, 0);
  if (cJSON_IsArray(port)) port = cJSON_GetArrayItem(port, 0);
  if (cJSON_IsString(host)) {
    if (strlen(host->valuestring) >= sizeof b->boot_host)
      rc = fail(rc, PD_ERR_FIELD, err, errlen, "bootstrap_host: longer than 255 bytes");
    else copy_cut(b->boot_host, sizeof b->boot_host, host->valuestring);
  }
  if (cJSON_IsNumber(port)) {
    if (port->valuedouble < 0 || port->valuedouble > 65535)
      rc = fail(rc, PD_ERR_FIELD, err, errlen, "bootstrap_port: expected an integer in 0..65535");
    else b->boot_port = (int)port->valuedouble;
  }
  return rc;
}

/* ---- the prompt's length ---- */

#define PROMPT_DEPTH 4 /* messages[].content[].text is the deepest shape a route takes */

static uint64_t count_words(const char *p) {
  uint64_t n = 0;
  for (int in_word = 0; *p; p++) {
    int is_space = *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r';
    n += !is_space && !in_word;
    in_word = !is_space;
  }
  return n;
}

/* A string counts its words, a number is one token id, an array the sum of its items; a
 * chat message object counts its "content" (a string, or parts with "text"). */
static uint64_t count_tokens(const cJSON *v, int depth) {
  if (!v || depth > PROMPT_DEPTH) return 0;
  if (cJSON_IsString(v)) return count_words(v->valuestring);
  if (cJSON_IsNumber(v)) return 1;
  if (cJSON_IsObject(v)) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
    return count_tokens(c ? c : cJSON_GetObjectItemCaseSensitive(v, "text"), depth + 1);
  }
  uint64_t n = 0;
  for (const cJSON *it = cJSON_IsArray(v) ? v->child : NULL; it; it = it->next)
    n += count_tokens(it, depth + 1);
  return n;
}

/* The top-level members the reader looks at, each its first occurrence (as
 * cJSON_GetObjectItemCaseSensitive finds it), found in one pass over the body's members. */
enum {
  M_STREAM, M_RETURN_LOGPROB, M_LOGPROBS, M_ROOM, M_HOST, M_PORT, M_RID, M_TEXT, M_INPUT_IDS,
  M_PROMPT, M_MESSAGES, M_SAMPLING, M_MAX_TOKENS, M_MAX_COMPLETION, M_STREAM_OPTIONS, M_MODEL,
  M_KVP, M_ROUTED_DP, M_PREFILL_DP, M_COUNT
};
static const char *const member_names[M_COUNT] = {
    "stream", "return_logprob", "logprobs", "bootstrap_room", "bootstrap_host", "bootstrap_port",
    "rid", "text", "input_ids", "prompt", "messages", "sampling_params", "max_tokens",
    "max_completion_tokens", "stream_options", "model", "kv_transfer_params", "routed_dp_rank",
    "disagg_prefill_dp_rank"};

static void read_members(const cJSON *j, const cJSON *m[M_COUNT]) {
  for (int k = 0; k < M_COUNT; k++) m[k] = NULL;
  /* a member without a name ends the search, as it ends cJSON's (an array's items) */
  for (const cJSON *c = j ? j->child : NULL; c && c->string; c = c->next) /* bounded by the list */
    for (int k = 0; k < M_COUNT; k++)
      if (!m[k] && c->string[0] == member_names[k][0] && strcmp(c->string, member_names[k]) == 0) {
        m[k] = c;
        break;
      }
}

static uint32_t prompt_tokens(const cJSON *const m[M_COUNT]) {
  static const int keys[] = {M_TEXT, M_INPUT_IDS, M_PROMPT, M_MESSAGES};
  uint64_t n = 0;
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    n += count_tokens(m[keys[i]], 0);
  return n < 1 ? 1 : n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* ---- vLLM's kv_transfer_params and the output limit ---- */

static void copy_str(char *dst, size_t cap, const cJSON *v, int *has) {
  if (!cJSON_IsString(v)) return;
  copy_cut(dst, cap, v->valuestring);
  *has = 1;
}

static uint32_t count_block_ids(const cJSON *v, int depth) {
  if (cJSON_IsNumber(v)) return 1;
  uint32_t n = 0;
  for (const cJSON *it = cJSON_IsArray(v) && depth < 2 ? v->child : NULL; it; it = it->next)
    n += count_block_ids(it, depth + 1);
  return n;
}

static int read_kvp(pd_worker_kvp_t *p, const cJSON *o, int rc, char *err, size_t errlen) {
  p->port = -1;
  if (!o || cJSON_IsNull(o)) return rc;
  if (!cJSON_IsObject(o))
    return fail(rc, PD_ERR_FIELD, err, errlen, "kv_transfer_params: expected an object or null");
  p->is_present = 1;
  p->do_remote_decode = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "do_remote_decode"));
  p->do_remote_prefill = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "do_remote_prefill"));
  copy_str(p->engine_id, sizeof p->engine_id,
           cJSON_GetObjectItemCaseSensitive(o, "remote_engine_id"), &p->has_engine_id);
  copy_str(p->request_id, sizeof p->request_id,
           cJSON_GetObjectItemCaseSensitive(o, "remote_request_id"), &p->has_request_id);
  copy_str(p->host, sizeof p->host, cJSON_GetObjectItemCaseSensitive(o, "remote_host"),
           &p->has_host);
  const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(o, "remote_block_ids");
  if (cJSON_IsArray(blocks)) {
    p->has_block_ids = 1;
    p->n_block_ids = count_block_ids(blocks, 0);
  }
  const cJSON *port = cJSON_GetObjectItemCaseSensitive(o, "remote_port");
  if (cJSON_IsNumber(port) && port->valuedouble >= 0 && port->valuedouble <= 65535) {
    p->port = (int)port->valuedouble;
    p->has_port = 1;
  } /* another port is as good as none: decode computes locally (V1.8), it does not refuse */
  return rc;
}

int pd_worker_kvp_is_valid(const pd_worker_kvp_t *p) {
  return p->is_present && p->has_block_ids && p->has_engine_id && p->has_request_id &&
         p->has_host && p->has_port;
}

int pd_worker_kvp_mode(const pd_worker_kvp_t *p, int is_decode) {
  if (!p->is_present) return PD_KV_MODE_NONE;
  if (!is_decode) return p->do_remote_decode ? PD_KV_MODE_REMOTE_DECODE : PD_KV_MODE_NONE;
  if (!p->do_remote_prefill) return PD_KV_MODE_NONE;
  return pd_worker_kvp_is_valid(p) ? PD_KV_MODE_REMOTE_PREFILL : PD_KV_MODE_INVALID;
}

uint64_t pd_worker_kv_key(const char *request_id) {
  return pd_fnv1a_str(PD_FNV1A_OFFSET, request_id);
}

static void read_max_tokens(pd_worker_body_t *b, const cJSON *const m[M_COUNT]) {
  const cJSON *sp = m[M_SAMPLING];
  const cJSON *cands[] = {m[M_MAX_TOKENS], m[M_MAX_COMPLETION],
                          cJSON_IsObject(sp) ? cJSON_GetObjectItemCaseSensitive(sp, "max_new_tokens")
                                             : NULL};
  for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
    if (!cJSON_IsNumber(cands[i]) || !(cands[i]->valuedouble >= 0)) continue;
    double d = cands[i]->valuedouble;
    b->max_tokens = d >= 4294967295.0 ? UINT32_MAX : (uint32_t)d;
    b->has_max_tokens = 1;
    return;
  }
}

/* What OpenAI's shapes echo (pd_wire_api_t): a model name that needs no escaping. */
static void read_api(pd_wire_api_t *api, const cJSON *const m[M_COUNT], uint32_t prompt_tokens) {
  api->prompt_tokens = prompt_tokens;
  const cJSON *so = m[M_STREAM_OPTIONS];
  api->has_usage =
      cJSON_IsObject(so) && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(so, "include_usage"));
  const cJSON *model = m[M_MODEL];
  if (!cJSON_IsString(model) || strlen(model->valuestring) >= sizeof api->model) return;
  for (const char *p = model->valuestring; *p; p++)
    if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\') return;
  copy_cut(api->model, sizeof api->model, model->valuestring);
}

/* S2.14: a DP rank field, -1 when absent, null or not a non-negative integer below 2^20. */
static int dp_rank(const cJSON *v) {
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble >= 32768.0) return -1;
  return (int)v->valuedouble;
}

void pd_worker_body_route(pd_worker_body_t *b, const char *path) {
  pd_route_t r = PD_ROUTE_GENERATE;
  if (!path || pd_request_route(path, &r) < 0) r = PD_ROUTE_GENERATE;
  b->api.route = (int)r;
}

int pd_worker_body_read(pd_worker_body_t *b, const cJSON *j, const char *body, size_t len,
                        const pd_alloc_t *a, char *err, size_t errlen) {
  memset(b, 0, sizeof *b);
  b->boot_port = -1;
  int rc = 0;
  const cJSON *m[M_COUNT];
  read_members(j, m);
  b->is_stream = cJSON_IsTrue(m[M_STREAM]);
  const cJSON *lp = m[M_RETURN_LOGPROB];
  const cJSON *lp2 = m[M_LOGPROBS];
  b->has_logprob = cJSON_IsTrue(lp) || cJSON_IsTrue(lp2) || cJSON_IsNumber(lp2);
  const cJSON *room = m[M_ROOM];
  const cJSON *host = m[M_HOST];
  const cJSON *port = m[M_PORT];
  b->rooms_hash = pd_wire_rooms_hash(room, host, port);
  rc = read_address(b, host, port, rc, err, errlen);
  rc = read_room(b, room, body, len, a, rc, err, errlen);
  const cJSON *rid = m[M_RID];
  if (cJSON_IsArray(rid)) rid = cJSON_GetArrayItem(rid, 0);
  if (cJSON_IsString(rid)) {
    if (strlen(rid->valuestring) >= sizeof b->rid)
      rc = fail(rc, PD_ERR_FIELD, err, errlen, "rid: longer than 255 bytes");
    copy_cut(b->rid, sizeof b->rid, rid->valuestring);
    b->has_rid = 1;
  }
  b->prompt_tokens = prompt_tokens(m);
  read_api(&b->api, m, b->prompt_tokens);
  read_max_tokens(b, m);
  b->routed_dp_rank = dp_rank(m[M_ROUTED_DP]);
  b->prefill_dp_rank = dp_rank(m[M_PREFILL_DP]);
  return read_kvp(&b->kvp, m[M_KVP], rc, err, errlen);
}
