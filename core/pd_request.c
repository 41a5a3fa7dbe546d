/* pd_request: parse once, validate the few fields the gateway reads, render leg bodies.
 * Bootstrap rooms are printed as raw integer literals: cJSON keeps numbers as doubles and
 * prints integers above INT_MAX in %g form, which would round a 63-bit room. */
#include "pd_request.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pd_err.h"
#include "pd_json.h"

/* Largest integer a double holds exactly; counts above it are not meaningful. */
#define REQ_MAX_EXACT_INT 9007199254740992.0

static const struct {
  const char *path;
  pd_route_t route;
} routes[] = {
    {"/generate", PD_ROUTE_GENERATE},
    {"/v1/completions", PD_ROUTE_COMPLETIONS},
    {"/v1/chat/completions", PD_ROUTE_CHAT},
};
#define REQ_NROUTES (sizeof routes / sizeof routes[0])

int pd_request_route(const char *path, pd_route_t *out) {
  if (!path || !out) return PD_ERR_ROUTE;
  const char *q = strchr(path, '?');
  size_t n = q ? (size_t)(q - path) : strlen(path);
  for (size_t i = 0; i < REQ_NROUTES; i++) {
    if (strlen(routes[i].path) == n && memcmp(routes[i].path, path, n) == 0) {
      *out = routes[i].route;
      return 0;
    }
  }
  return PD_ERR_ROUTE;
}

