/* The world's trace events (pd_trace.h): a judged request's span, its legs' spans at the
 * gateway and in the worker's running slot, and the instants the driver reports (a client
 * leaving, aborts, crashes). Each is hashed as binary fields on every run (the row's trace
 * hash, I13); text is made only when a file is written. docs/traces.md. */
#include <assert.h>
#include <stdio.h>

#include "pd_world_int.h"

static const char *const truth_names[] = {"pending", "ok", "failed", "stalled", "cancelled",
                                          "never"};

static const char *const client_names[] = {"open", "ended", "aborted", "disconnected"};

static int client_state(const pd_client_request_t *rq) {
  return rq->gone ? 3 : rq->aborted ? 2 : rq->ended ? 1 : 0;
}

static void trace_leg(struct pd_world *w, const pd_client_request_t *rq,
                      const pd_worker_leg_t *l) {
  pd_trace_arg_t a[13];
  uint32_t n = 0;
  a[n++] = PD_TRACE_ARG_ID("req", rq->id);
  a[n++] = PD_TRACE_ARG_ID("leg", l->leg_id);
  a[n++] = PD_TRACE_ARG_U("attempt", l->attempt);
  a[n++] = PD_TRACE_ARG_E("worker", l->worker, w->nodes[l->worker].spec->name);
  a[n++] = PD_TRACE_ARG_ID("room", l->room);
  if (l->n_rooms > 1 && l->rooms) /* a batch: every room, not just the first */
    a[n++] = (pd_trace_arg_t){"rooms", PD_TRACE_IDS, 0, NULL, l->rooms, (uint32_t)l->n_rooms};
  a[n++] = PD_TRACE_ARG_E("truth", l->truth, truth_names[l->truth]);
  a[n++] = PD_TRACE_ARG_E("recorded", l->outcomes ? (int)l->outcome + 1 : 0,
                          l->outcomes ? pd_outcome_name(l->outcome) : "none");
  a[n++] = PD_TRACE_ARG_U("aborts_received", l->aborts);
  a[n++] = PD_TRACE_ARG_E("fault", l->fault + 1,
                          l->fault >= 0 ? pd_fault_kind_name((pd_fault_kind_t)l->fault) : "none");
  a[n++] = PD_TRACE_ARG_U("kv_pages_max", l->kv_pages_max);
  int pre = l->role == PD_ROLE_PREFILL;
  pd_trace_ev_t e = {'X', PD_TRACE_GATEWAY, l->worker, l->leg_id,
                     pre ? PD_TRACE_ID_PREFILL : PD_TRACE_ID_DECODE,
                     pre ? "req %u prefill" : "req %u decode", rq->id, l->t_open,
                     l->gw_open ? w->now : l->t_gw_closed, a, n};
  pd_trace_emit(&w->trace, &e);
  if (!l->slot_taken) return;
  e.pid = PD_TRACE_WORKER + l->worker;
  e.group = 0;
  e.t0 = l->t_slot_taken;
  e.t1 = l->is_slot_freed ? l->t_slot_freed : w->now;
  pd_trace_emit(&w->trace, &e);
}

void pd_world_trace_request(struct pd_world *w, const pd_client_request_t *rq) {
  if (!w->is_traced) return;
  pd_trace_arg_t a[] = {
      PD_TRACE_ARG_ID("req", rq->id),          PD_TRACE_ARG_U("status", rq->head_status),
      PD_TRACE_ARG_U("attempts", rq->attempts), PD_TRACE_ARG_U("tokens", rq->next_token),
      PD_TRACE_ARG_B("stream", rq->is_stream),  PD_TRACE_ARG_E("client", client_state(rq), client_names[client_state(rq)]),
      {"violated", PD_TRACE_INVS, rq->violations, NULL, NULL, 0},
      PD_TRACE_ARG_S("why", rq->reason),
  };
  pd_trace_ev_t e = {'X', PD_TRACE_CLIENTS, 0, rq->id,
                     rq->violations ? PD_TRACE_ID_REQUEST_VIOLATION : PD_TRACE_ID_REQUEST,
                     rq->violations ? "request %u (VIOLATION)" : "request %u", rq->id,
                     rq->t_arrival, rq->t_end ? rq->t_end : w->now, a, sizeof a / sizeof a[0]};
  pd_trace_emit(&w->trace, &e);
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) trace_leg(w, rq, l);
}

void pd_world_trace_instant(struct pd_world *w, uint32_t pid, uint64_t key, uint32_t name_id,
                            uint64_t req_id, uint64_t leg_id) {
  if (!w->is_traced) return;
  static const char *const names[] = {
      [PD_TRACE_ID_CLIENT_GONE] = "client gone",       [PD_TRACE_ID_ABORT_SENT] = "abort sent",
      [PD_TRACE_ID_ABORT_RECEIVED] = "abort received", [PD_TRACE_ID_CRASH] = "crash",
      [PD_TRACE_ID_RESTART] = "restart"};
  assert(name_id < sizeof names / sizeof names[0] && names[name_id]);
  pd_trace_arg_t a[2];
  uint32_t n = 0;
  if (req_id) a[n++] = PD_TRACE_ARG_ID("req", req_id);
  if (leg_id) a[n++] = PD_TRACE_ARG_ID("leg", leg_id);
  pd_trace_ev_t e = {'i', pid, 0, key, name_id, names[name_id], 0, w->now, w->now, a, n};
  pd_trace_emit(&w->trace, &e);
}

/* Process and lane names (only kept when a file is written). */
void pd_world_trace_names(struct pd_world *w) {
  pd_trace_t *t = &w->trace;
  if (!t->out) return;
  pd_trace_name(t, PD_TRACE_CLIENTS, UINT32_MAX, 1, "client requests");
  pd_trace_name(t, PD_TRACE_CLIENTS, 0, 0, "requests");
  pd_trace_name(t, PD_TRACE_GATEWAY, UINT32_MAX, 2, "gateway legs");
  for (uint32_t i = 0; i < w->n_nodes; i++) {
    const pd_scenario_worker_t *sw = w->nodes[i].spec;
    char name[96];
    snprintf(name, sizeof name, "%s %s", sw->role == PD_ROLE_PREFILL ? "prefill" : "decode",
             sw->name);
    pd_trace_name(t, PD_TRACE_WORKER + i, UINT32_MAX, 10 + (int)i, name);
    pd_trace_name(t, PD_TRACE_WORKER + i, 0, 0, "slot");
    snprintf(name, sizeof name, "to %s", sw->name);
    pd_trace_name(t, PD_TRACE_GATEWAY, i, (int)i, name);
  }
}
