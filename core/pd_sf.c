/* Source-first (vLLM's protocol) pieces every source-first mode shares: the prefill body each
 * source rewrites (V1.1, V1.2, V1.25), decode's body (the client's plus kv_transfer_params,
 * V1.7), prefill's answer read once with cJSON, and the attempt start that opens prefill
 * alone. The modes: pd_mode_sf.c (the models), pd_mode_sfref.c (the reference). */
#include <assert.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "pd_err.h"
#include "pd_gw_int.h"
#include "pd_json.h"

/* Mooncake's proxy: a prefiller without a bootstrap port gets 8998 (V1.25). */
#define PD_SF_MOONCAKE_BOOTSTRAP_PORT 8998

/* obj[key] = item, every member of that name removed first (cJSON keeps duplicates). Takes
 * item; NULL item means an allocation failed. */
static int put(cJSON *obj, const char *key, cJSON *item) {
  if (!item) return PD_ERR_NOMEM;
  for (int guard = cJSON_GetArraySize(obj); guard >= 0; guard--) {
    if (!cJSON_GetObjectItemCaseSensitive(obj, key)) break;
    cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
  }
  if (!cJSON_AddItemToObject(obj, key, item)) {
    cJSON_Delete(item);
    return PD_ERR_NOMEM;
  }
  return 0;
}

static void drop(cJSON *obj, const char *key) {
  for (int guard = cJSON_GetArraySize(obj); guard >= 0; guard--) {
    if (!cJSON_GetObjectItemCaseSensitive(obj, key)) break;
    cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
  }
}

/* kv_transfer_params asking prefill to keep its KV for a remote decode. with_nulls: the four
 * remote_* members as JSON null (V1.1, V1.2); Mooncake's proxy sends the two flags only. */
static cJSON *prefill_params(int with_nulls) {
  cJSON *kv = cJSON_CreateObject();
  if (!kv) return NULL;
  int ok = cJSON_AddBoolToObject(kv, "do_remote_decode", 1) &&
           cJSON_AddBoolToObject(kv, "do_remote_prefill", 0);
  static const char *const nulls[] = {"remote_engine_id", "remote_block_ids", "remote_host",
                                      "remote_port"};
  for (size_t i = 0; ok && with_nulls && i < sizeof nulls / sizeof nulls[0]; i++)
    ok = cJSON_AddNullToObject(kv, nulls[i]) != NULL;
  if (!ok) {
    cJSON_Delete(kv);
    return NULL;
  }
  return kv;
}

/* The prefill body of a mode (V1.1 toy proxy and reference, V1.25 Mooncake, V1.2 llm-d):
 * kv_transfer_params set, stream false, stream_options removed, a one-token limit. */
static int rewrite_prefill(pd_mode_t mode, pd_route_t route, cJSON *doc) {
  int is_llmd = mode == PD_MODE_LLMD_SIDECAR;
  int rc = put(doc, "kv_transfer_params", prefill_params(mode != PD_MODE_MOONCAKE_PROXY));
  if (rc == 0) rc = put(doc, "stream", cJSON_CreateFalse());
  drop(doc, "stream_options");
  if (rc == 0) rc = put(doc, "max_tokens", cJSON_CreateNumber(1));
  /* the Python proxies cap max_completion_tokens when the client sent it; llm-d caps it on
   * chat always (its chat token-limit fields) */
  int cap_mct = is_llmd ? route == PD_ROUTE_CHAT
                        : cJSON_GetObjectItemCaseSensitive(doc, "max_completion_tokens") != NULL;
  if (rc == 0 && cap_mct) rc = put(doc, "max_completion_tokens", cJSON_CreateNumber(1));
  if (mode == PD_MODE_VLLM_TOY_PROXY || mode == PD_MODE_REFERENCE) { /* "not supported for P":
    popped here; decode's body is the client's, so they reach decode unchanged */
    drop(doc, "min_tokens");
    drop(doc, "min_completion_tokens");
  }
  return rc;
}

static int print_doc(const pd_gw_t *gw, cJSON *doc, char **out, size_t *len) {
  char *s = pd_json_print(doc);
  if (!s) return PD_ERR_NOMEM;
  size_t n = strlen(s);
  char *buf = pd_malloc(gw->alloc, n + 1);
  if (buf) memcpy(buf, s, n + 1);
  cJSON_free(s);
  if (!buf) return PD_ERR_NOMEM;
  *out = buf;
  *len = n;
  return 0;
}

/* Render one source-first leg body into the action arena: prefill's rewritten one, or
 * decode's (the client's body plus rq->sf_params as kv_transfer_params, V1.7). */
