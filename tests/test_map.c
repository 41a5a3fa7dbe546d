/* pd_map: insert, find, replace, remove, growth, tombstones, the named limit, allocation
 * failure, and the walk, checked against a plain array. */
#include "pd_err.h"
#include "pd_map.h"
#include "pd_prng.h"
#include "pdt.h"
#include "pdt_alloc.h"

#define MAP_SEED 0x6d617001ULL
#define RANDOM_KEYS 512u /* key space of the random round: dense enough to collide often */
#define RANDOM_OPS 20000

/* A value that names its key, so a lookup can check it found the right one. */
static void *val_of(uint64_t k) { return (void *)(uintptr_t)(k * 8 + 8); }

static void test_put_get_replace(void) {
  pd_map_t m;
  pd_map_init(&m, NULL, 0);
  PDT_TRUE(pd_map_get(&m, 0) == NULL); /* an empty map has no table yet */
  PDT_EQ_U64(pd_map_find(&m, 7), PD_MAP_NONE);
  for (uint64_t k = 0; k < 1000; k++) PDT_EQ_INT(pd_map_put(&m, k * 3, val_of(k)), 0);
  PDT_EQ_U64(pd_map_len(&m), 1000);
  for (uint64_t k = 0; k < 1000; k++) PDT_TRUE(pd_map_get(&m, k * 3) == val_of(k));
  PDT_TRUE(pd_map_get(&m, 1) == NULL);
  PDT_EQ_INT(pd_map_put(&m, 30, val_of(77)), 0); /* replace: no second entry */
  PDT_EQ_U64(pd_map_len(&m), 1000);
  PDT_TRUE(pd_map_get(&m, 30) == val_of(77));
  size_t s = pd_map_find(&m, 30);
  PDT_TRUE(s != PD_MAP_NONE && m.vals[s] == val_of(77));
  pd_map_free(&m);
  PDT_EQ_U64(pd_map_len(&m), 0);
  PDT_TRUE(pd_map_get(&m, 30) == NULL);
}

static void test_key_range(void) {
  pd_map_t m;
  pd_map_init(&m, NULL, 0);
  PDT_EQ_INT(pd_map_put(&m, 0, val_of(0)), 0);
  PDT_EQ_INT(pd_map_put(&m, PD_MAP_MAX_KEY, val_of(1)), 0);
  PDT_EQ_INT(pd_map_put(&m, PD_MAP_MAX_KEY + 1, val_of(2)), PD_ERR_INVAL);
  PDT_EQ_INT(pd_map_put(&m, UINT64_MAX, val_of(3)), PD_ERR_INVAL);
  PDT_EQ_U64(pd_map_len(&m), 2);
  PDT_TRUE(pd_map_get(&m, 0) == val_of(0));
  PDT_TRUE(pd_map_get(&m, PD_MAP_MAX_KEY) == val_of(1));
  PDT_TRUE(pd_map_get(&m, UINT64_MAX) == NULL);
  pd_map_free(&m);
}

static void test_remove_keeps_others_reachable(void) {
  pd_map_t m;
  pd_map_init(&m, NULL, 0);
  for (uint64_t k = 0; k < 40; k++) PDT_EQ_INT(pd_map_put(&m, k, val_of(k)), 0);
  for (uint64_t k = 0; k < 40; k += 2) PDT_TRUE(pd_map_remove(&m, k) == val_of(k));
  PDT_TRUE(pd_map_remove(&m, 0) == NULL); /* already gone */
  PDT_EQ_U64(pd_map_len(&m), 20);
  PDT_EQ_U64(m.tomb, 20);
  for (uint64_t k = 0; k < 40; k++) /* probes run past the tombstones */
    PDT_TRUE(pd_map_get(&m, k) == (k % 2 ? val_of(k) : NULL));
  size_t s = pd_map_find(&m, 5);
  pd_map_remove_slot(&m, s);
  PDT_TRUE(pd_map_get(&m, 5) == NULL);
  PDT_EQ_U64(pd_map_len(&m), 19);
  pd_map_free(&m);
}

static void test_grows_before_three_quarters_full(void) {
  pd_map_t m;
  pd_map_init(&m, NULL, 0);
  for (uint64_t k = 0; k < 47; k++) PDT_EQ_INT(pd_map_put(&m, k, val_of(k)), 0);
  PDT_EQ_U64(m.cap, 64);
  PDT_EQ_INT(pd_map_put(&m, 47, val_of(47)), 0); /* 48 of 64 would be three quarters */
  PDT_EQ_U64(m.cap, 128);
  for (uint64_t k = 0; k < 48; k++) PDT_TRUE(pd_map_get(&m, k) == val_of(k));
  pd_map_free(&m);
}

static void test_tombstones_are_swept_at_the_same_size(void) {
  pd_map_t m;
  pd_map_init(&m, NULL, 0);
  for (uint64_t k = 0; k < 4; k++) PDT_EQ_INT(pd_map_put(&m, k, val_of(k)), 0);
  for (uint64_t k = 100; k < 10100; k++) { /* churn: one live key in and out */
    PDT_EQ_INT(pd_map_put(&m, k, val_of(k)), 0);
    PDT_TRUE(pd_map_remove(&m, k) == val_of(k));
  }
  PDT_EQ_U64(m.cap, 64); /* rebuilt in place, never doubled for tombstones */
  PDT_TRUE(m.len + m.tomb < 48);
  PDT_EQ_U64(pd_map_len(&m), 4);
  for (uint64_t k = 0; k < 4; k++) PDT_TRUE(pd_map_get(&m, k) == val_of(k));
  pd_map_free(&m);
}

