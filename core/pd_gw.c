/* The gateway object: worker table, request map, event routing, timers, and the pieces every
 * mode shares (selection, bootstrap, loads, outcomes, client output). The modes themselves
 * live in pd_mode_smg.c and pd_mode_ref.c. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "pd_err.h"
#include "pd_gw_int.h"
#include "pd_json.h"


/* ---------- names and defaults ---------- */

static const char *const mode_names[PD_MODE_COUNT] = {
    "joined", "pr1150", "minilb", "reference", "vllm-toy-proxy", "mooncake-proxy", "llmd-sidecar"};
static const char *const protocol_names[PD_PROTOCOL_COUNT] = {"sglang", "vllm"};

const char *pd_mode_name(pd_mode_t m) {
  return (unsigned)m < PD_MODE_COUNT ? mode_names[m] : "?";
}

/* The index of name in names[0..n), or -1. */
static int name_index(const char *const *names, int n, const char *name) {
  for (int i = 0; name && i < n; i++)
    if (strcmp(name, names[i]) == 0) return i;
  return -1;
}

int pd_mode_parse(const char *name, pd_mode_t *out) {
  int i = name_index(mode_names, PD_MODE_COUNT, name);
  if (i < 0) return PD_ERR_INVAL;
  *out = (pd_mode_t)i;
  return 0;
}

pd_protocol_t pd_mode_protocol(pd_mode_t m) {
  return m == PD_MODE_VLLM_TOY_PROXY || m == PD_MODE_MOONCAKE_PROXY || m == PD_MODE_LLMD_SIDECAR
             ? PD_PROTOCOL_VLLM
             : PD_PROTOCOL_SGLANG;
}

int pd_mode_speaks(pd_mode_t m, pd_protocol_t p) {
  if ((unsigned)m >= PD_MODE_COUNT || (unsigned)p >= PD_PROTOCOL_COUNT) return 0;
  return m == PD_MODE_REFERENCE || pd_mode_protocol(m) == p;
}

const char *const pd_seeded_bug_names[PD_BUG_COUNT] = {
    "none", "blame_partner", "clean_end_on_failure", "repeat_first_event", "extra_attempt",
    "leak_decode_load", "shared_batch_room", "late_shed", "retry_storm", "foreign_kv"};

const char *pd_seeded_bug_name(pd_seeded_bug_t b) {
  return (unsigned)b < PD_BUG_COUNT ? pd_seeded_bug_names[b] : "?";
}

int pd_seeded_bug_parse(const char *name, pd_seeded_bug_t *out) {
  int i = name_index(pd_seeded_bug_names, PD_BUG_COUNT, name);
  if (i < 0) return PD_ERR_INVAL;
  *out = (pd_seeded_bug_t)i;
  return 0;
}

const char *pd_protocol_name(pd_protocol_t p) {
  return (unsigned)p < PD_PROTOCOL_COUNT ? protocol_names[p] : "?";
}

int pd_protocol_parse(const char *name, pd_protocol_t *out) {
  int i = name_index(protocol_names, PD_PROTOCOL_COUNT, name);
  if (i < 0) return PD_ERR_INVAL;
  *out = (pd_protocol_t)i;
  return 0;
}

const char *pd_outcome_name(pd_outcome_t o) {
  static const char *const n[] = {"success", "failure", "timeout", "cancelled"};
  return (unsigned)o < 4 ? n[o] : "?";
}

const char *pd_role_name(pd_role_t r) { return r == PD_ROLE_PREFILL ? "prefill" : "decode"; }

#define MS(x) ((uint64_t)(x) * 1000000ull)
#define SEC(x) (MS(x) * 1000ull)

