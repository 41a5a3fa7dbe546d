/* The discrete-event driver: turns heap events into core events and worker-model calls, and
 * core actions into scheduled deliveries, keeping each request's ground truth until it can
 * be judged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_bw.h"
#include "pd_err.h"
#include "pd_hash.h"
#include "pd_world_int.h"

#define MS_NS 1000000ull

/* ---------- scheduling ---------- */

/* SplitMix64's finaliser: every input bit moves every output bit. */
static uint64_t splitmix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ z >> 27) * 0x94d049bb133111ebULL;
  return z ^ z >> 31;
}

/* The tie key of an event: equal for every event of one channel (a leg's messages in each
 * direction, a worker engine's wakes, a request's client, a worker's crash clock), so a channel
 * stays FIFO, and a hash of the channel and the tie seed between channels, so a tie seed
 * picks one order of same-instant events on different channels. The core's deadlines are not
 * in this heap: they fire after every event of their instant, whatever the seed (run_until in
 * pd_world_loop.c), so the end of the instant (the reference's settle, R-CANCEL) comes last. */
static uint64_t tie_key(const struct pd_world *w, uint32_t kind, uint32_t a, uint64_t b) {
  if (!w->tie_seed) return 0;
  uint64_t ch;
  switch (kind) {
  case EV_G2W_OPEN: case EV_G2W_CLOSE: case EV_G2W_ABORT: ch = 1ull << 60 | b; break;
  case EV_W2G: ch = 2ull << 60 | b; break;
  case EV_WWAKE: ch = 3ull << 60 | a; break;
  case EV_GONE: case EV_CLIENT_BLOCK: ch = 4ull << 60 | b; break; /* the client's channel */
  case EV_CRASH: case EV_RESTART: ch = 6ull << 60 | a; break;
  default: ch = 0; break; /* EV_ARRIVE */
  }
  return splitmix(ch ^ splitmix(w->tie_seed)) >> 1 | 1u; /* in 1..2^63-1 */
}

void pd_world_push(struct pd_world *w, uint64_t t, uint32_t kind, uint32_t a, uint64_t b,
                   uint64_t c) {
  pd_heap_item_t it = {t, 0, kind, a, b, c, tie_key(w, kind, a, b)};
  int rc = pd_heap_push(&w->heap, &it);
  if (rc && !w->push_err) w->push_err = rc; /* out of memory or past the heap's limit: an
                                               * event is lost and the run cannot be judged */
}

void pd_world_to_gw(struct pd_world *w, pd_worker_leg_t *leg, int kind, uint32_t arg,
                    uint64_t delay) {
  pd_world_push(w, w->now + delay + w->net_ns, EV_W2G, (uint32_t)kind | arg << 8, leg->leg_id, 0);
}

void pd_world_to_gw_part(struct pd_world *w, pd_worker_leg_t *leg, int kind, uint32_t arg,
                         uint32_t part, uint32_t n_parts) {
  pd_world_push(w, w->now + w->net_ns, EV_W2G, (uint32_t)kind | arg << 8, leg->leg_id,
                W2G_PART(part, n_parts));
}


/* ---------- requests: creation, retirement ---------- */

/* Does some role have no worker a gateway could select: none up (worker truth) with its
 * breaker Closed or half-open (as the core reported it; one the checker's model found opened
 * without cause counts as Closed, I12)? */
static int unselectable(const struct pd_world *w) {
  int ok[2] = {0, 0};
  for (uint32_t k = 0; k < w->n_nodes; k++) {
    const pd_worker_node_t *n = &w->nodes[k];
    if (!n->is_down && (n->breaker_state != PD_BREAKER_OPEN || n->is_breaker_unjust))
      ok[n->role == PD_ROLE_DECODE] = 1;
  }
  return !ok[0] || !ok[1];
}

void pd_world_client_request_del(pd_client_request_t *rq) {
  pd_worker_leg_t *l = rq->legs;
  while (l) {
    pd_worker_leg_t *nx = l->next_in_req;
    free(l->rooms);
    free(l);
    l = nx;
  }
  free(rq->held);
  pd_sse_free(&rq->sse);
  pd_metrics_req_free(&rq->metrics);
  pd_buf_free(NULL, &rq->body);
  free(rq);
}

static int leg_settled(const pd_worker_leg_t *l) {
  return !l->gw_open && l->wstate == PD_WORKER_LEG_DONE && !l->aborts_in_flight;
}

