/* pd_scenario_write: builds a cJSON tree key by key in the loader's order, leaving out values
 * equal to pd_scenario_defaults, then prints it itself: two-space indentation, a value on one
 * line when it fits, and numbers that read back to the very same double. */
#include "pd_scenario_write.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_buf.h"
#include "pd_err.h"

#define WR_SAFE_INT (1ull << 53) /* larger JSON numbers are not exact: seeds go as strings */
#define WR_INDENT "  "
#define WR_LINE_BYTES 100u /* a value that fits goes on one line */

static const char *const chunking_names[] = {"event", "split", "coalesce"};
static const char *const breaker_names[] = {"closed", "open", "half_open"};
static const char *const protocol_names[] = {"sglang", "vllm"};
static const char *const kv_expiry_names[] = {"timeout", "lease"};
static const char *const kv_params_names[] = {"valid", "null", "invalid", "unknown_engine"};

/* Each add returns 0 or PD_ERR_NOMEM; `rc |= add(...)` keeps the first failure visible. */
static int add_num(cJSON *o, const char *key, double v) {
  return cJSON_AddNumberToObject(o, key, v) ? 0 : PD_ERR_NOMEM;
}

static int add_u64_if(cJSON *o, const char *key, uint64_t v, uint64_t dflt) {
  return v == dflt ? 0 : add_num(o, key, (double)v);
}

static int add_str(cJSON *o, const char *key, const char *v) {
  return cJSON_AddStringToObject(o, key, v) ? 0 : PD_ERR_NOMEM;
}

static int add_frac_if(cJSON *o, const char *key, double v, double dflt) {
  return v == dflt ? 0 : add_num(o, key, v);
}

/* A 64-bit value that JSON numbers cannot hold exactly goes as a decimal string. */
static int add_u64_exact(cJSON *o, const char *key, uint64_t v) {
  char buf[24];
  if (v <= WR_SAFE_INT) return add_num(o, key, (double)v);
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
  return add_str(o, key, buf);
}

static int add_nth(cJSON *o, const char *key, uint32_t from, uint32_t to) {
  if (from == to) return add_num(o, key, from);
  const double nth[2] = {from, to};
  cJSON *a = cJSON_CreateDoubleArray(nth, 2);
  return a && cJSON_AddItemToObject(o, key, a) ? 0 : PD_ERR_NOMEM;
}

static int fault_fields(cJSON *o, const pd_fault_t *f) {
  int rc = add_str(o, "kind", pd_fault_kind_name(f->kind));
  if (f->status) rc |= add_num(o, "status", f->status);
  rc |= add_u64_if(o, "after_tokens", f->after_tokens, 0);
  rc |= add_u64_if(o, "ms", f->ms, 0);
  return rc;
}

/* A top-level fault: role, request (absent = any), leg (absent = 1), sticky, then the kind. */
static cJSON *tfault_json(const pd_traffic_fault_t *t) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  int rc = add_str(o, "role", pd_role_name(t->role));
  if (t->request != PD_TRAFFIC_FAULT_ANY) rc |= add_num(o, "request", t->request);
  if (t->f.nth_from != 1 || t->f.nth_to != 1) rc |= add_nth(o, "leg", t->f.nth_from, t->f.nth_to);
  if (t->is_sticky && !cJSON_AddBoolToObject(o, "sticky", 1)) rc |= PD_ERR_NOMEM;
  rc |= fault_fields(o, &t->f);
  if (rc) cJSON_Delete(o);
  return rc ? NULL : o;
}

static cJSON *fault_json(const pd_fault_t *f) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  int rc = fault_fields(o, f);
  if (f->nth_from) rc |= add_nth(o, "nth", f->nth_from, f->nth_to);
  rc |= add_frac_if(o, "prob", f->prob, 1.0);
  if (rc) cJSON_Delete(o);
  return rc ? NULL : o;
}

