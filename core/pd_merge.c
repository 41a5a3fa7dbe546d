/* pd_merge: logprob merging on cJSON trees. Arrays are spliced by moving decode's elements
 * behind prefill's (no copies), then the decode document is printed unformatted. */
#include "pd_merge.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "pd_err.h"
#include "pd_json.h"

/* The first key is required on both sides; the others merge only when both carry arrays. */
static const char *const merge_keys[] = {"input_token_logprobs", "input_top_logprobs",
                                         "input_token_ids_logprobs"};
#define MERGE_NKEYS (sizeof merge_keys / sizeof merge_keys[0])
_Static_assert(MERGE_NKEYS == PD_MERGE_NKEYS, "pd_merge_prefill_t holds every key");

static int is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Rust's str::trim set, restricted to ASCII (serde then sees no further whitespace). */
static int is_ascii_space(char c) { return is_json_space(c) || c == '\v' || c == '\f'; }

/* Parse text[0, len) as exactly one JSON value (trailing whitespace allowed); NULL if not. */
static cJSON *parse_exact(const char *text, size_t len) {
  if (!text) return NULL;
  while (len > 0 && is_json_space(text[len - 1])) len--;
  if (len == 0) return NULL;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (root && end != text + len) {
    cJSON_Delete(root);
    root = NULL;
  }
  return root;
}

/* Print root between prefix and suffix into a buffer from a. */
static int print_wrapped(const pd_alloc_t *a, cJSON *root, const char *prefix,
                         const char *suffix, char **out, size_t *out_len) {
  char *s = pd_json_print(root);
  if (!s) return PD_ERR_NOMEM;
  size_t pn = strlen(prefix), sn = strlen(s), xn = strlen(suffix);
  char *buf = pd_malloc(a, pn + sn + xn + 1);
  if (!buf) {
    cJSON_free(s);
    return PD_ERR_NOMEM;
  }
  memcpy(buf, prefix, pn);
  memcpy(buf + pn, s, sn);
  memcpy(buf + pn + sn, suffix, xn + 1);
  cJSON_free(s);
  *out = buf;
  if (out_len) *out_len = pn + sn + xn;
  return 0;
}

/* Move every element of `from` to the end of `to`, keeping order. */
static void move_elements(cJSON *to, cJSON *from) {
  int n = cJSON_GetArraySize(from);
  for (int i = 0; i < n && from->child; i++) {
    cJSON *it = cJSON_DetachItemViaPointer(from, from->child);
    cJSON_AddItemToArray(to, it); /* cannot fail: no allocation for array items */
  }
}

/* Make darr = parr ++ darr by moving darr's items behind parr's and then all of them back
 * into darr (cJSON has no cheap prepend). parr is left empty. Never allocates. */
static void prepend(cJSON *darr, cJSON *parr) {
  move_elements(parr, darr);
  move_elements(darr, parr);
}

static cJSON *meta_of(cJSON *doc) {
  cJSON *m = cJSON_GetObjectItemCaseSensitive(doc, "meta_info");
  return cJSON_IsObject(m) ? m : NULL;
}

void pd_merge_prefill_init(pd_merge_prefill_t *pf, const char *prefill, size_t plen) {
  memset(pf, 0, sizeof *pf);
  cJSON *p = parse_exact(prefill, plen);
  cJSON *pm = cJSON_IsObject(p) ? meta_of(p) : NULL;
  pf->rc = !p ? PD_ERR_JSON : !cJSON_IsObject(p) ? PD_ERR_NOT_OBJECT : 0;
  pf->has_meta = pm != NULL;
  for (size_t k = 0; pm && k < MERGE_NKEYS; k++) {
    cJSON *pa = cJSON_GetObjectItemCaseSensitive(pm, merge_keys[k]);
    if (!cJSON_IsArray(pa)) continue;
    pf->items[k] = pd_json_print(pa);
    if (!pf->items[k]) pf->is_nomem = 1;
    else pf->items_len[k] = strlen(pf->items[k]);
  }
  cJSON_Delete(p);
}

void pd_merge_prefill_free(pd_merge_prefill_t *pf) {
  for (size_t k = 0; k < MERGE_NKEYS; k++) {
    cJSON_free(pf->items[k]);
    cJSON_Delete(pf->seen[k]);
    cJSON_free(pf->seen_text[k]);
  }
  cJSON_free(pf->spare);
  memset(pf, 0, sizeof *pf);
}

/* Exactly the same tree: types, keys in order, a number's double bit for bit, a string's
 * bytes (so the same printed text: cJSON's print is a function of these). */
