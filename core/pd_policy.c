#include "pd_policy.h"

#include <string.h>

#include "pd_err.h"

static const char *const policy_names[] = {
    [PD_POLICY_RANDOM] = "random",
    [PD_POLICY_ROUND_ROBIN] = "round_robin",
    [PD_POLICY_POWER_OF_TWO] = "power_of_two",
};
#define PD_POLICY_COUNT (sizeof policy_names / sizeof policy_names[0])

void pd_policy_init(pd_policy_t *p, pd_policy_kind_t kind) {
  p->kind = kind;
  p->rr_counter = 0;
}

/* Worker indices are uint32; one that does not fit the int32 result is refused, not wrapped. */
static int32_t as_worker(uint32_t w) { return w > INT32_MAX ? -1 : (int32_t)w; }

/* R1.18: the counter is shared across list changes, so the rotation jumps when the healthy
 * set changes, exactly as upstream's fetch_add(1) % len. */
static uint32_t pick_round_robin(pd_policy_t *p, uint32_t n) {
  return (uint32_t)(p->rr_counter++ % n);
}

/* R1.19: two distinct positions; the first wins ties. Without loads every load reads as equal. */
static uint32_t pick_power_of_two(const uint32_t *cand, uint32_t n, const uint32_t *load,
                                  pd_prng_t *rng) {
  if (n == 1) return 0;
  uint32_t i1 = (uint32_t)pd_prng_below(rng, n);
  uint32_t i2 = (uint32_t)((i1 + 1 + pd_prng_below(rng, n - 1)) % n);
  if (!load) return i1;
  return load[cand[i1]] <= load[cand[i2]] ? i1 : i2;
}

int32_t pd_policy_pick(pd_policy_t *p, const uint32_t *cand, uint32_t n, const uint32_t *load,
                       pd_prng_t *rng) {
  if (n == 0 || !cand) return -1;
  switch (p->kind) {
  case PD_POLICY_RANDOM:
    if (!rng) return -1;
    return as_worker(cand[pd_prng_below(rng, n)]);
  case PD_POLICY_ROUND_ROBIN: return as_worker(cand[pick_round_robin(p, n)]);
  case PD_POLICY_POWER_OF_TWO:
    if (!rng && n > 1) return -1;
    return as_worker(cand[pick_power_of_two(cand, n, load, rng)]);
  default: return -1;
  }
}

int pd_policy_parse(const char *name, pd_policy_kind_t *out) {
  if (!name || !out) return PD_ERR_INVAL;
  for (size_t i = 0; i < PD_POLICY_COUNT; i++) {
    if (strcmp(name, policy_names[i]) == 0) {
      *out = (pd_policy_kind_t)i;
      return 0;
    }
  }
  return PD_ERR_INVAL;
}

const char *pd_policy_name(pd_policy_kind_t kind) {
  if ((unsigned)kind >= PD_POLICY_COUNT) return "unknown";
  return policy_names[kind];
}
