/* pd_explore_shrink: greedy delta debugging over a scenario. Each mutator offers numbered
 * variants of one simplification (variant k of "drop a fault" drops the k-th fault); a
 * variant is kept when the mutated scenario still violates the invariant, and is then tried
 * again at the same number (the next fault has moved into its place; a halved time is
 * halved again). Passes repeat until one changes nothing, within a run budget. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_explore.h"

#define SHR_MAX_VARIANTS 4096u       /* k bound of one mutator: 64 workers x 16 faults x 4 */
#define SHR_MIN_SGLANG_TIMEOUT_MS 1000u /* halved bootstrap/waiting timeouts stay >= 1 s */
#define SHR_DEFAULT_NET_US 100u

typedef enum { MUT_DONE = 0, MUT_SKIP = 1, MUT_CHANGED = 2 } mut_rc_t;
typedef mut_rc_t (*mut_fn)(pd_scenario_t *s, uint32_t k);

/* Set *v to x if that changes it. */
#define SET_TO(v, x) ((v) == (x) ? MUT_SKIP : ((v) = (x), MUT_CHANGED))

static mut_rc_t halve_u64(uint64_t *v, uint64_t floor) {
  if (*v <= floor) return MUT_SKIP;
  *v = *v / 2 < floor ? floor : *v / 2;
  return MUT_CHANGED;
}

/* Variant k: k + 1 requests. Every smaller count is tried, smallest first: fewer requests
 * also change the run's random draws (faults, stream mix), so a larger cut may succeed
 * where a smaller one failed. */
static mut_rc_t mut_requests(pd_scenario_t *s, uint32_t k) {
  if (k + 1 >= s->workload.requests) return MUT_DONE;
  s->workload.requests = k + 1;
  return MUT_CHANGED;
}

static uint32_t role_count(const pd_scenario_t *s, pd_role_t role) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->n_workers; i++) n += s->workers[i].role == role;
  return n;
}

static mut_rc_t mut_drop_worker(pd_scenario_t *s, uint32_t k) {
  if (k >= s->n_workers) return MUT_DONE;
  if (role_count(s, s->workers[k].role) < 2) return MUT_SKIP;
  memmove(&s->workers[k], &s->workers[k + 1], (s->n_workers - k - 1) * sizeof s->workers[0]);
  s->n_workers--;
  memset(&s->workers[s->n_workers], 0, sizeof s->workers[0]); /* unused slots stay zero */
  return MUT_CHANGED;
}

/* The k-th fault over all workers, or NULL past the last (*w gets its worker). */
static pd_fault_t *nth_fault(pd_scenario_t *s, uint32_t k, pd_scenario_worker_t **w) {
  for (uint32_t i = 0; i < s->n_workers; i++) {
    if (k < s->workers[i].n_faults) {
      *w = &s->workers[i];
      return &s->workers[i].faults[k];
    }
    k -= s->workers[i].n_faults;
  }
  return NULL;
}

static mut_rc_t mut_drop_fault(pd_scenario_t *s, uint32_t k) {
  pd_scenario_worker_t *w = NULL;
  pd_fault_t *f = nth_fault(s, k, &w);
  if (!f) return MUT_DONE;
  size_t after = (size_t)(&w->faults[w->n_faults] - (f + 1));
  memmove(f, f + 1, after * sizeof *f);
  w->n_faults--;
  memset(&w->faults[w->n_faults], 0, sizeof *f);
  return MUT_CHANGED;
}

/* Variant 2i: no crash (nor restart) on worker i; 2i+1: crash without restart. */
static mut_rc_t mut_drop_crash(pd_scenario_t *s, uint32_t k) {
  if (k / 2 >= s->n_workers) return MUT_DONE;
  pd_scenario_worker_t *w = &s->workers[k / 2];
  if (k % 2 == 0) {
    if (!w->crash_at_ms && !w->restart_at_ms) return MUT_SKIP;
    w->crash_at_ms = w->restart_at_ms = 0;
    return MUT_CHANGED;
  }
  return SET_TO(w->restart_at_ms, 0);
}

