/* `minilb`: SGLang's mini_lb (M8.1-M8.5; docs/spec.md 7.3 cites the source). A random pair,
 * both legs sent together, heads gathered, prefill status never checked, streams answered 200
 * before either worker is contacted, no retry, breaker or load. Legs close only when the
 * session closes. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <string.h>

#include "pd_err.h"
#include "pd_gw_int.h"
#include "pd_merge.h"

/* mini_lb looks at the body's own `return_logprob` key on every route, never at the OpenAI
 * routes' `logprobs` (M8.3, M8.4): a chat or completions request asking for logprobs is
 * proxied like any other. The stream path tests the value (`.get("return_logprob", False)`,
 * Python truthiness). */
static int lp_value(const pd_rq_t *rq) {
  const cJSON *k = cJSON_GetObjectItemCaseSensitive((const cJSON *)rq->req.json, "return_logprob");
  if (!k || cJSON_IsNull(k) || cJSON_IsFalse(k)) return 0;
  if (cJSON_IsNumber(k)) return k->valuedouble != 0;
  if (cJSON_IsString(k)) return k->valuestring && k->valuestring[0];
  if (cJSON_IsArray(k) || cJSON_IsObject(k)) return k->child != NULL;
  return 1;
}

/* Does the handler read prefill's body? Streams: the value is truthy; non-stream: the key is
 * present, whatever its value (`"return_logprob" in request`, M2). */
static int reads_prefill(const pd_rq_t *rq) {
  if (rq->req.is_stream) return lp_value(rq);
  return cJSON_GetObjectItemCaseSensitive((const cJSON *)rq->req.json, "return_logprob") != NULL;
}

/* Non-stream merge (M8.3): only when decode's JSON has meta_info.input_token_logprobs; then
 * prefill's must have it too (a KeyError otherwise). */
static int decode_has_lp(const pd_leg_t *d) {
  cJSON *j = d->body.len ? cJSON_ParseWithLength((const char *)d->body.p, d->body.len) : NULL;
  const cJSON *mi = j ? cJSON_GetObjectItemCaseSensitive(j, "meta_info") : NULL;
  int has = cJSON_IsObject(mi) && cJSON_GetObjectItemCaseSensitive(mi, "input_token_logprobs");
  cJSON_Delete(j);
  return has;
}

static void session_close(pd_gw_t *gw, pd_rq_t *rq) {
  pd_gw_close_all(gw, rq, 0); /* `async with ClientSession` exit: connections torn down */
}

/* An exception escaped the handler: FastAPI answers 500 before a response started; once
 * streaming, the response is aborted. */
static void raise_exception(pd_gw_t *gw, pd_rq_t *rq) {
  if (rq->is_committed) pd_gw_client_end(gw, rq, 1);
  else pd_gw_client_error(gw, rq, 500, "internal_error", "Internal Server Error");
  session_close(gw, rq);
}

/* M8.4 logprob stream, as mini_lb iterates `decode_response.content` (aiohttp yields lines):
 * a line starting with "data:" and not containing [DONE] is parsed ([5:]), prefill's
 * input_token_logprobs prepended and re-sent as "data: {json}\n\n"; other lines pass as they
 * are. A line that is not JSON or lacks meta_info.input_token_logprobs raises (orjson error,
 * KeyError), which aborts the stream. Returns 0 or an error (= the exception). */
static int merge_line(pd_gw_t *gw, pd_rq_t *rq, const uint8_t *p, size_t len) {
  int has_done = 0;
  for (size_t i = 0; i + 6 <= len; i++)
    if (memcmp(p + i, "[DONE]", 6) == 0) has_done = 1;
  if (len < 5 || memcmp(p, "data:", 5) != 0 || has_done) {
    pd_gw_client_data(gw, rq, p, len);
    return 0;
  }
  char *out = NULL;
  size_t olen = 0;
  int rc = pd_merge_logprobs(gw->alloc, (const char *)rq->prefill_lp.p, rq->prefill_lp.len,
                             (const char *)p + 5, len - 5, &out, &olen);
  if (rc) return rc;
  pd_gw_client_data(gw, rq, "data: ", 6);
  pd_gw_client_data(gw, rq, out, olen);
  pd_gw_client_data(gw, rq, "\n\n", 2);
  pd_free(gw->alloc, out);
  return 0;
}

