/* `pdref sim explore`: swarm exploration. Each seed of a range (or of a wall-clock budget)
 * generates a random world and runs it under one mode; a violation is shrunk and saved as a
 * scenario file with its replay command. The CLI reads the wall clock (for --time, seeds/s
 * and the progress bar); sim/ never does. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_rows.h"
#include "cli_progress.h"
#include "cli_shard.h"
#include "pd_err.h"
#include "pd_explore.h"
#include "pd_scenario_write.h"

#define EX_DEFAULT_SEEDS 1000u
#define EX_DEFAULT_OUT "explore-out"
#define EX_JSON_MAX_LISTED 10000u /* violating seeds listed one by one in --json */
#define EX_PATH_BYTES 1024
#define EX_MAX_TIME_S 1e9 /* --time bound (about 32 years) */
#define CMD "pdref sim explore"

typedef struct ex_opts {
  pd_mode_t mode;
  pd_protocol_t protocol; /* the workers' protocol of the generated worlds */
  int has_protocol;
  int has_mode, has_seeds, has_time, has_shard, json, determinism, shard_from_env;
  uint64_t seeds, start, shard_i, shard_n, shards;
  char shard_source[96]; /* --shard-from-env: the variable it came from */
  double time_s;
  uint32_t per_inv; /* shrink and save at most this many cases per invariant, 0 = all */
  uint32_t ties;    /* orders of same-instant events tried per seed */
  const char *out;
  const char *result; /* --result FILE (with --shard-from-env: DIR/shard-<i>-of-<n>.json) */
  char result_buf[EX_PATH_BYTES];
  const char *prog; /* the program as run: replay commands begin with it */
  uint32_t jobs;     /* --jobs: shard processes on this machine (1: this one) */
  int has_jobs;
} ex_opts_t;

typedef struct ex_state {
  uint64_t explored, violating, shrunk, saved;
  uint64_t seed_end; /* one past the last seed of the range this run considered */
  uint64_t inv_seeds[PD_INVARIANT_COUNT + 1], inv_first[PD_INVARIANT_COUNT + 1];
  uint32_t inv_saved[PD_INVARIANT_COUNT + 1];
  double t_shrink;
  int is_dir_made;
  pd_cli_progress_t bar; /* its t0 is the start of the exploration */
  cJSON *findings, *violating_list;
  pd_metrics_t mx; /* --result: the cost pooled over every explored world */
  uint32_t jobs;   /* the processes that explored (timing only) */
  int progress_fd; /* a --jobs shard: where its parent reads its progress (-1: none) */
  double reported_s; /* when it last wrote there */
} ex_state_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: pdref sim explore --mode MODE [--protocol sglang|vllm]\n"
          "                         [--seeds N | --time S] [--seed-start K]\n"
          "                         [--shard i/n | --shard-from-env [--shards N]] [--result FILE]\n"
          "                         [--out DIR] [--per-invariant N] [--ties K] [--determinism]\n"
          "                         [--jobs N]\n"
          "                         [--json]\n"
          "       pdref sim explore merge [--json] RESULT|DIR...   (see merge --help)\n"
          "Generates a random world and workload from each seed (1..4 prefill and decode\n"
          "workers, swarm fault mixes, crashes, disconnects, random settings), runs it under the\n"
          "mode and checks every invariant. A violation is shrunk while it still violates the\n"
          "same invariant and saved as DIR/<mode>-I<n>-seed<N>.json with a replay command.\n"
          "  --mode M          the gateway model, required: joined (smg today), pr1150 (smg PR\n"
          "                    #1150), minilb (SGLang's mini_lb), reference (pdref's rules), or\n"
          "                    vLLM's proxies: vllm-toy-proxy, mooncake-proxy, llmd-sidecar\n"
          "  --protocol P      the protocol of the worlds' workers: sglang (destination first,\n"
          "                    bootstrap rooms) or vllm (source first, kv_transfer_params);\n"
          "                    default the mode's own (sglang for the reference, which speaks\n"
          "                    both: --protocol vllm explores its R-SF-* rules)\n"
          "  --seeds N         explore seeds K..K+N-1 (default %u)\n"
          "  --time S          explore seeds K, K+1, ... for S seconds of wall time instead\n"
          "  --seed-start K    first seed (default 1)\n"
          "  --shard i/n       only the seeds with seed %% n == i (run n shards in parallel)\n"
          "  --shard-from-env  the shard from a batch engine's environment: Kubernetes Indexed\n"
          "                    Job (JOB_COMPLETION_INDEX), Slurm job array\n"
          "                    (SLURM_ARRAY_TASK_ID/_MIN/_STEP/_COUNT), GNU parallel\n"
          "                    (PARALLEL_SEQ, i.e. {#}); writes DIR/shard-<i>-of-<n>.json\n"
          "  --shards N        the shard count where the engine gives none (Kubernetes, GNU\n"
          "                    parallel); else PDREF_SHARDS\n"
          "  --result FILE     also write the --json summary (the shard's result) to FILE\n"
          "  --out DIR         where shrunk cases go (default %s/, created when needed)\n"
          "  --per-invariant N shrink and save at most N cases per invariant (default 1;\n"
          "                    0 = every violating seed); every violation is still counted\n"
          "  --ties K          try each world in K orders of same-instant events (default 2:\n"
          "                    insertion order, then one seeded order; the replay command\n"
          "                    names the --tie-seed that violated)\n"
          "  --determinism     run each seed twice and compare (I13); halves the throughput\n"
          "  --jobs N          run the range as N shard processes on this machine, folded\n"
          "                    into one result: the same findings and summary, byte for byte,\n"
          "                    for any N; only the last line (\"timing:\", --json: \"timing\")\n"
          "                    depends on N and the machine (default 0 = one per online core;\n"
          "                    1 with --shard, --shard-from-env, --result or --time)\n"
          "  --json            one JSON document on stdout instead of text\n"
          "example: pdref sim explore --mode joined --seeds 200 --out explore-out\n"
          "exit: 0 no violation, 1 a violation was found, 2 bad usage or an I/O error\n",
          EX_DEFAULT_SEEDS, EX_DEFAULT_OUT);
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int bad(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, CMD ": ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (try --help)\n");
  return 2;
}

