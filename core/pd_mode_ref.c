/* `reference`: pdref's dispatch rules (docs/spec.md R-*). Decode is streamed from its first
 * event; nothing is committed before it, so every failure of either leg cancels both (close
 * + /abort_request) and retries on a fresh pair; after commit prefill stays supervised and
 * each worker gets exactly one honest outcome per attempt from its own leg. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "pd_err.h"
#include "pd_gw_int.h"
#include "pd_merge.h"

static int is_2xx(int s) { return s >= 200 && s < 300; }

static const char done_frame[] = "data: [DONE]\n\n";

static void respond_nonstream(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *d);

static void exclude(pd_rq_t *rq, const pd_leg_t *leg) {
  rq->excluded[leg->role][leg->worker / 8] |= (uint8_t)(1u << (leg->worker % 8));
}

/* A leg that is over, successfully: record, release its role's load (R-LOAD), forget it. */
static void leg_succeeded(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  pd_gw_outcome(gw, rq, leg, PD_OUTCOME_SUCCESS, leg->status);
  pd_gw_release_load(gw, rq, leg->role);
  if (leg->state == LEG_ENDED) pd_gw_drop_leg(gw, rq, leg);
}

/* The outcome of a leg's own HTTP-level result (R-OUTCOME): 0 or 2xx success; a 4xx other
 * than 408/429 is the worker's answer (success); 504 timeout; everything else failure. */
static pd_outcome_t status_outcome(int status) {
  if (status == 0 || is_2xx(status)) return PD_OUTCOME_SUCCESS;
  if (status == 504) return PD_OUTCOME_TIMEOUT;
  int retry = status == 502 || pd_retry_is_retryable_status(status);
  return status >= 400 && status < 500 && !retry ? PD_OUTCOME_SUCCESS : PD_OUTCOME_FAILURE;
}

/* Give a leg up (R-CANCEL): its load goes now, but it is closed only at the end of this
 * instant (DL_SETTLE), so a failure it reports in the same instant as the failure that ended
 * the attempt is recorded and excluded as its own (R-OUTCOME, R-RETRY-EXCLUDE), not hidden
 * under `cancelled`. A leg already judged, or over, is closed at once. */
static void leg_doom(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  leg->is_collect = 0;
  if (leg->is_doomed) return;
  if (!leg->is_drain) pd_gw_release_load(gw, rq, leg->role); /* a drain holds none */
  if (leg->has_outcome || leg->state == LEG_ENDED || leg->state == LEG_FAILED) {
    pd_gw_outcome(gw, rq, leg, PD_OUTCOME_CANCELLED, 0);
    pd_gw_close_leg(gw, rq, leg, 1);
    return;
  }
  leg->is_doomed = 1;
  leg->deadline_ns = 0;
  if (rq->cur_id[leg->role] == leg->id) rq->cur_id[leg->role] = 0;
  if (!rq->is_settle_due) rq->settle_at = gw->now + gw->cfg.settle_ns;
  rq->is_settle_due = 1;
  rq->settle_seq = gw->feed_seq;
}

/* Give up every leg of the request that is not given up already. */
static void doom_all(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *snap[PD_MAX_LEGS];
  uint32_t n = rq->n_legs;
  memcpy(snap, rq->legs, n * sizeof *snap);
  for (uint32_t i = 0; i < n; i++) leg_doom(gw, rq, snap[i]);
}

/* A given-up leg reported its own result in the instant it was given up: record it, exclude
 * a failed worker, close it. */
static void doomed_result(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, int status) {
  pd_outcome_t o = status_outcome(status);
  if (o == PD_OUTCOME_FAILURE || o == PD_OUTCOME_TIMEOUT) exclude(rq, leg);
  pd_gw_outcome(gw, rq, leg, o, status);
  pd_gw_close_leg(gw, rq, leg, 1);
}

/* The end of the instant: what did not report is cancelled (neutral) and closed with an
 * abort. Loads were released when the legs were given up. */
static void settle(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *snap[PD_MAX_LEGS];
  uint32_t n = rq->n_legs;
  memcpy(snap, rq->legs, n * sizeof *snap);
  for (uint32_t i = 0; i < n; i++) {
    if (!snap[i]->is_doomed) continue;
    pd_gw_outcome(gw, rq, snap[i], PD_OUTCOME_CANCELLED, 0);
    pd_gw_close_leg(gw, rq, snap[i], 1);
  }
}

static uint32_t live_legs(const pd_rq_t *rq) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < rq->n_legs; i++) n += !rq->legs[i]->is_doomed;
  return n;
}

/* R-RETRY-BUDGET: the retry budget refused a retry: the last failure's status (R-STATUS), with
 * the budget named in the body. */
static void budget_error(pd_gw_t *gw, pd_rq_t *rq, int status, const char *what) {
  char m[200];
  snprintf(m, sizeof m, "retry budget exhausted (retry_budget_pct %u, retry_budget_min %u); %s",
           gw->cfg.retry_budget_pct, gw->cfg.retry_budget_min, what ? what : "");
  pd_gw_client_error(gw, rq, status, "retry_budget_exhausted", m);
}

/* R-FAIL-PRECOMMIT: `bad` failed (NULL: the first-token deadline, every open leg timed
 * out). Give up the other leg, exclude the failed worker(s), retry or answer with the
 * preserved status (R-STATUS). */
