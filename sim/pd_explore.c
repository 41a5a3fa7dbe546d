/* pd_explore: world generation from a seed, runs, and turning a shrunk case into a scenario
 * file. Generation is swarm testing: each seed first draws which fault kinds exist in its
 * world at all and how faulty its workers are, then draws every worker, fault and workload
 * knob, so runs range from clean to saturated with one or two kinds of trouble. */
#include "pd_explore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_prng.h"
#include "pd_scenario_write.h"

#define EXP_GEN_LABEL 0x6578706c6f7265ull /* "explore": the generator's PRNG stream */
#define EXP_BUDGET_LABEL 0x627564676574ull /* "budget": the R-PROGRESS knobs' stream */
#define EXP_LOAD_LABEL 0x6c6f6164ull /* "load": load shapes, clients, capacity (issue 25) */
#define EXP_NET_LABEL 0x6e6574ull     /* "net": network faults on the gateway's paths */
#define EXP_PRIO_LABEL 0x7072696full  /* "prio": priority classes and a short admission queue */
#define EXP_VLLM_LABEL 0x766c6c6dull  /* "vllm": a source-first world's own knobs */
#define EXP_DEADLINE_MS 120000u   /* the I1 bound of every generated world */
#define EXP_TOTAL_MIN_MS 20000u   /* reference total timeout: 20..60 s, below the deadline */
#define EXP_TOTAL_MAX_MS 60000u
#define EXP_MAX_TOKENS 32u
#define EXP_MAX_LAG_MS 400u       /* below the reference's 500 ms prefill tail (spec R-TAIL) */
#define EXP_MAX_DRIP_MS 3000u
#define EXP_MAX_ATTEMPTS 5u
#define EXP_BIT(i) (1u << ((i) - 1))

static uint64_t range(pd_prng_t *r, uint64_t lo, uint64_t hi) {
  return lo + pd_prng_below(r, hi - lo + 1);
}

static int chance(pd_prng_t *r, double p) { return pd_prng_unit(r) < p; }

/* A fraction that is often exactly 0 or 1 (the flag form) and otherwise uniform. */
static double flag_or_frac(pd_prng_t *r, double p0, double p1) {
  double u = pd_prng_unit(r);
  if (u < p0) return 0.0;
  if (u < p0 + p1) return 1.0;
  return pd_prng_unit(r);
}

/* Kinds that do something on a role (the model ignores the others there). */
static int kind_fits(pd_fault_kind_t k, pd_role_t role) {
  switch (k) {
  case PD_FAULT_BOOTSTRAP_NEVER_SERVED:
  case PD_FAULT_ERROR_AFTER_KV:
  case PD_FAULT_PREFILL_LAG: return role == PD_ROLE_PREFILL;
  case PD_FAULT_SLOW_DRIP:
  case PD_FAULT_NEVER_CONNECT: return role == PD_ROLE_DECODE;
  default: return 1;
  }
}

/* Which requests a fault strikes: in half the cases every request, else nth [n, n+0..3];
 * in 40 % with probability 0.1-0.9, else 1. */
static void gen_scope(pd_prng_t *r, pd_fault_t *f, uint32_t requests) {
  if (chance(r, 0.5)) { /* otherwise every request */
    f->nth_from = (uint32_t)range(r, 1, requests);
    f->nth_to = f->nth_from + (uint32_t)range(r, 0, 3);
  }
  if (chance(r, 0.4)) f->prob = 0.1 + 0.8 * pd_prng_unit(r);
}

static void gen_fault(pd_prng_t *r, pd_fault_t *f, pd_fault_kind_t kind, uint32_t requests,
                      uint32_t tokens) {
  static const int statuses[] = {400, 404, 408, 429, 500, 502, 503, 504};
  memset(f, 0, sizeof *f);
  f->kind = kind;
  f->prob = 1.0;
  if (kind == PD_FAULT_STATUS)
    f->status = statuses[pd_prng_below(r, sizeof statuses / sizeof statuses[0])];
  if (kind == PD_FAULT_HANG_MID_STREAM || kind == PD_FAULT_RESET_MID_STREAM ||
      kind == PD_FAULT_SSE_ERROR || kind == PD_FAULT_TRUNCATE || kind == PD_FAULT_BODY_ERROR)
    f->after_tokens = (uint32_t)range(r, 0, tokens);
  if (kind == PD_FAULT_SLOW_DRIP) f->ms = range(r, 10, EXP_MAX_DRIP_MS);
  if (kind == PD_FAULT_PREFILL_LAG || kind == PD_FAULT_ERROR_AFTER_KV)
    f->ms = range(r, 0, EXP_MAX_LAG_MS);
  gen_scope(r, f, requests);
}

