/* The source-first invariants of the checker (docs/spec.md I19, I20), apart from pd_check.c's
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

/* Did the prefill whose answer decode leg d was given answer in full without pinning any KV
 * (vLLM: its parameters null, V1.6)? Then decode computing the prompt itself follows the
 * prefill's own answer, not a gateway that skipped it. That prefill is the one of d's attempt,
 * or, for an attempt that ran no prefill (R-SF-DECODE-RETRY reuses the parameters of an
 * earlier attempt's answer), the latest earlier one that answered in full. */
static int prefill_offered_no_kv(const pd_client_request_t *rq, const pd_worker_leg_t *d) {
  const pd_worker_leg_t *src = NULL;
  for (const pd_worker_leg_t *p = rq->legs; p; p = p->next_in_req)
    if (p->role == PD_ROLE_PREFILL && p->attempt <= d->attempt && p->truth == PD_TRUTH_OK &&
        (!src || p->attempt > src->attempt || (p->attempt == src->attempt && !p->is_kv_pinned)))
      src = p;
  return src && !src->is_kv_pinned;
}

/* I20 (O5.2: llm-d's silent decode-only fallback was a bug): a decode leg that generated and
 * answered in full (truth OK) must have been served from the KV of a prefill its gateway chose
 * for the request: that prefill's transfer (SGLang) or a read from the node of one of the
 * request's prefill legs (vLLM; a decode retry reads an earlier attempt's pin). A decode that computed the prompt itself (vLLM KV_FROM_LOCAL: no or
 * unusable parameters) is excused only when its attempt's prefill answered without offering
 * any KV. */
uint32_t pd_check_disaggregated(const pd_judge_t *j, const pd_client_request_t *rq, char *reason,
                                size_t cap) {
  const uint32_t bit = 1u << (PD_INVARIANT_DISAGGREGATED - 1);
  if (!j->is_kv_source_known || j->s->config.decode_only_ok != 0) return 0;
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    if (l->role != PD_ROLE_DECODE || l->truth != PD_TRUTH_OK || !l->has_streamed ||
        l->is_kv_from_pair)
      continue;
    int is_local = l->kv_from == PD_WENGINE_KV_FROM_LOCAL;
    if (is_local && prefill_offered_no_kv(rq, l)) continue;
    if (!*reason) {
      const char *wn = l->worker < j->s->n_workers ? j->s->workers[l->worker].name : "?";
      snprintf(reason, cap, "I20 decode on %s answered in full %s (attempt %u)", wn,
               is_local ? "computing the prompt itself: no KV from its prefill"
                        : "without KV from the prefill of its attempt", l->attempt);
    }
    return bit;
  }
  return 0;
}
