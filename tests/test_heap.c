/* pd_heap: events pop in (time, insertion) order, named limit, allocation failure, and the
 * indexed use (positions tracked, removal before due, reserve). */
#include <stdlib.h>

#include "pd_alloc.h"
#include "pd_err.h"
#include "pd_heap.h"
#include "pd_prng.h"
#include "pdt.h"
#include "pdt_alloc.h"

#define HEAP_SEED 0x5eed0001ULL
#define RANDOM_ROUNDS 8
#define RANDOM_OPS 4000

static pd_heap_item_t item_at(uint64_t t_ns, uint32_t a) {
  pd_heap_item_t it = {t_ns, 0, 0, a, 0, 0, 0};
  return it;
}

static void test_equal_times_pop_in_insertion_order(void) {
  pd_heap_t h;
  pd_heap_init(&h, NULL, 0);
  for (uint32_t i = 0; i < 1000; i++) {
    pd_heap_item_t it = item_at(42, i);
    it.seq = 999999; /* overwritten by push */
    PDT_EQ_INT(pd_heap_push(&h, &it), 0);
  }
  pd_heap_item_t out;
  for (uint32_t i = 0; i < 1000; i++) {
    PDT_EQ_INT(pd_heap_pop(&h, &out), 1);
    PDT_EQ_U64(out.a, i);
    PDT_EQ_U64(out.seq, i);
    PDT_EQ_U64(out.t_ns, 42);
  }
  PDT_EQ_INT(pd_heap_pop(&h, &out), 0);
  pd_heap_free(&h);
}

static void test_mixed_times_pop_by_time_then_insertion(void) {
  pd_heap_t h;
  pd_heap_init(&h, NULL, 0);
  for (uint32_t i = 0; i < 700; i++) { /* times 6,5,..,0 repeating: many ties each */
    pd_heap_item_t it = item_at(6 - i % 7, i);
    PDT_EQ_INT(pd_heap_push(&h, &it), 0);
  }
  PDT_EQ_U64(pd_heap_len(&h), 700);
  PDT_EQ_U64(pd_heap_peek(&h)->t_ns, 0);
  PDT_EQ_U64(pd_heap_peek(&h)->a, 6);
  pd_heap_item_t out;
  for (uint64_t t = 0; t < 7; t++) {
    for (uint32_t k = 0; k < 100; k++) {
      PDT_EQ_INT(pd_heap_pop(&h, &out), 1);
      PDT_EQ_U64(out.t_ns, t);
      PDT_EQ_U64(out.a, (6 - t) + 7 * k);
    }
  }
  PDT_EQ_U64(pd_heap_len(&h), 0);
  PDT_TRUE(pd_heap_peek(&h) == NULL);
  pd_heap_free(&h);
}

/* Reference: an unsorted array; pop takes the least (t, seq) by linear scan. */
typedef struct ref {
  pd_heap_item_t v[RANDOM_OPS];
  size_t n;
} ref_t;

static pd_heap_item_t ref_pop(ref_t *r) {
  size_t m = 0;
  for (size_t i = 1; i < r->n; i++) {
    const pd_heap_item_t *x = &r->v[i], *y = &r->v[m];
    if (x->t_ns < y->t_ns || (x->t_ns == y->t_ns && x->seq < y->seq)) m = i;
  }
  pd_heap_item_t out = r->v[m];
  r->v[m] = r->v[--r->n];
  return out;
}