void pd_gw_config_default(pd_gw_config_t *c, pd_mode_t mode) {
  memset(c, 0, sizeof *c);
  c->mode = mode;
  c->protocol = pd_mode_protocol(mode);
  pd_retry_config_smg(&c->retry);
  c->policy[0] = c->policy[1] = PD_POLICY_ROUND_ROBIN;
  switch (mode) {
  case PD_MODE_JOINED:
  case PD_MODE_PR1150:
    pd_breaker_config_smg(&c->breaker);
    c->request_timeout_ns = SEC(1800); /* R4.1 */
    c->connect_timeout_ns = SEC(10);
    break;
  case PD_MODE_MINILB:
    pd_breaker_config_smg(&c->breaker);
    c->breaker.failure_threshold = UINT32_MAX; /* M8.5: no breaker */
    c->retry.max_attempts = 1;                 /* M8.5: no retries */
    c->policy[0] = c->policy[1] = PD_POLICY_RANDOM; /* M8.1 */
    c->request_timeout_ns = SEC(3600);         /* M8.3 */
    break;
  case PD_MODE_REFERENCE:
    pd_breaker_config_window(&c->breaker);
    c->connect_timeout_ns = SEC(10);
    c->first_token_timeout_ns = SEC(30);
    c->head_timeout_ns = SEC(5);
    c->idle_timeout_ns = SEC(30);
    c->total_timeout_ns = SEC(600);  /* a user cap on the whole request, as smg's was */
    c->commit_timeout_ns = SEC(90);  /* R-PROGRESS: + idle 30 s = I1's 120 s */
    c->token_budget_ns = MS(100);    /* R-PROGRESS: several times a decode's inter-token gap */
    c->prefill_tail_timeout_ns = MS(500); /* prefill lags KV by <= ~200 ms (S5.3) */
    c->sf_params_reuse_ns = SEC(20); /* R-SF-DECODE-RETRY: under the 30 s lease (V1.13) */
    c->admit_queue_max = 1024;        /* R-ADMIT-QUEUE: bounded waiters (O2.4) */
    c->admit_queue_ns = SEC(20);      /* R-ADMIT-QUEUE: shed well before the commit budget */
    c->admit_retry_after_ns = SEC(1); /* R-ADMIT-SHED */
    c->retry_budget_pct = 20;         /* R-RETRY-BUDGET: Finagle's percentCanRetry, Envoy's
                                         budget_percent default (O4.2) */
    c->retry_budget_min = 10;         /* R-RETRY-BUDGET: a floor of 1 a second (Finagle's is 10
                                         a second, more than an LLM cluster's whole traffic) */
    c->retry_budget_window_ns = SEC(10); /* R-RETRY-BUDGET: Finagle's default ttl */
    break;
  case PD_MODE_VLLM_TOY_PROXY: /* V1.24: round robin, httpx timeout=None, nothing else */
  case PD_MODE_MOONCAKE_PROXY: /* V1.25: the same */
  case PD_MODE_LLMD_SIDECAR:   /* V1.27: the EPP picks; no per-leg timeout, no retry */
    pd_breaker_config_smg(&c->breaker);
    c->breaker.failure_threshold = UINT32_MAX; /* no breaker */
    c->retry.max_attempts = 1;                 /* no retries */
    break;
  }
}

/* ---------- lifecycle ---------- */

pd_gw_t *pd_gw_new(const pd_alloc_t *alloc, const pd_gw_config_t *cfg, pd_prng_t *rng) {
  /* every field zeroed but the worker table (132 KiB, most never used: a run of a few
   * requests paid more for zeroing it than for its requests); pd_gw_add_worker fills an
   * entry before it counts, and entries past n_workers are never read */
  pd_gw_t *gw = pd_malloc(alloc, sizeof *gw);
  if (!gw) return NULL;
  memset(gw, 0, offsetof(pd_gw_t, workers));
  memset((char *)gw + offsetof(pd_gw_t, n_workers), 0, sizeof *gw - offsetof(pd_gw_t, n_workers));
  gw->alloc = alloc;
  gw->cfg = *cfg;
  if (!pd_mode_speaks(cfg->mode, cfg->protocol)) /* a model speaks only its own protocol */
    gw->cfg.protocol = pd_mode_protocol(cfg->mode);
  if (cfg->mode != PD_MODE_REFERENCE || (unsigned)cfg->seeded_bug >= PD_BUG_COUNT)
    gw->cfg.seeded_bug = PD_BUG_NONE;
  if (gw->cfg.retry.max_attempts == 0) gw->cfg.retry.max_attempts = 1;
  if (gw->cfg.retry.max_attempts > PD_MAX_ATTEMPTS) gw->cfg.retry.max_attempts = PD_MAX_ATTEMPTS;
  gw->rng = rng;
  pd_map_init(&gw->map, alloc, 0);
  gw->next_leg_id = 1;
  for (int r = 0; r < 2; r++) pd_policy_init(&gw->policy[r], cfg->policy[r]);
  gw->pick_group = -1;
  pd_gw_deadlines_init(gw);
  return gw;
}

