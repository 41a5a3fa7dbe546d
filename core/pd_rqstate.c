/* The request and leg state machines in one place (curl's multistate(), pd_breaker.c): the
 * legal moves of each, the entry action of each request state, and the one function per
 * machine that changes a state. docs/spec.md section 4 draws both tables; tests/test_rqstate.c
 * fails when the drawing and these tables disagree. */
#include <assert.h>
#include <string.h>

#include "pd_gw_int.h"

static const char *const rq_names[PD_RQ_STATE_COUNT] = {
    [RQ_NEW] = "NEW",       [RQ_HEADS] = "HEADS",   [RQ_DRAIN] = "DRAIN",
    [RQ_READ] = "READ",     [RQ_FIRST] = "FIRST",   [RQ_PREFILL_LOST] = "PREFILL_LOST",
    [RQ_STREAM] = "STREAM", [RQ_BACKOFF] = "BACKOFF", [RQ_TAIL] = "TAIL",
    [RQ_GONE] = "GONE",     [RQ_END] = "END",     [RQ_PREFILL] = "PREFILL",
};

#define TO(s) [s] = 1

/* Every move any mode makes (which mode makes which: docs/spec.md 4.1). */
static const unsigned char rq_moves[PD_RQ_STATE_COUNT][PD_RQ_STATE_COUNT] = {
    [RQ_NEW] = {TO(RQ_HEADS), TO(RQ_FIRST), TO(RQ_BACKOFF), TO(RQ_TAIL), TO(RQ_PREFILL)},
    [RQ_HEADS] = {TO(RQ_DRAIN), TO(RQ_READ), TO(RQ_STREAM), TO(RQ_BACKOFF), TO(RQ_TAIL),
                  TO(RQ_GONE)},
    [RQ_DRAIN] = {TO(RQ_READ), TO(RQ_STREAM), TO(RQ_BACKOFF), TO(RQ_TAIL), TO(RQ_GONE)},
    [RQ_READ] = {TO(RQ_BACKOFF), TO(RQ_TAIL), TO(RQ_GONE)},
    [RQ_FIRST] = {TO(RQ_PREFILL_LOST), TO(RQ_STREAM), TO(RQ_BACKOFF), TO(RQ_TAIL), TO(RQ_GONE)},
    [RQ_PREFILL_LOST] = {TO(RQ_STREAM), TO(RQ_BACKOFF), TO(RQ_GONE)},
    [RQ_STREAM] = {TO(RQ_TAIL), TO(RQ_GONE)},
    [RQ_BACKOFF] = {TO(RQ_HEADS), TO(RQ_FIRST), TO(RQ_TAIL), TO(RQ_GONE), TO(RQ_PREFILL)},
    [RQ_TAIL] = {TO(RQ_END)},
    [RQ_GONE] = {TO(RQ_END)},
    [RQ_END] = {0},
    [RQ_PREFILL] = {TO(RQ_HEADS), TO(RQ_FIRST), TO(RQ_STREAM), TO(RQ_BACKOFF), TO(RQ_TAIL),
                    TO(RQ_GONE)},
};

static const char *const leg_names[PD_LEG_STATE_COUNT] = {
    [LEG_OPEN] = "OPEN", [LEG_HEAD] = "HEAD", [LEG_ENDED] = "ENDED",
    [LEG_FAILED] = "FAILED", [LEG_REMOVED] = "REMOVED",
};

static const unsigned char leg_moves[PD_LEG_STATE_COUNT][PD_LEG_STATE_COUNT] = {
    [LEG_OPEN] = {TO(LEG_HEAD), TO(LEG_FAILED), TO(LEG_REMOVED)},
    [LEG_HEAD] = {TO(LEG_ENDED), TO(LEG_FAILED), TO(LEG_REMOVED)},
    [LEG_ENDED] = {TO(LEG_REMOVED)},
    [LEG_FAILED] = {TO(LEG_REMOVED)},
    [LEG_REMOVED] = {0},
};

#undef TO

/* ---------- entry actions, one per request state (none for the others) ---------- */

/* R-TIMEOUT: the first-token deadline runs until decode's first event (stream) or until
 * prefill has answered (non-stream: SGLang's prefill answers after the KV transfer, the moment
 * decode starts generating; a non-stream decode shows nothing before it is done). A stream leg
 * without its head in time is hung (SGLang sends a stream's head at once, S5.3). */
static void enter_first(pd_gw_t *gw, pd_rq_t *rq) {
  if (gw->cfg.first_token_timeout_ns) rq->dl[DL_FIRST] = gw->now + gw->cfg.first_token_timeout_ns;
  if (rq->req.is_stream && gw->cfg.head_timeout_ns)
    for (uint32_t i = 0; i < rq->n_legs; i++)
      if (rq->legs[i]->attempt == rq->attempt)
        rq->legs[i]->deadline_ns = gw->now + gw->cfg.head_timeout_ns;
}

/* R-SF-PREFILL: the reference's first-token budget covers prefill's whole answer (a vLLM
 * prefill answers once, with its one token); entering RQ_FIRST for decode arms it anew. The
 * models have no such deadline (first_token_timeout_ns 0). */