static void gen_worker(pd_prng_t *r, pd_scenario_worker_t *w, pd_role_t role, uint32_t idx,
                       uint32_t kinds, double p_faulty, const pd_scenario_workload_t *wl) {
  char name[16];
  snprintf(name, sizeof name, "%c%u", role == PD_ROLE_PREFILL ? 'p' : 'd', (unsigned)idx);
  pd_scenario_worker_defaults(w, name, role); /* the loader's defaults: files omit them */
  /* the other role's timings keep the loader's defaults, so files do not mention them */
  w->forward_ms = role == PD_ROLE_PREFILL ? range(r, 1, 200) : 20;
  w->kv_ms = role == PD_ROLE_PREFILL ? range(r, 0, 50) : 5;
  w->first_token_ms = role == PD_ROLE_DECODE ? range(r, 1, 100) : 10;
  w->token_ms = role == PD_ROLE_DECODE ? range(r, 1, 30) : 5;
  uint64_t u = pd_prng_below(r, 10);
  if (role == PD_ROLE_DECODE)
    w->chunking = u < 6 ? PD_CHUNK_EVENT : u < 8 ? PD_CHUNK_SPLIT : PD_CHUNK_COALESCE;
  if (chance(r, 0.08)) { /* occasional crash, within or just after the arrivals */
    uint64_t span = (uint64_t)wl->requests * wl->interval_ms;
    w->crash_at_ms = range(r, 1, span + 500);
    if (chance(r, 0.6)) w->restart_at_ms = w->crash_at_ms + range(r, 1, 3000);
  }
  pd_fault_kind_t fits[PD_FAULT_KIND_COUNT];
  uint32_t n_fits = 0;
  for (int k = 0; k < PD_FAULT_WORKER_KIND_COUNT; k++)
    if ((kinds >> k & 1u) && kind_fits((pd_fault_kind_t)k, role)) fits[n_fits++] = (pd_fault_kind_t)k;
  if (!n_fits || !chance(r, p_faulty)) return;
  w->n_faults = (uint32_t)range(r, 1, PD_EXPLORE_MAX_WORKER_FAULTS);
  for (uint32_t i = 0; i < w->n_faults; i++)
    gen_fault(r, &w->faults[i], fits[pd_prng_below(r, n_fits)], wl->requests, wl->tokens);
}

static void gen_workload(pd_prng_t *r, pd_scenario_workload_t *wl) {
  static const pd_route_t routes[] = {PD_ROUTE_GENERATE, PD_ROUTE_GENERATE, PD_ROUTE_GENERATE,
                                      PD_ROUTE_COMPLETIONS, PD_ROUTE_CHAT};
  wl->requests = (uint32_t)range(r, 1, PD_EXPLORE_MAX_REQUESTS);
  wl->route = routes[pd_prng_below(r, sizeof routes / sizeof routes[0])];
  wl->stream = flag_or_frac(r, 0.2, 0.4);
  wl->logprob = flag_or_frac(r, 0.5, 0.2);
  wl->batch = chance(r, 0.15) ? (uint32_t)range(r, 2, 4) : 0;
  wl->tokens = (uint32_t)range(r, 1, EXP_MAX_TOKENS);
  wl->interval_ms = chance(r, 0.3) ? 0 : range(r, 1, 100);
  wl->poisson = wl->interval_ms && chance(r, 0.5) ? 1.0 : 0.0;
  if (chance(r, 0.2)) {
    wl->disconnect_at_ms = range(r, 1, 500);
    wl->disconnect_prob = chance(r, 0.5) ? 1.0 : pd_prng_unit(r);
  }
  if (chance(r, 0.15)) wl->fault_rate = 0.01 + 0.29 * pd_prng_unit(r);
}

