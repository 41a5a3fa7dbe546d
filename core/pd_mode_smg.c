/* `joined` (smg HEAD) and `pr1150` (the seed): faithful models, bugs included. Rule numbers
 * refer to docs/upstream.md; every deviation is named in docs/spec.md. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <string.h>

#include "pd_err.h"
#include "pd_gw_int.h"
#include "pd_json.h"
#include "pd_merge.h"

static int is_2xx(int s) { return s >= 200 && s < 300; }

/* R1.41 non-stream decode mapping; a stream keeps the decode status. */
static int map_decode_status(int s, int is_stream) {
  if (is_stream) return s;
  return (s == 400 || s == 404 || s == 500 || s == 502 || s == 503) ? s : 500;
}

/* R1.35 prefill mapping. */
static int map_prefill_status(int s) {
  return (s == 400 || s == 404 || s == 500 || s == 502 || s == 503) ? s : 500;
}

/* R3.1/R3.2: the same client status recorded on both workers of the attempt; a failure iff
 * the status is in the retryable set. */
static void record_both(pd_gw_t *gw, pd_rq_t *rq, int status) {
  pd_outcome_t o = pd_retry_is_retryable_status(status) ? PD_OUTCOME_FAILURE : PD_OUTCOME_SUCCESS;
  for (int r = 0; r < 2; r++) {
    pd_leg_t *l = pd_gw_cur(rq, (pd_role_t)r);
    if (l) pd_gw_outcome(gw, rq, l, o, status);
  }
}

static void release_loads(pd_gw_t *gw, pd_rq_t *rq) {
  pd_gw_release_load(gw, rq, PD_ROLE_PREFILL);
  pd_gw_release_load(gw, rq, PD_ROLE_DECODE);
}

/* An attempt produced a non-success response. R2.4: retry iff the (mapped) status is
 * retryable and attempts remain; else it becomes the client's response. */
static void attempt_fail(pd_gw_t *gw, pd_rq_t *rq, int status, const char *code,
                         const char *msg, int is_sse_body) {
  record_both(gw, rq, status);
  pd_gw_close_all(gw, rq, 0); /* drop: a TCP close, never /abort_request (R1.31) */
  release_loads(gw, rq);
  if (pd_retry_is_retryable_status(status) && pd_gw_schedule_retry(gw, rq)) return;
  if (is_sse_body) { /* R1.41 stream: decode status, one SSE error frame, no [DONE] */
    pd_gw_client_head(gw, rq, status, 1);
    pd_gw_sse_error(gw, rq, status, msg);
    pd_gw_client_end(gw, rq, 0);
  } else {
    pd_gw_client_error(gw, rq, status, code, msg);
  }
}

/* chunk_contains_done_event (R1.39): "data: [DONE]" at a line start followed by a blank
 * line, within this one chunk. */
static int chunk_has_done(const uint8_t *p, size_t len) {
  static const char pat[] = "data: [DONE]";
  const size_t pl = sizeof pat - 1;
  for (size_t i = 0; i + pl <= len; i++) {
    if (memcmp(p + i, pat, pl) != 0) continue;
    if (i > 0 && p[i - 1] != '\n') continue;
    size_t j = i + pl;
    if (j + 2 <= len && p[j] == '\n' && p[j + 1] == '\n') return 1;
    if (j + 4 <= len && memcmp(p + j, "\r\n\r\n", 4) == 0) return 1;
  }
  return 0;
}

static void stream_end(pd_gw_t *gw, pd_rq_t *rq, int is_abort) {
  pd_gw_client_end(gw, rq, is_abort);
  release_loads(gw, rq); /* guards live in the body (R1.39, R3.12) */
}

static void relay(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *d, const uint8_t *p, size_t len) {
  char *merged = NULL;
  size_t mlen = 0;
  if (rq->prefill_lp_ready &&
      pd_merge_smg_chunk(gw->alloc, (const char *)rq->prefill_lp.p, rq->prefill_lp.len,
                         (const char *)p, len, &merged, &mlen) == 0) {
    pd_gw_client_data(gw, rq, merged, mlen);
    pd_free(gw->alloc, merged);
  } else {
    pd_gw_client_data(gw, rq, p, len);
  }
  if (chunk_has_done(p, len)) { /* forward, then stop reading upstream */
    pd_gw_close_leg(gw, rq, d, 0);
    stream_end(gw, rq, 0);
  }
}

/* R1.40: stream logprobs come from parsing the prefill body as ONE JSON document; SGLang's
 * stream prefill body is SSE, so this fails in practice (G9). */
