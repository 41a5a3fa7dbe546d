/* pd_json_print (core/pd_json.h): the same bytes as cJSON_PrintUnformatted for every tree,
 * and the tree unchanged after it. Integers near the edges of "%1.15g" (1e15, -0, 2^53),
 * fractions, NaN and infinities (cJSON prints null), nesting, more numbers than the fast
 * path renders, and seeded random trees. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pd_json.h"
#include "pd_prng.h"
#include "pdt.h"

#define JSON_SEED 20261205u
#define JSON_ROUNDS 400

/* pd_json_print(root) equals cJSON's print, and cJSON's print is the same after it. */
static int same_as_cjson(cJSON *root) {
  char *want = cJSON_PrintUnformatted(root);
  char *got = pd_json_print(root);
  char *again = cJSON_PrintUnformatted(root);
  int ok = want && got && again && strcmp(want, got) == 0 && strcmp(want, again) == 0;
  if (!ok) printf("\njson print: want %s\n            got  %s\n", want ? want : "(null)",
                  got ? got : "(null)");
  cJSON_free(want);
  cJSON_free(got);
  cJSON_free(again);
  return ok;
}

static void test_numbers_print_as_cjson_prints_them(void) {
  static const double v[] = {0.0,  -0.0,  1,     -1,     7,         42,        -273,
                             1e14, 1e15,  -1e15, 999999999999999.0,  -999999999999999.0,
                             9007199254740992.0, 1e300, 0.5, -0.25, 1.0 / 3, 2.5e-7,
                             123456789012.0,     2147483647.0, 2147483648.0, -2147483649.0};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    PDT_TRUE(same_as_cjson(a));
    cJSON *lone = cJSON_CreateNumber(v[i]); /* a number as the whole document */
    PDT_TRUE(same_as_cjson(lone));
    cJSON_Delete(a);
    cJSON_Delete(lone);
  }
  cJSON *o = cJSON_CreateObject(); /* NaN and infinities: cJSON prints null */
  cJSON_AddNumberToObject(o, "nan", NAN);
  cJSON_AddNumberToObject(o, "inf", INFINITY);
  cJSON_AddNumberToObject(o, "ninf", -INFINITY);
  PDT_TRUE(same_as_cjson(o));
  cJSON_Delete(o);
}

/* More numbers than the fast path holds (64): the rest are cJSON's, the text the same. */
static void test_many_numbers_and_nesting(void) {
  cJSON *o = cJSON_CreateObject();
  cJSON *arr = cJSON_AddArrayToObject(o, "a");
  for (int i = 0; i < 200; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(i % 3 ? i : i + 0.5));
  cJSON *deep = o;
  for (int d = 0; d < 20; d++) {
    cJSON *n = cJSON_CreateObject();
    cJSON_AddNumberToObject(n, "k", d);
    cJSON_AddItemToObject(deep, "next", n);
    deep = n;
  }
  cJSON_AddStringToObject(o, "s", "12");
  cJSON_AddRawToObject(o, "raw", "[1,2.50]"); /* a raw item stays as it is */
  cJSON_AddNullToObject(o, "z");
  cJSON_AddTrueToObject(o, "t");
  PDT_TRUE(same_as_cjson(o));
  PDT_EQ_INT((int)cJSON_GetNumberValue(cJSON_GetArrayItem(arr, 4)), 4); /* still a number */
  PDT_TRUE(cJSON_IsNumber(cJSON_GetArrayItem(arr, 63)));
  cJSON_Delete(o);
}

static double random_number(pd_prng_t *r) {
  switch (pd_prng_below(r, 6)) {
  case 0: return (double)(int64_t)(pd_prng_next(r) % 2000001) - 1000000;
  case 1: return (double)(int64_t)(pd_prng_next(r) >> (pd_prng_below(r, 64))) *
                 (pd_prng_below(r, 2) ? 1 : -1);
  case 2: return (pd_prng_unit(r) - 0.5) * pow(10, (double)pd_prng_below(r, 40) - 20);
  case 3: return pd_prng_below(r, 2) ? 1e15 - (double)pd_prng_below(r, 3) : -1e15 + 1;
  case 4: return pd_prng_below(r, 2) ? 0.0 : -0.0;
  default: return (double)pd_prng_below(r, 100);
  }
}

static cJSON *random_tree(pd_prng_t *r, int depth) {
  int kind = (int)pd_prng_below(r, depth > 3 ? 3 : 5);
  if (kind < 2) return cJSON_CreateNumber(random_number(r));
  if (kind == 2) return pd_prng_below(r, 2) ? cJSON_CreateString("x") : cJSON_CreateFalse();
  cJSON *c = kind == 3 ? cJSON_CreateArray() : cJSON_CreateObject();
  uint64_t n = pd_prng_below(r, 6);
  for (uint64_t i = 0; i < n; i++) {
    char key[24];
    snprintf(key, sizeof key, "k%" PRIu64, i);
    if (kind == 3) cJSON_AddItemToArray(c, random_tree(r, depth + 1));
    else cJSON_AddItemToObject(c, key, random_tree(r, depth + 1));
  }
  return c;
}

static void test_random_trees_print_as_cjson(void) {
  pd_prng_t r;
  pd_prng_init(&r, JSON_SEED);
  int bad = 0;
  for (int i = 0; i < JSON_ROUNDS && bad < 3; i++) {
    cJSON *t = random_tree(&r, 0);
    int ok = same_as_cjson(t);
    if (!ok) printf("json print: seed=%u round %d\n", JSON_SEED, i);
    bad += !ok;
    cJSON_Delete(t);
  }
  PDT_EQ_INT(bad, 0);
}

int pdt_suite_json_print(void) {
  static const pdt_case_t cases[] = {
      {"numbers print as cJSON prints them (edges of %1.15g, -0, NaN)",
       test_numbers_print_as_cjson_prints_them},
      {"more numbers than the fast path, nesting, raw items", test_many_numbers_and_nesting},
      {"random trees print as cJSON prints them", test_random_trees_print_as_cjson},
  };
  return PDT_SUITE("json_print", cases);
}
