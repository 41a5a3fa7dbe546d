/* The checker's breaker model (pd_check.h, docs/spec.md I12): the opens a gateway reports,
 * held against the workers' own failures as the simulator's ground truth records them. */
#include "pd_check.h"

void pd_check_breaker_failure(pd_check_breaker_t *b, uint64_t now) {
  b->fail_t[b->next] = now;
  b->next = (b->next + 1) % PD_CHECK_BREAKER_RING;
  if (b->n_fail < PD_CHECK_BREAKER_RING) b->n_fail++;
}

/* Own failures the gateway learnt of at or after `since`. */
static uint32_t failures_since(const pd_check_breaker_t *b, uint64_t since) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < b->n_fail; i++) n += b->fail_t[i] >= since;
  return n;
}

int pd_check_breaker_move(pd_check_breaker_t *b, const pd_breaker_config_t *cfg, int from,
                          int to, uint64_t now) {
  int is_unjust = 0;
  if (to == PD_BREAKER_OPEN && from == PD_BREAKER_HALF_OPEN) {
    is_unjust = !failures_since(b, b->t_half_open); /* any failure in this period reopens */
  } else if (to == PD_BREAKER_OPEN && from == PD_BREAKER_CLOSED) {
    uint64_t since = b->t_closed; /* entering Closed clears both kinds' counts */
    if (cfg->kind == PD_BREAKER_KIND_WINDOW && now >= cfg->window_ns &&
        now - cfg->window_ns > since)
      since = now - cfg->window_ns; /* a bucket older than the window no longer counts */
    uint32_t need = cfg->failure_threshold < PD_CHECK_BREAKER_RING ? cfg->failure_threshold
                                                                   : PD_CHECK_BREAKER_RING;
    is_unjust = failures_since(b, since) < need;
  }
  if (to == PD_BREAKER_CLOSED) b->t_closed = now;
  if (to == PD_BREAKER_HALF_OPEN) b->t_half_open = now;
  return is_unjust;
}