/* What the checker reads of the world, now (the scenario is the healed one once healed). */
static pd_judge_t judge_of(const struct pd_world *w) {
  uint32_t att = w->gcfg.retry.max_attempts;
  int is_ref = w->mode == PD_MODE_REFERENCE; /* R-DISCONNECT, R-TAIL (pd_judge_t) */
  return (pd_judge_t){.s = w->s, .mode = w->mode, .is_outcome_blind = 0,
                      .max_attempts = att ? att : 1, .now = w->now, .stats = w->stats,
                      .is_kv_deferred = 1, .is_kv_source_known = 1, .is_close_order_known = 1,
                      .admit_queue_ns = is_ref ? w->gcfg.admit_queue_ns : 0,
                      .is_cancel_bound = is_ref, .cancel_gone_ns = 0,
                      .cancel_end_ns = w->gcfg.prefill_tail_timeout_ns};
}

void pd_world_judge(struct pd_world *w, pd_client_request_t *rq) {
  if (rq->is_judged) return;
  rq->is_judged = 1;
  char reason[160] = "";
  pd_judge_t j = judge_of(w);
  uint32_t v = pd_check_request(&j, rq, reason, sizeof reason);
  rq->violations = v;
  size_t rn = strlen(reason) < sizeof rq->reason ? strlen(reason) : sizeof rq->reason - 1;
  memcpy(rq->reason, reason, rn);
  rq->reason[rn] = '\0';
  pd_world_stats_t *st = w->stats;
  if (v && getenv("PDREF_DEBUG")) fprintf(stderr, "req %llu: %#x %s\n", (unsigned long long)rq->id, v, reason);
  if (v) {
    w->violations |= v;
    st->violations_total++;
    for (int i = 1; i <= PD_INVARIANT_COUNT; i++)
      if (v >> (i - 1) & 1u) st->inv_count[i]++;
    if (!st->first_violating_req_valid) {
      st->first_violating_req_valid = 1;
      st->first_violating_req = rq->id;
      snprintf(st->first_reason, sizeof st->first_reason, "%s", reason);
    }
  }
  pd_goodput_note(&w->goodput, rq);
  pd_retry_budget_note(&w->rbudget, rq);
  pd_recovery_note(&w->recovery, rq);
  if ((unsigned)rq->prio < PD_PRIO_COUNT) { /* R-ADMIT-PRIO: the client's view per class */
    st->class_n[rq->prio]++;
    st->class_clean[rq->prio] += rq->is_clean != 0;
    st->class_shed[rq->prio] += !rq->is_clean && rq->has_head && rq->head_status == 503;
  }
  pd_world_trace_request(w, rq);
  st->requests_done++;
  for (pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req)
    if (l->is_reached) {
      st->requests_served++;
      break;
    }
}

void pd_world_retire_now(struct pd_world *w, pd_client_request_t *rq) {
  pd_world_judge(w, rq);
  for (pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) pd_world_note_fired(w, l);
  if (w->metrics) pd_metrics_add_request(w->metrics, rq, w->now);
  for (pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    if (l->kv_pages) pd_world_pin_retired(w, rq, l); /* judged (I18) and counted when freed */
    pd_map_remove(&w->legs, l->leg_id);
  }
  pd_map_remove(&w->reqs, rq->id);
  pd_world_client_request_del(rq);
}

void pd_world_try_retire(struct pd_world *w, pd_client_request_t *rq) {
  if (!(rq->ended || rq->gone) || !rq->core_done) return;
  for (pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req)
    if (!leg_settled(l)) return;
  pd_world_retire_now(w, rq);
}

void pd_world_leg_changed(struct pd_world *w, pd_worker_leg_t *leg) {
  if (w->n_dirty == w->cap_dirty) {
    size_t nc = w->cap_dirty ? w->cap_dirty * 2 : 64;
    uint64_t *nd = realloc(w->dirty, nc * sizeof *nd);
    if (!nd) { /* a request that may never retire: the run's verdict is void, as for a push */
      if (!w->push_err) w->push_err = PD_ERR_NOMEM;
      return;
    }
    w->dirty = nd;
    w->cap_dirty = nc;
  }
  w->dirty[w->n_dirty++] = leg->req_id;
}

/* ---------- client workload ---------- */

static int draw(struct pd_world *w, double frac) {
  if (frac >= 1.0) return 1;
  if (frac <= 0.0) return 0;
  return pd_prng_unit(&w->world_rng) < frac;
}

