/* Attribution of a socket run: with the mocks' legs read (pd_conform_log.c), tie each leg to
 * the client request it served (pd_conform_verdict.c then judges every request with the
 * simulator's checker). The attribution rule (docs/conformance.md "Tying legs to requests"):
 *  1. a leg whose X-Request-Id is one the runner sent belongs to that request (the mock logs
 *     the header's id, else the runner's id found in the prompt); a decode leg without one
 *     belongs to the request of the prefill leg its kv_transfer_params.remote_request_id names;
 *  2. legs pair into attempts by bootstrap room (k-th prefill with k-th decode of a room, in
 *     arrival order, never across two known requests), legs without a room (vLLM's protocol)
 *     by remote_request_id, else by request; an unpaired leg is an attempt alone;
 *     a leg that reached the same worker again with the same rid and room (an HTTP client's
 *     resend) joins its original's attempt;
 *  3. a decode leg whose rid a response quotes as "id" served that request (several legs
 *     with one rid: the assignment with the fewest clean/failed mismatches, then the nearest
 *     ends);
 *  4. any other attempt goes, in arrival order, to the earliest request already sent, not
 *     answered before the attempt arrived and without an earlier attempt (first attempts are
 *     FIFO), else to the request whose last attempt ended last before it (a retry); requests
 *     that asked for something else (stream, logprobs), were already served, have used the
 *     mode's attempts, or whose attempts would overlap are tried only when nothing else fits. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_conform_int.h"

#define MAX_IDS 8

typedef pd_conform_unit_t unit_t;

/* ---------- attribution ---------- */

uint64_t pd_conform_leg_closed(const pd_conform_logged_leg_t *l) {
  if (l->t_peer_closed && (!l->t_end || l->t_peer_closed < l->t_end)) return l->t_peer_closed;
  return l->t_end;
}

static int32_t client_of_xrid(const pd_conform_runner_t *run, const char *x) {
  const char *dash = x[0] ? strrchr(x, '-') : NULL;
  if (!dash) return -1;
  unsigned long i = strtoul(dash + 1, NULL, 10);
  return i < run->n_reqs && !strcmp(run->reqs[i].xrid, x) ? (int32_t)i : -1;
}

typedef pd_conform_key_t key_t;

int pd_conform_cmp_key(const void *a, const void *b) {
  const key_t *x = a, *y = b;
  int c = strcmp(x->s, y->s);
  if (c) return c;
  return x->t < y->t ? -1 : x->t > y->t;
}

static int cmp_unit(const void *a, const void *b) {
  const unit_t *x = a, *y = b;
  return x->t_first < y->t_first ? -1 : x->t_first > y->t_first;
}

static void unit_add_leg(pd_conform_runner_t *run, unit_t *x, int32_t li) {
  if (x->n >= PD_CONFORM_UNIT_LEGS) { /* re-sent more often than an attempt holds: judged nowhere */
    run->r->legs_unattributed++;
    return;
  }
  pd_conform_logged_leg_t *l = &run->legs[li];
  x->leg[x->n++] = li;
  if (!x->t_first || l->t_arrive < x->t_first) x->t_first = l->t_arrive;
  uint64_t c = pd_conform_leg_closed(l);
  if (!c) c = UINT64_MAX;
  if (c > x->t_last) x->t_last = c;
  if (c < x->t_fail && l->resend_of < 0) x->t_fail = c;
  if (x->client < 0) x->client = l->client;
}

void pd_conform_add_unit(pd_conform_runner_t *run, unit_t *u, uint32_t *nu, int32_t a, int32_t b) {
  unit_t *x = &u[*nu];
  memset(x, 0, sizeof *x);
  x->client = -1;
  x->t_fail = UINT64_MAX;
  if (a >= 0) {
    unit_add_leg(run, x, a);
    run->legs[a].unit = (int32_t)*nu;
  }
  if (b >= 0) {
    unit_add_leg(run, x, b);
    run->legs[b].unit = (int32_t)*nu;
  }
  if (a >= 0 && b >= 0) {
    run->legs[a].partner = b;
    run->legs[b].partner = a;
  }
  (*nu)++;
}

