/* pd_scenario_more: the loader's entry points (parse, load) and the scenario-level parts — the top-level "faults" that
 * follow the traffic (pd_traffic_fault_t), the workload's "bursts", the checks that need the whole
 * file (a fault's request index against workload.requests, bursts against the arrival
 * keys), and the arrival schedule shared by the simulator and the socket runner. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_scenario.h"
#include "pd_scenario_int.h"

#define MS_NS 1000000ull

/* ---- top-level "faults" ---- */

static int set_bool(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  char got[64];
  if (!cJSON_IsBool(v))
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected a boolean, got %s", GOT(v));
  *(int *)((char *)obj + k->off) = cJSON_IsTrue(v);
  return 0;
}

_Static_assert(offsetof(pd_traffic_fault_t, f) == 0, "a traffic fault starts with its pd_fault_t");

static const scenario_key_t tfault_keys[] = {
    {"kind", pd_scenario_set_enum, offsetof(pd_fault_t, kind), 0, PD_FAULT_KIND_COUNT, 1,
     pd_scenario_fault_names, "fault kind"},
    {"status", pd_scenario_set_u32, offsetof(pd_fault_t, status), 400, 599, 0, NULL, NULL},
    {"after_tokens", pd_scenario_set_u32, offsetof(pd_fault_t, after_tokens), 0, UINT32_MAX, 0,
     NULL, NULL},
    {"ms", pd_scenario_set_u64, offsetof(pd_fault_t, ms), 0, PD_SCENARIO_MAX_MS, 0, NULL, NULL},
    {"role", pd_scenario_set_enum, offsetof(pd_traffic_fault_t, role), 0, 2, 1,
     pd_scenario_role_names, "role"},
    {"request", pd_scenario_set_u32, offsetof(pd_traffic_fault_t, request), 0,
     PD_SCENARIO_MAX_REQUESTS - 1, 0, NULL, NULL},
    {"leg", pd_scenario_set_nth, 0, 1, UINT32_MAX, 0, NULL, NULL},
    {"sticky", set_bool, offsetof(pd_traffic_fault_t, is_sticky), 0, 0, 0, NULL, NULL},
};

static int tfault_elem(scenario_ctx_t *c, const cJSON *it, void *obj, uint32_t i) {
  pd_scenario_t *s = obj;
  pd_traffic_fault_t *t = &s->tfaults[i];
  memset(t, 0, sizeof *t);
  t->f.prob = 1.0;
  t->f.nth_from = t->f.nth_to = 1; /* the first leg */
  t->request = PD_TRAFFIC_FAULT_ANY;
  int rc = pd_scenario_walk(c, it, tfault_keys, sizeof tfault_keys / sizeof tfault_keys[0], t);
  if (rc == 0 && t->f.kind == PD_FAULT_STATUS && t->f.status == 0)
    rc = pd_scenario_fail(c, PD_ERR_FIELD, "kind \"status\" needs \"status\" in 400..599");
  s->n_tfaults = rc == 0 ? i + 1 : s->n_tfaults;
  return rc;
}

int pd_scenario_set_traffic_faults(scenario_ctx_t *c, const cJSON *v, void *obj,
                                   const scenario_key_t *k) {
  (void)k;
  ((pd_scenario_t *)obj)->n_tfaults = 0;
  return pd_scenario_each(c, v, PD_SCENARIO_MAX_TRAFFIC_FAULTS,
                          "faults (PD_SCENARIO_MAX_TRAFFIC_FAULTS)", tfault_elem, obj);
}

/* ---- workload "bursts" ---- */

static const scenario_key_t burst_keys[] = {
    {"at_ms", pd_scenario_set_u64, offsetof(pd_scenario_burst_t, at_ms), 0, PD_SCENARIO_MAX_MS, 1,
     NULL, NULL},
    {"requests", pd_scenario_set_u32, offsetof(pd_scenario_burst_t, requests), 1,
     PD_SCENARIO_MAX_REQUESTS, 1, NULL, NULL},
};

static int burst_elem(scenario_ctx_t *c, const cJSON *it, void *obj, uint32_t i) {
  pd_scenario_workload_t *w = obj;
  pd_scenario_burst_t *b = &w->bursts[i];
  memset(b, 0, sizeof *b);
  int rc = pd_scenario_walk(c, it, burst_keys, sizeof burst_keys / sizeof burst_keys[0], b);
  if (rc == 0 && i > 0 && b->at_ms <= w->bursts[i - 1].at_ms) {
    size_t old = pd_scenario_json_path_key(c, "at_ms");
    rc = pd_scenario_fail(c, PD_ERR_FIELD,
                          "must be greater than the previous burst's at_ms (%llu), "
                          "got %llu",
                          (unsigned long long)w->bursts[i - 1].at_ms, (unsigned long long)b->at_ms);
    pd_scenario_json_path_pop(c, old);
  }
  w->n_bursts = rc == 0 ? i + 1 : w->n_bursts;
  return rc;
}