static void random_round(uint64_t seed) {
  static ref_t ref;
  pd_prng_t rng;
  pd_prng_init(&rng, seed);
  pd_heap_t h;
  pd_heap_init(&h, NULL, 0);
  ref.n = 0;
  uint64_t t_range = 1 + pd_prng_below(&rng, 64); /* small ranges force many ties */
  uint64_t seq = 0;
  int mismatches = 0;
  for (int op = 0; op < RANDOM_OPS && mismatches < 5; op++) {
    if (ref.n == 0 || pd_prng_below(&rng, 100) < 55) {
      pd_heap_item_t it = item_at(pd_prng_below(&rng, t_range), (uint32_t)op);
      it.b = pd_prng_next(&rng);
      PDT_EQ_INT(pd_heap_push(&h, &it), 0);
      it.seq = seq++;
      ref.v[ref.n++] = it;
    } else {
      pd_heap_item_t want = ref_pop(&ref), got;
      PDT_EQ_INT(pd_heap_pop(&h, &got), 1);
      int same = got.t_ns == want.t_ns && got.seq == want.seq && got.a == want.a &&
                 got.b == want.b;
      if (!same) {
        mismatches++;
        printf("\nheap random: seed=%" PRIu64 " op=%d got (%" PRIu64 ",%" PRIu64
               ") want (%" PRIu64 ",%" PRIu64 ")\n",
               seed, op, got.t_ns, got.seq, want.t_ns, want.seq);
      }
      PDT_TRUE(same);
    }
    PDT_EQ_U64(pd_heap_len(&h), ref.n);
  }
  pd_heap_free(&h);
}

static void test_random_ops_match_sorted_reference(void) {
  printf("\nheap random: base seed=%" PRIu64 " (round r uses seed+r)\n", (uint64_t)HEAP_SEED);
  for (uint64_t r = 0; r < RANDOM_ROUNDS; r++) random_round(HEAP_SEED + r);
}

static void test_limit_returns_err_limit(void) {
  pd_heap_t h;
  pd_heap_init(&h, NULL, 3);
  pd_heap_item_t it = item_at(1, 0), out;
  for (int i = 0; i < 3; i++) PDT_EQ_INT(pd_heap_push(&h, &it), 0);
  PDT_EQ_INT(pd_heap_push(&h, &it), PD_ERR_LIMIT);
  PDT_EQ_U64(pd_heap_len(&h), 3);
  PDT_EQ_INT(pd_heap_pop(&h, &out), 1);
  PDT_EQ_INT(pd_heap_push(&h, &it), 0);
  PDT_EQ_U64(pd_heap_len(&h), 3);
  pd_heap_free(&h);
}

static void test_default_limit_is_nonzero(void) {
  pd_heap_t h;
  pd_heap_init(&h, NULL, 0);
  PDT_EQ_U64(h.max_items, (uint64_t)1 << 26);
  pd_heap_free(&h);
}

/* Fail the k-th allocation for each k reached by 5000 pushes: exactly one push reports
 * NOMEM, the heap stays ordered and usable, and every block is released. */
static void test_alloc_failure_returns_nomem(void) {
  for (unsigned k = 1; k <= 16; k++) {
    pdt_alloc_t f = {.fail_at = k};
    pd_alloc_t a = pdt_alloc(&f);
    pd_heap_t h;
    pd_heap_init(&h, &a, 0);
    int nomem = 0;
    for (uint32_t i = 0; i < 5000; i++) {
      pd_heap_item_t it = item_at(5000 - i, i);
      int rc = pd_heap_push(&h, &it);
      if (rc == PD_ERR_NOMEM) nomem++;
      else PDT_EQ_INT(rc, 0);
    }
    unsigned reached = f.calls;
    PDT_EQ_INT(nomem, k <= reached ? 1 : 0);
    PDT_EQ_U64(pd_heap_len(&h), 5000 - (uint64_t)nomem);
    pd_heap_item_t prev = {0}, out;
    size_t popped = 0;
    while (pd_heap_pop(&h, &out) == 1 && popped < 5000) {
      PDT_TRUE(popped == 0 || prev.t_ns < out.t_ns);
      prev = out;
      popped++;
    }
    PDT_EQ_U64(popped, 5000 - (uint64_t)nomem);
    pd_heap_free(&h);
    PDT_EQ_INT(f.live, 0);
  }
}