const char *pd_route_path(pd_route_t route) {
  for (size_t i = 0; i < REQ_NROUTES; i++)
    if (routes[i].route == route) return routes[i].path;
  return "";
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int fail(char *err, size_t errlen, int code, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

static int is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* A JSON number that is an integer in [0, max]. */
static int get_uint(const cJSON *it, double max, uint64_t *v) {
  if (!cJSON_IsNumber(it)) return 0;
  double d = it->valuedouble;
  if (!(d >= 0.0 && d <= max)) return 0; /* also rejects NaN */
  uint64_t u = (uint64_t)d;
  if ((double)u != d) return 0;
  *v = u;
  return 1;
}

static const cJSON *field(const cJSON *obj, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* Optional token count: absent or null is 0; otherwise a non-negative integer < 2^32. */
static int read_count(const cJSON *it, const char *name, uint32_t *out, char *err,
                      size_t errlen) {
  uint64_t v = 0;
  if (!it || cJSON_IsNull(it)) return 0;
  if (!get_uint(it, (double)UINT32_MAX, &v))
    return fail(err, errlen, PD_ERR_FIELD, "%s: expected a non-negative integer", name);
  *out = (uint32_t)v;
  return 0;
}

/* R1.2: stream on every route; the logprob flag is typed per route as smg's serde would. */
static int read_flags(pd_request_t *r, const cJSON *root, char *err, size_t errlen) {
  const cJSON *st = field(root, "stream");
  if (st && !cJSON_IsBool(st)) return fail(err, errlen, PD_ERR_FIELD, "stream: expected a boolean");
  r->is_stream = cJSON_IsTrue(st) ? 1 : 0;
  uint64_t v = 0;
  const cJSON *lp;
  switch (r->route) {
  case PD_ROUTE_GENERATE: /* Option<bool>: null is absent */
    lp = field(root, "return_logprob");
    if (lp && !cJSON_IsNull(lp) && !cJSON_IsBool(lp))
      return fail(err, errlen, PD_ERR_FIELD, "return_logprob: expected a boolean");
    r->return_logprob = cJSON_IsTrue(lp) ? 1 : 0;
    break;
  case PD_ROUTE_CHAT: /* bool with a default: null is rejected */
    lp = field(root, "logprobs");
    if (lp && !cJSON_IsBool(lp))
      return fail(err, errlen, PD_ERR_FIELD, "logprobs: expected a boolean");
    r->return_logprob = cJSON_IsTrue(lp) ? 1 : 0;
    break;
  case PD_ROUTE_COMPLETIONS: /* Option<u32>: any present non-null value asks for logprobs */
    lp = field(root, "logprobs");
    if (lp && !cJSON_IsNull(lp) && !get_uint(lp, (double)UINT32_MAX, &v))
      return fail(err, errlen, PD_ERR_FIELD, "logprobs: expected a non-negative integer or null");
    r->return_logprob = lp && !cJSON_IsNull(lp);
    break;
  }
  return 0;
}

static int read_max_tokens(pd_request_t *r, const cJSON *root, char *err, size_t errlen) {
  r->max_tokens = 0;
  r->is_zero_tokens = 0;
  if (r->route == PD_ROUTE_GENERATE) {
    const cJSON *sp = field(root, "sampling_params");
    if (sp && !cJSON_IsNull(sp) && !cJSON_IsObject(sp))
      return fail(err, errlen, PD_ERR_FIELD, "sampling_params: expected an object");
    const cJSON *mn = cJSON_IsObject(sp) ? field(sp, "max_new_tokens") : NULL;
    int rc = read_count(mn, "sampling_params.max_new_tokens", &r->max_tokens, err, errlen);
    r->is_zero_tokens = rc == 0 && mn && !cJSON_IsNull(mn) && r->max_tokens == 0;
    return rc;
  }
  uint32_t mt = 0, mct = 0;
  int rc = read_count(field(root, "max_tokens"), "max_tokens", &mt, err, errlen);
  if (rc == 0)
    rc = read_count(field(root, "max_completion_tokens"), "max_completion_tokens", &mct, err,
                    errlen);
  const cJSON *c = field(root, "max_completion_tokens"), *m = field(root, "max_tokens");
  int is_newer = c && !cJSON_IsNull(c);
  r->max_tokens = is_newer ? mct : mt; /* the newer field wins, as in smg */
  r->is_zero_tokens = rc == 0 && r->max_tokens == 0 && (is_newer || (m && !cJSON_IsNull(m)));
  return rc;
}

typedef enum { SHAPE_EMPTY, SHAPE_NUMBERS, SHAPE_STRINGS, SHAPE_ARRAYS, SHAPE_MIXED } shape_t;

/* What an array holds, and how many. */
static shape_t array_shape(const cJSON *a, uint64_t *n) {
  shape_t s = SHAPE_EMPTY;
  uint64_t k = 0;
  for (const cJSON *c = a->child; c; c = c->next, k++) { /* bounded by the array length */
    shape_t cs = cJSON_IsNumber(c) ? SHAPE_NUMBERS : cJSON_IsString(c) ? SHAPE_STRINGS
                 : cJSON_IsArray(c) ? SHAPE_ARRAYS : SHAPE_MIXED;
    s = (s == SHAPE_EMPTY || s == cs) ? cs : SHAPE_MIXED;
  }
  *n = k;
  return s;
}

/* /generate: smg counts only input_ids list-of-lists (R1.3); mini_lb a text list or
 * input_ids[0] a list (M8.2); the reference both, and rejects what SGLang would. */
static int generate_batch(const cJSON *root, pd_batch_rule_t rule, uint64_t *n,
                          const char **what, char *err, size_t errlen) {
  const cJSON *text = field(root, "text"), *ids = field(root, "input_ids");
  uint64_t k = 0;
  *n = 0;
  if (rule == PD_BATCH_RULE_MINILB) {
    if (text && !cJSON_IsNull(text)) { /* text wins even when input_ids is also given */
      if (cJSON_IsArray(text)) array_shape(text, n);
      *what = "text";
    } else if (cJSON_IsArray(ids) && cJSON_IsArray(ids->child)) {
      array_shape(ids, n);
      *what = "input_ids";
    }
    return 0;
  }
  if (rule == PD_BATCH_RULE_REFERENCE && cJSON_IsArray(text)) {
    shape_t s = array_shape(text, &k);
    if (s != SHAPE_STRINGS && s != SHAPE_EMPTY)
      return fail(err, errlen, PD_ERR_FIELD, "text: expected a string or an array of strings");
    *n = k;
    *what = "text";
    return 0;
  }
  if (!cJSON_IsArray(ids)) return 0;
  shape_t s = array_shape(ids, &k);
  if (s == SHAPE_ARRAYS) *n = k;
  *what = "input_ids";
  if (rule == PD_BATCH_RULE_REFERENCE && s != SHAPE_ARRAYS && s != SHAPE_NUMBERS &&
      s != SHAPE_EMPTY)
    return fail(err, errlen, PD_ERR_FIELD,
                "input_ids: expected an array of integers or an array of arrays");
  return 0;
}

static int chat_batch(const cJSON *root, pd_batch_rule_t rule, uint64_t *n, char *err,
                      size_t errlen) {
  const cJSON *nn = field(root, "n");
  uint64_t v = 0;
  *n = 0;
  if (rule == PD_BATCH_RULE_MINILB || !nn || cJSON_IsNull(nn)) return 0;
  if (!get_uint(nn, REQ_MAX_EXACT_INT, &v))
    return fail(err, errlen, PD_ERR_FIELD, "n: expected a non-negative integer");
  if (v > 1) *n = v;
  return 0;
}

static int completions_batch(const cJSON *root, pd_batch_rule_t rule, uint64_t *n, char *err,
                             size_t errlen) {
  const cJSON *prompt = field(root, "prompt");
  uint64_t k = 0;
  *n = 0;
  if (rule == PD_BATCH_RULE_MINILB || !cJSON_IsArray(prompt)) return 0;
  shape_t s = array_shape(prompt, &k);
  if (rule == PD_BATCH_RULE_SMG) {
    *n = k; /* any non-empty array, even one tokenized prompt */
    return 0;
  }
  if (s == SHAPE_MIXED)
    return fail(err, errlen, PD_ERR_FIELD,
                "prompt: expected a string or an array of strings, integers or arrays");
  if (s == SHAPE_STRINGS || s == SHAPE_ARRAYS) *n = k;
  return 0;
}

/* R-BADINPUT: a prompt the workers can start from, per route. Only presence and type; the
 * shapes of arrays are R-BATCH's (each mode's rule). */
static int read_prompt(pd_route_t route, const cJSON *root, char *err, size_t errlen) {
  const cJSON *t, *ids, *emb, *m;
  switch (route) {
  case PD_ROUTE_GENERATE:
    t = field(root, "text"), ids = field(root, "input_ids"), emb = field(root, "input_embeds");
    if (t && !cJSON_IsNull(t) && !cJSON_IsString(t) && !cJSON_IsArray(t))
      return fail(err, errlen, PD_ERR_FIELD, "text: expected a string or an array of strings");
    if (ids && !cJSON_IsNull(ids) && !cJSON_IsArray(ids))
      return fail(err, errlen, PD_ERR_FIELD, "input_ids: expected an array");
    if (emb && !cJSON_IsNull(emb) && !cJSON_IsArray(emb))
      return fail(err, errlen, PD_ERR_FIELD, "input_embeds: expected an array");
    if ((!t || cJSON_IsNull(t)) && !cJSON_IsArray(ids) && !cJSON_IsArray(emb))
      return fail(err, errlen, PD_ERR_FIELD,
                  "text|input_ids: a prompt is required (text, input_ids or input_embeds)");
    return 0;
  case PD_ROUTE_COMPLETIONS:
    t = field(root, "prompt");
    if (!t || cJSON_IsNull(t)) return fail(err, errlen, PD_ERR_FIELD, "prompt: required");
    if (!cJSON_IsString(t) && !cJSON_IsArray(t))
      return fail(err, errlen, PD_ERR_FIELD, "prompt: expected a string or an array");
    return 0;
  case PD_ROUTE_CHAT:
    m = field(root, "messages");
    if (!m || cJSON_IsNull(m)) return fail(err, errlen, PD_ERR_FIELD, "messages: required");
    if (!cJSON_IsArray(m) || !m->child)
      return fail(err, errlen, PD_ERR_FIELD, "messages: expected a non-empty array of objects");
    for (const cJSON *c = m->child; c; c = c->next) /* bounded by the array length */
      if (!cJSON_IsObject(c))
        return fail(err, errlen, PD_ERR_FIELD, "messages: expected a non-empty array of objects");
    return 0;
  }
  return 0;
}

static int read_batch(pd_request_t *r, const cJSON *root, pd_batch_rule_t rule, char *err,
                      size_t errlen) {
  uint64_t n = 0;
  const char *what = "n";
  int rc = 0;
  switch (r->route) {
  case PD_ROUTE_GENERATE: rc = generate_batch(root, rule, &n, &what, err, errlen); break;
  case PD_ROUTE_CHAT: rc = chat_batch(root, rule, &n, err, errlen); break;
  case PD_ROUTE_COMPLETIONS:
    what = "prompt";
    rc = completions_batch(root, rule, &n, err, errlen);
    break;
  }
  if (rc < 0) return rc;
  if (n > PD_REQUEST_MAX_BATCH)
    return fail(err, errlen, PD_ERR_LIMIT, "%s: batch of %" PRIu64 " exceeds the limit of %u",
                what, n, PD_REQUEST_MAX_BATCH);
  r->batch_size = (uint32_t)n;
  return 0;
}

/* Length of the UTF-8 sequence at p (RFC 3629: no overlongs, no surrogates, at most
 * U+10FFFF), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p, size_t avail) {
  unsigned char c = p[0];
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c < 0xC2 || c > 0xF4) return 0;
  if (c == 0xE0) lo = 0xA0;
  if (c == 0xED) hi = 0x9F;
  if (c == 0xF0) lo = 0x90;
  if (c == 0xF4) hi = 0x8F;
  if (avail < n || p[1] < lo || p[1] > hi) return 0;
  for (size_t k = 2; k < n; k++)
    if ((p[k] & 0xC0) != 0x80) return 0;
  return n;
}

typedef struct {
  int in_str, depth;
  size_t str_at, cand_at, cand_len, key_at, key_len; /* top-level member name, as bytes */
} scan_t;

static void scan_punct(scan_t *s, unsigned char c, size_t i) {
  if (c == '"') s->in_str = 1, s->str_at = i + 1;
  else if (c == '{' || c == '[') s->depth++;
  else if (c == '}' || c == ']') s->depth--;
  else if (c == ':' && s->depth == 1) s->key_at = s->cand_at, s->key_len = s->cand_len;
}

/* R-BADINPUT: what cJSON would accept but could not forward as sent. Invalid UTF-8 and raw
 * control characters (JSON strings may not hold them; outside strings only whitespace) are
 * refused at their byte offset; so is the escape \u0000, which cJSON's NUL-terminated strings
 * would silently cut (the message names the top-level member that holds it). Not a parser:
 * it only tracks string boundaries and the top-level member name. */
static int scan_bytes(const unsigned char *b, size_t len, char *err, size_t errlen) {
  scan_t s = {0};
  for (size_t i = 0; i < len;) { /* each turn advances i by at least 1 */
    unsigned char c = b[i];
    if (c >= 0x80) {
      size_t n = utf8_len(b + i, len - i);
      if (!n) return fail(err, errlen, PD_ERR_JSON, "body: invalid UTF-8 at byte %zu", i);
      i += n;
      continue;
    }
    if (c < 0x20 && (s.in_str || !is_json_space((char)c)))
      return fail(err, errlen, PD_ERR_JSON, "body: control character 0x%02x at byte %zu", c, i);
    if (!s.in_str) {
      scan_punct(&s, c, i);
    } else if (c == '\\') {
      if (len - i >= 6 && memcmp(b + i + 1, "u0000", 5) == 0)
        return fail(err, errlen, PD_ERR_FIELD,
                    "%.*s: \\u0000 (NUL) at byte %zu is not accepted: it would cut the string",
                    s.key_len ? (int)(s.key_len > 64 ? 64 : s.key_len) : 4,
                    s.key_len ? (const char *)b + s.key_at : "body", i);
      i += 2;
      continue;
    } else if (c == '"') {
      s.in_str = 0;
      if (s.depth == 1) s.cand_at = s.str_at, s.cand_len = i - s.str_at;
    }
    i++;
  }
  return 0;
}

/* Parse body[0, len) as one JSON value followed only by whitespace. */
static int parse_body(const char *body, size_t len, cJSON **out, char *err, size_t errlen) {
  const char *end = body;
  cJSON *root = (body && len) ? cJSON_ParseWithLengthOpts(body, len, &end, 0) : NULL;
  if (root) {
    const char *p = end;
    while (p < body + len && is_json_space(*p)) p++; /* bounded by len */
    if (p != body + len) {
      cJSON_Delete(root);
      root = NULL;
      end = p;
    }
  }
  if (!root) {
    size_t off = (end && body && end >= body) ? (size_t)(end - body) : 0;
    return fail(err, errlen, PD_ERR_JSON, "body: malformed JSON at byte %zu",
                off < len ? off : len);
  }
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return fail(err, errlen, PD_ERR_NOT_OBJECT, "body: expected a JSON object");
  }
  *out = root;
  return 0;
}

int pd_request_parse(pd_request_t *r, const pd_alloc_t *alloc, const char *path,
                     const char *body, size_t len, pd_batch_rule_t rule, char *err,
                     size_t errlen) {
  memset(r, 0, sizeof *r);
  r->alloc = alloc;
  if (err && errlen) err[0] = '\0';
  if (pd_request_route(path, &r->route) < 0)
    return fail(err, errlen, PD_ERR_ROUTE, "path: unknown route %.200s", path ? path : "(null)");
  if (len > PD_REQUEST_MAX_BODY_BYTES)
    return fail(err, errlen, PD_ERR_TOO_LARGE, "body: %zu bytes exceeds the limit of %u", len,
                PD_REQUEST_MAX_BODY_BYTES);
  cJSON *root = NULL;
  int rc = body ? scan_bytes((const unsigned char *)body, len, err, errlen) : 0;
  if (rc == 0) rc = parse_body(body, len, &root, err, errlen);
  if (rc < 0) return rc;
  rc = read_flags(r, root, err, errlen);
  if (rc == 0) rc = read_max_tokens(r, root, err, errlen);
  if (rc == 0) rc = read_batch(r, root, rule, err, errlen);
  if (rc == 0) rc = read_prompt(r->route, root, err, errlen);
  if (rc < 0) {
    cJSON_Delete(root);
    return rc;
  }
  r->json = root;
  return 0;
}

void pd_request_free(pd_request_t *r) {
  if (!r) return;
  cJSON_Delete(r->json);
  r->json = NULL;
  cJSON_free(r->base);
  r->base = NULL;
}

/* ---- the same bytes without a tree: the client's members printed once, ours by hand ---- */

typedef struct {
  char *p;
  size_t n, cap;
} out_t;

static void put(out_t *o, const char *s, size_t k) {
  assert(o->n + k <= o->cap); /* render_cap bounds every write */
  memcpy(o->p + o->n, s, k);
  o->n += k;
}

#define PUT_LIT(o, lit) put((o), (lit), sizeof(lit) - 1)

/* A string as cJSON prints one (print_string_ptr): ", \ and \b \f \n \r \t escaped by name,
 * other bytes below 0x20 as \u00xx, every other byte as it is. At most 6 bytes per byte. */
static void put_string(out_t *o, const char *s) {
  static const char hex[] = "0123456789abcdef";
  PUT_LIT(o, "\"");
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    char e = *c == '"' ? '"' : *c == '\\' ? '\\' : *c == '\b' ? 'b' : *c == '\f' ? 'f'
             : *c == '\n' ? 'n' : *c == '\r' ? 'r' : *c == '\t' ? 't' : 0;
    if (e) {
      char esc[2] = {'\\', e};
      put(o, esc, 2);
    } else if (*c < 0x20) {
      char u[6] = {'\\', 'u', '0', '0', hex[*c >> 4], hex[*c & 15]};
      put(o, u, 6);
    } else {
      put(o, (const char *)c, 1);
    }
  }
  PUT_LIT(o, "\"");
}