static int worker_valid(const pd_scenario_worker_t *w) {
  if ((w->role != PD_ROLE_PREFILL && w->role != PD_ROLE_DECODE) ||
      (unsigned)w->chunking > PD_CHUNK_COALESCE || w->n_faults > PD_SCENARIO_MAX_FAULTS ||
      !w->name[0] || (unsigned)w->breaker_initial > 2 || (unsigned)w->protocol > 1 ||
      (unsigned)w->kv_expiry > 1 || (unsigned)w->kv_params > 3)
    return 0;
  for (uint32_t i = 0; i < w->n_faults; i++)
    if ((unsigned)w->faults[i].kind >= PD_FAULT_KIND_COUNT) return 0;
  return 1;
}

static cJSON *worker_json(const pd_scenario_worker_t *w, const pd_scenario_worker_t *d) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  int rc = add_str(o, "name", w->name);
  rc |= add_str(o, "role", pd_role_name(w->role));
  rc |= add_u64_if(o, "forward_ms", w->forward_ms, d->forward_ms);
  rc |= add_u64_if(o, "kv_ms", w->kv_ms, d->kv_ms);
  rc |= add_u64_if(o, "first_token_ms", w->first_token_ms, d->first_token_ms);
  rc |= add_u64_if(o, "token_ms", w->token_ms, d->token_ms);
  if (w->chunking != d->chunking) rc |= add_str(o, "chunking", chunking_names[w->chunking]);
  rc |= add_u64_if(o, "crash_at_ms", w->crash_at_ms, 0);
  rc |= add_u64_if(o, "restart_at_ms", w->restart_at_ms, 0);
  rc |= add_u64_if(o, "split_parts", w->split_parts, d->split_parts);
  rc |= add_u64_if(o, "open_delay_ms", w->open_delay_ms, d->open_delay_ms);
  if (w->breaker_initial != d->breaker_initial)
    rc |= add_str(o, "breaker_initial", breaker_names[w->breaker_initial]);
  rc |= add_u64_if(o, "max_running_requests", w->max_running, d->max_running);
  rc |= add_u64_if(o, "max_total_tokens", w->kv_tokens, d->kv_tokens);
  rc |= add_u64_if(o, "page_size", w->page_size, d->page_size);
  rc |= add_u64_if(o, "num_reserved_decode_tokens", w->reserved_decode_tokens,
                   d->reserved_decode_tokens);
  rc |= add_u64_if(o, "forward_us_per_token", w->forward_us_per_token, d->forward_us_per_token);
  rc |= add_u64_if(o, "max_prefill_tokens", w->max_prefill_tokens, d->max_prefill_tokens);
  if (w->protocol != d->protocol) rc |= add_str(o, "protocol", protocol_names[w->protocol]);
  if (w->kv_expiry != d->kv_expiry) rc |= add_str(o, "kv_expiry", kv_expiry_names[w->kv_expiry]);
  rc |= add_u64_if(o, "kv_abort_timeout_ms", w->kv_abort_timeout_ms, d->kv_abort_timeout_ms);
  rc |= add_u64_if(o, "kv_lease_ms", w->kv_lease_ms, d->kv_lease_ms);
  rc |= add_u64_if(o, "kv_heartbeat_ms", w->kv_heartbeat_ms, d->kv_heartbeat_ms);
  if (w->kv_params != d->kv_params) rc |= add_str(o, "kv_params", kv_params_names[w->kv_params]);
  rc |= add_u64_if(o, "transfer_group", w->transfer_group, d->transfer_group);
  rc |= add_u64_if(o, "dp_size", w->dp_size, d->dp_size);
  if (w->abort_after_commit_ignored != d->abort_after_commit_ignored &&
      !cJSON_AddBoolToObject(o, "abort_after_commit_ignored", w->abort_after_commit_ignored != 0))
    rc |= PD_ERR_NOMEM;
  if (w->capacity_per_rank != d->capacity_per_rank &&
      !cJSON_AddBoolToObject(o, "capacity_per_rank", w->capacity_per_rank != 0))
    rc |= PD_ERR_NOMEM;
  if (w->n_faults) {
    cJSON *a = cJSON_AddArrayToObject(o, "faults");
    rc |= a ? 0 : PD_ERR_NOMEM;
    for (uint32_t i = 0; a && i < w->n_faults && rc == 0; i++) {
      cJSON *f = fault_json(&w->faults[i]);
      rc |= f && cJSON_AddItemToArray(a, f) ? 0 : PD_ERR_NOMEM;
    }
  }
  if (rc) cJSON_Delete(o);
  return rc ? NULL : o;
}

