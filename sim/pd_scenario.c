/* pd_scenario: a table-driven loader. Each JSON object has a key table (name, setter, offset
 * into the struct, integer range, required); one walker applies it, so unknown, duplicate and
 * missing keys are handled in one place and every message carries the JSON path (the walker
 * and the value readers are in pd_scenario_read.c; this file holds the key tables). */
#include "pd_scenario.h"
#include "pd_scenario_int.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_policy.h"
#include "pd_request.h"

const char *const pd_scenario_fault_names[PD_FAULT_KIND_COUNT] = {
    "status",          "hang_before_head",       "hang_mid_stream", "reset_before_head",
    "reset_mid_stream", "sse_error",             "truncate",        "slow_drip",
    "connect_refused", "bootstrap_never_served", "never_connect",   "kv_fail",
    "prefill_lag",     "body_error",             "error_after_kv",  "net_reset",
    "response_lost"};
static const char *const inv_names[PD_INVARIANT_COUNT] = {
    "termination", "orphan-leg", "stranded-slot", "outcome",     "false-success",
    "commit",      "attempts",   "rooms",         "load-balance", "load-truth",
    "logprobs",    "breaker",    "determinism",   "error-visible", "served",
    "retry-onto-failed", "quiescence", "stranded-kv", "freed-blocks", "disaggregated",
    "pair-group", "rank-agreement", "goodput-floor", "queue-deadline",
    "retry-budget", "recovery"};
const char *const pd_scenario_role_names[2] = {"prefill", "decode"};
static const char *const chunking_names[] = {"event", "split", "coalesce"};
static const char *const breaker_names[] = {"closed", "open", "half_open"};
static const char *const protocol_names[] = {"sglang", "vllm"};
static const char *const kv_expiry_names[] = {"timeout", "lease"};
static const char *const kv_params_names[] = {"valid", "null", "invalid", "unknown_engine"};

const char *pd_fault_kind_name(pd_fault_kind_t k) {
  return (unsigned)k < PD_FAULT_KIND_COUNT ? pd_scenario_fault_names[k] : "?";
}

const char *pd_invariant_name(int inv) {
  return inv >= 1 && inv <= PD_INVARIANT_COUNT ? inv_names[inv - 1] : "?";
}

int pd_invariant_parse(const char *id) {
  if (!id || id[0] != 'I' || id[1] < '1' || id[1] > '9') return 0;
  int n = id[1] - '0', is_two = id[2] >= '0' && id[2] <= '9';
  if (id[2 + is_two] != '\0') return 0;
  n = is_two ? n * 10 + (id[2] - '0') : n;
  return n <= PD_INVARIANT_COUNT ? n : 0;
}

/* The core parses policies and routes; the loader only insists on the exact spelling. */
static int set_policy(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  char got[64], list[96];
  const char *names[] = {pd_policy_name(PD_POLICY_RANDOM), pd_policy_name(PD_POLICY_ROUND_ROBIN),
                         pd_policy_name(PD_POLICY_POWER_OF_TWO)};
  pd_policy_kind_t kind;
  if (!cJSON_IsString(v))
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected a string, got %s", GOT(v));
  if (pd_policy_parse(v->valuestring, &kind) < 0)
    return pd_scenario_fail(c, PD_ERR_FIELD, "unknown policy \"%.40s\" (expected %s)",
                            v->valuestring, pd_scenario_join_names(names, 3, list, sizeof list));
  snprintf((char *)obj + k->off, k->hi, "%s", pd_policy_name(kind));
  return 0;
}

/* workload.routed_dp_rank: kept as value + 1 (0: absent). */
static int set_dp_rank(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  uint32_t r = 0;
  int rc = pd_scenario_set_u32(c, v, &r, &(scenario_key_t){k->name, NULL, 0, k->lo, k->hi, 0,
                                                           NULL, NULL});
  if (rc == 0) ((pd_scenario_workload_t *)obj)->routed_dp_rank1 = r + 1;
  return rc;
}

static int set_route(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  char got[64], list[96];
  const char *names[] = {pd_route_path(PD_ROUTE_GENERATE), pd_route_path(PD_ROUTE_COMPLETIONS),
                         pd_route_path(PD_ROUTE_CHAT)};
  pd_route_t r;
  (void)k;
  if (!cJSON_IsString(v))
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected a string, got %s", GOT(v));
  if (pd_request_route(v->valuestring, &r) < 0 || strcmp(pd_route_path(r), v->valuestring) != 0)
    return pd_scenario_fail(c, PD_ERR_FIELD, "unknown route \"%.40s\" (expected %s)",
                            v->valuestring, pd_scenario_join_names(names, 3, list, sizeof list));
  ((pd_scenario_workload_t *)obj)->route = r;
  return 0;
}