static void put_u64(out_t *o, uint64_t v) {
  char d[24];
  size_t k = sizeof d;
  do d[--k] = (char)('0' + v % 10); while ((v /= 10) && k);
  put(o, d + k, sizeof d - k);
}

/* An int as cJSON prints a number holding it ("%d"). */
static void put_int(out_t *o, int v) {
  if (v < 0) PUT_LIT(o, "-");
  put_u64(o, v < 0 ? (uint64_t)-(int64_t)v : (uint64_t)v);
}

/* Item i of a bootstrap field (kind: 0 host, 1 port, 2 room, 3 rid), as make_array's. */
static void put_item(out_t *o, const pd_bootstrap_t *b, uint32_t i, int kind, int is_batch) {
  char lit[24 + 16];
  switch (kind) {
  case 0: put_string(o, b->host); return;
  case 1:
    if (b->port < 0) PUT_LIT(o, "null");
    else put_int(o, b->port);
    return;
  case 2: put_u64(o, b->rooms[i]); return;
  default: /* a batch's: "<rid>-<i as 4 hex digits>" */
    put_string(o, b->rid);
    if (!is_batch) return;
    o->n--; /* reopen the string: the suffix needs no escaping */
    snprintf(lit, sizeof lit, "-%04x\"", (unsigned)i);
    put(o, lit, strlen(lit));
  }
}