static void fail_attempt(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *bad, pd_outcome_t o, int status,
                         int is_retryable, const char *code, const char *msg) {
  assert(!pd_rq_client_done(rq) && !rq->is_committed); /* after either, no attempt fails */
  int any_suspect = 0;
  pd_leg_t *snap[PD_MAX_LEGS];
  uint32_t n = 0;
  for (uint32_t i = 0; i < rq->n_legs; i++) {
    if (rq->legs[i]->is_doomed) continue;
    any_suspect |= rq->legs[i]->is_suspect;
    snap[n++] = rq->legs[i];
  }
  for (uint32_t i = 0; i < n; i++) {
    pd_leg_t *l = snap[i];
    int blamed = l == bad ||
                 (!bad && !l->has_outcome && !l->is_drain && (l->is_suspect || !any_suspect));
    if (blamed && o != PD_OUTCOME_CANCELLED) {
      if (o != PD_OUTCOME_SUCCESS) exclude(rq, l);
      pd_gw_outcome(gw, rq, l, o, status);
      pd_gw_release_load(gw, rq, l->role);
      pd_gw_close_leg(gw, rq, l, 1);
    } else {
      /* R-RETRY-EXCLUDE: a partner that had not finished may be why the blamed leg failed
       * (a prefill that never sent the KV times decode out): the next attempt prefers a worker
       * the request has not tried, and comes back to this one only when none is eligible */
      if (!l->has_outcome && !l->is_drain) exclude(rq, l);
      leg_doom(gw, rq, l);
    }
  }
  PD_RQ_SET(gw, rq, RQ_BACKOFF); /* clears the attempt's deadlines */
  rq->last_status = status;      /* what the client gets if no later attempt can start */
  rq->is_last_status_worker = rq->is_status_from_head;
  rq->is_status_from_head = 0;
  if (is_retryable && !pd_gw_retry_budget_allows(gw, rq)) { /* R-RETRY-BUDGET: the worker's
                                                                 status, at once */
    budget_error(gw, rq, status, msg);
    return;
  }
  if (is_retryable && pd_gw_schedule_retry(gw, rq)) {
    pd_gw_retry_budget_spend(gw);
    return;
  }
  pd_gw_client_error(gw, rq, status, code, msg);
}

/* R-OWN-FAILURE: the gateway could not keep a leg's bytes (out of memory). That is its own
 * failure, not the worker's: nothing is blamed (the leg is recorded neutral and closed with an
 * abort); before commit the client gets 500 internal_error and nothing is retried, after
 * commit decode's stream ends visibly (R-FAIL-POSTCOMMIT) and a prefill leg just goes. */
static void fail_stream(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *d, pd_outcome_t o, int status,
                        const char *msg, int forward_own_event);
static void own_failure(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const char *msg) {
  if (rq->is_committed && leg->role == PD_ROLE_DECODE && !leg->is_doomed &&
      !pd_rq_client_done(rq)) {
    fail_stream(gw, rq, leg, PD_OUTCOME_CANCELLED, 500, msg, 0);
    return;
  }
  /* the leg's bytes are lost, so its answer can no longer be read: it goes at once */
  int was_doomed = leg->is_doomed;
  if (!leg->is_drain && !was_doomed) pd_gw_release_load(gw, rq, leg->role);
  pd_gw_outcome(gw, rq, leg, PD_OUTCOME_CANCELLED, 0);
  pd_gw_close_leg(gw, rq, leg, 1); /* may free leg */
  if (!was_doomed && !rq->is_committed && !pd_rq_client_done(rq))
    fail_attempt(gw, rq, NULL, PD_OUTCOME_CANCELLED, 500, 0, "internal_error", msg);
}

/* Status and retryability of a leg's failure (R-STATUS): HTTP statuses are preserved,
 * transport errors are 502, timeouts 504. */
static void fail_leg(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, int status, const char *msg) {
  char m[160];
  snprintf(m, sizeof m, "%s leg (%s): %s", pd_role_name(leg->role),
           gw->workers[leg->role][leg->worker].name, msg);
  int retry = status == 502 || status == 504 || pd_retry_is_retryable_status(status);
  /* A 4xx the worker chose (bad request, not found, ...) is an answer, not a fault: the
   * worker is healthy, the client gets the status, nothing is retried (R-OUTCOME, R3.2). */
  pd_outcome_t o = status_outcome(status);
  fail_attempt(gw, rq, leg, o, status, retry,
               leg->role == PD_ROLE_PREFILL ? "prefill_failed" : "decode_failed", m);
}

/* After commit only decode can end the stream early (R-FAIL-POSTCOMMIT): SSE error event,
 * then [DONE] as SGLang writes it (W6.3); prefill, if still open, is cancelled. */
static void fail_stream(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *d, pd_outcome_t o, int status,
                        const char *msg, int forward_own_event) {
  if (!forward_own_event && gw->cfg.seeded_bug != PD_BUG_CLEAN_END_ON_FAILURE)
    pd_gw_sse_error(gw, rq, status, msg);
  pd_gw_client_data(gw, rq, done_frame, sizeof done_frame - 1);
  pd_gw_client_end(gw, rq, 0);
  pd_gw_outcome(gw, rq, d, o, status);
  pd_gw_release_load(gw, rq, PD_ROLE_DECODE);
  pd_gw_close_leg(gw, rq, d, 1);
  pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL);
  if (p) leg_doom(gw, rq, p);
}

