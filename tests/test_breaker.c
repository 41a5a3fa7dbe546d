/* pd_breaker: smg's consecutive-count breaker (R3.4-R3.6) and pdref's windowed breaker with
 * bounded half-open probes (G12). Times are plain ns inputs. */
#include "pd_breaker.h"
#include "pdt.h"

#define S 1000000000ULL
#define T0 (1000 * S) /* an arbitrary start, away from 0 */

static pd_breaker_t smg_breaker(void) {
  pd_breaker_config_t c;
  pd_breaker_t b;
  pd_breaker_config_smg(&c);
  pd_breaker_init(&b, &c);
  return b;
}

static pd_breaker_t window_breaker(uint32_t max_probes) {
  pd_breaker_config_t c;
  pd_breaker_t b;
  pd_breaker_config_window(&c);
  c.half_open_max_probes = max_probes;
  pd_breaker_init(&b, &c);
  return b;
}

static void record_n(pd_breaker_t *b, uint64_t now, pd_breaker_result_t r, int n) {
  for (int i = 0; i < n; i++) pd_breaker_record(b, now, r, 0);
}

/* Open a breaker at `now` with failures, whichever its kind. */
static void trip(pd_breaker_t *b, uint64_t now) {
  record_n(b, now, PD_BREAKER_FAILURE, 10);
  PDT_EQ_INT(b->state, PD_BREAKER_OPEN);
}

/* ---- smg kind ---- */

static void test_smg_defaults(void) {
  pd_breaker_config_t c;
  pd_breaker_config_smg(&c);
  PDT_EQ_INT(c.kind, PD_BREAKER_KIND_SMG);
  PDT_EQ_U64(c.failure_threshold, 10);
  PDT_EQ_U64(c.success_threshold, 3);
  PDT_EQ_U64(c.open_ns, 60 * S);
  PDT_EQ_U64(c.window_ns, 120 * S);
}

static void test_smg_opens_after_10_consecutive_failures(void) {
  pd_breaker_t b = smg_breaker();
  for (int i = 0; i < 9; i++) PDT_EQ_INT(pd_breaker_record(&b, T0, PD_BREAKER_FAILURE, 0), 0);
  PDT_EQ_INT(pd_breaker_state(&b, T0), PD_BREAKER_CLOSED);
  PDT_TRUE(pd_breaker_can_execute(&b, T0));
  PDT_EQ_INT(pd_breaker_record(&b, T0, PD_BREAKER_FAILURE, 0), 1);
  PDT_EQ_INT(pd_breaker_state(&b, T0), PD_BREAKER_OPEN);
  PDT_FALSE(pd_breaker_can_execute(&b, T0));
  PDT_EQ_U64(b.transitions, 1);
}

static void test_smg_interleaved_successes_keep_it_closed(void) {
  pd_breaker_t b = smg_breaker();
  for (int round = 0; round < 100; round++) {
    record_n(&b, T0, PD_BREAKER_FAILURE, 9);
    record_n(&b, T0, PD_BREAKER_SUCCESS, 1);
  }
  PDT_EQ_INT(pd_breaker_state(&b, T0), PD_BREAKER_CLOSED);
  PDT_EQ_U64(b.consecutive_failures, 0);
  PDT_EQ_U64(b.consecutive_successes, 1);
}

static void test_smg_neutral_changes_nothing(void) {
  pd_breaker_t b = smg_breaker();
  record_n(&b, T0, PD_BREAKER_FAILURE, 9);
  PDT_EQ_INT(pd_breaker_record(&b, T0, PD_BREAKER_NEUTRAL, 0), 0);
  PDT_EQ_U64(b.consecutive_failures, 9);
  PDT_EQ_INT(pd_breaker_record(&b, T0, PD_BREAKER_FAILURE, 0), 1); /* the streak went on */
}

