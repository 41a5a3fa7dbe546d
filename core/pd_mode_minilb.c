/* `minilb`: SGLang's mini_lb (M8.1-M8.5). A random pair, both legs sent together, heads
 * gathered, prefill status never checked, streams answered 200 whatever decode says, no
 * retry, breaker or load. Legs close only when the session closes. */
#include <cjson/cJSON.h>
#include <string.h>

#include "pd_err.h"
#include "pd_gw_int.h"
#include "pd_merge.h"

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

/* M8.4 logprob stream: each decode chunk starting with "data:" and not containing [DONE]
 * is parsed as one JSON value, prefill's input_token_logprobs prepended, and re-serialised.
 * A chunk that is not one JSON value raises (orjson.loads), aborting the stream. */
static int forward_chunk(pd_gw_t *gw, pd_rq_t *rq, const uint8_t *p, size_t len) {
  int is_data = len >= 5 && memcmp(p, "data:", 5) == 0;
  int has_done = 0;
  for (size_t i = 0; i + 6 <= len; i++)
    if (memcmp(p + i, "[DONE]", 6) == 0) has_done = 1;
  if (!rq->req.return_logprob || !rq->prefill_lp_ready || !is_data || has_done) {
    pd_gw_client_data(gw, rq, p, len);
    return 0;
  }
  char *out = NULL;
  size_t olen = 0;
  int rc = pd_merge_smg_chunk(gw->alloc, (const char *)rq->prefill_lp.p, rq->prefill_lp.len,
                              (const char *)p, len, &out, &olen);
  if (rc != 0) return rc;
  pd_gw_client_data(gw, rq, out, olen);
  pd_free(gw->alloc, out);
  return 0;
}

static void start_stream(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  rq->state = RQ_STREAM;
  if (d->body.len) {
    pd_buf_t held = d->body;
    memset(&d->body, 0, sizeof d->body);
    int rc = forward_chunk(gw, rq, held.p, held.len);
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

/* Prefill's first chunk, "data:" stripped ([5:]), parsed as JSON (M8.4). */
static void take_first_chunk_logprobs(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *p) {
  size_t first = p->events; /* length of the first chunk, stored by on_data */
  if (first <= 5 || first > p->body.len) return;
  cJSON *j = cJSON_ParseWithLength((const char *)p->body.p + 5, first - 5);
  cJSON *mi = j ? cJSON_GetObjectItemCaseSensitive(j, "meta_info") : NULL;
  cJSON *lp = mi ? cJSON_GetObjectItemCaseSensitive(mi, "input_token_logprobs") : NULL;
  if (cJSON_IsArray(lp)) {
    char *s = cJSON_PrintUnformatted(lp);
    if (s && pd_buf_append(gw->alloc, &rq->prefill_lp, s, strlen(s)) == 0)
      rq->prefill_lp_ready = 1;
    cJSON_free(s);
  }
  cJSON_Delete(j);
}

static void respond_nonstream(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL), *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  if (rq->req.return_logprob && p && p->state != LEG_ENDED) return; /* awaiting prefill json */
  pd_gw_client_head(gw, rq, d->status, 0); /* decode's status (M8.3) */
  char *merged = NULL;
  size_t mlen = 0;
  if (rq->req.return_logprob && p &&
      pd_merge_logprobs(gw->alloc, (const char *)p->body.p, p->body.len,
                        (const char *)d->body.p, d->body.len, &merged, &mlen) == 0) {
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
    rq->state = RQ_READ;
    pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
    if (d->state == LEG_ENDED) respond_nonstream(gw, rq);
    return;
  }
  pd_gw_client_head(gw, rq, 200, 1); /* M8.4: 200 whatever the decode status */
  rq->is_committed = 1;
  if (rq->req.return_logprob) {
    pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL);
    rq->state = RQ_DRAIN; /* all prefill chunks read first */
    if (p && p->state == LEG_ENDED) {
      take_first_chunk_logprobs(gw, rq, p);
      start_stream(gw, rq);
    }
    return;
  }
  start_stream(gw, rq);
}

static void mlb_on_start(pd_gw_t *gw, pd_rq_t *rq) {
  (void)gw;
  rq->state = RQ_HEADS;
}

static void mlb_on_head(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  (void)leg;
  pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL), *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  if (rq->state == RQ_HEADS && p && d && p->status && d->status) heads_gathered(gw, rq);
}

static void mlb_on_data(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *b, size_t n) {
  if (leg->role == PD_ROLE_PREFILL) {
    if (!rq->req.return_logprob) return; /* never read */
    if (!leg->body.len) leg->events = (uint32_t)n; /* first chunk's length */
    if (pd_buf_append(gw->alloc, &leg->body, b, n)) raise_exception(gw, rq);
    return;
  }
  if (rq->state == RQ_STREAM) {
    if (forward_chunk(gw, rq, b, n)) raise_exception(gw, rq);
    return;
  }
  if (pd_buf_append(gw->alloc, &leg->body, b, n)) raise_exception(gw, rq);
}

static void mlb_on_end(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  if (leg->role == PD_ROLE_PREFILL) {
    if (rq->state == RQ_DRAIN) {
      take_first_chunk_logprobs(gw, rq, leg);
      start_stream(gw, rq);
    } else if (rq->state == RQ_READ) {
      respond_nonstream(gw, rq);
    }
    return;
  }
  if (rq->state == RQ_STREAM) {
    pd_gw_client_end(gw, rq, 0);
    session_close(gw, rq);
  } else if (rq->state == RQ_READ) {
    respond_nonstream(gw, rq);
  }
}

static void mlb_on_error(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_uperr_t e) {
  (void)e;
  if (rq->state == RQ_HEADS && leg->status) return; /* body error surfaces when read */
  if (leg->role == PD_ROLE_PREFILL && !rq->req.return_logprob && rq->state != RQ_HEADS) {
    pd_gw_drop_leg(gw, rq, leg); /* an unread prefill: nobody notices */
    return;
  }
  if (rq->state == RQ_DRAIN && leg->role == PD_ROLE_DECODE) return; /* read later */
  raise_exception(gw, rq);
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
