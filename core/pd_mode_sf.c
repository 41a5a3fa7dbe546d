/* The vLLM-family proxies, source-first (docs/spec.md 7.4-7.6), each as its source behaves on
 * failure, bugs included: `vllm-toy-proxy` (vLLM's NIXL toy proxy, V1.1, V1.24),
 * `mooncake-proxy` (vLLM's Mooncake connector proxy, V1.25) and `llmd-sidecar` (llm-d's
 * routing sidecar with its NIXL v2 connector, V1.2, V1.27). None of them keeps a load, a
 * breaker, an outcome, a timeout or a retry; none posts an abort (vLLM has no abort that
 * frees prefill-held KV, V1.16). Bodies and the attempt start: pd_sf.c. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <string.h>

#include "pd_err.h"
#include "pd_gw_int.h"

static int is_2xx(int s) { return s >= 200 && s < 300; }

/* An exception escaped a FastAPI handler before its response started: Starlette's
 * ServerErrorMiddleware answers a bare 500 "Internal Server Error" (V1.24). */
static void bare_500(pd_gw_t *gw, pd_rq_t *rq) {
  static const char msg[] = "Internal Server Error";
  pd_gw_close_all(gw, rq, 0);
  if (pd_rq_client_done(rq)) return;
  pd_gw_client_head(gw, rq, 500, 0);
  pd_gw_client_data(gw, rq, msg, sizeof msg - 1);
  pd_gw_client_end(gw, rq, 0);
}

/* Decode's bytes after the client head, or its failure: relayed as they come; an error (a
 * raise_for_status inside the generator, a broken read) cuts the client body. */
static void decode_over(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *d, int is_clean) {
  if (d->state == LEG_OPEN || d->state == LEG_HEAD) pd_gw_close_leg(gw, rq, d, 0);
  else pd_gw_drop_leg(gw, rq, d);
  pd_gw_client_end(gw, rq, !is_clean);
}

/* Prefill's body is read whole before anything else happens (httpx post, Go buffer). */
static int prefill_append(pd_gw_t *gw, pd_leg_t *p, const uint8_t *b, size_t n) {
  return pd_buf_append(gw->alloc, &p->body, b, n);
}

/* ---------- vllm-toy-proxy (V1.24) ---------- */

/* Both legs carry the proxy's own uuid4 as X-Request-Id and none of the client's headers
 * (V1.1): pd_sf_start_attempt draws it, pd_gw_open_leg puts it on each leg's open action. */

static void toy_on_start(pd_gw_t *gw, pd_rq_t *rq) { PD_RQ_SET(gw, rq, RQ_PREFILL); }

/* Prefill answered (whole body read): raise_for_status, response.json(), then the decode
 * client is taken, the 200 head goes out (media type application/json even for a stream),
 * and the generator opens decode with the client's body plus prefill's parameters when they
 * are truthy (`if kv_transfer_params:`, V1.6-V1.7). */
static void toy_prefill_answered(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *p) {
  void *params = NULL;
  int bad = !is_2xx(p->status) || pd_sf_take_params(gw, p, &params) != 0;
  pd_gw_drop_leg(gw, rq, p);
  if (bad || !pd_sf_is_truthy(params)) { /* an empty {} or a null is not copied */
    cJSON_Delete(params);
    params = NULL;
  }
  pd_sf_set_params(rq, params);
  if (bad || pd_sf_pick_decode(gw, rq) != 0) {
    bare_500(gw, rq);
    return;
  }
  pd_gw_client_head(gw, rq, 200, 0);
  PD_RQ_SET(gw, rq, RQ_STREAM);
  if (!pd_sf_open_decode(gw, rq)) pd_gw_client_end(gw, rq, 1);
}

static void toy_on_head(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  if (leg->role == PD_ROLE_DECODE && rq->state == RQ_STREAM && !is_2xx(leg->status))
    decode_over(gw, rq, leg, 0); /* raise_for_status after the 200 head: a cut body */
}

static void toy_on_data(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *b, size_t n) {
  if (leg->role == PD_ROLE_PREFILL) {
    if (rq->state == RQ_PREFILL && prefill_append(gw, leg, b, n)) bare_500(gw, rq);
    return; /* a client gone: the handler still reads it, nobody looks */
  }
  if (rq->state == RQ_STREAM) pd_gw_client_data(gw, rq, b, n);
}