static const scenario_key_t fault_keys[] = {
    K_ENUM(pd_fault_t, kind, pd_scenario_fault_names, "fault kind", 1),
    K_(pd_fault_t, status, pd_scenario_set_u32, 400, 599, 0), /* int: same width */
    K_(pd_fault_t, after_tokens, pd_scenario_set_u32, 0, UINT32_MAX, 0),
    K_MS(pd_fault_t, ms),
    {"nth", pd_scenario_set_nth, 0, 1, UINT32_MAX, 0, NULL, NULL},
    K_(pd_fault_t, prob, pd_scenario_set_flag, SCENARIO_FLAG_FRAC, 0, 0),
};

static int fault_elem(scenario_ctx_t *c, const cJSON *it, void *obj, uint32_t i) {
  pd_scenario_worker_t *w = obj;
  pd_fault_t *f = &w->faults[i];
  memset(f, 0, sizeof *f);
  f->prob = 1.0;
  int rc = pd_scenario_walk(c, it, fault_keys, sizeof fault_keys / sizeof fault_keys[0], f);
  if (rc == 0 && f->kind == PD_FAULT_STATUS && f->status == 0)
    rc = pd_scenario_fail(c, PD_ERR_FIELD, "kind \"status\" needs \"status\" in 400..599");
  w->n_faults = rc == 0 ? i + 1 : w->n_faults;
  return rc;
}

static int set_faults(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  (void)k;
  ((pd_scenario_worker_t *)obj)->n_faults = 0;
  return pd_scenario_each(c, v, PD_SCENARIO_MAX_FAULTS, "faults (PD_SCENARIO_MAX_FAULTS)",
                          fault_elem, obj);
}

static const scenario_key_t worker_keys[] = {
    K_STR(pd_scenario_worker_t, name, 1, 1),
    K_ENUM(pd_scenario_worker_t, role, pd_scenario_role_names, "role", 1),
    K_MS(pd_scenario_worker_t, forward_ms),
    K_MS(pd_scenario_worker_t, kv_ms),
    K_MS(pd_scenario_worker_t, first_token_ms),
    K_MS(pd_scenario_worker_t, token_ms),
    K_ENUM(pd_scenario_worker_t, chunking, chunking_names, "chunking", 0),
    K_MS(pd_scenario_worker_t, crash_at_ms),
    K_MS(pd_scenario_worker_t, restart_at_ms),
    K_(pd_scenario_worker_t, split_parts, pd_scenario_set_u32, 2, PD_SCENARIO_MAX_SPLIT, 0),
    K_MS(pd_scenario_worker_t, open_delay_ms),
    K_ENUM(pd_scenario_worker_t, breaker_initial, breaker_names, "breaker state", 0),
    {"faults", set_faults, 0, 0, 0, 0, NULL, NULL},
    /* capacity, named as SGLang's server flags (docs/capacity.md) */
    K_AS("max_running_requests", pd_scenario_worker_t, max_running, pd_scenario_set_u32, 1,
         SCENARIO_MAX_RUNNING),
    K_AS("max_total_tokens", pd_scenario_worker_t, kv_tokens, pd_scenario_set_u64, 1,
         SCENARIO_MAX_KV_TOKENS),
    K_AS("page_size", pd_scenario_worker_t, page_size, pd_scenario_set_u32, 1,
         SCENARIO_MAX_PAGE_SIZE),
    K_AS("num_reserved_decode_tokens", pd_scenario_worker_t, reserved_decode_tokens,
         pd_scenario_set_u32, 0, SCENARIO_MAX_RESERVE),
    K_AS("forward_us_per_token", pd_scenario_worker_t, forward_us_per_token, pd_scenario_set_u64,
         0, SCENARIO_MAX_US_PER_TOKEN),
    K_AS("max_prefill_tokens", pd_scenario_worker_t, max_prefill_tokens, pd_scenario_set_u32, 1,
         SCENARIO_MAX_PREFILL_TOKENS),
    /* the PD protocol and vLLM's KV expiry (V1.12, V1.13) */
    K_ENUM(pd_scenario_worker_t, protocol, protocol_names, "protocol", 0),
    K_ENUM(pd_scenario_worker_t, kv_expiry, kv_expiry_names, "kv_expiry", 0),
    K_AS("kv_abort_timeout_ms", pd_scenario_worker_t, kv_abort_timeout_ms, pd_scenario_set_u64, 1,
         PD_SCENARIO_MAX_MS),
    K_AS("kv_lease_ms", pd_scenario_worker_t, kv_lease_ms, pd_scenario_set_u64, 1,
         PD_SCENARIO_MAX_MS),
    K_MS(pd_scenario_worker_t, kv_heartbeat_ms),
    K_ENUM(pd_scenario_worker_t, kv_params, kv_params_names, "kv_params", 0),
    /* pairing topology (O5.2, S2.14) */
    K_AS("transfer_group", pd_scenario_worker_t, transfer_group, pd_scenario_set_u32, 0, 255),
    K_AS("dp_size", pd_scenario_worker_t, dp_size, pd_scenario_set_u32, 1, 64),
    K_(pd_scenario_worker_t, capacity_per_rank, pd_scenario_set_flag, SCENARIO_FLAG_BOOL, 0, 0),
    /* an abort after the KV commit is a no-op (dynamo PR #14507) */
    K_(pd_scenario_worker_t, abort_after_commit_ignored, pd_scenario_set_flag, SCENARIO_FLAG_BOOL,
       0, 0),
};

