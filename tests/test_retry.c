/* pd_retry: smg's attempt budget, backoff schedule, jitter and retryable set (R2.1-R2.4). */
#include <math.h>
#include <string.h>

#include "pd_prng.h"
#include "pd_retry.h"
#include "pdt.h"

#define RETRY_SEED 0x5eed0003ULL
#define MS 1000000ULL
#define JITTER_DRAWS 20000

static pd_retry_config_t no_jitter(void) {
  pd_retry_config_t c;
  pd_retry_config_smg(&c);
  c.jitter = 0;
  return c;
}

static void test_smg_defaults(void) {
  pd_retry_config_t c;
  pd_retry_config_smg(&c);
  PDT_EQ_U64(c.max_attempts, 5);
  PDT_EQ_U64(c.initial_backoff_ms, 50);
  PDT_EQ_U64(c.max_backoff_ms, 30000);
  PDT_TRUE(c.multiplier == 1.5);
  PDT_TRUE(c.jitter == 0.2);
}

static void test_default_backoff_before_jitter(void) {
  pd_retry_config_t c = no_jitter();
  static const uint64_t want_ms[] = {50, 75, 112, 168, 253};
  for (uint32_t k = 0; k < 5; k++) PDT_EQ_U64(pd_retry_delay_ns(&c, k, NULL), want_ms[k] * MS);
}

static void test_backoff_caps_at_max(void) {
  pd_retry_config_t c = no_jitter();
  PDT_EQ_U64(pd_retry_delay_ns(&c, 14, NULL), 14596 * MS); /* 50 * 1.5^14 = 14596.2 */
  PDT_EQ_U64(pd_retry_delay_ns(&c, 20, NULL), 30000 * MS);
  PDT_EQ_U64(pd_retry_delay_ns(&c, 5000, NULL), 30000 * MS);      /* 1.5^5000 is inf */
  PDT_EQ_U64(pd_retry_delay_ns(&c, UINT32_MAX, NULL), 30000 * MS); /* no overflow */
}

static void test_huge_delays_saturate_instead_of_wrapping(void) {
  pd_retry_config_t c = no_jitter();
  c.initial_backoff_ms = UINT64_MAX / 2;
  c.max_backoff_ms = UINT64_MAX;
  PDT_EQ_U64(pd_retry_delay_ns(&c, 0, NULL), UINT64_MAX);
  c.jitter = 1.0;
  pd_prng_t r;
  pd_prng_init(&r, RETRY_SEED);
  int wrapped = 0;
  for (int i = 0; i < 100; i++) wrapped += pd_retry_delay_ns(&c, 3, &r) < 1000 * MS;
  PDT_EQ_INT(wrapped, 0);
}

static void test_zero_initial_gives_zero(void) {
  pd_retry_config_t c = no_jitter();
  c.initial_backoff_ms = 0;
  PDT_EQ_U64(pd_retry_delay_ns(&c, 0, NULL), 0);
  PDT_EQ_U64(pd_retry_delay_ns(&c, UINT32_MAX, NULL), 0);
}

static void test_no_jitter_draws_nothing(void) {
  pd_retry_config_t c = no_jitter();
  pd_prng_t r, before;
  pd_prng_init(&r, RETRY_SEED);
  before = r;
  (void)pd_retry_delay_ns(&c, 2, &r);
  PDT_TRUE(memcmp(&r, &before, sizeof r) == 0);
}

