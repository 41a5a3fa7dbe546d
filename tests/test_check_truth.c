/* The checker judges from the workers' ground truth (docs/spec.md section 6, issue 24): hand-made
 * requests (pdt_judge.h) whose legs' times and truths are set to the corners the invariants
 * must tell apart. */
#include <stdlib.h>

#include "pd_check.h"
#include "pdt.h"
#include "pdt_judge.h"

#define MS 1000000ull
#define BIT(i) (1u << ((i) - 1))

/* I3 and I18: a request that reached its worker after t_end + grace and was dropped in the
 * instant it was taken held nothing past the bound; one held for any time past it did. */
static void test_taken_and_freed_in_one_instant_late_is_not_held(void) {
  char reason[200];
  pdt_judged_t *k = pdt_served(PD_MODE_REFERENCE, 1, 5000);
  if (!k) return;
  pd_worker_leg_t *d = &k->leg[1];
  d->slot_taken = d->is_slot_freed = 1;
  d->t_slot_taken = d->t_slot_freed = 2200 * MS; /* t_end 200 ms + grace 1000 ms < 2200 ms */
  d->t_kv_taken = d->t_kv_freed = 2200 * MS;
  PDT_EQ_U64(pdt_judge(k, reason, sizeof reason), 0);
  free(k);

  k = pdt_served(PD_MODE_REFERENCE, 1, 5000); /* the same, held 1 ns: both flagged */
  if (!k) return;
  d = &k->leg[1];
  d->slot_taken = d->is_slot_freed = 1;
  d->t_slot_taken = d->t_kv_taken = 2200 * MS;
  d->t_slot_freed = d->t_kv_freed = 2200 * MS + 1;
  PDT_EQ_U64(pdt_judge(k, reason, sizeof reason),
             BIT(PD_INVARIANT_STRANDED_SLOT) | BIT(PD_INVARIANT_STRANDED_KV));
  free(k);
}

int pdt_suite_check_truth(void) {
  static const pdt_case_t cases[] = {
      {"I3/I18: taken and freed in one instant after the bound",
       test_taken_and_freed_in_one_instant_late_is_not_held},
  };
  return PDT_SUITE("check_truth", cases);
}
