/* `reference` with protocol vllm: pdref's rules for source-first (docs/spec.md R-SF-*). Prefill
 * is sent alone (V1.1's body) and read whole; its kv_transfer_params go verbatim to a decode
 * chosen then (V1.7). Everything from decode's leg on is the reference's own code
 * (pd_mode_ref.c): commit at decode's first event, failures before it fail the attempt and are
 * retried, outcomes per worker from its own leg. What source-first adds: a decode that never
 * reached its worker is retried on another decode with the same parameters while they are
 * fresh (R-SF-DECODE-RETRY); any other decode failure redoes prefill. No leg is closed with
 * /abort_request (vLLM has none that frees prefill's KV, V1.16): closing prefill's connection
 * aborts it and frees its blocks (V1.20), closing decode's before it reads lets decode notify
 * prefill to free them (V1.17). */
#include <assert.h>
#include <cjson/cJSON.h>
#include <string.h>

#include "pd_err.h"
#include "pd_gw_int.h"

static const pd_mode_ops_t *const ref = &pd_mode_ref_ops;

static int is_2xx(int s) { return s >= 200 && s < 300; }

static void sfr_on_start(pd_gw_t *gw, pd_rq_t *rq) {
  PD_RQ_SET(gw, rq, pd_gw_cur(rq, PD_ROLE_PREFILL) ? RQ_PREFILL : RQ_FIRST);
  if (rq->state == RQ_FIRST && !rq->req.is_stream) { /* R-PROGRESS, as after prefill below */
    rq->dl[DL_FIRST] = 0;
    if (gw->cfg.idle_timeout_ns)
      rq->dl[DL_IDLE] = gw->now + gw->cfg.idle_timeout_ns + pd_gw_work_allowance_ns(gw, rq);
  }
}

/* R-SF-PARAMS: prefill answered well. Its outcome and load are its own (R-OUTCOME, R-LOAD);
 * its kv_transfer_params (none when null: decode computes the prompt itself, V1.6) go to a
 * decode chosen now. */
static void prefill_answered(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *p) {
  void *params = NULL;
  int rc = pd_sf_take_params(gw, p, &params);
  if (rc == PD_ERR_JSON) {
    pd_ref_fail_leg(gw, rq, p, 502, "prefill answer is not a JSON object");
    return;
  }
  if (gw->cfg.seeded_bug == PD_BUG_FOREIGN_KV && params) { /* the defect: the decode gets the
                                                             previous request's parameters */
    cJSON *mine = params;
    params = gw->bug_kv_params ? gw->bug_kv_params : cJSON_Duplicate(mine, 1);
    gw->bug_kv_params = mine;
  }
  pd_sf_set_params(rq, params);
  rq->sf_params_at = gw->now;
  pd_ref_leg_succeeded(gw, rq, p);
  if (pd_sf_pick_decode(gw, rq) != 0) { /* no decode admitted: the parameters wait */
    rq->sf_reuse = 1;
    ref->on_no_pair(gw, rq, 503);
    return;
  }
  if (!pd_sf_open_decode(gw, rq)) {
    pd_gw_client_error(gw, rq, 500, "internal_error", "no memory for the decode leg");
    return;
  }
  PD_RQ_SET(gw, rq, RQ_FIRST); /* first-token (and a stream's head) deadlines for decode */
  if (!rq->req.is_stream) { /* R-PROGRESS: a non-stream decode shows nothing until done */
    rq->dl[DL_FIRST] = 0;
    if (gw->cfg.idle_timeout_ns)
      rq->dl[DL_IDLE] = gw->now + gw->cfg.idle_timeout_ns + pd_gw_work_allowance_ns(gw, rq);
  }
}

static int is_json_answer(const pd_leg_t *p) {
  cJSON *j = p->body.len ? cJSON_ParseWithLength((const char *)p->body.p, p->body.len) : NULL;
  int ok = cJSON_IsObject(j) && !cJSON_GetObjectItemCaseSensitive(j, "error");
  cJSON_Delete(j);
  return ok;
}

/* R-SF-KV-DRAIN: decode's read failed (an error event under its 200 head before any token,
 * V1.22, V1.31): it sends prefill no notification, so prefill keeps the blocks pinned to its
 * timer or lease (V1.12, V1.13). While the parameters are fresh, a drain leg takes them to
 * another decode and is given up at its head: that decode either reads the blocks (the read's
 * notification frees them, V1.11, V1.21) or learns of the close before it schedules the read
 * (an empty notification frees them, V1.17). Its output is never served, so if the first
 * decode did read them after all (and prefill freed them), nothing stale reaches the client
 * (V1.15). The client's retry redoes prefill as before (R-SF-DECODE-RETRY). */
static void drain_pin(pd_gw_t *gw, pd_rq_t *rq) {
  if (!rq->sf_params || !rq->sf_pw || pd_rq_client_done(rq) || rq->n_legs >= PD_MAX_LEGS ||
      !gw->cfg.sf_params_reuse_ns || gw->now >= rq->sf_params_at + gw->cfg.sf_params_reuse_ns)
    return;
  int32_t w = pd_gw_pick(gw, rq, PD_ROLE_DECODE); /* the failed decode is excluded */
  if (w >= 0) (void)pd_sf_open_drain(gw, rq, (uint32_t)w); /* no memory: the timer frees it */
}