/* i/n with 0 <= i < n. */
static int parse_shard(const char *a, ex_opts_t *o) {
  const char *slash = strchr(a, '/');
  char head[32];
  if (!slash || (size_t)(slash - a) >= sizeof head) return bad("--shard: expected i/n, got '%s'", a);
  memcpy(head, a, (size_t)(slash - a));
  head[slash - a] = '\0';
  if (pd_cli_parse_u64(CMD, "--shard n", slash + 1, 1, UINT64_MAX, &o->shard_n) ||
      pd_cli_parse_u64(CMD, "--shard i", head, 0, o->shard_n - 1, &o->shard_i))
    return 2;
  return 0;
}

enum {
  OPT_MODE = PD_CLI_OPT_FIRST, OPT_SEEDS, OPT_TIME, OPT_SEED_START, OPT_SHARD, OPT_OUT,
  OPT_PER_INV, OPT_TIES, OPT_DETERMINISM, OPT_JSON, OPT_SHARD_ENV, OPT_SHARDS, OPT_RESULT, OPT_JOBS,
  OPT_PROTOCOL
};

static const struct option long_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"mode", required_argument, NULL, OPT_MODE},
    {"protocol", required_argument, NULL, OPT_PROTOCOL},
    {"seeds", required_argument, NULL, OPT_SEEDS},
    {"time", required_argument, NULL, OPT_TIME},
    {"seed-start", required_argument, NULL, OPT_SEED_START},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"out", required_argument, NULL, OPT_OUT},
    {"per-invariant", required_argument, NULL, OPT_PER_INV},
    {"ties", required_argument, NULL, OPT_TIES},
    {"determinism", no_argument, NULL, OPT_DETERMINISM},
    {"json", no_argument, NULL, OPT_JSON},
    {"shard-from-env", no_argument, NULL, OPT_SHARD_ENV},
    {"shards", required_argument, NULL, OPT_SHARDS},
    {"result", required_argument, NULL, OPT_RESULT},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {NULL, 0, NULL, 0},
};

/* One option with its value v; 0, or an error (the message printed). */
static int apply_opt(void *ctx, int c, int index, char *v) {
  ex_opts_t *o = ctx;
  (void)index;
  switch (c) {
  case OPT_MODE:
    o->has_mode = 1;
    return pd_cli_parse_mode(CMD, "--mode", v, &o->mode);
  case OPT_PROTOCOL:
    o->has_protocol = 1;
    return pd_protocol_parse(v, &o->protocol) == 0
               ? 0
               : bad("--protocol: expected sglang or vllm, got '%s'", v);
  case OPT_SEEDS:
    o->has_seeds = 1;
    return pd_cli_parse_u64(CMD, "--seeds", v, 1, UINT64_MAX, &o->seeds);
  case OPT_TIME:
    o->has_time = 1;
    return pd_cli_parse_positive(CMD, "--time", v, EX_MAX_TIME_S, &o->time_s);
  case OPT_SEED_START:
    return pd_cli_parse_u64(CMD, "--seed-start", v, 0, UINT64_MAX, &o->start);
  case OPT_SHARD:
    o->has_shard = 1;
    return parse_shard(v, o);
  case OPT_SHARD_ENV:
    o->shard_from_env = 1;
    return 0;
  case OPT_SHARDS:
    return pd_cli_parse_u64(CMD, "--shards", v, 1, UINT64_MAX, &o->shards);
  case OPT_RESULT:
    o->result = v;
    return v[0] ? 0 : bad("--result: expected a file name");
  case OPT_OUT:
    o->out = v;
    return v[0] ? 0 : bad("--out: expected a directory name");
  case OPT_PER_INV:
    return pd_cli_parse_u32(CMD, "--per-invariant", v, 0, UINT32_MAX, &o->per_inv);
  case OPT_TIES:
    return pd_cli_parse_u32(CMD, "--ties", v, 1, 64, &o->ties);
  case OPT_DETERMINISM:
    o->determinism = 1;
    return 0;
  case OPT_JOBS:
    o->has_jobs = 1;
    return pd_cli_parse_u32(CMD, "--jobs", v, 0, PD_CLI_EXPLORE_MAX_JOBS, &o->jobs);
  default: /* OPT_JSON */
    o->json = 1;
    return 0;
  }
}

