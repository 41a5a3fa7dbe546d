/* Internal to sim/pd_scenario*.c: the table-driven loader's toolkit (JSON paths, messages,
 * value readers, the key-table walker), shared by the loader's files. */
#ifndef PD_SCENARIO_INT_H
#define PD_SCENARIO_INT_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_scenario.h"

#define SCENARIO_JSON_PATH_BYTES 192     /* "$.workers[63].faults[15]." plus a shown key */
#define SCENARIO_KEY_SHOWN 64        /* bytes of a key echoed into the path (unknown keys) */
#define SCENARIO_WHAT_BYTES 512      /* one message body, before "<path>: <json path>: " */
#define SCENARIO_MAX_TOKENS 100000u
/* capacity keys (docs/capacity.md): bounds that keep every product in ns far below 2^64 */
#define SCENARIO_MAX_RUNNING 1000000u        /* max_running_requests */
#define SCENARIO_MAX_KV_TOKENS (1ull << 40)  /* max_total_tokens */
#define SCENARIO_MAX_PAGE_SIZE 65536u        /* page_size */
#define SCENARIO_MAX_RESERVE 1000000u        /* num_reserved_decode_tokens */
#define SCENARIO_MAX_US_PER_TOKEN 1000000u   /* forward_us_per_token: 1 s */
#define SCENARIO_MAX_PREFILL_TOKENS 10000000u /* max_prefill_tokens */
/* prompt words in one request body (batch x prompt_tokens_max): 2 bytes a word keeps the
 * body far below PD_REQUEST_MAX_BODY_BYTES */
#define SCENARIO_MAX_PROMPT_TOKENS 1000000u
#define SCENARIO_MAX_SAFE_INT 9007199254740992.0 /* 2^53: larger JSON numbers are not exact */
#define SCENARIO_SEED_DIGITS 20      /* UINT64_MAX has 20 decimal digits */
#define SCENARIO_FLAG_BOOL 1u        /* pd_scenario_set_flag accepts true/false */
#define SCENARIO_FLAG_FRAC 2u        /* pd_scenario_set_flag accepts a number in 0..1 */

typedef struct scenario_ctx {
  const char *file;
  char *err;
  size_t errlen;
  char jp[SCENARIO_JSON_PATH_BYTES]; /* JSON path of the value being read */
  size_t jn;
} scenario_ctx_t;

typedef struct scenario_key scenario_key_t;
typedef int (*scenario_set_fn)(scenario_ctx_t *c, const cJSON *v, void *obj,
                               const scenario_key_t *k);
struct scenario_key {
  const char *name;
  scenario_set_fn set;
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
int pd_scenario_fail(scenario_ctx_t *c, int code, const char *fmt, ...);
/* Append ".key" / "[i]" to the JSON path; return the old length for pd_scenario_json_path_pop. */
size_t pd_scenario_json_path_key(scenario_ctx_t *c, const char *key);
size_t pd_scenario_json_path_idx(scenario_ctx_t *c, uint32_t i);
void pd_scenario_json_path_pop(scenario_ctx_t *c, size_t old);
/* What a wrong value was, for "got ..." */
const char *pd_scenario_describe(const cJSON *v, char *b, size_t n);
#define GOT(v) pd_scenario_describe((v), got, sizeof got)
/* "a, b or c" into b (cap bytes); returns b. */
const char *pd_scenario_join_names(const char *const *names, size_t n, char *b, size_t cap);
/* A JSON number that is a whole number in [lo, hi] (hi <= 2^53). */
int pd_scenario_as_uint(const cJSON *v, uint64_t lo, uint64_t hi, uint64_t *out);
int pd_scenario_get_uint(scenario_ctx_t *c, const cJSON *v, uint64_t lo, uint64_t hi,
                         uint64_t *out);
int pd_scenario_get_enum(scenario_ctx_t *c, const cJSON *v, const char *what,
                         const char *const *names, size_t n, size_t *out);
/* Setters for key tables. */
int pd_scenario_set_u64(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k);
int pd_scenario_set_u32(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k);
int pd_scenario_set_flag(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k);
int pd_scenario_set_str(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k);
int pd_scenario_set_enum(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k);
int pd_scenario_set_seed(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k);
/* "nth"-like: n -> [n, n]; [from, to] with 1 <= from <= to, into a pd_fault_t. */
int pd_scenario_set_nth(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k);
/* Apply tbl to the members of object o (unknown, duplicate, missing keys are errors). */
int pd_scenario_walk(scenario_ctx_t *c, const cJSON *o, const scenario_key_t *tbl, size_t n,
                     void *obj);
typedef int (*scenario_elem_fn)(scenario_ctx_t *c, const cJSON *it, void *obj, uint32_t i);
/* fn on each element of array v, the path at [i]; element max+1 is PD_ERR_LIMIT. */
int pd_scenario_each(scenario_ctx_t *c, const cJSON *v, uint32_t max, const char *what,
                     scenario_elem_fn fn, void *obj);

extern const char *const pd_scenario_fault_names[PD_FAULT_KIND_COUNT];
extern const char *const pd_scenario_role_names[2];

#define K_(st, f, fn, lo, hi, req) {#f, fn, offsetof(st, f), (lo), (hi), (req), NULL, NULL}
/* A key whose JSON name differs from its field (SGLang's flag names for capacity fields). */
#define K_AS(name, st, f, fn, lo, hi) {(name), fn, offsetof(st, f), (lo), (hi), 0, NULL, NULL}
#define K_ENUM(st, f, names, what, req)                                                            \
  {                                                                                                \
#f, pd_scenario_set_enum, offsetof(st, f), 0, sizeof(names) / sizeof(names[0]), (req),         \
        (names), (what)                                                                            \
  }
#define K_MS(st, f) K_(st, f, pd_scenario_set_u64, 0, PD_SCENARIO_MAX_MS, 0)
#define SCENARIO_SIZEOF(st, f) sizeof(((st *)0)->f)
#define K_STR(st, f, min, req) K_(st, f, pd_scenario_set_str, (min), SCENARIO_SIZEOF(st, f), (req))

/* The scenario-level parts (pd_scenario_more.c): top-level "faults", workload "bursts", and
 * the checks across objects once the whole file is read. */
int pd_scenario_set_traffic_faults(scenario_ctx_t *c, const cJSON *v, void *obj,
                                   const scenario_key_t *k);
int pd_scenario_set_bursts(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k);
int pd_scenario_set_steps(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k);
int pd_scenario_check_all(scenario_ctx_t *c, pd_scenario_t *s);
/* The top-level key table applied to a parsed document (pd_scenario.c). */
int pd_scenario_walk_top(scenario_ctx_t *c, const cJSON *root, pd_scenario_t *s);

#endif