static void test_pop_without_out_discards(void) {
  pd_heap_t h;
  pd_heap_init(&h, NULL, 0);
  pd_heap_item_t a = item_at(2, 7), b = item_at(1, 8);
  PDT_EQ_INT(pd_heap_push(&h, &a), 0);
  PDT_EQ_INT(pd_heap_push(&h, &b), 0);
  PDT_EQ_INT(pd_heap_pop(&h, NULL), 1);
  PDT_EQ_U64(pd_heap_peek(&h)->a, 7);
  pd_heap_free(&h);
  PDT_EQ_U64(pd_heap_len(&h), 0);
}

/* Indexed use: the item's a is its handle; the tracking callback keeps track_pos. */
#define TRACK_HANDLES 256
static size_t track_pos[TRACK_HANDLES];

static void track(const pd_heap_item_t *it, size_t index) { track_pos[it->a] = index; }

static void ref_remove_handle(ref_t *r, uint32_t handle) {
  for (size_t i = 0; i < r->n; i++)
    if (r->v[i].a == handle) {
      r->v[i] = r->v[--r->n];
      return;
    }
}

/* Every live handle sits where the callback said; every other one is PD_HEAP_NONE. */
static int positions_hold(const pd_heap_t *h, const int *is_live) {
  for (uint32_t k = 0; k < TRACK_HANDLES; k++) {
    size_t i = track_pos[k];
    if (is_live[k] ? i >= pd_heap_len(h) || h->v[i].a != k : i != PD_HEAP_NONE) return 0;
  }
  return 1;
}

static void random_indexed_round(uint64_t seed) {
  static ref_t ref;
  int is_live[TRACK_HANDLES] = {0};
  pd_prng_t rng;
  pd_prng_init(&rng, seed);
  pd_heap_t h;
  pd_heap_init(&h, NULL, 0);
  pd_heap_set_track(&h, track);
  for (uint32_t k = 0; k < TRACK_HANDLES; k++) track_pos[k] = PD_HEAP_NONE;
  ref.n = 0;
  uint64_t t_range = 1 + pd_prng_below(&rng, 16), seq = 0;
  int bad = 0;
  for (int op = 0; op < RANDOM_OPS && bad < 5; op++) {
    uint32_t k = (uint32_t)pd_prng_below(&rng, TRACK_HANDLES);
    uint64_t dice = pd_prng_below(&rng, 100);
    if (!is_live[k]) { /* arm handle k */
      pd_heap_item_t it = item_at(pd_prng_below(&rng, t_range), k);
      PDT_EQ_INT(pd_heap_push(&h, &it), 0);
      it.seq = seq++;
      ref.v[ref.n++] = it;
      is_live[k] = 1;
    } else if (dice < 60) { /* disarm handle k before it is due */
      pd_heap_item_t got;
      pd_heap_remove(&h, track_pos[k], &got);
      bad += got.a != k;
      PDT_EQ_U64(got.a, k);
      ref_remove_handle(&ref, k);
      is_live[k] = 0;
    } else if (dice < 80) { /* re-arm handle k at another time: as removed and pushed */
      uint64_t t = pd_prng_below(&rng, t_range);
      pd_heap_rekey(&h, track_pos[k], t);
      for (size_t i = 0; i < ref.n; i++)
        if (ref.v[i].a == k) {
          ref.v[i].t_ns = t;
          ref.v[i].seq = seq++;
        }
    } else { /* the least one is due */
      pd_heap_item_t want = ref_pop(&ref), got;
      PDT_EQ_INT(pd_heap_pop(&h, &got), 1);
      bad += got.seq != want.seq;
      PDT_EQ_U64(got.seq, want.seq);
      is_live[got.a] = 0;
    }
    int ok = positions_hold(&h, is_live);
    bad += !ok;
    PDT_TRUE(ok);
    PDT_EQ_U64(pd_heap_len(&h), ref.n);
  }
  if (bad) printf("\nheap indexed: seed=%" PRIu64 " failed\n", seed);
  pd_heap_free(&h);
}