static void leg_del(pd_gw_t *gw, pd_leg_t *leg) {
  pd_sse_free(&leg->sse);
  pd_buf_free(gw->alloc, &leg->body);
  pd_free(gw->alloc, leg);
}

void pd_gw_rq_del(pd_gw_t *gw, pd_rq_t *rq) {
  if (rq->is_queued) { /* freed while queued (the gateway's end): out of the list, no wake */
    if (rq->q_prev) rq->q_prev->q_next = rq->q_next;
    else gw->q_head = rq->q_next;
    if (rq->q_next) rq->q_next->q_prev = rq->q_prev;
    else gw->q_tail = rq->q_prev;
    gw->n_queued--;
  }
  for (uint32_t i = 0; i < rq->n_legs; i++) leg_del(gw, rq->legs[i]);
  pd_request_free(&rq->req);
  pd_buf_free(gw->alloc, &rq->prefill_lp);
  if (rq->has_lp_read) pd_merge_prefill_free(&rq->lp_read);
  cJSON_Delete(rq->sf_params);
  pd_free(gw->alloc, rq->rid);
  pd_free(gw->alloc, rq);
}

void pd_gw_del(pd_gw_t *gw) {
  if (!gw) return;
  void *rq;
  for (size_t slot = 0; pd_map_next(&gw->map, &slot, NULL, &rq);) pd_gw_rq_del(gw, rq);
  pd_map_free(&gw->map);
  pd_heap_free(&gw->deadlines);
  for (int r = 0; r < 2; r++)
    for (uint32_t i = 0; i < gw->n_workers[r]; i++) {
      pd_free(gw->alloc, gw->workers[r][i].name);
      pd_free(gw->alloc, gw->workers[r][i].host);
    }
  cJSON_Delete(gw->bug_kv_params);
  pd_free(gw->alloc, gw);
}

int pd_gw_add_worker(pd_gw_t *gw, pd_role_t role, const char *name, const char *host,
                     int bootstrap_port) {
  if ((unsigned)role > 1 || !name || !host) return PD_ERR_INVAL;
  if (gw->n_workers[role] >= PD_MAX_WORKERS) return PD_ERR_LIMIT;
  pd_worker_t *w = &gw->workers[role][gw->n_workers[role]];
  memset(w, 0, sizeof *w);
  w->name = pd_strndup(gw->alloc, name, strlen(name));
  w->host = pd_strndup(gw->alloc, host, strlen(host));
  if (!w->name || !w->host) {
    pd_free(gw->alloc, w->name);
    pd_free(gw->alloc, w->host);
    return PD_ERR_NOMEM;
  }
  w->port = bootstrap_port;
  pd_breaker_init(&w->breaker, &gw->cfg.breaker);
  return (int)gw->n_workers[role]++;
}

uint32_t pd_gw_worker_count(const pd_gw_t *gw, pd_role_t role) { return gw->n_workers[role]; }
uint32_t pd_gw_load(const pd_gw_t *gw, pd_role_t role, uint32_t w) {
  return w < gw->n_workers[role] ? gw->workers[role][w].load : 0;
}
pd_breaker_state_t pd_gw_breaker_state(pd_gw_t *gw, pd_role_t role, uint32_t w, uint64_t now) {
  if (w >= gw->n_workers[role]) return PD_BREAKER_CLOSED;
  /* a peek: the lazy Open->HalfOpen move is left to selection, which reports it as a
   * PD_ACT_BREAKER action (reading state must not swallow that transition) */
  pd_breaker_t copy = gw->workers[role][w].breaker;
  return pd_breaker_state(&copy, now);
}
size_t pd_gw_requests_live(const pd_gw_t *gw) { return pd_map_len(&gw->map); }
uint32_t pd_gw_breaker_probes(const pd_gw_t *gw, pd_role_t role, uint32_t w) {
  return w < gw->n_workers[role] ? gw->workers[role][w].breaker.probes_in_flight : 0;
}
int pd_gw_breaker_start_in(pd_gw_t *gw, pd_role_t role, uint32_t w, pd_breaker_state_t st,
                           uint64_t now) {
  if ((unsigned)role > 1 || w >= gw->n_workers[role] || (unsigned)st > PD_BREAKER_HALF_OPEN)
    return PD_ERR_INVAL;
  pd_breaker_start_in(&gw->workers[role][w].breaker, st, now);
  return 0;
}

