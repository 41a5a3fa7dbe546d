/* pd_prng: the only source of randomness in core/ and sim/. xoshiro256** seeded through
 * splitmix64; the state is a value the caller owns and passes in, so one seed replays a run. */
#ifndef PD_PRNG_H
#define PD_PRNG_H
#include <stdint.h>

typedef struct pd_prng {
  uint64_t s[4];
} pd_prng_t;

void pd_prng_init(pd_prng_t *r, uint64_t seed);
uint64_t pd_prng_next(pd_prng_t *r);
/* Uniform in [0, bound); bound 0 returns 0. Unbiased (Lemire's method). */
uint64_t pd_prng_below(pd_prng_t *r, uint64_t bound);
/* Uniform double in [0, 1). */
double pd_prng_unit(pd_prng_t *r);
/* An independent stream derived from r and a label (for per-subsystem streams). */
void pd_prng_fork(pd_prng_t *r, uint64_t label, pd_prng_t *out);

#endif