static const uint8_t *render(pd_gw_t *gw, const pd_rq_t *rq, pd_role_t role, size_t *len) {
  cJSON *doc = cJSON_Duplicate((const cJSON *)rq->req.json, 1);
  if (!doc) return NULL;
  int rc;
  if (role == PD_ROLE_PREFILL) rc = rewrite_prefill(gw->cfg.mode, rq->req.route, doc);
  else if (rq->sf_params)
    rc = put(doc, "kv_transfer_params", cJSON_Duplicate((const cJSON *)rq->sf_params, 1));
  else rc = 0;
  char *body = NULL;
  if (rc == 0) rc = print_doc(gw, doc, &body, len);
  cJSON_Delete(doc);
  if (rc) return NULL;
  const uint8_t *kept = pd_gw_keep(gw, body, *len);
  pd_free(gw->alloc, body);
  return kept;
}

static void emit_attempt(pd_gw_t *gw, pd_rq_t *rq, int32_t pw, int32_t dw) {
  pd_action_t *at = pd_gw_emit(gw, PD_ACT_ATTEMPT, rq);
  at->status = (int)rq->attempt;
  at->flag = pw;
  at->worker = dw < 0 ? UINT32_MAX : (uint32_t)dw;
}

/* Loads and a probe for the reference (R-LOAD, R-BREAKER); the models keep none. */
static void guard_leg(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  if (gw->cfg.mode != PD_MODE_REFERENCE) return;
  pd_gw_load_acquire(gw, rq, leg->role, leg->worker);
  pd_breaker_admit(&gw->workers[leg->role][leg->worker].breaker, gw->now, &leg->probe);
}

int pd_sf_pick_decode(pd_gw_t *gw, pd_rq_t *rq) {
  if (rq->sf_dw) return 0;
  /* R-ADMIT-SF: prefill has pinned the KV: its decode goes now, whatever the limits (the
   * request was admitted with a decode slot; a retry's decode queues at the worker rather
   * than leave the pin to age at the gateway) */
  gw->is_pick_unlimited = 1;
  int32_t dw = pd_gw_pick(gw, rq, PD_ROLE_DECODE);
  gw->is_pick_unlimited = 0;
  if (dw < 0) return 503;
  rq->sf_dw = (uint32_t)dw + 1;
  return 0;
}

pd_leg_t *pd_sf_open_decode(pd_gw_t *gw, pd_rq_t *rq) {
  assert(rq->sf_dw); /* pd_sf_pick_decode first */
  size_t len = 0;
  const uint8_t *body = render(gw, rq, PD_ROLE_DECODE, &len);
  pd_leg_t *d = body ? pd_gw_leg_new(gw, rq, PD_ROLE_DECODE, rq->sf_dw - 1) : NULL;
  if (!d) return NULL;
  pd_admit_sf_release(gw, rq); /* R-ADMIT-SF: its decode load counts from now */
  guard_leg(gw, rq, d);
  pd_gw_open_leg(gw, rq, d, body, len);
  return d;
}

pd_leg_t *pd_sf_open_drain(pd_gw_t *gw, pd_rq_t *rq, uint32_t w) {
  size_t len = 0;
  const uint8_t *body = rq->sf_params ? render(gw, rq, PD_ROLE_DECODE, &len) : NULL;
  uint64_t cur = rq->cur_id[PD_ROLE_DECODE];
  pd_leg_t *d = body ? pd_gw_leg_new(gw, rq, PD_ROLE_DECODE, w) : NULL;
  if (!d) return NULL;
  rq->cur_id[PD_ROLE_DECODE] = cur;
  d->is_drain = 1;
  pd_gw_open_leg(gw, rq, d, body, len);
  return d;
}

/* The reference reuses kv_transfer_params on another decode (R-SF-DECODE-RETRY). */
static int start_decode_only(pd_gw_t *gw, pd_rq_t *rq) {
  rq->sf_dw = 0;
  int rc = pd_sf_pick_decode(gw, rq);
  emit_attempt(gw, rq, (int32_t)rq->sf_pw - 1, rc ? -1 : (int32_t)rq->sf_dw - 1);
  if (rc) {
    rq->sf_reuse = 1; /* still fresh: the next attempt tries a decode again */
    return rc;
  }
  return pd_sf_open_decode(gw, rq) ? 0 : PD_ERR_NOMEM;
}

/* The toy proxy's request id (V1.1): a fresh uuid4 per client request, sent as X-Request-Id on
 * both legs in place of the client's headers. Drawn from the gateway's PRNG (version 4 and
 * the RFC 4122 variant set, as uuid4 has them), so a seed replays it. */
static void draw_request_id(pd_gw_t *gw, pd_rq_t *rq) {
  uint64_t hi = pd_prng_next(gw->rng), lo = pd_prng_next(gw->rng);
  hi = (hi & ~0xf000ull) | 0x4000ull;                 /* version 4 */
  lo = (lo & ~(3ull << 62)) | (2ull << 62);           /* variant 10 */
  snprintf(rq->sf_xrid, sizeof rq->sf_xrid, "%08x-%04x-%04x-%04x-%012llx",
           (unsigned)(hi >> 32), (unsigned)(hi >> 16 & 0xffff), (unsigned)(hi & 0xffff),
           (unsigned)(lo >> 48), (unsigned long long)(lo & 0xffffffffffffull));
}

