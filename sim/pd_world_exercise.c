/* What a run really exercised, and whether the world was healthy: which scenario fault entries
 * fired (a row whose faults never fired tested nothing about them: NOT EXERCISED), which
 * requests reached a worker, and the health epoch I15 judges a request against. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_world_int.h"

/* Did modifier entry f (prefill_lag, slow_drip) take effect on this leg? They combine with the
 * leg's fault and leave only their ms; one fires when it begins at the worker (a prefill
 * entered its lag, a decode streamed under its drip), even if a cancel then cut it short, and
 * not when the leg ended before it began. (A scripted fault proper fires when it takes effect:
 * is_fault_fired.) */
static int entry_fired(const pd_worker_leg_t *leg, const pd_fault_t *f) {
  if (f->nth_from && (leg->nth < f->nth_from || leg->nth > f->nth_to)) return 0;
  if (f->kind != PD_FAULT_PREFILL_LAG && f->kind != PD_FAULT_SLOW_DRIP) return 0;
  /* a lag delays a prefill's answer, a drip a decode's tokens: elsewhere they change nothing */
  if ((f->kind == PD_FAULT_PREFILL_LAG) != (leg->role == PD_ROLE_PREFILL)) return 0;
  if (!f->ms) return f->prob >= 1.0 && leg->nth; /* a 0 ms lag (a series' baseline) changes
                                                    nothing: it fires whenever it matches */
  if (f->kind == PD_FAULT_PREFILL_LAG) return leg->is_lag_fired && leg->lag_ms == f->ms;
  return leg->is_drip_fired && leg->drip_ms == f->ms;
}

void pd_world_note_open(struct pd_world *w, pd_worker_leg_t *leg, int was_down) {
  pd_worker_node_t *n = &w->nodes[leg->worker];
  if (was_down) { /* refused by a crashed node: the crash is exercised */
    w->crash_fired[leg->worker] = 1;
    return;
  }
  leg->nth = ++n->received; /* as the engine counts (pick_fault) */
  leg->is_reached = leg->truth != PD_TRUTH_NEVER;
}

/* The modifiers that took effect on a leg, marked when it is retired. */
static void note_modifiers(struct pd_world *w, const pd_scenario_t *s, const pd_worker_leg_t *leg) {
  const pd_scenario_worker_t *sw = &s->workers[leg->worker];
  for (uint32_t i = 0; i < sw->n_faults && i < PD_SCENARIO_MAX_FAULTS; i++)
    if (entry_fired(leg, &sw->faults[i])) w->fault_fired[leg->worker][i] = 1;
  if (leg->tfault >= 0 && (uint32_t)leg->tfault < s->n_tfaults) { /* a traffic lag or drip */
    const pd_fault_t *f = &s->tfaults[leg->tfault].f;
    if ((f->kind == PD_FAULT_PREFILL_LAG && leg->role == PD_ROLE_PREFILL &&
         (leg->is_lag_fired || !f->ms)) ||
        (f->kind == PD_FAULT_SLOW_DRIP && leg->role == PD_ROLE_DECODE &&
         (leg->is_drip_fired || !f->ms)))
      w->tfault_fired[leg->tfault] = 1;
  }
}

/* The scenario as given, with its faults (the healed phase runs on a copy without them). */
static const pd_scenario_t *given(const struct pd_world *w) { return w->orig ? w->orig : w->s; }

void pd_world_note_fired(struct pd_world *w, const pd_worker_leg_t *leg) {
  const pd_scenario_worker_t *sw = &given(w)->workers[leg->worker];
  if (w->on_leg) w->on_leg(w->leg_ud, leg, sw->name);
  if (leg->nth) note_modifiers(w, given(w), leg);
  if (leg->fault < 0 || !leg->is_fault_fired || !leg->fp) return;
  if (leg->fp >= sw->faults && leg->fp < sw->faults + sw->n_faults)
    w->fault_fired[leg->worker][leg->fp - sw->faults] = 1;
  const pd_scenario_t *s = given(w);
  for (uint32_t i = 0; i < s->n_tfaults && i < PD_SCENARIO_MAX_TRAFFIC_FAULTS; i++)
    if (leg->fp == &s->tfaults[i].f) w->tfault_fired[i] = 1;
}

