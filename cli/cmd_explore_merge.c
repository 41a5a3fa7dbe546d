/* `pdref sim explore merge RESULT|DIR...`: fold the results of explore shards (run with
 * --shard-from-env or --result, on Kubernetes, Slurm, GNU parallel or by hand) into one
 * summary: seeds covered, seeds/s, violating seeds per invariant, the smallest shrunk case per
 * invariant. A seed no shard explored (a gap) or two shards explored (an overlap), results of
 * different modes or settings, and a result whose count disagrees with its range are errors
 * (exit 2): a merged summary must not claim seeds nobody ran. docs/explore.md "Scale-out". */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_shard.h"
#include "pd_scenario.h"

#define CMD "pdref sim explore merge"
#define MG_MAX_FILES 100000
#define MG_MAX_FILE_BYTES (256u << 20)
#define MG_MAX_LISTED 10000 /* violating seeds listed one by one in --json */

typedef struct mg_state {
  int json, n_results, by_seed;
  size_t skipped;              /* other JSON files in a directory (shrunk cases) */
  char mode[32], first[1024];  /* the first result's mode and file */
  char protocol[16];           /* its worlds' protocol ("sglang" when a result names none) */
  double ties;
  int determinism;
  pd_cli_slice_t *slices;
  uint64_t explored, violating, listed_total;
  double shard_s, wall_max, shrink_s;
  uint64_t inv_seeds[PD_INVARIANT_COUNT + 1], inv_first[PD_INVARIANT_COUNT + 1];
  cJSON *smallest[PD_INVARIANT_COUNT + 1]; /* a copy of the smallest finding per invariant */
  cJSON *violating_list;
  int truncated;
} mg_state_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: pdref sim explore merge [--by-seed] [--json] RESULT|DIR...\n"
          "Folds the results of `pdref sim explore` shards into one summary. A RESULT is a file\n"
          "written by --result or --shard-from-env; a DIR contributes its *.json files that are\n"
          "results (the shrunk cases beside them are skipped).\n"
          "Prints the seed range covered, seeds/s (per shard-second and overall), violating seeds\n"
          "per invariant with the first seed, and the smallest shrunk case per invariant with\n"
          "its replay command.\n"
          "Errors (exit 2): a seed of the range that no shard explored (gap) or that two shards\n"
          "explored (overlap), results of different modes, --ties or --determinism, a result\n"
          "whose explored count differs from its range, a file that is not a result.\n"
          "  RESULT|DIR  shard results (files, or directories of them)\n"
          "  --by-seed   per invariant, keep the case of its first violating seed (what one\n"
          "              process over the whole range saves), not the smallest case; the\n"
          "              summary then does not depend on how the range was sharded\n"
          "  --json      one JSON document on stdout instead of text (default: text)\n"
          "example: pdref sim explore merge explore-out/\n"
          "exit: 0 no violation, 1 violations found, 2 an error above or bad usage\n");
}

/* 64-bit values: a JSON number up to 2^53, else a decimal string. 0, or -1. */
int pd_cli_explore_u64(const cJSON *o, const char *key, uint64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 9007199254740992.0) {
    *out = (uint64_t)v->valuedouble;
    return 0;
  }
  if (!cJSON_IsString(v) || v->valuestring[0] < '0' || v->valuestring[0] > '9') return -1;
  char *end = NULL;
  errno = 0;
  unsigned long long x = strtoull(v->valuestring, &end, 10);
  if (*end || errno) return -1;
  *out = x;
  return 0;
}