/* ---------- action emission ---------- */

pd_action_t *pd_gw_emit(pd_gw_t *gw, pd_action_kind_t kind, pd_rq_t *rq) {
  pd_action_t *a = pd_actbuf_push(gw->out);
  /* PD_MAX_ACTIONS_PER_EVENT bounds what one event can produce: reaching it is a core bug */
  assert(!gw->out->is_overflow);
  if (!a) { /* overflow in a release build: a sink, never read (room is reserved per step) */
    memset(&gw->scratch, 0, sizeof gw->scratch);
    a = &gw->scratch;
  }
  a->kind = kind;
  a->req_id = rq ? rq->id : 0;
  return a;
}

const uint8_t *pd_gw_keep(pd_gw_t *gw, const void *p, size_t len) {
  return pd_actbuf_keep(gw->out, p, len);
}

void pd_gw_client_head(pd_gw_t *gw, pd_rq_t *rq, int status, int is_sse) {
  pd_action_t *a = pd_gw_emit(gw, PD_ACT_CLIENT_HEAD, rq);
  a->status = status;
  a->flag = is_sse;
}

/* Bytes for the client. Consecutive data for one request in one step go out as one action
 * (the bytes appended to the last one's payload): a decode read holding hundreds of events
 * (a client that resumes reading after backpressure) stays one action, not one per event,
 * well under PD_MAX_ACTIONS_PER_EVENT, and the driver writes them at once. */
void pd_gw_client_data(pd_gw_t *gw, pd_rq_t *rq, const void *p, size_t len) {
  if (!len) return;
  pd_actbuf_t *b = gw->out;
  pd_action_t *last = b->n > b->step_start ? &b->v[b->n - 1] : NULL;
  if (last && last->kind == PD_ACT_CLIENT_DATA && last->req_id == rq->id &&
      pd_actbuf_extend(b, last->data, last->len, p, len)) {
    last->len += len;
    return;
  }
  const uint8_t *d = pd_gw_keep(gw, p, len);
  if (!d) return;
  pd_action_t *a = pd_gw_emit(gw, PD_ACT_CLIENT_DATA, rq);
  a->data = d;
  a->len = len;
}

void pd_gw_client_end_at(pd_gw_t *gw, pd_rq_t *rq, int is_abort, const char *file, int line) {
  if (pd_rq_client_done(rq)) return;
  pd_action_t *a = pd_gw_emit(gw, PD_ACT_CLIENT_END, rq);
  a->flag = is_abort;
  pd_rq_set_state(gw, rq, RQ_TAIL, file, line);
}

static const char *reason_phrase(int status) {
  switch (status) {
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 408: return "Request Timeout";
  case 413: return "Payload Too Large";
  case 429: return "Too Many Requests";
  case 500: return "Internal Server Error";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  default: return status >= 500 ? "Server Error" : "Client Error";
  }
}

/* pdref's error body, used by every mode: R1.42's `type`, `code` and `message`, with the
 * HTTP `status` where smg has `"param": null`. smg's `X-SMG-Error-Code` header is not sent
 * (the action interface carries no headers). docs/spec.md section 10, Q15. */
static char *error_json(int status, const char *code, const char *msg) {
  cJSON *root = cJSON_CreateObject();
  cJSON *err = cJSON_AddObjectToObject(root, "error");
  cJSON_AddStringToObject(err, "type", reason_phrase(status));
  cJSON_AddStringToObject(err, "code", code ? code : "error");
  cJSON_AddStringToObject(err, "message", msg ? msg : "");
  cJSON_AddNumberToObject(err, "status", status);
  char *s = pd_json_print(root);
  cJSON_Delete(root);
  return s;
}

void pd_gw_client_error_at(pd_gw_t *gw, pd_rq_t *rq, int status, const char *code,
                           const char *msg, const char *file, int line) {
  if (pd_rq_client_done(rq)) return;
  pd_gw_client_head(gw, rq, status, 0);
  char *s = error_json(status, code, msg);
  if (s) {
    pd_gw_client_data(gw, rq, s, strlen(s));
    cJSON_free(s);
  }
  pd_gw_client_end_at(gw, rq, 0, file, line);
}