/* A body written piece by piece; one that does not fit (with its NUL) is 0, never cut. */
typedef pd_bw_t body_out_t;

/* out(o, "%s", s) and out(o, "%u", v) without the format (a body per request). */
static void out_s(body_out_t *o, const char *s) { pd_bw_s(o, s); }
static void out_u(body_out_t *o, uint32_t v) { pd_bw_u(o, v); }

/* One prompt string: "<tag><sep>" then `pad` words "t " then its last word. */
static void out_prompt(body_out_t *o, const char *tag, const char *sep, uint32_t pad,
                       const char *last, uint32_t idx) {
  out_s(o, "\"");
  out_s(o, tag);
  out_s(o, sep);
  if (!o->is_short && o->off + 2ull * pad >= o->cap) o->is_short = 1;
  for (uint32_t i = 0; i < pad && !o->is_short; i++, o->off += 2) memcpy(o->buf + o->off, "t ", 2);
  if (last) {
    out_s(o, last);
  } else {
    out_s(o, "p");
    out_u(o, idx);
  }
  out_s(o, "\"");
}

/* `n` prompt strings "<tag> p<i>", comma-separated. */
static void out_prompts(body_out_t *o, uint32_t n, const char *tag, const char *sep,
                        uint32_t pad) {
  for (uint32_t i = 0; i < n && !o->is_short; i++) {
    if (i) out_s(o, ",");
    out_prompt(o, tag, sep, pad, NULL, i);
  }
}

size_t pd_world_client_body_cap(const pd_scenario_workload_t *wl, uint32_t prompt_tokens,
                                size_t tag_len) {
  size_t n = wl->batch ? wl->batch : 1;
  return 512 + n * (16 + tag_len + 2 * (size_t)prompt_tokens); /* a batch of 1024 fits */
}

size_t pd_world_client_body(const pd_client_request_t *rq, const pd_scenario_workload_t *wl,
                            const char *tag, char *buf, size_t cap) {
  const char *st = rq->is_stream ? "true" : "false", *lp = rq->wants_logprob ? "true" : "false";
  const char *sep = tag ? " " : "";
  uint32_t base = tag ? 2 : 1; /* words of the short prompt: the tag, then its last word */
  uint32_t pad = rq->prompt_tokens > base ? rq->prompt_tokens - base : 0;
  body_out_t o = pd_bw_over(buf, cap);
  if (!tag) tag = "";
  switch (wl->route) {
  case PD_ROUTE_COMPLETIONS: /* batch: a prompt array of `batch` strings */
    out_s(&o, wl->batch ? "{\"model\":\"m\",\"prompt\":[" : "{\"model\":\"m\",\"prompt\":");
    if (wl->batch) out_prompts(&o, wl->batch, tag, sep, pad);
    else out_prompt(&o, tag, sep, pad, "hello", 0);
    out_s(&o, wl->batch ? "],\"max_tokens\":" : ",\"max_tokens\":");
    out_u(&o, rq->tokens);
    out_s(&o, ",\"stream\":");
    out_s(&o, st);
    out_s(&o, rq->wants_logprob ? ",\"logprobs\":1}" : "}");
    break;
  case PD_ROUTE_CHAT:
    out_s(&o, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":");
    out_prompt(&o, tag, sep, pad, "hi", 0);
    out_s(&o, "}],\"max_tokens\":");
    out_u(&o, rq->tokens);
    out_s(&o, ",\"stream\":");
    out_s(&o, st);
    out_s(&o, ",\"logprobs\":");
    out_s(&o, lp);
    out_s(&o, ",\"n\":");
    out_u(&o, wl->batch ? wl->batch : 1);
    out_s(&o, "}");
    break;
  default:
    out_s(&o, wl->batch ? "{\"text\":[" : "{\"text\":");
    if (wl->batch) out_prompts(&o, wl->batch, tag, sep, pad);
    else out_prompt(&o, tag, sep, pad, "hello", 0);
    out_s(&o, wl->batch ? "],\"stream\":" : ",\"stream\":");
    out_s(&o, st);
    out_s(&o, ",\"return_logprob\":");
    out_s(&o, lp);
    out_s(&o, ",\"sampling_params\":{\"max_new_tokens\":");
    out_u(&o, rq->tokens);
    out_s(&o, "}");
    if (wl->routed_dp_rank1) { /* S2.14: a rank the client pins (workload.routed_dp_rank) */
      out_s(&o, ",\"routed_dp_rank\":");
      out_u(&o, wl->routed_dp_rank1 - 1);
    }
    out_s(&o, "}");
  }
  return pd_bw_done(&o);
}