static const char *real_env(void *ctx, const char *name) {
  (void)ctx;
  return getenv(name);
}

/* --shard-from-env: -1 to go on, or 2. */
static int shard_env(ex_opts_t *o) {
  pd_cli_shard_t sh;
  char err[384];
  if (pd_cli_shard_from_env(real_env, NULL, o->shards, &sh, err, sizeof err))
    return bad("--shard-from-env: %s", err);
  o->shard_i = sh.index;
  o->shard_n = sh.count;
  snprintf(o->shard_source, sizeof o->shard_source, "%s", sh.source);
  if (!o->result) {
    snprintf(o->result_buf, sizeof o->result_buf, "%s/shard-%llu-of-%llu.json", o->out,
             (unsigned long long)sh.index, (unsigned long long)sh.count);
    o->result = o->result_buf;
  }
  return -1;
}

/* Returns -1 to go on, or an exit code (0 after --help, 2 on bad usage). */
static int parse_opts(int argc, char **argv, ex_opts_t *o) {
  pd_cli_parser_t p = {CMD, long_opts, usage, apply_opt, o, NULL, 0, NULL};
  int rc = pd_cli_parse(&p, argc, argv);
  if (rc >= 0) return rc;
  if (!o->has_mode)
    return bad("--mode is required: joined, pr1150, minilb, reference, vllm-toy-proxy, "
               "mooncake-proxy or llmd-sidecar");
  if (!o->has_protocol) o->protocol = pd_mode_protocol(o->mode);
  if (!pd_mode_speaks(o->mode, o->protocol))
    return bad("--protocol %s: mode %s does not speak it (its workers speak %s)",
               pd_protocol_name(o->protocol), pd_mode_name(o->mode),
               pd_protocol_name(pd_mode_protocol(o->mode)));
  if (o->has_seeds && o->has_time) return bad("--seeds and --time cannot be combined");
  if (!o->has_time && o->seeds > UINT64_MAX - o->start)
    return bad("--seed-start %llu plus --seeds %llu passes the last seed",
               (unsigned long long)o->start, (unsigned long long)o->seeds);
  if (o->shard_from_env && o->has_shard) return bad("--shard and --shard-from-env cannot be combined");
  if (o->shards && !o->shard_from_env) return bad("--shards goes with --shard-from-env");
  int is_shard = o->has_shard || o->shard_from_env || o->result || o->has_time;
  if (!o->has_jobs && is_shard) o->jobs = 1; /* the default (all cores) is for a whole range */
  if (o->jobs == 0) o->jobs = pd_cli_explore_default_jobs();
  if (!o->has_time && o->jobs > o->seeds) o->jobs = (uint32_t)o->seeds; /* a shard per seed at most */
  if (o->jobs > 1 && is_shard)
    return bad("--jobs runs the whole range as its own shards: it cannot be combined with "
               "--shard, --shard-from-env, --result or --time");
  return o->shard_from_env ? shard_env(o) : -1;
}

/* mkdir -p, one component at a time. */
static int make_dirs(const char *dir) {
  char p[EX_PATH_BYTES];
  size_t n = strlen(dir);
  if (n >= sizeof p) return -1;
  memcpy(p, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (p[i] != '/' && p[i] != '\0') continue;
    char c = p[i];
    p[i] = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST) return -1;
    p[i] = c;
  }
  struct stat st;
  return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

/* The invariants of m with their names: "I2 orphan-leg, I3 stranded-slot". */
static void mask_str(uint32_t m, char *buf, size_t cap) { pd_cli_inv_text(m, buf, cap); }

static void progress_clear(ex_state_t *st) { pd_cli_progress_clear(&st->bar); }

