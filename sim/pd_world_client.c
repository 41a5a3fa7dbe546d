/* pd_world: the clients of the closed loop and the client retry policy (docs/scenarios.md
 * "Closed loop, client timeout and retries", O5.1). A closed-loop user sends its next job
 * think_ms after its last request ended; every client re-sends a failed request after a
 * backoff. The jitter comes from its own PRNG stream, so an open-loop run without retries
 * draws exactly what it drew before. */
#include <stdlib.h>

#include "pd_err.h"
#include "pd_world_int.h"

#define MS_NS 1000000ull

void pd_world_client_after(struct pd_world *w, const pd_client_request_t *rq) {
  const pd_scenario_workload_t *wl = &w->s->workload;
  if (w->is_sending_over) return;
  int is_left = rq->gone && !rq->is_client_timeout; /* it left on purpose: no retry */
  int is_failed = !is_left && pd_scenario_client_should_retry(rq->is_client_timeout, rq->has_head,
                                                               rq->head_status, rq->aborted);
  if (is_failed && rq->try_no < wl->client_retries) {
    uint64_t at = w->now + pd_scenario_retry_backoff_ns(wl, rq->try_no + 1, &w->client_rng);
    pd_world_push(w, at, EV_SEND, rq->user, rq->job, rq->try_no + 1);
    return;
  }
  if (!rq->user || rq->user > w->n_users) return; /* the open loop: its arrivals go on */
  uint64_t at = w->now + wl->think_ms * MS_NS;
  if (rq->user - 1 < pd_scenario_users_at(wl, at) && w->next_job < wl->requests)
    pd_world_push(w, at, EV_SEND, rq->user, UINT64_MAX, 0); /* the user's next job */
  else
    w->user_busy[rq->user - 1] = 0; /* out of the load (a step down) or out of jobs */
}

/* EV_SEND of a user's next job (b = UINT64_MAX, c = 0) pushed for user u at t. */
static void wake(struct pd_world *w, uint32_t u, uint64_t t) {
  pd_world_push(w, t, EV_SEND, u + 1, UINT64_MAX, 1ull << 32); /* c >> 32: a wake-up */
}

int pd_world_clients_start(struct pd_world *w) {
  const pd_scenario_workload_t *wl = &w->s->workload;
  if (!wl->users) return 0;
  double most = 1.0;
  for (uint32_t k = 0; k < wl->n_steps; k++)
    if (wl->steps[k].factor > most) most = wl->steps[k].factor;
  w->n_users = (uint32_t)((double)wl->users * most + 0.5);
  w->user_busy = calloc(w->n_users ? w->n_users : 1, 1);
  if (!w->user_busy) return PD_ERR_NOMEM;
  uint32_t first = pd_scenario_users_at(wl, 0);
  for (uint32_t u = 0; u < first; u++) wake(w, u, 0);
  for (uint32_t k = 0; k < wl->n_steps; k++)
    for (uint32_t u = 0; u < w->n_users; u++) {
      uint64_t t = pd_scenario_user_start_ns(wl, k, u);
      if (t != UINT64_MAX) wake(w, u, t);
    }
  return 0;
}

/* EV_SEND: a wake-up starts an idle active user; a send of a job (or a retry) goes out. */
void pd_world_client_send_event(struct pd_world *w, uint32_t user, uint64_t job, uint64_t c) {
  const pd_scenario_workload_t *wl = &w->s->workload;
  if (c >> 32) { /* a wake-up: the user joins the load unless it is already busy */
    if (!user || user > w->n_users || w->user_busy[user - 1] || w->is_sending_over) return;
    if (user - 1 >= pd_scenario_users_at(wl, w->now) || w->next_job >= wl->requests) return;
    w->user_busy[user - 1] = 1;
  }
  pd_world_send(w, user, job, (uint32_t)(c & 0xffffffffu));
}
