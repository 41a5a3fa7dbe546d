/* The trace of a simulated run: the row's trace hash (I13) is the same for the same seed,
 * whether or not a file is written, and moves when one timing moves; the file a viewer reads
 * has named processes and lanes, as many lanes as spans overlap, spans that end after they
 * start, and ids as strings. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "pd_scenario.h"
#include "pd_trace.h"
#include "pd_world.h"
#include "pdt.h"
#include "pdt_net.h"

static pd_scenario_t *load(const char *name) {
  pd_scenario_t *s = malloc(sizeof *s);
  char path[1024], err[512];
  snprintf(path, sizeof path, "%s/scenarios/%s.json", PD_SOURCE_DIR, name);
  PDT_TRUE(s != NULL);
  if (s && pd_scenario_load(s, path, err, sizeof err) != 0) {
    printf("\n%s\n", err);
    free(s);
    s = NULL;
  }
  PDT_TRUE(s != NULL);
  return s;
}

/* One run; f NULL: hash only. Returns the hash; *v the violated set. */
static uint64_t run(const pd_scenario_t *s, pd_mode_t m, FILE *f, uint32_t *v) {
  pd_world_stats_t st;
  uint64_t h = 0;
  *v = 0;
  PDT_EQ_INT(pd_world_run(s, m, s->config.seed, f, &st, v, &h), 0);
  return h;
}

/* Crashes and restarts, aborts and client disconnects are all instants of the hash: each run
 * hashes the same with a file written and without. */
static void test_hash_is_the_same_with_and_without_a_file(void) {
  static const char *const names[] = {"decode-crash-and-restart",
                                      "abort-overtakes-late-prefill-request",
                                      "client-disconnect-during-decode-stream"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    pd_scenario_t *s = load(names[i]);
    if (!s) continue;
    for (int m = 0; m < PD_MODE_COUNT; m++) {
      if (!pd_mode_speaks((pd_mode_t)m, pd_scenario_protocol(s))) continue;
      char *text = NULL;
      size_t len = 0;
      FILE *f = open_memstream(&text, &len);
      uint32_t v1, v2, v3;
      uint64_t with = run(s, (pd_mode_t)m, f, &v1);
      fclose(f);
      uint64_t without = run(s, (pd_mode_t)m, NULL, &v2);
      uint64_t again = run(s, (pd_mode_t)m, NULL, &v3);
      char msg[160];
      snprintf(msg, sizeof msg, "%s %s: %016llx with a file, %016llx without", names[i],
               pd_mode_name((pd_mode_t)m), (unsigned long long)with, (unsigned long long)without);
      CU_assertImplementation(with == without && without == again, __LINE__, msg, __FILE__, "",
                              CU_FALSE);
      PDT_EQ_INT(v1, v2);
      PDT_TRUE(len > 2); /* the file was written */
      free(text);
    }
    free(s);
  }
}

/* The network's one-way latency up by 1 us: the same verdict, another hash; back, the same. */
static void test_one_timing_moves_the_hash(void) {
  pd_scenario_t *s = load("happy-path-stream");
  if (!s) return;
  uint32_t v1, v2, v3;
  uint64_t base = run(s, PD_MODE_REFERENCE, NULL, &v1);
  s->config.net_us += 1;
  uint64_t moved = run(s, PD_MODE_REFERENCE, NULL, &v2);
  s->config.net_us -= 1;
  PDT_EQ_U64(run(s, PD_MODE_REFERENCE, NULL, &v3), base);
  PDT_TRUE(moved != base);
  PDT_EQ_INT(v1, v2);
  PDT_EQ_INT(v1, 0);
  free(s);
}

/* ---------- the written file, checked as a viewer would read it ---------- */

#define MAX_TRACKS 4096
/* A track as its thread_name says: "<group's lane name> <lane>" ("to p0 3", "slot 0"). */
typedef struct track {
  int pid, tid, has_name, n_spans, lane;
  char group[64];
} track_t;

typedef struct tracks {
  track_t t[MAX_TRACKS];
  int n;
} tracks_t;

static track_t *track_of(tracks_t *ts, int pid, int tid) {
  for (int i = 0; i < ts->n; i++)
    if (ts->t[i].pid == pid && ts->t[i].tid == tid) return &ts->t[i];
  if (ts->n == MAX_TRACKS) return NULL;
  ts->t[ts->n] = (track_t){pid, tid, 0, 0, -1, ""};
  return &ts->t[ts->n++];
}

static const char *str_of(const cJSON *o, const char *k) {
  return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static double num_of(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : -1.0;
}

/* ids are strings; no number in args is past 2^53 (a double would round it). */
static int args_ok(const cJSON *args) {
  static const char *const ids[] = {"req", "leg", "room"};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, ids[i]);
    if (v && !cJSON_IsString(v)) return 0;
  }
  const cJSON *v;
  cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(args, "rooms")) if (!cJSON_IsString(v)) return 0;
  cJSON_ArrayForEach(v, args) if (cJSON_IsNumber(v) && v->valuedouble > 9007199254740992.0) return 0;
  return 1;
}

