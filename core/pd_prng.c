#include "pd_prng.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void pd_prng_init(pd_prng_t *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t pd_prng_next(pd_prng_t *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint64_t pd_prng_below(pd_prng_t *r, uint64_t bound) {
  if (bound == 0) return 0;
  /* 128-bit multiply with rejection of the biased low region. */
  unsigned __int128 m = (unsigned __int128)pd_prng_next(r) * bound;
  uint64_t lo = (uint64_t)m;
  if (lo < bound) {
    uint64_t thresh = (0 - bound) % bound;
    while (lo < thresh) { /* bounded in expectation: P(retry) < bound / 2^64 */
      m = (unsigned __int128)pd_prng_next(r) * bound;
      lo = (uint64_t)m;
    }
  }
  return (uint64_t)(m >> 64);
}

double pd_prng_unit(pd_prng_t *r) { return (double)(pd_prng_next(r) >> 11) * 0x1.0p-53; }

void pd_prng_fork(pd_prng_t *r, uint64_t label, pd_prng_t *out) {
  pd_prng_init(out, pd_prng_next(r) ^ (label * 0x9e3779b97f4a7c15ULL));
}