static void progress(ex_state_t *st, const ex_opts_t *o, uint64_t total) {
  double el = pd_cli_progress_elapsed_s(&st->bar), rate = el > 0 ? (double)st->explored / el : 0;
  double frac = o->has_time ? el / o->time_s : total ? (double)st->explored / (double)total : 1;
  if (o->has_time)
    pd_cli_progress_draw(&st->bar, frac, "%llu seeds  %.1f/%.0f s  %.0f seeds/s  %llu violating",
                         (unsigned long long)st->explored, el, o->time_s, rate,
                         (unsigned long long)st->violating);
  else
    pd_cli_progress_draw(&st->bar, frac, "%llu/%llu seeds  %.0f seeds/s  %llu violating",
                         (unsigned long long)st->explored, (unsigned long long)total, rate,
                         (unsigned long long)st->violating);
  if (st->progress_fd >= 0 && (el - st->reported_s >= PD_CLI_PROGRESS_EVERY_S || frac >= 1)) {
    /* one line, far below PIPE_BUF: the shards' writes to the shared pipe never interleave */
    dprintf(st->progress_fd, "%llu %llu %llu %llu %.6f\n", (unsigned long long)o->shard_i,
            (unsigned long long)st->explored, (unsigned long long)total,
            (unsigned long long)st->violating, frac > 1 ? 1.0 : frac);
    st->reported_s = el;
  }
}

/* A seed or count: a JSON number up to 2^53, a decimal string above (docs/scenarios.md). */
static cJSON *seed_json(uint64_t v) {
  char b[24];
  if (v <= 9007199254740992ull) return cJSON_CreateNumber((double)v); /* exact in a double */
  snprintf(b, sizeof b, "%llu", (unsigned long long)v); /* above 2^53: a decimal string */
  return cJSON_CreateString(b);
}

static void add_pair(cJSON *o, const char *key, uint32_t before, uint32_t after) {
  const double v[2] = {before, after};
  cJSON_AddItemToObject(o, key, cJSON_CreateDoubleArray(v, 2));
}

/* Save a shrunk case and report it; returns 0 or 2 (I/O error). */
static int report_finding(ex_state_t *st, const ex_opts_t *o, const pd_scenario_t *s,
                          const pd_explore_result_t *r) {
  char name[128], path[EX_PATH_BYTES], trace[160], err[EX_PATH_BYTES];
  char replay[EX_PATH_BYTES + PD_CLI_PROG_BYTES + 256];
  pd_explore_file_name(o->mode, r->inv, r->seed, name, sizeof name);
  snprintf(path, sizeof path, "%s/%s", o->out, name);
  snprintf(trace, sizeof trace, "%.*s.trace.json", (int)(strlen(name) - 5), name);
  char ties[40] = "";
  if (r->tie_seed) snprintf(ties, sizeof ties, " --tie-seed %llu", (unsigned long long)r->tie_seed);
  snprintf(replay, sizeof replay, "%s sim run %s --mode %s%s --trace %s", o->prog, path,
           pd_mode_name(o->mode), ties, trace);
  if (!st->is_dir_made && make_dirs(o->out) != 0) {
    progress_clear(st);
    fprintf(stderr, "pdref sim explore: %s: cannot create directory: %s\n", o->out, strerror(errno));
    return 2;
  }
  st->is_dir_made = 1;
  if (pd_scenario_save(s, path, err, sizeof err) != 0) {
    progress_clear(st);
    fprintf(stderr, "pdref sim explore: %s\n", err);
    return 2;
  }
  st->saved++;
  {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "seed", seed_json(r->seed));
    cJSON_AddItemToObject(j, "tie_seed", seed_json(r->tie_seed));
    pd_cli_inv_add(j, "violated", "violated_names", r->found_mask);
    char id[8];
    snprintf(id, sizeof id, "I%d", r->inv);
    cJSON_AddStringToObject(j, "invariant", id);
    cJSON_AddStringToObject(j, "invariant_name", pd_invariant_name(r->inv));
    pd_cli_inv_add(j, "shrunk_violated", "shrunk_violated_names", r->shrunk_mask);
    cJSON_AddStringToObject(j, "reason", r->reason);
    cJSON_AddStringToObject(j, "found_reason", r->found_reason);
    cJSON_AddStringToObject(j, "file", path);
    cJSON_AddStringToObject(j, "replay", replay);
    add_pair(j, "requests", r->requests_before, r->requests_after);
    add_pair(j, "workers", r->workers_before, r->workers_after);
    add_pair(j, "faults", r->faults_before, r->faults_after);
    cJSON_AddNumberToObject(j, "shrink_runs", r->shrink_runs);
    cJSON_AddItemToArray(st->findings, j);
  }
  return 0;
}

/* The invariants a list of "I<n>" names. */
static uint32_t mask_of(const cJSON *list) {
  uint32_t m = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, list) {
    int k = pd_explore_reason_inv(cJSON_GetStringValue(e));
    if (k >= 1 && k <= PD_INVARIANT_COUNT) m |= 1u << (k - 1);
  }
  return m;
}

static const char *jstr(const cJSON *o, const char *key) {
  const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
  return v ? v : "";
}

static double jnum(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* [before, after] of a finding's pair; i 0 or 1. */
static unsigned jpair(const cJSON *o, const char *key, int i) {
  const cJSON *v = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, key), i);
  return cJSON_IsNumber(v) ? (unsigned)v->valuedouble : 0;
}