static void test_smg_open_waits_then_half_opens_lazily(void) {
  pd_breaker_t b = smg_breaker();
  trip(&b, T0);
  PDT_FALSE(pd_breaker_can_execute(&b, T0 + 60 * S - 1));
  PDT_EQ_INT(b.state, PD_BREAKER_OPEN); /* nothing moves until someone reads at >= 60 s */
  PDT_EQ_INT(pd_breaker_state(&b, T0 + 90 * S), PD_BREAKER_HALF_OPEN);
  PDT_EQ_U64(b.last_change_ns, T0 + 90 * S); /* the move is stamped when it is observed */
  PDT_EQ_U64(b.consecutive_failures, 0);
  PDT_EQ_U64(b.transitions, 2);
}

static void test_smg_half_open_admits_unlimited(void) {
  pd_breaker_t b = smg_breaker();
  trip(&b, T0);
  uint64_t t = T0 + 60 * S;
  int refused = 0, probes = 0;
  for (int i = 0; i < 1000; i++) {
    uint32_t probe = 1;
    refused += !pd_breaker_can_execute(&b, t);
    pd_breaker_admit(&b, t, &probe);
    probes += probe != 0;
  }
  PDT_EQ_INT(refused, 0);
  PDT_EQ_INT(probes, 0);
  PDT_EQ_U64(b.probes_in_flight, 0);
}

static void test_smg_half_open_closes_after_3_successes(void) {
  pd_breaker_t b = smg_breaker();
  trip(&b, T0);
  uint64_t t = T0 + 60 * S;
  PDT_EQ_INT(pd_breaker_state(&b, t), PD_BREAKER_HALF_OPEN);
  PDT_EQ_INT(pd_breaker_record(&b, t, PD_BREAKER_SUCCESS, 0), 0);
  PDT_EQ_INT(pd_breaker_record(&b, t, PD_BREAKER_SUCCESS, 0), 0);
  PDT_EQ_INT(pd_breaker_record(&b, t, PD_BREAKER_SUCCESS, 0), 1);
  PDT_EQ_INT(pd_breaker_state(&b, t), PD_BREAKER_CLOSED);
  PDT_EQ_U64(b.consecutive_successes, 0);
  PDT_EQ_U64(b.transitions, 3);
}

static void test_smg_half_open_failure_reopens_for_another_timeout(void) {
  pd_breaker_t b = smg_breaker();
  trip(&b, T0);
  uint64_t t = T0 + 60 * S;
  PDT_EQ_INT(pd_breaker_state(&b, t), PD_BREAKER_HALF_OPEN);
  record_n(&b, t, PD_BREAKER_SUCCESS, 2);
  PDT_EQ_INT(pd_breaker_record(&b, t + 1, PD_BREAKER_FAILURE, 0), 1);
  PDT_EQ_INT(b.state, PD_BREAKER_OPEN);
  PDT_FALSE(pd_breaker_can_execute(&b, t + 60 * S));
  PDT_TRUE(pd_breaker_can_execute(&b, t + 1 + 60 * S));
}

static void test_smg_late_results_while_open_change_counters_only(void) {
  pd_breaker_t b = smg_breaker();
  trip(&b, T0);
  record_n(&b, T0 + 1, PD_BREAKER_SUCCESS, 5); /* requests admitted before it opened */
  PDT_EQ_INT(b.state, PD_BREAKER_OPEN);
  PDT_EQ_U64(b.consecutive_successes, 5);
  /* still open after 60 s with no read: the record does not advance the state itself */
  PDT_EQ_INT(pd_breaker_record(&b, T0 + 61 * S, PD_BREAKER_FAILURE, 0), 0);
  PDT_EQ_INT(pd_breaker_state(&b, T0 + 61 * S), PD_BREAKER_HALF_OPEN);
}