static void take_prefill_logprobs(pd_gw_t *gw, pd_rq_t *rq, const pd_leg_t *p) {
  if (!rq->req.return_logprob || !p || !p->body.len) return;
  cJSON *j = cJSON_ParseWithLength((const char *)p->body.p, p->body.len);
  cJSON *mi = j ? cJSON_GetObjectItemCaseSensitive(j, "meta_info") : NULL;
  cJSON *lp = mi ? cJSON_GetObjectItemCaseSensitive(mi, "input_token_logprobs") : NULL;
  if (cJSON_IsArray(lp)) {
    char *s = pd_json_print(lp);
    if (s && pd_buf_append(gw->alloc, &rq->prefill_lp, s, strlen(s)) == 0)
      rq->prefill_lp_ready = 1;
    cJSON_free(s);
  }
  cJSON_Delete(j);
}

static void commit_stream(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  assert(d); /* decode is current until the response is over */
  record_both(gw, rq, d->status); /* R3.3: a stream's outcome is fixed at its head */
  pd_gw_client_head(gw, rq, d->status, 1);
  PD_RQ_SET(gw, rq, RQ_STREAM); /* commits */
  if (!rq->is_fast_path) {
    pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL);
    take_prefill_logprobs(gw, rq, p);
    if (p) pd_gw_close_leg(gw, rq, p, 0);
  }
  if (d->body.len) { /* bytes that arrived while we were draining prefill */
    pd_buf_t held = d->body;
    memset(&d->body, 0, sizeof d->body);
    relay(gw, rq, d, held.p, held.len);
    pd_buf_free(gw->alloc, &held);
    if (pd_rq_client_done(rq)) return;
  }
  if (d->state == LEG_ENDED) {
    pd_gw_drop_leg(gw, rq, d);
    stream_end(gw, rq, 0);
  } else if (d->state == LEG_FAILED) {
    pd_gw_drop_leg(gw, rq, d);
    stream_end(gw, rq, 1); /* R1.39: body aborts, no SSE error event */
  }
}

static void respond_nonstream(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  assert(d); /* decode is current until the response is over */
  pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL);
  int status = d->status;
  record_both(gw, rq, status);
  pd_gw_client_head(gw, rq, status, 0);
  char *merged = NULL;
  size_t mlen = 0;
  if (rq->req.return_logprob && p && p->body.len && d->body.len &&
      pd_merge_logprobs(gw->alloc, (const char *)p->body.p, p->body.len,
                        (const char *)d->body.p, d->body.len, &merged, &mlen) == 0) {
    pd_gw_client_data(gw, rq, merged, mlen); /* R1.38 */
    pd_free(gw->alloc, merged);
  } else {
    pd_gw_client_data(gw, rq, d->body.p, d->body.len); /* R1.37 */
  }
  pd_gw_client_end(gw, rq, 0);
  pd_gw_close_all(gw, rq, 0);
  release_loads(gw, rq);
}

/* Decode is 2xx and prefill fully read (or its read error ignored, R1.35). */
static void drain_done(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  assert(d); /* decode is current until the response is over */
  if (rq->req.is_stream) {
    commit_stream(gw, rq);
    return;
  }
  PD_RQ_SET(gw, rq, RQ_READ);
  if (d->state == LEG_ENDED) respond_nonstream(gw, rq);
  else if (d->state == LEG_FAILED)
    attempt_fail(gw, rq, 500, "read_response_failed", "decode body read failed", 0);
}

static void both_heads(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL);
  pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  assert(p && d); /* both heads are in: both legs are current */
  if (!is_2xx(d->status)) { /* R1.34: decode checked first, prefill dropped */
    attempt_fail(gw, rq, map_decode_status(d->status, rq->req.is_stream), "decode_error",
                 "decode server returned an error", rq->req.is_stream);
    return;
  }
  if (!is_2xx(p->status)) { /* R1.35 */
    attempt_fail(gw, rq, map_prefill_status(p->status), "prefill_error",
                 "Prefill server error", 0);
    return;
  }
  PD_RQ_SET(gw, rq, RQ_DRAIN);
  if (p->state == LEG_ENDED || p->state == LEG_FAILED) drain_done(gw, rq);
}

static void smg_on_start(pd_gw_t *gw, pd_rq_t *rq) {
  PD_RQ_SET(gw, rq, RQ_HEADS);
  if (rq->is_fast_path) { /* pr1150: prefill spawned and forgotten */
    pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL);
    assert(p); /* just opened */
    p->is_detached = 1; /* still the attempt's prefill for outcome recording (R3.1) */
  }
}

/* After the client response ended (RQ_TAIL) only a detached prefill is left: every path that
 * ends the client closes or drops the other legs first. */