static void test_indexed_removal_keeps_order_and_positions(void) {
  printf("\nheap indexed: base seed=%" PRIu64 " (round r uses seed+r)\n", (uint64_t)HEAP_SEED);
  for (uint64_t r = 0; r < RANDOM_ROUNDS; r++) random_indexed_round(HEAP_SEED + r);
}

/* pd_heap_filter keeps what keep() says, and the survivors pop in the order they would have
 * (seeded: item a's parity decides). Sizes 0..40 cover the heapify's first parent. */
static int keep_even(void *ud, const pd_heap_item_t *it) {
  (void)ud;
  return it->a % 2 == 0;
}

static void test_filter_keeps_order(void) {
  pd_prng_t rng;
  pd_prng_init(&rng, HEAP_SEED);
  for (uint32_t n = 0; n <= 40; n++) {
    static ref_t ref;
    ref.n = 0;
    pd_heap_t h;
    pd_heap_init(&h, NULL, 0);
    uint64_t seq = 0;
    for (uint32_t i = 0; i < n; i++) {
      pd_heap_item_t it = item_at(pd_prng_below(&rng, 8), (uint32_t)pd_prng_below(&rng, 100));
      PDT_EQ_INT(pd_heap_push(&h, &it), 0);
      it.seq = seq++;
      if (it.a % 2 == 0) ref.v[ref.n++] = it;
    }
    size_t kept = ref.n;
    PDT_EQ_U64(pd_heap_filter(&h, keep_even, NULL), n - kept);
    PDT_EQ_U64(pd_heap_len(&h), kept);
    for (size_t i = 0; i < kept; i++) {
      pd_heap_item_t want = ref_pop(&ref), got;
      PDT_EQ_INT(pd_heap_pop(&h, &got), 1);
      PDT_EQ_U64(got.seq, want.seq);
    }
    PDT_EQ_INT(pd_heap_pop(&h, NULL), 0);
    pd_heap_free(&h);
  }
}

/* After pd_heap_reserve(n), n pushes allocate nothing: they cannot fail. */
static void test_reserve_makes_pushes_infallible(void) {
  pdt_alloc_t f = {.fail_at = 2}; /* the allocation after the reserve's would fail */
  pd_alloc_t a = pdt_alloc(&f);
  pd_heap_t h;
  pd_heap_init(&h, &a, 1000);
  PDT_EQ_INT(pd_heap_reserve(&h, 700), 0);
  PDT_EQ_U64(f.calls, 1);
  for (uint32_t i = 0; i < 700; i++) {
    pd_heap_item_t it = item_at(i % 13, i);
    PDT_EQ_INT(pd_heap_push(&h, &it), 0);
  }
  PDT_EQ_U64(f.calls, 1);
  PDT_EQ_INT(pd_heap_reserve(&h, 1001), PD_ERR_LIMIT);
  pd_heap_free(&h);
  PDT_EQ_INT(f.live, 0);
}

int pdt_suite_heap(void) {
  static const pdt_case_t cases[] = {
      {"equal times pop in insertion order", test_equal_times_pop_in_insertion_order},
      {"mixed times pop by time then insertion", test_mixed_times_pop_by_time_then_insertion},
      {"random push/pop matches a sorted reference", test_random_ops_match_sorted_reference},
      {"push beyond max_items fails with PD_ERR_LIMIT", test_limit_returns_err_limit},
      {"max_items 0 means the default bound", test_default_limit_is_nonzero},
      {"allocation failure returns PD_ERR_NOMEM and leaks nothing",
       test_alloc_failure_returns_nomem},
      {"pop with NULL out discards the least item", test_pop_without_out_discards},
      {"indexed: removal and re-keying keep the order, the callback keeps every position",
       test_indexed_removal_keeps_order_and_positions},
      {"reserve makes the pushes up to it infallible", test_reserve_makes_pushes_infallible},
      {"filter keeps the chosen items in their pop order", test_filter_keeps_order},
  };
  return PDT_SUITE("heap", cases);
}