int pd_sf_start_attempt(pd_gw_t *gw, pd_rq_t *rq) {
  if (gw->cfg.mode == PD_MODE_VLLM_TOY_PROXY && !rq->sf_xrid[0]) draw_request_id(gw, rq);
  rq->attempt++;
  int reuse = rq->sf_reuse && rq->sf_pw;
  rq->sf_reuse = 0;
  if (reuse) return start_decode_only(gw, rq);
  cJSON_Delete(rq->sf_params);
  rq->sf_params = NULL;
  rq->sf_pw = rq->sf_dw = 0;
  /* R-ADMIT-SF: no prefill for a request no decode could take now (its KV would wait in a
   * full decode's queue past its lease, V1.13): it waits at the gateway (not an attempt) */
  int is_admitting = pd_admit_is_on(gw);
  if (is_admitting && !rq->has_sf_slot && !pd_admit_pair_has_room(gw)) {
    rq->attempt--;
    return PD_ADMIT_WAIT;
  }
  int32_t pw = pd_gw_pick(gw, rq, PD_ROLE_PREFILL);
  if (pw == PD_PICK_WAIT) {
    rq->attempt--;
    return PD_ADMIT_WAIT;
  }
  /* Mooncake's proxy and llm-d's scheduler pick the pair at once; the toy proxy and the
   * reference pick decode when prefill has answered */
  int pair_now = gw->cfg.mode == PD_MODE_MOONCAKE_PROXY || gw->cfg.mode == PD_MODE_LLMD_SIDECAR;
  int no_decode = pw >= 0 && pair_now && pd_sf_pick_decode(gw, rq) != 0;
  if (pw < 0 || no_decode) {
    emit_attempt(gw, rq, pw, rq->sf_dw ? (int32_t)rq->sf_dw - 1 : -1);
    return 503;
  }
  size_t len = 0;
  const uint8_t *body = render(gw, rq, PD_ROLE_PREFILL, &len);
  if (!body) return PD_ERR_NOMEM;
  emit_attempt(gw, rq, pw, rq->sf_dw ? (int32_t)rq->sf_dw - 1 : -1);
  pd_leg_t *p = pd_gw_leg_new(gw, rq, PD_ROLE_PREFILL, (uint32_t)pw);
  if (!p) return PD_ERR_NOMEM;
  rq->sf_pw = (uint32_t)pw + 1;
  if (is_admitting && !rq->has_sf_slot) { /* R-ADMIT-SF: the decode slot is held from now */
    rq->has_sf_slot = 1;
    gw->sf_slots_held++;
  }
  guard_leg(gw, rq, p);
  pd_gw_open_leg(gw, rq, p, body, len);
  return 0;
}

int pd_sf_take_params(const pd_gw_t *gw, const pd_leg_t *p, void **params) {
  (void)gw;
  *params = NULL;
  cJSON *j = p->body.len ? cJSON_ParseWithLength((const char *)p->body.p, p->body.len) : NULL;
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return PD_ERR_JSON;
  }
  const cJSON *kv = cJSON_GetObjectItemCaseSensitive(j, "kv_transfer_params");
  int rc = 0;
  if (kv && !cJSON_IsNull(kv)) {
    *params = cJSON_Duplicate(kv, 1);
    if (!*params) rc = PD_ERR_NOMEM;
  }
  cJSON_Delete(j);
  return rc;
}

int pd_sf_is_truthy(const void *json) {
  const cJSON *v = json;
  if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return 0;
  if (cJSON_IsNumber(v)) return v->valuedouble != 0;
  if (cJSON_IsString(v)) return v->valuestring && v->valuestring[0];
  if (cJSON_IsArray(v) || cJSON_IsObject(v)) return v->child != NULL;
  return 1;
}

void pd_sf_set_params(pd_rq_t *rq, void *params) {
  cJSON_Delete(rq->sf_params);
  rq->sf_params = params;
}

void *pd_sf_mooncake_params(const pd_gw_t *gw, const pd_rq_t *rq) {
  assert(rq->sf_pw);
  const pd_worker_t *p = &gw->workers[PD_ROLE_PREFILL][rq->sf_pw - 1];
  cJSON *kv = cJSON_CreateObject();
  if (!kv) return NULL;
  int port = p->port < 0 ? PD_SF_MOONCAKE_BOOTSTRAP_PORT : p->port;
  if (!cJSON_AddBoolToObject(kv, "do_remote_decode", 0) ||
      !cJSON_AddBoolToObject(kv, "do_remote_prefill", 1) ||
      !cJSON_AddStringToObject(kv, "bootstrap_server_host", p->host) ||
      !cJSON_AddNumberToObject(kv, "bootstrap_server_port", port)) {
    cJSON_Delete(kv);
    return NULL;
  }
  return kv;
}
