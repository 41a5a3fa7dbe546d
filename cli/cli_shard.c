/* cli_shard: the shard a process is, from its batch engine's environment, and the exact-cover
 * check of shard results (cli_shard.h). */
#include "cli_shard.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int fail(char *err, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
  return -1;
}

/* A whole decimal number in [min, max]: 0, or -1 with err naming the variable. */
static int env_u64(const char *name, const char *v, uint64_t min, uint64_t max, uint64_t *out,
                   char *err, size_t cap) {
  char *end = NULL;
  errno = 0;
  unsigned long long x = v && v[0] >= '0' && v[0] <= '9' ? strtoull(v, &end, 10) : 0;
  if (!v || !end || *end || errno || x < min || x > max)
    return fail(err, cap, "%s='%s' is not a whole number in %llu..%llu", name, v ? v : "",
                (unsigned long long)min, (unsigned long long)max);
  *out = x;
  return 0;
}

/* The count for engines whose environment has none: --shards, else PDREF_SHARDS. */
static int count_given(pd_cli_env_fn env, void *ctx, uint64_t shards, const char *engine,
                       uint64_t *out, char *err, size_t cap) {
  if (shards) {
    *out = shards;
    return 0;
  }
  const char *v = env(ctx, "PDREF_SHARDS");
  if (!v)
    return fail(err, cap, "%s gives the shard's index but not the count: pass --shards N or set "
                "PDREF_SHARDS", engine);
  return env_u64("PDREF_SHARDS", v, 1, UINT64_MAX, out, err, cap);
}

static int from_slurm(pd_cli_env_fn env, void *ctx, pd_cli_shard_t *o, char *err, size_t cap) {
  uint64_t id, min = 0, step = 1;
  const char *vmin = env(ctx, "SLURM_ARRAY_TASK_MIN"), *vstep = env(ctx, "SLURM_ARRAY_TASK_STEP");
  const char *vcount = env(ctx, "SLURM_ARRAY_TASK_COUNT");
  if (env_u64("SLURM_ARRAY_TASK_ID", env(ctx, "SLURM_ARRAY_TASK_ID"), 0, UINT64_MAX, &id, err,
              cap) ||
      (vmin && env_u64("SLURM_ARRAY_TASK_MIN", vmin, 0, id, &min, err, cap)) ||
      (vstep && env_u64("SLURM_ARRAY_TASK_STEP", vstep, 1, UINT64_MAX, &step, err, cap)))
    return -1;
  if (!vcount) return fail(err, cap, "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not");
  if (env_u64("SLURM_ARRAY_TASK_COUNT", vcount, 1, UINT64_MAX, &o->count, err, cap)) return -1;
  if ((id - min) % step)
    return fail(err, cap, "SLURM_ARRAY_TASK_ID=%llu is not SLURM_ARRAY_TASK_MIN=%llu plus a "
                "multiple of SLURM_ARRAY_TASK_STEP=%llu (an index list with holes cannot be "
                "mapped to shards: use --array=0-N or --shard)", (unsigned long long)id,
                (unsigned long long)min, (unsigned long long)step);
  o->index = (id - min) / step;
  snprintf(o->source, sizeof o->source, "SLURM_ARRAY_TASK_ID=%llu of %llu", (unsigned long long)id,
           (unsigned long long)o->count);
  return 0;
}

int pd_cli_shard_from_env(pd_cli_env_fn env, void *ctx, uint64_t shards, pd_cli_shard_t *out,
                          char *err, size_t cap) {
  const char *k8s = env(ctx, "JOB_COMPLETION_INDEX"), *slurm = env(ctx, "SLURM_ARRAY_TASK_ID");
  const char *par = env(ctx, "PARALLEL_SEQ");
  memset(out, 0, sizeof *out);
  if ((k8s != NULL) + (slurm != NULL) + (par != NULL) > 1)
    return fail(err, cap, "more than one engine's shard variables are set (%s%s%s): pass --shard "
                "i/n instead", k8s ? "JOB_COMPLETION_INDEX " : "",
                slurm ? "SLURM_ARRAY_TASK_ID " : "", par ? "PARALLEL_SEQ" : "");
  if (slurm) {
    if (from_slurm(env, ctx, out, err, cap)) return -1;
  } else if (k8s) {
    if (count_given(env, ctx, shards, "JOB_COMPLETION_INDEX", &out->count, err, cap) ||
        env_u64("JOB_COMPLETION_INDEX", k8s, 0, UINT64_MAX, &out->index, err, cap))
      return -1;
    snprintf(out->source, sizeof out->source, "JOB_COMPLETION_INDEX=%llu of %llu",
             (unsigned long long)out->index, (unsigned long long)out->count);
  } else if (par) {
    uint64_t seq;
    if (count_given(env, ctx, shards, "PARALLEL_SEQ", &out->count, err, cap) ||
        env_u64("PARALLEL_SEQ", par, 1, UINT64_MAX, &seq, err, cap))
      return -1;
    out->index = seq - 1;
    snprintf(out->source, sizeof out->source, "PARALLEL_SEQ=%llu of %llu", (unsigned long long)seq,
             (unsigned long long)out->count);
  } else {
    return fail(err, cap, "no shard in the environment: none of JOB_COMPLETION_INDEX (Kubernetes "
                "Indexed Job), SLURM_ARRAY_TASK_ID (Slurm job array), PARALLEL_SEQ (GNU parallel) "
                "is set");
  }
  if (out->index >= out->count)
    return fail(err, cap, "%s: the shard index %llu is not below the count %llu", out->source,
                (unsigned long long)out->index, (unsigned long long)out->count);
  return 0;
}

