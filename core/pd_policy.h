/* pd_policy: worker selection, one instance per role (R1.14): random (R1.17), round_robin
 * (R1.18) and power_of_two (R1.19). Pure functions of candidates, loads and the caller's
 * PRNG. */
#ifndef PD_POLICY_H
#define PD_POLICY_H
#include <stdint.h>

#include "pd_prng.h"

typedef enum {
  PD_POLICY_RANDOM = 0,
  PD_POLICY_ROUND_ROBIN = 1,
  PD_POLICY_POWER_OF_TWO = 2,
} pd_policy_kind_t;

typedef struct pd_policy {
  pd_policy_kind_t kind;
  uint64_t rr_counter;
} pd_policy_t;

void pd_policy_init(pd_policy_t *p, pd_policy_kind_t kind);

/* Pick one of the n candidate worker indices cand[0..n). load[w] is worker w's in-flight
 * count (indexed by worker index, not by position in cand). Returns the chosen worker index,
 * or -1 (no pick) when n == 0 or the chosen index does not fit an int32_t.
 * random: uniform over cand. round_robin: cand[counter++ % n] over the current list.
 * power_of_two: two distinct positions i1 = rand(n), i2 = (i1 + 1 + rand(n-1)) % n; the lower
 * load wins, ties to the first pick; n == 1 returns cand[0] without drawing. */
int32_t pd_policy_pick(pd_policy_t *p, const uint32_t *cand, uint32_t n, const uint32_t *load,
                       pd_prng_t *rng);

/* "random" | "round_robin" | "power_of_two" -> kind; PD_ERR_INVAL otherwise. */
int pd_policy_parse(const char *name, pd_policy_kind_t *out);
const char *pd_policy_name(pd_policy_kind_t kind);

#endif