/* One finding of the document, as text. */
static void finding_text(const cJSON *j) {
  char found[PD_CLI_INV_TEXT_BYTES], shrunk[PD_CLI_INV_TEXT_BYTES], why[320];
  uint64_t seed = 0;
  pd_cli_explore_u64(j, "seed", &seed);
  const char *id = jstr(j, "invariant"), *reason = jstr(j, "reason");
  int inv = pd_explore_reason_inv(id);
  mask_str(mask_of(cJSON_GetObjectItemCaseSensitive(j, "violated")), found, sizeof found);
  mask_str(mask_of(cJSON_GetObjectItemCaseSensitive(j, "shrunk_violated")), shrunk, sizeof shrunk);
  printf("seed %llu: violated %s; shrunk for I%d (%s) in %.0f runs: %u -> %u requests, %u -> %u "
         "workers, %u -> %u faults; the case violates %s\n",
         (unsigned long long)seed, found, inv, jstr(j, "invariant_name"), jnum(j, "shrink_runs"),
         jpair(j, "requests", 0), jpair(j, "requests", 1), jpair(j, "workers", 0),
         jpair(j, "workers", 1), jpair(j, "faults", 0), jpair(j, "faults", 1), shrunk);
  pd_cli_reason_text(reason[0] ? reason : "(no reason)", why, sizeof why);
  int why_inv = pd_explore_reason_inv(reason); /* the case's first violation may be another */
  if (why_inv && why_inv != inv)
    printf("    first violation of the case is I%d, not I%d (shrunk for):\n", why_inv, inv);
  printf("    %s\n    saved:  %s\n    replay: %s\n", why, jstr(j, "file"), jstr(j, "replay"));
}

/* "pdref sim explore --mode M --seed-start S --seeds 1 ...": the one seed explored again. */
static void seed_replay(const ex_opts_t *o, uint64_t seed, char *buf, size_t cap) {
  int is_own = o->protocol == pd_mode_protocol(o->mode); /* the default needs no option */
  snprintf(buf, cap, "%s sim explore --mode %s%s%s --seed-start %llu --seeds 1 --ties %u%s",
           o->prog, pd_mode_name(o->mode), is_own ? "" : " --protocol ",
           is_own ? "" : pd_protocol_name(o->protocol), (unsigned long long)seed, o->ties,
           o->determinism ? " --determinism" : "");
}

static void count(ex_state_t *st, const ex_opts_t *o, const pd_explore_result_t *r) {
  st->violating++;
  for (int i = 1; i <= PD_INVARIANT_COUNT; i++)
    if (r->found_mask >> (i - 1) & 1u && st->inv_seeds[i]++ == 0) st->inv_first[i] = r->seed;
  if (cJSON_GetArraySize(st->violating_list) < (int)EX_JSON_MAX_LISTED) {
    char replay[PD_CLI_PROG_BYTES + 160];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "seed", seed_json(r->seed));
    pd_cli_inv_add(j, "violated", "violated_names", r->found_mask);
    seed_replay(o, r->seed, replay, sizeof replay);
    cJSON_AddStringToObject(j, "replay", replay);
    cJSON_AddItemToArray(st->violating_list, j);
  }
}

/* Invariants that already have --per-invariant saved cases. */
static uint32_t skip_mask(const ex_state_t *st, const ex_opts_t *o) {
  uint32_t m = 0;
  for (int i = 1; i <= PD_INVARIANT_COUNT && o->per_inv; i++)
    if (st->inv_saved[i] >= o->per_inv) m |= 1u << (i - 1);
  return m;
}

static int explore(const ex_opts_t *o, ex_state_t *st, pd_scenario_t *s, uint64_t total) {
  uint64_t limit = o->has_time ? UINT64_MAX - o->start : o->seeds;
  st->seed_end = o->start;
  for (uint64_t off = 0; off < limit; off++) {
    uint64_t seed = o->start + off;
    if (seed % o->shard_n != o->shard_i) continue;
    double t = pd_cli_wall_s();
    if (o->has_time && t - st->bar.t0_s >= o->time_s) break;
    st->seed_end = seed + 1; /* the seeds of other shards below it are theirs */
    pd_explore_result_t r;
    int rc = pd_explore_seed_mx(s, seed, o->mode, o->protocol, skip_mask(st, o), o->determinism,
                                o->ties, &r, o->result ? &st->mx : NULL);
    if (rc) {
      progress_clear(st);
      fprintf(stderr, "pdref sim explore: seed %llu: %s\n", (unsigned long long)seed, pd_strerror(rc));
      return 2;
    }
    st->explored++;
    if (r.found_mask) count(st, o, &r);
    /* Every violated invariant still short of its --per-invariant cases gets this seed's
     * case, not only the lowest one: which cases a run saves then depends on the seeds alone,
     * not on what the seeds before happened to fill, so shards saving their own (--jobs,
     * explore merge --by-seed) save what one process over the range saves. Each further
     * invariant runs the seed again (the same world) and shrinks for it; bounded by the
     * invariants the seed violated. */
    for (uint32_t skip = skip_mask(st, o); r.inv;) {
      st->shrunk++;
      st->inv_saved[r.inv]++;
      if (report_finding(st, o, s, &r)) return 2;
      st->t_shrink += pd_cli_wall_s() - t;
      skip |= 1u << (r.inv - 1) | skip_mask(st, o);
      if (!(r.found_mask & ~skip)) break;
      t = pd_cli_wall_s();
      rc = pd_explore_seed_mx(s, seed, o->mode, o->protocol, skip, o->determinism, o->ties, &r,
                              NULL);
      if (rc) {
        progress_clear(st);
        fprintf(stderr, "pdref sim explore: seed %llu: %s\n", (unsigned long long)seed,
                pd_strerror(rc));
        return 2;
      }
    }
    progress(st, o, total);
  }
  if (!o->has_time) st->seed_end = o->start + o->seeds;
  return 0;
}