int pd_scenario_set_bursts(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  (void)k;
  ((pd_scenario_workload_t *)obj)->n_bursts = 0;
  int rc = pd_scenario_each(c, v, PD_SCENARIO_MAX_BURSTS, "bursts (PD_SCENARIO_MAX_BURSTS)",
                            burst_elem, obj);
  if (rc == 0 && ((pd_scenario_workload_t *)obj)->n_bursts == 0)
    rc = pd_scenario_fail(c, PD_ERR_FIELD,
                          "expected at least one burst (leave the key out instead)");
  return rc;
}

/* ---- workload "steps" ---- */

static int set_factor(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  char got[64];
  double *d = (double *)((char *)obj + k->off);
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= PD_SCENARIO_MIN_FACTOR) ||
      !(v->valuedouble <= PD_SCENARIO_MAX_FACTOR))
    return pd_scenario_fail(c, PD_ERR_FIELD, "expected a number in %g..%g, got %s",
                            PD_SCENARIO_MIN_FACTOR, PD_SCENARIO_MAX_FACTOR, GOT(v));
  *d = v->valuedouble;
  return 0;
}

static const scenario_key_t step_keys[] = {
    {"at_ms", pd_scenario_set_u64, offsetof(pd_scenario_step_t, at_ms), 0, PD_SCENARIO_MAX_MS, 1,
     NULL, NULL},
    {"factor", set_factor, offsetof(pd_scenario_step_t, factor), 0, 0, 1, NULL, NULL},
    {"ramp_ms", pd_scenario_set_u64, offsetof(pd_scenario_step_t, ramp_ms), 0,
     PD_SCENARIO_MAX_MS, 0, NULL, NULL},
};

static int step_elem(scenario_ctx_t *c, const cJSON *it, void *obj, uint32_t i) {
  pd_scenario_workload_t *w = obj;
  pd_scenario_step_t *st = &w->steps[i];
  memset(st, 0, sizeof *st);
  int rc = pd_scenario_walk(c, it, step_keys, sizeof step_keys / sizeof step_keys[0], st);
  const pd_scenario_step_t *prev = i ? &w->steps[i - 1] : NULL;
  if (rc == 0 && prev && st->at_ms < prev->at_ms + prev->ramp_ms + (prev->ramp_ms ? 0 : 1)) {
    size_t old = pd_scenario_json_path_key(c, "at_ms");
    rc = pd_scenario_fail(c, PD_ERR_FIELD,
                          "must be after the previous step and its ramp (at_ms %llu + ramp_ms "
                          "%llu), got %llu",
                          (unsigned long long)prev->at_ms, (unsigned long long)prev->ramp_ms,
                          (unsigned long long)st->at_ms);
    pd_scenario_json_path_pop(c, old);
  }
  if (rc == 0 && st->at_ms + st->ramp_ms > PD_SCENARIO_MAX_MS) {
    size_t old = pd_scenario_json_path_key(c, "ramp_ms");
    rc = pd_scenario_fail(c, PD_ERR_FIELD, "at_ms + ramp_ms = %llu exceeds %u (PD_SCENARIO_MAX_MS)",
                          (unsigned long long)(st->at_ms + st->ramp_ms), PD_SCENARIO_MAX_MS);
    pd_scenario_json_path_pop(c, old);
  }
  w->n_steps = rc == 0 ? i + 1 : w->n_steps;
  return rc;
}

int pd_scenario_set_steps(scenario_ctx_t *c, const cJSON *v, void *obj, const scenario_key_t *k) {
  (void)k;
  ((pd_scenario_workload_t *)obj)->n_steps = 0;
  int rc = pd_scenario_each(c, v, PD_SCENARIO_MAX_STEPS, "steps (PD_SCENARIO_MAX_STEPS)",
                            step_elem, obj);
  if (rc == 0 && ((pd_scenario_workload_t *)obj)->n_steps == 0)
    rc = pd_scenario_fail(c, PD_ERR_FIELD, "expected at least one step (leave the key out instead)");
  return rc;
}