static int is_frac(double d) { return d > 0.0 && d < 1.0; }

static mut_rc_t mut_workload(pd_scenario_t *s, uint32_t k) {
  pd_scenario_workload_t *w = &s->workload;
  switch (k) {
  case 0: return is_frac(w->stream) ? (w->stream = 1.0, MUT_CHANGED) : MUT_SKIP;
  case 1: return is_frac(w->stream) ? (w->stream = 0.0, MUT_CHANGED) : MUT_SKIP;
  case 2: return SET_TO(w->logprob, 0.0);
  case 3: return is_frac(w->logprob) ? (w->logprob = 1.0, MUT_CHANGED) : MUT_SKIP;
  case 4: return SET_TO(w->batch, 0);
  case 5:
    if (!w->disconnect_at_ms) return MUT_SKIP;
    w->disconnect_at_ms = 0;
    w->disconnect_prob = 1.0;
    return MUT_CHANGED;
  case 6: return w->disconnect_at_ms ? SET_TO(w->disconnect_prob, 1.0) : MUT_SKIP;
  case 7: return SET_TO(w->fault_rate, 0.0);
  case 8: return SET_TO(w->poisson, 0.0);
  case 9: /* SGLang's own route; a vLLM world's simplest is /v1/completions */
    return SET_TO(w->route, pd_scenario_protocol(s) == PD_PROTOCOL_VLLM ? PD_ROUTE_COMPLETIONS
                                                                        : PD_ROUTE_GENERATE);
  case 10: {
    uint64_t t = w->tokens;
    mut_rc_t rc = halve_u64(&t, 1);
    w->tokens = (uint32_t)t;
    return rc;
  }
  case 11: return halve_u64(&w->interval_ms, 0);
  case 12: return halve_u64(&w->disconnect_at_ms, 1);
  default: return MUT_DONE;
  }
}

static mut_rc_t mut_config(pd_scenario_t *s, uint32_t k) {
  pd_scenario_config_t *c = &s->config;
  switch (k) {
  case 0:
    if (strcmp(c->prefill_policy, "round_robin") == 0) return MUT_SKIP;
    memset(c->prefill_policy, 0, sizeof c->prefill_policy);
    memcpy(c->prefill_policy, "round_robin", sizeof "round_robin");
    return MUT_CHANGED;
  case 1:
    if (strcmp(c->decode_policy, "round_robin") == 0) return MUT_SKIP;
    memset(c->decode_policy, 0, sizeof c->decode_policy);
    memcpy(c->decode_policy, "round_robin", sizeof "round_robin");
    return MUT_CHANGED;
  case 2: return c->max_attempts > 1 ? (c->max_attempts--, MUT_CHANGED) : MUT_SKIP;
  case 3: return SET_TO(c->breaker_failure_threshold, 0);
  case 4: return SET_TO(c->breaker_open_ms, 0);
  case 5: return SET_TO(c->first_token_timeout_ms, 0);
  case 6: return SET_TO(c->idle_timeout_ms, 0);
  case 7: return SET_TO(c->net_us, SHR_DEFAULT_NET_US);
  case 8: return halve_u64(&c->bootstrap_timeout_ms, SHR_MIN_SGLANG_TIMEOUT_MS);
  case 9: return halve_u64(&c->waiting_timeout_ms, SHR_MIN_SGLANG_TIMEOUT_MS);
  default: return MUT_DONE;
  }
}

/* Worker timings: each is first reset to the loader's default (the key then leaves the
 * file), else halved while above it. */
typedef struct shr_timing {
  size_t off;
  uint64_t dflt;
} shr_timing_t;

static const shr_timing_t timings[] = {
    {offsetof(pd_scenario_worker_t, forward_ms), 20},
    {offsetof(pd_scenario_worker_t, kv_ms), 5},
    {offsetof(pd_scenario_worker_t, first_token_ms), 10},
    {offsetof(pd_scenario_worker_t, token_ms), 5},
};
#define N_TIMINGS (sizeof timings / sizeof timings[0])
#define WORKER_VARIANTS (3u + 2u * N_TIMINGS)