void pd_gw_sse_error(pd_gw_t *gw, pd_rq_t *rq, int status, const char *msg) {
  cJSON *root = cJSON_CreateObject();
  cJSON *err = cJSON_AddObjectToObject(root, "error");
  cJSON_AddStringToObject(err, "message", msg ? msg : "");
  cJSON_AddNumberToObject(err, "code", status);
  char *s = pd_json_print(root);
  cJSON_Delete(root);
  if (!s) return;
  char frame[1024];
  int n = snprintf(frame, sizeof frame, "data: %s\n\n", s);
  cJSON_free(s);
  if (n > 0 && (size_t)n < sizeof frame) pd_gw_client_data(gw, rq, frame, (size_t)n);
}

/* ---------- legs, loads, outcomes ---------- */

pd_leg_t *pd_gw_leg(pd_rq_t *rq, uint64_t leg_id) {
  for (uint32_t i = 0; i < rq->n_legs; i++)
    if (rq->legs[i]->id == leg_id) return rq->legs[i];
  return NULL;
}

pd_leg_t *pd_gw_cur(pd_rq_t *rq, pd_role_t role) {
  return rq->cur_id[role] ? pd_gw_leg(rq, rq->cur_id[role]) : NULL;
}

/* A leg is removed exactly once: it must still be the request's, and it is freed here. */
static void leg_remove(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const char *file, int line) {
  uint32_t found = 0;
  for (uint32_t i = 0; i < rq->n_legs; i++) {
    if (rq->legs[i] != leg) continue;
    rq->legs[i] = rq->legs[--rq->n_legs];
    found = 1;
    break;
  }
  assert(found);
  (void)found;
  pd_leg_set_state(gw, rq, leg, LEG_REMOVED, file, line);
  if (rq->cur_id[leg->role] == leg->id) rq->cur_id[leg->role] = 0;
  if (leg->probe && !leg->has_outcome) /* never leak a half-open probe slot */
    pd_breaker_record(&gw->workers[leg->role][leg->worker].breaker, gw->now,
                      PD_BREAKER_NEUTRAL, leg->probe);
  leg_del(gw, leg);
}

void pd_gw_close_leg_at(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, int send_abort,
                        const char *file, int line) {
  /* A leg whose transport failed is closed already on the gateway's side, but its worker may
   * still hold the request (a prefill queued in bootstrap, S5.4): it gets the abort alone. */
  int owes = leg->state == LEG_FAILED && leg->is_abort_owed && send_abort && rq->rid;
  if (leg->state == LEG_OPEN || leg->state == LEG_HEAD || owes) {
    pd_action_t *a = pd_gw_emit(gw, PD_ACT_CLOSE_LEG, rq);
    a->leg_id = leg->id;
    a->role = leg->role;
    a->worker = leg->worker;
    if (send_abort && rq->rid) a->str = (const char *)pd_gw_keep(gw, rq->rid, strlen(rq->rid));
  }
  leg_remove(gw, rq, leg, file, line);
}

void pd_gw_drop_leg_at(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const char *file, int line) {
  leg_remove(gw, rq, leg, file, line);
}

void pd_gw_close_all_at(pd_gw_t *gw, pd_rq_t *rq, int send_abort, const char *file, int line) {
  for (uint32_t guard = 0; guard < PD_MAX_LEGS; guard++) {
    pd_leg_t *victim = NULL;
    for (uint32_t i = 0; i < rq->n_legs; i++)
      if (!rq->legs[i]->is_detached) {
        victim = rq->legs[i];
        break;
      }
    if (!victim) return;
    pd_gw_close_leg_at(gw, rq, victim, send_abort, file, line);
  }
}

void pd_gw_load_acquire(pd_gw_t *gw, pd_rq_t *rq, pd_role_t role, uint32_t w) {
  assert(rq->load_w[role] == 0); /* one load per role per request: released before the next */
  assert(gw->workers[role][w].load < UINT32_MAX);
  gw->workers[role][w].load++;
  rq->load_w[role] = w + 1;
  pd_action_t *a = pd_gw_emit(gw, PD_ACT_LOAD, rq);
  a->role = role;
  a->worker = w;
  a->flag = 1;
}

