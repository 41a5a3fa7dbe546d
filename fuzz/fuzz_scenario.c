/* fuzz_scenario: arbitrary bytes into pd_scenario_parse. A rejected input must come with a
 * NUL-terminated "<path>: ..." message and one of the documented codes; an accepted one must
 * satisfy every constraint docs/scenarios.md states, and parsing it again must give the same
 * bytes. Traps on any violation. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_policy.h"
#include "pd_scenario.h"
#include "fuzz_reader.h"

#define FZ_PATH "fuzz.json"
#define FZ_ERR_BYTES 1024
#define FZ_MAX_TOKENS 100000u

static int is_frac(double d) { return d >= 0.0 && d <= 1.0; }

/* A NUL-terminated, non-empty string within its buffer. */
static int is_cstr(const char *s, size_t cap) { return s[0] != '\0' && memchr(s, 0, cap); }

static void check_fault(const pd_fault_t *f) {
  FZ_CHECK((unsigned)f->kind < PD_FAULT_KIND_COUNT);
  FZ_CHECK(f->kind == PD_FAULT_STATUS ? f->status >= 400 && f->status <= 599
                                   : f->status == 0 || (f->status >= 400 && f->status <= 599));
  FZ_CHECK((f->nth_from == 0 && f->nth_to == 0) || (f->nth_from >= 1 && f->nth_from <= f->nth_to));
  FZ_CHECK(f->ms <= PD_SCENARIO_MAX_MS);
  FZ_CHECK(is_frac(f->prob));
}

static void check_worker(const pd_scenario_t *s, uint32_t i) {
  const pd_scenario_worker_t *w = &s->workers[i];
  FZ_CHECK(is_cstr(w->name, sizeof w->name));
  for (uint32_t j = 0; j < i; j++) FZ_CHECK(strcmp(s->workers[j].name, w->name) != 0);
  FZ_CHECK(w->role == PD_ROLE_PREFILL || w->role == PD_ROLE_DECODE);
  FZ_CHECK((unsigned)w->chunking <= PD_CHUNK_COALESCE);
  FZ_CHECK(w->forward_ms <= PD_SCENARIO_MAX_MS && w->kv_ms <= PD_SCENARIO_MAX_MS);
  FZ_CHECK(w->first_token_ms <= PD_SCENARIO_MAX_MS && w->token_ms <= PD_SCENARIO_MAX_MS);
  FZ_CHECK(w->crash_at_ms <= PD_SCENARIO_MAX_MS && w->restart_at_ms <= PD_SCENARIO_MAX_MS);
  FZ_CHECK(!w->crash_at_ms || !w->restart_at_ms || w->restart_at_ms > w->crash_at_ms);
  FZ_CHECK(w->n_faults <= PD_SCENARIO_MAX_FAULTS);
  for (uint32_t k = 0; k < w->n_faults; k++) check_fault(&w->faults[k]);
  FZ_CHECK(w->split_parts >= 2 && w->split_parts <= PD_SCENARIO_MAX_SPLIT);
  FZ_CHECK(w->open_delay_ms <= PD_SCENARIO_MAX_MS);
  FZ_CHECK(w->breaker_initial >= 0 && w->breaker_initial <= 2);
  /* capacity (docs/scenarios.md): ranges, and a pool of at least one page */
  FZ_CHECK(w->max_running >= 1 && w->max_running <= 1000000);
  FZ_CHECK(w->page_size >= 1 && w->page_size <= 65536);
  FZ_CHECK(w->kv_tokens >= w->page_size && w->kv_tokens <= (1ull << 40));
  FZ_CHECK(w->reserved_decode_tokens <= 1000000 && w->forward_us_per_token <= 1000000);
  FZ_CHECK(w->max_prefill_tokens >= 1 && w->max_prefill_tokens <= 10000000);
  /* protocol and vLLM's KV expiry */
  FZ_CHECK((unsigned)w->protocol <= PD_PROTOCOL_VLLM && (unsigned)w->kv_expiry <= PD_KV_EXPIRY_LEASE);
  FZ_CHECK(w->kv_abort_timeout_ms >= 1 && w->kv_abort_timeout_ms <= PD_SCENARIO_MAX_MS);
  FZ_CHECK(w->kv_lease_ms >= 1 && w->kv_lease_ms <= PD_SCENARIO_MAX_MS);
  FZ_CHECK(w->kv_heartbeat_ms <= PD_SCENARIO_MAX_MS);
}

/* Top-level faults: a leg range from 1, a role, an existing request or every one, no prob. */
static void check_tfaults(const pd_scenario_t *s) {
  FZ_CHECK(s->n_tfaults <= PD_SCENARIO_MAX_TRAFFIC_FAULTS);
  for (uint32_t i = 0; i < s->n_tfaults; i++) {
    const pd_traffic_fault_t *t = &s->tfaults[i];
    check_fault(&t->f);
    FZ_CHECK(t->f.nth_from >= 1 && t->f.prob == 1.0);
    FZ_CHECK(t->role == PD_ROLE_PREFILL || t->role == PD_ROLE_DECODE);
    FZ_CHECK(t->request == PD_TRAFFIC_FAULT_ANY || t->request < s->workload.requests);
    FZ_CHECK(t->is_sticky == 0 || t->is_sticky == 1);
  }
}