static void gen_config(pd_prng_t *r, pd_scenario_config_t *c, uint64_t seed) {
  static const char *const policies[] = {"random", "round_robin", "power_of_two"};
  snprintf(c->prefill_policy, sizeof c->prefill_policy, "%s", policies[pd_prng_below(r, 3)]);
  snprintf(c->decode_policy, sizeof c->decode_policy, "%s", policies[pd_prng_below(r, 3)]);
  c->max_attempts = (uint32_t)range(r, 1, EXP_MAX_ATTEMPTS);
  c->deadline_ms = EXP_DEADLINE_MS;
  c->total_timeout_ms = range(r, EXP_TOTAL_MIN_MS, EXP_TOTAL_MAX_MS);
  if (chance(r, 0.3)) c->first_token_timeout_ms = range(r, 2000, 30000);
  if (chance(r, 0.3)) c->idle_timeout_ms = range(r, 2000, 30000);
  if (chance(r, 0.3)) c->breaker_failure_threshold = (uint32_t)range(r, 1, 10);
  if (chance(r, 0.3)) c->breaker_open_ms = range(r, 100, 30000);
  /* SGLang's timeouts: short ones make stalls end (and show) within the run */
  c->bootstrap_timeout_ms = chance(r, 0.5) ? range(r, 2000, 10000) : range(r, 10000, 300000);
  c->waiting_timeout_ms = chance(r, 0.5) ? range(r, 2000, 10000) : range(r, 10000, 300000);
  if (chance(r, 0.3)) c->net_us = range(r, 10, 2000);
  c->seed = seed;
}

/* R-PROGRESS: the commit budget below the total, a tight or loose per-token allowance. Drawn
 * from a stream of their own, so every seed keeps the world it generated before they came. */
static void gen_budgets(pd_prng_t *r, pd_scenario_config_t *c) {
  if (chance(r, 0.3)) c->commit_timeout_ms = range(r, 2000, c->total_timeout_ms);
  if (chance(r, 0.3)) c->token_budget_ms = range(r, 1, 200);
}

/* Load (docs/explore.md "Load shapes"): a closed loop of users instead of open arrivals, a
 * spike or a ramp in the load and back, clients that time out and retry with backoff and
 * jitter, decodes with a running limit so that the load can exceed them, and the gateway's
 * admission queue deadline. Drawn from a stream of their own, after the world is made, so
 * every other draw of a seed is what it was before they came. */
static void gen_load(pd_prng_t *r, pd_scenario_t *s) {
  pd_scenario_workload_t *wl = &s->workload;
  uint64_t span = (uint64_t)wl->requests * (wl->interval_ms ? wl->interval_ms : 10);
  if (chance(r, 0.15)) { /* closed loop: the requests are the users' jobs, sent when the */
    wl->users = (uint32_t)range(r, 1, 8); /* last one ends: no arrival spacing (the loader) */
    wl->think_ms = chance(r, 0.5) ? 0 : range(r, 1, 200);
    wl->interval_ms = 0;
    wl->poisson = 0.0;
  }
  if (chance(r, 0.2)) { /* a spike of k x for a while, or a ramp up, then back to 1 */
    uint64_t at = range(r, 0, span / 2 + 1), len = range(r, 10, span + 100);
    wl->n_steps = 2;
    wl->steps[0] = (pd_scenario_step_t){at, 2.0 + 3.0 * pd_prng_unit(r),
                                        chance(r, 0.5) ? 0 : range(r, 1, len)};
    wl->steps[1] = (pd_scenario_step_t){at + len, 1.0, 0};
  }
  if (chance(r, 0.2)) { /* clients that give up and come back */
    wl->client_timeout_ms = range(r, 500, 20000);
    wl->client_retries = (uint32_t)range(r, 0, 3);
    wl->retry_backoff_ms = range(r, 10, 1000);
    wl->retry_backoff_max_ms = wl->retry_backoff_ms * range(r, 1, 8);
    wl->retry_jitter = chance(r, 0.5) ? 0.0 : pd_prng_unit(r);
  }
  if (chance(r, 0.25)) /* capacity the load can exceed */
    for (uint32_t i = 0; i < s->n_workers; i++)
      if (s->workers[i].role == PD_ROLE_DECODE) s->workers[i].max_running = (uint32_t)range(r, 1, 8);
  if (chance(r, 0.2)) s->config.admit_queue_ms = range(r, 100, 5000);
}