void pd_gw_release_load(pd_gw_t *gw, pd_rq_t *rq, pd_role_t role) {
  if (!rq->load_w[role]) return;
  uint32_t w = rq->load_w[role] - 1;
  rq->load_w[role] = 0;
  if (gw->cfg.seeded_bug == PD_BUG_LEAK_DECODE_LOAD && role == PD_ROLE_DECODE) return;
  assert(gw->workers[role][w].load > 0); /* a load is released only after its acquire */
  if (gw->workers[role][w].load) gw->workers[role][w].load--;
  pd_action_t *a = pd_gw_emit(gw, PD_ACT_LOAD, rq);
  a->role = role;
  a->worker = w;
  a->flag = -1;
  if (gw->q_head) pd_admit_kick(gw); /* room freed: the queue's head may start (R-ADMIT-QUEUE) */
}

/* R-BREAKER-BUSY (reference's windowed breaker only): a deadline the gateway itself ran out
 * on a leg (no head, or no first token: the leg's head status is not the worker's own 504) is
 * not a death when another leg of the same worker made progress (a data event under a 2xx
 * head, or a success) after this one was opened (it is serving) and no leg that made progress
 * was opened after this one (nothing overtook it: a worker admits in arrival order, R-CAP-HOL,
 * so this leg was only queued behind others). A worker that serves later legs while this one
 * sits silent skipped it: that timeout counts. What the gateway saw, nothing else. */
static int is_busy_timeout(const pd_gw_t *gw, const pd_leg_t *leg, pd_outcome_t o) {
  const pd_worker_t *wk = &gw->workers[leg->role][leg->worker];
  return o == PD_OUTCOME_TIMEOUT && wk->breaker.cfg.kind == PD_BREAKER_KIND_WINDOW &&
         leg->status != 504 && wk->has_progress && wk->t_progress_ns >= leg->t_open_ns &&
         wk->t_progress_open_ns <= leg->t_open_ns;
}

void pd_gw_note_progress(pd_gw_t *gw, const pd_leg_t *leg) {
  pd_worker_t *wk = &gw->workers[leg->role][leg->worker];
  wk->t_progress_ns = gw->now;
  if (!wk->has_progress || leg->t_open_ns > wk->t_progress_open_ns)
    wk->t_progress_open_ns = leg->t_open_ns;
  wk->has_progress = 1;
}

/* R-BREAKER-BOUND (reference's windowed breaker only): a Closed breaker may open only while
 * fewer than max(1, n/2) of its role's workers are out (Open or HalfOpen): at least one may
 * always go (O4.3: Envoy ejects one host regardless of max_ejection_percent). */
static int may_eject(const pd_gw_t *gw, pd_role_t role) {
  uint32_t n = gw->n_workers[role], out = 0, cap = n / 2 ? n / 2 : 1;
  if (gw->workers[role][0].breaker.cfg.kind != PD_BREAKER_KIND_WINDOW) return 1;
  for (uint32_t i = 0; i < n; i++)
    out += gw->workers[role][i].breaker.state != PD_BREAKER_CLOSED; /* stored: no lazy move */
  return out < cap;
}

void pd_gw_outcome(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_outcome_t o, int status) {
  if (leg->has_outcome) return;
  leg->has_outcome = 1;
  pd_worker_t *wk = &gw->workers[leg->role][leg->worker];
  pd_breaker_t *b = &wk->breaker;
  pd_breaker_result_t r = o == PD_OUTCOME_SUCCESS   ? PD_BREAKER_SUCCESS
                          : o == PD_OUTCOME_CANCELLED ? PD_BREAKER_NEUTRAL
                                                      : PD_BREAKER_FAILURE;
  if (r == PD_BREAKER_FAILURE && is_busy_timeout(gw, leg, o)) r = PD_BREAKER_NEUTRAL;
  if (o == PD_OUTCOME_SUCCESS) pd_gw_note_progress(gw, leg);
  pd_action_t *a = pd_gw_emit(gw, PD_ACT_OUTCOME, rq);
  a->role = leg->role;
  a->worker = leg->worker;
  a->leg_id = leg->id;
  a->flag = (int)o;
  a->status = status;
  int may_open = r != PD_BREAKER_FAILURE || may_eject(gw, leg->role);
  if (pd_breaker_record_bounded(b, gw->now, r, leg->probe, may_open)) {
    pd_action_t *ba = pd_gw_emit(gw, PD_ACT_BREAKER, rq);
    ba->role = leg->role;
    ba->worker = leg->worker;
    ba->flag = (int)b->state;
  }
}

void pd_gw_set_deadline(pd_gw_t *gw, pd_rq_t *rq, int which, uint64_t t_ns) {
  (void)gw;
  rq->dl[which] = t_ns;
}