/* A non-stream answer must be a JSON object without an "error" member. */
static int body_is_answer(const pd_buf_t *b) {
  cJSON *j = b->len ? cJSON_ParseWithLength((const char *)b->p, b->len) : NULL;
  int ok = cJSON_IsObject(j) && !cJSON_GetObjectItemCaseSensitive(j, "error");
  cJSON_Delete(j);
  return ok;
}

/* A leg failed on its own after commit (a prefill whose KV decode already used): record it
 * against that worker alone, release its load, close it; the stream goes on. */
static void leg_failed_alone(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_outcome_t o, int status) {
  pd_gw_outcome(gw, rq, leg, o, status);
  pd_gw_release_load(gw, rq, leg->role);
  pd_gw_close_leg(gw, rq, leg, 1); /* only a leg still open gets a close and an abort */
}

/* R-FAIL-PRECOMMIT, "prefill lost": a stream prefill whose response broke (read error, reset,
 * no [DONE]) after its 200 head may have sent the KV already: SGLang's prefill transfers it
 * when its forward pass ends, and the response path breaking says nothing about that. When
 * decode is up (its 200 head came) and no logprobs wait on prefill, the prefill fails alone
 * (recorded, excluded, closed with an abort) and decode gets the tail budget to show its first
 * event; it commits as usual, else the attempt fails without blaming decode. */
static int prefill_lost(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *p, int status) {
  if (!rq->req.is_stream || rq->req.return_logprob || p->role != PD_ROLE_PREFILL ||
      p->state == LEG_OPEN || !is_2xx(p->status) || !gw->cfg.prefill_tail_timeout_ns)
    return 0;
  pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  if (!d || d->has_outcome || d->state == LEG_OPEN || !is_2xx(d->status)) return 0;
  exclude(rq, p);
  leg_failed_alone(gw, rq, p, PD_OUTCOME_FAILURE, status);
  PD_RQ_SET(gw, rq, RQ_PREFILL_LOST); /* decode gets the tail budget for its first event */
  return 1;
}

/* A leg's answer turned out bad (truncated stream, non-JSON body): before commit the attempt
 * fails; after it, decode ends the stream visibly and prefill fails alone. */
static void bad_answer(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const char *msg) {
  if (!rq->is_committed && prefill_lost(gw, rq, leg, 502)) return;
  if (!rq->is_committed) fail_leg(gw, rq, leg, 502, msg);
  else if (leg->role == PD_ROLE_DECODE) fail_stream(gw, rq, leg, PD_OUTCOME_FAILURE, 502, msg, 0);
  else leg_failed_alone(gw, rq, leg, PD_OUTCOME_FAILURE, 502);
}

static int error_event_status(const char *data, size_t len) {
  int st = 502;
  cJSON *j = cJSON_ParseWithLength(data, len);
  cJSON *e = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
  cJSON *c = e ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
  if (cJSON_IsNumber(c) && c->valuedouble >= 400 && c->valuedouble < 600) st = (int)c->valuedouble;
  cJSON_Delete(j);
  return st;
}

/* Prefill's logprobs read once for every event they merge into (prefill_lp is set once). */
static pd_merge_prefill_t *prefill_read(pd_rq_t *rq) {
  if (!rq->has_lp_read)
    pd_merge_prefill_init(&rq->lp_read, (const char *)rq->prefill_lp.p, rq->prefill_lp.len);
  rq->has_lp_read = 1;
  return &rq->lp_read;
}

/* Forward a decode event; the first one commits (R-COMMIT). Every event that carries
 * input_token_logprobs gets prefill's prepended, exactly once (R-LOGPROB). */
static void commit_stream(pd_gw_t *gw, pd_rq_t *rq) {
  if (rq->is_committed) return;
  pd_gw_client_head(gw, rq, 200, 1);
  rq->t_commit_ns = gw->now;
  PD_RQ_SET(gw, rq, RQ_STREAM); /* commits */
  rq->dl[DL_COMMIT] = 0; /* R-PROGRESS: from here idle supervises the stream */
}

static int forward_event(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *d, const pd_sse_event_t *ev) {
  commit_stream(gw, rq);
  char *m = NULL;
  size_t ml = 0;
  if (rq->req.return_logprob && rq->prefill_lp_ready && pd_merge_may_carry(ev->data, ev->len)) {
    int rc = pd_merge_logprobs_with(gw->alloc, prefill_read(rq), ev->data, ev->len, &m, &ml);
    if (rc == 0) {
      pd_gw_client_data(gw, rq, "data: ", 6);
      pd_gw_client_data(gw, rq, m, ml);
      pd_gw_client_data(gw, rq, "\n\n", 2);
      pd_free(gw->alloc, m);
      return 0;
    }
    if (rc == PD_ERR_NOMEM) { /* R-LOGPROB: never decode's logprobs unmerged as if merged; the
                                 gateway's own failure, so decode is not blamed */
      fail_stream(gw, rq, d, PD_OUTCOME_CANCELLED, 500, "out of memory merging logprobs", 0);
      return 1;
    }
  }
  pd_gw_client_data(gw, rq, ev->raw, ev->raw_len);
  if (gw->cfg.seeded_bug == PD_BUG_REPEAT_FIRST_EVENT && rq->t_commit_ns == gw->now &&
      !rq->is_bug_repeated) {
    rq->is_bug_repeated = 1;
    pd_gw_client_data(gw, rq, ev->raw, ev->raw_len);
  }
  return 0;
}

static int needs_prefill_first(pd_rq_t *rq) {
  return rq->req.return_logprob && pd_gw_cur(rq, PD_ROLE_PREFILL) != NULL;
}