/* Network faults (NET_RESET, RESPONSE_LOST): the path between the gateway and a worker is cut
 * while the worker runs on. In 20 % of worlds, one or two workers get one, after any faults
 * they already have: the cut `ms` 0-2000 after the request reached the worker, or for a
 * decode in half the cases before event 1..tokens; on every request, or on nth [n, n+0..3];
 * 40 % with prob 0.1-0.9. Drawn from a stream of its own, after the world is made. */
static void gen_net(pd_prng_t *r, pd_scenario_t *s) {
  if (!chance(r, 0.2)) return;
  uint32_t n = (uint32_t)range(r, 1, 2);
  for (uint32_t k = 0; k < n; k++) {
    pd_scenario_worker_t *w = &s->workers[pd_prng_below(r, s->n_workers)];
    if (w->n_faults >= PD_SCENARIO_MAX_FAULTS) continue;
    pd_fault_t *f = &w->faults[w->n_faults++];
    memset(f, 0, sizeof *f);
    f->kind = chance(r, 0.5) ? PD_FAULT_NET_RESET : PD_FAULT_RESPONSE_LOST;
    f->prob = 1.0;
    f->ms = range(r, 0, 2000);
    if (w->role == PD_ROLE_DECODE && s->workload.tokens && chance(r, 0.5))
      f->after_tokens = (uint32_t)range(r, 1, s->workload.tokens);
    gen_scope(r, f, s->workload.requests);
  }
}

/* R-ADMIT-PRIO: in 25 % of worlds a share of critical and of sheddable requests, and in half
 * of those an admission queue of 1-8, so that it fills (sheds, evictions of a lower class).
 * The reference's admission alone reads them. A stream of its own, drawn last. */
static void gen_prio(pd_prng_t *r, pd_scenario_t *s) {
  if (!chance(r, 0.25)) return;
  s->workload.critical_share = pd_prng_unit(r) * 0.5;
  s->workload.sheddable_share = pd_prng_unit(r) * (1.0 - s->workload.critical_share);
  if (chance(r, 0.5)) s->config.admit_queue = (uint32_t)range(r, 1, 8);
}

/* A fault a vLLM world does not draw: one that needs SGLang's bootstrap server, or one whose
 * outcome is a declared deployment limit of vLLM's protocol, which every gateway violates
 * alike: a prefill answer that never arrives whole (truncate, body_error: its pinned KV waits
 * for prefill's own timer, sf-prefill-truncated-answer), a network cut (a vLLM worker has no
 * /abort_request, so a request whose path is cut runs on with its slot and KV whatever the
 * gateway does). It becomes a 503 of the same draw. */
static int vllm_limit(pd_role_t role, pd_fault_kind_t k) {
  if (pd_fault_is_net((int)k)) return 1;
  return role == PD_ROLE_PREFILL && (k == PD_FAULT_BOOTSTRAP_NEVER_SERVED ||
                                     k == PD_FAULT_TRUNCATE || k == PD_FAULT_BODY_ERROR);
}

/* A vLLM (source-first) world: the SGLang world's draws, adapted, then vLLM's own knobs from
 * a stream of their own. Every worker speaks vLLM's protocol; the routes are OpenAI's (the
 * source-first proxies serve those; /generate becomes /v1/completions or, in a third of the
 * worlds, /v1/chat/completions), no batch; a fault vllm_limit names becomes a 503. Then: the
 * pinned KV's expiry a lease in 30 % of worlds (every worker, so decodes heartbeat), else the
 * fixed timeout, drawn 1-60 s in half of those (else vLLM's 480 s); each prefill answers null
 * parameters in 5 % (invalid ones are a declared deployment limit, sf-prefill-params-invalid:
 * not drawn) and ignores aborts after its commit in 10 %. */