static void toy_on_end(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  if (leg->role == PD_ROLE_PREFILL && rq->state == RQ_PREFILL) toy_prefill_answered(gw, rq, leg);
  else if (leg->role == PD_ROLE_DECODE && rq->state == RQ_STREAM) decode_over(gw, rq, leg, 1);
  else pd_gw_drop_leg(gw, rq, leg);
}

static void toy_on_error(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_upstream_error_t e) {
  (void)e;
  if (leg->role == PD_ROLE_PREFILL && rq->state == RQ_PREFILL) {
    pd_gw_drop_leg(gw, rq, leg);
    bare_500(gw, rq); /* httpx raised: no retry, no other prefill */
  } else if (leg->role == PD_ROLE_DECODE && rq->state == RQ_STREAM) {
    decode_over(gw, rq, leg, 0);
  } else {
    pd_gw_drop_leg(gw, rq, leg);
  }
}

static void sf_no_deadline(pd_gw_t *gw, pd_rq_t *rq, int which) {
  (void)gw, (void)rq, (void)which; /* httpx timeout=None, Go: no per-leg timeout */
}

/* The handler is not cancelled while it awaits prefill: prefill runs to its end and decode is
 * never opened; a streaming decode is closed (the generator is cancelled). Nothing frees the
 * KV prefill pins for decode (V1.19, V1.24). */
static void toy_on_client_gone(pd_gw_t *gw, pd_rq_t *rq) {
  if (rq->state == RQ_STREAM) pd_gw_close_all(gw, rq, 0);
}

static void sf_no_pair_500(pd_gw_t *gw, pd_rq_t *rq, int status) {
  (void)status;
  bare_500(gw, rq); /* next() on an empty cycle raises */
}

const pd_mode_ops_t pd_mode_toy_ops = {toy_on_start,   toy_on_head,    toy_on_data,
                                       toy_on_end,     toy_on_error,   sf_no_deadline,
                                       toy_on_client_gone, sf_no_pair_500};

/* ---------- mooncake-proxy (V1.25) ---------- */

/* Prefill is a task never awaited: detached at once; decode is streamed at the same time with
 * do_remote_prefill and the prefiller's bootstrap address, after the 200 head. */
static void mc_on_start(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL);
  assert(p); /* just opened */
  p->is_detached = 1;
  PD_RQ_SET(gw, rq, RQ_HEADS);
  void *params = pd_sf_mooncake_params(gw, rq);
  pd_sf_set_params(rq, params);
  pd_gw_client_head(gw, rq, 200, 0);
  rq->is_committed = 1; /* StreamingResponse: the head goes before decode is contacted */
  if (!params || !pd_sf_open_decode(gw, rq)) pd_gw_client_end(gw, rq, 1);
}

static void mc_on_head(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  if (leg->is_detached || rq->state != RQ_HEADS) return; /* prefill's status is never read */
  if (!is_2xx(leg->status)) decode_over(gw, rq, leg, 0);
  else PD_RQ_SET(gw, rq, RQ_STREAM);
}

static void mc_on_data(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *b, size_t n) {
  if (!leg->is_detached && rq->state == RQ_STREAM) pd_gw_client_data(gw, rq, b, n);
}

static void mc_on_end(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  if (!leg->is_detached && rq->state == RQ_STREAM) decode_over(gw, rq, leg, 1);
  else pd_gw_drop_leg(gw, rq, leg); /* the orphan task ends; its result is lost */
}

static void mc_on_error(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_upstream_error_t e) {
  (void)e;
  if (!leg->is_detached && !pd_rq_client_done(rq)) decode_over(gw, rq, leg, 0);
  else pd_gw_drop_leg(gw, rq, leg); /* "Task exception was never retrieved" */
}

static void mc_on_client_gone(pd_gw_t *gw, pd_rq_t *rq) {
  pd_gw_close_all(gw, rq, 0); /* decode's stream closed; the prefill task lives on */
}

const pd_mode_ops_t pd_mode_mooncake_ops = {mc_on_start,  mc_on_head,        mc_on_data,
                                            mc_on_end,    mc_on_error,       sf_no_deadline,
                                            mc_on_client_gone, sf_no_pair_500};

/* ---------- llmd-sidecar (V1.2, V1.27) ---------- */

static void llmd_on_start(pd_gw_t *gw, pd_rq_t *rq) { PD_RQ_SET(gw, rq, RQ_PREFILL); }