/* Same seed, same formula computed here: d + round(d * (-j + 2j*u)) with u = unit(). */
static void test_jitter_follows_formula_with_one_draw(void) {
  pd_retry_config_t c;
  pd_retry_config_smg(&c);
  pd_prng_t r, mirror;
  pd_prng_init(&r, RETRY_SEED);
  mirror = r;
  printf("\n    retry jitter seed=0x%llx\n", (unsigned long long)RETRY_SEED);
  int mismatches = 0;
  for (int i = 0; i < JITTER_DRAWS; i++) {
    uint32_t k = (uint32_t)(i % 4);
    double d = 50.0 * pow(1.5, k);
    d = floor(d);
    double u = -0.2 + 0.4 * pd_prng_unit(&mirror);
    uint64_t want = (uint64_t)(d + round(d * u)) * MS;
    mismatches += pd_retry_delay_ns(&c, k, &r) != want;
  }
  PDT_EQ_INT(mismatches, 0);
  PDT_TRUE(memcmp(&r, &mirror, sizeof r) == 0); /* exactly one draw per delay */
}

static void test_jitter_stays_within_20_percent(void) {
  pd_retry_config_t c;
  pd_retry_config_smg(&c);
  pd_prng_t r;
  pd_prng_init(&r, RETRY_SEED + 1);
  printf("\n    retry jitter range seed=0x%llx\n", (unsigned long long)(RETRY_SEED + 1));
  static const uint64_t base_ms[] = {50, 75, 112, 168};
  for (uint32_t k = 0; k < 4; k++) {
    uint64_t d = base_ms[k] * MS, slack = (uint64_t)llround(base_ms[k] * 0.2) * MS;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < JITTER_DRAWS; i++) {
      uint64_t v = pd_retry_delay_ns(&c, k, &r);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    PDT_TRUE(lo >= d - slack);
    PDT_TRUE(hi <= d + slack);
    PDT_TRUE(lo < d && hi > d); /* it does jitter both ways */
  }
}

static void test_large_jitter_clamps_at_zero(void) {
  pd_retry_config_t c;
  pd_retry_config_smg(&c);
  c.jitter = 3.0;
  pd_prng_t r;
  pd_prng_init(&r, RETRY_SEED + 2);
  int zeros = 0, too_big = 0;
  for (int i = 0; i < JITTER_DRAWS; i++) {
    uint64_t v = pd_retry_delay_ns(&c, 0, &r);
    zeros += v == 0;
    too_big += v > 200 * MS; /* 50 + 50*3 */
  }
  PDT_TRUE(zeros > 0);
  PDT_EQ_INT(too_big, 0);
}

static void test_retryable_set_is_exact(void) {
  static const int want[] = {408, 429, 500, 502, 503, 504};
  int found = 0;
  for (int s = -1; s < 1000; s++) {
    if (!pd_retry_is_retryable_status(s)) continue;
    int listed = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) listed |= want[i] == s;
    PDT_TRUE(listed);
    found++;
  }
  PDT_EQ_INT(found, 6);
  PDT_FALSE(pd_retry_is_retryable_status(501)); /* not retried, unlike its neighbours */
  PDT_FALSE(pd_retry_is_retryable_status(200));
  PDT_FALSE(pd_retry_is_retryable_status(404));
}

int pdt_suite_retry(void) {
  static const pdt_case_t cases[] = {
      {"smg defaults: 5 attempts, 50 ms, x1.5, 30 s cap, jitter 0.2", test_smg_defaults},
      {"default backoff before jitter is 50,75,112,168,253 ms",
       test_default_backoff_before_jitter},
      {"backoff caps at 30 s and survives k = UINT32_MAX", test_backoff_caps_at_max},
      {"huge delays saturate instead of wrapping", test_huge_delays_saturate_instead_of_wrapping},
      {"initial backoff 0 gives 0 for every k", test_zero_initial_gives_zero},
      {"jitter 0 draws nothing from the PRNG", test_no_jitter_draws_nothing},
      {"jitter is d + round(d*U[-j,+j]) with one draw per delay",
       test_jitter_follows_formula_with_one_draw},
      {"jitter stays within +/-20%", test_jitter_stays_within_20_percent},
      {"jitter larger than 1 clamps at 0", test_large_jitter_clamps_at_zero},
      {"retryable set is exactly 408,429,500,502,503,504", test_retryable_set_is_exact},
  };
  return PDT_SUITE("retry", cases);
}