static double get_num(const cJSON *o, const char *key, double dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

char *pd_cli_explore_read(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = malloc(MG_MAX_FILE_BYTES + 1);
  size_t n = buf ? fread(buf, 1, MG_MAX_FILE_BYTES + 1, f) : 0;
  fclose(f);
  if (!buf || n > MG_MAX_FILE_BYTES) {
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* "I<k>" -> k in 1..PD_INVARIANT_COUNT, else 0 */
static int inv_id(const char *s) {
  if (!s || s[0] != 'I') return 0;
  char *end = NULL;
  long k = strtol(s + 1, &end, 10);
  return end != s + 1 && !*end && k >= 1 && k <= PD_INVARIANT_COUNT ? (int)k : 0;
}

/* The size of a finding's shrunk case: requests, workers and faults after the shrink. */
static double case_size(const cJSON *f) {
  static const char *const keys[] = {"requests", "workers", "faults"};
  double n = 0;
  for (size_t i = 0; i < 3; i++) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(f, keys[i]);
    const cJSON *after = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 1) : NULL;
    n += cJSON_IsNumber(after) ? after->valuedouble : 1e9;
  }
  return n;
}

/* --by-seed: the finding of the lower seed (what one process over the range saves first). */
static int lower_seed(const cJSON *a, const cJSON *b) {
  uint64_t x = 0, y = 0;
  pd_cli_explore_u64(a, "seed", &x);
  pd_cli_explore_u64(b, "seed", &y);
  return x < y;
}

/* The smaller case (requests + workers + faults), the lower seed on a tie. */
static int smaller(const cJSON *a, const cJSON *b) {
  double sa = case_size(a), sb = case_size(b);
  return sa != sb ? sa < sb : lower_seed(a, b);
}

static void take_findings(mg_state_t *m, const cJSON *doc) {
  const cJSON *f;
  cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(doc, "findings")) {
    int k = inv_id(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "invariant")));
    if (!k || (m->smallest[k] && !(m->by_seed ? lower_seed(f, m->smallest[k])
                                              : smaller(f, m->smallest[k]))))
      continue;
    cJSON_Delete(m->smallest[k]);
    m->smallest[k] = cJSON_Duplicate(f, 1);
  }
}

static void take_invariants(mg_state_t *m, const cJSON *doc) {
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(doc, "invariants")) {
    int k = inv_id(e->string);
    uint64_t first;
    if (!k) continue;
    m->inv_seeds[k] += (uint64_t)get_num(e, "seeds", 0);
    if (pd_cli_explore_u64(e, "first_seed", &first) == 0 && (!m->inv_first[k] || first < m->inv_first[k]))
      m->inv_first[k] = first;
  }
  const cJSON *v;
  cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(doc, "violating")) {
    m->listed_total++;
    if (cJSON_GetArraySize(m->violating_list) < MG_MAX_LISTED)
      cJSON_AddItemToArray(m->violating_list, cJSON_Duplicate(v, 1));
    else m->truncated = 1;
  }
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "violating_truncated"))) m->truncated = 1;
}

/* Settings every shard must share; 0, or 2 after the message. */
static int same_settings(mg_state_t *m, const char *path, const cJSON *doc) {
  const char *mode = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "mode"));
  const char *proto = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "protocol"));
  if (!proto) proto = "sglang"; /* a result from before vLLM worlds were explored */
  double ties = get_num(doc, "ties", -1);
  int det = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "determinism"));
  if (!mode) {
    fprintf(stderr, CMD ": %s: $.mode: missing\n", path);
    return 2;
  }
  if (!m->n_results) {
    snprintf(m->mode, sizeof m->mode, "%s", mode);
    snprintf(m->protocol, sizeof m->protocol, "%s", proto);
    snprintf(m->first, sizeof m->first, "%s", path);
    m->ties = ties;
    m->determinism = det;
    return 0;
  }
  if (strcmp(mode, m->mode) != 0 || strcmp(proto, m->protocol) != 0 || ties != m->ties ||
      det != m->determinism) {
    fprintf(stderr, CMD ": %s: mode %s, protocol %s, ties %g, determinism %d; but %s has mode %s, "
            "protocol %s, ties %g, determinism %d: shards of one exploration share them\n", path,
            mode, proto, ties, det, m->first, m->mode, m->protocol, m->ties, m->determinism);
    return 2;
  }
  return 0;
}