static int config_json(cJSON *root, const pd_scenario_config_t *c, const pd_scenario_config_t *d) {
  cJSON *o = cJSON_AddObjectToObject(root, "config");
  if (!o) return PD_ERR_NOMEM;
  int rc = 0;
  if (strcmp(c->prefill_policy, d->prefill_policy) != 0)
    rc |= add_str(o, "prefill_policy", c->prefill_policy);
  if (strcmp(c->decode_policy, d->decode_policy) != 0)
    rc |= add_str(o, "decode_policy", c->decode_policy);
  rc |= add_u64_if(o, "max_attempts", c->max_attempts, d->max_attempts);
  rc |= add_u64_if(o, "request_timeout_ms", c->request_timeout_ms, d->request_timeout_ms);
  rc |= add_u64_if(o, "first_token_timeout_ms", c->first_token_timeout_ms,
                   d->first_token_timeout_ms);
  rc |= add_u64_if(o, "idle_timeout_ms", c->idle_timeout_ms, d->idle_timeout_ms);
  rc |= add_u64_if(o, "total_timeout_ms", c->total_timeout_ms, d->total_timeout_ms);
  rc |= add_u64_if(o, "tail_timeout_ms", c->tail_timeout_ms, d->tail_timeout_ms);
  rc |= add_u64_if(o, "head_timeout_ms", c->head_timeout_ms, d->head_timeout_ms);
  rc |= add_u64_if(o, "commit_timeout_ms", c->commit_timeout_ms, d->commit_timeout_ms);
  rc |= add_u64_if(o, "token_budget_ms", c->token_budget_ms, d->token_budget_ms);
  rc |= add_u64_if(o, "breaker_failure_threshold", c->breaker_failure_threshold,
                   d->breaker_failure_threshold);
  rc |= add_u64_if(o, "breaker_open_ms", c->breaker_open_ms, d->breaker_open_ms);
  rc |= add_u64_if(o, "bootstrap_timeout_ms", c->bootstrap_timeout_ms, d->bootstrap_timeout_ms);
  rc |= add_u64_if(o, "waiting_timeout_ms", c->waiting_timeout_ms, d->waiting_timeout_ms);
  rc |= add_u64_if(o, "deadline_ms", c->deadline_ms, d->deadline_ms);
  rc |= add_u64_if(o, "grace_ms", c->grace_ms, d->grace_ms);
  rc |= add_u64_if(o, "alloc_fail_from_ms", c->alloc_fail_from_ms, d->alloc_fail_from_ms);
  rc |= add_u64_if(o, "alloc_fail_for_ms", c->alloc_fail_for_ms, d->alloc_fail_for_ms);
  rc |= add_u64_if(o, "alloc_fail_every", c->alloc_fail_every, d->alloc_fail_every);
  rc |= add_u64_if(o, "net_us", c->net_us, d->net_us);
  rc |= add_u64_if(o, "slo_ttft_ms", c->slo_ttft_ms, d->slo_ttft_ms);
  rc |= add_u64_if(o, "slo_e2e_ms", c->slo_e2e_ms, d->slo_e2e_ms);
  rc |= add_u64_if(o, "goodput_window_ms", c->goodput_window_ms, d->goodput_window_ms);
  rc |= add_u64_if(o, "breaker_half_open_probes", c->breaker_half_open_probes,
                   d->breaker_half_open_probes);
  if (c->decode_only_ok != d->decode_only_ok &&
      !cJSON_AddBoolToObject(o, "decode_only_ok", c->decode_only_ok != 0))
    rc |= PD_ERR_NOMEM;
  if (c->admission != d->admission && !cJSON_AddBoolToObject(o, "admission", c->admission != 0))
    rc |= PD_ERR_NOMEM;
  rc |= add_u64_if(o, "admit_queue", c->admit_queue, d->admit_queue);
  rc |= add_u64_if(o, "admit_queue_ms", c->admit_queue_ms, d->admit_queue_ms);
  rc |= add_frac_if(o, "goodput_floor", c->goodput_floor, d->goodput_floor);
  rc |= add_u64_if(o, "recover_within_ms", c->recover_within_ms, d->recover_within_ms);
  if (c->tie_seed != d->tie_seed) rc |= add_u64_exact(o, "tie_seed", c->tie_seed);
  if (c->socket_min_scale != d->socket_min_scale)
    rc |= add_num(o, "socket_min_scale", c->socket_min_scale);
  if (c->seed != d->seed) rc |= add_u64_exact(o, "seed", c->seed);
  if (c->seeded_bug != d->seeded_bug)
    rc |= add_str(o, "seeded_bug", pd_seeded_bug_name((pd_seeded_bug_t)c->seeded_bug));
  return rc;
}

