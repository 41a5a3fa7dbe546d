/* cli_shard: exploration split over the batch engines users already have (docs/explore.md
 * "Scale-out"). A shard i/n explores the seeds s of a range with s % n == i. Two pure pieces:
 *   - which shard this process is, read from the engine's environment (Kubernetes Indexed
 *     Jobs, Slurm job arrays, GNU parallel), through a lookup function so tests need no
 *     real environment;
 *   - whether a set of shard results covers a seed range exactly once (the merge's check:
 *     a seed no shard explored is a gap, a seed two explored is an overlap; both are errors).
 * No clock, no globals. */
#ifndef PD_CLI_SHARD_H
#define PD_CLI_SHARD_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The "schema" of a `pdref sim explore --result` file and of a merge's --json summary. */
/* /2: seeds and counts are JSON numbers (a decimal string only above 2^53), times end in _s;
 * /1 (seeds as strings) is still read. docs/explore-result.schema.json,
 * docs/explore-merge.schema.json. */
#define PD_EXPLORE_RESULT_SCHEMA "pdref-explore-result/2"
#define PD_EXPLORE_RESULT_SCHEMA_V1 "pdref-explore-result/1"
#define PD_EXPLORE_MERGE_SCHEMA "pdref-explore-merge/2"
#define PD_EXPLORE_MERGE_SCHEMA_V1 "pdref-explore-merge/1"
/* s names an explore result (this version or /1). */
#define PD_EXPLORE_IS_RESULT(s) \
  ((s) && (!strcmp((s), PD_EXPLORE_RESULT_SCHEMA) || !strcmp((s), PD_EXPLORE_RESULT_SCHEMA_V1)))

/* Looks a variable up (NULL: unset); ctx is the caller's. */
typedef const char *(*pd_cli_env_fn)(void *ctx, const char *name);

typedef struct pd_cli_shard {
  uint64_t index, count;  /* 0 <= index < count */
  char source[96];        /* what it came from, e.g. "SLURM_ARRAY_TASK_ID=5 of 8" */
} pd_cli_shard_t;

/* The shard from the first engine whose variables are set:
 *   Kubernetes Indexed Job: JOB_COMPLETION_INDEX (0-based); the count is not in the pod's
 *     environment, so it comes from `shards` (--shards N) or PDREF_SHARDS;
 *   Slurm job array: (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP
 *     (MIN 0 and STEP 1 when unset) of SLURM_ARRAY_TASK_COUNT;
 *   GNU parallel: PARALLEL_SEQ - 1 (the job's sequence number, `{#}`; not the job slot `{%}`,
 *     which repeats); the count from `shards` or PDREF_SHARDS.
 * shards = 0: not given. More than one engine's variables set is an error (ambiguous), as is
 * none, a value that is not a whole number, or an index outside the count. Returns 0, or
 * -1 with a message naming the variable and its value in err. */
int pd_cli_shard_from_env(pd_cli_env_fn env, void *ctx, uint64_t shards, pd_cli_shard_t *out,
                          char *err, size_t cap);

/* One shard result's seeds: s in [start, end) with s % count == index. */
typedef struct pd_cli_slice {
  uint64_t start, end, index, count;
} pd_cli_slice_t;

typedef enum { PD_CLI_COVER_OK = 0, PD_CLI_COVER_GAP, PD_CLI_COVER_OVERLAP } pd_cli_cover_kind_t;

typedef struct pd_cli_cover {
  uint64_t start, end;     /* the union's range: the smallest start, the largest end */
  pd_cli_cover_kind_t kind; /* OK: every seed of [start, end) in exactly one slice */
  uint64_t seed;           /* the first seed not covered (GAP) or covered twice (OVERLAP) */
  uint32_t times;          /* how many slices hold that seed */
} pd_cli_cover_t;

/* Work a check may spend (residues x slices per stretch between two slice ends). */
#define PD_CLI_COVER_MAX_WORK 50000000ull

/* Check that slices v[0..n) cover [min start, max end) exactly once. Exact for any mix of
 * ranges and shard counts: between two consecutive slice ends, coverage repeats with the
 * least common multiple of the counts there, so one period is checked (or every seed when the
 * stretch is shorter). Returns 0 (out filled), -1 when n is 0 or a slice is malformed
 * (start > end, count 0, index >= count), -2 when the check would cost more than
 * PD_CLI_COVER_MAX_WORK. */
int pd_cli_cover_check(const pd_cli_slice_t *v, size_t n, pd_cli_cover_t *out);

/* Seeds of [start, end) with s % count == index. */
uint64_t pd_cli_slice_seeds(const pd_cli_slice_t *s);

#endif