static void put_member(out_t *o, const char *key, const pd_bootstrap_t *b, uint32_t n, int kind) {
  PUT_LIT(o, ",\"");
  put(o, key, strlen(key));
  PUT_LIT(o, "\":");
  if (n) PUT_LIT(o, "[");
  for (uint32_t i = 0; i < (n ? n : 1); i++) {
    if (i) PUT_LIT(o, ",");
    put_item(o, b, i, kind, n != 0);
  }
  if (n) PUT_LIT(o, "]");
}

static const char *const boot_keys[] = {"bootstrap_host", "bootstrap_port", "bootstrap_room",
                                        "rid", "routed_dp_rank", "disagg_prefill_dp_rank"};

/* Whether base_of leaves boot_keys[k] out under flags: host, port and room always; rid with
 * 1; routed_dp_rank with 2 or 4; disagg_prefill_dp_rank with 4 (R-PAIR-RANK). */
static int is_left_out(int k, int flags) {
  return k < 3 || (k == 3 && (flags & 1)) || (k == 4 && (flags & 6)) || (k == 5 && (flags & 4));
}

/* The client's document printed without the members a render sets (always host, port and
 * room; rid and the DP ranks when flags ask), once per flags. 0, or PD_ERR_NOMEM. */
static int base_of(pd_request_t *r, int flags) {
  if (r->base && r->base_flags == flags) return 0;
  cJSON_free(r->base);
  r->base = NULL;
  cJSON *doc = r->json;
  for (int k = 0; k < 6 && doc == r->json; k++)
    if (is_left_out(k, flags) && cJSON_GetObjectItemCaseSensitive(doc, boot_keys[k]))
      doc = cJSON_Duplicate(r->json, 1); /* the client sent one: print a copy without them */
  if (!doc) return PD_ERR_NOMEM;
  for (int k = 0; k < 6 && doc != r->json; k++) {
    int n = cJSON_GetArraySize(doc);
    for (int i = 0; i < n && is_left_out(k, flags) &&
                    cJSON_GetObjectItemCaseSensitive(doc, boot_keys[k]); i++)
      cJSON_DeleteItemFromObjectCaseSensitive(doc, boot_keys[k]);
  }
  r->base = pd_json_print(doc);
  if (doc != r->json) cJSON_Delete(doc);
  if (!r->base) return PD_ERR_NOMEM;
  r->base_len = strlen(r->base);
  r->base_flags = flags;
  assert(r->base_len >= 2 && r->base[0] == '{' && r->base[r->base_len - 1] == '}');
  return 0;
}