static int workload_json(cJSON *root, const pd_scenario_workload_t *w,
                         const pd_scenario_workload_t *d) {
  cJSON *o = cJSON_AddObjectToObject(root, "workload");
  if (!o) return PD_ERR_NOMEM;
  int rc = add_u64_if(o, "requests", w->requests, d->requests);
  if (w->route != d->route) rc |= add_str(o, "route", pd_route_path(w->route));
  if (w->stream == 0.0 || w->stream == 1.0) {
    if (w->stream != d->stream && !cJSON_AddBoolToObject(o, "stream", w->stream == 1.0))
      rc |= PD_ERR_NOMEM;
  } else {
    rc |= add_num(o, "stream", w->stream);
  }
  if (w->logprob == 0.0 || w->logprob == 1.0) {
    if (w->logprob != d->logprob && !cJSON_AddBoolToObject(o, "logprob", w->logprob == 1.0))
      rc |= PD_ERR_NOMEM;
  } else {
    rc |= add_num(o, "logprob", w->logprob);
  }
  rc |= add_u64_if(o, "batch", w->batch, d->batch);
  rc |= add_u64_if(o, "tokens", w->tokens, d->tokens);
  rc |= add_u64_if(o, "interval_ms", w->interval_ms, d->interval_ms);
  if (w->poisson != d->poisson && !cJSON_AddBoolToObject(o, "poisson", w->poisson != 0.0))
    rc |= PD_ERR_NOMEM;
  rc |= add_u64_if(o, "disconnect_at_ms", w->disconnect_at_ms, d->disconnect_at_ms);
  rc |= add_frac_if(o, "disconnect_prob", w->disconnect_prob, d->disconnect_prob);
  rc |= add_u64_if(o, "client_blocked_at_ms", w->client_blocked_at_ms, d->client_blocked_at_ms);
  rc |= add_u64_if(o, "client_blocked_ms", w->client_blocked_ms, d->client_blocked_ms);
  rc |= add_frac_if(o, "fault_rate", w->fault_rate, d->fault_rate);
  rc |= add_frac_if(o, "critical_share", w->critical_share, d->critical_share);
  rc |= add_frac_if(o, "sheddable_share", w->sheddable_share, d->sheddable_share);
  rc |= add_u64_if(o, "prompt_tokens", w->prompt_tokens, d->prompt_tokens);
  rc |= add_u64_if(o, "prompt_tokens_max", w->prompt_tokens_max, d->prompt_tokens_max);
  cJSON *a = w->n_bursts ? cJSON_AddArrayToObject(o, "bursts") : NULL;
  rc |= w->n_bursts && !a ? PD_ERR_NOMEM : 0;
  for (uint32_t i = 0; a && i < w->n_bursts; i++) {
    cJSON *b = cJSON_CreateObject();
    rc |= b && cJSON_AddItemToArray(a, b) ? 0 : PD_ERR_NOMEM;
    if (b) rc |= add_num(b, "at_ms", (double)w->bursts[i].at_ms) |
                 add_num(b, "requests", w->bursts[i].requests);
  }
  rc |= add_u64_if(o, "users", w->users, d->users);
  rc |= add_u64_if(o, "think_ms", w->think_ms, d->think_ms);
  rc |= add_u64_if(o, "client_timeout_ms", w->client_timeout_ms, d->client_timeout_ms);
  rc |= add_u64_if(o, "client_retries", w->client_retries, d->client_retries);
  rc |= add_u64_if(o, "retry_backoff_ms", w->retry_backoff_ms, d->retry_backoff_ms);
  rc |= add_u64_if(o, "retry_backoff_max_ms", w->retry_backoff_max_ms, d->retry_backoff_max_ms);
  rc |= add_frac_if(o, "retry_jitter", w->retry_jitter, d->retry_jitter);
  if (w->routed_dp_rank1) rc |= add_num(o, "routed_dp_rank", (double)(w->routed_dp_rank1 - 1));
  cJSON *sa = w->n_steps ? cJSON_AddArrayToObject(o, "steps") : NULL;
  rc |= w->n_steps && !sa ? PD_ERR_NOMEM : 0;
  for (uint32_t i = 0; sa && i < w->n_steps; i++) {
    cJSON *b = cJSON_CreateObject();
    rc |= b && cJSON_AddItemToArray(sa, b) ? 0 : PD_ERR_NOMEM;
    if (b) rc |= add_num(b, "at_ms", (double)w->steps[i].at_ms) |
                 add_num(b, "factor", w->steps[i].factor);
    if (b && w->steps[i].ramp_ms) rc |= add_num(b, "ramp_ms", (double)w->steps[i].ramp_ms);
  }
  return rc;
}

