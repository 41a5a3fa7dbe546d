/* pd_hash: the hashes pdref uses, one copy each. FNV-1a (64-bit) fingerprints bytes where two
 * legs must compare equal (a leg's bootstrap fields, a shortened request id); pd_hash_mix64
 * scatters integer keys over a power-of-two table and chains the run's trace hash over binary
 * fields (sim/pd_trace.c). */
#ifndef PD_HASH_H
#define PD_HASH_H
#include <stddef.h>
#include <stdint.h>

#define PD_FNV1A_OFFSET 0xcbf29ce484222325ULL /* the hash of no bytes */
#define PD_FNV1A_PRIME 0x100000001b3ULL

/* Continue hash h over n bytes at p (h = PD_FNV1A_OFFSET to start). */
static inline uint64_t pd_fnv1a(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * PD_FNV1A_PRIME;
  return h;
}

/* Continue h over a NUL-terminated string, without its NUL; NULL hashes as "". */
static inline uint64_t pd_fnv1a_str(uint64_t h, const char *s) {
  for (; s && *s; s++) h = (h ^ (uint8_t)*s) * PD_FNV1A_PRIME;
  return h;
}

/* Continue h over v's eight bytes, least significant first (the same on every host). */
static inline uint64_t pd_fnv1a_u64(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++, v >>= 8) h = (h ^ (v & 0xff)) * PD_FNV1A_PRIME;
  return h;
}

/* A 64-bit finaliser (xorshift-multiply-xorshift): every input bit moves the low bits a table
 * index is taken from, so sequential ids spread over the table. */
static inline uint64_t pd_hash_mix64(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ULL;
  x ^= x >> 27;
  return x;
}

#endif