/* ---- checks across objects ---- */

/* The closed loop and the client policy against the open-loop keys. */
static int check_clients(scenario_ctx_t *c, const pd_scenario_workload_t *w) {
  const char *why = NULL, *key = NULL;
  if (w->users && (w->interval_ms || w->poisson != 0.0 || w->n_bursts))
    key = "users", why = "a closed loop (users) cannot be combined with interval_ms, poisson "
                        "or bursts: its users send when their last request ends";
  else if (w->n_steps && w->n_bursts)
    key = "steps", why = "cannot be combined with bursts (bursts fix every arrival instant)";
  if (!why) return 0;
  size_t old = pd_scenario_json_path_key(c, "workload");
  pd_scenario_json_path_key(c, key);
  int rc = pd_scenario_fail(c, PD_ERR_FIELD, "%s", why);
  pd_scenario_json_path_pop(c, old);
  return rc;
}

static int check_bursts(scenario_ctx_t *c, pd_scenario_workload_t *w) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < w->n_bursts; i++) sum += w->bursts[i].requests;
  size_t old = pd_scenario_json_path_key(c, "workload");
  int rc = 0;
  if (sum > PD_SCENARIO_MAX_REQUESTS)
    rc = pd_scenario_fail(c, PD_ERR_FIELD,
                          "bursts: %llu requests in all exceeds %u "
                          "(PD_SCENARIO_MAX_REQUESTS)",
                          (unsigned long long)sum, PD_SCENARIO_MAX_REQUESTS);
  else if (w->interval_ms || w->poisson != 0.0)
    rc =
        pd_scenario_fail(c, PD_ERR_FIELD, "bursts: cannot be combined with interval_ms or poisson");
  else if (w->requests != 1 && w->requests != sum) /* 1: the default, left out */
    rc = pd_scenario_fail(c, PD_ERR_FIELD,
                          "requests: %u, but the bursts bring %llu (leave requests "
                          "out, or make them equal)",
                          (unsigned)w->requests, (unsigned long long)sum);
  pd_scenario_json_path_pop(c, old);
  if (rc == 0) w->requests = (uint32_t)sum;
  return rc;
}

int pd_scenario_check_all(scenario_ctx_t *c, pd_scenario_t *s) {
  if (s->workload.n_bursts) {
    int rc = check_bursts(c, &s->workload);
    if (rc < 0) return rc;
  }
  int crc = check_clients(c, &s->workload);
  if (crc < 0) return crc;
  if (s->workload.tokens == 0 && pd_scenario_protocol(s) == PD_PROTOCOL_VLLM) {
    pd_scenario_json_path_key(c, "workload");
    pd_scenario_json_path_key(c, "tokens");
    return pd_scenario_fail(c, PD_ERR_FIELD, "0 is refused by vLLM's sampling parameters "
                            "(max_tokens must be at least 1, V1.29) and a worker speaks vllm; "
                            "0 is for sglang workers (R-ZERO-TOKENS)");
  }
  for (uint32_t i = 0; i < s->n_tfaults; i++) {
    const pd_traffic_fault_t *t = &s->tfaults[i];
    if (t->request == PD_TRAFFIC_FAULT_ANY || t->request < s->workload.requests) continue;
    pd_scenario_json_path_key(c, "faults");
    pd_scenario_json_path_idx(c, i);
    pd_scenario_json_path_key(c, "request");
    return pd_scenario_fail(c, PD_ERR_FIELD, "request %u does not exist: the workload has %u "
                       "(counted from 0)", (unsigned)t->request, (unsigned)s->workload.requests);
  }
  return 0;
}

/* ---- the arrival schedule ---- */

uint64_t pd_scenario_arrival_gap_ns(const pd_scenario_workload_t *wl, uint32_t i, pd_prng_t *rng) {
  if (wl->n_bursts) {
    uint64_t first = 0; /* index of the burst's first request */
    for (uint32_t b = 0; b < wl->n_bursts; b++) {
      if (i == first) return (wl->bursts[b].at_ms - (b ? wl->bursts[b - 1].at_ms : 0)) * MS_NS;
      first += wl->bursts[b].requests;
      if (i < first) return 0;
    }
    return 0;
  }
  uint64_t gap = !i ? 0 : wl->interval_ns ? wl->interval_ns : wl->interval_ms * MS_NS;
  if (wl->poisson != 0.0 && gap)
    gap = (uint64_t)(-log(1.0 - pd_prng_unit(rng)) * (double)gap);
  return gap;
}

