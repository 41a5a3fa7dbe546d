/* pd_policy: random (R1.17), round_robin (R1.18) and power_of_two (R1.19) over a candidate
 * list of worker indices, with loads indexed by worker. */
#include <string.h>

#include "pd_err.h"
#include "pd_policy.h"
#include "pd_prng.h"
#include "pdt.h"

#define POLICY_SEED 0x5eed0005ULL
#define P2_ROUNDS 5000
#define RANDOM_DRAWS 40000
#define N_WORKERS 8

static void test_no_candidates_returns_minus_one(void) {
  pd_prng_t r;
  pd_prng_init(&r, POLICY_SEED);
  uint32_t load[N_WORKERS] = {0}, cand[1] = {0};
  for (int k = PD_POLICY_RANDOM; k <= PD_POLICY_POWER_OF_TWO; k++) {
    pd_policy_t p;
    pd_policy_init(&p, (pd_policy_kind_t)k);
    PDT_EQ_INT(pd_policy_pick(&p, cand, 0, load, &r), -1);
    PDT_EQ_INT(pd_policy_pick(&p, NULL, 3, load, &r), -1);
    PDT_EQ_U64(p.rr_counter, 0); /* a failed pick does not move the rotation */
  }
}

static void test_round_robin_cycles(void) {
  pd_policy_t p;
  pd_policy_init(&p, PD_POLICY_ROUND_ROBIN);
  uint32_t cand[] = {0, 1, 2};
  static const int want[] = {0, 1, 2, 0, 1, 2, 0};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    PDT_EQ_INT(pd_policy_pick(&p, cand, 3, NULL, NULL), want[i]);
}

/* upstream keeps one counter: after 10, 11 the rotation would continue at 12, but with 11
 * gone the counter (2) lands on position 0 of {10, 12}. */
static void test_round_robin_jumps_when_list_changes(void) {
  pd_policy_t p;
  pd_policy_init(&p, PD_POLICY_ROUND_ROBIN);
  uint32_t all[] = {10, 11, 12}, without_11[] = {10, 12};
  PDT_EQ_INT(pd_policy_pick(&p, all, 3, NULL, NULL), 10);
  PDT_EQ_INT(pd_policy_pick(&p, all, 3, NULL, NULL), 11);
  PDT_EQ_INT(pd_policy_pick(&p, without_11, 2, NULL, NULL), 10);
  PDT_EQ_INT(pd_policy_pick(&p, without_11, 2, NULL, NULL), 12);
  PDT_EQ_INT(pd_policy_pick(&p, all, 3, NULL, NULL), 11); /* counter 4 % 3 */
}

/* Mirror the two draws with a copy of the PRNG and check the winner each time. */
static void test_power_of_two_less_loaded_ties_to_first(void) {
  pd_prng_t r, mirror, knobs;
  pd_prng_init(&r, POLICY_SEED);
  pd_prng_init(&knobs, POLICY_SEED + 1);
  printf("\n    power_of_two seed=0x%llx\n", (unsigned long long)POLICY_SEED);
  pd_policy_t p;
  pd_policy_init(&p, PD_POLICY_POWER_OF_TWO);
  uint32_t cand[N_WORKERS] = {7, 5, 3, 1, 0, 2, 4, 6}, load[N_WORKERS];
  int wrong = 0;
  for (int round = 0; round < P2_ROUNDS; round++) {
    uint32_t n = 2 + (uint32_t)pd_prng_below(&knobs, N_WORKERS - 1);
    for (int w = 0; w < N_WORKERS; w++) load[w] = (uint32_t)pd_prng_below(&knobs, 3); /* ties */
    mirror = r;
    uint32_t i1 = (uint32_t)pd_prng_below(&mirror, n);
    uint32_t i2 = (uint32_t)((i1 + 1 + pd_prng_below(&mirror, n - 1)) % n);
    uint32_t want = load[cand[i1]] <= load[cand[i2]] ? cand[i1] : cand[i2];
    wrong += i1 == i2 || pd_policy_pick(&p, cand, n, load, &r) != (int32_t)want;
  }
  PDT_EQ_INT(wrong, 0);
}

