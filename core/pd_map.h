/* pd_map: a hash map from uint64 ids to pointers, by open addressing with linear probing.
 * The core keeps its live requests in one; the simulator its requests, legs and bootstrap
 * rooms. Removal leaves a tombstone; the table grows (or is rebuilt at its size when it is
 * mostly tombstones) before live keys and tombstones fill three quarters of it. The slot order
 * is a function of the operations alone, so a walk over the map is deterministic. */
#ifndef PD_MAP_H
#define PD_MAP_H
#include <stddef.h>
#include <stdint.h>

#include "pd_alloc.h"

/* "no slot": what pd_map_find returns for a key not in the map. */
#define PD_MAP_NONE SIZE_MAX
/* The largest key a map can hold (keys are stored + 1; the two top values mark empty and
 * removed slots). */
#define PD_MAP_MAX_KEY (UINT64_MAX - 2)
/* Default bound on keys: 16 Mi live requests or legs is far past any run (a scenario holds
 * thousands) and stops a leak before the table (16 bytes a slot) eats the machine. */
#define PD_MAP_DEFAULT_MAX ((size_t)1 << 24)

typedef struct pd_map {
  const pd_alloc_t *alloc;
  uint64_t *keys; /* per slot: 0 empty, UINT64_MAX removed (tombstone), else key + 1 */
  void **vals;
  size_t cap;     /* slots: 0 or a power of two */
  size_t len;     /* live keys */
  size_t tomb;    /* tombstones */
  size_t max_len; /* named limit: a new key beyond it fails with PD_ERR_LIMIT (0: default) */
} pd_map_t;

/* An empty map on alloc (NULL: libc) holding at most max_len keys (0: PD_MAP_DEFAULT_MAX).
 * A zeroed pd_map_t is the same as pd_map_init(m, NULL, 0). Allocates nothing. */
void pd_map_init(pd_map_t *m, const pd_alloc_t *alloc, size_t max_len);
/* Free the table (not the values); the map is empty and usable again. */
void pd_map_free(pd_map_t *m);

/* The slot holding key, or PD_MAP_NONE; m->vals[slot] is its value until the next put or
 * removal. */
size_t pd_map_find(const pd_map_t *m, uint64_t key);
/* key's value, or NULL when absent. */
void *pd_map_get(const pd_map_t *m, uint64_t key);
/* Insert key -> val, or replace key's value. 0; PD_ERR_INVAL for a key above PD_MAP_MAX_KEY;
 * PD_ERR_LIMIT when a new key would pass max_len; PD_ERR_NOMEM (the map is unchanged). */
int pd_map_put(pd_map_t *m, uint64_t key, void *val);
/* Remove key if present; returns its value, or NULL. */
void *pd_map_remove(pd_map_t *m, uint64_t key);
/* Remove the key at slot, a live slot from pd_map_find or pd_map_next. */
void pd_map_remove_slot(pd_map_t *m, size_t slot);
size_t pd_map_len(const pd_map_t *m);

/* Walk the live entries in slot order: *slot starts at 0; returns 1 with *key and *val
 * (either may be NULL) and *slot past the entry, or 0 at the end. Removing the entry just
 * returned (pd_map_remove_slot(m, *slot - 1)) keeps the walk valid; a put does not. */
int pd_map_next(const pd_map_t *m, size_t *slot, uint64_t *key, void **val);

#endif