/* R-PROGRESS: SGLang's /generate default when a request states no output length
 * (sampling_params.max_new_tokens = 128, SGLang docs/backend/sampling_params.md). */
#define PD_DEFAULT_MAX_NEW_TOKENS 128u


uint64_t pd_gw_work_allowance_ns(const pd_gw_t *gw, const pd_rq_t *rq) {
  if (rq->req.is_stream) return 0; /* a stream shows its progress: idle supervises it */
  uint64_t n = rq->req.max_tokens ? rq->req.max_tokens : PD_DEFAULT_MAX_NEW_TOKENS;
  uint64_t per = gw->cfg.token_budget_ns;
  return per && n > PD_MAX_ALLOWANCE_NS / per ? PD_MAX_ALLOWANCE_NS : n * per;
}

/* R-RETRY-BUDGET (reference): client requests and scheduled retries are counted in
 * PD_RB_BUCKETS buckets spanning the window; a bucket is reused once its epoch is out of it. */
static pd_rb_bucket_t *rb_bucket(pd_gw_t *gw) {
  uint64_t width = gw->cfg.retry_budget_window_ns / PD_RB_BUCKETS;
  uint64_t epoch = gw->now / (width ? width : 1);
  pd_rb_bucket_t *k = &gw->rb[epoch % PD_RB_BUCKETS];
  if (k->epoch != epoch || !k->is_used) *k = (pd_rb_bucket_t){.epoch = epoch, .is_used = 1};
  return k;
}

static void rb_sums(pd_gw_t *gw, uint64_t *requests, uint64_t *retries) {
  uint64_t epoch = rb_bucket(gw)->epoch;
  *requests = *retries = 0;
  for (int i = 0; i < PD_RB_BUCKETS; i++) {
    const pd_rb_bucket_t *k = &gw->rb[i];
    if (!k->is_used || k->epoch + PD_RB_BUCKETS <= epoch) continue;
    *requests += k->requests;
    *retries += k->retries;
  }
}

static int is_budgeted(const pd_gw_t *gw) {
  return gw->cfg.mode == PD_MODE_REFERENCE && gw->cfg.retry_budget_pct;
}

void pd_gw_budget_note_request(pd_gw_t *gw) {
  if (is_budgeted(gw)) rb_bucket(gw)->requests++;
}

/* A retry of a failed attempt may be scheduled while the window's retries stay under
 * max(floor, pct % of its requests): retries are a share of recent traffic, so they cannot
 * multiply load (O4.2). On refusal the request's is_retry_denied is set. */
int pd_gw_retry_budget_allows(pd_gw_t *gw, pd_rq_t *rq) {
  if (!is_budgeted(gw) || rq->attempt >= gw->cfg.retry.max_attempts ||
      gw->cfg.seeded_bug == PD_BUG_RETRY_STORM)
    return 1;
  uint64_t requests, retries;
  rb_sums(gw, &requests, &retries);
  uint64_t cap = requests * gw->cfg.retry_budget_pct / 100;
  if (cap < gw->cfg.retry_budget_min) cap = gw->cfg.retry_budget_min;
  if (retries < cap) return 1;
  rq->is_retry_denied = 1;
  gw->admit.retry_denied++;
  return 0;
}

void pd_gw_retry_budget_spend(pd_gw_t *gw) {
  if (is_budgeted(gw)) rb_bucket(gw)->retries++;
}

int pd_gw_schedule_retry(pd_gw_t *gw, pd_rq_t *rq) {
  uint32_t max = gw->cfg.retry.max_attempts;
  if (gw->cfg.seeded_bug == PD_BUG_EXTRA_ATTEMPT && max < PD_MAX_ATTEMPTS) max++;
  if (rq->attempt >= max) return 0;
  uint64_t d = pd_retry_delay_ns(&gw->cfg.retry, rq->attempt - 1, gw->rng);
  if (rq->dl[DL_TOTAL] && gw->now + d >= rq->dl[DL_TOTAL]) return 0;
  if (rq->dl[DL_COMMIT] && gw->now + d >= rq->dl[DL_COMMIT]) return 0; /* R-PROGRESS */
  /* a retry that found no pair waits on in RQ_BACKOFF: no move */
  if (rq->state != RQ_BACKOFF) PD_RQ_SET(gw, rq, RQ_BACKOFF);
  rq->dl[DL_BACKOFF] = gw->now + d;
  return 1;
}
