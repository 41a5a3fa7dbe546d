/* Attribution of source-first legs (vLLM's protocol: no bootstrap room; docs/conformance.md
 * "Tying legs to requests"): a decode leg without the runner's id takes the request of the
 * prefill leg whose KV it read (step 1's last resort), and legs without a room pair into
 * attempts by that KV key, else by request (step 2). The key is the one the mocks log on a
 * prefill's pin and on decode's read, notice and heartbeat lines (pd_worker_kv_key of
 * kv_transfer_params.remote_request_id, V1.5, V1.7). */
#include <stdlib.h>
#include <string.h>

#include "pd_conform_int.h"

static int cmp_arrival(const void *a, const void *b) {
  const pd_conform_key_t *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The earliest prefill leg without a partner, arrived by t, whose KV key is id (keys: prefill
 * legs sorted by KV key, then arrival); -1 none. */
static int32_t prefill_named(const pd_conform_runner_t *run, const pd_conform_key_t *keys,
                             size_t n, const char *id, uint64_t t) {
  pd_conform_key_t want = {id, 0, 0};
  const pd_conform_key_t *hit =
      n ? bsearch(&want, keys, n, sizeof *keys, pd_conform_cmp_key) : NULL;
  for (; hit && hit > keys && !strcmp(hit[-1].s, id);) hit--;
  for (; hit && hit < keys + n && !strcmp(hit->s, id) && hit->t <= t; hit++)
    if (run->legs[hit->idx].partner < 0) return hit->idx;
  return -1;
}

/* Step 2 for legs without a room (vLLM's protocol, source first: no bootstrap room). A decode
 * leg pairs with the prefill leg its kv_transfer_params.remote_request_id names (prefill's
 * rid, V1.5, copied verbatim by the gateway, V1.7), the first such decode only: a later one
 * with the same params is a decode-only retry (R-SF-DECODE-RETRY), an attempt of its own.
 * Without one (null params, V1.6; Mooncake's bootstrap params, V1.25; a decode-only
 * fallback, V1.27), in a vLLM scenario, it pairs with the latest prefill leg of the same
 * request (tied by id) that arrived before it and has no decode yet, else with the earliest
 * such prefill leg that came after it (Mooncake's proxy sends both legs at once). The rest
 * stand alone. */
void pd_conform_pair_source_first(pd_conform_runner_t *run, pd_conform_unit_t *u, uint32_t *nu,
                                  pd_conform_key_t *legs, size_t n) {
  pd_conform_key_t *pk = malloc((n + 1) * sizeof *pk);
  int32_t *open = calloc(run->n_reqs + 1, sizeof *open); /* per request: prefill leg + 1 */
  if (!pk || !open) {
    run->n_nomem++;
    free(pk);
    free(open);
    return;
  }
  size_t np = 0;
  for (size_t i = 0; i < n; i++)
    if (run->legs[legs[i].idx].role == PD_ROLE_PREFILL)
      pk[np++] = (pd_conform_key_t){run->legs[legs[i].idx].kv_key, legs[i].t, legs[i].idx};
  qsort(pk, np, sizeof *pk, pd_conform_cmp_key);
  qsort(legs, n, sizeof *legs, cmp_arrival);
  int by_request = pd_scenario_protocol(run->s) == PD_PROTOCOL_VLLM;
  for (size_t i = 0; i < n; i++) {
    pd_conform_logged_leg_t *l = &run->legs[legs[i].idx];
    if (l->role == PD_ROLE_PREFILL) {
      if (l->client >= 0) open[l->client] = legs[i].idx + 1;
      continue;
    }
    int32_t p = l->kv_key[0] ? prefill_named(run, pk, np, l->kv_key, l->t_arrive) : -1;
    if (p < 0 && by_request && l->client >= 0 && open[l->client] &&
        run->legs[open[l->client] - 1].partner < 0)
      p = open[l->client] - 1;
    if (p < 0) continue;
    pd_conform_add_unit(run, u, nu, p, legs[i].idx);
    int32_t c = run->legs[p].client;
    if (c >= 0 && open[c] == p + 1) open[c] = 0;
  }
  if (by_request) { /* a decode sent before its prefill (Mooncake's proxy sends both at once) */
    memset(open, 0, (run->n_reqs + 1) * sizeof *open);
    for (size_t i = n; i-- > 0;) {
      const pd_conform_logged_leg_t *l = &run->legs[legs[i].idx];
      if (l->role == PD_ROLE_PREFILL && l->partner < 0 && l->client >= 0)
        open[l->client] = legs[i].idx + 1; /* the earliest unpaired one */
    }
    for (size_t i = 0; i < n; i++) {
      const pd_conform_logged_leg_t *l = &run->legs[legs[i].idx];
      if (l->role != PD_ROLE_DECODE || l->partner >= 0 || l->client < 0 || !open[l->client])
        continue;
      pd_conform_add_unit(run, u, nu, open[l->client] - 1, legs[i].idx);
      open[l->client] = 0;
    }
  }
  for (size_t i = 0; i < n; i++)
    if (run->legs[legs[i].idx].partner < 0) pd_conform_add_unit(run, u, nu, legs[i].idx, -1);
  free(pk);
  free(open);
}

/* Step 1's last resort: a decode leg without the runner's id takes the request of the prefill
 * leg its kv_transfer_params.remote_request_id names (a gateway that rewrote both the header
 * and the prompt still copies prefill's params into decode's body verbatim, V1.7). */
void pd_conform_tie_by_remote_id(pd_conform_runner_t *run) {
  pd_conform_key_t *pk = malloc((run->n_legs + 1) * sizeof *pk);
  size_t np = 0;
  if (!pk) {
    run->n_nomem++;
    return;
  }
  for (size_t i = 0; i < run->n_legs; i++)
    if (run->legs[i].role == PD_ROLE_PREFILL && run->legs[i].client >= 0)
      pk[np++] = (pd_conform_key_t){run->legs[i].kv_key, 0, (int32_t)i};
  qsort(pk, np, sizeof *pk, pd_conform_cmp_key);
  for (size_t i = 0; i < run->n_legs && np; i++) {
    pd_conform_logged_leg_t *l = &run->legs[i];
    if (l->role != PD_ROLE_DECODE || l->client >= 0 || !l->kv_key[0]) continue;
    pd_conform_key_t want = {l->kv_key, 0, 0};
    const pd_conform_key_t *hit = bsearch(&want, pk, np, sizeof *pk, pd_conform_cmp_key);
    if (!hit) continue;
    l->client = run->legs[hit->idx].client;
    run->r->legs_by_id++;
    run->r->legs_by_remote_id++;
  }
  free(pk);
}