static void check_config(const pd_scenario_config_t *c) {
  pd_policy_kind_t k;
  FZ_CHECK(memchr(c->prefill_policy, 0, sizeof c->prefill_policy) != NULL);
  FZ_CHECK(memchr(c->decode_policy, 0, sizeof c->decode_policy) != NULL);
  FZ_CHECK(pd_policy_parse(c->prefill_policy, &k) == 0 && pd_policy_parse(c->decode_policy, &k) == 0);
  FZ_CHECK(c->max_attempts <= PD_MAX_ATTEMPTS);
  const uint64_t ms[] = {c->request_timeout_ms, c->first_token_timeout_ms, c->idle_timeout_ms,
                         c->total_timeout_ms,   c->tail_timeout_ms,        c->breaker_open_ms,
                         c->bootstrap_timeout_ms, c->waiting_timeout_ms,   c->deadline_ms,
                         c->grace_ms,           c->net_us,
                         c->commit_timeout_ms,  c->token_budget_ms};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) FZ_CHECK(ms[i] <= PD_SCENARIO_MAX_MS);
  FZ_CHECK(c->deadline_ms >= 1);
  FZ_CHECK(c->breaker_half_open_probes <= 1000000);
  FZ_CHECK(is_frac(c->goodput_floor)); /* I23 */
}

static void check_workload(const pd_scenario_workload_t *w) {
  FZ_CHECK(w->requests >= 1 && w->requests <= PD_SCENARIO_MAX_REQUESTS);
  FZ_CHECK(w->route == PD_ROUTE_GENERATE || w->route == PD_ROUTE_COMPLETIONS ||
        w->route == PD_ROUTE_CHAT);
  FZ_CHECK(is_frac(w->stream) && is_frac(w->logprob) && is_frac(w->disconnect_prob));
  FZ_CHECK(is_frac(w->fault_rate) && (w->poisson == 0.0 || w->poisson == 1.0));
  FZ_CHECK(w->batch <= PD_REQUEST_MAX_BATCH);
  FZ_CHECK(w->tokens <= FZ_MAX_TOKENS); /* 0: a stated zero (R-ZERO-TOKENS), SGLang workers only */
  FZ_CHECK(w->interval_ms <= PD_SCENARIO_MAX_MS && w->disconnect_at_ms <= PD_SCENARIO_MAX_MS);
  FZ_CHECK((uint64_t)w->requests * w->interval_ms <= PD_SCENARIO_MAX_MS);
  FZ_CHECK(w->n_bursts <= PD_SCENARIO_MAX_BURSTS);
  uint64_t sum = 0;
  for (uint32_t i = 0; i < w->n_bursts; i++) {
    FZ_CHECK(w->bursts[i].requests >= 1 && w->bursts[i].at_ms <= PD_SCENARIO_MAX_MS);
    FZ_CHECK(i == 0 || w->bursts[i].at_ms > w->bursts[i - 1].at_ms);
    sum += w->bursts[i].requests;
  }
  FZ_CHECK(!w->n_bursts || (sum == w->requests && !w->interval_ms && w->poisson == 0.0));
  /* prompt lengths: a max at least the (non-zero) length, at most 10^6 words in a body */
  FZ_CHECK(!w->prompt_tokens_max ||
           (w->prompt_tokens >= 1 && w->prompt_tokens_max >= w->prompt_tokens));
  uint32_t longest = w->prompt_tokens_max > w->prompt_tokens ? w->prompt_tokens_max : w->prompt_tokens;
  FZ_CHECK((uint64_t)(w->batch ? w->batch : 1) * longest <= 1000000);
}

static void check_scenario(const pd_scenario_t *s) {
  uint32_t roles[2] = {0, 0};
  FZ_CHECK(strcmp(s->path, FZ_PATH) == 0);
  FZ_CHECK(is_cstr(s->name, sizeof s->name));
  FZ_CHECK(memchr(s->description, 0, sizeof s->description) != NULL);
  FZ_CHECK(s->n_tags <= 8);
  for (uint32_t i = 0; i < s->n_tags; i++) FZ_CHECK(is_cstr(s->tags[i], sizeof s->tags[i]));
  FZ_CHECK(s->n_workers >= 2 && s->n_workers <= PD_SCENARIO_MAX_WORKERS);
  for (uint32_t i = 0; i < s->n_workers; i++) {
    check_worker(s, i);
    roles[s->workers[i].role == PD_ROLE_DECODE]++;
  }
  FZ_CHECK(roles[0] >= 1 && roles[1] >= 1);
  check_config(&s->config);
  check_workload(&s->workload);
  check_tfaults(s);
  for (int m = 0; m < PD_MODE_COUNT; m++) {
    const pd_scenario_expect_t *e = &s->expect[m];
    FZ_CHECK(e->is_set == 0 || e->is_set == 1);
    FZ_CHECK((e->violated_mask >> PD_INVARIANT_COUNT) == 0);
    FZ_CHECK(e->is_set || e->violated_mask == 0);
  }
}

static void check_error(int rc, const char *err) {
  FZ_CHECK(rc == PD_ERR_JSON || rc == PD_ERR_FIELD || rc == PD_ERR_LIMIT || rc == PD_ERR_TOO_LARGE);
  FZ_CHECK(memchr(err, 0, FZ_ERR_BYTES) != NULL);
  FZ_CHECK(strncmp(err, FZ_PATH ": ", sizeof FZ_PATH + 1) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size copy, so ASan sees any read past the end of the text. */
  char *text = malloc(size ? size : 1);
  pd_scenario_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  char err[FZ_ERR_BYTES];
  if (text && a && b) {
    if (size) memcpy(text, data, size);
    int rc = pd_scenario_parse(a, FZ_PATH, text, size, err, sizeof err);
    if (rc < 0) {
      check_error(rc, err);
    } else {
      FZ_CHECK(rc == 0 && err[0] == '\0');
      check_scenario(a);
      FZ_CHECK(pd_scenario_parse(b, FZ_PATH, text, size, err, sizeof err) == 0);
      FZ_CHECK(memcmp(a, b, sizeof *a) == 0); /* defaults() zeroes padding: byte-identical */
    }
  }
  free(b);
  free(a);
  free(text);
  return 0;
}