static int same_tree(const cJSON *a, const cJSON *b, int depth) {
  if (!a || !b || (a->type & 0xff) != (b->type & 0xff) || depth > 16) return 0;
  if (cJSON_IsNumber(a)) return memcmp(&a->valuedouble, &b->valuedouble, sizeof a->valuedouble) == 0;
  if (cJSON_IsString(a) || cJSON_IsRaw(a)) return strcmp(a->valuestring, b->valuestring) == 0;
  if (!cJSON_IsArray(a) && !cJSON_IsObject(a)) return 1; /* null, true, false */
  const cJSON *x = a->child, *y = b->child;
  for (; x && y; x = x->next, y = y->next) { /* bounded by the shorter list */
    if (cJSON_IsObject(a) && (!x->string || !y->string || strcmp(x->string, y->string) != 0))
      return 0;
    if (!same_tree(x, y, depth + 1)) return 0;
  }
  return !x && !y;
}

/* The printed prefill ++ decode array for key k: "[" elements joined by "," "]", as printing
 * the spliced array gives. The last decode array and its result are kept: a stream's events
 * carry the same logprobs, and printing their doubles is the merge's dearest part. */
static char *merged_text(pd_merge_prefill_t *pf, size_t k, cJSON *da) {
  if (pf->seen[k] && same_tree(pf->seen[k], da, 0)) return pf->seen_text[k];
  char *d = pd_json_print(da);
  if (!d) return NULL;
  const char *p = pf->items[k];
  size_t pn = pf->items_len[k], dn = strlen(d);
  char *t = cJSON_malloc(pn + dn + 1);
  if (t) {
    if (pn <= 2) memcpy(t, d, dn + 1); /* prefill's is empty: decode's as it is */
    else if (dn <= 2) memcpy(t, p, pn + 1);
    else {
      memcpy(t, p, pn - 1);
      t[pn - 1] = ',';
      memcpy(t + pn, d + 1, dn); /* decode's elements, its ']' and the NUL */
    }
  }
  cJSON_free(d);
  cJSON *copy = t ? cJSON_Duplicate(da, 1) : NULL;
  if (!copy) { /* not kept: used once */
    cJSON_free(pf->spare);
    pf->spare = t;
    return t;
  }
  cJSON_Delete(pf->seen[k]);
  cJSON_free(pf->seen_text[k]);
  pf->seen[k] = copy;
  pf->seen_text[k] = t;
  return t;
}

/* Replace decode's array da (a member of dm) by the merged array, as one raw item. */
static int splice_printed(pd_merge_prefill_t *pf, cJSON *dm, cJSON *da, size_t k) {
  const char *t = merged_text(pf, k, da);
  cJSON *raw = t ? cJSON_CreateRaw(t) : NULL;
  if (!raw) return PD_ERR_NOMEM;
  raw->string = da->string; /* hand the key over (ReplaceItemViaPointer keeps raw's) */
  raw->type |= da->type & cJSON_StringIsConst;
  da->string = NULL;
  cJSON_ReplaceItemViaPointer(dm, da, raw); /* da is dm's child: cannot fail; frees da */
  return 0;
}

/* Returns 0, or PD_ERR_NOT_FOUND when input_token_logprobs is not an array on both sides. */
static int merge_docs(pd_merge_prefill_t *pf, cJSON *d) {
  cJSON *dm = meta_of(d);
  if (!pf->has_meta || !dm) return PD_ERR_NOT_FOUND;
  if (pf->is_nomem) return PD_ERR_NOMEM;
  cJSON *da[MERGE_NKEYS];
  for (size_t k = 0; k < MERGE_NKEYS; k++) {
    da[k] = cJSON_GetObjectItemCaseSensitive(dm, merge_keys[k]);
    if (!pf->items[k] || !cJSON_IsArray(da[k])) da[k] = NULL;
    if (k == 0 && !da[k]) return PD_ERR_NOT_FOUND;
  }
  for (size_t k = 0; k < MERGE_NKEYS; k++) {
    int rc = da[k] ? splice_printed(pf, dm, da[k], k) : 0;
    if (rc) return rc;
  }
  return 0;
}

int pd_merge_logprobs_with(const pd_alloc_t *alloc, pd_merge_prefill_t *pf,
                           const char *decode, size_t dlen, char **out, size_t *out_len) {
  if (!out || !pf) return PD_ERR_INVAL;
  cJSON *d = parse_exact(decode, dlen);
  int rc = 0;
  if (pf->rc == PD_ERR_JSON || !d)
    rc = PD_ERR_JSON;
  else if (pf->rc == PD_ERR_NOT_OBJECT || !cJSON_IsObject(d))
    rc = PD_ERR_NOT_OBJECT;
  else
    rc = merge_docs(pf, d);
  if (rc == 0) rc = print_wrapped(alloc, d, "", "", out, out_len);
  cJSON_Delete(d);
  return rc;
}