/* Step 2: attempts by room (legs without one: pd_conform_pair_source_first). */
static uint32_t build_units(pd_conform_runner_t *run, unit_t *u) {
  uint32_t nu = 0;
  key_t *keys = malloc((run->n_legs + 1) * sizeof *keys);
  key_t *bare = malloc((run->n_legs + 1) * sizeof *bare);
  int32_t *idx = malloc((run->n_legs + 1) * sizeof *idx);
  if (!keys || !idx || !bare) {
    free(keys);
    free(idx);
    free(bare);
    run->n_nomem++;
    return 0;
  }
  size_t n = 0, n_bare = 0;
  for (size_t i = 0; i < run->n_legs; i++) {
    pd_conform_logged_leg_t *l = &run->legs[i];
    if (l->has_room) keys[n++] = (key_t){l->room_s, l->t_arrive, (int32_t)i};
    else bare[n_bare++] = (key_t){"", l->t_arrive, (int32_t)i};
  }
  pd_conform_pair_source_first(run, u, &nu, bare, n_bare);
  free(bare);
  qsort(keys, n, sizeof *keys, pd_conform_cmp_key);
  for (size_t i = 0; i < n; i++) idx[i] = keys[i].idx;
  free(keys);
  for (size_t g = 0; g < n;) {
    size_t e = g;
    while (e < n && !strcmp(run->legs[idx[e]].room_s, run->legs[idx[g]].room_s)) e++;
    for (size_t i = g; i < e; i++) /* the same body on the same worker again: a resend */
      for (size_t k = g; k < i; k++) {
        pd_conform_logged_leg_t *a = &run->legs[idx[k]], *b = &run->legs[idx[i]];
        if (a->worker == b->worker && a->role == b->role && !strcmp(a->rid, b->rid) &&
            b->resend_of < 0) {
          b->resend_of = idx[k];
          run->r->legs_resent++;
        }
      }
    for (size_t i = g; i < e; i++) { /* each prefill takes the first fitting decode */
      pd_conform_logged_leg_t *p = &run->legs[idx[i]];
      if (p->role != PD_ROLE_PREFILL || p->resend_of >= 0) continue;
      for (size_t k = g; k < e; k++) {
        pd_conform_logged_leg_t *d = &run->legs[idx[k]];
        if (d->role != PD_ROLE_DECODE || d->partner >= 0 || d->resend_of >= 0 ||
            (p->client >= 0 && d->client >= 0 && p->client != d->client))
          continue;
        pd_conform_add_unit(run, u, &nu, idx[i], idx[k]);
        break;
      }
    }
    for (size_t i = g; i < e; i++)
      if (run->legs[idx[i]].partner < 0 && run->legs[idx[i]].resend_of < 0)
        pd_conform_add_unit(run, u, &nu, idx[i], -1);
    g = e;
  }
  for (size_t i = 0; i < n; i++) { /* a re-sent leg belongs to its original's attempt */
    pd_conform_logged_leg_t *l = &run->legs[idx[i]];
    int32_t o = l->resend_of;
    for (int hop = 0; o >= 0 && run->legs[o].resend_of >= 0 && hop < 8; hop++) o = run->legs[o].resend_of;
    if (o >= 0 && run->legs[o].unit >= 0) unit_add_leg(run, &u[run->legs[o].unit], idx[i]);
  }
  free(idx);
  return nu;
}

/* The leg whose body describes the unit's request: decode if there is one. */
static const pd_conform_logged_leg_t *face(const pd_conform_runner_t *run, const unit_t *x) {
  assert(x->n >= 1); /* a unit is made with a leg (add_unit) */
  for (uint32_t k = 0; k < x->n; k++)
    if (run->legs[x->leg[k]].role == PD_ROLE_DECODE) return &run->legs[x->leg[k]];
  return &run->legs[x->leg[0]];
}

/* The unit's legs ask for what the request asked for (stream, logprobs). */
static int compatible(const pd_conform_runner_t *run, const unit_t *x,
                      const pd_client_request_t *c) {
  const pd_conform_logged_leg_t *l = face(run, x);
  return !l->is_stream == !c->is_stream && !l->has_logprob == !c->wants_logprob;
}

