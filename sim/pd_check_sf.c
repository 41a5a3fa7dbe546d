/* The source-first invariants of the checker (docs/spec.md I19), apart from pd_check.c's
 * token reading: judged from the worker's ground truth only, like I3 and I18. */
#include <stdio.h>

#include "pd_check.h"
#include "pd_wengine.h"

/* I19 (V1.15): a decode leg whose prompt KV was read from blocks its prefill no longer pinned
 * (freed by the timer or the lease, maybe reused: the engine marks the read
 * PD_WENGINE_KV_FROM_STALE) and which still answered in full (truth OK: a 200 and every token)
 * served output computed from whatever those blocks held. Nobody sees it: prefill only logs a
 * warning and the client gets a 200. A record from a socket run's logs has no kv_from (0) and
 * is not judged. */
uint32_t pd_check_freed_blocks(const pd_judge_t *j, const pd_client_request_t *rq, char *reason,
                               size_t cap) {
  const uint32_t bit = 1u << (PD_INVARIANT_FREED_BLOCKS - 1);
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    if (l->role != PD_ROLE_DECODE || l->kv_from != PD_WENGINE_KV_FROM_STALE ||
        l->truth != PD_TRUTH_OK)
      continue;
    if (!*reason) {
      const char *wn = l->worker < j->s->n_workers ? j->s->workers[l->worker].name : "?";
      snprintf(reason, cap, "I19 decode on %s answered in full from KV read off freed blocks "
               "(attempt %u)", wn, l->attempt);
    }
    return bit;
  }
  return 0;
}