static int expect_json(cJSON *root, const pd_scenario_t *s) {
  cJSON *o = cJSON_AddObjectToObject(root, "expect");
  int rc = o ? 0 : PD_ERR_NOMEM;
  for (int m = 0; m < PD_MODE_COUNT && rc == 0; m++) {
    const pd_scenario_expect_t *e = &s->expect[m];
    if (!e->is_set) continue;
    if (!e->violated_mask) {
      rc |= add_str(o, pd_mode_name((pd_mode_t)m), "pass");
      continue;
    }
    cJSON *a, *lim = NULL;
    if (e->limit_mask) { /* {"deployment_limit": [...], "why": "..."} */
      lim = cJSON_AddObjectToObject(o, pd_mode_name((pd_mode_t)m));
      a = lim ? cJSON_AddArrayToObject(lim, "deployment_limit") : NULL;
      rc |= lim && add_str(lim, "why", e->limit_why) == 0 ? 0 : PD_ERR_NOMEM;
    } else {
      a = cJSON_AddArrayToObject(o, pd_mode_name((pd_mode_t)m));
    }
    for (int i = 1; a && i <= PD_INVARIANT_COUNT; i++) {
      char id[8];
      snprintf(id, sizeof id, "I%d", i);
      if (e->violated_mask >> (i - 1) & 1u) rc |= cJSON_AddItemToArray(a, cJSON_CreateString(id))
                                                      ? 0 : PD_ERR_NOMEM;
    }
    rc |= a ? 0 : PD_ERR_NOMEM;
  }
  return rc;
}