static void test_smg_disabled_never_opens(void) {
  pd_breaker_config_t c;
  pd_breaker_t b;
  pd_breaker_config_smg(&c);
  c.failure_threshold = UINT32_MAX; /* --disable-circuit-breaker */
  pd_breaker_init(&b, &c);
  b.consecutive_failures = UINT32_MAX - 5;
  record_n(&b, T0, PD_BREAKER_FAILURE, 100);
  PDT_EQ_INT(pd_breaker_state(&b, T0), PD_BREAKER_CLOSED);
  PDT_EQ_U64(b.consecutive_failures, UINT32_MAX); /* saturates, does not wrap */
}

/* ---- window kind ---- */

static void test_window_defaults(void) {
  pd_breaker_config_t c;
  pd_breaker_config_window(&c);
  PDT_EQ_INT(c.kind, PD_BREAKER_KIND_WINDOW);
  PDT_EQ_U64(c.failure_threshold, 10);
  PDT_EQ_U64(c.success_threshold, 3);
  PDT_EQ_U64(c.open_ns, 60 * S);
  PDT_EQ_U64(c.window_ns, 120 * S);
  PDT_EQ_U64(c.failure_rate_pct, 50);
  PDT_EQ_U64(c.half_open_max_probes, 1);
}

static void test_window_opens_on_10_failures_within_window(void) {
  pd_breaker_t b = window_breaker(1);
  for (int i = 0; i < 9; i++) pd_breaker_record(&b, T0 + (uint64_t)i * 10 * S, PD_BREAKER_FAILURE, 0);
  PDT_EQ_INT(b.state, PD_BREAKER_CLOSED);
  PDT_EQ_INT(pd_breaker_record(&b, T0 + 100 * S, PD_BREAKER_FAILURE, 0), 1);
  PDT_EQ_INT(b.state, PD_BREAKER_OPEN);
}

static void test_window_failures_beyond_window_do_not_open(void) {
  pd_breaker_t b = window_breaker(1);
  /* 10 failures, 14 s apart: the first is 126 s old when the tenth lands */
  for (uint64_t i = 0; i < 10; i++) pd_breaker_record(&b, T0 + i * 14 * S, PD_BREAKER_FAILURE, 0);
  PDT_EQ_INT(pd_breaker_state(&b, T0 + 126 * S), PD_BREAKER_CLOSED);
  pd_breaker_record(&b, T0 + 127 * S, PD_BREAKER_FAILURE, 0); /* now 10 inside again */
  PDT_EQ_INT(b.state, PD_BREAKER_OPEN);
}

static void test_window_successes_do_not_reset_but_dilute(void) {
  pd_breaker_t b = window_breaker(1);
  record_n(&b, T0, PD_BREAKER_SUCCESS, 11);
  record_n(&b, T0, PD_BREAKER_FAILURE, 10); /* 10 of 21 < 50% */
  PDT_EQ_INT(b.state, PD_BREAKER_CLOSED);
  PDT_EQ_INT(pd_breaker_record(&b, T0, PD_BREAKER_FAILURE, 0), 1); /* 11 of 22 = 50% */
}

static void test_window_interleaved_failures_open_unlike_smg(void) {
  pd_breaker_t b = window_breaker(1);
  for (int i = 0; i < 9; i++) {
    pd_breaker_record(&b, T0 + (uint64_t)i * S, PD_BREAKER_SUCCESS, 0);
    pd_breaker_record(&b, T0 + (uint64_t)i * S, PD_BREAKER_FAILURE, 0);
  }
  PDT_EQ_INT(b.state, PD_BREAKER_CLOSED); /* 9 failures: below the count */
  PDT_EQ_U64(b.consecutive_failures, 1);  /* smg would never get past 1 */
  PDT_EQ_INT(pd_breaker_record(&b, T0 + 9 * S, PD_BREAKER_FAILURE, 0), 1); /* 10 of 19 */
}