/* Bytes a render may write after the client's members (an upper bound). */
static size_t render_cap(const pd_request_t *r, const pd_bootstrap_t *b) {
  size_t n = r->batch_size ? r->batch_size : 1;
  size_t host = 6 * strlen(b->host) + 2, rid = b->rid ? 6 * strlen(b->rid) + 2 + 5 : 0;
  return 128 + n * (host + 12 + 21 + rid + 4);
}

int pd_request_render(pd_request_t *r, const pd_bootstrap_t *b, char **out, size_t *out_len) {
  if (!r || !r->json || !b || !b->rooms || !b->host || !out) return PD_ERR_INVAL;
  int flags = (b->rid ? 1 : 0) | (b->dp_rank >= 0 ? 2 : 0) | (b->is_dp_stripped ? 4 : 0);
  int rc = base_of(r, flags);
  if (rc) return rc;
  size_t cap = r->base_len + render_cap(r, b) + 1;
  out_t o = {pd_malloc(r->alloc, cap), 0, cap};
  if (!o.p) return PD_ERR_NOMEM;
  put(&o, r->base, r->base_len - 1); /* without its closing brace */
  size_t first = o.n; /* an empty document: the first member has no comma before it */
  uint32_t n = r->batch_size;
  put_member(&o, "bootstrap_host", b, n, 0);
  put_member(&o, "bootstrap_port", b, n, 1);
  put_member(&o, "bootstrap_room", b, n, 2);
  if (b->rid) put_member(&o, "rid", b, n, 3);
  if (b->dp_rank >= 0) {
    PUT_LIT(&o, ",\"routed_dp_rank\":");
    put_int(&o, b->dp_rank);
  }
  if (r->base_len == 2) { /* "{}": drop the comma */
    memmove(o.p + first, o.p + first + 1, o.n - first - 1);
    o.n--;
  }
  PUT_LIT(&o, "}");
  o.p[o.n] = '\0';
  *out = o.p;
  if (out_len) *out_len = o.n;
  return 0;
}
