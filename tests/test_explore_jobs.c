/* `pdref sim explore --jobs N`, run as a user runs it (build/pdref as a child process, each
 * run bounded by pdt_cli.h): the same seed range under --jobs 1, 2 and 3 prints the same
 * findings and summary, byte for byte, in text and in --json, but for the one "timing:" line
 * (the --json "timing" object); a shard that fails is named and the run exits 2. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdt.h"
#include "pdt_cli.h"
#include "pdt_net.h"

#define EJ_SEEDS "30" /* pr1150: violations from seed 1, several invariants, a few seconds */

static char g_out[128];

/* The run's text without its "timing:" line (malloc'd), or NULL. */
static char *without_timing(const char *out) {
  char *t = strdup(out);
  char *line = t ? strstr(t, "\ntiming: ") : NULL;
  if (line) {
    char *end = strchr(line + 1, '\n');
    memmove(line + 1, end ? end + 1 : line + strlen(line), strlen(end ? end + 1 : "") + 1);
  }
  return t;
}

/* The --json document without "timing", printed (malloc'd), or NULL. */
static char *json_without_timing(const char *out) {
  cJSON *doc = cJSON_Parse(out);
  if (!doc) return NULL;
  PDT_TRUE(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "timing")));
  cJSON_DeleteItemFromObjectCaseSensitive(doc, "timing");
  char *txt = cJSON_Print(doc);
  cJSON_Delete(doc);
  return txt;
}

/* explore pr1150 over the seeds with --jobs jobs (json or text) into g_out; its output with
 * the timing removed (malloc'd), or NULL when pdref is not built. */
static char *explore(const char *jobs, int json) {
  static run_t r;
  char rm[160];
  snprintf(rm, sizeof rm, "rm -rf %s", g_out);
  PDT_EQ_INT(system(rm), 0); /* each run saves its cases afresh */
  const char *args[] = {"sim", "explore", "--mode", "pr1150", "--seeds", EJ_SEEDS, "--out",
                        g_out, "--jobs", jobs, json ? "--json" : NULL, NULL};
  if (pdt_cli_run(&r, "pdref", args, 1) != 0) return NULL;
  PDT_EQ_INT(r.code, 1); /* pr1150 violates */
  PDT_EQ_STR(r.err, "");
  if (!json) PDT_HAS(r.out, "\ntiming: ");
  return json ? json_without_timing(r.out) : without_timing(r.out);
}

static void same_for_any_jobs(int json) {
  snprintf(g_out, sizeof g_out, "/tmp/pdt-explore-jobs-%d", (int)getpid());
  char *one = explore("1", json);
  PDT_TRUE(one != NULL);
  if (!one) return;
  PDT_TRUE(strstr(one, json ? "\"findings\"" : "shrunk for I") != NULL); /* not vacuous */
  const char *ns[] = {"2", "3"};
  for (int i = 0; i < 2; i++) {
    char *n = explore(ns[i], json);
    PDT_TRUE(n != NULL);
    if (n && strcmp(one, n) != 0)
      fprintf(stderr, "test: --jobs 1 printed:\n%s\n--jobs %s printed:\n%s\n", one, ns[i], n);
    PDT_EQ_STR(n ? n : "", one);
    free(n);
  }
  free(one);
  char rm[160];
  snprintf(rm, sizeof rm, "rm -rf %s", g_out);
  PDT_EQ_INT(system(rm), 0);
}

static void test_text_is_the_same_for_jobs_1_2_3(void) { same_for_any_jobs(0); }

static void test_json_is_the_same_for_jobs_1_2_3(void) { same_for_any_jobs(1); }

/* --out is a regular file: a shard that finds a violation cannot save its case and exits 2;
 * the parent names the shard, shows its log and exits 2. */
static void test_a_failing_shard_is_reported(void) {
  static run_t r;
  char file[128];
  snprintf(file, sizeof file, "/tmp/pdt-explore-jobs-file-%d", (int)getpid());
  FILE *f = fopen(file, "w");
  PDT_TRUE(f != NULL);
  if (!f) return;
  fclose(f);
  const char *args[] = {"sim", "explore", "--mode", "pr1150", "--seeds", "4", "--out", file,
                        "--jobs", "2", NULL};
  if (pdt_cli_run(&r, "pdref", args, 1) == 0) {
    PDT_EQ_INT(r.code, 2);
    PDT_HAS(r.err, "--jobs: shard ");
    PDT_HAS(r.err, " failed (exit 2)");
    PDT_HAS(r.err, "cannot create directory");
    PDT_TRUE(strstr(r.out, "explore: mode") == NULL); /* no summary claims the range */
  }
  unlink(file);
}

/* On a terminal the parent draws one bar for the whole range from its shards' progress lines
 * (cmd_explore_jobs.c): seeds explored of the range, for every job together, ending full.
 * The terminal is a pty from util-linux's `script`, bounded by timeout(1). */
static void test_the_bar_counts_every_shards_seeds(void) {
  char bin[PATH_MAX + 8], cmd[PATH_MAX + 256];
  if (pdt_pdref_path(bin, sizeof bin) != 0 || system("command -v script >/dev/null") != 0) {
    fprintf(stderr, "test_explore_jobs: pdref or script(1) missing, bar test skipped\n");
    return;
  }
  snprintf(cmd, sizeof cmd,
           "timeout 120 script -qfec '%s sim explore --mode reference --seeds 600 --jobs 2 "
           "--out /tmp/pdt-explore-bar-%d' /dev/null 2>&1",
           bin, (int)getpid());
  FILE *p = popen(cmd, "r");
  PDT_TRUE(p != NULL);
  if (!p) return;
  static char out[1 << 16];
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  PDT_EQ_INT(pclose(p), 0);
  PDT_HAS(out, "600/600 seeds"); /* both shards' 300, summed */
  PDT_HAS(out, "0 violating  2 jobs");
  PDT_TRUE(strstr(out, "shards done") == NULL); /* not the old count of shards */
  PDT_HAS(out, "explore: no violations");
  snprintf(cmd, sizeof cmd, "rm -rf /tmp/pdt-explore-bar-%d", (int)getpid());
  PDT_EQ_INT(system(cmd), 0);
}

int pdt_suite_explore_jobs(void) {
  static const pdt_case_t cases[] = {
      {"text is the same for --jobs 1, 2, 3", test_text_is_the_same_for_jobs_1_2_3},
      {"--json is the same for --jobs 1, 2, 3", test_json_is_the_same_for_jobs_1_2_3},
      {"a failing shard is reported", test_a_failing_shard_is_reported},
      {"on a terminal the bar counts every shard's seeds", test_the_bar_counts_every_shards_seeds},
  };
  return PDT_SUITE("explore_jobs", cases);
}