void pd_scenario_worker_defaults(pd_scenario_worker_t *w, const char *name, pd_role_t role) {
  memset(w, 0, sizeof *w);
  snprintf(w->name, sizeof w->name, "%s", name);
  w->role = role;
  w->forward_ms = 20;
  w->kv_ms = 5;
  w->first_token_ms = 10;
  w->token_ms = 5;
  w->chunking = PD_CHUNK_EVENT;
  w->split_parts = 2;
  w->breaker_initial = PD_BREAKER_CLOSED;
  w->max_running = PD_WORKER_DEFAULT_MAX_RUNNING;
  w->kv_tokens = PD_WORKER_DEFAULT_KV_TOKENS;
  w->dp_size = 1;
  w->page_size = PD_WORKER_DEFAULT_PAGE_SIZE;
  w->reserved_decode_tokens = PD_WORKER_DEFAULT_DECODE_RESERVE;
  w->max_prefill_tokens = PD_WORKER_DEFAULT_MAX_PREFILL_TOKENS;
  w->protocol = PD_PROTOCOL_SGLANG;
  w->kv_expiry = PD_KV_EXPIRY_TIMEOUT;
  w->kv_abort_timeout_ms = PD_WORKER_DEFAULT_KV_ABORT_TIMEOUT_MS;
  w->kv_lease_ms = PD_WORKER_DEFAULT_KV_LEASE_MS;
}

/* Worker i against itself and workers 0..i-1 (cJSON strings are NUL-terminated). */
static int check_worker(scenario_ctx_t *c, const pd_scenario_t *s, uint32_t i) {
  const pd_scenario_worker_t *w = &s->workers[i];
  if (w->kv_tokens < w->page_size) {
    pd_scenario_json_path_key(c, "max_total_tokens");
    return pd_scenario_fail(c, PD_ERR_FIELD, "must be at least page_size (%u), got %llu",
                            (unsigned)w->page_size, (unsigned long long)w->kv_tokens);
  }
  if (w->crash_at_ms && w->restart_at_ms && w->restart_at_ms <= w->crash_at_ms) {
    pd_scenario_json_path_key(c, "restart_at_ms");
    return pd_scenario_fail(c, PD_ERR_FIELD, "must be greater than crash_at_ms (%llu), got %llu",
                (unsigned long long)w->crash_at_ms, (unsigned long long)w->restart_at_ms);
  }
  for (uint32_t j = 0; j < i; j++)
    if (strcmp(s->workers[j].name, w->name) == 0) {
      pd_scenario_json_path_key(c, "name");
      return pd_scenario_fail(c, PD_ERR_FIELD, "duplicate worker name \"%s\" (also workers[%u])",
                              w->name, (unsigned)j);
    }
  return 0;
}

static int check_roles(scenario_ctx_t *c, const pd_scenario_t *s) {
  uint32_t n[2] = {0, 0};
  if (s->n_workers < 2)
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected 2..%u workers, got %u",
                            PD_SCENARIO_MAX_WORKERS, (unsigned)s->n_workers);
  for (uint32_t i = 0; i < s->n_workers; i++) n[s->workers[i].role == PD_ROLE_DECODE]++;
  for (int r = 0; r < 2; r++)
    if (n[r] == 0)
      return pd_scenario_fail(c, PD_ERR_FIELD,
                              "no %s worker (need at least one prefill and one decode)",
                              pd_scenario_role_names[r]);
  return 0;
}