/* ---------- exact cover ---------- */

uint64_t pd_cli_slice_seeds(const pd_cli_slice_t *s) {
  if (s->end <= s->start || !s->count) return 0;
  /* seeds below x with residue index: ceil((x - index) / count) for x > index */
  uint64_t hi = s->end > s->index ? (s->end - s->index + s->count - 1) / s->count : 0;
  uint64_t lo = s->start > s->index ? (s->start - s->index + s->count - 1) / s->count : 0;
  return hi - lo;
}

static uint64_t gcd(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* lcm, saturating at cap + 1 */
static uint64_t lcm_cap(uint64_t a, uint64_t b, uint64_t cap) {
  uint64_t m = a / gcd(a, b);
  return m > (cap + 1) / b ? cap + 1 : m * b;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static uint32_t holders(const pd_cli_slice_t *v, size_t n, uint64_t a, uint64_t b, uint64_t seed) {
  uint32_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (v[i].start <= a && v[i].end >= b && seed % v[i].count == v[i].index) k++;
  return k;
}

/* The first seed of [a, b) not held exactly once, in a stretch where every slice holds all of
 * [a, b) or none of it. *work counts the cost. 1 found, 0 none, -2 over budget. */
static int stretch_check(const pd_cli_slice_t *v, size_t n, uint64_t a, uint64_t b,
                         uint64_t *work, uint64_t *seed, uint32_t *times) {
  uint64_t len = b - a, period = 1;
  size_t active = 0;
  for (size_t i = 0; i < n; i++)
    if (v[i].start <= a && v[i].end >= b) {
      active++;
      period = lcm_cap(period, v[i].count, len);
    }
  uint64_t span = period < len ? period : len; /* one period, or the whole stretch */
  if (span * (active ? active : 1) > PD_CLI_COVER_MAX_WORK - *work) return -2;
  *work += span * (active ? active : 1);
  int found = 0;
  for (uint64_t k = 0; k < span; k++) {
    uint64_t s = a + k; /* with span == period every residue occurs once among a..a+period-1 */
    uint32_t t = holders(v, n, a, b, s);
    if (t != 1 && (!found || s < *seed)) {
      *seed = s;
      *times = t;
      found = 1;
      break; /* k grows with s: the first one found is the smallest */
    }
  }
  return found;
}

int pd_cli_cover_check(const pd_cli_slice_t *v, size_t n, pd_cli_cover_t *out) {
  memset(out, 0, sizeof *out);
  if (!n) return -1;
  uint64_t *pts = malloc(2 * n * sizeof *pts);
  if (!pts) return -2;
  out->start = UINT64_MAX;
  for (size_t i = 0; i < n; i++) {
    if (v[i].start > v[i].end || !v[i].count || v[i].index >= v[i].count) {
      free(pts);
      return -1;
    }
    pts[2 * i] = v[i].start;
    pts[2 * i + 1] = v[i].end;
    if (v[i].start < out->start) out->start = v[i].start;
    if (v[i].end > out->end) out->end = v[i].end;
  }
  qsort(pts, 2 * n, sizeof *pts, cmp_u64);
  uint64_t work = 0;
  int rc = 0;
  for (size_t i = 0; i + 1 < 2 * n && rc == 0; i++) {
    if (pts[i] == pts[i + 1]) continue;
    rc = stretch_check(v, n, pts[i], pts[i + 1], &work, &out->seed, &out->times);
  }
  free(pts);
  if (rc < 0) return rc;
  out->kind = rc == 0 ? PD_CLI_COVER_OK : out->times ? PD_CLI_COVER_OVERLAP : PD_CLI_COVER_GAP;
  return 0;
}