uint64_t pd_scenario_arrival_next_ns(const pd_scenario_workload_t *wl, uint32_t i,
                                     uint64_t t_prev_ns, pd_prng_t *rng) {
  uint64_t gap = pd_scenario_arrival_gap_ns(wl, i, rng);
  if (wl->n_steps && !wl->n_bursts) {
    double f = pd_scenario_load_factor(wl, t_prev_ns);
    gap = (uint64_t)((double)gap / f); /* f >= PD_SCENARIO_MIN_FACTOR: at most 100x */
  }
  return t_prev_ns + gap;
}

/* ---- load steps and the closed loop ---- */

double pd_scenario_load_factor(const pd_scenario_workload_t *wl, uint64_t t_ns) {
  double f = 1.0;
  for (uint32_t k = 0; k < wl->n_steps; k++) {
    const pd_scenario_step_t *st = &wl->steps[k];
    uint64_t at = st->at_ms * MS_NS, ramp = st->ramp_ms * MS_NS;
    if (t_ns < at) break;
    if (ramp && t_ns < at + ramp) return f + (st->factor - f) * (double)(t_ns - at) / (double)ramp;
    f = st->factor;
  }
  return f;
}

static uint32_t users_for(const pd_scenario_workload_t *wl, double f) {
  double n = (double)wl->users * f + 0.5;
  return n < 1.0 ? 0 : (uint32_t)n;
}

uint32_t pd_scenario_users_at(const pd_scenario_workload_t *wl, uint64_t t_ns) {
  return users_for(wl, pd_scenario_load_factor(wl, t_ns));
}

uint64_t pd_scenario_user_start_ns(const pd_scenario_workload_t *wl, uint32_t k, uint32_t u) {
  if (k >= wl->n_steps) return UINT64_MAX;
  const pd_scenario_step_t *st = &wl->steps[k];
  double before = k ? wl->steps[k - 1].factor : 1.0;
  uint32_t a = users_for(wl, before), b = users_for(wl, st->factor);
  if (u < a || u >= b) return UINT64_MAX; /* already active, or not reached by this step */
  uint64_t at = st->at_ms * MS_NS, ramp = st->ramp_ms * MS_NS;
  if (!ramp) return at;
  /* users_for(f) > u when users x f >= u + 0.5: the ramp reaches that f at this share */
  double share = (((double)u + 0.5) / (double)wl->users - before) / (st->factor - before);
  if (share < 0.0) share = 0.0;
  if (share > 1.0) share = 1.0;
  return at + (uint64_t)ceil(share * (double)ramp);
}

uint64_t pd_scenario_retry_backoff_ns(const pd_scenario_workload_t *wl, uint32_t retry,
                                      pd_prng_t *rng) {
  uint64_t ms = wl->retry_backoff_ms;
  for (uint32_t i = 1; i < retry && ms < wl->retry_backoff_max_ms; i++) ms *= 2;
  if (ms > wl->retry_backoff_max_ms) ms = wl->retry_backoff_max_ms;
  uint64_t ns = ms * MS_NS;
  if (wl->retry_jitter > 0.0) ns -= (uint64_t)((double)ns * wl->retry_jitter * pd_prng_unit(rng));
  return ns;
}

int pd_scenario_client_should_retry(int timed_out, int has_head, int status, int aborted) {
  if (timed_out || !has_head || aborted) return 1;
  return status == 408 || status == 429 || status >= 500;
}

/* ---- prompt lengths ---- */