static uint64_t dist(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

typedef struct pin {
  size_t grp; /* the rid (index of its first key) */
  uint64_t d;
  uint32_t req;
  int32_t unit;
} pin_t;

static int cmp_pin(const void *a, const void *b) {
  const pin_t *x = a, *y = b;
  if (x->grp != y->grp) return x->grp < y->grp ? -1 : 1;
  if (x->d != y->d) return x->d < y->d ? -1 : 1;
  return x->req < y->req ? -1 : x->req > y->req;
}

#define GRP_MAX 5 /* requests (and legs) of one rid matched exactly; larger groups greedily */
#define NO_PAIR UINT64_MAX

typedef struct grp {
  uint32_t nr, nu;
  uint32_t req[GRP_MAX];
  int32_t unit[GRP_MAX];
  uint64_t d[GRP_MAX][GRP_MAX];
  int best[GRP_MAX], cur[GRP_MAX], best_n;
  uint64_t best_sum;
  uint32_t used;
} grp_t;

/* Most pairs, then the smallest sum of distances (at most 6^5 leaves). */
static void grp_search(grp_t *g, uint32_t i, int n, uint64_t sum) {
  if (i == g->nr) {
    if (n > g->best_n || (n == g->best_n && sum < g->best_sum)) {
      g->best_n = n;
      g->best_sum = sum;
      memcpy(g->best, g->cur, sizeof g->best);
    }
    return;
  }
  g->cur[i] = -1;
  grp_search(g, i + 1, n, sum);
  for (uint32_t k = 0; k < g->nu; k++) {
    if (g->used >> k & 1u || g->d[i][k] == NO_PAIR) continue;
    g->used |= 1u << k;
    g->cur[i] = (int)k;
    grp_search(g, i + 1, n + 1, sum + g->d[i][k]);
    g->used &= ~(1u << k);
  }
  g->cur[i] = -1;
}

static void pin_one(pd_conform_runner_t *run, unit_t *u, uint32_t req, int32_t unit) {
  unit_t *x = &u[unit];
  pd_conform_req_t *q = &run->reqs[req];
  if (x->client >= 0 || q->t_served) return; /* one serving attempt per request */
  x->client = (int32_t)req;
  q->t_served = x->t_first;
}

/* One rid's candidates pins[a..b): exact when small, else nearest first. */
static void pin_group(pd_conform_runner_t *run, unit_t *u, const pin_t *pins, size_t a, size_t b) {
  grp_t g;
  memset(&g, 0, sizeof g);
  int small = 1;
  for (size_t i = a; i < b && small; i++) {
    uint32_t r = 0, k = 0;
    while (r < g.nr && g.req[r] != pins[i].req) r++;
    while (k < g.nu && g.unit[k] != pins[i].unit) k++;
    if ((r == g.nr && g.nr == GRP_MAX) || (k == g.nu && g.nu == GRP_MAX)) small = 0;
    if (!small) break;
    if (r == g.nr) {
      g.req[g.nr++] = pins[i].req;
      for (uint32_t j = 0; j < GRP_MAX; j++) g.d[r][j] = NO_PAIR;
    }
    if (k == g.nu) {
      g.unit[g.nu++] = pins[i].unit;
      for (uint32_t j = 0; j < g.nr; j++) g.d[j][k] = NO_PAIR;
    }
    if (pins[i].d < g.d[r][k]) g.d[r][k] = pins[i].d;
  }
  if (!small) { /* nearest first */
    for (size_t i = a; i < b; i++) pin_one(run, u, pins[i].req, pins[i].unit);
    return;
  }
  g.best_n = -1;
  grp_search(&g, 0, 0, 0);
  for (uint32_t r = 0; r < g.nr; r++)
    if (g.best[r] >= 0) pin_one(run, u, g.req[r], g.unit[g.best[r]]);
}

/* Step 3: the rids quoted as "id" in what the client received. Mocks may repeat made-up
 * rids across workers, so every (request, decode leg with a quoted rid) pair that fits (the
 * leg came after the request was sent and carries its stream/logprob flags) is a candidate;
 * per rid, the assignment with the most pairs, then the fewest clean-response/failed-leg (or
 * broken-response/ok-leg) mismatches, then the nearest ends wins. (With a rid on one leg
 * only, the mismatch does not matter: I5 stays fully judged when rids are unique.) */
static void pin_by_response(pd_conform_runner_t *run, unit_t *u, uint32_t nu) {
  for (uint32_t i = 0; i < nu; i++)
    for (uint32_t k = 0; k < u[i].n; k++) run->legs[u[i].leg[k]].unit = (int32_t)i;
  key_t *keys = malloc((run->n_legs + 1) * sizeof *keys);
  size_t n = 0, n_pins = 0, cap_pins = 0;
  pin_t *pins = NULL;
  if (!keys) {
    run->n_nomem++;
    return;
  }
  for (size_t i = 0; i < run->n_legs; i++)
    if (run->legs[i].role == PD_ROLE_DECODE && run->legs[i].unit >= 0)
      keys[n++] = (key_t){run->legs[i].rid, 0, (int32_t)i};
  qsort(keys, n, sizeof *keys, pd_conform_cmp_key);
  for (uint32_t r = 0; r < run->n_reqs && n; r++) {
    const pd_client_request_t *c = &run->reqs[r].c;
    const char *p = run->reqs[r].first;
    uint64_t t_ref = c->t_end ? c->t_end : c->t_first_data;
    for (int k = 0; k < MAX_IDS && (p = strstr(p, "\"id\":\"")); k++) {
      p += 6;
      const char *e = strchr(p, '"');
      if (!e || e - p >= 128) break;
      char id[128];
      snprintf(id, sizeof id, "%.*s", (int)(e - p), p);
      p = e;
      if (strstr(run->reqs[r].first, id) != p - strlen(id)) continue; /* quoted before */
      key_t want = {id, 0, 0};
      const key_t *hit = bsearch(&want, keys, n, sizeof *keys, pd_conform_cmp_key);
      for (; hit && hit > keys && !strcmp(hit[-1].s, id);) hit--; /* the first equal key */
      size_t grp = hit ? (size_t)(hit - keys) : 0;
      for (; hit && hit < keys + n && !strcmp(hit->s, id); hit++) {
        const pd_conform_logged_leg_t *l = &run->legs[hit->idx];
        if (l->t_arrive < c->t_arrival || !compatible(run, &u[l->unit], c)) continue;
        if (n_pins == cap_pins) {
          size_t nc = cap_pins ? cap_pins * 2 : 64;
          pin_t *np = realloc(pins, nc * sizeof *np);
          if (!np) {
            run->n_nomem++;
            break;
          }
          pins = np;
          cap_pins = nc;
        }
        uint64_t end = pd_conform_leg_closed(l) ? pd_conform_leg_closed(l) : UINT64_MAX / 4;
        /* several legs may carry this rid: a clean response comes from a leg that ended
           well, a broken one from one that did not; then the nearest end */
        int clean = c->ended && !c->aborted && c->head_status >= 200 && c->head_status < 300 &&
                    (!pd_conform_reads_sse(c) || (c->saw_done && !c->saw_error_event));
        uint64_t odd = clean != (l->truth == PD_TRUTH_OK) ? UINT64_MAX / 4 : 0;
        pins[n_pins++] = (pin_t){grp, odd + dist(end, t_ref), r, l->unit};
      }
    }
  }
  if (n_pins) qsort(pins, n_pins, sizeof *pins, cmp_pin);
  for (size_t a = 0, b; a < n_pins; a = b) {
    for (b = a + 1; b < n_pins && pins[b].grp == pins[a].grp;) b++;
    pin_group(run, u, pins, a, b);
  }
  free(pins);
  free(keys);
}

static void note(pd_conform_runner_t *run, pd_conform_req_t *q, const unit_t *x, int32_t ux) {
  if (!q->n_units || x->t_first < q->t_first_unit) q->t_first_unit = x->t_first;
  if (x->t_last != UINT64_MAX && x->t_last > q->t_last_unit_end) q->t_last_unit_end = x->t_last;
  if (q->n_units == q->cap_units) {
    uint32_t nc = q->cap_units ? q->cap_units * 2 : 4;
    int32_t *nu = realloc(q->units, nc * sizeof *nu);
    if (!nu) {
      run->n_nomem++;
      return;
    }
    q->units = nu;
    q->cap_units = nc;
  }
  q->units[q->n_units++] = ux;
}

/* Attempts of one request follow each other. strict: every leg of the earlier one was
 * closed (within the mocks' 20 ms hang-up poll) before the later one reached a worker; else
 * one ended leg (its failure) is enough (pr1150's detached prefill runs on). */
#define ORDER_TOL_NS (30 * PD_CONFORM_MS)
static int in_order(const unit_t *u, const pd_conform_req_t *q, const unit_t *x, int strict) {
  for (uint32_t i = 0; i < q->n_units; i++) {
    const unit_t *y = &u[q->units[i]];
    const unit_t *a = y->t_first <= x->t_first ? y : x, *b = a == y ? x : y;
    uint64_t end = strict ? a->t_last : a->t_fail;
    if (end != UINT64_MAX && end <= b->t_first + (strict ? ORDER_TOL_NS : 0)) continue;
    return 0;
  }
  return 1;
}

/* The client's end: a response that ended, or its own disconnect; 0 if none (still open
 * when the runner gave up on it, or never sent). */
uint64_t pd_conform_client_end(const pd_conform_req_t *q) {
  return q->c.ended || q->c.gone ? q->c.t_end : 0;
}

/* The worker's own error, quoted in what q's client received (mock_workers/pd_worker_shared.c),
 * came from a leg of x: "worker returned N" from a `status` fault with N; the SSE error event
 * "worker failed" from a leg that answered 2xx and then failed. */
static int explains_worker_error(const pd_conform_runner_t *run, const unit_t *x,
                                 const pd_conform_req_t *q) {
  const char *p = strstr(q->first, "\"worker returned ");
  int want_status = p ? atoi(p + 17) : 0;
  int want_failed = !p && strstr(q->first, "\"worker failed\"") != NULL;
  if (!want_status && !want_failed) return 1;
  for (uint32_t k = 0; k < x->n; k++) {
    const pd_conform_logged_leg_t *l = &run->legs[x->leg[k]];
    if (want_status && l->fault == PD_FAULT_STATUS && l->end_status == want_status) return 1;
    if (want_failed && l->truth == PD_TRUTH_FAILED && l->end_status >= 200 && l->end_status < 300)
      return 1;
  }
  return 0;
}

/* Step 4's strictest level: tying attempt x to request q agrees with how q ended. A gateway
 * ends its legs around the client's end (it closes them, or a leg's end is what ended the
 * response), so a leg open past q's end + grace would be an orphan (I2) made by the tie
 * itself. When x is q's last allowed attempt, also: the client's first sign of a response
 * (head, else first byte, else end) came by grace after x's last leg closed (a loaded runner
 * sees the end itself late); a request the runner gave up on still open had a leg open until
 * then, and one that never got a head had a leg that never answered; and a worker's error
 * the client received came from a leg of x. Under load the gateway takes requests out
 * of order and FIFO alone swaps neighbours (minilb swarms: a pair left open by a request that
 * was given up read as I2 of a neighbour that had ended, and a second attempt as I7). A real
 * orphan is still found: this level only chooses among requests that pass level 4, and
 * falls back to level 4 when none fits. */
static int fits(const pd_conform_runner_t *run, const unit_t *x, const pd_conform_req_t *q,
                uint32_t max_att) {
  uint64_t end = pd_conform_client_end(q), g = run->grace_ns;
  if (end && (x->t_last == UINT64_MAX || x->t_last > end + g)) return 0;
  if (q->n_units + 1 < max_att) return 1; /* a later attempt may end it */
  uint64_t seen = q->c.t_head ? q->c.t_head : q->c.t_first_data ? q->c.t_first_data : end;
  if (seen && x->t_last != UINT64_MAX && x->t_last + g < seen) return 0;
  if (!end && q->is_cut && x->t_last != UINT64_MAX && x->t_last + g < q->t_bound) return 0;
  if (!end && q->is_cut && !q->c.t_head) { /* no head at all: a leg of x never answered */
    int silent = 0;
    for (uint32_t k = 0; k < x->n; k++) silent |= !run->legs[x->leg[k]].end_status;
    if (!silent) return 0;
  }
  return explains_worker_error(run, x, q);
}

/* Step 4 for one attempt: a first attempt (FIFO), else a retry of the request whose last
 * attempt ended last. Levels, strictest first: 5 as 4, and the tie fits how the request
 * ended (fits); 4 the legs carry what the request asked for
 * (stream, logprobs), the request had not received a byte nor been served by an earlier
 * attempt (a new attempt after commit is itself a violation, I6) and its attempts follow
 * each other strictly; 3 the same with one ended leg between attempts; 2 compatible, in
 * that order and below the mode's attempt limit (with a mode label); 1 compatible; 0 any
 * request live when the attempt came. */
static int32_t pick(const pd_conform_runner_t *run, const unit_t *u, const unit_t *x, int level,
                    uint32_t *n_cand, int *any_attempt) {
  int32_t first = -1, retry = -1, latest = -1;
  *n_cand = 0;
  *any_attempt = 0;
  uint32_t max_att = run->judge.max_attempts;
  for (uint32_t r = 0; r < run->n_reqs; r++) {
    const pd_conform_req_t *q = &run->reqs[r];
    if (!q->c.t_arrival || q->c.t_arrival > x->t_first) continue;
    if (q->c.ended && q->c.t_end < x->t_first) continue; /* answered before it came */
    if (level >= 1 && !compatible(run, x, &q->c)) continue;
    if (level >= 2 && (!in_order(u, q, x, level >= 4) || q->n_units >= max_att)) continue;
    if (level >= 3 && ((q->c.t_first_data && q->c.t_first_data < x->t_first) ||
                       (q->t_served && q->t_served < x->t_first)))
      continue;
    if (level >= 5 && !fits(run, x, q, max_att)) continue;
    ++*n_cand;
    *any_attempt |= q->n_units > 0;
    if (first < 0 && (!q->n_units || q->t_first_unit > x->t_first)) first = (int32_t)r;
    if (q->n_units && q->t_last_unit_end <= x->t_first &&
        (retry < 0 || q->t_last_unit_end > run->reqs[retry].t_last_unit_end))
      retry = (int32_t)r;
    latest = (int32_t)r;
  }
  return first >= 0 ? first : retry >= 0 ? retry : latest;
}

/* With one attempt per request (mini_lb; --max-attempts 1), step 4's greedy order can leave
 * an attempt only requests where it does not fit (below level 5), or that already have an
 * attempt (read as I7), while the request it belongs to holds a neighbour's. Such an attempt
 * is re-tied along an augmenting path (Kuhn's matching): it takes a request where it fits
 * whose own attempt, tied by timing, moves on to another where that one fits, and so on,
 * until a request without an attempt is reached. When no path exists it stays where it was.
 * Ties by X-Request-Id or by the response never move. */
#define AUG_MAX_DEPTH 64u

typedef struct aug {
  pd_conform_runner_t *run;
  unit_t *u;
  int32_t *owner; /* per request: its attempt, -1 none, -2 one that does not move */
  uint8_t *seen;
} aug_t;

static int may_own(const aug_t *a, const unit_t *x, const pd_conform_req_t *q) {
  if (!q->c.t_arrival || q->c.t_arrival > x->t_first) return 0;
  if (q->c.ended && q->c.t_end < x->t_first) return 0;
  if (q->c.t_first_data && q->c.t_first_data < x->t_first) return 0;
  if (!compatible(a->run, x, &q->c)) return 0;
  return fits(a->run, x, q, 1); /* every attempt on the path fits where it lands */
}

static int augment(aug_t *a, int32_t xi, uint32_t depth) {
  if (depth > AUG_MAX_DEPTH) return 0;
  for (uint32_t r = 0; r < a->run->n_reqs; r++) {
    if (a->seen[r] || a->owner[r] == -2 || !may_own(a, &a->u[xi], &a->run->reqs[r])) continue;
    a->seen[r] = 1;
    if (a->owner[r] == -1 || augment(a, a->owner[r], depth + 1)) {
      a->owner[r] = xi;
      a->u[xi].client = (int32_t)r;
      return 1;
    }
  }
  return 0;
}

static void rematch_single_attempts(pd_conform_runner_t *run, unit_t *u, uint32_t nu) {
  aug_t a = {run, u, calloc(run->n_reqs + 1, sizeof *a.owner), calloc(run->n_reqs + 1, 1)};
  int32_t *todo = calloc(nu + 1, sizeof *todo);
  uint32_t n_todo = 0;
  if (!a.owner || !a.seen || !todo) {
    run->n_nomem++;
    goto out;
  }
  for (uint32_t r = 0; r < run->n_reqs; r++) a.owner[r] = -1;
  for (uint32_t i = 0; i < nu; i++)
    if (u[i].client >= 0 && !u[i].by_timing) a.owner[u[i].client] = -2;
  for (uint32_t i = 0; i < nu; i++) { /* in arrival order: the first attempt owns a request */
    int32_t c = u[i].client;
    if (c < 0 || !u[i].by_timing) continue;
    int is_first = a.owner[c] == -1;
    if (is_first) a.owner[c] = (int32_t)i;
    if (!is_first || u[i].level < 5) todo[n_todo++] = (int32_t)i;
  }
  for (uint32_t k = 0; k < n_todo; k++) {
    int32_t xi = todo[k], r0 = u[xi].client;
    memset(a.seen, 0, run->n_reqs);
    a.seen[r0] = 1;
    if (augment(&a, xi, 0) && a.owner[r0] == xi) a.owner[r0] = -1;
  }
out:
  free(a.owner);
  free(a.seen);
  free(todo);
}

static void attribute_rest(pd_conform_runner_t *run, unit_t *u, uint32_t nu) {
  for (uint32_t i = 0; i < nu; i++)
    if (u[i].client >= 0) note(run, &run->reqs[u[i].client], &u[i], (int32_t)i);
  for (uint32_t i = 0; i < nu; i++) {
    unit_t *x = &u[i];
    if (x->client >= 0) continue; /* tied by X-Request-Id or by the response */
    uint32_t n_cand = 0;
    int any_attempt = 0;
    for (x->level = 5; x->level >= 0; x->level--)
      if ((x->client = pick(run, u, x, x->level, &n_cand, &any_attempt)) >= 0) break;
    if (x->client < 0) continue;
    x->by_timing = 1;
    /* FIFO chose among several requests, one of which had an attempt already: this attempt
       may be that request's retry (or the chosen one's may be another's): flagged, never a
       silent pass (docs/conformance.md "Tying legs") */
    x->is_ambiguous = n_cand >= 2 && any_attempt;
    run->r->legs_ambiguous += x->is_ambiguous ? x->n : 0;
    note(run, &run->reqs[x->client], x, (int32_t)i);
    run->r->legs_by_timing += x->n;
  }
  if (run->judge.max_attempts == 1) rematch_single_attempts(run, u, nu);
}

uint32_t pd_conform_attribute(pd_conform_runner_t *run, pd_conform_unit_t *u) {
  for (size_t i = 0; i < run->n_legs; i++) {
    run->legs[i].client = client_of_xrid(run, run->legs[i].xrid);
    run->r->legs_by_id += run->legs[i].client >= 0;
  }
  pd_conform_tie_by_remote_id(run);
  uint32_t nu = build_units(run, u);
  qsort(u, nu, sizeof *u, cmp_unit);
  pin_by_response(run, u, nu);
  attribute_rest(run, u, nu);
  for (uint32_t i = 0; i < nu; i++)
    if (u[i].client < 0) run->r->legs_unattributed += u[i].n;
  return nu;
}