/* The document as text: what a run prints without --json, whatever its --jobs: the findings
 * in seed order, the summary, then one "timing:" line, the only one that depends on the
 * machine, its load or --jobs. */
static void doc_text(const cJSON *doc, const char *out) {
  const cJSON *f;
  cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(doc, "findings")) finding_text(f);
  uint64_t start = 0, end = 0;
  pd_cli_explore_u64(doc, "seed_start", &start);
  pd_cli_explore_u64(doc, "seed_end", &end);
  double explored = jnum(doc, "explored"), violating = jnum(doc, "violating_seeds");
  const char *proto = jstr(doc, "protocol");
  int is_vllm = strcmp(proto, "vllm") == 0; /* SGLang's worlds, the default, go unnamed */
  printf("explore: mode %s%s%s, seeds %llu..%llu, shard %s: %.0f explored\n", jstr(doc, "mode"),
         is_vllm ? ", protocol " : "", is_vllm ? proto : "",
         (unsigned long long)start, (unsigned long long)(end ? end - 1 : 0), jstr(doc, "shard"),
         explored);
  if (violating <= 0) {
    printf("explore: no violations\n");
  } else {
    printf("explore: %.0f violating seeds:", violating);
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(doc, "invariants")) {
      uint64_t first = 0;
      pd_cli_explore_u64(e, "first_seed", &first);
      printf(" %s %s %.0f (first seed %llu);", e->string, jstr(e, "name"), jnum(e, "seeds"),
             (unsigned long long)first);
    }
    printf("\nexplore: %d shrunk cases saved in %s/\n",
           cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "findings")), out);
  }
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(doc, "timing");
  double el = jnum(t, "elapsed_s"), sh = jnum(t, "shrink_s");
  printf("timing: %.0f explored in %.2f s (%.0f seeds/s; %.0f seeds/s without the %.2f s spent "
         "shrinking), %.0f jobs", explored, el, jnum(t, "seeds_per_s"),
         el - sh > 0 ? explored / (el - sh) : 0, sh, jnum(t, "jobs"));
  if (cJSON_GetObjectItemCaseSensitive(t, "cpu_s")) /* a merged result has none */
    printf(", %.2f CPU-s (%.0f seeds per CPU-s)", jnum(t, "cpu_s"), jnum(t, "seeds_per_cpu_s"));
  printf("\n");
}

/* The summary: what --json prints and --result writes (the shard's result that
 * `pdref sim explore merge` folds; cmd_explore_merge.c reads these fields). Every field but
 * "timing" (and "metrics", a shard's --result only) depends on the seeds alone, not on --jobs. */