/* Decode bytes on the stream path: raw chunks without logprobs (iter_chunked), lines with. */
static int forward_chunk(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *d, const uint8_t *p, size_t len,
                         int is_eof) {
  if (!lp_value(rq)) {
    pd_gw_client_data(gw, rq, p, len);
    return 0;
  }
  if (pd_buf_append(gw->alloc, &d->body, p, len)) return PD_ERR_TOO_LARGE;
  size_t start = 0;
  for (size_t i = 0; i < d->body.len; i++) {
    if (d->body.p[i] != '\n') continue;
    int rc = merge_line(gw, rq, d->body.p + start, i + 1 - start);
    if (rc) return rc;
    start = i + 1;
  }
  if (is_eof && start < d->body.len) { /* the last, unterminated line */
    int rc = merge_line(gw, rq, d->body.p + start, d->body.len - start);
    if (rc) return rc;
    start = d->body.len;
  }
  memmove(d->body.p, d->body.p + start, d->body.len - start);
  d->body.len -= start;
  return 0;
}

static void start_stream(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  assert(d); /* decode is current until the response is over */
  PD_RQ_SET(gw, rq, RQ_STREAM);
  if (d->body.len) {
    pd_buf_t held = d->body;
    memset(&d->body, 0, sizeof d->body);
    int rc = forward_chunk(gw, rq, d, held.p, held.len, d->state == LEG_ENDED);
    pd_buf_free(gw->alloc, &held);
    if (rc) {
      raise_exception(gw, rq);
      return;
    }
  }
  if (d->state == LEG_ENDED) {
    pd_gw_client_end(gw, rq, 0);
    session_close(gw, rq);
  } else if (d->state == LEG_FAILED) {
    raise_exception(gw, rq);
  }
}

/* Prefill's first line, "data:" stripped ([5:]), parsed; it must carry
 * meta_info.input_token_logprobs (else IndexError / KeyError). Non-stream: the JSON body. */
static int take_prefill_logprobs(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *p) {
  const uint8_t *b = p->body.p;
  size_t n = p->body.len;
  if (rq->req.is_stream) {
    size_t eol = 0;
    while (eol < n && b[eol] != '\n') eol++;
    if (eol < 5) return PD_ERR_NOT_FOUND;
    b += 5;
    n = eol - 5;
  }
  cJSON *j = n ? cJSON_ParseWithLength((const char *)b, n) : NULL;
  cJSON *mi = j ? cJSON_GetObjectItemCaseSensitive(j, "meta_info") : NULL;
  int ok = cJSON_IsArray(mi ? cJSON_GetObjectItemCaseSensitive(mi, "input_token_logprobs") : NULL);
  cJSON_Delete(j);
  if (!ok) return PD_ERR_NOT_FOUND;
  rq->prefill_lp.len = 0;
  if (pd_buf_append(gw->alloc, &rq->prefill_lp, b, n)) return PD_ERR_NOMEM;
  rq->prefill_lp_ready = 1;
  return 0;
}

/* `await prefill_response.json()`: the body must be JSON, or the handler raises. */
static int body_is_json(const pd_buf_t *b) {
  cJSON *j = b->len ? cJSON_ParseWithLength((const char *)b->p, b->len) : NULL;
  int ok = j != NULL;
  cJSON_Delete(j);
  return ok;
}

static void respond_nonstream(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL), *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  assert(d); /* decode is current until the response is over */
  if (reads_prefill(rq)) { /* M2: even for "return_logprob": false */
    if (!p || p->state == LEG_FAILED) { /* prefill_response.json() raised */
      raise_exception(gw, rq);
      return;
    }
    if (p->state != LEG_ENDED) return; /* awaiting prefill json */
    if (!body_is_json(&p->body)) {
      raise_exception(gw, rq);
      return;
    }
  }
  char *merged = NULL;
  size_t mlen = 0;
  if (reads_prefill(rq) && decode_has_lp(d) &&
      (take_prefill_logprobs(gw, rq, p) ||
       pd_merge_logprobs(gw->alloc, (const char *)p->body.p, p->body.len,
                         (const char *)d->body.p, d->body.len, &merged, &mlen))) {
    raise_exception(gw, rq);
    return;
  }
  pd_gw_client_head(gw, rq, d->status, 0); /* decode's status (M8.3) */
  if (merged) {
    pd_gw_client_data(gw, rq, merged, mlen);
    pd_free(gw->alloc, merged);
  } else {
    pd_gw_client_data(gw, rq, d->body.p, d->body.len);
  }
  pd_gw_client_end(gw, rq, 0);
  session_close(gw, rq);
}