/* Spans are written in the order requests were judged; a track's spans are checked after
 * sorting by track and start. */
typedef struct span_t {
  int pid, tid;
  double ts, end;
  const track_t *track;
} span_t;

static int cmp_span(const void *a, const void *b) {
  const span_t *x = a, *y = b;
  if (x->pid != y->pid) return x->pid - y->pid;
  if (x->tid != y->tid) return x->tid - y->tid;
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int same_group(const track_t *a, const track_t *b) {
  return a->pid == b->pid && strcmp(a->group, b->group) == 0;
}

/* The most spans of one group (a process's tracks of one lane name) open at once: the lanes
 * a packing needs. Counted at each span's start. */
static int max_overlap(const span_t *sp, int n, const track_t *t) {
  int best = 0;
  for (int i = 0; i < n; i++) {
    if (!same_group(sp[i].track, t)) continue;
    int open = 0;
    for (int k = 0; k < n; k++)
      if (same_group(sp[k].track, t) && sp[k].ts <= sp[i].ts && sp[k].end > sp[i].ts)
        open++;
    if (open > best) best = open;
  }
  return best;
}

static void check_file(const cJSON *root, const pd_scenario_t *s, int *n_tracks, int *n_legs) {
  static tracks_t ts;
  static span_t sp[20000];
  int n_sp = 0, bad_span = 0, bad_args = 0, names = 0;
  ts.n = 0;
  *n_legs = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, root) {
    const char *ph = str_of(e, "ph"), *name = str_of(e, "name");
    int pid = (int)num_of(e, "pid"), tid = (int)num_of(e, "tid");
    if (!ph || !name) { bad_span++; continue; }
    if (strcmp(ph, "M") == 0) {
      const char *arg = str_of(cJSON_GetObjectItemCaseSensitive(e, "args"), "name");
      if (strcmp(name, "process_name") == 0 && arg) {
        if (pid == PD_TRACE_CLIENTS) names += strcmp(arg, "client requests") == 0;
        else if (pid == PD_TRACE_GATEWAY) names += strcmp(arg, "gateway legs") == 0;
        else if (pid >= PD_TRACE_WORKER && pid < PD_TRACE_WORKER + (int)s->n_workers) {
          const pd_scenario_worker_t *w = &s->workers[pid - PD_TRACE_WORKER];
          char want[96];
          snprintf(want, sizeof want, "%s %s", w->role == PD_ROLE_PREFILL ? "prefill" : "decode",
                   w->name);
          names += strcmp(arg, want) == 0;
        }
      }
      if (strcmp(name, "thread_name") == 0) {
        track_t *t = track_of(&ts, pid, tid);
        const char *sp_ = arg ? strrchr(arg, ' ') : NULL;
        if (t && sp_ && (size_t)(sp_ - arg) < sizeof t->group) {
          t->has_name = 1;
          memcpy(t->group, arg, (size_t)(sp_ - arg));
          t->group[sp_ - arg] = 0;
          t->lane = atoi(sp_ + 1);
        }
      }
      continue;
    }
    if (strcmp(ph, "C") == 0) continue;
    track_t *t = track_of(&ts, pid, tid);
    bad_args += !args_ok(cJSON_GetObjectItemCaseSensitive(e, "args"));
    if (strcmp(ph, "X") != 0 || !t) continue;
    double t0 = num_of(e, "ts"), dur = num_of(e, "dur");
    bad_span += t0 < 0 || dur < 0 || t0 + dur < t0;
    *n_legs += pid == PD_TRACE_GATEWAY;
    t->n_spans++;
    if (n_sp < (int)(sizeof sp / sizeof sp[0])) sp[n_sp++] = (span_t){pid, tid, t0, t0 + dur, t};
  }
  PDT_EQ_INT(names, 2 + (int)s->n_workers); /* every process named */
  PDT_EQ_INT(bad_span, 0);
  PDT_EQ_INT(bad_args, 0);
  qsort(sp, (size_t)n_sp, sizeof sp[0], cmp_span);
  int overlaps = 0, unnamed = 0, lanes_over = 0, shared_tid = 0;
  for (int i = 1; i < n_sp; i++)
    overlaps += sp[i].pid == sp[i - 1].pid && sp[i].tid == sp[i - 1].tid && sp[i].ts < sp[i - 1].end;
  for (int i = 0; i < ts.n; i++) {
    unnamed += !ts.t[i].has_name;
    /* a lane beyond what the group's spans ever needed at once would be a leg's own track */
    lanes_over += ts.t[i].n_spans > 0 && ts.t[i].lane >= max_overlap(sp, n_sp, &ts.t[i]);
    /* a tid names one thread in the whole file, and never a process's main thread */
    for (int k = 0; k < i; k++) shared_tid += ts.t[k].tid == ts.t[i].tid;
    shared_tid += ts.t[i].tid == PD_TRACE_CLIENTS || ts.t[i].tid == PD_TRACE_GATEWAY ||
                  (ts.t[i].tid >= PD_TRACE_WORKER && ts.t[i].tid < PD_TRACE_WORKER + 64);
  }
  PDT_EQ_INT(overlaps, 0);
  PDT_EQ_INT(unnamed, 0);
  PDT_EQ_INT(lanes_over, 0);
  PDT_EQ_INT(shared_tid, 0);
  *n_tracks = ts.n;
}