static int build(const pd_scenario_t *s, const pd_scenario_t *d, cJSON *root) {
  int rc = add_str(root, "name", s->name);
  if (s->description[0]) rc |= add_str(root, "description", s->description);
  if (s->n_tags) {
    cJSON *a = cJSON_AddArrayToObject(root, "tags");
    for (uint32_t i = 0; a && i < s->n_tags; i++)
      rc |= cJSON_AddItemToArray(a, cJSON_CreateString(s->tags[i])) ? 0 : PD_ERR_NOMEM;
    rc |= a ? 0 : PD_ERR_NOMEM;
  }
  rc |= config_json(root, &s->config, &d->config);
  cJSON *ws = cJSON_AddArrayToObject(root, "workers");
  rc |= ws ? 0 : PD_ERR_NOMEM;
  for (uint32_t i = 0; ws && i < s->n_workers && rc == 0; i++) {
    cJSON *w = worker_json(&s->workers[i], &d->workers[0]);
    rc |= w && cJSON_AddItemToArray(ws, w) ? 0 : PD_ERR_NOMEM;
  }
  cJSON *tf = s->n_tfaults ? cJSON_AddArrayToObject(root, "faults") : NULL;
  rc |= s->n_tfaults && !tf ? PD_ERR_NOMEM : 0;
  for (uint32_t i = 0; tf && i < s->n_tfaults && rc == 0; i++) {
    cJSON *f = tfault_json(&s->tfaults[i]);
    rc |= f && cJSON_AddItemToArray(tf, f) ? 0 : PD_ERR_NOMEM;
  }
  rc |= workload_json(root, &s->workload, &d->workload);
  rc |= expect_json(root, s);
  cJSON *ux = NULL;
  for (int m = 0; m < PD_MODE_COUNT; m++)
    if (s->unexercised[m][0]) {
      if (!ux) ux = cJSON_AddObjectToObject(root, "unexercised");
      rc |= ux ? add_str(ux, pd_mode_name((pd_mode_t)m), s->unexercised[m]) : PD_ERR_NOMEM;
    }
  return rc ? PD_ERR_NOMEM : 0;
}

/* ---- printing: a value goes on one line when it fits, as in the hand-written files ---- */

typedef struct wr_buf {
  pd_buf_t b; /* a scenario file is kilobytes: the default limit is ample */
  int is_oom;
} wr_buf_t;

static void put(wr_buf_t *b, const char *s, size_t n) {
  if (!b->is_oom && pd_buf_append(NULL, &b->b, s, n)) b->is_oom = 1;
}

static void puts_(wr_buf_t *b, const char *s) { put(b, s, strlen(s)); }

/* Keys come from the loader's tables and mode names: plain ASCII, nothing to escape. */
static void put_key(wr_buf_t *b, const cJSON *it) {
  puts_(b, "\"");
  puts_(b, it->string);
  puts_(b, "\": ");
}

/* cJSON prints numbers with 15 digits when they read back within an epsilon, which loses the
 * last bits of some fractions and of integers above 10^15: whole numbers are printed as
 * integers, others with the fewest digits that read back to the very same double. */
static void put_number(wr_buf_t *b, double d) {
  char t[48];
  if (d >= 0 && d <= WR_SAFE_INT && (double)(uint64_t)d == d) {
    snprintf(t, sizeof t, "%llu", (unsigned long long)d);
  } else {
    for (int prec = 15; prec <= 17; prec++) {
      snprintf(t, sizeof t, "%.*g", prec, d);
      if (strtod(t, NULL) == d) break;
    }
  }
  puts_(b, t);
}

static void put_inline(wr_buf_t *b, const cJSON *v) {
  if (cJSON_IsNumber(v)) {
    put_number(b, v->valuedouble);
    return;
  }
  if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) {
    char *t = cJSON_PrintUnformatted(v); /* strings escaped, true/false */
    if (!t) b->is_oom = 1;
    else puts_(b, t);
    cJSON_free(t);
    return;
  }
  int is_obj = cJSON_IsObject(v);
  puts_(b, is_obj ? "{" : "[");
  for (const cJSON *it = v->child; it; it = it->next) {
    if (is_obj) put_key(b, it);
    put_inline(b, it);
    if (it->next) puts_(b, ", ");
  }
  puts_(b, is_obj ? "}" : "]");
}