/* One result document; 0, or 2 after the message. */
static int take_result(mg_state_t *m, const char *path, const cJSON *doc) {
  pd_cli_slice_t s;
  static const char *const keys[] = {"seed_start", "seed_end", "shard_index", "shard_count"};
  uint64_t *dst[] = {&s.start, &s.end, &s.index, &s.count};
  for (size_t i = 0; i < 4; i++)
    if (pd_cli_explore_u64(doc, keys[i], dst[i])) {
      fprintf(stderr, CMD ": %s: $.%s: missing or not a whole number\n", path, keys[i]);
      return 2;
    }
  if (s.end < s.start || !s.count || s.index >= s.count) {
    fprintf(stderr, CMD ": %s: seeds %llu..%llu, shard %llu/%llu: not a valid range and shard\n",
            path, (unsigned long long)s.start, (unsigned long long)s.end,
            (unsigned long long)s.index, (unsigned long long)s.count);
    return 2;
  }
  double explored = get_num(doc, "explored", -1);
  if (explored != (double)pd_cli_slice_seeds(&s)) {
    fprintf(stderr, CMD ": %s: explored %.0f seeds, but its range holds %llu of its shard\n", path,
            explored, (unsigned long long)pd_cli_slice_seeds(&s));
    return 2;
  }
  if (same_settings(m, path, doc)) return 2;
  m->slices[m->n_results++] = s;
  m->explored += (uint64_t)explored;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(doc, "timing"); /* before: top level */
  double el = get_num(t ? t : doc, "elapsed_s", 0);
  m->shard_s += el;
  m->shrink_s += get_num(t ? t : doc, "shrink_s", 0);
  if (el > m->wall_max) m->wall_max = el;
  m->violating += (uint64_t)get_num(doc, "violating_seeds", 0);
  take_invariants(m, doc);
  take_findings(m, doc);
  return 0;
}

/* One file; from_dir: a file that is not a result is skipped, not an error. 0 or 2. */
static int take_file(mg_state_t *m, const char *path, int from_dir) {
  size_t len = 0;
  char *txt = pd_cli_explore_read(path, &len);
  if (!txt) {
    fprintf(stderr, CMD ": %s: cannot read (missing, unreadable or over %u MiB)\n", path,
            MG_MAX_FILE_BYTES >> 20);
    return 2;
  }
  const char *at = NULL;
  cJSON *doc = cJSON_ParseWithLengthOpts(txt, len, &at, 0);
  const char *schema = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "schema"));
  int rc = 0;
  if (!PD_EXPLORE_IS_RESULT(schema)) {
    if (from_dir) m->skipped++;
    else if (!doc)
      fprintf(stderr, CMD ": %s: not JSON (byte %ld)\n", path, at ? (long)(at - txt) : 0L), rc = 2;
    else
      fprintf(stderr, CMD ": %s: $.schema: not \"" PD_EXPLORE_RESULT_SCHEMA "\": not an explore "
              "result (write one with --result FILE or --shard-from-env)\n", path), rc = 2;
  } else {
    rc = take_result(m, path, doc);
  }
  cJSON_Delete(doc);
  free(txt);
  return rc;
}

static int take_args(mg_state_t *m, char **args, int n) {
  for (int i = 0; i < n; i++) {
    struct stat st;
    int is_dir = stat(args[i], &st) == 0 && S_ISDIR(st.st_mode);
    char **paths = malloc(MG_MAX_FILES * sizeof *paths);
    int np = 0, rc = paths ? pd_cli_collect_json(CMD, &args[i], 1, paths, &np, MG_MAX_FILES) : 2;
    for (int k = 0; k < np; k++) {
      if (rc == 0 && m->n_results >= MG_MAX_FILES) {
        fprintf(stderr, CMD ": more than %d results\n", MG_MAX_FILES);
        rc = 2;
      }
      if (rc == 0) rc = take_file(m, paths[k], is_dir);
      free(paths[k]);
    }
    free(paths);
    if (rc) return rc;
  }
  if (!m->n_results) {
    fprintf(stderr, CMD ": no explore result among the arguments (%zu other JSON files)\n",
            m->skipped);
    return 2;
  }
  return 0;
}

static void print_text(const mg_state_t *m, const pd_cli_cover_t *c) {
  printf("merge: %d shard results, mode %s, seeds %llu..%llu", m->n_results, m->mode,
         (unsigned long long)c->start, (unsigned long long)(c->end ? c->end - 1 : 0));
  if (c->kind == PD_CLI_COVER_OK) printf(" (%llu seeds, each explored once)\n",
                                         (unsigned long long)(c->end - c->start));
  else printf("\n");
  printf("merge: %llu explored in %.2f shard-seconds (%.0f seeds/s per shard); the slowest "
         "shard took %.2f s (%.0f seeds/s together)\n",
         (unsigned long long)m->explored, m->shard_s,
         m->shard_s > 0 ? (double)m->explored / m->shard_s : 0, m->wall_max,
         m->wall_max > 0 ? (double)m->explored / m->wall_max : 0);
  if (!m->violating) {
    printf("merge: no violations\n");
    return;
  }
  printf("merge: %llu violating seeds:", (unsigned long long)m->violating);
  for (int i = 1; i <= PD_INVARIANT_COUNT; i++)
    if (m->inv_seeds[i])
      printf(" I%d %s %llu (first seed %llu);", i, pd_invariant_name(i),
             (unsigned long long)m->inv_seeds[i], (unsigned long long)m->inv_first[i]);
  printf("\n");
  for (int i = 1; i <= PD_INVARIANT_COUNT; i++) {
    const cJSON *f = m->smallest[i];
    if (!f) continue;
    char seed[32] = "";
    uint64_t sv;
    if (pd_cli_explore_u64(f, "seed", &sv) == 0) snprintf(seed, sizeof seed, "%llu", (unsigned long long)sv);
    printf("merge: smallest I%d %s case: seed %s, size %.0f (requests+workers+faults): %s\n"
           "    replay: %s\n", i, pd_invariant_name(i),
           seed, case_size(f),
           cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "file")),
           cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "replay")));
  }
}