static cJSON *summary_json(ex_state_t *st, const ex_opts_t *o, double el) {
  cJSON *j = cJSON_CreateObject();
  char shard[48];
  snprintf(shard, sizeof shard, "%llu/%llu", (unsigned long long)o->shard_i,
           (unsigned long long)o->shard_n);
  cJSON_AddStringToObject(j, "schema", PD_EXPLORE_RESULT_SCHEMA);
  cJSON_AddStringToObject(j, "command", "sim explore"); /* as sim run's and conform's */
  cJSON_AddStringToObject(j, "mode", pd_mode_name(o->mode));
  cJSON_AddStringToObject(j, "protocol", pd_protocol_name(o->protocol));
  cJSON_AddItemToObject(j, "seed_start", seed_json(o->start));
  cJSON_AddItemToObject(j, "seed_end", seed_json(st->seed_end)); /* exclusive */
  if (o->has_time) cJSON_AddNumberToObject(j, "time_s", o->time_s);
  else cJSON_AddItemToObject(j, "seeds", seed_json(o->seeds));
  cJSON_AddStringToObject(j, "shard", shard);
  cJSON_AddItemToObject(j, "shard_index", seed_json(o->shard_i));
  cJSON_AddItemToObject(j, "shard_count", seed_json(o->shard_n));
  if (o->shard_source[0]) cJSON_AddStringToObject(j, "shard_source", o->shard_source);
  cJSON_AddNumberToObject(j, "ties", o->ties);
  cJSON_AddBoolToObject(j, "determinism", o->determinism);
  cJSON_AddNumberToObject(j, "per_invariant", o->per_inv);
  cJSON_AddNumberToObject(j, "explored", (double)st->explored);
  cJSON_AddNumberToObject(j, "violating_seeds", (double)st->violating);
  cJSON *inv = cJSON_AddObjectToObject(j, "invariants");
  for (int i = 1; i <= PD_INVARIANT_COUNT; i++) {
    if (!st->inv_seeds[i]) continue;
    char id[8];
    snprintf(id, sizeof id, "I%d", i);
    cJSON *e = cJSON_AddObjectToObject(inv, id);
    cJSON_AddStringToObject(e, "name", pd_invariant_name(i));
    cJSON_AddNumberToObject(e, "seeds", (double)st->inv_seeds[i]);
    cJSON_AddItemToObject(e, "first_seed", seed_json(st->inv_first[i]));
  }
  if (o->result) { /* pooled over the explored worlds: a shard's result only */
    cJSON *mx = pd_metrics_json(&st->mx, NULL);
    if (mx) cJSON_AddItemToObject(j, "metrics", mx);
  }
  cJSON_AddItemToObject(j, "findings", st->findings);
  cJSON_AddItemToObject(j, "violating", st->violating_list);
  cJSON_AddBoolToObject(j, "violating_truncated", st->violating > EX_JSON_MAX_LISTED);
  st->findings = st->violating_list = NULL;
  cJSON *t = cJSON_AddObjectToObject(j, "timing"); /* the machine's, its load's and --jobs' */
  cJSON_AddNumberToObject(t, "elapsed_s", el);
  cJSON_AddNumberToObject(t, "shrink_s", st->t_shrink);
  cJSON_AddNumberToObject(t, "seeds_per_s", el > 0 ? (double)st->explored / el : 0);
  cJSON_AddNumberToObject(t, "jobs", st->jobs);
  /* this process and its reaped --jobs shards: the issue-30 figure is seeds per CPU-second,
     which wall time under --jobs is not */
  double cpu = pd_cli_cpu_s(1);
  cJSON_AddNumberToObject(t, "cpu_s", cpu);
  cJSON_AddNumberToObject(t, "seeds_per_cpu_s", cpu > 0 ? (double)st->explored / cpu : 0);
  return j;
}

/* Print the summary (text or --json) and write it to --result; 0 or 2. */
static int summary_out(ex_state_t *st, const ex_opts_t *o, double el) {
  cJSON *j = summary_json(st, o, el);
  char *txt = j ? cJSON_Print(j) : NULL;
  if (txt && !o->json) doc_text(j, o->out);
  cJSON_Delete(j);
  if (!txt) return 2;
  if (o->json) puts(txt);
  int rc = 0;
  if (o->result) {
    FILE *f = (o->shard_from_env && make_dirs(o->out) != 0) ? NULL : fopen(o->result, "w");
    if (!f || fputs(txt, f) < 0 || fputc('\n', f) < 0) rc = 2;
    if (f && fclose(f) != 0) rc = 2;
    if (rc) fprintf(stderr, CMD ": %s: cannot write the result: %s\n", o->result, strerror(errno));
    else if (!o->json) printf("explore: result written to %s\n", o->result);
  }
  cJSON_free(txt);
  return rc;
}

/* A finding or violating seed of a shard, to order them as one process over the range. */
typedef struct ex_item {
  uint64_t seed;
  unsigned shard, idx;
  const cJSON *j;
} ex_item_t;

static int item_order(const void *a, const void *b) {
  const ex_item_t *x = a, *y = b;
  if (x->seed != y->seed) return x->seed < y->seed ? -1 : 1;
  if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

/* key's arrays of the n docs in seed order (a seed's items keep their order); NULL, or
 * *count items (free()). */
static ex_item_t *items(cJSON **docs, unsigned n, const char *key, size_t *count) {
  size_t total = 0, k = 0;
  for (unsigned i = 0; i < n; i++)
    total += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(docs[i], key));
  ex_item_t *it = malloc((total ? total : 1) * sizeof *it);
  if (!it) return NULL;
  for (unsigned i = 0; i < n; i++) {
    unsigned idx = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(docs[i], key)) {
      it[k] = (ex_item_t){0, i, idx++, e};
      pd_cli_explore_u64(e, "seed", &it[k].seed);
      k++;
    }
  }
  qsort(it, k, sizeof *it, item_order);
  *count = k;
  return it;
}