static void gen_vllm(pd_prng_t *r, pd_scenario_t *s) {
  pd_scenario_workload_t *wl = &s->workload;
  int to_chat = chance(r, 1.0 / 3.0);
  if (wl->route == PD_ROUTE_GENERATE) wl->route = to_chat ? PD_ROUTE_CHAT : PD_ROUTE_COMPLETIONS;
  wl->batch = 0;
  int lease = chance(r, 0.3);
  uint64_t abort_ms = !lease && chance(r, 0.5) ? range(r, 1000, 60000) : 0;
  for (uint32_t i = 0; i < s->n_workers; i++) {
    pd_scenario_worker_t *w = &s->workers[i];
    w->protocol = PD_PROTOCOL_VLLM;
    if (lease) w->kv_expiry = PD_KV_EXPIRY_LEASE;
    if (abort_ms) w->kv_abort_timeout_ms = abort_ms;
    for (uint32_t k = 0; k < w->n_faults; k++)
      if (vllm_limit(w->role, w->faults[k].kind)) {
        w->faults[k].kind = PD_FAULT_STATUS;
        w->faults[k].status = 503;
        w->faults[k].after_tokens = 0;
        w->faults[k].ms = 0;
      }
    if (w->role != PD_ROLE_PREFILL) continue;
    if (chance(r, 0.05)) w->kv_params = PD_KV_PARAMS_NULL;
    if (chance(r, 0.1)) w->abort_after_commit_ignored = 1.0;
  }
}

void pd_explore_generate(pd_scenario_t *s, uint64_t seed) {
  pd_explore_generate_for(s, seed, PD_PROTOCOL_SGLANG);
}

void pd_explore_generate_for(pd_scenario_t *s, uint64_t seed, pd_protocol_t protocol) {
  pd_prng_t root, r;
  pd_prng_init(&root, seed);
  pd_prng_fork(&root, EXP_GEN_LABEL, &r);
  pd_scenario_defaults(s);
  snprintf(s->name, sizeof s->name, "explore-seed%llu", (unsigned long long)seed);
  snprintf(s->path, sizeof s->path, "(explore seed %llu)", (unsigned long long)seed);
  /* unused slots stay zero (as the loader's): pd_scenario_defaults zeroed the scenario and
   * filled the first two only, so only they are cleared (not the whole array: 1.4 % of a seed) */
  memset(s->workers, 0, 2 * sizeof s->workers[0]);
  /* swarm: this world's fault kinds, and the share of workers that get a fault script */
  uint32_t kinds = 0;
  for (int k = 0; k < PD_FAULT_WORKER_KIND_COUNT; k++) /* not yet the network kinds */
    if (chance(&r, 0.5)) kinds |= 1u << k;
  double p_faulty = pd_prng_unit(&r);
  gen_workload(&r, &s->workload);
  gen_config(&r, &s->config, seed);
  pd_prng_t rb;
  pd_prng_fork(&root, EXP_BUDGET_LABEL, &rb);
  gen_budgets(&rb, &s->config);
  uint32_t n_p = (uint32_t)range(&r, 1, PD_EXPLORE_MAX_ROLE_WORKERS);
  uint32_t n_d = (uint32_t)range(&r, 1, PD_EXPLORE_MAX_ROLE_WORKERS);
  s->n_workers = n_p + n_d;
  for (uint32_t i = 0; i < s->n_workers; i++) {
    int is_p = i < n_p;
    gen_worker(&r, &s->workers[i], is_p ? PD_ROLE_PREFILL : PD_ROLE_DECODE, is_p ? i : i - n_p,
               kinds, p_faulty, &s->workload);
  }
  pd_prng_t rl;
  pd_prng_fork(&root, EXP_LOAD_LABEL, &rl);
  gen_load(&rl, s);
  pd_prng_t rn, rp;
  pd_prng_fork(&root, EXP_NET_LABEL, &rn);
  gen_net(&rn, s);
  pd_prng_fork(&root, EXP_PRIO_LABEL, &rp);
  gen_prio(&rp, s);
  if (protocol != PD_PROTOCOL_VLLM) return;
  pd_prng_t rv;
  pd_prng_fork(&root, EXP_VLLM_LABEL, &rv);
  gen_vllm(&rv, s);
}