static int worker_elem(scenario_ctx_t *c, const cJSON *it, void *obj, uint32_t i) {
  pd_scenario_t *s = obj;
  pd_scenario_worker_defaults(&s->workers[i], "", PD_ROLE_PREFILL);
  int rc = pd_scenario_walk(c, it, worker_keys, sizeof worker_keys / sizeof worker_keys[0],
                            &s->workers[i]);
  if (rc == 0) rc = check_worker(c, s, i);
  s->n_workers = rc == 0 ? i + 1 : s->n_workers;
  return rc;
}

static int set_workers(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  (void)k;
  ((pd_scenario_t *)obj)->n_workers = 0; /* the file's list replaces the default pair */
  int rc = pd_scenario_each(c, v, PD_SCENARIO_MAX_WORKERS, "workers (PD_SCENARIO_MAX_WORKERS)",
                            worker_elem, obj);
  return rc < 0 ? rc : check_roles(c, obj);
}

static const scenario_key_t config_keys[] = {
    K_(pd_scenario_config_t, prefill_policy, set_policy, 0,
       SCENARIO_SIZEOF(pd_scenario_config_t, prefill_policy), 0),
    K_(pd_scenario_config_t, decode_policy, set_policy, 0,
       SCENARIO_SIZEOF(pd_scenario_config_t, decode_policy), 0),
    K_(pd_scenario_config_t, max_attempts, pd_scenario_set_u32, 0, PD_MAX_ATTEMPTS, 0),
    K_MS(pd_scenario_config_t, request_timeout_ms),
    K_MS(pd_scenario_config_t, first_token_timeout_ms),
    K_MS(pd_scenario_config_t, idle_timeout_ms),
    K_MS(pd_scenario_config_t, total_timeout_ms),
    K_MS(pd_scenario_config_t, tail_timeout_ms),
    K_MS(pd_scenario_config_t, head_timeout_ms),
    K_MS(pd_scenario_config_t, commit_timeout_ms),
    K_MS(pd_scenario_config_t, token_budget_ms),
    K_(pd_scenario_config_t, breaker_failure_threshold, pd_scenario_set_u32, 0, UINT32_MAX, 0),
    K_MS(pd_scenario_config_t, breaker_open_ms),
    K_MS(pd_scenario_config_t, bootstrap_timeout_ms),
    K_MS(pd_scenario_config_t, waiting_timeout_ms),
    K_(pd_scenario_config_t, deadline_ms, pd_scenario_set_u64, 1, PD_SCENARIO_MAX_MS, 0),
    K_MS(pd_scenario_config_t, grace_ms),
    K_MS(pd_scenario_config_t, alloc_fail_from_ms),
    K_MS(pd_scenario_config_t, alloc_fail_for_ms),
    K_(pd_scenario_config_t, alloc_fail_every, pd_scenario_set_u32, 1, 1000000, 0),
    K_MS(pd_scenario_config_t, net_us),
    K_MS(pd_scenario_config_t, slo_ttft_ms),
    K_MS(pd_scenario_config_t, slo_e2e_ms),
    K_(pd_scenario_config_t, goodput_window_ms, pd_scenario_set_u64, 10, PD_SCENARIO_MAX_MS, 0),
    K_(pd_scenario_config_t, socket_min_scale, pd_scenario_set_flag, SCENARIO_FLAG_FRAC, 0, 0),
    K_(pd_scenario_config_t, decode_only_ok, pd_scenario_set_flag, SCENARIO_FLAG_BOOL, 0, 0),
    {"seed", pd_scenario_set_seed, offsetof(pd_scenario_config_t, seed), 0,
     (uint64_t)SCENARIO_MAX_SAFE_INT, 0, NULL, NULL},
    {"tie_seed", pd_scenario_set_seed, offsetof(pd_scenario_config_t, tie_seed), 0,
     (uint64_t)SCENARIO_MAX_SAFE_INT, 0, NULL, NULL},
    K_(pd_scenario_config_t, breaker_half_open_probes, pd_scenario_set_u32, 0, 1000000, 0),
    K_(pd_scenario_config_t, admission, pd_scenario_set_flag, SCENARIO_FLAG_BOOL, 0, 0),
    K_(pd_scenario_config_t, admit_queue, pd_scenario_set_u32, 0, 1000000, 0),
    K_MS(pd_scenario_config_t, admit_queue_ms),
    K_(pd_scenario_config_t, goodput_floor, pd_scenario_set_flag, SCENARIO_FLAG_FRAC, 0, 0),
    K_MS(pd_scenario_config_t, recover_within_ms),
    K_ENUM(pd_scenario_config_t, seeded_bug, pd_seeded_bug_names, "seeded bug", 0),
};