/* Variant WORKER_VARIANTS * i + j: simplification j of worker i. */
static mut_rc_t mut_worker(pd_scenario_t *s, uint32_t k) {
  if (k / WORKER_VARIANTS >= s->n_workers) return MUT_DONE;
  pd_scenario_worker_t *w = &s->workers[k / WORKER_VARIANTS];
  uint32_t j = k % WORKER_VARIANTS;
  if (j == 0) return SET_TO(w->chunking, PD_CHUNK_EVENT);
  if (j == 1) return w->crash_at_ms ? halve_u64(&w->crash_at_ms, 1) : MUT_SKIP;
  if (j == 2) { /* restart earlier, still after the crash */
    if (!w->crash_at_ms || w->restart_at_ms / 2 <= w->crash_at_ms) return MUT_SKIP;
    w->restart_at_ms /= 2;
    return MUT_CHANGED;
  }
  const shr_timing_t *t = &timings[(j - 3) / 2];
  uint64_t *v = (uint64_t *)((char *)w + t->off);
  if ((j - 3) % 2 == 0) return SET_TO(*v, t->dflt);
  return *v > t->dflt ? halve_u64(v, t->dflt) : MUT_SKIP;
}

#define FAULT_VARIANTS 4u

static mut_rc_t mut_fault(pd_scenario_t *s, uint32_t k) {
  pd_scenario_worker_t *w = NULL;
  pd_fault_t *f = nth_fault(s, k / FAULT_VARIANTS, &w);
  if (!f) return MUT_DONE;
  switch (k % FAULT_VARIANTS) {
  case 0: return SET_TO(f->prob, 1.0);
  case 1: return SET_TO(f->nth_to, f->nth_from); /* one request instead of a range */
  case 2: {
    uint64_t t = f->after_tokens;
    mut_rc_t rc = halve_u64(&t, 0);
    f->after_tokens = (uint32_t)t;
    return rc;
  }
  default: return halve_u64(&f->ms, 0);
  }
}

/* Cheapest and biggest cuts first: later mutators then run on small worlds. */
static const mut_fn mutators[] = {mut_requests, mut_drop_worker, mut_drop_fault, mut_drop_crash,
                                  mut_workload, mut_config,      mut_worker,     mut_fault};

int pd_explore_shrink(pd_scenario_t *s, pd_mode_t mode, int inv, uint32_t max_runs,
                      uint32_t *runs) {
  uint32_t bit = 1u << (inv - 1), n = 1, mask = 0;
  pd_world_stats_t st;
  pd_scenario_t *c = malloc(sizeof *c);
  int rc = c ? pd_explore_run(s, mode, 0, &mask, &st) : PD_ERR_NOMEM;
  int is_first = rc == 0 && pd_explore_reason_inv(st.first_reason) == inv;
  for (uint32_t pass = 0; rc == 0 && pass < PD_EXPLORE_SHRINK_MAX_PASSES && n < max_runs; pass++) {
    int is_changed = 0;
    for (size_t m = 0; rc == 0 && m < sizeof mutators / sizeof mutators[0]; m++) {
      uint32_t k = 0;
      while (rc == 0 && k < SHR_MAX_VARIANTS && n < max_runs) {
        memcpy(c, s, sizeof *c);
        mut_rc_t r = mutators[m](c, k);
        if (r == MUT_DONE) break;
        if (r == MUT_SKIP) {
          k++;
          continue;
        }
        n++;
        rc = pd_explore_run(c, mode, 0, &mask, &st);
        if (rc == 0 && (mask & bit) &&
            (!is_first || pd_explore_reason_inv(st.first_reason) == inv)) {
          memcpy(s, c, sizeof *s); /* keep it, and retry the same variant number */
          is_changed = 1;
        } else {
          k++;
        }
      }
    }
    if (!is_changed) break;
  }
  free(c);
  if (runs) *runs = n;
  return rc;
}