int pd_merge_logprobs(const pd_alloc_t *alloc, const char *prefill, size_t plen,
                      const char *decode, size_t dlen, char **out, size_t *out_len) {
  if (!out) return PD_ERR_INVAL;
  pd_merge_prefill_t pf;
  pd_merge_prefill_init(&pf, prefill, plen);
  int rc = pd_merge_logprobs_with(alloc, &pf, decode, dlen, out, out_len);
  pd_merge_prefill_free(&pf);
  return rc;
}

/* Rust's str::from_utf8: rejects overlongs, surrogates and code points above U+10FFFF. */
static int is_utf8(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) { /* each pass consumes 1-4 bytes */
    unsigned c = s[i];
    size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
    if (len == 0 || len > n - i) return 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    for (size_t k = 1; k < len; k++) {
      unsigned b = s[i + k];
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return 0;
    }
    i += len;
  }
  return 1;
}

static int has_substring(const char *h, size_t hn, const char *needle, size_t nn) {
  for (size_t i = 0; i + nn <= hn; i++)
    if (h[i] == needle[0] && memcmp(h + i, needle, nn) == 0) return 1;
  return 0;
}

int pd_merge_may_carry(const char *decode, size_t dlen) {
  return memchr(decode, '\\', dlen) != NULL ||
         has_substring(decode, dlen, merge_keys[0], strlen(merge_keys[0]));
}

/* smg's merge_streaming_logprobs, newest form: the decode value is taken out of meta_info
 * before checking it is an array, so a non-array input_token_logprobs becomes null. */
static int smg_merge(cJSON *prefill, cJSON *doc) {
  cJSON *meta = cJSON_GetObjectItemCaseSensitive(doc, "meta_info");
  cJSON *dl = cJSON_IsObject(meta) ? cJSON_GetObjectItemCaseSensitive(meta, merge_keys[0]) : NULL;
  if (!dl || !cJSON_IsArray(prefill)) return 0;
  if (cJSON_IsArray(dl)) {
    prepend(dl, prefill);
    return 0;
  }
  cJSON *null_item = cJSON_CreateNull();
  if (!null_item) return PD_ERR_NOMEM;
  /* Hand dl's key to the null (ReplaceItemViaPointer keeps the replacement's key, and a
   * fresh copy could fail); the replace then frees dl. dl is meta's child: cannot fail. */
  null_item->string = dl->string;
  null_item->type |= dl->type & cJSON_StringIsConst;
  dl->string = NULL;
  cJSON_ReplaceItemViaPointer(meta, dl, null_item);
  return 0;
}

/* The chunk's JSON text: after every leading "data: " (trim_start_matches) and trim(). */
static void smg_payload(const char *chunk, size_t clen, const char **p, size_t *n) {
  size_t b = 0, e = clen;
  while (e - b >= 6 && memcmp(chunk + b, "data: ", 6) == 0) b += 6; /* <= clen/6 passes */
  while (b < e && is_ascii_space(chunk[b])) b++;
  while (e > b && is_ascii_space(chunk[e - 1])) e--;
  *p = chunk + b;
  *n = e - b;
}

int pd_merge_smg_chunk(const pd_alloc_t *alloc, const char *prefill_logprobs_json,
                       size_t plen, const char *chunk, size_t clen, char **out,
                       size_t *out_len) {
  if (!out || (!chunk && clen)) return PD_ERR_INVAL;
  if (clen < 6 || memcmp(chunk, "data: ", 6) != 0) return PD_ERR_NOT_FOUND;
  if (!is_utf8((const unsigned char *)chunk, clen)) return PD_ERR_NOT_FOUND;
  if (has_substring(chunk, clen, "[DONE]", 6)) return PD_ERR_NOT_FOUND;
  const char *json;
  size_t jn;
  smg_payload(chunk, clen, &json, &jn);
  cJSON *doc = parse_exact(json, jn);
  if (!doc) return PD_ERR_NOT_FOUND;
  cJSON *prefill = NULL;
  if (prefill_logprobs_json && plen) { /* none given: smg re-encodes without merging */
    prefill = parse_exact(prefill_logprobs_json, plen);
    if (!prefill) {
      cJSON_Delete(doc);
      return PD_ERR_JSON;
    }
  }
  int rc = prefill ? smg_merge(prefill, doc) : 0;
  if (rc == 0) rc = print_wrapped(alloc, doc, "data: ", "\n\n", out, out_len);
  cJSON_Delete(prefill);
  cJSON_Delete(doc);
  return rc;
}