static const scenario_key_t workload_keys[] = {
    K_(pd_scenario_workload_t, requests, pd_scenario_set_u32, 1, PD_SCENARIO_MAX_REQUESTS, 0),
    K_(pd_scenario_workload_t, route, set_route, 0, 0, 0),
    K_(pd_scenario_workload_t, stream, pd_scenario_set_flag,
       SCENARIO_FLAG_BOOL | SCENARIO_FLAG_FRAC, 0, 0),
    K_(pd_scenario_workload_t, logprob, pd_scenario_set_flag,
       SCENARIO_FLAG_BOOL | SCENARIO_FLAG_FRAC, 0, 0),
    K_(pd_scenario_workload_t, critical_share, pd_scenario_set_flag, SCENARIO_FLAG_FRAC, 0, 0),
    K_(pd_scenario_workload_t, sheddable_share, pd_scenario_set_flag, SCENARIO_FLAG_FRAC, 0, 0),
    K_(pd_scenario_workload_t, batch, pd_scenario_set_u32, 0, PD_REQUEST_MAX_BATCH, 0),
    K_(pd_scenario_workload_t, tokens, pd_scenario_set_u32, 0, SCENARIO_MAX_TOKENS, 0),
    K_MS(pd_scenario_workload_t, interval_ms),
    K_(pd_scenario_workload_t, poisson, pd_scenario_set_flag, SCENARIO_FLAG_BOOL, 0, 0),
    K_MS(pd_scenario_workload_t, disconnect_at_ms),
    K_(pd_scenario_workload_t, disconnect_prob, pd_scenario_set_flag, SCENARIO_FLAG_FRAC, 0, 0),
    K_MS(pd_scenario_workload_t, client_blocked_at_ms),
    K_MS(pd_scenario_workload_t, client_blocked_ms),
    K_(pd_scenario_workload_t, fault_rate, pd_scenario_set_flag, SCENARIO_FLAG_FRAC, 0, 0),
    {"bursts", pd_scenario_set_bursts, 0, 0, 0, 0, NULL, NULL},
    K_(pd_scenario_workload_t, prompt_tokens, pd_scenario_set_u32, 0, SCENARIO_MAX_PROMPT_TOKENS,
       0),
    K_(pd_scenario_workload_t, prompt_tokens_max, pd_scenario_set_u32, 0,
       SCENARIO_MAX_PROMPT_TOKENS, 0),
    K_(pd_scenario_workload_t, users, pd_scenario_set_u32, 0, PD_SCENARIO_MAX_USERS, 0),
    K_MS(pd_scenario_workload_t, think_ms),
    K_MS(pd_scenario_workload_t, client_timeout_ms),
    K_(pd_scenario_workload_t, client_retries, pd_scenario_set_u32, 0,
       PD_SCENARIO_MAX_CLIENT_RETRIES, 0),
    K_MS(pd_scenario_workload_t, retry_backoff_ms),
    K_MS(pd_scenario_workload_t, retry_backoff_max_ms),
    K_(pd_scenario_workload_t, retry_jitter, pd_scenario_set_flag, SCENARIO_FLAG_FRAC, 0, 0),
    {"steps", pd_scenario_set_steps, 0, 0, 0, 0, NULL, NULL},
    {"routed_dp_rank", set_dp_rank, offsetof(pd_scenario_workload_t, routed_dp_rank1), 0, 32767,
     0, NULL, NULL},
};

static int set_config(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  (void)k;
  return pd_scenario_walk(c, v, config_keys, sizeof config_keys / sizeof config_keys[0],
              &((pd_scenario_t *)obj)->config);
}

/* prompt_tokens_max: at least prompt_tokens (>= 1); every prompt of a batch has the length */
static int check_prompt(scenario_ctx_t *c, const pd_scenario_workload_t *w) {
  uint64_t words = (uint64_t)(w->batch ? w->batch : 1) *
                   (w->prompt_tokens_max > w->prompt_tokens ? w->prompt_tokens_max
                                                            : w->prompt_tokens);
  if (w->prompt_tokens_max && (!w->prompt_tokens || w->prompt_tokens_max < w->prompt_tokens)) {
    size_t old = pd_scenario_json_path_key(c, "prompt_tokens_max");
    int rc = pd_scenario_fail(c, PD_ERR_FIELD,
                              "must be at least prompt_tokens (%u, which must be at least 1), "
                              "got %u", (unsigned)w->prompt_tokens,
                              (unsigned)w->prompt_tokens_max);
    pd_scenario_json_path_pop(c, old);
    return rc;
  }
  if (words > SCENARIO_MAX_PROMPT_TOKENS)
    return pd_scenario_fail(c, PD_ERR_FIELD,
                            "batch * prompt tokens = %llu words in one body exceeds %u "
                            "(SCENARIO_MAX_PROMPT_TOKENS)",
                            (unsigned long long)words, SCENARIO_MAX_PROMPT_TOKENS);
  return 0;
}