void pd_world_mark_crash(struct pd_world *w, uint32_t node) {
  void *v;
  for (size_t slot = 0; pd_map_next(&w->legs, &slot, NULL, &v);) {
    pd_worker_leg_t *leg = v;
    if (!pd_world_leg_crash_struck(leg, node)) continue;
    leg->is_crash_hit = 1;
    w->crash_fired[node] = 1;
  }
}

void pd_world_health(struct pd_world *w, int delta) {
  if (delta > 0) {
    w->n_unhealthy++;
    w->unhealthy_epoch++;
  } else if (w->n_unhealthy) {
    w->n_unhealthy--;
  }
}

void pd_world_note_own_timeout(struct pd_world *w, pd_worker_leg_t *leg) {
  const pd_client_request_t *rq = pd_map_get(&w->reqs, leg->req_id);
  for (const pd_worker_leg_t *o = rq ? rq->legs : NULL; o; o = o->next_in_req)
    if (o->attempt == leg->attempt && o->role != leg->role && o->wstate == PD_WORKER_LEG_QUEUED &&
        /* R-CAP-RANK: queued for its rank's share while another rank had room is no excuse */
        !pd_wengine_is_rank_bound(w->nodes[o->worker].eng, o->leg_id))
      leg->is_capacity_failed = 1;
}

void pd_world_exercised(struct pd_world *w) {
  pd_world_stats_t *st = w->stats;
  void *leg;
  for (size_t slot = 0; pd_map_next(&w->legs, &slot, NULL, &leg);) /* legs held at the end */
    pd_world_note_fired(w, leg);
  const pd_scenario_t *s = given(w);
  for (uint32_t i = 0; i < s->n_tfaults && i < PD_SCENARIO_MAX_TRAFFIC_FAULTS; i++) {
    st->faults_total++;
    if (w->tfault_fired[i]) st->faults_exercised++;
    else if (!st->unexercised[0])
      snprintf(st->unexercised, sizeof st->unexercised, "faults[%u] %s (%s)", i,
               pd_fault_kind_name(s->tfaults[i].f.kind), pd_role_name(s->tfaults[i].role));
  }
  if (s->config.alloc_fail_for_ms) { /* memory pressure: fired when an allocation was refused */
    st->faults_total++;
    if (w->alloc_refused) st->faults_exercised++;
    else if (!st->unexercised[0])
      snprintf(st->unexercised, sizeof st->unexercised, "config.alloc_fail_from_ms (the gateway "
               "allocated nothing in the window)");
  }
  for (uint32_t k = 0; k < w->n_nodes; k++) {
    const pd_scenario_worker_t *sw = &given(w)->workers[k];
    for (uint32_t i = 0; i < sw->n_faults && i < PD_SCENARIO_MAX_FAULTS; i++) {
      st->faults_total++;
      if (w->fault_fired[k][i]) st->faults_exercised++;
      else if (!st->unexercised[0])
        snprintf(st->unexercised, sizeof st->unexercised, "%.31s faults[%u] %s", sw->name, i,
                 pd_fault_kind_name(sw->faults[i].kind));
    }
    if (!sw->crash_at_ms) continue;
    st->faults_total++;
    if (w->crash_fired[k]) st->faults_exercised++;
    else if (!st->unexercised[0])
      snprintf(st->unexercised, sizeof st->unexercised, "%.31s crash_at_ms", sw->name);
  }
}

/* ---------- the healed phase (I17) ---------- */