/* A seed: a JSON number up to 2^53, a decimal string above (docs/scenarios.md). */
static cJSON *u64_json(uint64_t v) {
  char b[24];
  if (v <= 9007199254740992ull) return cJSON_CreateNumber((double)v); /* exact in a double */
  snprintf(b, sizeof b, "%llu", (unsigned long long)v); /* above 2^53: a decimal string */
  return cJSON_CreateString(b);
}

/* The merged summary (`--json`'s document); its smallest findings and violating list move
 * into it. */
static cJSON *build_json(mg_state_t *m, const pd_cli_cover_t *c) {
  static const char *const kinds[] = {"ok", "gap", "overlap"};
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "schema", PD_EXPLORE_MERGE_SCHEMA);
  cJSON_AddStringToObject(j, "command", "sim explore merge"); /* also what --jobs prints */
  cJSON_AddStringToObject(j, "mode", m->mode);
  cJSON_AddStringToObject(j, "protocol", m->protocol);
  cJSON_AddNumberToObject(j, "results", m->n_results);
  cJSON_AddNumberToObject(j, "skipped_files", (double)m->skipped);
  cJSON_AddItemToObject(j, "seed_start", u64_json(c->start));
  cJSON_AddItemToObject(j, "seed_end", u64_json(c->end));
  cJSON_AddStringToObject(j, "coverage", kinds[c->kind]);
  if (c->kind != PD_CLI_COVER_OK) {
    cJSON_AddItemToObject(j, "coverage_seed", u64_json(c->seed));
    cJSON_AddNumberToObject(j, "coverage_times", c->times);
  }
  cJSON_AddNumberToObject(j, "explored", (double)m->explored);
  cJSON_AddNumberToObject(j, "shard_s", m->shard_s);
  cJSON_AddNumberToObject(j, "shrink_s", m->shrink_s);
  cJSON_AddNumberToObject(j, "seeds_per_shard_s", m->shard_s > 0 ? m->explored / m->shard_s : 0);
  cJSON_AddNumberToObject(j, "slowest_shard_s", m->wall_max);
  cJSON_AddNumberToObject(j, "seeds_per_s_overall", m->wall_max > 0 ? m->explored / m->wall_max : 0);
  cJSON_AddNumberToObject(j, "violating_seeds", (double)m->violating);
  cJSON *inv = cJSON_AddObjectToObject(j, "invariants");
  for (int i = 1; i <= PD_INVARIANT_COUNT; i++) {
    if (!m->inv_seeds[i]) continue;
    char id[8];
    snprintf(id, sizeof id, "I%d", i);
    cJSON *e = cJSON_AddObjectToObject(inv, id);
    cJSON_AddStringToObject(e, "name", pd_invariant_name(i));
    cJSON_AddNumberToObject(e, "seeds", (double)m->inv_seeds[i]);
    cJSON_AddItemToObject(e, "first_seed", u64_json(m->inv_first[i]));
    if (m->smallest[i]) {
      cJSON_AddItemToObject(e, "smallest", m->smallest[i]);
      m->smallest[i] = NULL;
    }
  }
  cJSON_AddItemToObject(j, "violating", m->violating_list);
  cJSON_AddBoolToObject(j, "violating_truncated", m->truncated);
  m->violating_list = NULL;
  return j;
}

static void print_json(mg_state_t *m, const pd_cli_cover_t *c) {
  cJSON *j = build_json(m, c);
  char *txt = cJSON_Print(j);
  if (txt) puts(txt);
  cJSON_free(txt);
  cJSON_Delete(j);
}