/* A crash under load (20 requests, four modes): every process and lane named, lanes only as
 * many as spans overlap, fewer tracks than legs, spans that end after they start. */
static void test_written_trace_has_names_lanes_and_string_ids(void) {
  pd_scenario_t *s = load("decode-crash-and-restart");
  if (!s) return;
  for (int m = 0; m < PD_MODE_COUNT; m++) {
    if (!pd_mode_speaks((pd_mode_t)m, pd_scenario_protocol(s))) continue;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    uint32_t v;
    run(s, (pd_mode_t)m, f, &v);
    fclose(f);
    cJSON *root = cJSON_ParseWithLength(text, len);
    PDT_TRUE(cJSON_IsArray(root));
    int n_tracks = 0, n_legs = 0;
    if (root) check_file(root, s, &n_tracks, &n_legs);
    PDT_TRUE(n_legs >= 40);           /* 20 requests, a prefill and a decode leg each */
    /* a track per leg made more tracks than legs (one per request, one or two per leg):
     * lanes here are 23..42 for 40..54 legs */
    PDT_TRUE(n_tracks < n_legs);
    PDT_TRUE(text && strstr(text, "\"name\":\"crash\"") && strstr(text, "\"name\":\"restart\""));
    PDT_TRUE(text && strstr(text, "\"name\":\"rq "));
    cJSON_Delete(root);
    free(text);
  }
  free(s);
}

/* The whole file, or NULL. */
static char *read_path(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  char buf[4096];
  size_t n;
  while (m && (n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, m); /* bounded by EOF */
  if (m) fclose(m);
  fclose(f);
  return text;
}

/* `sim run FILE --trace DIR/out.json` under all modes: one file per mode, out.<mode>.json,
 * each a trace array, and each row prints its path. */
static void test_cli_writes_one_trace_per_mode(void) {
  char bin[PATH_MAX + 8], dir[] = "/tmp/pdt-trace-XXXXXX", cmd[PATH_MAX * 2 + 256];
  if (pdt_pdref_path(bin, sizeof bin) != 0) return;
  PDT_TRUE(mkdtemp(dir) != NULL);
  snprintf(cmd, sizeof cmd, "%s sim run %s/scenarios/happy-path-stream.json --trace %s/out.json"
           " > %s/rows.txt 2>&1", bin, PD_SOURCE_DIR, dir, dir);
  PDT_EQ_INT(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "%s/rows.txt", dir);
  char *rows = read_path(cmd);
  static const char *const modes[] = {"joined", "pr1150", "minilb", "reference"};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    char path[PATH_MAX], line[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/out.%s.json", dir, modes[i]);
    snprintf(line, sizeof line, "    trace: %s\n", path);
    PDT_TRUE(rows && strstr(rows, line) != NULL);
    char *text = read_path(path);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    PDT_TRUE(cJSON_IsArray(root) && cJSON_GetArraySize(root) > 10);
    cJSON_Delete(root);
    free(text);
    unlink(path);
  }
  snprintf(cmd, sizeof cmd, "%s/out.json", dir);
  PDT_TRUE(access(cmd, F_OK) != 0); /* under several modes, no file has the bare name */
  if (rows == NULL) printf("\nno rows\n");
  free(rows);
  snprintf(cmd, sizeof cmd, "%s/rows.txt", dir);
  unlink(cmd);
  rmdir(dir);
}

int pdt_suite_trace_run(void) {
  static const pdt_case_t cases[] = {
      {"a run's hash is the same with and without a trace file",
       test_hash_is_the_same_with_and_without_a_file},
      {"one timing 1 us later moves the hash, not the verdict", test_one_timing_moves_the_hash},
      {"the written trace: named processes and lanes, no lane beyond the overlap, ids strings",
       test_written_trace_has_names_lanes_and_string_ids},
      {"sim run --trace under all modes writes one file per mode and prints it",
       test_cli_writes_one_trace_per_mode},
  };
  return PDT_SUITE("trace_run", cases);
}
