/* Internal to sim/pd_scenario*.c: the table-driven loader's toolkit (JSON paths, messages,
 * value readers, the key-table walker), shared by the loader's files. */
#ifndef PD_SCENARIO_INT_H
#define PD_SCENARIO_INT_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_scenario.h"

#define SCN_JPATH_BYTES 192     /* "$.workers[63].faults[15]." plus a shown key */
#define SCN_KEY_SHOWN 64        /* bytes of a key echoed into the path (unknown keys) */
#define SCN_WHAT_BYTES 512      /* one message body, before "<path>: <json path>: " */
#define SCN_MAX_TOKENS 100000u
#define SCN_MAX_SAFE_INT 9007199254740992.0 /* 2^53: larger JSON numbers are not exact */
#define SCN_SEED_DIGITS 20      /* UINT64_MAX has 20 decimal digits */
#define SCN_FLAG_BOOL 1u        /* pd_scn_set_flag accepts true/false */
#define SCN_FLAG_FRAC 2u        /* pd_scn_set_flag accepts a number in 0..1 */

typedef struct scn_ctx {
  const char *file;
  char *err;
  size_t errlen;
  char jp[SCN_JPATH_BYTES]; /* JSON path of the value being read */
  size_t jn;
} scn_ctx_t;

typedef struct scn_key scn_key_t;
typedef int (*scn_set_fn)(scn_ctx_t *c, const cJSON *v, void *obj, const scn_key_t *k);
struct scn_key {
  const char *name;
  scn_set_fn set;
  size_t off;      /* offset of the field in obj */
  uint64_t lo, hi; /* integers: range; strings: length lo..hi-1 (hi = buffer size);
                      enums: hi names */
  int is_required;
  const char *const *names; /* enums: names in enum order */
  const char *what;         /* enums: what a name names, for messages */
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int pd_scn_fail(scn_ctx_t *c, int code, const char *fmt, ...);
/* Append ".key" / "[i]" to the JSON path; return the old length for pd_scn_jp_pop. */
size_t pd_scn_jp_key(scn_ctx_t *c, const char *key);
size_t pd_scn_jp_idx(scn_ctx_t *c, uint32_t i);
void pd_scn_jp_pop(scn_ctx_t *c, size_t old);
/* What a wrong value was, for "got ..." */
const char *pd_scn_describe(const cJSON *v, char *b, size_t n);
#define GOT(v) pd_scn_describe((v), got, sizeof got)
/* A JSON number that is a whole number in [lo, hi] (hi <= 2^53). */
int pd_scn_as_uint(const cJSON *v, uint64_t lo, uint64_t hi, uint64_t *out);
int pd_scn_get_uint(scn_ctx_t *c, const cJSON *v, uint64_t lo, uint64_t hi, uint64_t *out);
int pd_scn_get_enum(scn_ctx_t *c, const cJSON *v, const char *what, const char *const *names,
                    size_t n, size_t *out);
/* Setters for key tables. */
int pd_scn_set_u64(scn_ctx_t *c, const cJSON *v, void *obj, const scn_key_t *k);
int pd_scn_set_u32(scn_ctx_t *c, const cJSON *v, void *obj, const scn_key_t *k);
int pd_scn_set_flag(scn_ctx_t *c, const cJSON *v, void *obj, const scn_key_t *k);
int pd_scn_set_str(scn_ctx_t *c, const cJSON *v, void *obj, const scn_key_t *k);
int pd_scn_set_enum(scn_ctx_t *c, const cJSON *v, void *obj, const scn_key_t *k);
int pd_scn_set_seed(scn_ctx_t *c, const cJSON *v, void *obj, const scn_key_t *k);
/* "nth"-like: n -> [n, n]; [from, to] with 1 <= from <= to, into a pd_fault_t. */
int pd_scn_set_nth(scn_ctx_t *c, const cJSON *v, void *obj, const scn_key_t *k);
/* Apply tbl to the members of object o (unknown, duplicate, missing keys are errors). */
int pd_scn_walk(scn_ctx_t *c, const cJSON *o, const scn_key_t *tbl, size_t n, void *obj);
typedef int (*scn_elem_fn)(scn_ctx_t *c, const cJSON *it, void *obj, uint32_t i);
/* fn on each element of array v, the path at [i]; element max+1 is PD_ERR_LIMIT. */
int pd_scn_each(scn_ctx_t *c, const cJSON *v, uint32_t max, const char *what, scn_elem_fn fn,
                void *obj);

extern const char *const pd_scn_fault_names[PD_FAULT_KIND_COUNT];
extern const char *const pd_scn_role_names[2];

#define K_(st, f, fn, lo, hi, req) {#f, fn, offsetof(st, f), (lo), (hi), (req), NULL, NULL}
#define K_ENUM(st, f, names, what, req) \
  {#f, pd_scn_set_enum, offsetof(st, f), 0, sizeof(names) / sizeof(names[0]), (req), (names), (what)}
#define K_MS(st, f) K_(st, f, pd_scn_set_u64, 0, PD_SCN_MAX_MS, 0)
#define SCN_SIZEOF(st, f) sizeof(((st *)0)->f)
#define K_STR(st, f, min, req) K_(st, f, pd_scn_set_str, (min), SCN_SIZEOF(st, f), (req))

/* The scenario-level parts (pd_scenario_more.c): top-level "faults", workload "bursts", and
 * the checks across objects once the whole file is read. */
int pd_scn_set_tfaults(scn_ctx_t *c, const cJSON *v, void *obj, const scn_key_t *k);
int pd_scn_set_bursts(scn_ctx_t *c, const cJSON *v, void *obj, const scn_key_t *k);
int pd_scn_check_all(scn_ctx_t *c, pd_scenario_t *s);
/* The top-level key table applied to a parsed document (pd_scenario.c). */
int pd_scn_walk_top(scn_ctx_t *c, const cJSON *root, pd_scenario_t *s);

#endif