static void decode_events(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *d) {
  pd_sse_event_t ev;
  for (uint32_t guard = 0; guard < 1u << 20; guard++) {
    int rc = pd_sse_next(&d->sse, &ev);
    if (rc == PD_ERR_NOMEM) {
      own_failure(gw, rq, d, "out of memory reading the stream");
      return;
    }
    if (rc < 0) {
      bad_answer(gw, rq, d, "malformed event stream");
      return;
    }
    if (rc == 0) return;
    if (ev.kind == PD_SSE_ERROR) {
      int st = error_event_status(ev.data, ev.len);
      if (!rq->is_committed && d->events == 0 && gw->cfg.protocol == PD_PROTOCOL_VLLM)
        rq->sf_read_failed = 1; /* R-SF-KV-DRAIN: before any token: its read failed (V1.22) */
      if (!rq->is_committed) {
        fail_leg(gw, rq, d, st, "error event before the first token");
      } else {
        pd_gw_client_data(gw, rq, ev.raw, ev.raw_len);
        fail_stream(gw, rq, d, PD_OUTCOME_FAILURE, st, NULL, 1);
      }
      return;
    }
    if (ev.kind == PD_SSE_DONE) {
      d->saw_done = 1;
      /* [DONE] with no token: nothing to say, unless the client asked for none (R-ZERO-TOKENS) */
      if (!rq->is_committed && d->body.len == 0 && !rq->req.is_zero_tokens) {
        fail_leg(gw, rq, d, 502, "stream ended without a token");
        return;
      }
      if (!rq->is_committed && (d->body.len || needs_prefill_first(rq))) {
        if (pd_buf_append(gw->alloc, &d->body, ev.raw, ev.raw_len)) /* the end: wait for prefill */
          own_failure(gw, rq, d, "out of memory holding decode's end");
        return;
      }
      commit_stream(gw, rq); /* R-ZERO-TOKENS: the end is the whole answer */
      pd_gw_client_data(gw, rq, ev.raw, ev.raw_len);
      pd_gw_client_end(gw, rq, 0);
      leg_succeeded(gw, rq, d);
      return;
    }
    d->events++;
    rq->dl[DL_FIRST] = 0;
    if (gw->cfg.idle_timeout_ns && !rq->is_client_blocked)
      rq->dl[DL_IDLE] = gw->now + gw->cfg.idle_timeout_ns;
    if (!rq->is_committed && needs_prefill_first(rq)) { /* R-LOGPROB: hold until merged */
      int arc = pd_buf_append(gw->alloc, &d->body, ev.raw, ev.raw_len);
      if (arc == PD_ERR_NOMEM) own_failure(gw, rq, d, "out of memory holding decode's events");
      else if (arc) fail_leg(gw, rq, d, 502, "held events exceed the buffer");
      if (arc || rq->n_legs == 0 || !pd_gw_cur(rq, PD_ROLE_DECODE)) return; /* d may be gone */
      continue;
    }
    if (forward_event(gw, rq, d, &ev)) return;
  }
}

/* Replay decode events held while waiting for prefill's logprobs. */
static void flush_held(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  if (!d || !d->body.len) return;
  pd_buf_t held = d->body;
  memset(&d->body, 0, sizeof d->body);
  pd_sse_t tmp;
  pd_sse_init(&tmp, gw->alloc);
  pd_sse_event_t ev;
  int rc = pd_sse_feed(&tmp, held.p, held.len);
  for (uint32_t guard = 0; guard < 1u << 20 && rc == 0 && (rc = pd_sse_next(&tmp, &ev)) == 1;
       guard++) {
    rc = 0;
    if (ev.kind == PD_SSE_DONE) {
      commit_stream(gw, rq); /* R-ZERO-TOKENS: no event came before the end */
      pd_gw_client_data(gw, rq, ev.raw, ev.raw_len);
      pd_gw_client_end(gw, rq, 0);
      leg_succeeded(gw, rq, d);
      break;
    }
    if (forward_event(gw, rq, d, &ev)) break;
  }
  if (rc == PD_ERR_NOMEM) own_failure(gw, rq, d, "out of memory replaying decode's events");
  pd_sse_free(&tmp);
  pd_buf_free(gw->alloc, &held);
}

/* Prefill finished well: keep its logprobs, record it, release its load (R-LOAD). */
static void prefill_done(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *p) {
  if (rq->req.return_logprob && !rq->prefill_lp_ready && p->body.len) {
    if (pd_buf_append(gw->alloc, &rq->prefill_lp, p->body.p, p->body.len)) {
      leg_succeeded(gw, rq, p); /* prefill did its part; the gateway lost it (R-OWN-FAILURE) */
      if (!rq->is_committed && !pd_rq_client_done(rq))
        fail_attempt(gw, rq, NULL, PD_OUTCOME_CANCELLED, 500, 0, "internal_error",
                     "out of memory keeping prefill's logprobs");
      return;
    }
    rq->prefill_lp_ready = 1;
  }
  leg_succeeded(gw, rq, p);
  if (!rq->req.is_stream) {
    rq->dl[DL_FIRST] = 0;
    pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
    if (d && d->state == LEG_ENDED) respond_nonstream(gw, rq, d);
    else if (d && !rq->is_committed && gw->cfg.idle_timeout_ns) /* R-PROGRESS: decode has the
      KV and generates; its answer is its only sign of progress, after the work asked */
      rq->dl[DL_IDLE] = gw->now + gw->cfg.idle_timeout_ns + pd_gw_work_allowance_ns(gw, rq);
  } else if (!rq->is_committed) {
    flush_held(gw, rq);
  }
}

