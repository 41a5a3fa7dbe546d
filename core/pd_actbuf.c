/* The caller-owned action list and its byte arena. Arena blocks never move, so pointers
 * handed out in actions stay valid until pd_actbuf_reset. */
#include <string.h>

#include "pd_dispatch.h"
#include "pd_err.h"
#include "pd_gw_int.h"

#define PD_ACTBLOCK_MIN_BYTES 4096u

struct pd_actblock {
  struct pd_actblock *next;
  size_t used, cap;
  uint8_t data[];
};

void pd_actbuf_init(pd_actbuf_t *b, const pd_alloc_t *alloc) {
  memset(b, 0, sizeof *b);
  b->alloc = alloc;
}

void pd_actbuf_reset(pd_actbuf_t *b) {
  b->n = 0;
  b->step_start = 0;
  b->is_overflow = 0;
  struct pd_actblock *blk = b->blocks;
  if (!blk) return;
  /* keep the first (newest) block, free the rest */
  struct pd_actblock *rest = blk->next;
  blk->next = NULL;
  blk->used = 0;
  while (rest) {
    struct pd_actblock *nx = rest->next;
    pd_free(b->alloc, rest);
    rest = nx;
  }
}

void pd_actbuf_free(pd_actbuf_t *b) {
  pd_actbuf_reset(b);
  pd_free(b->alloc, b->blocks);
  pd_free(b->alloc, b->v);
  memset(b, 0, sizeof *b);
}


int pd_actbuf_reserve(pd_actbuf_t *b, size_t extra) {
  if (b->cap - b->n >= extra) return 0;
  size_t nc = b->cap ? b->cap : 16;
  while (nc - b->n < extra) nc *= 2;
  pd_action_t *nv = pd_realloc(b->alloc, b->v, nc * sizeof *nv);
  if (!nv) return PD_ERR_NOMEM;
  b->v = nv;
  b->cap = nc;
  return 0;
}

pd_action_t *pd_actbuf_push(pd_actbuf_t *b) {
  if (b->n - b->step_start >= PD_MAX_ACTIONS_PER_EVENT) {
    b->is_overflow = 1;
    return NULL;
  }
  if (b->n == b->cap) {
    size_t nc = b->cap ? b->cap * 2 : 16;
    pd_action_t *nv = pd_realloc(b->alloc, b->v, nc * sizeof *nv);
    if (!nv) return NULL;
    b->v = nv;
    b->cap = nc;
  }
  pd_action_t *a = &b->v[b->n++];
  memset(a, 0, sizeof *a);
  return a;
}

int pd_actbuf_extend(pd_actbuf_t *b, const uint8_t *prev, size_t prev_len, const void *p,
                     size_t len) {
  struct pd_actblock *blk = b->blocks;
  if (!blk || prev < blk->data || prev + prev_len + 1 != blk->data + blk->used ||
      blk->cap - blk->used < len)
    return 0; /* not the newest payload, or no room: the caller keeps a new one */
  memcpy((uint8_t *)prev + prev_len, p, len); /* over the NUL, then a new one */
  ((uint8_t *)prev)[prev_len + len] = 0;
  blk->used += len;
  return 1;
}

const uint8_t *pd_actbuf_keep(pd_actbuf_t *b, const void *p, size_t len) {
  struct pd_actblock *blk = b->blocks;
  if (!blk || blk->cap - blk->used < len + 1) {
    size_t cap = len + 1 > PD_ACTBLOCK_MIN_BYTES ? len + 1 : PD_ACTBLOCK_MIN_BYTES;
    struct pd_actblock *nb = pd_malloc(b->alloc, sizeof *nb + cap);
    if (!nb) return NULL;
    nb->next = blk;
    nb->used = 0;
    nb->cap = cap;
    b->blocks = nb;
    blk = nb;
  }
  uint8_t *d = blk->data + blk->used;
  if (len) memcpy(d, p, len);
  d[len] = 0; /* payloads are also usable as C strings */
  blk->used += len + 1;
  return d;
}
