#include "pd_retry.h"

#include <math.h>

#define PD_NS_PER_MS 1000000ULL

void pd_retry_config_smg(pd_retry_config_t *c) {
  c->max_attempts = 5;
  c->initial_backoff_ms = 50;
  c->max_backoff_ms = 30000;
  c->multiplier = 1.5;
  c->jitter = 0.2;
}

/* min(floor(initial * multiplier^k), max) in ms. pow() saturates to inf for large k (and a
 * NaN multiplier gives NaN); both fail the `< max` test and land on the cap, so no
 * out-of-range double ever reaches the integer conversion. */
static uint64_t backoff_ms(const pd_retry_config_t *c, uint32_t k) {
  if (c->initial_backoff_ms == 0) return 0; /* 0 * inf would be NaN, not 0 */
  double x = floor((double)c->initial_backoff_ms * pow(c->multiplier, (double)k));
  if (!(x < (double)c->max_backoff_ms)) return c->max_backoff_ms;
  if (!(x > 0.0)) return 0;
  return (uint64_t)x;
}

/* d + round(d * U[-j, +j]) clamped to [0, UINT64_MAX], done on integers where it matters so
 * a delay never wraps. */
static uint64_t jitter_ms(uint64_t d, double j, pd_prng_t *rng) {
  double u = -j + 2.0 * j * pd_prng_unit(rng);
  double delta = round((double)d * u);
  if (isnan(delta)) return d;
  if (delta < 0.0) {
    if (-delta >= (double)d) return 0;
    return d - (uint64_t)(-delta);
  }
  if (!(delta < 0x1.0p64)) return UINT64_MAX;
  uint64_t up = (uint64_t)delta;
  return up > UINT64_MAX - d ? UINT64_MAX : d + up;
}

uint64_t pd_retry_delay_ns(const pd_retry_config_t *c, uint32_t k, pd_prng_t *rng) {
  uint64_t d = backoff_ms(c, k);
  if (c->jitter > 0.0 && rng) d = jitter_ms(d, c->jitter, rng);
  return d > UINT64_MAX / PD_NS_PER_MS ? UINT64_MAX : d * PD_NS_PER_MS;
}

int pd_retry_is_retryable_status(int status) {
  switch (status) {
  case 408:
  case 429:
  case 500:
  case 502:
  case 503:
  case 504: return 1;
  default: return 0;
  }
}
