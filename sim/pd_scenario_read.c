/* pd_scenario_read: the machinery behind the scenario loader's key tables (pd_scenario_int.h)
 * — error messages with their JSON path, the value readers and setters, the object walker
 * and the array iterator. What the keys are is in pd_scenario.c and pd_scenario_more.c. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_scenario.h"
#include "pd_scenario_int.h"

/* ---- messages and JSON paths ---- */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int pd_scenario_fail(scenario_ctx_t *c, int code, const char *fmt, ...) {
  char what[SCENARIO_WHAT_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (c->err && c->errlen)
    snprintf(c->err, c->errlen, "%s: %s%s%s", c->file, c->jp, c->jn ? ": " : "", what);
  return code;
}

static size_t jp_add(scenario_ctx_t *c, int n) {
  size_t room = sizeof c->jp - c->jn;
  if (n > 0) c->jn += (size_t)n < room ? (size_t)n : room - 1;
  return c->jn;
}

/* Append ".key" / "[i]"; return the old length for jp_pop. */
size_t pd_scenario_json_path_key(scenario_ctx_t *c, const char *key) {
  size_t old = c->jn;
  jp_add(c, snprintf(c->jp + c->jn, sizeof c->jp - c->jn, ".%.*s", SCENARIO_KEY_SHOWN,
                     key ? key : ""));
  return old;
}

size_t pd_scenario_json_path_idx(scenario_ctx_t *c, uint32_t i) {
  size_t old = c->jn;
  jp_add(c, snprintf(c->jp + c->jn, sizeof c->jp - c->jn, "[%u]", (unsigned)i));
  return old;
}

void pd_scenario_json_path_pop(scenario_ctx_t *c, size_t old) {
  c->jn = old;
  c->jp[old] = '\0';
}

/* What a wrong value was, for "got ..." */
const char *pd_scenario_describe(const cJSON *v, char *b, size_t n) {
  if (cJSON_IsString(v)) snprintf(b, n, "\"%.40s\"", v->valuestring);
  else if (cJSON_IsNumber(v)) snprintf(b, n, "%.15g", v->valuedouble);
  else
    snprintf(b, n, "%s", cJSON_IsTrue(v) ? "true" : cJSON_IsFalse(v) ? "false"
                         : cJSON_IsNull(v) ? "null" : cJSON_IsArray(v) ? "an array" : "an object");
  return b;
}

/* "a, b or c" */
const char *pd_scenario_join_names(const char *const *names, size_t n, char *b, size_t cap) {
  size_t used = 0;
  b[0] = '\0';
  for (size_t i = 0; i < n && used < cap; i++) {
    const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
    int w = snprintf(b + used, cap - used, "%s%s", sep, names[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
  return b;
}

/* ---- value readers ---- */

static void *at(void *obj, size_t off) { return (char *)obj + off; }

/* A JSON number that is a whole number in [lo, hi] (hi <= 2^53, so the test is exact). */
int pd_scenario_as_uint(const cJSON *v, uint64_t lo, uint64_t hi, uint64_t *out) {
  if (!cJSON_IsNumber(v)) return 0;
  double d = v->valuedouble;
  if (!(d >= (double)lo && d <= (double)hi)) return 0; /* also rejects NaN */
  uint64_t u = (uint64_t)d;
  if ((double)u != d) return 0;
  *out = u;
  return 1;
}

int pd_scenario_get_uint(scenario_ctx_t *c, const cJSON *v, uint64_t lo, uint64_t hi,
                         uint64_t *out) {
  char got[64];
  if (pd_scenario_as_uint(v, lo, hi, out)) return 0;
  return pd_scenario_fail(c, PD_ERR_FIELD, "expected an integer in %llu..%llu, got %s",
              (unsigned long long)lo, (unsigned long long)hi, GOT(v));
}

int pd_scenario_get_enum(scenario_ctx_t *c, const cJSON *v, const char *what,
                         const char *const *names, size_t n, size_t *out) {
  char got[64], list[SCENARIO_WHAT_BYTES - 128];
  if (!cJSON_IsString(v))
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected a string, got %s", GOT(v));
  for (size_t i = 0; i < n; i++)
    if (strcmp(v->valuestring, names[i]) == 0) {
      *out = i;
      return 0;
    }
  return pd_scenario_fail(c, PD_ERR_FIELD, "unknown %s \"%.40s\" (expected %s)", what,
                          v->valuestring, pd_scenario_join_names(names, n, list, sizeof list));
}

int pd_scenario_set_u64(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  return pd_scenario_get_uint(c, v, k->lo, k->hi, (uint64_t *)at(obj, k->off));
}

_Static_assert(sizeof(int) == sizeof(uint32_t), "fault status is set as a uint32_t");
int pd_scenario_set_u32(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  uint64_t u = 0;
  int rc = pd_scenario_get_uint(c, v, k->lo, k->hi, &u);
  if (rc == 0) *(uint32_t *)at(obj, k->off) = (uint32_t)u;
  return rc;
}

/* A double from true/false (1/0) and/or a number in 0..1: k->lo says which (SCENARIO_FLAG_*). */
int pd_scenario_set_flag(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  char got[64];
  double *d = (double *)at(obj, k->off);
  int is_frac = cJSON_IsNumber(v) && v->valuedouble >= 0.0 && v->valuedouble <= 1.0;
  if (cJSON_IsBool(v) && (k->lo & SCENARIO_FLAG_BOOL)) *d = cJSON_IsTrue(v) ? 1.0 : 0.0;
  else if (is_frac && (k->lo & SCENARIO_FLAG_FRAC)) *d = v->valuedouble;
  else
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected %s, got %s",
                k->lo == SCENARIO_FLAG_BOOL   ? "a boolean"
                : k->lo == SCENARIO_FLAG_FRAC ? "a number in 0..1"
                                         : "a boolean or a number in 0..1",
                GOT(v));
  return 0;
}

/* A string of lo..hi-1 bytes into a char[hi]. */
int pd_scenario_set_str(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  char got[64];
  if (!cJSON_IsString(v))
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected a string, got %s", GOT(v));
  size_t n = strlen(v->valuestring);
  if (n < k->lo) return pd_scenario_fail(c, PD_ERR_FIELD, "expected a non-empty string");
  if (n >= k->hi)
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected at most %llu characters, got %zu",
                (unsigned long long)(k->hi - 1), n);
  memcpy(at(obj, k->off), v->valuestring, n + 1);
  return 0;
}

_Static_assert(sizeof(pd_role_t) == sizeof(int) && sizeof(pd_chunking_t) == sizeof(int) &&
                   sizeof(pd_fault_kind_t) == sizeof(int) && sizeof(pd_protocol_t) == sizeof(int) &&
                   sizeof(pd_kv_expiry_t) == sizeof(int) && sizeof(pd_kv_params_t) == sizeof(int),
               "pd_scenario_set_enum stores enums as int");

/* role, chunking, fault kind: the index in k->names is the enum value. */
int pd_scenario_set_enum(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  size_t i = 0;
  int rc = pd_scenario_get_enum(c, v, k->what, k->names, (size_t)k->hi, &i);
  int e = (int)i;
  if (rc == 0) memcpy(at(obj, k->off), &e, sizeof e);
  return rc;
}

/* "nth": n -> [n, n]; [from, to] with 1 <= from <= to. */
int pd_scenario_set_nth(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  pd_fault_t *f = obj;
  uint64_t a = 0, b = 0;
  char got[64];
  if (cJSON_IsNumber(v)) {
    int rc = pd_scenario_get_uint(c, v, 1, k->hi, &a);
    if (rc == 0) f->nth_from = f->nth_to = (uint32_t)a;
    return rc;
  }
  const cJSON *x = cJSON_IsArray(v) ? v->child : NULL, *y = x ? x->next : NULL;
  if (!y || y->next || !pd_scenario_as_uint(x, 1, k->hi, &a) ||
      !pd_scenario_as_uint(y, 1, k->hi, &b) || a > b)
    return pd_scenario_fail(c, PD_ERR_FIELD,
                            "expected an integer n >= 1 or [from, to] with 1 <= from <= to, "
                            "got %s",
                            GOT(v));
  f->nth_from = (uint32_t)a;
  f->nth_to = (uint32_t)b;
  return 0;
}

/* A 64-bit seed: a JSON integer up to 2^53, or a decimal string for any uint64. */
int pd_scenario_set_seed(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  uint64_t u = 0;
  char got[64];
  const char *p = cJSON_IsString(v) ? v->valuestring : NULL;
  size_t n = p ? strlen(p) : 0;
  int ok = p ? n >= 1 && n <= SCENARIO_SEED_DIGITS : pd_scenario_as_uint(v, 0, k->hi, &u);
  for (size_t i = 0; p && ok && i < n; i++) {
    unsigned d = (unsigned)(p[i] - '0');
    ok = d <= 9 && u <= (UINT64_MAX - d) / 10;
    u = u * 10 + d;
  }
  if (!ok)
    return pd_scenario_fail(c, PD_ERR_FIELD,
                            "expected an integer in 0..9007199254740992 or a decimal "
                            "string up to 18446744073709551615, got %s",
                            GOT(v));
  *(uint64_t *)((char *)obj + k->off) = u;
  return 0;
}

/* ---- objects ---- */

/* Apply tbl to the members of object o. Each pass either records a new key in `seen` or
 * fails, so the loop runs at most n + 1 times whatever the input. */
int pd_scenario_walk(scenario_ctx_t *c, const cJSON *o, const scenario_key_t *tbl, size_t n,
                     void *obj) {
  char got[64];
  uint64_t seen = 0;
  if (!cJSON_IsObject(o))
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected an object, got %s", GOT(o));
  for (const cJSON *it = o->child; it; it = it->next) {
    size_t i = 0;
    while (i < n && (!it->string || strcmp(it->string, tbl[i].name) != 0)) i++;
    size_t old = pd_scenario_json_path_key(c, it->string);
    int rc;
    if (i == n) rc = pd_scenario_fail(c, PD_ERR_FIELD, "unknown key");
    else if (seen & (1ull << i)) rc = pd_scenario_fail(c, PD_ERR_FIELD, "duplicate key");
    else rc = tbl[i].set(c, it, obj, &tbl[i]);
    pd_scenario_json_path_pop(c, old);
    if (rc < 0) return rc;
    seen |= 1ull << i;
  }
  for (size_t i = 0; i < n; i++)
    if (tbl[i].is_required && !(seen & (1ull << i)))
      return pd_scenario_fail(c, PD_ERR_FIELD, "missing required key \"%s\"", tbl[i].name);
  return 0;
}

/* fn on each element of array v, the path at [i]; element max+1 is PD_ERR_LIMIT. */
int pd_scenario_each(scenario_ctx_t *c, const cJSON *v, uint32_t max, const char *what,
                     scenario_elem_fn fn, void *obj) {
  char got[64];
  uint32_t i = 0;
  if (!cJSON_IsArray(v))
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected an array, got %s", GOT(v));
  for (const cJSON *it = v->child; it; it = it->next, i++) {
    if (i == max) return pd_scenario_fail(c, PD_ERR_LIMIT, "more than %u %s", (unsigned)max, what);
    size_t old = pd_scenario_json_path_idx(c, i);
    int rc = fn(c, it, obj, i);
    pd_scenario_json_path_pop(c, old);
    if (rc < 0) return rc;
  }
  return 0;
}