int pd_world_feed(struct pd_world *w, const pd_event_t *ev) {
  pd_actbuf_reset(&w->acts);
  int rc = pd_gw_feed(w->gw, w->now, ev, &w->acts);
  pd_world_apply(w);
  return rc;
}

/* One request from a client: the open loop's arrival (user 0) or a closed-loop user's, or a
 * retry. The open loop's next arrival is scheduled between the draws, as it always was. */
static void request_send(struct pd_world *w, uint32_t user, uint64_t job, uint32_t try_no) {
  const pd_scenario_workload_t *wl = &w->s->workload;
  pd_client_request_t *rq = calloc(1, sizeof *rq);
  if (!rq) return;
  rq->id = w->next_req++;
  rq->user = user;
  rq->job = job;
  rq->try_no = try_no;
  pd_buf_init(&rq->body, PD_WORLD_MAX_BODY_BYTES);
  rq->t_arrival = w->now;
  rq->health_epoch = w->n_unhealthy ? UINT64_MAX : w->unhealthy_epoch;
  pd_world_fault_block_note(w, rq); /* it arrives to wait behind a fault (I15) */
  rq->is_unselectable_at_arrival = unselectable(w);
  rq->is_stream = draw(w, wl->stream);
  rq->wants_logprob = draw(w, wl->logprob);
  rq->tokens = wl->tokens;
  rq->prompt_tokens = pd_scenario_prompt_tokens(wl, w->seed, rq->id);
  rq->prio = pd_scenario_prio(wl, w->seed, rq->id);
  pd_sse_init(&rq->sse, NULL);
  pd_map_put(&w->reqs, rq->id, rq);
  if (w->reqs.len > w->stats->peak_live) w->stats->peak_live = w->reqs.len;
  if (wl->disconnect_at_ms && draw(w, wl->disconnect_prob))
    pd_world_push(w, w->now + wl->disconnect_at_ms * MS_NS, EV_GONE, 0, rq->id, 0);
  if (wl->client_timeout_ms) /* the client gives up (c = 1: a timeout, not a leave) */
    pd_world_push(w, w->now + wl->client_timeout_ms * MS_NS, EV_GONE, 0, rq->id, 1);
  if (wl->client_blocked_at_ms) { /* a slow client (R-BACKPRESSURE) */
    pd_world_push(w, w->now + wl->client_blocked_at_ms * MS_NS, EV_CLIENT_BLOCK, 1, rq->id, 0);
    pd_world_push(w, w->now + (wl->client_blocked_at_ms + wl->client_blocked_ms) * MS_NS,
                  EV_CLIENT_BLOCK, 0, rq->id, 0);
  }
  if (!user && !try_no && w->next_job < wl->requests) /* the open loop's next arrival */
    pd_world_push(w, pd_scenario_arrival_next_ns(wl, (uint32_t)w->next_job, w->now, &w->world_rng),
                  EV_ARRIVE, 0, 0, 0);
  size_t cap = pd_world_client_body_cap(wl, rq->prompt_tokens, 0);
  char *body = malloc(cap);
  size_t len = body ? pd_world_client_body(rq, wl, NULL, body, cap) : 0;
  pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = rq->id,
                   .path = pd_route_path(wl->route), .data = (const uint8_t *)body, .len = len,
                   .prio = (pd_prio_t)rq->prio};
  uint64_t id = rq->id; /* rq may be retired by the feed */
  if (pd_world_feed(w, &ev)) pd_world_refused(w, id);
  free(body);
}

void pd_world_arrive(struct pd_world *w) {
  uint64_t job = w->next_job++;
  request_send(w, 0, job, 0);
}

void pd_world_send(struct pd_world *w, uint32_t user, uint64_t job, uint32_t try_no) {
  if (w->is_sending_over) return;
  if (job == UINT64_MAX) { /* a closed-loop user's next job */
    if (w->next_job >= w->s->workload.requests) {
      if (user && user <= w->n_users) w->user_busy[user - 1] = 0;
      return;
    }
    job = w->next_job++;
  }
  request_send(w, user, job, try_no);
}