static int set_workload(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  pd_scenario_workload_t *w = &((pd_scenario_t *)obj)->workload;
  (void)k;
  int rc = pd_scenario_walk(c, v, workload_keys, sizeof workload_keys / sizeof workload_keys[0], w);
  if (rc == 0 && w->interval_ms > PD_SCENARIO_MAX_MS / w->requests)
    rc = pd_scenario_fail(c, PD_ERR_FIELD,
                          "requests * interval_ms = %llu ms exceeds %u ms (PD_SCENARIO_MAX_MS)",
                          (unsigned long long)w->requests * w->interval_ms, PD_SCENARIO_MAX_MS);
  return rc == 0 ? check_prompt(c, w) : rc;
}

static int tag_elem(scenario_ctx_t *c, const cJSON *it, void *obj, uint32_t i) {
  pd_scenario_t *s = obj;
  const scenario_key_t tag = {"tag", pd_scenario_set_str, 0, 1, sizeof s->tags[0], 0, NULL, NULL};
  int rc = pd_scenario_set_str(c, it, s->tags[i], &tag);
  s->n_tags = rc == 0 ? i + 1 : s->n_tags;
  return rc;
}

static int set_tags(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  pd_scenario_t *s = obj;
  (void)k;
  s->n_tags = 0;
  return pd_scenario_each(c, v, sizeof s->tags / sizeof s->tags[0], "tags", tag_elem, s);
}

/* One invariant ID of an expect list; obj is the mask so far (each element adds a bit). */
static int inv_elem(scenario_ctx_t *c, const cJSON *it, void *obj, uint32_t i) {
  char got[64];
  uint32_t *mask = obj;
  int inv = cJSON_IsString(it) ? pd_invariant_parse(it->valuestring) : 0;
  (void)i;
  if (!inv)
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected an invariant ID I1..I%d, got %s",
                            PD_INVARIANT_COUNT, GOT(it));
  if (*mask & (1u << (inv - 1)))
    return pd_scenario_fail(c, PD_ERR_FIELD, "duplicate invariant \"I%d\"", inv);
  *mask |= 1u << (inv - 1);
  return 0;
}

/* {"deployment_limit": [IDs], "why": "..."}: the exact set that must be violated, declared a
 * limit of the deployment no gateway can pass (docs/spec.md "Deployment limits"). */
static int parse_limit(scenario_ctx_t *c, const cJSON *v, pd_scenario_expect_t *e) {
  char got[64];
  const cJSON *ids = NULL, *why = NULL;
  for (const cJSON *it = v->child; it; it = it->next) {
    size_t old = pd_scenario_json_path_key(c, it->string);
    int rc = 0;
    if (it->string && !strcmp(it->string, "deployment_limit") && !ids) ids = it;
    else if (it->string && !strcmp(it->string, "why") && !why) why = it;
    else rc = pd_scenario_fail(c, PD_ERR_FIELD, "unknown or duplicate key (expected "
                               "\"deployment_limit\" and \"why\")");
    if (rc == 0 && it == why &&
        (!cJSON_IsString(it) || !it->valuestring[0] || strlen(it->valuestring) >= sizeof e->limit_why))
      rc = pd_scenario_fail(c, PD_ERR_FIELD, "expected the reason, a string of 1..%zu characters, "
                            "got %s", sizeof e->limit_why - 1, GOT(it));
    uint32_t mask = 0;
    if (rc == 0 && it == ids && !cJSON_IsArray(it))
      rc = pd_scenario_fail(c, PD_ERR_FIELD, "expected a list of invariant IDs, got %s", GOT(it));
    else if (rc == 0 && it == ids)
      rc = pd_scenario_each(c, it, PD_INVARIANT_COUNT, "invariant IDs", inv_elem, &mask);
    if (rc == 0 && it == ids && !mask)
      rc = pd_scenario_fail(c, PD_ERR_FIELD, "expected at least one invariant ID (a deployment "
                            "limit violates something)");
    if (it == ids) e->violated_mask = e->limit_mask = mask;
    pd_scenario_json_path_pop(c, old);
    if (rc < 0) return rc;
  }
  if (!ids || !why)
    return pd_scenario_fail(c, PD_ERR_FIELD, "a deployment limit needs both \"deployment_limit\" "
                            "(the invariants) and \"why\" (why no gateway can pass)");
  snprintf(e->limit_why, sizeof e->limit_why, "%s", why->valuestring);
  e->is_set = 1;
  return 0;
}