static void enter_prefill(pd_gw_t *gw, pd_rq_t *rq) {
  if (gw->cfg.first_token_timeout_ns) rq->dl[DL_FIRST] = gw->now + gw->cfg.first_token_timeout_ns;
}

/* R-FAIL-PRECOMMIT, "prefill lost": decode gets the tail budget to show its first event. */
static void enter_prefill_lost(pd_gw_t *gw, pd_rq_t *rq) {
  uint64_t until = gw->now + gw->cfg.prefill_tail_timeout_ns;
  if (!rq->dl[DL_FIRST] || until < rq->dl[DL_FIRST]) rq->dl[DL_FIRST] = until;
}

/* The client head went out just before (every mode sends its own head first). */
static void enter_stream(pd_gw_t *gw, pd_rq_t *rq) {
  rq->is_committed = 1;
  pd_admit_committed(gw, rq); /* the service estimate of R-ADMIT-QUEUE */
}

/* The attempt is over: its deadlines go (the next attempt's start arms its own). */
static void enter_backoff(pd_gw_t *gw, pd_rq_t *rq) {
  (void)gw;
  rq->dl[DL_FIRST] = rq->dl[DL_IDLE] = rq->dl[DL_TAIL] = 0;
}

/* The client response ended: the deadlines that guard it go (DL_TAIL, armed by pd_gw_finish,
 * now supervises the legs left, R-TAIL). */
static void enter_tail(pd_gw_t *gw, pd_rq_t *rq) {
  (void)gw;
  rq->dl[DL_FIRST] = rq->dl[DL_IDLE] = rq->dl[DL_TOTAL] = rq->dl[DL_BACKOFF] = 0;
  rq->dl[DL_COMMIT] = 0;
}

/* Every leg is gone: the loads still held go, and the driver learns the request is over. */
static void enter_end(pd_gw_t *gw, pd_rq_t *rq) {
  assert(rq->n_legs == 0);
  pd_admit_sf_release(gw, rq);
  pd_gw_release_load(gw, rq, PD_ROLE_PREFILL);
  pd_gw_release_load(gw, rq, PD_ROLE_DECODE);
  pd_gw_emit(gw, PD_ACT_DONE, rq);
}

static void (*const rq_on_enter[PD_RQ_STATE_COUNT])(pd_gw_t *, pd_rq_t *) = {
    [RQ_FIRST] = enter_first,   [RQ_PREFILL_LOST] = enter_prefill_lost,
    [RQ_STREAM] = enter_stream, [RQ_BACKOFF] = enter_backoff,
    [RQ_TAIL] = enter_tail,     [RQ_END] = enter_end,
    [RQ_PREFILL] = enter_prefill,
};

/* ---------- the transition functions ---------- */

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static void report(pd_gw_t *gw, pd_machine_t m, uint64_t req_id, uint64_t leg_id, int from,
                   int to, const char *file, int line) {
  if (!gw->on_transition) return;
  pd_transition_t t = {m, req_id, leg_id, from, to, base_name(file), line, gw->now};
  gw->on_transition(gw->transition_ctx, &t);
}

/* An illegal move is a core bug: asserted here (tests run with asserts). A build without
 * asserts still makes the move, as the code before these tables did. */
void pd_rq_set_state(pd_gw_t *gw, pd_rq_t *rq, pd_rq_state_t to, const char *file, int line) {
  pd_rq_state_t from = rq->state;
  assert(pd_rq_state_legal((int)from, (int)to));
  rq->state = to;
  if (rq->is_queued && to != RQ_BACKOFF) pd_admit_unlink(gw, rq); /* answered, or gone */
  report(gw, PD_MACHINE_REQUEST, rq->id, 0, (int)from, (int)to, file, line);
  if (rq_on_enter[to]) rq_on_enter[to](gw, rq);
}

void pd_leg_set_state(pd_gw_t *gw, const pd_rq_t *rq, pd_leg_t *leg, pd_leg_state_t to,
                      const char *file, int line) {
  pd_leg_state_t from = leg->state;
  assert(pd_leg_state_legal((int)from, (int)to));
  leg->state = to;
  report(gw, PD_MACHINE_LEG, rq->id, leg->id, (int)from, (int)to, file, line);
}

/* ---------- read-only views ---------- */

int pd_rq_state_count(void) { return PD_RQ_STATE_COUNT; }
int pd_leg_state_count(void) { return PD_LEG_STATE_COUNT; }

const char *pd_rq_state_name(int s) {
  return s >= 0 && s < PD_RQ_STATE_COUNT ? rq_names[s] : NULL;
}

const char *pd_leg_state_name(int s) {
  return s >= 0 && s < PD_LEG_STATE_COUNT ? leg_names[s] : NULL;
}

int pd_rq_state_legal(int from, int to) {
  return from >= 0 && from < PD_RQ_STATE_COUNT && to >= 0 && to < PD_RQ_STATE_COUNT &&
         rq_moves[from][to];
}

int pd_leg_state_legal(int from, int to) {
  return from >= 0 && from < PD_LEG_STATE_COUNT && to >= 0 && to < PD_LEG_STATE_COUNT &&
         leg_moves[from][to];
}

void pd_gw_set_transition_hook(pd_gw_t *gw, pd_transition_fn fn, void *ctx) {
  gw->on_transition = fn;
  gw->transition_ctx = fn ? ctx : NULL;
}
