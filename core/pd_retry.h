/* pd_retry: smg's retry schedule (R2.1-R2.4): attempts, exponential backoff with jitter drawn
 * from the caller's PRNG, and the retryable status set. */
#ifndef PD_RETRY_H
#define PD_RETRY_H
#include <stdint.h>

#include "pd_prng.h"

typedef struct pd_retry_config {
  uint32_t max_attempts; /* total attempts including the first (R2.2); 0 is treated as 1 */
  uint64_t initial_backoff_ms;
  uint64_t max_backoff_ms;
  double multiplier;
  double jitter; /* fraction, e.g. 0.2 = +/-20% */
} pd_retry_config_t;

/* smg defaults: 5 attempts, 50 ms, x1.5, 30 s cap, jitter 0.2 (R2.1). */
void pd_retry_config_smg(pd_retry_config_t *c);

/* Delay in ns before the attempt after failed attempt `k` (0-based), per R2.3:
 * d = min(floor(initial * multiplier^k), max); d' = max(0, d + round(d * U[-j, +j])).
 * Draws one PRNG value only when jitter > 0. */
uint64_t pd_retry_delay_ns(const pd_retry_config_t *c, uint32_t k, pd_prng_t *rng);

/* 408, 429, 500, 502, 503, 504 (R2.4, R3.2). */
int pd_retry_is_retryable_status(int status);

#endif
