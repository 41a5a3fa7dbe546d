#include "pd_map.h"

#include <assert.h>

#include "pd_err.h"
#include "pd_hash.h"

/* First table: 64 slots, so small runs grow a few times at most. */
#define PD_MAP_MIN_CAP ((size_t)64)
#define SLOT_EMPTY 0u
#define SLOT_TOMB UINT64_MAX

static size_t max_len(const pd_map_t *m) { return m->max_len ? m->max_len : PD_MAP_DEFAULT_MAX; }
static int is_live(uint64_t stored) { return stored != SLOT_EMPTY && stored != SLOT_TOMB; }

void pd_map_init(pd_map_t *m, const pd_alloc_t *alloc, size_t max_keys) {
  m->alloc = alloc;
  m->keys = NULL;
  m->vals = NULL;
  m->cap = m->len = m->tomb = 0;
  m->max_len = max_keys;
}

void pd_map_free(pd_map_t *m) {
  pd_free(m->alloc, m->keys);
  pd_free(m->alloc, m->vals);
  m->keys = NULL;
  m->vals = NULL;
  m->cap = m->len = m->tomb = 0;
}

/* Double the table, or rebuild it at its size when fewer than a quarter of the slots are
 * live (the rest tombstones): either way the tombstones go. */
static int map_grow(pd_map_t *m) {
  size_t nc = m->cap ? m->cap * 2 : PD_MAP_MIN_CAP;
  if (m->len * 4 < m->cap) nc = m->cap;
  uint64_t *nk = pd_calloc(m->alloc, nc, sizeof *nk);
  void **nv = pd_calloc(m->alloc, nc, sizeof *nv);
  if (!nk || !nv) {
    pd_free(m->alloc, nk);
    pd_free(m->alloc, nv);
    return PD_ERR_NOMEM;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!is_live(m->keys[i])) continue;
    size_t j = pd_hash_mix64(m->keys[i]) & (nc - 1);
    while (nk[j] != SLOT_EMPTY) j = (j + 1) & (nc - 1); /* bounded: nc > len */
    nk[j] = m->keys[i];
    nv[j] = m->vals[i];
  }
  pd_free(m->alloc, m->keys);
  pd_free(m->alloc, m->vals);
  m->keys = nk;
  m->vals = nv;
  m->cap = nc;
  m->tomb = 0;
  return 0;
}

size_t pd_map_find(const pd_map_t *m, uint64_t key) {
  if (!m->cap || key > PD_MAP_MAX_KEY) return PD_MAP_NONE;
  uint64_t stored = key + 1;
  size_t j = pd_hash_mix64(stored) & (m->cap - 1);
  for (size_t n = 0; n < m->cap; n++, j = (j + 1) & (m->cap - 1)) {
    if (m->keys[j] == SLOT_EMPTY) return PD_MAP_NONE;
    if (m->keys[j] == stored) return j;
  }
  return PD_MAP_NONE;
}

void *pd_map_get(const pd_map_t *m, uint64_t key) {
  size_t s = pd_map_find(m, key);
  return s == PD_MAP_NONE ? NULL : m->vals[s];
}

int pd_map_put(pd_map_t *m, uint64_t key, void *val) {
  if (key > PD_MAP_MAX_KEY) return PD_ERR_INVAL;
  size_t s = pd_map_find(m, key);
  if (s != PD_MAP_NONE) {
    m->vals[s] = val;
    return 0;
  }
  if (m->len >= max_len(m)) return PD_ERR_LIMIT;
  if ((m->len + m->tomb + 1) * 4 >= m->cap * 3) {
    int rc = map_grow(m);
    if (rc) return rc;
  }
  uint64_t stored = key + 1;
  size_t j = pd_hash_mix64(stored) & (m->cap - 1);
  while (is_live(m->keys[j])) j = (j + 1) & (m->cap - 1); /* bounded: a quarter is free */
  if (m->keys[j] == SLOT_TOMB) m->tomb--;
  m->keys[j] = stored;
  m->vals[j] = val;
  m->len++;
  return 0;
}

void pd_map_remove_slot(pd_map_t *m, size_t slot) {
  assert(slot < m->cap && is_live(m->keys[slot]));
  m->keys[slot] = SLOT_TOMB;
  m->vals[slot] = NULL;
  m->len--;
  m->tomb++;
}

void *pd_map_remove(pd_map_t *m, uint64_t key) {
  size_t s = pd_map_find(m, key);
  if (s == PD_MAP_NONE) return NULL;
  void *v = m->vals[s];
  pd_map_remove_slot(m, s);
  return v;
}

size_t pd_map_len(const pd_map_t *m) { return m->len; }

int pd_map_next(const pd_map_t *m, size_t *slot, uint64_t *key, void **val) {
  for (size_t i = *slot; i < m->cap; i++) {
    if (!is_live(m->keys[i])) continue;
    if (key) *key = m->keys[i] - 1;
    if (val) *val = m->vals[i];
    *slot = i + 1;
    return 1;
  }
  *slot = m->cap;
  return 0;
}