static void test_window_half_open_admits_one_probe_at_a_time(void) {
  pd_breaker_t b = window_breaker(1);
  trip(&b, T0);
  uint64_t t = T0 + 60 * S;
  uint32_t p1 = 0, p2 = 9;
  PDT_TRUE(pd_breaker_can_execute(&b, t));
  pd_breaker_admit(&b, t, &p1);
  PDT_EQ_U64(p1, 1); /* the first half-open period's tag */
  PDT_FALSE(pd_breaker_can_execute(&b, t));
  pd_breaker_admit(&b, t, &p2); /* a caller that did not ask: no second slot */
  PDT_EQ_U64(p2, 0);
  PDT_EQ_U64(b.probes_in_flight, 1);
  PDT_EQ_INT(pd_breaker_record(&b, t + 1, PD_BREAKER_SUCCESS, p1), 0);
  PDT_TRUE(pd_breaker_can_execute(&b, t + 1));
}

static void test_window_closed_admit_is_not_a_probe(void) {
  pd_breaker_t b = window_breaker(1);
  uint32_t p = 9;
  pd_breaker_admit(&b, T0, &p);
  PDT_EQ_U64(p, 0);
  PDT_EQ_U64(b.probes_in_flight, 0);
}

static void test_window_three_probe_successes_close_with_clean_window(void) {
  pd_breaker_t b = window_breaker(1);
  trip(&b, T0);
  uint64_t t = T0 + 60 * S;
  for (int i = 0; i < 3; i++) {
    uint32_t p = 0;
    PDT_TRUE(pd_breaker_can_execute(&b, t));
    pd_breaker_admit(&b, t, &p);
    pd_breaker_record(&b, t, PD_BREAKER_SUCCESS, p);
  }
  PDT_EQ_INT(b.state, PD_BREAKER_CLOSED);
  PDT_EQ_U64(b.transitions, 3);
  record_n(&b, t, PD_BREAKER_FAILURE, 9); /* the old 10 failures no longer count */
  PDT_EQ_INT(b.state, PD_BREAKER_CLOSED);
}

static void test_window_probe_failure_reopens(void) {
  pd_breaker_t b = window_breaker(1);
  trip(&b, T0);
  uint64_t t = T0 + 60 * S;
  uint32_t p = 0;
  pd_breaker_admit(&b, t, &p);
  PDT_EQ_INT(pd_breaker_record(&b, t + 5, PD_BREAKER_FAILURE, p), 1);
  PDT_EQ_INT(b.state, PD_BREAKER_OPEN);
  PDT_FALSE(pd_breaker_can_execute(&b, t + 5 + 60 * S - 1));
  PDT_TRUE(pd_breaker_can_execute(&b, t + 5 + 60 * S));
}

static void test_window_neutral_releases_probe_counts_nothing(void) {
  pd_breaker_t b = window_breaker(1);
  trip(&b, T0);
  uint64_t t = T0 + 60 * S;
  uint32_t p = 0;
  pd_breaker_admit(&b, t, &p);
  PDT_EQ_INT(pd_breaker_record(&b, t, PD_BREAKER_NEUTRAL, p), 0);
  PDT_EQ_U64(b.probes_in_flight, 0);
  PDT_EQ_U64(b.consecutive_successes, 0);
  PDT_EQ_INT(b.state, PD_BREAKER_HALF_OPEN);
  PDT_TRUE(pd_breaker_can_execute(&b, t));
}

static void test_window_old_period_probe_does_not_underflow(void) {
  pd_breaker_t b = window_breaker(2);
  trip(&b, T0);
  uint64_t t = T0 + 60 * S;
  uint32_t pa = 0, pb = 0;
  pd_breaker_admit(&b, t, &pa);
  pd_breaker_admit(&b, t, &pb);
  PDT_EQ_U64(b.probes_in_flight, 2);
  pd_breaker_record(&b, t + 1, PD_BREAKER_FAILURE, pa); /* re-opens, slots start over */
  PDT_EQ_INT(b.state, PD_BREAKER_OPEN);
  PDT_EQ_INT(pd_breaker_record(&b, t + 2, PD_BREAKER_SUCCESS, pb), 0);
  PDT_EQ_U64(b.probes_in_flight, 0);
  PDT_EQ_INT(b.state, PD_BREAKER_OPEN);
  uint64_t t2 = t + 1 + 60 * S; /* the next half-open period has its full two slots */
  uint32_t q1 = 0, q2 = 0;
  pd_breaker_admit(&b, t2, &q1);
  pd_breaker_admit(&b, t2, &q2);
  PDT_TRUE(q1 != 0 && q2 != 0 && q1 != pa); /* a new period's tag */
  PDT_FALSE(pd_breaker_can_execute(&b, t2));
}