static void heads_gathered(pd_gw_t *gw, pd_rq_t *rq) {
  if (!rq->req.is_stream) {
    PD_RQ_SET(gw, rq, RQ_READ);
    pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
    assert(d); /* decode is current until the response is over */
    if (d->state == LEG_ENDED) respond_nonstream(gw, rq);
    return;
  }
  if (lp_value(rq)) {
    pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL);
    PD_RQ_SET(gw, rq, RQ_DRAIN); /* all prefill chunks read first */
    if (p && p->state == LEG_ENDED) {
      if (take_prefill_logprobs(gw, rq, p)) raise_exception(gw, rq);
      else start_stream(gw, rq);
    }
    return;
  }
  start_stream(gw, rq);
}

/* M1: a stream handler returns its StreamingResponse at once; the 200 event-stream head goes
 * out before the generator contacts either worker (M8.4: 200 whatever decode says), so any
 * later exception can only cut the stream. */
static void mlb_on_start(pd_gw_t *gw, pd_rq_t *rq) {
  PD_RQ_SET(gw, rq, RQ_HEADS);
  if (!rq->req.is_stream) return;
  pd_gw_client_head(gw, rq, 200, 1);
  rq->is_committed = 1; /* before RQ_STREAM: the head goes out before either worker answers */
}

/* Every path that ends the client closes the session too: no leg event comes after it. */
static void mlb_on_head(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  (void)leg;
  assert(!pd_rq_client_done(rq));
  pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL), *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  if (rq->state == RQ_HEADS && p && d && p->status && d->status) heads_gathered(gw, rq);
}

static void mlb_on_data(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *b, size_t n) {
  assert(!pd_rq_client_done(rq));
  if (leg->role == PD_ROLE_PREFILL) {
    if (!reads_prefill(rq)) return; /* never read */
    if (pd_buf_append(gw->alloc, &leg->body, b, n)) raise_exception(gw, rq);
    return;
  }
  if (rq->state == RQ_STREAM) {
    if (forward_chunk(gw, rq, leg, b, n, 0)) raise_exception(gw, rq);
    return;
  }
  if (pd_buf_append(gw->alloc, &leg->body, b, n)) raise_exception(gw, rq);
}

static void mlb_on_end(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  assert(!pd_rq_client_done(rq));
  if (leg->role == PD_ROLE_PREFILL) {
    if (rq->state == RQ_DRAIN) {
      if (take_prefill_logprobs(gw, rq, leg)) raise_exception(gw, rq);
      else start_stream(gw, rq);
    } else if (rq->state == RQ_READ) {
      respond_nonstream(gw, rq);
    }
    return;
  }
  if (rq->state == RQ_STREAM) {
    if (lp_value(rq) && leg->body.len && forward_chunk(gw, rq, leg, NULL, 0, 1)) {
      raise_exception(gw, rq);
      return;
    }
    pd_gw_client_end(gw, rq, 0);
    session_close(gw, rq);
  } else if (rq->state == RQ_READ) {
    respond_nonstream(gw, rq);
  }
}

static void mlb_on_error(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_upstream_error_t e) {
  (void)e;
  assert(!pd_rq_client_done(rq));
  if (rq->state == RQ_HEADS && leg->status) return; /* body error surfaces when read */
  if (leg->role == PD_ROLE_PREFILL && !reads_prefill(rq) && rq->state != RQ_HEADS) {
    pd_gw_drop_leg(gw, rq, leg); /* an unread prefill: nobody notices */
    return;
  }
  if (rq->state == RQ_DRAIN && leg->role == PD_ROLE_DECODE) return; /* read later */
  raise_exception(gw, rq); /* e.g. `await prefill_response.json()` raised (M8.3) */
}

static void mlb_on_deadline(pd_gw_t *gw, pd_rq_t *rq, int which) {
  (void)gw;
  (void)rq;
  (void)which; /* mini_lb has only the per-session total, handled as a leg error */
}

static void mlb_on_client_gone(pd_gw_t *gw, pd_rq_t *rq) {
  session_close(gw, rq); /* generator cancelled; session closed; no abort */
}

static void mlb_on_no_pair(pd_gw_t *gw, pd_rq_t *rq, int status) {
  (void)status;
  pd_gw_client_error(gw, rq, 500, "internal_error", "no prefill or decode server");
}

const pd_mode_ops_t pd_mode_minilb_ops = {mlb_on_start, mlb_on_head, mlb_on_data, mlb_on_end,
                                          mlb_on_error, mlb_on_deadline, mlb_on_client_gone,
                                          mlb_on_no_pair};
