/* The pairing-topology invariants of the checker (docs/spec.md I21, I22, O5.2): judged from
 * what the workers received (the bodies of the legs that reached them) and the scenario's
 * worker specs (their transfer groups and DP sizes), never from what the core reports. */
#include <stdio.h>

#include "pd_check.h"

/* The scenario's worker behind node index i, or NULL. */
static const pd_scenario_worker_t *spec_of(const pd_judge_t *j, int i) {
  return i >= 0 && (uint32_t)i < j->s->n_workers ? &j->s->workers[i] : NULL;
}

/* I21 (sglang #40606): a decode leg that reached its worker was paired with a prefill of its
 * own transfer group (the prefill its body's bootstrap_host names). */
uint32_t pd_check_pair_group(const pd_judge_t *j, const pd_client_request_t *rq, char *reason,
                             size_t cap) {
  const uint32_t bit = 1u << (PD_INVARIANT_PAIR_GROUP - 1);
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    const pd_scenario_worker_t *d = spec_of(j, (int)l->worker), *p = spec_of(j, l->boot_node);
    if (l->role != PD_ROLE_DECODE || !l->is_reached || !d || !p ||
        d->transfer_group == p->transfer_group)
      continue;
    if (!*reason)
      snprintf(reason, cap, "I21 decode on %s (transfer group %u) paired with prefill %s "
               "(group %u) (attempt %u)", d->name, d->transfer_group, p->name,
               p->transfer_group, l->attempt);
    return bit;
  }
  return 0;
}

/* I22 (S2.14, sglang #24772, #40731): the prefill DP rank a decode leg looks its room up on
 * (its body's disagg_prefill_dp_rank, else room % the prefill's dp_size) is the rank its
 * attempt's prefill leg of that room runs on (its routed_dp_rank, else room % dp_size), and
 * that rank exists. Both legs must have reached their workers; batches are not judged. */
uint32_t pd_check_rank_agreement(const pd_judge_t *j, const pd_client_request_t *rq,
                                 char *reason, size_t cap) {
  const uint32_t bit = 1u << (PD_INVARIANT_RANK_AGREEMENT - 1);
  for (const pd_worker_leg_t *d = rq->legs; d; d = d->next_in_req) {
    const pd_scenario_worker_t *ps = spec_of(j, d->boot_node);
    if (d->role != PD_ROLE_DECODE || !d->is_reached || !ps || d->n_rooms != 1) continue;
    uint32_t dp = ps->dp_size ? ps->dp_size : 1;
    for (const pd_worker_leg_t *p = rq->legs; p; p = p->next_in_req) {
      if (p->role != PD_ROLE_PREFILL || !p->is_reached || p->attempt != d->attempt ||
          (int)p->worker != d->boot_node || p->n_rooms != 1 || p->room != d->room)
        continue;
      uint64_t served = p->has_routed_rank ? p->routed_rank : p->room % dp;
      uint64_t looked = d->has_prefill_rank ? d->prefill_rank : d->room % dp;
      if (served == looked && served < dp) continue;
      if (!*reason)
        snprintf(reason, cap, "I22 prefill %s ran room %llu on DP rank %llu%s, decode on %s "
                 "looked it up on rank %llu (dp_size %u, attempt %u)", ps->name,
                 (unsigned long long)p->room, (unsigned long long)served,
                 p->has_routed_rank ? " (routed_dp_rank)" : "", spec_of(j, (int)d->worker)->name,
                 (unsigned long long)looked, dp, d->attempt);
      return bit;
    }
  }
  return 0;
}
