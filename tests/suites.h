/* Every CUnit suite, one line each: X(register function). tests/main.c runs them in order. */
#define PDT_SUITES(X)    \
  X(pdt_suite_prng)      \
  X(pdt_suite_sse)       \
  X(pdt_suite_merge)     \
  X(pdt_suite_request)   \
  X(pdt_suite_retry)     \
  X(pdt_suite_breaker)   \
  X(pdt_suite_policy)    \
  X(pdt_suite_heap)      \
  X(pdt_suite_map)       \
  X(pdt_suite_hash)      \
  X(pdt_suite_buf)       \
  X(pdt_suite_proc)      \
  X(pdt_suite_trace)     \
  X(pdt_suite_dispatch)  \
  X(pdt_suite_dispatch_more) \
  X(pdt_suite_dispatch_blame) \
  X(pdt_suite_dispatch_budget) \
  X(pdt_suite_dispatch_expiry) \
  X(pdt_suite_dispatch_nomem) \
  X(pdt_suite_rqstate)   \
  X(pdt_suite_scenario)  \
  X(pdt_suite_scenario_more) \
  X(pdt_suite_sim)       \
  X(pdt_suite_check)     \
  X(pdt_suite_explore)   \
  X(pdt_suite_gateway) \
  X(pdt_suite_gateway_slow) \
  X(pdt_suite_mock) \
  X(pdt_suite_mock_more) \
  X(pdt_suite_conform) \
  X(pdt_suite_conform_metrics) \
  X(pdt_suite_conform_judge) \
  X(pdt_suite_conform_exercised) \
  X(pdt_suite_hostile_input) \
  X(pdt_suite_hostile_http) \
  X(pdt_suite_cli)