static void prefill_events(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *p) {
  pd_sse_event_t ev;
  for (uint32_t guard = 0; guard < 1u << 20; guard++) {
    int rc = pd_sse_next(&p->sse, &ev);
    if (rc == 0) return;
    if (rc == PD_ERR_NOMEM) {
      own_failure(gw, rq, p, "out of memory reading the stream");
      return;
    }
    if (rc < 0 || ev.kind == PD_SSE_ERROR) { /* G10: an error inside a 200 prefill stream */
      int st = rc < 0 ? 502 : error_event_status(ev.data, ev.len);
      if (!rq->is_committed) fail_leg(gw, rq, p, st, "prefill error event");
      else leg_failed_alone(gw, rq, p, PD_OUTCOME_FAILURE, st);
      return;
    }
    if (ev.kind == PD_SSE_DONE) p->saw_done = 1;
    else if (rq->req.return_logprob && !p->body.len &&
             pd_buf_append(gw->alloc, &p->body, ev.data, ev.len)) { /* first event's JSON */
      own_failure(gw, rq, p, "out of memory keeping prefill's logprobs");
      return;
    }
  }
}

static void respond_nonstream(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *d) {
  if (needs_prefill_first(rq)) return; /* wait for prefill's logprobs */
  char *m = NULL;
  size_t ml = 0;
  int rc = !rq->req.return_logprob || !rq->prefill_lp_ready
               ? PD_ERR_NOT_FOUND
               : pd_merge_logprobs(gw->alloc, (const char *)rq->prefill_lp.p, rq->prefill_lp.len,
                                   (const char *)d->body.p, d->body.len, &m, &ml);
  if (rc == PD_ERR_NOMEM) { /* R-OWN-FAILURE: never decode's logprobs unmerged as if merged */
    leg_succeeded(gw, rq, d);
    fail_attempt(gw, rq, NULL, PD_OUTCOME_CANCELLED, 500, 0, "internal_error",
                 "out of memory merging logprobs");
    return;
  }
  pd_gw_client_head(gw, rq, d->status, 0);
  rq->is_committed = 1;
  pd_admit_committed(gw, rq);
  if (rc == 0) {
    pd_gw_client_data(gw, rq, m, ml);
    pd_free(gw->alloc, m);
  } else {
    pd_gw_client_data(gw, rq, d->body.p, d->body.len);
  }
  pd_gw_client_end(gw, rq, 0);
  leg_succeeded(gw, rq, d);
}

/* A given-up leg's data: only its own failure (an error event, broken framing) or its end
 * ([DONE]) matter; tokens are not forwarded. */
static void doomed_data(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *b, size_t n) {
  if (!rq->req.is_stream) {
    int rc = pd_buf_append(gw->alloc, &leg->body, b, n);
    if (rc == PD_ERR_NOMEM) own_failure(gw, rq, leg, "out of memory");
    else if (rc) doomed_result(gw, rq, leg, 502);
    return;
  }
  if (leg->saw_done) return;
  int frc = pd_sse_feed(&leg->sse, b, n);
  if (frc) {
    if (frc == PD_ERR_NOMEM) own_failure(gw, rq, leg, "out of memory");
    else doomed_result(gw, rq, leg, 502);
    return;
  }
  pd_sse_event_t ev;
  for (uint32_t guard = 0; guard < 1u << 20; guard++) {
    int rc = pd_sse_next(&leg->sse, &ev);
    if (rc == 0) return;
    if (rc == PD_ERR_NOMEM) {
      own_failure(gw, rq, leg, "out of memory");
      return;
    }
    if (rc < 0 || ev.kind == PD_SSE_ERROR) {
      doomed_result(gw, rq, leg, rc < 0 ? 502 : error_event_status(ev.data, ev.len));
      return;
    }
    if (ev.kind == PD_SSE_DONE) leg->saw_done = 1;
  }
}

/* A given-up leg ended in its last instant: a clean answer is its success, else failure. */
static void doomed_end(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  int ok = rq->req.is_stream ? leg->saw_done : body_is_answer(&leg->body);
  doomed_result(gw, rq, leg, ok ? 0 : 502);
}

/* Entering RQ_FIRST arms the first-token and head deadlines (R-TIMEOUT, pd_rqstate.c). */
/* R-ABORT-COMMITTED: the client left while prefill (declared to ignore aborts after its KV
 * commit) may have committed its KV to the open decode leg. Both stay open, their bytes read
 * and dropped, until the KV reached decode: decode's first data event, or either leg's end or
 * failure (judged as a given-up leg's own result); then the rest is given up (R-CANCEL). The
 * tail deadline (R-TAIL, armed once the client is done) bounds it. */
static void collect_over(pd_gw_t *gw, pd_rq_t *rq) {
  for (uint32_t i = 0; i < rq->n_legs; i++) rq->legs[i]->is_collect = 0;
  doom_all(gw, rq);
}

int pd_ref_collect_event(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, int kind, int status) {
  if (!leg->is_collect) return 0;
  if (kind == 0 && is_2xx(status)) return 1; /* a head: the leg goes on */
  if (kind == 1 && leg->role == PD_ROLE_PREFILL) return 1; /* prefill's bytes: dropped */
  if (kind >= 2 || kind == 0) { /* its end, failure or error status: its own result */
    leg->is_collect = 0;
    doomed_result(gw, rq, leg, status);
  }
  collect_over(gw, rq); /* decode's data: the KV reached it */
  return 1;
}