static void put_indent(wr_buf_t *b, int depth) {
  for (int i = 0; i < depth; i++) puts_(b, WR_INDENT);
}

/* v at nesting depth, its first character at column col. */
static void put_value(wr_buf_t *b, const cJSON *v, int depth, size_t col) {
  wr_buf_t one = {{0}, 0};
  put_inline(&one, v);
  int is_container = cJSON_IsArray(v) || cJSON_IsObject(v);
  if (one.is_oom) b->is_oom = 1;
  if (!is_container || !v->child || (depth > 0 && col + one.b.len <= WR_LINE_BYTES)) {
    put(b, pd_buf_str(&one.b), one.b.len);
    pd_buf_free(NULL, &one.b);
    return;
  }
  pd_buf_free(NULL, &one.b);
  int is_obj = cJSON_IsObject(v);
  puts_(b, is_obj ? "{\n" : "[\n");
  for (const cJSON *it = v->child; it; it = it->next) {
    put_indent(b, depth + 1);
    size_t c = (size_t)(depth + 1) * (sizeof WR_INDENT - 1);
    if (is_obj) {
      put_key(b, it);
      c += strlen(it->string) + 4;
    }
    put_value(b, it, depth + 1, c);
    puts_(b, it->next ? ",\n" : "\n");
  }
  put_indent(b, depth);
  puts_(b, is_obj ? "}" : "]");
}

int pd_scenario_write_json(const pd_scenario_t *s, char **out, size_t *len) {
  if (!s || !out || !len || s->n_workers > PD_SCENARIO_MAX_WORKERS || s->n_tags > 8 ||
      s->n_tfaults > PD_SCENARIO_MAX_TRAFFIC_FAULTS ||
      s->workload.n_bursts > PD_SCENARIO_MAX_BURSTS || (unsigned)s->workload.route > PD_ROUTE_CHAT)
    return PD_ERR_INVAL;
  for (uint32_t i = 0; i < s->n_workers; i++)
    if (!worker_valid(&s->workers[i])) return PD_ERR_INVAL;
  for (uint32_t i = 0; i < s->n_tfaults; i++)
    if ((unsigned)s->tfaults[i].f.kind >= PD_FAULT_KIND_COUNT || (unsigned)s->tfaults[i].role > 1)
      return PD_ERR_INVAL;
  pd_scenario_t *d = malloc(sizeof *d);
  cJSON *root = cJSON_CreateObject();
  int rc = d && root ? 0 : PD_ERR_NOMEM;
  if (rc == 0) {
    pd_scenario_defaults(d);
    rc = build(s, d, root);
  }
  wr_buf_t b = {{0}, 0};
  if (rc == 0) {
    put_value(&b, root, 0, 0);
    puts_(&b, "\n");
    rc = b.is_oom ? PD_ERR_NOMEM : 0;
  }
  *out = rc == 0 ? (char *)b.b.p : NULL; /* libc memory: the caller frees it */
  *len = rc == 0 ? b.b.len : 0;
  if (rc) pd_buf_free(NULL, &b.b);
  cJSON_Delete(root);
  free(d);
  return rc;
}

int pd_scenario_save(const pd_scenario_t *s, const char *path, char *err, size_t errlen) {
  char *txt = NULL;
  size_t len = 0;
  if (err && errlen) err[0] = '\0';
  int rc = path ? pd_scenario_write_json(s, &txt, &len) : PD_ERR_INVAL;
  if (rc) {
    if (err && errlen) snprintf(err, errlen, "%s: %s", path ? path : "(null)", pd_strerror(rc));
    return rc;
  }
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(txt, 1, len, f) == len;
  int saved_errno = errno;
  if (f && fclose(f) != 0) ok = 0;
  if (!ok && err && errlen)
    snprintf(err, errlen, "%s: cannot write: %s", path, strerror(saved_errno ? saved_errno : EIO));
  free(txt);
  return ok ? 0 : PD_ERR_IO;
}
