/* Tests written to kill survivors of `make mutate` (docs/mutation.md, tests/mutants.json):
 * each names the mutant it kills, and the behaviour a user could name that the mutant breaks. */
#include "pd_breaker.h"
#include "pdt.h"

#define S 1000000000ULL
#define T0 (1000 * S)

/* core/pd_breaker.c window_should_open: `failure_rate_pct > 100` -> `>= 100` survived: no
 * scenario or test configured a 100 % rate, which must open once every outcome in the window
 * is a failure (and the threshold is met). */
static void test_window_rate_100_opens_on_all_failures(void) {
  pd_breaker_config_t c;
  pd_breaker_t b;
  pd_breaker_config_window(&c);
  c.failure_rate_pct = 100;
  pd_breaker_init(&b, &c);
  for (uint32_t i = 0; i + 1 < c.failure_threshold; i++)
    pd_breaker_record(&b, T0, PD_BREAKER_FAILURE, 0);
  PDT_EQ_INT(pd_breaker_state(&b, T0), PD_BREAKER_CLOSED);
  pd_breaker_record(&b, T0, PD_BREAKER_FAILURE, 0);
  PDT_EQ_INT(pd_breaker_state(&b, T0), PD_BREAKER_OPEN);
  /* one success in the window: 10 of 11 is under 100 %, so a fresh breaker stays closed */
  pd_breaker_init(&b, &c);
  pd_breaker_record(&b, T0, PD_BREAKER_SUCCESS, 0);
  for (uint32_t i = 0; i < c.failure_threshold; i++)
    pd_breaker_record(&b, T0, PD_BREAKER_FAILURE, 0);
  PDT_EQ_INT(pd_breaker_state(&b, T0), PD_BREAKER_CLOSED);
}

int pdt_suite_mutant_kills(void) {
  static const pdt_case_t cases[] = {
      {"window breaker at a 100 % rate opens when every outcome failed",
       test_window_rate_100_opens_on_all_failures},
  };
  return PDT_SUITE("mutant_kills", cases);
}