/* Should the legs of rq be collected rather than cut now? Decode is open (a receiver), prefill
 * `p` runs on a worker declared to ignore aborts after commit and has not ended. */
static int should_collect(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *p, pd_leg_t *d) {
  if (!p || !d || p->has_outcome || d->has_outcome || p->is_doomed || d->is_doomed) return 0;
  if (p->state == LEG_ENDED || p->state == LEG_FAILED || d->state == LEG_ENDED ||
      d->state == LEG_FAILED || !gw->cfg.prefill_tail_timeout_ns)
    return 0;
  (void)rq;
  return gw->workers[PD_ROLE_PREFILL][p->worker].is_abort_ignored;
}

int pd_gw_set_worker_abort_ignored(pd_gw_t *gw, uint32_t w, int is_ignored) {
  if (!gw || w >= gw->n_workers[PD_ROLE_PREFILL]) return PD_ERR_INVAL;
  gw->workers[PD_ROLE_PREFILL][w].is_abort_ignored = !!is_ignored;
  return 0;
}

static void ref_on_start(pd_gw_t *gw, pd_rq_t *rq) { PD_RQ_SET(gw, rq, RQ_FIRST); }

static void ref_on_head(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  leg->deadline_ns = 0; /* the head came */
  if (pd_ref_collect_event(gw, rq, leg, 0, leg->status)) return;
  if (is_2xx(leg->status)) return;
  if (leg->is_doomed) {
    doomed_result(gw, rq, leg, leg->status);
    return;
  }
  if (!rq->is_committed) {
    rq->is_status_from_head = 1; /* the worker's own status, a 504 too (R-ADMIT-SHED) */
    fail_leg(gw, rq, leg, leg->status, "error status");
  } else if (leg->role == PD_ROLE_PREFILL) { /* after commit: prefill's own failure */
    leg_failed_alone(gw, rq, leg, PD_OUTCOME_FAILURE, leg->status);
  }
}

static void ref_on_data(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *b, size_t n) {
  if (pd_ref_collect_event(gw, rq, leg, 1, 0)) return;
  if (leg->is_doomed) {
    doomed_data(gw, rq, leg, b, n);
    return;
  }
  if (rq->req.is_stream && !leg->saw_done) {
    int rc = pd_sse_feed(&leg->sse, b, n);
    if (rc == PD_ERR_NOMEM) {
      own_failure(gw, rq, leg, "out of memory reading the stream");
      return;
    }
    if (rc) {
      bad_answer(gw, rq, leg, "event too large");
      return;
    }
    if (leg->role == PD_ROLE_DECODE) decode_events(gw, rq, leg);
    else prefill_events(gw, rq, leg);
    return;
  }
  if (rq->req.is_stream) return;
  int rc = pd_buf_append(gw->alloc, &leg->body, b, n);
  if (rc == PD_ERR_NOMEM) own_failure(gw, rq, leg, "out of memory reading the answer");
  else if (rc) bad_answer(gw, rq, leg, "response too large");
}

static void ref_on_end(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  if (pd_ref_collect_event(gw, rq, leg, 2, is_2xx(leg->status) ? 0 : leg->status)) return;
  if (leg->has_outcome) { /* decode after [DONE], or a recorded leg: just forget it */
    pd_gw_drop_leg(gw, rq, leg);
    return;
  }
  if (leg->is_doomed) {
    doomed_end(gw, rq, leg);
    return;
  }
  if (rq->req.is_stream && (!leg->saw_done || leg->saw_error_event)) {
    bad_answer(gw, rq, leg, "stream ended without [DONE]");
    return;
  }
  if (!rq->req.is_stream && !body_is_answer(&leg->body)) {
    bad_answer(gw, rq, leg, "response body is not a JSON answer");
    return;
  }
  if (leg->role == PD_ROLE_PREFILL) {
    prefill_done(gw, rq, leg);
    return;
  }
  /* decode finished well: its outcome is known now, even if the client still waits for
   * prefill's logprobs (R-OUTCOME) */
  pd_gw_outcome(gw, rq, leg, PD_OUTCOME_SUCCESS, leg->status);
  pd_gw_release_load(gw, rq, PD_ROLE_DECODE);
  if (!rq->req.is_stream) respond_nonstream(gw, rq, leg);
}

