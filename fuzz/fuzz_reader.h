/* fuzz_reader: how every fuzz target reads its input. Bytes are taken from the front one at a
 * time; past the end every read is 0, so any input, however short, decodes to a whole run.
 * FZ_CHECK traps (a crash libFuzzer reports) when a property does not hold. */
#ifndef FUZZ_READER_H
#define FUZZ_READER_H
#include <stddef.h>
#include <stdint.h>

#define FZ_CHECK(c)             \
  do {                          \
    if (!(c)) __builtin_trap(); \
  } while (0)

typedef struct fz_reader {
  const uint8_t *p; /* the bytes not read yet */
  size_t n;
} fz_reader_t;

static inline fz_reader_t fz_reader(const uint8_t *data, size_t size) {
  fz_reader_t r = {data, size};
  return r;
}

/* The next byte, or 0 past the end. */
static inline uint8_t fz_u8(fz_reader_t *r) {
  if (r->n == 0) return 0;
  r->n--;
  return *r->p++;
}

/* The next two bytes, big-endian. */
static inline uint16_t fz_u16(fz_reader_t *r) {
  uint16_t hi = fz_u8(r);
  return (uint16_t)(hi << 8 | fz_u8(r));
}

/* The next eight bytes, big-endian. */
static inline uint64_t fz_u64(fz_reader_t *r) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | fz_u8(r);
  return v;
}

#endif
