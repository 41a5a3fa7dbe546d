/* What a run really exercised, and whether the world was healthy: which scenario fault entries
 * fired (a row whose faults never fired tested nothing about them: NOT EXERCISED), which
 * requests reached a worker, and the health epoch I15 judges a request against. */
#include <stdio.h>

#include "pd_world_int.h"

/* Was fault entry f of worker spec injected into the leg that just reached it? The scripted
 * fault is the leg's fp; prefill_lag and slow_drip combine with it and leave only their ms. */
static int entry_fired(const pd_wleg_t *leg, const pd_fault_t *f, uint32_t nth) {
  if (leg->fault >= 0 && leg->fp == f) return 1;
  if (f->nth_from && (nth < f->nth_from || nth > f->nth_to)) return 0;
  if (f->kind != PD_FAULT_PREFILL_LAG && f->kind != PD_FAULT_SLOW_DRIP) return 0;
  if (!f->ms) return f->prob >= 1.0; /* a 0 ms lag (a series' baseline) changes nothing: it
                                        fires whenever it matches */
  return (f->kind == PD_FAULT_PREFILL_LAG ? leg->lag_ms : leg->drip_ms) == f->ms;
  return 0;
}

void pd_world_note_open(struct pd_world *w, pd_wleg_t *leg, int was_down) {
  pd_wnode_t *n = &w->nodes[leg->worker];
  if (was_down) { /* refused by a crashed node: the crash is exercised */
    w->crash_fired[leg->worker] = 1;
    return;
  }
  leg->is_reached = leg->truth != PD_TRUTH_NEVER;
  const pd_scn_worker_t *sw = n->spec;
  for (uint32_t i = 0; i < sw->n_faults && i < PD_SCN_MAX_FAULTS; i++)
    if (entry_fired(leg, &sw->faults[i], n->received)) w->fault_fired[leg->worker][i] = 1;
}

void pd_world_mark_crash(struct pd_world *w, uint32_t node) {
  for (size_t i = 0; i < w->legs.cap; i++) { /* bounded by the map's capacity */
    if (!w->legs.keys[i] || w->legs.keys[i] == UINT64_MAX) continue;
    pd_wleg_t *leg = w->legs.vals[i];
    if (leg->worker != node || leg->wstate == WL_DONE || leg->wstate == WL_NEW) continue;
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

void pd_world_exercised(struct pd_world *w) {
  pd_world_stats_t *st = w->stats;
  for (uint32_t k = 0; k < w->n_nodes; k++) {
    const pd_scn_worker_t *sw = w->nodes[k].spec;
    for (uint32_t i = 0; i < sw->n_faults && i < PD_SCN_MAX_FAULTS; i++) {
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
