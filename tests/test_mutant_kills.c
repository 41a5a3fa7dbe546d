/* Tests written to kill survivors of `make mutate` (docs/mutation.md, tests/mutants.json):
 * each names the mutant it kills, and the behaviour a user could name that the mutant breaks. */
#include <stdlib.h>

#include "pd_breaker.h"
#include "pd_dispatch.h"
#include "pd_sse.h"
#include "pdt.h"
#include "pdt_harness.h"

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

/* core/pd_mode_ref.c prefill_events: a prefill stream whose next event is past
 * PD_SSE_MAX_EVENT_BYTES (a whole event, in one chunk: the framer buffers it, then refuses to
 * frame it) fails prefill with 502 (`rc < 0 ? 502` -> 501 survived: no test fed prefill an
 * oversized event). Before commit: prefill's failure, recorded as 502. */
static void test_prefill_event_past_the_framer_limit_fails_it_502(void) {
  harness_t h;
  start(&h, PD_MODE_REFERENCE, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  size_t n = PD_SSE_MAX_EVENT_BYTES + 16;
  char *big = malloc(n + 1);
  PDT_TRUE(big != NULL);
  if (!big) {
    h_free(&h);
    return;
  }
  memcpy(big, "data: ", 6);
  memset(big + 6, 'x', n - 8);
  memcpy(big + n - 2, "\n\n", 3); /* one whole event: the framer takes it, then refuses it */
  h_leg(&h, PD_EV_UP_DATA, 1, 0, big);
  int status = 0;
  PDT_EQ_INT(h_outcome_of(&h, 1, &status), PD_OUTCOME_FAILURE);
  PDT_EQ_INT(status, 502);
  free(big);
  h_free(&h);
}

int pdt_suite_mutant_kills(void) {
  static const pdt_case_t cases[] = {
      {"window breaker at a 100 % rate opens when every outcome failed",
       test_window_rate_100_opens_on_all_failures},
      {"window breaker just under its rate stays closed, at it opens",
       test_window_just_under_rate_stays_closed},
      {"a prefill event past the SSE framer's limit fails prefill with 502",
       test_prefill_event_past_the_framer_limit_fails_it_502},
  };
  return PDT_SUITE("mutant_kills", cases);
}