static void test_limit_refuses_new_keys_only(void) {
  pd_map_t m;
  pd_map_init(&m, NULL, 3);
  for (uint64_t k = 0; k < 3; k++) PDT_EQ_INT(pd_map_put(&m, k, val_of(k)), 0);
  PDT_EQ_INT(pd_map_put(&m, 3, val_of(3)), PD_ERR_LIMIT);
  PDT_EQ_INT(pd_map_put(&m, 1, val_of(9)), 0); /* a replace is not a new key */
  PDT_TRUE(pd_map_get(&m, 1) == val_of(9));
  PDT_EQ_U64(pd_map_len(&m), 3);
  pd_map_remove(&m, 0);
  PDT_EQ_INT(pd_map_put(&m, 3, val_of(3)), 0);
  pd_map_free(&m);
  pd_map_t z = {0}; /* zeroed: the default limit, not zero */
  PDT_EQ_INT(pd_map_put(&z, 1, val_of(1)), 0);
  PDT_TRUE(pd_map_get(&z, 1) == val_of(1));
  pd_map_free(&z);
}

/* Fail each allocation in turn while filling the map: the failing put reports NOMEM and
 * leaves every earlier key in place; nothing leaks. */
static void test_alloc_failure_leaves_map_unchanged(void) {
  for (unsigned fail = 1; fail <= 8; fail++) {
    pdt_alloc_t f = {.fail_at = fail};
    pd_alloc_t a = pdt_alloc(&f);
    pd_map_t m;
    pd_map_init(&m, &a, 0);
    uint64_t n = 0;
    int rc = 0;
    for (; n < 200 && (rc = pd_map_put(&m, n, val_of(n))) == 0; n++) {}
    PDT_EQ_INT(rc, PD_ERR_NOMEM);
    PDT_EQ_U64(pd_map_len(&m), n);
    for (uint64_t k = 0; k < n; k++) PDT_TRUE(pd_map_get(&m, k) == val_of(k));
    PDT_TRUE(pd_map_get(&m, n) == NULL);
    pd_map_free(&m);
    PDT_EQ_INT(f.live, 0);
  }
}

static void test_walk_visits_each_live_key_once(void) {
  pd_map_t m;
  pd_map_init(&m, NULL, 0);
  size_t slot = 0;
  PDT_EQ_INT(pd_map_next(&m, &slot, NULL, NULL), 0);
  uint8_t seen[300] = {0};
  for (uint64_t k = 0; k < 300; k++) PDT_EQ_INT(pd_map_put(&m, k, val_of(k)), 0);
  for (uint64_t k = 0; k < 300; k += 3) pd_map_remove(&m, k);
  uint64_t key;
  void *v;
  size_t n = 0;
  for (slot = 0; pd_map_next(&m, &slot, &key, &v); n++) {
    PDT_TRUE(key < 300 && key % 3 != 0 && v == val_of(key));
    if (key < 300) seen[key]++;
    if (key % 2) pd_map_remove_slot(&m, slot - 1); /* removing the entry just seen is allowed */
  }
  PDT_EQ_U64(n, 200);
  for (uint64_t k = 0; k < 300; k++) PDT_EQ_INT(seen[k], k % 3 ? 1 : 0);
  PDT_EQ_U64(pd_map_len(&m), 100);
  pd_map_free(&m);
}

/* Random puts and removals over a small key space against an array of expected values. */
static void test_random_ops_match_an_array(void) {
  static void *want[RANDOM_KEYS];
  memset(want, 0, sizeof want);
  pd_prng_t rng;
  pd_prng_init(&rng, MAP_SEED);
  pd_map_t m;
  pd_map_init(&m, NULL, 0);
  size_t live = 0;
  int bad = 0;
  for (int op = 0; op < RANDOM_OPS && bad < 5; op++) {
    uint64_t k = pd_prng_below(&rng, RANDOM_KEYS);
    if (pd_prng_below(&rng, 100) < 50) {
      void *v = val_of(pd_prng_below(&rng, 1000));
      live += want[k] == NULL;
      want[k] = v;
      bad += pd_map_put(&m, k, v) != 0;
    } else {
      bad += pd_map_remove(&m, k) != want[k];
      live -= want[k] != NULL;
      want[k] = NULL;
    }
    uint64_t q = pd_prng_below(&rng, RANDOM_KEYS);
    bad += pd_map_get(&m, k) != want[k];
    bad += pd_map_get(&m, q) != want[q];
    bad += pd_map_len(&m) != live;
  }
  PDT_EQ_INT(bad, 0);
  if (bad) fprintf(stderr, "map random round: seed %#llx\n", (unsigned long long)MAP_SEED);
  pd_map_free(&m);
}

int pdt_suite_map(void) {
  static const pdt_case_t cases[] = {
      {"put, get and replace", test_put_get_replace},
      {"keys 0..PD_MAP_MAX_KEY fit, larger ones are refused", test_key_range},
      {"removal leaves later keys of a probe chain reachable", test_remove_keeps_others_reachable},
      {"the table doubles before three quarters are used", test_grows_before_three_quarters_full},
      {"tombstones are swept at the same size", test_tombstones_are_swept_at_the_same_size},
      {"a new key beyond max_len fails with PD_ERR_LIMIT", test_limit_refuses_new_keys_only},
      {"allocation failure returns PD_ERR_NOMEM and keeps the map",
       test_alloc_failure_leaves_map_unchanged},
      {"a walk visits each live key once, removal included", test_walk_visits_each_live_key_once},
      {"random puts and removals match an array", test_random_ops_match_an_array},
  };
  return PDT_SUITE("map", cases);
}