/* Issue 24, section 3: a probe belongs to the half-open period it was admitted in. Probe A
 * of the first period is still out when a late failure of a request admitted while closed
 * re-opens the breaker; in the next period probe B takes the one slot. A's late result then
 * frees nothing: B is the only probe, and no third is admitted. (Before, A's release freed
 * B's slot and C went out beside B: two probes of one period with one slot.) */
static void test_window_a_probe_of_an_earlier_period_frees_no_slot(void) {
  pd_breaker_t b = window_breaker(1);
  trip(&b, T0);
  uint64_t t = T0 + 60 * S;
  uint32_t pa = 0, pb = 0, pc = 0;
  pd_breaker_admit(&b, t, &pa);
  PDT_TRUE(pa != 0);
  PDT_EQ_INT(pd_breaker_record(&b, t + 1, PD_BREAKER_FAILURE, 0), 1); /* re-opens; A still out */
  uint64_t t2 = t + 1 + 60 * S;
  pd_breaker_admit(&b, t2, &pb);
  PDT_TRUE(pb != 0);
  PDT_FALSE(pd_breaker_can_execute(&b, t2));
  PDT_EQ_INT(pd_breaker_record(&b, t2 + 1, PD_BREAKER_SUCCESS, pa), 0); /* A's late result */
  PDT_FALSE(pd_breaker_can_execute(&b, t2 + 1));
  pd_breaker_admit(&b, t2 + 1, &pc);
  PDT_TRUE(pc == 0);
  PDT_EQ_U64(b.probes_in_flight, 1);
  PDT_EQ_INT(pd_breaker_record(&b, t2 + 2, PD_BREAKER_NEUTRAL, pb), 0); /* B frees its slot */
  PDT_TRUE(pd_breaker_can_execute(&b, t2 + 2));
}

static void test_window_disabled_never_opens(void) {
  pd_breaker_config_t c;
  pd_breaker_t b;
  pd_breaker_config_window(&c);
  c.failure_threshold = UINT32_MAX;
  pd_breaker_init(&b, &c);
  record_n(&b, T0, PD_BREAKER_FAILURE, 1000);
  PDT_EQ_INT(pd_breaker_state(&b, T0), PD_BREAKER_CLOSED);
}

/* R-BREAKER-BOUND: a held open counts the failure but keeps the breaker Closed; the next
 * failure allowed to open opens it at once (the window still holds the earlier ones). */
static void test_window_bounded_record_holds_closed(void) {
  pd_breaker_config_t c;
  pd_breaker_t b;
  pd_breaker_config_window(&c);
  pd_breaker_init(&b, &c);
  for (int i = 0; i < 20; i++) pd_breaker_record_bounded(&b, T0, PD_BREAKER_FAILURE, 0, 0);
  PDT_EQ_INT(b.state, PD_BREAKER_CLOSED);
  PDT_EQ_INT(pd_breaker_record_bounded(&b, T0, PD_BREAKER_FAILURE, 0, 1), 1);
  PDT_EQ_INT(b.state, PD_BREAKER_OPEN);
}

