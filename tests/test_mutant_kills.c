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

/* core/pd_breaker.c window_should_open: `fails * 100 >= rate * total` with 101 for 100
 * survived: no test sat just under the rate. 50 failures after 51 successes is 49.5 %, under
 * the default 50 %: closed; the 51st failure makes it 50.5 %: open. */
static void test_window_just_under_rate_stays_closed(void) {
  pd_breaker_config_t c;
  pd_breaker_t b;
  pd_breaker_config_window(&c);
  PDT_EQ_U64(c.failure_rate_pct, 50);
  pd_breaker_init(&b, &c);
  for (int i = 0; i < 51; i++) pd_breaker_record(&b, T0, PD_BREAKER_SUCCESS, 0);
  for (int i = 0; i < 50; i++) pd_breaker_record(&b, T0, PD_BREAKER_FAILURE, 0);
  PDT_EQ_INT(pd_breaker_state(&b, T0), PD_BREAKER_CLOSED);
  pd_breaker_record(&b, T0, PD_BREAKER_FAILURE, 0);
  PDT_EQ_INT(pd_breaker_state(&b, T0), PD_BREAKER_OPEN);
}

int pdt_suite_mutant_kills(void) {
  static const pdt_case_t cases[] = {
      {"window breaker at a 100 % rate opens when every outcome failed",
       test_window_rate_100_opens_on_all_failures},
      {"window breaker just under its rate stays closed, at it opens",
       test_window_just_under_rate_stays_closed},
  };
  return PDT_SUITE("mutant_kills", cases);
}