/* A drain leg is given up at its 2xx head (R-CANCEL: closed at the end of the instant; its own
 * failure reported in that instant is recorded as one, else cancelled); a non-2xx head is its
 * own answer (R-OUTCOME). Once given up, the reference's rules for given-up legs judge it. */
static void sfr_on_head(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  if (!leg->is_drain) ref->on_head(gw, rq, leg);
  else if (!is_2xx(leg->status) || leg->is_doomed) pd_ref_doomed_result(gw, rq, leg, leg->status);
  else pd_ref_leg_doom(gw, rq, leg);
}

/* Prefill's answer is one JSON document, whatever the client asked for (stream false). */
static void sfr_on_data(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, const uint8_t *b, size_t n) {
  if (leg->role != PD_ROLE_PREFILL) { /* a drain, given up at its head, is judged there too */
    rq->sf_read_failed = 0;
    ref->on_data(gw, rq, leg, b, n);
    if (rq->sf_read_failed) drain_pin(gw, rq);
    rq->sf_read_failed = 0;
    return;
  }
  int rc = pd_buf_append(gw->alloc, &leg->body, b, n);
  if (rc == 0) return;
  if (rc == PD_ERR_NOMEM) pd_ref_own_failure(gw, rq, leg, "out of memory reading prefill's answer");
  else if (leg->is_doomed) pd_ref_doomed_result(gw, rq, leg, 502);
  else pd_ref_fail_leg(gw, rq, leg, 502, "response too large");
}

static void sfr_on_end(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg) {
  if (leg->role != PD_ROLE_PREFILL || leg->has_outcome) {
    ref->on_end(gw, rq, leg);
    return;
  }
  int ok = is_2xx(leg->status) && is_json_answer(leg);
  if (leg->is_doomed) pd_ref_doomed_result(gw, rq, leg, ok ? 0 : 502);
  else if (!ok) pd_ref_fail_leg(gw, rq, leg, 502, "prefill answer is not a JSON object");
  else prefill_answered(gw, rq, leg);
}

/* R-SF-DECODE-RETRY: a decode that failed to connect never saw the request, so prefill's
 * blocks are still pinned for it and nobody read them: the next attempt sends the same
 * parameters to another decode while they are fresh, without R-RETRY's backoff (it goes to
 * another decode, and every moment the parameters wait is a window in which a client leaving
 * strands the blocks until prefill's timer, V1.19). A decode that saw the request (a head, a
 * reset, a timeout) may have read or released them (V1.11, V1.18): prefill is redone. */
static void sfr_on_error(pd_gw_t *gw, pd_rq_t *rq, pd_leg_t *leg, pd_upstream_error_t e) {
  if (leg->is_drain && !leg->is_doomed) { /* before its head: its own failure */
    pd_ref_doomed_result(gw, rq, leg, e == PD_UPSTREAM_ERROR_TIMEOUT ? 504 : 502);
    return;
  }
  if (leg->role == PD_ROLE_DECODE && !leg->is_doomed && !leg->is_collect && !rq->is_committed && rq->sf_pw &&
      e == PD_UPSTREAM_ERROR_CONNECT && gw->cfg.sf_params_reuse_ns &&
      gw->now < rq->sf_params_at + gw->cfg.sf_params_reuse_ns)
    rq->sf_reuse = 1;
  ref->on_error(gw, rq, leg, e);
  if (rq->sf_reuse && rq->state == RQ_BACKOFF) /* 0 means none: at t = 0, 1 ns */
    rq->dl[DL_BACKOFF] = gw->now ? gw->now : 1;
}

static void sfr_on_deadline(pd_gw_t *gw, pd_rq_t *rq, int which) {
  if (which == DL_BACKOFF && rq->sf_reuse &&
      gw->now >= rq->sf_params_at + gw->cfg.sf_params_reuse_ns)
    rq->sf_reuse = 0; /* stale by now: prefill is redone */
  ref->on_deadline(gw, rq, which);
}

/* R-SF-DISCONNECT: every open leg is given up and closed at the end of the instant (R-CANCEL,
 * a plain close). Parameters held for a retry cannot be released by the gateway: prefill
 * keeps those blocks until its timer or lease (V1.16, V1.19). */
static void sfr_on_client_gone(pd_gw_t *gw, pd_rq_t *rq) {
  rq->sf_reuse = 0;
  /* R-ABORT-COMMITTED: prefill answered its parameters (its KV is pinned: the commit) on a
   * worker declared to ignore aborts after it; decode's close before its read would strand the
   * blocks to prefill's timer, so decode reads them first (its first data event) */
  pd_leg_t *d = pd_gw_cur(rq, PD_ROLE_DECODE);
  if (d && rq->sf_pw && rq->sf_params && !d->has_outcome && !d->is_doomed && !d->is_drain &&
      !d->events && d->state != LEG_ENDED && d->state != LEG_FAILED &&
      gw->cfg.prefill_tail_timeout_ns &&
      gw->workers[PD_ROLE_PREFILL][rq->sf_pw - 1].is_abort_ignored)
    pd_ref_client_gone(gw, rq, d, NULL);
  else
    ref->on_client_gone(gw, rq);
}

static void sfr_on_no_pair(pd_gw_t *gw, pd_rq_t *rq, int status) {
  ref->on_no_pair(gw, rq, status);
}

const pd_mode_ops_t pd_mode_sfref_ops = {sfr_on_start, sfr_on_head,     sfr_on_data,
                                         sfr_on_end,   sfr_on_error,    sfr_on_deadline,
                                         sfr_on_client_gone, sfr_on_no_pair};