static int report(mg_state_t *m) {
  pd_cli_cover_t c;
  int rc = pd_cli_cover_check(m->slices, (size_t)m->n_results, &c);
  if (rc) {
    fprintf(stderr, CMD ": the shards' seed sets are too irregular to check exactly (their "
            "shard counts' least common multiple is too large): use one --shard n for all\n");
    return 2;
  }
  if (m->json) print_json(m, &c);
  else print_text(m, &c);
  if (c.kind == PD_CLI_COVER_GAP) {
    fprintf(stderr, CMD ": gap: seed %llu of %llu..%llu was explored by no shard\n",
            (unsigned long long)c.seed, (unsigned long long)c.start,
            (unsigned long long)(c.end - 1));
    return 2;
  }
  if (c.kind == PD_CLI_COVER_OVERLAP) {
    fprintf(stderr, CMD ": overlap: seed %llu was explored by %u shards\n",
            (unsigned long long)c.seed, c.times);
    return 2;
  }
  return m->violating ? 1 : 0;
}

enum { MG_OPT_JSON = PD_CLI_OPT_FIRST, MG_OPT_BY_SEED };

static int apply_opt(void *ctx, int c, int index, char *v) {
  (void)index;
  (void)v;
  if (c == MG_OPT_BY_SEED) ((mg_state_t *)ctx)->by_seed = 1;
  else ((mg_state_t *)ctx)->json = 1;
  return 0;
}

int pd_cli_sim_explore_merge(int argc, char **argv) {
  static const struct option opts[] = {
      {"help", no_argument, NULL, 'h'},
      {"json", no_argument, NULL, MG_OPT_JSON},
      {"by-seed", no_argument, NULL, MG_OPT_BY_SEED},
      {NULL, 0, NULL, 0}};
  mg_state_t m;
  memset(&m, 0, sizeof m);
  char **args = calloc((size_t)argc + 1, sizeof *args);
  if (!args) return 2;
  int n_args = 0;
  pd_cli_parser_t p = {CMD, opts, usage, apply_opt, &m, args, argc, &n_args};
  int rc = pd_cli_parse(&p, argc, argv);
  if (rc < 0 && n_args == 0) {
    fprintf(stderr, CMD ": expected one or more RESULT files or directories (try --help)\n");
    rc = 2;
  }
  if (rc < 0) {
    m.slices = malloc(MG_MAX_FILES * sizeof *m.slices);
    m.violating_list = cJSON_CreateArray();
    rc = m.slices && m.violating_list ? take_args(&m, args, n_args) : 2;
    if (rc == 0) rc = report(&m);
  }
  for (int i = 0; i <= PD_INVARIANT_COUNT; i++) cJSON_Delete(m.smallest[i]);
  cJSON_Delete(m.violating_list);
  free(m.slices);
  free(args);
  return rc;
}

cJSON *pd_cli_explore_fold(const cJSON *const *docs, const char *const *paths, int n) {
  mg_state_t m;
  memset(&m, 0, sizeof m);
  cJSON *j = NULL;
  m.slices = malloc((size_t)(n > 0 ? n : 1) * sizeof *m.slices);
  m.violating_list = cJSON_CreateArray();
  int rc = m.slices && m.violating_list ? 0 : 2;
  for (int i = 0; i < n && !rc; i++) rc = take_result(&m, paths[i], docs[i]);
  pd_cli_cover_t c;
  if (!rc && pd_cli_cover_check(m.slices, (size_t)m.n_results, &c)) {
    fprintf(stderr, CMD ": %s ...: the shards' seed sets are too irregular to check\n", paths[0]);
    rc = 2;
  }
  if (!rc && c.kind != PD_CLI_COVER_OK) {
    fprintf(stderr, CMD ": %s ...: %s: seed %llu was explored by %u shards: a merged summary "
            "must not claim seeds nobody ran, nor count one twice\n", paths[0],
            c.kind == PD_CLI_COVER_GAP ? "gap" : "overlap", (unsigned long long)c.seed,
            c.kind == PD_CLI_COVER_GAP ? 0u : c.times);
    rc = 2;
  }
  if (!rc) j = build_json(&m, &c);
  for (int i = 0; i <= PD_INVARIANT_COUNT; i++) cJSON_Delete(m.smallest[i]);
  cJSON_Delete(m.violating_list);
  free(m.slices);
  return j;
}