static void ref_on_error(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_upstream_error_t e) {
  int st = e == PD_UPSTREAM_ERROR_TIMEOUT ? 504 : 502;
  const char *what = e == PD_UPSTREAM_ERROR_CONNECT ? "connect failed"
                     : e == PD_UPSTREAM_ERROR_TIMEOUT ? "timed out"
                     : e == PD_UPSTREAM_ERROR_RESET ? "connection reset" : "body read failed";
  if (pd_ref_collect_event(gw, rq, leg, 3, st)) return;
  if (leg->has_outcome) { /* after its own success ([DONE] seen): nothing lost */
    pd_gw_drop_leg(gw, rq, leg);
    return;
  }
  if (leg->is_doomed) {
    doomed_result(gw, rq, leg, st);
    return;
  }
  if (!rq->is_committed && e == PD_UPSTREAM_ERROR_TIMEOUT) { /* a head deadline: every leg whose
                                                       head is overdue stalled, not just this */
    for (uint32_t i = 0; i < rq->n_legs; i++) {
      pd_leg_t *l = rq->legs[i];
      l->is_suspect = l == leg || (l->state == LEG_OPEN && l->deadline_ns && l->deadline_ns <= gw->now);
    }
    fail_attempt(gw, rq, NULL, PD_OUTCOME_TIMEOUT, 504, 1, "timeout", "no response head in time");
  } else if (!rq->is_committed) {
    if ((e == PD_UPSTREAM_ERROR_READ || e == PD_UPSTREAM_ERROR_RESET) &&
        prefill_lost(gw, rq, leg, st))
      return;
    fail_leg(gw, rq, leg, st, what);
  } else if (leg->role == PD_ROLE_DECODE) {
    fail_stream(gw, rq, leg, st == 504 ? PD_OUTCOME_TIMEOUT : PD_OUTCOME_FAILURE, st, what, 0);
  } else {
    leg_failed_alone(gw, rq, leg, st == 504 ? PD_OUTCOME_TIMEOUT : PD_OUTCOME_FAILURE, st);
  }
}

/* How far a leg got that its partner may not have (R-OUTCOME, "who was only waiting"): 2 a
 * decode that sent events (held for prefill's logprobs: it has the KV and waits on prefill),
 * 1 a stream leg with its head (SGLang sends a stream's head at once, S5.3), 0 nothing seen. */
static int leg_progress(const pd_rq_t *rq, const pd_leg_t *l) {
  if (l->role == PD_ROLE_DECODE && l->events) return 2;
  return rq->req.is_stream && l->state != LEG_OPEN ? 1 : 0;
}

/* Who is to blame when nothing came in time? The legs without an outcome that got least far
 * stalled; the others were only waiting on them (cancelled, not timed out). When they all got
 * equally far, nothing the gateway sees tells the stalled leg from the waiting one — a stream
 * whose legs both sent their heads (SGLang sends them at once, S5.3: a decode that never joins
 * the room and a prefill waiting for it look alike), or a non-stream request where neither
 * answered (its head waits for the answer): returns 0, ambiguous (see Q3).
 * Returns 1 when the suspects (is_suspect, or every open leg when none is marked) are known. */
static int mark_suspects(pd_rq_t *rq) {
  uint32_t open = 0;
  int lo = 3, hi = -1;
  for (uint32_t i = 0; i < rq->n_legs; i++) {
    pd_leg_t *l = rq->legs[i];
    l->is_suspect = 0;
    if (l->has_outcome || l->is_doomed || l->is_drain) continue;
    open++;
    int g = leg_progress(rq, l);
    lo = g < lo ? g : lo;
    hi = g > hi ? g : hi;
  }
  if (open > 1 && lo == hi) return 0;
  for (uint32_t i = 0; i < rq->n_legs; i++) {
    pd_leg_t *l = rq->legs[i];
    l->is_suspect = open > 1 && !l->has_outcome && !l->is_doomed && !l->is_drain &&
                    leg_progress(rq, l) == lo;
  }
  return 1;
}

/* PD_BUG_BLAME_PARTNER: every open leg of the attempt is a suspect, whoever stalled. */
static int suspect_all(pd_rq_t *rq) {
  for (uint32_t i = 0; i < rq->n_legs; i++) {
    pd_leg_t *l = rq->legs[i];
    l->is_suspect = !l->has_outcome && !l->is_doomed && !l->is_drain;
  }
  return 1;
}

/* R-PROGRESS: the total cap does not cut a committed stream that keeps a healthy pace: at
 * least one event per token_budget_ns on average since commit, with the idle budget's slack.
 * While it does, the cap moves to where that pace puts it (it fires again, at most once per
 * event); a stream that falls behind is cut there, one that stalls by idle first. */
static int total_moves_on(pd_gw_t *gw, pd_rq_t *rq, const pd_leg_t *d) {
  uint64_t per = gw->cfg.token_budget_ns;
  if (!rq->req.is_stream || !per || !rq->is_committed) return 0;
  uint64_t earned = d->events > PD_MAX_ALLOWANCE_NS / per ? PD_MAX_ALLOWANCE_NS : d->events * per;
  uint64_t until = rq->t_commit_ns + gw->cfg.idle_timeout_ns + earned;
  if (until <= gw->now) return 0;
  rq->dl[DL_TOTAL] = until;
  return 1;
}