/* Decode through httputil.ReverseProxy: its head, status and body pass through. */
static void llmd_open_decode(pd_gw_t *gw, pd_rq_t *rq, void *params) {
  pd_sf_set_params(rq, params);
  PD_RQ_SET(gw, rq, RQ_HEADS);
  if (!pd_sf_open_decode(gw, rq)) pd_gw_client_error(gw, rq, 500, "internal_error", "no memory");
}

/* Prefill's buffered answer: a 2xx is parsed and its kv_transfer_params (null when absent:
 * only logged) go to decode; 400-451 is passed through unchanged; any other status falls back
 * to decode alone with the client's body (shouldFallbackToDecode). */
static void llmd_prefill_answered(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *p) {
  int st = p->status;
  if (st >= 400 && st <= 451) {
    pd_gw_client_head(gw, rq, st, 0);
    pd_gw_client_data(gw, rq, p->body.p, p->body.len);
    pd_gw_drop_leg(gw, rq, p);
    pd_gw_client_end(gw, rq, 0);
    return;
  }
  if (!is_2xx(st)) {
    pd_gw_drop_leg(gw, rq, p);
    llmd_open_decode(gw, rq, NULL);
    return;
  }
  void *params = NULL;
  int rc = pd_sf_take_params(gw, p, &params);
  pd_gw_drop_leg(gw, rq, p);
  if (rc == PD_ERR_JSON) {
    pd_gw_client_error(gw, rq, 400, "invalid_json", "prefill answer is not a JSON object");
    return;
  }
  if (!params) params = cJSON_CreateNull(); /* the field is set to what prefill sent: nil */
  if (!params) {
    pd_gw_client_error(gw, rq, 500, "internal_error", "no memory");
    return;
  }
  llmd_open_decode(gw, rq, params);
}

static void llmd_on_head(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  if (leg->role != PD_ROLE_DECODE || rq->state != RQ_HEADS) return;
  pd_gw_client_head(gw, rq, leg->status, is_2xx(leg->status) && rq->req.is_stream);
  PD_RQ_SET(gw, rq, RQ_STREAM);
}

static void llmd_on_data(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *b, size_t n) {
  if (leg->role == PD_ROLE_PREFILL) {
    if (rq->state == RQ_PREFILL && prefill_append(gw, leg, b, n)) {
      pd_gw_close_leg(gw, rq, leg, 0);
      llmd_open_decode(gw, rq, NULL); /* the buffer broke: prefill failed, fall back */
    }
    return;
  }
  if (rq->state == RQ_STREAM) pd_gw_client_data(gw, rq, b, n);
}

static void llmd_on_end(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  if (leg->role == PD_ROLE_PREFILL && rq->state == RQ_PREFILL) llmd_prefill_answered(gw, rq, leg);
  else if (leg->role == PD_ROLE_DECODE && rq->state == RQ_STREAM) decode_over(gw, rq, leg, 1);
  else pd_gw_drop_leg(gw, rq, leg);
}

static void llmd_on_error(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_upstream_error_t e) {
  pd_role_t role = leg->role;
  pd_gw_drop_leg(gw, rq, leg);
  if (role == PD_ROLE_PREFILL && rq->state == RQ_PREFILL) {
    llmd_open_decode(gw, rq, NULL); /* a connection error falls back to decode alone */
  } else if (role == PD_ROLE_DECODE && rq->state == RQ_HEADS) { /* ErrorHandler */
    if (e == PD_UPSTREAM_ERROR_CONNECT)
      pd_gw_client_error(gw, rq, 503, "service_unavailable", "decoder service unavailable");
    else pd_gw_client_error(gw, rq, 502, "bad_gateway", "decoder proxy error");
  } else if (rq->state == RQ_STREAM) {
    pd_gw_client_end(gw, rq, 1); /* ReverseProxy aborts a started body */
  }
}

static void llmd_on_client_gone(pd_gw_t *gw, pd_rq_t *rq) {
  pd_gw_close_all(gw, rq, 0); /* the request context is cancelled: both legs close */
}

static void llmd_on_no_pair(pd_gw_t *gw, pd_rq_t *rq, int status) {
  pd_gw_client_error(gw, rq, status, "service_unavailable", "no endpoint");
}

const pd_mode_ops_t pd_mode_llmd_ops = {llmd_on_start, llmd_on_head,  llmd_on_data,
                                        llmd_on_end,   llmd_on_error, sf_no_deadline,
                                        llmd_on_client_gone, llmd_on_no_pair};