/* "pass", the exact list of invariant IDs that must be violated, or a deployment limit. */
static int parse_verdict(scenario_ctx_t *c, const cJSON *v, pd_scenario_expect_t *e) {
  char got[64];
  uint32_t mask = 0;
  int is_pass = cJSON_IsString(v) && strcmp(v->valuestring, "pass") == 0;
  if (cJSON_IsObject(v)) return parse_limit(c, v, e);
  if (!is_pass && !cJSON_IsArray(v))
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected \"pass\", a list of invariant IDs such as "
                "[\"I2\", \"I3\"] or {\"deployment_limit\": [...], \"why\": \"...\"}, got %s", GOT(v));
  int rc =
      is_pass ? 0 : pd_scenario_each(c, v, PD_INVARIANT_COUNT, "invariant IDs", inv_elem, &mask);
  e->is_set = rc == 0;
  e->violated_mask = mask;
  return rc;
}

/* An object keyed by mode names: fn reads each entry's value for its mode (and refuses a
 * mode it has already set); an unknown mode fails here. */
typedef int (*mode_fn)(scenario_ctx_t *c, const cJSON *it, pd_scenario_t *s, pd_mode_t m);

static int each_mode(scenario_ctx_t *c, const cJSON *v, pd_scenario_t *s, mode_fn fn) {
  char got[64], list[96];
  const char *modes[PD_MODE_COUNT];
  if (!cJSON_IsObject(v))
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected an object, got %s", GOT(v));
  for (int m = 0; m < PD_MODE_COUNT; m++) modes[m] = pd_mode_name((pd_mode_t)m);
  for (const cJSON *it = v->child; it; it = it->next) {
    pd_mode_t m = PD_MODE_JOINED;
    size_t old = pd_scenario_json_path_key(c, it->string);
    int rc;
    if (!it->string || pd_mode_parse(it->string, &m) < 0)
      rc = pd_scenario_fail(c, PD_ERR_FIELD, "unknown mode (expected %s)",
                pd_scenario_join_names(modes, PD_MODE_COUNT, list, sizeof list));
    else rc = fn(c, it, s, m);
    pd_scenario_json_path_pop(c, old);
    if (rc < 0) return rc;
  }
  return 0;
}

static int expect_mode(scenario_ctx_t *c, const cJSON *it, pd_scenario_t *s, pd_mode_t m) {
  if (s->expect[m].is_set) return pd_scenario_fail(c, PD_ERR_FIELD, "duplicate key");
  return parse_verdict(c, it, &s->expect[m]);
}

/* Keys are mode names; each pass sets a new mode or fails (at most PD_MODE_COUNT + 1). */
static int set_expect(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  (void)k;
  return each_mode(c, v, obj, expect_mode);
}

static int unexercised_mode(scenario_ctx_t *c, const cJSON *it, pd_scenario_t *s, pd_mode_t m) {
  char got[64];
  if (s->unexercised[m][0]) return pd_scenario_fail(c, PD_ERR_FIELD, "duplicate key");
  if (!cJSON_IsString(it) || !it->valuestring[0] ||
      strlen(it->valuestring) >= sizeof s->unexercised[m])
    return pd_scenario_fail(c, PD_ERR_FIELD,
                       "expected the reason, a string of 1..%zu characters, got %s",
                       sizeof s->unexercised[m] - 1, GOT(it));
  snprintf(s->unexercised[m], sizeof s->unexercised[m], "%s", it->valuestring);
  return 0;
}

/* {mode: reason}: the modes in which a fault entry of the scenario cannot fire. */
static int set_unexercised(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  (void)k;
  return each_mode(c, v, obj, unexercised_mode);
}

static const scenario_key_t top_keys[] = {
    K_STR(pd_scenario_t, name, 1, 1),
    K_STR(pd_scenario_t, description, 0, 0),
    {"tags", set_tags, 0, 0, 0, 0, NULL, NULL},
    {"config", set_config, 0, 0, 0, 0, NULL, NULL},
    {"workers", set_workers, 0, 0, 0, 1, NULL, NULL},
    {"workload", set_workload, 0, 0, 0, 0, NULL, NULL},
    {"faults", pd_scenario_set_traffic_faults, 0, 0, 0, 0, NULL, NULL},
    {"expect", set_expect, 0, 0, 0, 1, NULL, NULL},
    {"unexercised", set_unexercised, 0, 0, 0, 0, NULL, NULL},
};

/* ---- entry points ---- */