static void test_window_tiny_window_is_safe(void) {
  pd_breaker_config_t c;
  pd_breaker_t b;
  pd_breaker_config_window(&c);
  c.window_ns = 3; /* narrower than the bucket count */
  c.failure_threshold = 2;
  pd_breaker_init(&b, &c);
  pd_breaker_record(&b, 100, PD_BREAKER_FAILURE, 0);
  pd_breaker_record(&b, 103, PD_BREAKER_FAILURE, 0); /* the first is 3 ns old: gone */
  PDT_EQ_INT(b.state, PD_BREAKER_CLOSED);
  pd_breaker_record(&b, 105, PD_BREAKER_FAILURE, 0);
  PDT_EQ_INT(b.state, PD_BREAKER_OPEN);
}

static void test_state_names(void) {
  PDT_EQ_STR(pd_breaker_state_name(PD_BREAKER_CLOSED), "closed");
  PDT_EQ_STR(pd_breaker_state_name(PD_BREAKER_OPEN), "open");
  PDT_EQ_STR(pd_breaker_state_name(PD_BREAKER_HALF_OPEN), "half_open");
  PDT_EQ_STR(pd_breaker_state_name((pd_breaker_state_t)7), "unknown");
}

int pdt_suite_breaker(void) {
  static const pdt_case_t cases[] = {
      {"smg defaults are 10/3/60 s/120 s", test_smg_defaults},
      {"smg breaker opens after 10 consecutive failures", test_smg_opens_after_10_consecutive_failures},
      {"smg breaker does not open on 9 failures interleaved with successes",
       test_smg_interleaved_successes_keep_it_closed},
      {"smg neutral result changes nothing", test_smg_neutral_changes_nothing},
      {"smg open breaker refuses for 60 s then half-opens when read",
       test_smg_open_waits_then_half_opens_lazily},
      {"smg half-open admits unlimited requests (R3.6)", test_smg_half_open_admits_unlimited},
      {"smg half-open closes after 3 successes", test_smg_half_open_closes_after_3_successes},
      {"smg half-open failure re-opens for another 60 s",
       test_smg_half_open_failure_reopens_for_another_timeout},
      {"smg results while open change counters only",
       test_smg_late_results_while_open_change_counters_only},
      {"smg failure_threshold UINT32_MAX never opens", test_smg_disabled_never_opens},
      {"window defaults are 120 s, 10 and 50%, 60 s, 1 probe, 3", test_window_defaults},
      {"window breaker opens on 10 failures within 120 s",
       test_window_opens_on_10_failures_within_window},
      {"window breaker: 10 failures spread over more than the window do not open it",
       test_window_failures_beyond_window_do_not_open},
      {"window breaker needs 50% failures, not just 10",
       test_window_successes_do_not_reset_but_dilute},
      {"window breaker opens on interleaved failures that smg ignores",
       test_window_interleaved_failures_open_unlike_smg},
      {"window breaker half-open admits one probe at a time",
       test_window_half_open_admits_one_probe_at_a_time},
      {"window breaker admit while closed takes no probe slot",
       test_window_closed_admit_is_not_a_probe},
      {"window breaker closes after 3 probe successes with a clean window",
       test_window_three_probe_successes_close_with_clean_window},
      {"window breaker probe failure re-opens for 60 s", test_window_probe_failure_reopens},
      {"window breaker neutral releases the probe slot and counts nothing",
       test_window_neutral_releases_probe_counts_nothing},
      {"an old-period probe result does not underflow",
       test_window_old_period_probe_does_not_underflow},
      {"window: a probe of an earlier half-open period frees no slot (issue 24)",
       test_window_a_probe_of_an_earlier_period_frees_no_slot},
      {"window breaker with failure_threshold UINT32_MAX never opens",
       test_window_disabled_never_opens},
      {"window narrower than its bucket count still expires outcomes",
       test_window_tiny_window_is_safe},
      {"state names", test_state_names},
      {"window: a bounded record that may not open keeps the breaker Closed (R-BREAKER-BOUND)",
       test_window_bounded_record_holds_closed},
  };
  return PDT_SUITE("breaker", cases);
}
