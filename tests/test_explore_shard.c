/* Sharded exploration (cli/cli_shard.c, `pdref sim explore --shard-from-env`, `explore
 * merge`): the shard each batch engine's environment names, the exact-cover check the merge
 * relies on (gaps and overlaps found at their first seed, for any mix of ranges and shard
 * counts), and that a seed explored alone gives what it gives inside a batch (a shard's
 * findings do not depend on which seeds ran before it in the same process). The end-to-end
 * run over GNU parallel is tests/explore_parallel_test.sh. */
#include <stdlib.h>
#include <string.h>

#include "cli_shard.h"
#include "pd_explore.h"
#include "pdt.h"

/* A fake environment: NULL-terminated name, value pairs. */
static const char *fake_env(void *ctx, const char *name) {
  const char *const *kv = ctx;
  for (; kv[0]; kv += 2)
    if (strcmp(kv[0], name) == 0) return kv[1];
  return NULL;
}

static int shard(const char *const *kv, uint64_t shards, pd_cli_shard_t *out, char *err) {
  return pd_cli_shard_from_env(fake_env, (void *)kv, shards, out, err, 256);
}

static void test_each_engine_names_its_shard(void) {
  pd_cli_shard_t s;
  char err[256];
  const char *k8s[] = {"JOB_COMPLETION_INDEX", "3", "PDREF_SHARDS", "8", NULL};
  PDT_EQ_INT(shard(k8s, 0, &s, err), 0);
  PDT_EQ_U64(s.index, 3);
  PDT_EQ_U64(s.count, 8);
  PDT_EQ_INT(shard(k8s, 5, &s, err), 0); /* --shards wins over PDREF_SHARDS */
  PDT_EQ_U64(s.count, 5);
  /* Slurm: --array=1-7:2 gives ids 1,3,5,7 with MIN 1, STEP 2, COUNT 4 */
  const char *slurm[] = {"SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_MIN", "1",
                         "SLURM_ARRAY_TASK_STEP", "2", "SLURM_ARRAY_TASK_COUNT", "4", NULL};
  PDT_EQ_INT(shard(slurm, 0, &s, err), 0);
  PDT_EQ_U64(s.index, 2);
  PDT_EQ_U64(s.count, 4);
  PDT_TRUE(strstr(s.source, "SLURM_ARRAY_TASK_ID=5") != NULL);
  const char *slurm0[] = {"SLURM_ARRAY_TASK_ID", "0", "SLURM_ARRAY_TASK_COUNT", "2", NULL};
  PDT_EQ_INT(shard(slurm0, 0, &s, err), 0);
  PDT_EQ_U64(s.index, 0);
  const char *par[] = {"PARALLEL_SEQ", "2", NULL}; /* {#} is 1-based */
  PDT_EQ_INT(shard(par, 2, &s, err), 0);
  PDT_EQ_U64(s.index, 1);
  PDT_EQ_U64(s.count, 2);
}