static void smg_on_head(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  assert(rq->state != RQ_TAIL || leg->is_detached);
  if (leg->is_detached || rq->state != RQ_HEADS) return; /* detached: status only logged */
  if (rq->is_fast_path) {
    if (leg->role != PD_ROLE_DECODE) return;
    if (!is_2xx(leg->status)) {
      attempt_fail(gw, rq, map_decode_status(leg->status, 1), "decode_error",
                   "decode server returned an error", 1);
      return;
    }
    commit_stream(gw, rq);
    return;
  }
  pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL), *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  if (p && d && p->status && d->status) both_heads(gw, rq);
}

static void smg_on_data(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *b, size_t n) {
  assert(rq->state != RQ_TAIL || leg->is_detached);
  if (leg->is_detached) return; /* drained and discarded */
  if (leg->role == PD_ROLE_DECODE && rq->state == RQ_STREAM) {
    relay(gw, rq, leg, b, n);
    return;
  }
  if (leg->role == PD_ROLE_DECODE && rq->state == RQ_GONE) {
    pd_gw_close_leg(gw, rq, leg, 0); /* G7: the relay notices the gone client only now */
    return;
  }
  if (pd_buf_append(gw->alloc, &leg->body, b, n) != 0 && !pd_rq_client_done(rq))
    attempt_fail(gw, rq, 500, "read_response_failed", "response too large", 0);
}

static void smg_on_end(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  assert(rq->state != RQ_TAIL || leg->is_detached);
  if (leg->is_detached || rq->state == RQ_GONE) {
    pd_gw_drop_leg(gw, rq, leg);
    return;
  }
  if (leg->role == PD_ROLE_PREFILL) {
    if (rq->state == RQ_DRAIN) drain_done(gw, rq);
    return;
  }
  if (rq->state == RQ_STREAM) { /* upstream ended (no [DONE] in a chunk): clean end */
    pd_gw_drop_leg(gw, rq, leg);
    stream_end(gw, rq, 0);
  } else if (rq->state == RQ_READ) {
    respond_nonstream(gw, rq);
  }
}

static void smg_on_error(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_upstream_error_t e) {
  (void)e;
  assert(rq->state != RQ_TAIL || leg->is_detached);
  if (leg->is_detached || rq->state == RQ_GONE) { /* logged only */
    pd_gw_drop_leg(gw, rq, leg);
    return;
  }
  switch (rq->state) {
  case RQ_HEADS:
    if (leg->status) return; /* head already joined: body errors surface later */
    if (rq->is_fast_path) {
      attempt_fail(gw, rq, 502, "decode_server_error", "Decode server error", 0);
    } else { /* R1.31/R1.33: try_join drops the other side; 502 for both */
      attempt_fail(gw, rq, 502, "PD disaggregation request failed", "Transport error", 0);
    }
    return;
  case RQ_DRAIN:
    if (leg->role == PD_ROLE_PREFILL) drain_done(gw, rq); /* R1.35: read error ignored */
    return;
  case RQ_READ:
    if (leg->role == PD_ROLE_DECODE)
      attempt_fail(gw, rq, 500, "read_response_failed", "decode body read failed", 0);
    return;
  case RQ_STREAM:
    if (leg->role == PD_ROLE_DECODE) {
      pd_gw_drop_leg(gw, rq, leg);
      stream_end(gw, rq, 1); /* R1.39: abort, no SSE error event */
    }
    return;
  default: return;
  }
}

static void smg_on_deadline(pd_gw_t *gw, pd_rq_t *rq, int which) {
  if (which == DL_BACKOFF && rq->state == RQ_BACKOFF) pd_gw_begin(gw, rq);
}

static void smg_on_client_gone(pd_gw_t *gw, pd_rq_t *rq) {
  release_loads(gw, rq); /* the body and its guards drop at once (R3.13) */
  rq->dl[DL_BACKOFF] = 0;
  /* the core moves to RQ_GONE next. G7: a streaming decode is closed only at its next chunk;
   * otherwise R3.14: the handler future is dropped, a detached prefill lives on */
  if (rq->state != RQ_STREAM) pd_gw_close_all(gw, rq, 0);
}

static void smg_on_no_pair(pd_gw_t *gw, pd_rq_t *rq, int status) {
  record_both(gw, rq, status);
  if (pd_gw_schedule_retry(gw, rq)) return; /* R1.9, R2.6: selection failures retried */
  pd_gw_client_error(gw, rq, status, "server_selection_failed", "No available servers");
}

const pd_mode_ops_t pd_mode_smg_ops = {smg_on_start, smg_on_head, smg_on_data, smg_on_end,
                                       smg_on_error, smg_on_deadline, smg_on_client_gone,
                                       smg_on_no_pair};