/* pd_explore_run, adding the first run's cost to mx (NULL: none). */
static int run_mx(const pd_scenario_t *s, pd_mode_t mode, int twice, uint32_t *mask,
                  pd_world_stats_t *st, pd_metrics_t *mx) {
  pd_world_stats_t local, st2;
  uint32_t m2 = 0;
  uint64_t h1 = 0, h2 = 0;
  pd_world_stats_t *sp = st ? st : &local;
  pd_world_opts_t o = {NULL, NULL, NULL, 0, 0, mx};
  int rc = pd_world_run_opts(s, mode, s->config.seed, &o, sp, mask, twice ? &h1 : NULL);
  if (rc == 0 && twice) {
    rc = pd_world_run(s, mode, s->config.seed, NULL, &st2, &m2, &h2);
    if (rc == 0 && (h1 != h2 || m2 != *mask)) *mask |= EXP_BIT(PD_INVARIANT_DETERMINISM);
  }
  return rc;
}

int pd_explore_run(const pd_scenario_t *s, pd_mode_t mode, int twice, uint32_t *mask,
                   pd_world_stats_t *st) {
  return run_mx(s, mode, twice, mask, st, NULL);
}

static uint32_t count_faults(const pd_scenario_t *s) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->n_workers; i++) n += s->workers[i].n_faults;
  return n;
}

static void mask_str(uint32_t m, char *buf, size_t cap) {
  size_t off = 0;
  buf[0] = '\0';
  for (int i = 1; i <= PD_INVARIANT_COUNT && off + 5 < cap; i++)
    if (m & EXP_BIT(i)) off += (size_t)snprintf(buf + off, cap - off, "%sI%d", off ? "," : "", i);
  if (!m) snprintf(buf, cap, "pass");
}

static void label(pd_scenario_t *s, pd_mode_t mode, const pd_explore_result_t *r) {
  char found[64];
  mask_str(r->found_mask, found, sizeof found);
  snprintf(s->name, sizeof s->name, "explore-%s-I%d-seed%llu", pd_mode_name(mode), r->inv,
           (unsigned long long)r->seed);
  snprintf(s->description, sizeof s->description,
           "Found by `pdref sim explore --mode %s` at seed %llu: the generated world (%u "
           "requests, %u workers, %u faults) violated %s; shrunk in %u runs to %u requests, %u "
           "workers and %u faults that still violate I%d (%s). First violation of this case: %s",
           pd_mode_name(mode), (unsigned long long)r->seed, r->requests_before,
           r->workers_before, r->faults_before, found, r->shrink_runs, r->requests_after,
           r->workers_after, r->faults_after, r->inv, pd_invariant_name(r->inv), r->reason);
  s->n_tags = 0;
  memset(s->tags, 0, sizeof s->tags);
  snprintf(s->tags[s->n_tags++], sizeof s->tags[0], "explore");
  snprintf(s->tags[s->n_tags++], sizeof s->tags[0], "%s", pd_mode_name(mode));
  snprintf(s->tags[s->n_tags++], sizeof s->tags[0], "I%d", r->inv);
}

int pd_explore_finish(pd_scenario_t *s, pd_mode_t mode, pd_explore_result_t *r) {
  r->requests_after = s->workload.requests;
  r->workers_after = s->n_workers;
  r->faults_after = count_faults(s);
  memset(s->expect, 0, sizeof s->expect);
  memset(s->unexercised, 0, sizeof s->unexercised);
  char *txt = NULL, err[256];
  size_t len = 0;
  pd_scenario_t *p = malloc(sizeof *p);
  int rc = p ? pd_scenario_write_json(s, &txt, &len) : PD_ERR_NOMEM;
  if (rc == 0 && pd_scenario_parse(p, s->path, txt, len, err, sizeof err) != 0) rc = PD_ERR_FATAL;
  for (int m = 0; m < PD_MODE_COUNT && rc == 0; m++) { /* judge the file as it will be read */
    if (!pd_mode_speaks((pd_mode_t)m, pd_scenario_protocol(s))) continue; /* its workers' */
    pd_world_stats_t st;
    uint32_t mask = 0;
    rc = pd_explore_run(p, (pd_mode_t)m, 1, &mask, &st);
    s->expect[m].is_set = 1;
    s->expect[m].violated_mask = mask;
    /* a mode whose requests never reach a scripted fault (mini_lb's random pick, no retry)
       would read "not exercised": the case says so, so its row is judged as written */
    if (st.faults_exercised < st.faults_total || (!st.requests_served && st.requests_done))
      snprintf(s->unexercised[m], sizeof s->unexercised[m],
               "as explore found it: in this mode %u of the %u fault entries fired and %llu of "
               "%llu requests reached a worker",
               st.faults_exercised, st.faults_total, (unsigned long long)st.requests_served,
               (unsigned long long)st.requests_done);
    if (m == (int)mode) {
      r->shrunk_mask = mask;
      snprintf(r->reason, sizeof r->reason, "%s", st.first_reason);
    }
  }
  if (rc == 0) label(s, mode, r); /* name, description and tags do not change a run */
  free(txt);
  free(p);
  return rc;
}