/* Fold --jobs' shard results into st as one process over the range would have filled it:
 * counts summed, the first seed per invariant, per invariant the findings of its first
 * --per-invariant violating seeds, the first violating seeds listed. 0, or 2. */
static int fold_shards(ex_state_t *st, const ex_opts_t *o, cJSON **docs, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    st->explored += (uint64_t)jnum(docs[i], "explored");
    st->violating += (uint64_t)jnum(docs[i], "violating_seeds");
    st->t_shrink += jnum(cJSON_GetObjectItemCaseSensitive(docs[i], "timing"), "shrink_s");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(docs[i], "invariants")) {
      int k = pd_explore_reason_inv(e->string);
      uint64_t first = 0;
      if (k < 1 || k > PD_INVARIANT_COUNT || pd_cli_explore_u64(e, "first_seed", &first)) continue;
      if (!st->inv_seeds[k] || first < st->inv_first[k]) st->inv_first[k] = first;
      st->inv_seeds[k] += (uint64_t)jnum(e, "seeds");
    }
  }
  size_t nf = 0, nv = 0;
  ex_item_t *f = items(docs, n, "findings", &nf), *v = items(docs, n, "violating", &nv);
  int rc = f && v ? 0 : 2;
  for (size_t i = 0; !rc && i < nf; i++) {
    int k = pd_explore_reason_inv(jstr(f[i].j, "invariant"));
    if (k < 1 || k > PD_INVARIANT_COUNT || (o->per_inv && st->inv_saved[k] >= o->per_inv)) continue;
    st->inv_saved[k]++;
    st->shrunk++;
    st->saved++;
    cJSON_AddItemToArray(st->findings, cJSON_Duplicate(f[i].j, 1));
  }
  for (size_t i = 0; !rc && i < nv && i < EX_JSON_MAX_LISTED; i++)
    cJSON_AddItemToArray(st->violating_list, cJSON_Duplicate(v[i].j, 1));
  free(f);
  free(v);
  return rc;
}

/* --jobs n > 1: n shard processes, folded into st. 0, 1 or 2. */
static int explore_jobs(const ex_opts_t *o, ex_state_t *st, int argc, char **argv) {
  cJSON **docs = calloc(o->jobs, sizeof *docs);
  int rc = docs ? pd_cli_explore_jobs(o->prog, argc, argv, o->jobs, o->json, docs) : 2;
  if (rc == 0) rc = fold_shards(st, o, docs, o->jobs);
  for (unsigned i = 0; docs && i < o->jobs; i++) cJSON_Delete(docs[i]);
  free(docs);
  st->seed_end = o->start + o->seeds;
  return rc;
}

int pd_cli_sim_explore(const char *prog, int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "merge") == 0) return pd_cli_sim_explore_merge(argc - 1, argv + 1);
  pd_cli_pool_cjson(); /* single-threaded: cJSON's blocks from a pool (cmd_bench.c) */
  ex_opts_t o = {.seeds = EX_DEFAULT_SEEDS, .start = 1, .shard_n = 1, .per_inv = 1, .ties = 2,
                 .out = EX_DEFAULT_OUT, .prog = prog, .jobs = 0};
  int rc = parse_opts(argc, argv, &o);
  if (rc >= 0) return rc;
  ex_state_t st;
  memset(&st, 0, sizeof st);
  st.jobs = o.jobs;
  st.progress_fd = -1;
  const char *pfd = getenv(PD_CLI_EXPLORE_PROGRESS_FD_ENV);
  if (pfd && o.jobs <= 1) { /* a shard of a --jobs run; anything but a descriptor is ignored */
    char *end = NULL;
    long fd = strtol(pfd, &end, 10);
    if (end != pfd && *end == '\0' && fd > 2 && fd < 65536) st.progress_fd = (int)fd;
  }
  pd_cli_progress_init(&st.bar, o.json);
  st.findings = cJSON_CreateArray();
  st.violating_list = cJSON_CreateArray();
  /* seeds of this shard in the range, for the progress bar: the first is off0 past start */
  uint64_t off0 = (o.shard_i + o.shard_n - o.start % o.shard_n) % o.shard_n;
  uint64_t total = off0 < o.seeds ? 1 + (o.seeds - 1 - off0) / o.shard_n : 0;
  pd_scenario_t *s = o.jobs > 1 ? NULL : malloc(sizeof *s);
  pd_metrics_init(&st.mx, 0);
  if (!st.findings || !st.violating_list) rc = 2;
  else if (o.jobs > 1) rc = explore_jobs(&o, &st, argc, argv);
  else rc = s ? explore(&o, &st, s, total) : 2;
  progress_clear(&st);
  double el = pd_cli_progress_elapsed_s(&st.bar);
  if (rc == 0) rc = summary_out(&st, &o, el);
  cJSON_Delete(st.findings);
  cJSON_Delete(st.violating_list);
  pd_metrics_free(&st.mx);
  free(s);
  if (rc) return rc;
  return st.violating ? 1 : 0;
}
