/* pd_wire_rooms_hash (mock_workers/pd_worker_shared.c) hashes the bootstrap fields as parsed
 * values, not as printed text: two legs' fields hash alike exactly when they parse to the same
 * values (type, a number's double bit for bit, a string's bytes, arrays element by element):
 * what a worker compares when it pairs a room (SGLang compares the parsed values). The print
 * is not the measure: cJSON prints 15 digits when they read back within a tolerance, so two
 * doubles one ulp apart print alike. Checked on generated values: two legs reading the same
 * text hash alike, and neighbours hash alike exactly when they are equal. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pd_prng.h"
#include "pd_worker_shared.h"
#include "pdt.h"

#define RH_VALUES 4000

static cJSON *gen_value(pd_prng_t *r) {
  static const char *const strs[] = {"127.0.0.1", "p0", "a\"b", "tab\there", "", "é", "10.0.0.1"};
  uint64_t k = pd_prng_next(r) % 7;
  uint64_t x = pd_prng_next(r);
  switch (k) {
  case 0: return cJSON_CreateNumber((double)(x % 100000));
  case 1: return cJSON_CreateNumber((double)(x >> 11)); /* up to 2^53 */
  case 2: return cJSON_CreateNumber((double)(x >> 1));  /* past 2^53: doubles round */
  case 3: return cJSON_CreateNumber((double)(int64_t)x / 1e6);
  case 4: return cJSON_CreateString(strs[x % (sizeof strs / sizeof *strs)]);
  case 5: {
    cJSON *a = cJSON_CreateArray();
    for (uint64_t i = 0; i < 1 + x % 4; i++)
      cJSON_AddItemToArray(a, cJSON_CreateNumber((double)(pd_prng_next(r) % 8)));
    return a;
  }
  default: return x & 1 ? cJSON_CreateNull() : cJSON_CreateFalse();
  }
}

/* Equal as parsed values: numbers bit for bit. */
static int same_value(const cJSON *a, const cJSON *b) {
  if ((a->type & 0xff) != (b->type & 0xff)) return 0;
  if (cJSON_IsNumber(a)) return memcmp(&a->valuedouble, &b->valuedouble, sizeof(double)) == 0;
  if (cJSON_IsString(a)) return strcmp(a->valuestring, b->valuestring) == 0;
  const cJSON *x = a->child, *y = b->child;
  for (; x && y; x = x->next, y = y->next)
    if (!same_value(x, y)) return 0;
  return !x && !y;
}

static void test_hash_equal_iff_values_equal(void) {
  pd_prng_t r;
  pd_prng_init(&r, 14);
  cJSON *v[RH_VALUES];
  char *p[RH_VALUES];
  for (int i = 0; i < RH_VALUES; i++) {
    v[i] = gen_value(&r);
    p[i] = cJSON_PrintUnformatted(v[i]);
  }
  uint32_t same = 0, checked = 0;
  for (int i = 0; i < RH_VALUES; i++) {
    cJSON *l1 = cJSON_Parse(p[i]), *l2 = cJSON_Parse(p[i]); /* both legs read the same text */
    PDT_EQ_U64(pd_wire_rooms_hash(l1, NULL, NULL), pd_wire_rooms_hash(l2, NULL, NULL));
    cJSON_Delete(l1), cJSON_Delete(l2);
    for (int k = 1; k <= 8 && i + k < RH_VALUES; k++) {
      int eq_value = same_value(v[i], v[i + k]);
      int eq_hash = pd_wire_rooms_hash(v[i], NULL, NULL) == pd_wire_rooms_hash(v[i + k], NULL, NULL);
      if (eq_value != eq_hash) fprintf(stderr, "rooms hash: '%s' vs '%s'\n", p[i], p[i + k]);
      PDT_EQ_INT(eq_hash, eq_value);
      same += (uint32_t)eq_value;
      checked++;
    }
  }
  /* one ulp apart: the same print, different values, different hashes */
  cJSON *u = cJSON_CreateNumber(0.1), *w = cJSON_CreateNumber(nextafter(0.1, 1.0));
  char *pu = cJSON_PrintUnformatted(u), *pw = cJSON_PrintUnformatted(w);
  PDT_EQ_STR(pu, pw);
  PDT_TRUE(pd_wire_rooms_hash(u, NULL, NULL) != pd_wire_rooms_hash(w, NULL, NULL));
  cJSON_free(pu), cJSON_free(pw), cJSON_Delete(u), cJSON_Delete(w);
  PDT_TRUE(same > 50 && same < checked); /* both outcomes occur: the test can tell */
  /* each field counts, in its place: room, host, port */
  cJSON *a = cJSON_CreateNumber(7), *b = cJSON_CreateString("h"), *c = cJSON_CreateNumber(8998);
  uint64_t h = pd_wire_rooms_hash(a, b, c);
  PDT_TRUE(h != pd_wire_rooms_hash(b, a, c) && h != pd_wire_rooms_hash(a, b, NULL) &&
           h != pd_wire_rooms_hash(a, NULL, c) && h != pd_wire_rooms_hash(NULL, b, c));
  cJSON_Delete(a), cJSON_Delete(b), cJSON_Delete(c);
  for (int i = 0; i < RH_VALUES; i++) {
    cJSON_Delete(v[i]);
    cJSON_free(p[i]);
  }
}

int pdt_suite_rooms_hash(void) {
  static const pdt_case_t cases[] = {
      {"hash equal iff values equal", test_hash_equal_iff_values_equal},
  };
  return PDT_SUITE("rooms_hash", cases);
}