static void test_power_of_two_two_candidates_always_less_loaded(void) {
  pd_prng_t r;
  pd_prng_init(&r, POLICY_SEED);
  pd_policy_t p;
  pd_policy_init(&p, PD_POLICY_POWER_OF_TWO);
  uint32_t cand[] = {3, 0}, load[4] = {9, 0, 0, 1}; /* loads by worker, not by position */
  int other = 0;
  for (int i = 0; i < 1000; i++) other += pd_policy_pick(&p, cand, 2, load, &r) != 3;
  PDT_EQ_INT(other, 0);
}

static void test_power_of_two_single_candidate_draws_nothing(void) {
  pd_prng_t r, before;
  pd_prng_init(&r, POLICY_SEED);
  before = r;
  pd_policy_t p;
  pd_policy_init(&p, PD_POLICY_POWER_OF_TWO);
  uint32_t cand[] = {5}, load[6] = {0};
  PDT_EQ_INT(pd_policy_pick(&p, cand, 1, load, &r), 5);
  PDT_TRUE(memcmp(&r, &before, sizeof r) == 0);
}

static void test_random_is_one_uniform_draw(void) {
  pd_prng_t r, mirror;
  pd_prng_init(&r, POLICY_SEED);
  mirror = r;
  printf("\n    random policy seed=0x%llx\n", (unsigned long long)POLICY_SEED);
  pd_policy_t p;
  pd_policy_init(&p, PD_POLICY_RANDOM);
  uint32_t cand[] = {4, 5, 6, 7}, counts[N_WORKERS] = {0};
  int wrong = 0;
  for (int i = 0; i < RANDOM_DRAWS; i++) {
    int32_t w = pd_policy_pick(&p, cand, 4, NULL, &r);
    wrong += w != (int32_t)cand[pd_prng_below(&mirror, 4)];
    if (w >= 0 && w < N_WORKERS) counts[w]++;
  }
  PDT_EQ_INT(wrong, 0);
  for (int w = 4; w < 8; w++) PDT_TRUE(counts[w] > 9500 && counts[w] < 10500); /* sd ~87 */
}

static void test_parse_and_name_round_trip(void) {
  static const char *names[] = {"random", "round_robin", "power_of_two"};
  for (int i = 0; i < 3; i++) {
    pd_policy_kind_t k = PD_POLICY_RANDOM;
    PDT_EQ_INT(pd_policy_parse(names[i], &k), 0);
    PDT_EQ_INT(k, i);
    PDT_EQ_STR(pd_policy_name(k), names[i]);
  }
  pd_policy_kind_t k;
  PDT_EQ_INT(pd_policy_parse("cache_aware", &k), PD_ERR_INVAL); /* upstream has it; we don't */
  PDT_EQ_INT(pd_policy_parse("Random", &k), PD_ERR_INVAL);
  PDT_EQ_INT(pd_policy_parse(NULL, &k), PD_ERR_INVAL);
  PDT_EQ_STR(pd_policy_name((pd_policy_kind_t)9), "unknown");
}

int pdt_suite_policy(void) {
  static const pdt_case_t cases[] = {
      {"policy with no candidates returns -1", test_no_candidates_returns_minus_one},
      {"round robin over 3 candidates cycles 0,1,2,0", test_round_robin_cycles},
      {"round robin jumps when the candidate list changes (R1.18)",
       test_round_robin_jumps_when_list_changes},
      {"power_of_two picks the less loaded of its two picks, ties to the first",
       test_power_of_two_less_loaded_ties_to_first},
      {"power_of_two over two candidates always takes the less loaded worker",
       test_power_of_two_two_candidates_always_less_loaded},
      {"power_of_two with one candidate returns it without drawing",
       test_power_of_two_single_candidate_draws_nothing},
      {"random is one uniform draw over the candidates", test_random_is_one_uniform_draw},
      {"policy names parse and print; unknown names are PD_ERR_INVAL",
       test_parse_and_name_round_trip},
  };
  return PDT_SUITE("policy", cases);
}
