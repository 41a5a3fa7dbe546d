/* pd_hash: FNV-1a against the published 64-bit test vectors, the string and integer forms
 * agreeing with the byte form, and the table mixer spreading sequential ids. */
#include "pd_hash.h"
#include "pdt.h"

static void test_fnv1a_known_vectors(void) {
  PDT_EQ_U64(pd_fnv1a(PD_FNV1A_OFFSET, "", 0), 0xcbf29ce484222325ULL);
  PDT_EQ_U64(pd_fnv1a(PD_FNV1A_OFFSET, "a", 1), 0xaf63dc4c8601ec8cULL);
  PDT_EQ_U64(pd_fnv1a(PD_FNV1A_OFFSET, "foobar", 6), 0x85944171f73967e8ULL);
  PDT_EQ_U64(pd_fnv1a_str(PD_FNV1A_OFFSET, "foobar"), 0x85944171f73967e8ULL);
  PDT_EQ_U64(pd_fnv1a_str(PD_FNV1A_OFFSET, NULL), PD_FNV1A_OFFSET); /* NULL hashes as "" */
}

static void test_fnv1a_continues_across_calls(void) {
  uint64_t h = pd_fnv1a_str(pd_fnv1a_str(PD_FNV1A_OFFSET, "foo"), "bar");
  PDT_EQ_U64(h, pd_fnv1a_str(PD_FNV1A_OFFSET, "foobar"));
  PDT_TRUE(pd_fnv1a_str(PD_FNV1A_OFFSET, "ab") != pd_fnv1a_str(PD_FNV1A_OFFSET, "ba"));
}

static void test_fnv1a_u64_is_little_endian_bytes(void) {
  const uint8_t le[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  PDT_EQ_U64(pd_fnv1a_u64(PD_FNV1A_OFFSET, 0x0102030405060708ULL),
             pd_fnv1a(PD_FNV1A_OFFSET, le, sizeof le));
  PDT_EQ_U64(pd_fnv1a_u64(PD_FNV1A_OFFSET, 0x0102030405060708ULL), 0x0c6d4496e17859d5ULL);
}

/* 4096 sequential ids over 8192 slots: the low 13 bits of the mix take most values once. */
static void test_mix64_spreads_sequential_ids(void) {
  static uint8_t hit[8192];
  memset(hit, 0, sizeof hit);
  unsigned distinct = 0;
  for (uint64_t id = 1; id <= 4096; id++) {
    uint64_t j = pd_hash_mix64(id) & 8191;
    distinct += !hit[j];
    hit[j] = 1;
  }
  PDT_TRUE(distinct > 3000); /* a random function gives ~3220; the identity would give 4096 */
  PDT_TRUE(pd_hash_mix64(1) != 1 && pd_hash_mix64(2) != pd_hash_mix64(1) + 1);
}

int pdt_suite_hash(void) {
  static const pdt_case_t cases[] = {
      {"FNV-1a matches the published 64-bit vectors", test_fnv1a_known_vectors},
      {"FNV-1a continues across calls", test_fnv1a_continues_across_calls},
      {"FNV-1a of a u64 hashes its bytes least significant first",
       test_fnv1a_u64_is_little_endian_bytes},
      {"mix64 spreads sequential ids over a table", test_mix64_spreads_sequential_ids},
  };
  return PDT_SUITE("hash", cases);
}