static void ref_on_deadline(pd_gw_t *gw, pd_rq_t *rq, int which) {
  switch (which) {
  case DL_SETTLE:
    settle(gw, rq);
    return;
  case DL_BACKOFF:
    if (live_legs(rq) < rq->n_legs) { /* the last attempt's legs are settled first (0 means none) */
      uint64_t at = rq->settle_at > gw->now ? rq->settle_at : gw->now;
      rq->dl[DL_BACKOFF] = at ? at : 1;
      return;
    }
    if (rq->state == RQ_BACKOFF) pd_gw_begin(gw, rq); /* not once the client is done */
    return;
  case DL_COMMIT:
    if (rq->is_committed) return; /* cleared at commit; before it, as the total deadline */
    /* fall through */
  case DL_FIRST:
  case DL_IDLE:
  case DL_TOTAL:
    if (which == DL_TOTAL && !rq->is_committed && !rq->req.is_stream && rq->state == RQ_FIRST &&
        rq->dl[DL_IDLE] > gw->now) { /* R-PROGRESS: decode has the KV and is inside the budget
      its length earned (idle + work allowance from prefill's answer): the cap waits for it */
      rq->dl[DL_TOTAL] = rq->dl[DL_IDLE];
      return;
    }
    if (!rq->is_committed) {
      if (rq->state == RQ_BACKOFF || !live_legs(rq)) { /* in backoff when the total deadline
                                                            passed */
        pd_gw_client_error(gw, rq, 504, "timeout",
                           which == DL_COMMIT ? "no response within the commit budget"
                                              : "request deadline exceeded");
        return;
      }
      if (which == DL_FIRST && rq->state == RQ_PREFILL_LOST) { /* decode never got the KV */
        fail_attempt(gw, rq, NULL, PD_OUTCOME_CANCELLED, 502, 1, "prefill_failed",
                     "prefill leg failed and decode produced nothing without it");
        return;
      }
      int is_known = gw->cfg.seeded_bug == PD_BUG_BLAME_PARTNER ? suspect_all(rq) : mark_suspects(rq);
      /* The request's own budget (total, commit) running out blames no worker: cancelled, not
       * timeout (R-OUTCOME); the first-token and idle deadlines are the workers' (timeout),
       * when the gateway can tell which legs stalled. When it cannot (a non-stream attempt
       * where neither leg answered), none is charged: each is recorded cancelled (and, not
       * finished, excluded from the retry by fail_attempt), so a hung decode does not get its
       * healthy prefill ejected. */
      int is_budget = which == DL_TOTAL || which == DL_COMMIT;
      fail_attempt(gw, rq, NULL,
                   is_budget || !is_known ? PD_OUTCOME_CANCELLED : PD_OUTCOME_TIMEOUT, 504,
                   !is_budget, "timeout",
                   which == DL_TOTAL    ? "request deadline exceeded"
                   : which == DL_COMMIT ? "no response within the commit budget"
                   : which == DL_IDLE   ? "decode made no progress in time"
                                        : "no first token in time");
    } else {
      pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
      if (d && which == DL_TOTAL && total_moves_on(gw, rq, d)) return;
      if (d)
        fail_stream(gw, rq, d, which == DL_TOTAL ? PD_OUTCOME_CANCELLED : PD_OUTCOME_TIMEOUT, 504,
                    which == DL_TOTAL ? "request deadline exceeded" : "decode stalled", 0);
    }
    return;
  case DL_QUEUE: /* R-ADMIT-QUEUE: still waiting for room at its queue deadline */
    pd_admit_deadline(gw, rq);
    return;
  case DL_TAIL: /* supervised legs outlived the client response: the KV already reached
                   decode, so a late prefill answer is cut without blame (R-TAIL) */
    doom_all(gw, rq);
    return;
  default: return;
  }
}

/* The client left: every leg is given up (R-CANCEL), except c1 and c2 (either may be NULL),
 * kept to collect the KV (R-ABORT-COMMITTED). */
void pd_ref_client_gone(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *c1, pd_leg_t *c2) {
  for (int i = 0; i < DL_COUNT; i++) rq->dl[i] = 0;
  if (c1 || c2) {
    if (c1) c1->is_collect = 1;
    if (c2) c2->is_collect = 1;
    pd_leg_t *snap[PD_MAX_LEGS];
    uint32_t n = rq->n_legs;
    memcpy(snap, rq->legs, n * sizeof *snap);
    for (uint32_t i = 0; i < n; i++)
      if (!snap[i]->is_collect) leg_doom(gw, rq, snap[i]);
  } else {
    doom_all(gw, rq); /* closed at the end of this instant (arms DL_SETTLE again) */
  }
  pd_gw_release_load(gw, rq, PD_ROLE_PREFILL);
  pd_gw_release_load(gw, rq, PD_ROLE_DECODE);
}

static void ref_on_client_gone(pd_gw_t *gw, pd_rq_t *rq) {
  pd_leg_t *p = pd_gw_cur(rq, PD_ROLE_PREFILL), *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  int c = should_collect(gw, rq, p, d);
  pd_ref_client_gone(gw, rq, c ? p : NULL, c ? d : NULL);
}

static void ref_on_no_pair(pd_gw_t *gw, pd_rq_t *rq, int status) {
  if (pd_gw_schedule_retry(gw, rq)) return; /* a retry of selection: no worker load, no budget */
  if (rq->last_status) /* R-STATUS: the last worker failure, not the selector's 503 */
    pd_gw_client_error(gw, rq, rq->last_status, "attempts_exhausted",
                       "every attempt failed; no pair left to try");
  else
    pd_gw_client_error(gw, rq, status, "no_available_workers",
                       "no compatible prefill/decode pair available (circuits open, or no "
                       "transfer group with both roles)");
}

const pd_mode_ops_t pd_mode_ref_ops = {ref_on_start, ref_on_head, ref_on_data, ref_on_end,
                                       ref_on_error, ref_on_deadline, ref_on_client_gone,
                                       ref_on_no_pair};

/* Pieces the source-first reference (pd_mode_sfref.c) shares with this one. */
void pd_ref_fail_leg(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, int status, const char *msg) {
  fail_leg(gw, rq, leg, status, msg);
}

void pd_ref_own_failure(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const char *msg) {
  own_failure(gw, rq, leg, msg);
}

void pd_ref_doomed_result(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, int status) {
  doomed_result(gw, rq, leg, status);
}

void pd_ref_leg_doom(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) { leg_doom(gw, rq, leg); }

void pd_ref_leg_succeeded(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  leg_succeeded(gw, rq, leg);
}