void pd_scenario_gw_config(const pd_scenario_t *s, pd_mode_t mode, pd_gw_config_t *c) {
  const uint64_t ms = 1000000ull;
  const pd_scenario_config_t *sc = &s->config;
  pd_gw_config_default(c, mode);
  if (pd_mode_speaks(mode, pd_scenario_protocol(s))) c->protocol = pd_scenario_protocol(s);
  if (mode != PD_MODE_MINILB) { /* mini_lb: random, no retries, no breaker (M8.1, M8.5) */
    pd_policy_parse(sc->prefill_policy, &c->policy[0]);
    pd_policy_parse(sc->decode_policy, &c->policy[1]);
    if (sc->max_attempts) c->retry.max_attempts = sc->max_attempts;
    if (sc->breaker_failure_threshold) c->breaker.failure_threshold = sc->breaker_failure_threshold;
    if (sc->breaker_open_ms) c->breaker.open_ns = sc->breaker_open_ms * ms;
    if (sc->breaker_half_open_probes) c->breaker.half_open_max_probes = sc->breaker_half_open_probes;
  }
  if (sc->request_timeout_ms && mode != PD_MODE_REFERENCE &&
      pd_mode_protocol(mode) == PD_PROTOCOL_SGLANG) /* the vLLM-family models have none */
    c->request_timeout_ns = sc->request_timeout_ms * ms;
  if (mode == PD_MODE_REFERENCE) {
    if (sc->first_token_timeout_ms) c->first_token_timeout_ns = sc->first_token_timeout_ms * ms;
    if (sc->head_timeout_ms) c->head_timeout_ns = sc->head_timeout_ms * ms;
    if (sc->idle_timeout_ms) c->idle_timeout_ns = sc->idle_timeout_ms * ms;
    if (sc->total_timeout_ms) c->total_timeout_ns = sc->total_timeout_ms * ms;
    if (sc->tail_timeout_ms) c->prefill_tail_timeout_ns = sc->tail_timeout_ms * ms;
    if (sc->commit_timeout_ms) c->commit_timeout_ns = sc->commit_timeout_ms * ms;
    if (sc->token_budget_ms) c->token_budget_ns = sc->token_budget_ms * ms;
    if (sc->admit_queue) c->admit_queue_max = sc->admit_queue;
    if (sc->admit_queue_ms) c->admit_queue_ns = sc->admit_queue_ms * ms;
    if (sc->admission == 0.0) c->admit_queue_max = 0; /* off (R-ADMIT-*) */
    c->seeded_bug = (pd_seeded_bug_t)sc->seeded_bug;
  }
}

void pd_scenario_defaults(pd_scenario_t *s) {
  memset(s, 0, sizeof *s);
  pd_scenario_config_t *c = &s->config;
  snprintf(c->prefill_policy, sizeof c->prefill_policy, "%s", "round_robin");
  snprintf(c->decode_policy, sizeof c->decode_policy, "%s", "round_robin");
  c->bootstrap_timeout_ms = 300000;
  c->waiting_timeout_ms = 300000;
  c->deadline_ms = 120000;
  c->grace_ms = 1000;
  c->alloc_fail_every = 1;
  c->net_us = 100;
  c->slo_ttft_ms = 1000;
  c->slo_e2e_ms = 10000;
  c->goodput_window_ms = 10000;
  c->seed = 1;
  c->admission = 1.0;
  pd_scenario_worker_defaults(&s->workers[0], "p0", PD_ROLE_PREFILL);
  pd_scenario_worker_defaults(&s->workers[1], "d0", PD_ROLE_DECODE);
  s->n_workers = 2;
  pd_scenario_workload_t *w = &s->workload;
  w->requests = 1;
  w->route = PD_ROUTE_GENERATE;
  w->stream = 1.0;
  w->tokens = 8;
  w->disconnect_prob = 1.0;
  w->retry_backoff_ms = 100;
  w->retry_backoff_max_ms = 10000;
}

void pd_scenario_set_workers(pd_scenario_t *s, uint32_t n_prefill, uint32_t n_decode) {
  if (n_prefill + n_decode > PD_SCENARIO_MAX_WORKERS) return;
  char name[32];
  for (uint32_t i = 0; i < n_prefill + n_decode; i++) {
    int is_prefill = i < n_prefill;
    snprintf(name, sizeof name, "%c%u", is_prefill ? 'p' : 'd', is_prefill ? i : i - n_prefill);
    pd_scenario_worker_defaults(&s->workers[i], name, is_prefill ? PD_ROLE_PREFILL : PD_ROLE_DECODE);
  }
  s->n_workers = n_prefill + n_decode;
}

int pd_scenario_walk_top(scenario_ctx_t *c, const cJSON *root, pd_scenario_t *s) {
  return pd_scenario_walk(c, root, top_keys, sizeof top_keys / sizeof top_keys[0], s);
}