static void test_a_bad_or_ambiguous_environment_is_named(void) {
  static const struct {
    const char *kv[9];
    uint64_t shards;
    const char *says;
  } bad[] = {
      {{NULL}, 2, "none of JOB_COMPLETION_INDEX"},
      {{"JOB_COMPLETION_INDEX", "1", NULL}, 0, "--shards N or set PDREF_SHARDS"},
      {{"JOB_COMPLETION_INDEX", "2", NULL}, 2, "index 2 is not below the count 2"},
      {{"JOB_COMPLETION_INDEX", "x1", NULL}, 2, "JOB_COMPLETION_INDEX='x1'"},
      {{"JOB_COMPLETION_INDEX", "1", "PDREF_SHARDS", "0", NULL}, 0, "PDREF_SHARDS='0'"},
      {{"PARALLEL_SEQ", "0", NULL}, 2, "PARALLEL_SEQ='0'"},
      {{"PARALLEL_SEQ", "1", "JOB_COMPLETION_INDEX", "0", NULL}, 2, "more than one engine"},
      {{"SLURM_ARRAY_TASK_ID", "4", NULL}, 0, "SLURM_ARRAY_TASK_COUNT is not"},
      {{"SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_STEP", "3", "SLURM_ARRAY_TASK_COUNT", "9",
        NULL}, 0, "multiple of SLURM_ARRAY_TASK_STEP=3"},
      {{"SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_MIN", "5", "SLURM_ARRAY_TASK_COUNT", "9",
        NULL}, 0, "SLURM_ARRAY_TASK_MIN='5'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    pd_cli_shard_t s;
    char err[256] = "";
    PDT_EQ_INT(shard(bad[i].kv, bad[i].shards, &s, err), -1);
    if (!strstr(err, bad[i].says)) PDT_EQ_STR(err, bad[i].says);
  }
}

static pd_cli_cover_t cover(const pd_cli_slice_t *v, size_t n) {
  pd_cli_cover_t c;
  PDT_EQ_INT(pd_cli_cover_check(v, n, &c), 0);
  return c;
}

static void test_cover_finds_the_first_gap_and_overlap(void) {
  const pd_cli_slice_t two[] = {{1, 201, 0, 2}, {1, 201, 1, 2}};
  pd_cli_cover_t c = cover(two, 2);
  PDT_EQ_INT(c.kind, PD_CLI_COVER_OK);
  PDT_EQ_U64(c.start, 1);
  PDT_EQ_U64(c.end, 201);
  c = cover(two, 1); /* only shard 0/2: seed 1 is odd */
  PDT_EQ_INT(c.kind, PD_CLI_COVER_GAP);
  PDT_EQ_U64(c.seed, 1);
  const pd_cli_slice_t dup[] = {{1, 201, 0, 2}, {1, 201, 1, 2}, {100, 201, 0, 2}};
  c = cover(dup, 3);
  PDT_EQ_INT(c.kind, PD_CLI_COVER_OVERLAP);
  PDT_EQ_U64(c.seed, 100);
  PDT_EQ_U64(c.times, 2);
  /* consecutive ranges, one shard each, and a hole between them */
  const pd_cli_slice_t seq[] = {{0, 1000, 0, 1}, {1000, 5000, 0, 1}, {5001, 6000, 0, 1}};
  PDT_EQ_INT(cover(seq, 2).kind, PD_CLI_COVER_OK);
  c = cover(seq, 3);
  PDT_EQ_INT(c.kind, PD_CLI_COVER_GAP);
  PDT_EQ_U64(c.seed, 5000);
  /* mixed counts: [0,600) as 3 shards of 3, [600,1200) as 2 halves of 4 + one /2 */
  const pd_cli_slice_t mix[] = {{0, 600, 0, 3}, {0, 600, 1, 3}, {0, 600, 2, 3},
                                {600, 1200, 0, 4}, {600, 1200, 2, 4}, {600, 1200, 1, 2}};
  PDT_EQ_INT(cover(mix, 6).kind, PD_CLI_COVER_OK);
  c = cover(mix, 5); /* without the odd half: seed 601 */
  PDT_EQ_INT(c.kind, PD_CLI_COVER_GAP);
  PDT_EQ_U64(c.seed, 601);
  /* a huge range is checked by one period, not seed by seed */
  const pd_cli_slice_t big[] = {{7, 100000000007ull, 0, 5}, {7, 100000000007ull, 1, 5},
                                {7, 100000000007ull, 2, 5}, {7, 100000000007ull, 3, 5},
                                {7, 100000000007ull, 4, 5}};
  PDT_EQ_INT(cover(big, 5).kind, PD_CLI_COVER_OK);
  c = cover(big, 4); /* no shard 4/5: the first seed with seed % 5 == 4 from 7 is 9 */
  PDT_EQ_INT(c.kind, PD_CLI_COVER_GAP);
  PDT_EQ_U64(c.seed, 9);
}

static void test_cover_refuses_malformed_slices_and_counts_seeds(void) {
  pd_cli_cover_t c;
  const pd_cli_slice_t bad_index = {0, 10, 2, 2}, bad_range = {10, 5, 0, 1};
  PDT_EQ_INT(pd_cli_cover_check(&bad_index, 1, &c), -1);
  PDT_EQ_INT(pd_cli_cover_check(&bad_range, 1, &c), -1);
  PDT_EQ_INT(pd_cli_cover_check(NULL, 0, &c), -1);
  /* coprime counts over a long stretch: the least common multiple is past the budget */
  const pd_cli_slice_t odd[] = {{0, 1ull << 40, 0, 1000003}, {0, 1ull << 40, 0, 999983}};
  PDT_EQ_INT(pd_cli_cover_check(odd, 2, &c), -2);
  const pd_cli_slice_t s1 = {1, 201, 0, 2}, s2 = {1, 201, 1, 2}, s3 = {10, 10, 0, 1},
                       s4 = {3, 10, 2, 7};
  PDT_EQ_U64(pd_cli_slice_seeds(&s1), 100); /* 2, 4, ..., 200 */
  PDT_EQ_U64(pd_cli_slice_seeds(&s2), 100); /* 1, 3, ..., 199 */
  PDT_EQ_U64(pd_cli_slice_seeds(&s3), 0);
  PDT_EQ_U64(pd_cli_slice_seeds(&s4), 1); /* 9 */
}

/* Seed N alone is seed N in a batch: the explorer keeps nothing between seeds. */
static void test_a_seed_alone_equals_the_seed_in_a_batch(void) {
  pd_scenario_t *s = malloc(sizeof *s);
  PDT_TRUE(s != NULL);
  if (!s) return;
  for (uint64_t seed = 40; seed < 48; seed++) {
    pd_explore_result_t batch, alone;
    for (uint64_t before = seed - 5; before < seed; before++) /* the batch's earlier seeds */
      PDT_EQ_INT(pd_explore_seed(s, before, PD_MODE_PR1150, 0, 0, 2, &batch), 0);
    PDT_EQ_INT(pd_explore_seed(s, seed, PD_MODE_PR1150, 0, 0, 2, &batch), 0);
    pd_scenario_t *fresh = malloc(sizeof *fresh);
    PDT_TRUE(fresh != NULL);
    if (!fresh) break;
    PDT_EQ_INT(pd_explore_seed(fresh, seed, PD_MODE_PR1150, 0, 0, 2, &alone), 0);
    PDT_EQ_U64(batch.found_mask, alone.found_mask);
    PDT_EQ_INT(batch.inv, alone.inv);
    PDT_EQ_U64(batch.shrunk_mask, alone.shrunk_mask);
    PDT_EQ_U64(batch.tie_seed, alone.tie_seed);
    PDT_EQ_INT(batch.requests_after, alone.requests_after);
    PDT_EQ_STR(batch.reason, alone.reason);
    PDT_TRUE(memcmp(s, fresh, sizeof *s) == 0); /* the shrunk case, byte for byte */
    free(fresh);
  }
  free(s);
}

int pdt_suite_explore_shard(void) {
  static const pdt_case_t cases[] = {
      {"each engine names its shard", test_each_engine_names_its_shard},
      {"a bad or ambiguous environment is named", test_a_bad_or_ambiguous_environment_is_named},
      {"cover finds the first gap and overlap", test_cover_finds_the_first_gap_and_overlap},
      {"cover refuses malformed slices and counts seeds",
       test_cover_refuses_malformed_slices_and_counts_seeds},
      {"a seed alone equals the seed in a batch", test_a_seed_alone_equals_the_seed_in_a_batch},
  };
  return PDT_SUITE("explore_shard", cases);
}