uint64_t pd_explore_tie_seed(uint64_t seed, uint32_t i) {
  if (i == 0) return 0;
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + i;
  x ^= x >> 31;
  x *= 0xd6e8feb86659fd93ULL;
  x ^= x >> 32;
  return (x & ((1ull << 53) - 1)) | 1u; /* exact as a JSON number, never 0 */
}

int pd_explore_seed(pd_scenario_t *s, uint64_t seed, pd_mode_t mode, uint32_t skip_mask,
                    int check_determinism, uint32_t n_ties, pd_explore_result_t *r) {
  return pd_explore_seed_mx(s, seed, mode, pd_mode_protocol(mode), skip_mask, check_determinism,
                            n_ties, r, NULL);
}

int pd_explore_seed_mx(pd_scenario_t *s, uint64_t seed, pd_mode_t mode, pd_protocol_t protocol,
                       uint32_t skip_mask, int check_determinism, uint32_t n_ties,
                       pd_explore_result_t *r, pd_metrics_t *mx) {
  pd_world_stats_t st;
  memset(r, 0, sizeof *r);
  r->seed = seed;
  pd_explore_generate_for(s, seed, protocol);
  int rc = 0;
  for (uint32_t t = 0; rc == 0 && !r->found_mask && t < (n_ties ? n_ties : 1); t++) {
    s->config.tie_seed = pd_explore_tie_seed(seed, t); /* the same world, another order */
    rc = run_mx(s, mode, check_determinism, &r->found_mask, &st, t == 0 ? mx : NULL);
  }
  r->tie_seed = s->config.tie_seed;
  if (rc || !r->found_mask) return rc;
  snprintf(r->found_reason, sizeof r->found_reason, "%s", st.first_reason);
  r->requests_before = s->workload.requests;
  r->workers_before = s->n_workers;
  r->faults_before = count_faults(s);
  uint32_t todo = r->found_mask & ~skip_mask;
  if (!todo) return 0;
  /* the invariant of the first violation (what a replay prints first), else the lowest */
  int inv = pd_explore_reason_inv(st.first_reason);
  if (inv < 1 || !(todo & EXP_BIT(inv)))
    for (inv = 1; inv < PD_INVARIANT_COUNT && !(todo & EXP_BIT(inv));) inv++;
  if (inv == PD_INVARIANT_DETERMINISM) { /* not shrinkable by single runs: keep the world whole */
    r->inv = inv;
    return pd_explore_finish(s, mode, r);
  }
  rc = pd_explore_shrink(s, mode, inv, PD_EXPLORE_SHRINK_MAX_RUNS, &r->shrink_runs);
  r->inv = inv;
  return rc ? rc : pd_explore_finish(s, mode, r);
}

int pd_explore_reason_inv(const char *reason) {
  if (!reason || reason[0] != 'I' || reason[1] < '1' || reason[1] > '9') return 0;
  int n = reason[1] - '0';
  if (reason[2] >= '0' && reason[2] <= '9') n = n * 10 + (reason[2] - '0');
  const char *end = reason + 2 + (n >= 10);
  return (*end == ' ' || *end == '\0') && n <= PD_INVARIANT_COUNT ? n : 0;
}

int pd_explore_file_name(pd_mode_t mode, int inv, uint64_t seed, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s-I%d-seed%llu.json", pd_mode_name(mode), inv,
                   (unsigned long long)seed);
  return n > 0 && (size_t)n < cap ? 0 : PD_ERR_LIMIT;
}
