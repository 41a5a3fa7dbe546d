/* pd_pool: blocks of every size class are 16-aligned, hold their full size without touching
 * their neighbours, come back from the free list of their class, and large ones go through
 * malloc; pd_pool_free returns every slab. */
#include <stdint.h>
#include <string.h>

#include "pd_pool.h"
#include "pdt.h"

static void t_pool_blocks_hold_their_size_and_are_reused(void) {
  static const size_t sizes[] = {0, 1, 15, 16, 17, 31, 64, 65, 127, 200, 256, 511, 512, 513, 4000};
  enum { N = sizeof sizes / sizeof *sizes, ROUNDS = 700 };
  static unsigned char *blocks[ROUNDS][N];
  pd_pool_t p;
  pd_pool_init(&p);
  for (int r = 0; r < ROUNDS; r++) /* more than one slab of every class */
    for (int i = 0; i < N; i++) {
      blocks[r][i] = pd_pool_malloc(&p, sizes[i]);
      PDT_TRUE(blocks[r][i] != NULL);
      PDT_EQ_U64((uintptr_t)blocks[r][i] % 16, 0);
      memset(blocks[r][i], (r * N + i) & 0xff, sizes[i]);
    }
  PDT_TRUE(p.n_slabs > 1);
  for (int r = 0; r < ROUNDS; r++)
    for (int i = 0; i < N; i++)
      for (size_t k = 0; k < sizes[i]; k++)
        if (blocks[r][i][k] != ((r * N + i) & 0xff)) {
          PDT_TRUE(!"a block was overwritten by a neighbour");
          return;
        }
  size_t slabs = p.n_slabs;
  for (int i = 0; i < N; i++) { /* freed, then the same class hands the same block back */
    pd_pool_release(&p, blocks[3][i]);
    void *again = pd_pool_malloc(&p, sizes[i]);
    if (sizes[i] <= 512) PDT_TRUE(again == blocks[3][i]);
    blocks[3][i] = again;
  }
  for (int r = 0; r < ROUNDS; r++)
    for (int i = 0; i < N; i++) pd_pool_release(&p, blocks[r][i]);
  for (int r = 0; r < ROUNDS; r++) /* all of it again: no new slab */
    for (int i = 0; i < N; i++) blocks[r][i] = pd_pool_malloc(&p, sizes[i]);
  PDT_EQ_U64(p.n_slabs, slabs);
  for (int r = 0; r < ROUNDS; r++)
    for (int i = 0; i < N; i++) pd_pool_release(&p, blocks[r][i]);
  pd_pool_release(&p, NULL);
  pd_pool_free(&p);
  PDT_EQ_U64(p.n_slabs, 0);
}

int pdt_suite_pool(void) {
  static const pdt_case_t cases[] = {
      {"pool blocks hold their size and are reused", t_pool_blocks_hold_their_size_and_are_reused},
  };
  return PDT_SUITE("pool", cases);
}