static uint64_t mix64(uint64_t x) { /* splitmix64's finaliser */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint32_t pd_scenario_prompt_tokens(const pd_scenario_workload_t *wl, uint64_t seed, uint64_t i) {
  uint32_t lo = wl->prompt_tokens, hi = wl->prompt_tokens_max;
  if (hi <= lo) return lo;
  pd_prng_t r; /* a fresh state per (seed, i): a hash, not a stream another draw shares */
  pd_prng_init(&r, mix64(seed ^ mix64(i ^ 0x70726f6d7074ull /* "prompt" */)));
  return lo + (uint32_t)pd_prng_below(&r, (uint64_t)(hi - lo) + 1);
}

int pd_scenario_prio(const pd_scenario_workload_t *wl, uint64_t seed, uint64_t i) {
  if (wl->critical_share <= 0.0 && wl->sheddable_share <= 0.0) return PD_PRIO_STANDARD;
  pd_prng_t r; /* a fresh state per (seed, i), as the prompt length */
  pd_prng_init(&r, mix64(seed ^ mix64(i ^ 0x7072696f72697479ull /* "priority" */)));
  double u = pd_prng_unit(&r);
  return u < wl->critical_share                          ? PD_PRIO_CRITICAL
         : u < wl->critical_share + wl->sheddable_share ? PD_PRIO_SHEDDABLE
                                                         : PD_PRIO_STANDARD;
}

/* ---- entry points ---- */

static int is_json_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

/* Byte offset -> 1-based line and column (columns count bytes). */
static int fail_at(scenario_ctx_t *c, const char *text, size_t off, const char *what) {
  size_t line = 1, start = 0;
  for (size_t i = 0; i < off; i++)
    if (text[i] == '\n') {
      line++;
      start = i + 1;
    }
  return pd_scenario_fail(c, PD_ERR_JSON, "%s at byte %zu (line %zu:%zu)", what, off, line,
              off - start + 1);
}

static int parse_json(scenario_ctx_t *c, const char *text, size_t len, cJSON **out) {
  const char *end = text;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  size_t off = end >= text && end <= text + len ? (size_t)(end - text) : 0;
  if (!root) return fail_at(c, text, off, "malformed JSON");
  while (off < len && is_json_space(text[off])) off++;
  if (off < len) {
    cJSON_Delete(root);
    return fail_at(c, text, off, "unexpected data after the JSON value");
  }
  *out = root;
  return 0;
}

int pd_scenario_parse(pd_scenario_t *s, const char *path, const char *text, size_t len,
                      char *err, size_t errlen) {
  scenario_ctx_t c = {.file = path ? path : "(scenario)", .err = err, .errlen = errlen,
                 .jp = "$", .jn = 1};
  cJSON *root = NULL;
  if (err && errlen) err[0] = '\0';
  if (!s || (!text && len)) return pd_scenario_fail(&c, PD_ERR_INVAL, "no scenario or no text");
  pd_scenario_defaults(s);
  snprintf(s->path, sizeof s->path, "%s", c.file);
  if (len > PD_SCENARIO_MAX_FILE_BYTES)
    return pd_scenario_fail(&c, PD_ERR_TOO_LARGE, "%zu bytes exceeds the limit of %u bytes", len,
                PD_SCENARIO_MAX_FILE_BYTES);
  int rc = parse_json(&c, text ? text : "", len, &root);
  if (rc < 0) return rc;
  rc = pd_scenario_walk_top(&c, root, s);
  if (rc == 0) rc = pd_scenario_check_all(&c, s);
  cJSON_Delete(root);
  return rc;
}

int pd_scenario_load(pd_scenario_t *s, const char *path, char *err, size_t errlen) {
  scenario_ctx_t c = {.file = path ? path : "(scenario)", .err = err, .errlen = errlen};
  if (err && errlen) err[0] = '\0';
  if (!s || !path) return pd_scenario_fail(&c, PD_ERR_INVAL, "no scenario or no path");
  FILE *f = fopen(path, "rb");
  if (!f) return pd_scenario_fail(&c, PD_ERR_IO, "cannot open: %s", strerror(errno));
  char *buf = malloc(PD_SCENARIO_MAX_FILE_BYTES + 1);
  size_t n = buf ? fread(buf, 1, PD_SCENARIO_MAX_FILE_BYTES + 1, f) : 0;
  int rc = !buf ? pd_scenario_fail(&c, PD_ERR_NOMEM, "out of memory")
           : ferror(f) ? pd_scenario_fail(&c, PD_ERR_IO, "cannot read: %s", strerror(errno))
                       : pd_scenario_parse(s, path, buf, n, err, errlen); /* may be TOO_LARGE */
  fclose(f);
  free(buf);
  return rc;
}

int pd_scenario_step_span(const pd_scenario_workload_t *wl, uint32_t *next, uint64_t *from_ms,
                          uint64_t *to_ms, uint64_t *ramp_ms) {
  for (uint32_t i = *next; i < wl->n_steps; i++) {
    if (wl->steps[i].factor <= 1.0 || (i && wl->steps[i - 1].factor > 1.0)) continue;
    uint32_t j = i + 1;
    while (j < wl->n_steps && wl->steps[j].factor > 1.0) j++;
    if (j == wl->n_steps) break;
    *from_ms = wl->steps[i].at_ms;
    *to_ms = wl->steps[j].at_ms;
    *ramp_ms = wl->steps[j].ramp_ms;
    *next = j + 1;
    return 1;
  }
  *next = wl->n_steps;
  return 0;
}