void pd_world_heal(struct pd_world *w) {
  pd_scenario_t *h = malloc(sizeof *h);
  if (h) { /* the same world without faults: later legs (retries) pick none */
    memcpy(h, w->s, sizeof *h);
    for (uint32_t i = 0; i < h->n_workers; i++) {
      h->workers[i].n_faults = 0;
      h->workers[i].crash_at_ms = h->workers[i].restart_at_ms = 0;
    }
    h->n_tfaults = 0;
    h->workload.fault_rate = 0;
    h->workload.disconnect_at_ms = 0;
    h->workload.client_blocked_at_ms = 0;
    h->workload.requests = (uint32_t)w->next_job; /* no new arrivals */
    w->healed = h;
    w->is_sending_over = 1; /* no closed-loop user's next job, no client retry */
    w->orig = w->s;
    w->s = h;
    for (uint32_t i = 0; i < w->n_nodes; i++) w->nodes[i].spec = &h->workers[i];
    pd_world_workers_reconfigure(w);
  }
  if (w->is_alloc_failing) { /* the healed world has its memory back */
    w->is_alloc_failing = 0;
    pd_world_health(w, -1);
  }
  for (uint32_t i = 0; i < w->n_nodes; i++)
    if (w->nodes[i].is_down) {
      w->nodes[i].is_down = 0;
      pd_world_health(w, -1);
      pd_worker_model_restart(w, i);
    }
}

/* Append "what" to the reason once room is left (the first finding leads). */
static void quiet_note(char *r, size_t cap, size_t *off, const char *what) {
  if (*off + 2 >= cap) return;
  int n = snprintf(r + *off, cap - *off, "%s%s", *off ? ", " : "", what);
  *off = n < 0 || *off + (size_t)n >= cap ? cap - 1 : *off + (size_t)n;
}

void pd_world_check_quiet(struct pd_world *w) {
  char r[160] = "", what[96];
  size_t off = 0;
  size_t live = pd_gw_requests_live(w->gw);
  uint32_t rooms = 0;
  if (live) {
    snprintf(what, sizeof what, "%zu request(s) live in the core", live);
    quiet_note(r, sizeof r, &off, what);
  }
  for (uint32_t i = 0; i < w->n_nodes; i++) {
    const pd_worker_node_t *n = &w->nodes[i];
    const char *name = n->spec->name;
    uint32_t load = pd_gw_load(w->gw, n->role, n->role_index);
    uint32_t probes = pd_gw_breaker_probes(w->gw, n->role, n->role_index);
    if (load) snprintf(what, sizeof what, "load %u on %.31s", load, name), quiet_note(r, sizeof r, &off, what);
    if (probes) snprintf(what, sizeof what, "%u breaker probe(s) on %.31s", probes, name),
                quiet_note(r, sizeof r, &off, what);
    if (n->live_slots) snprintf(what, sizeof what, "%u slot(s) held on %.31s", n->live_slots, name),
                       quiet_note(r, sizeof r, &off, what);
    pd_wengine_stats_t st;
    pd_wengine_stats(n->eng, &st);
    if (st.running || st.kv_used_pages)
      snprintf(what, sizeof what, "%u running, %llu KV page(s) held on %.31s", st.running,
               (unsigned long long)st.kv_used_pages, name),
          quiet_note(r, sizeof r, &off, what);
    rooms += st.queued + st.registrations;
  }
  if (w->reqs.len) { /* a leg still open at the gateway or still running at its worker */
    snprintf(what, sizeof what, "%zu request(s) with a leg never settled", w->reqs.len);
    quiet_note(r, sizeof r, &off, what);
  }
  if (rooms) {
    snprintf(what, sizeof what, "%u queue or bootstrap entr%s left", rooms, rooms == 1 ? "y" : "ies");
    quiet_note(r, sizeof r, &off, what);
  }
  if (!off) return;
  w->violations |= 1u << (PD_INVARIANT_QUIESCENCE - 1);
  w->stats->inv_count[PD_INVARIANT_QUIESCENCE]++;
  if (!w->stats->first_reason[0])
    snprintf(w->stats->first_reason, sizeof w->stats->first_reason, "I17 after the healed phase: %s", r);
}
