/* The request and leg state machines (core/pd_rqstate.c): docs/spec.md section 4 draws the
 * same legal moves the core asserts, and every transition is reported to the hook, legal, with
 * the line that made it, without changing what the core does. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_rqstate.h"
#include "pd_scenario.h"
#include "pd_world.h"
#include "pd_trace.h"
#include "pdt.h"
#include "pdt_harness.h"

#ifndef PD_SOURCE_DIR
#define PD_SOURCE_DIR "."
#endif

#define MAX_STATES 16
#define SPEC_MAX_BYTES (1u << 20)

typedef struct machine {
  const char *prefix; /* "RQ_" or "LEG_" in the spec */
  int (*count)(void);
  const char *(*name)(int);
  int (*legal)(int, int);
} machine_t;

static const machine_t rq_machine = {"RQ_", pd_rq_state_count, pd_rq_state_name, pd_rq_state_legal};
static const machine_t leg_machine = {"LEG_", pd_leg_state_count, pd_leg_state_name,
                                      pd_leg_state_legal};

typedef struct moves {
  unsigned char m[MAX_STATES][MAX_STATES];
  int rows[MAX_STATES]; /* table rows per "from" state */
  int unknown;          /* names with the prefix that are no state of the core */
} moves_t;

static char *read_spec(void) {
  FILE *f = fopen(PD_SOURCE_DIR "/docs/spec.md", "rb");
  if (!f) return NULL;
  char *s = malloc(SPEC_MAX_BYTES + 1);
  size_t n = s ? fread(s, 1, SPEC_MAX_BYTES, f) : 0;
  fclose(f);
  if (s) s[n] = 0;
  return s;
}

/* The state whose spec name is prefix + core name, for the text [p, p + len); -1 if none. */
static int state_of(const machine_t *mc, const char *p, size_t len) {
  size_t pl = strlen(mc->prefix);
  if (len <= pl || strncmp(p, mc->prefix, pl) != 0) return -1;
  for (int i = 0; i < mc->count(); i++) {
    const char *nm = mc->name(i);
    if (strlen(nm) == len - pl && strncmp(p + pl, nm, len - pl) == 0) return i;
  }
  return -1;
}

static int is_name_char(char c) { return (c >= 'A' && c <= 'Z') || c == '_'; }

/* The name at p (letters and '_'), its length in *len. */
static const char *name_at(const char *p, const char *end, size_t *len) {
  while (p < end && *p == ' ') p++;
  const char *q = p;
  while (q < end && is_name_char(*q)) q++;
  *len = (size_t)(q - p);
  return p;
}

static int note(const machine_t *mc, moves_t *mv, const char *p, size_t len) {
  int s = state_of(mc, p, len);
  if (s < 0 && len > strlen(mc->prefix) && strncmp(p, mc->prefix, strlen(mc->prefix)) == 0)
    mv->unknown++;
  return s;
}

/* A mermaid line "A --> B: label": the edge if both ends are states of the machine. */
static void parse_edge(const machine_t *mc, const char *l, const char *end, moves_t *drawn) {
  const char *arrow = strstr(l, "-->");
  if (!arrow || arrow >= end) return;
  size_t la, lb;
  const char *a = name_at(l, arrow, &la), *b = name_at(arrow + 3, end, &lb);
  int from = note(mc, drawn, a, la), to = note(mc, drawn, b, lb);
  if (from >= 0 && to >= 0) drawn->m[from][to] = 1;
}

/* A table row "| `FROM` | `TO`, `TO` |" (or "none"). */
static void parse_row(const machine_t *mc, const char *l, const char *end, moves_t *table) {
  int from = -1;
  for (const char *p = l; p < end; p++) {
    if (*p != '`') continue;
    const char *q = memchr(p + 1, '`', (size_t)(end - p - 1));
    if (!q) return;
    int s = note(mc, table, p + 1, (size_t)(q - p - 1));
    if (from < 0) {
      if (s < 0) return;
      from = s;
      table->rows[from]++;
    } else if (s >= 0) {
      table->m[from][s] = 1;
    }
    p = q;
  }
}

/* Section [start, stop) of the spec: the "| from | to |" table and the mermaid drawing. */
static int parse_section(const machine_t *mc, const char *spec, const char *start,
                         const char *stop, moves_t *table, moves_t *drawn) {
  const char *a = strstr(spec, start), *b = a ? strstr(a, stop) : NULL;
  if (!a || !b) return -1;
  int in_mermaid = 0, in_table = 0;
  for (const char *l = a; l < b;) {
    const char *e = memchr(l, '\n', (size_t)(b - l));
    if (!e) e = b;
    if (strncmp(l, "```mermaid", 10) == 0) in_mermaid = 1;
    else if (strncmp(l, "```", 3) == 0) in_mermaid = 0;
    else if (in_mermaid) parse_edge(mc, l, e, drawn);
    if (strncmp(l, "| from | to |", 13) == 0) in_table = 1;
    else if (*l != '|') in_table = 0;
    else if (in_table) parse_row(mc, l, e, table);
    l = e + 1;
  }
  return 0;
}

/* Both the table and the drawing list exactly the core's legal moves; each state has one row. */
static void check_machine(const machine_t *mc, const char *start, const char *stop) {
  char *spec = read_spec();
  PDT_TRUE(spec != NULL);
  if (!spec) return;
  moves_t table, drawn;
  memset(&table, 0, sizeof table);
  memset(&drawn, 0, sizeof drawn);
  PDT_EQ_INT(parse_section(mc, spec, start, stop, &table, &drawn), 0);
  free(spec);
  PDT_EQ_INT(table.unknown + drawn.unknown, 0);
  int n = mc->count();
  PDT_TRUE(n > 0 && n <= MAX_STATES);
  for (int f = 0; f < n && n <= MAX_STATES; f++) {
    char what[96];
    snprintf(what, sizeof what, "%s%s has one row", mc->prefix, mc->name(f));
    CU_assertImplementation(table.rows[f] == 1, __LINE__, what, __FILE__, "", CU_FALSE);
    for (int t = 0; t < n; t++) {
      int core = mc->legal(f, t);
      snprintf(what, sizeof what, "%s%s -> %s%s: core %d, spec table %d, drawing %d", mc->prefix,
               mc->name(f), mc->prefix, mc->name(t), core, table.m[f][t], drawn.m[f][t]);
      CU_assertImplementation(core == table.m[f][t] && core == drawn.m[f][t], __LINE__, what,
                              __FILE__, "", CU_FALSE);
    }
  }
}

static void test_spec_request_table_and_drawing_match_the_core(void) {
  check_machine(&rq_machine, "### 4.1 The request", "### 4.2 The leg");
}

static void test_spec_leg_table_and_drawing_match_the_core(void) {
  check_machine(&leg_machine, "### 4.2 The leg", "\n## 5.");
}

static void test_tables_refuse_out_of_range_states(void) {
  PDT_FALSE(pd_rq_state_legal(-1, 0));
  PDT_FALSE(pd_rq_state_legal(0, pd_rq_state_count()));
  for (int s = 0; s < pd_rq_state_count(); s++) { /* one past the table, from every row */
    PDT_FALSE(pd_rq_state_legal(s, pd_rq_state_count()));
    PDT_FALSE(pd_rq_state_legal(pd_rq_state_count(), s));
  }
  PDT_TRUE(pd_rq_state_name(pd_rq_state_count()) == NULL);
  PDT_TRUE(pd_leg_state_name(-1) == NULL);
  for (int s = 0; s < pd_rq_state_count(); s++) PDT_FALSE(pd_rq_state_legal(s, s)); /* no self-move */
}

/* ---------- the transition hook ---------- */

#define MAX_SEEN 128

typedef struct seen {
  pd_transition_t t[MAX_SEEN];
  size_t n;
  int bad_line, illegal;
} seen_t;

static void record(void *ctx, const pd_transition_t *t) {
  seen_t *s = ctx;
  int legal = t->machine == PD_MACHINE_REQUEST ? pd_rq_state_legal(t->from, t->to)
                                               : pd_leg_state_legal(t->from, t->to);
  s->illegal += !legal;
  s->bad_line += !t->file || strncmp(t->file, "pd_", 3) != 0 || t->line <= 0;
  if (s->n < MAX_SEEN) s->t[s->n++] = *t;
}

/* The request's moves as "FROM>TO FROM>TO ...". */
static void rq_path(const seen_t *s, char *out, size_t cap) {
  size_t k = 0;
  out[0] = 0;
  for (size_t i = 0; i < s->n && k < cap; i++) {
    if (s->t[i].machine != PD_MACHINE_REQUEST) continue;
    int w = snprintf(out + k, cap - k, "%s%s>%s", k ? " " : "", pd_rq_state_name(s->t[i].from),
                     pd_rq_state_name(s->t[i].to));
    if (w < 0) break;
    k += (size_t)w;
  }
}

static size_t leg_moves_of(const seen_t *s, uint64_t leg, const char *to) {
  size_t n = 0;
  for (size_t i = 0; i < s->n; i++)
    n += s->t[i].machine == PD_MACHINE_LEG && s->t[i].leg_id == leg &&
         strcmp(pd_leg_state_name(s->t[i].to), to) == 0;
  return n;
}

static void hooked(harness_t *h, pd_mode_t mode, seen_t *s) {
  memset(s, 0, sizeof *s);
  h_init(h, mode, NULL);
  pd_gw_set_transition_hook(h->gw, record, s);
}

static void test_a_reference_stream_reports_each_move_with_its_line(void) {
  harness_t h;
  seen_t s;
  hooked(&h, PD_MODE_REFERENCE, &s);
  h_request(&h, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
  h_leg(&h, PD_EV_UP_DATA, 1, 0, DONE);
  h_leg(&h, PD_EV_UP_END, 1, 0, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, DONE);
  h_leg(&h, PD_EV_UP_END, 2, 0, NULL);
  char path[256];
  rq_path(&s, path, sizeof path);
  PDT_EQ_STR(path, "NEW>FIRST FIRST>STREAM STREAM>TAIL TAIL>END");
  PDT_EQ_U64(leg_moves_of(&s, 1, "HEAD") + leg_moves_of(&s, 1, "ENDED"), 2);
  PDT_EQ_U64(leg_moves_of(&s, 1, "REMOVED"), 1); /* removed once */
  PDT_EQ_U64(leg_moves_of(&s, 2, "REMOVED"), 1);
  PDT_EQ_INT(s.illegal, 0);
  PDT_EQ_INT(s.bad_line, 0);
  PDT_TRUE(s.n > 0 && s.t[0].req_id == 7 && strcmp(s.t[0].file, "pd_mode_ref.c") == 0);
  h_free(&h);
}

/* client_done / client_gone are states now: smg's G7 decode lingers in RQ_GONE until its next
 * chunk, then the request ends. */
static void test_pr1150_client_gone_mid_stream_moves_to_gone_then_end(void) {
  harness_t h;
  seen_t s;
  hooked(&h, PD_MODE_PR1150, &s);
  h_request(&h, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
  pd_event_t gone = {.kind = PD_EV_CLIENT_GONE, .req_id = 7};
  h_feed(&h, gone);
  PDT_EQ_U64(h_count(&h, PD_ACT_CLOSE_LEG), 0); /* G7: not yet */
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK1);
  PDT_TRUE(h_close_of(&h, 2) != NULL);
  char path[256];
  rq_path(&s, path, sizeof path);
  PDT_EQ_STR(path, "NEW>HEADS HEADS>STREAM STREAM>GONE");
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL); /* the detached prefill lives on, then ends */
  h_leg(&h, PD_EV_UP_END, 1, 0, NULL);
  rq_path(&s, path, sizeof path);
  PDT_EQ_STR(path, "NEW>HEADS HEADS>STREAM STREAM>GONE GONE>END");
  PDT_EQ_U64(pd_gw_requests_live(h.gw), 0);
  PDT_EQ_INT(s.illegal, 0);
  h_free(&h);
}

static void test_reference_prefill_lost_is_a_state_decode_commits_from(void) {
  harness_t h;
  seen_t s;
  hooked(&h, PD_MODE_REFERENCE, &s);
  h_request(&h, STREAM);
  h_leg(&h, PD_EV_UP_HEAD, 1, 200, NULL);
  h_leg(&h, PD_EV_UP_HEAD, 2, 200, NULL);
  h_uperr(&h, 1, PD_UPSTREAM_ERROR_READ);
  char path[256];
  rq_path(&s, path, sizeof path);
  PDT_EQ_STR(path, "NEW>FIRST FIRST>PREFILL_LOST");
  h_leg(&h, PD_EV_UP_DATA, 2, 0, TOK0);
  rq_path(&s, path, sizeof path);
  PDT_EQ_STR(path, "NEW>FIRST FIRST>PREFILL_LOST PREFILL_LOST>STREAM");
  PDT_EQ_INT(h.head_status, 200);
  h_free(&h);
}

/* A failing attempt, its backoff, the client leaving in it; every action of every step into
 * out. */
static size_t run_script(int with_hook, pd_action_t *out, size_t cap, seen_t *s) {
  harness_t h;
  size_t n = 0;
  memset(s, 0, sizeof *s);
  h_init(&h, PD_MODE_REFERENCE, NULL);
  if (with_hook) pd_gw_set_transition_hook(h.gw, record, s);
  pd_event_t gone = {.kind = PD_EV_CLIENT_GONE, .req_id = 7};
  for (int step = 0; step < 3; step++) {
    if (step == 0) h_request(&h, STREAM);
    if (step == 1) h_leg(&h, PD_EV_UP_HEAD, 2, 503, NULL);
    if (step == 2) h_feed(&h, gone);
    for (size_t i = 0; i < h.out.n && n < cap; i++) out[n++] = h.out.v[i];
  }
  h_free(&h);
  return n;
}

static int same_action(const pd_action_t *a, const pd_action_t *b) {
  return a->kind == b->kind && a->req_id == b->req_id && a->leg_id == b->leg_id &&
         a->role == b->role && a->worker == b->worker && a->status == b->status &&
         a->flag == b->flag && a->deadline_ns == b->deadline_ns && a->len == b->len;
}

/* Same script with and without a hook: the same actions, field by field. */
static void test_the_hook_changes_no_action(void) {
  static pd_action_t plain[256], traced[256];
  seen_t s;
  size_t n_plain = run_script(0, plain, 256, &s);
  PDT_EQ_U64(s.n, 0);
  size_t n_traced = run_script(1, traced, 256, &s);
  char path[256];
  rq_path(&s, path, sizeof path);
  PDT_EQ_STR(path, "NEW>FIRST FIRST>BACKOFF BACKOFF>GONE GONE>END");
  PDT_EQ_U64(n_traced, n_plain);
  PDT_TRUE(n_plain > 8);
  size_t differ = 0;
  for (size_t i = 0; i < n_plain && i < n_traced; i++) differ += !same_action(&plain[i], &traced[i]);
  PDT_EQ_U64(differ, 0);
}

/* ---------- the simulator's Perfetto trace ---------- */

static char *read_all(FILE *f) {
  long len = ftell(f);
  if (len < 0) return NULL;
  rewind(f);
  char *buf = calloc(1, (size_t)len + 1);
  if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* The instant named name on process pid, with its file and line in args; NULL if none. */
static const cJSON *find_instant(const cJSON *root, const char *name, int pid) {
  const cJSON *e;
  cJSON_ArrayForEach(e, root) {
    const cJSON *n = cJSON_GetObjectItem(e, "name"), *ph = cJSON_GetObjectItem(e, "ph");
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0 && cJSON_IsString(ph) &&
        strcmp(ph->valuestring, "i") == 0 && cJSON_GetObjectItem(e, "pid")->valueint == pid)
      return e;
  }
  return NULL;
}

static void test_the_sim_trace_shows_each_transition_with_its_line(void) {
  static pd_scenario_t s;
  char path[1024], err[512];
  snprintf(path, sizeof path, "%s/scenarios/happy-path-stream.json", PD_SOURCE_DIR);
  PDT_EQ_INT(pd_scenario_load(&s, path, err, sizeof err), 0);
  FILE *f = tmpfile();
  PDT_TRUE(f != NULL);
  if (!f) return;
  pd_world_stats_t st;
  uint32_t v = 0, v_plain = 0;
  uint64_t h = 0, h_plain = 0;
  PDT_EQ_INT(pd_world_run(&s, PD_MODE_REFERENCE, s.config.seed, f, &st, &v, &h), 0);
  PDT_EQ_INT(pd_world_run(&s, PD_MODE_REFERENCE, s.config.seed, NULL, &st, &v_plain, &h_plain), 0);
  PDT_EQ_U64(h, h_plain); /* tracing changes nothing the run hash covers */
  PDT_EQ_INT(v, v_plain);
  char *buf = read_all(f);
  fclose(f);
  cJSON *root = buf ? cJSON_Parse(buf) : NULL;
  free(buf);
  PDT_TRUE(cJSON_IsArray(root));
  const cJSON *commit = find_instant(root, "rq FIRST->STREAM", 1);
  const cJSON *end = find_instant(root, "rq TAIL->END", 1);
  const cJSON *head = find_instant(root, "leg OPEN->HEAD", PD_TRACE_GATEWAY);
  PDT_TRUE(commit && end && head);
  if (commit) {
    const cJSON *args = cJSON_GetObjectItem(commit, "args");
    PDT_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(args, "file")), "pd_mode_ref.c");
    PDT_TRUE(cJSON_GetObjectItem(args, "line") && cJSON_GetObjectItem(args, "line")->valueint > 0);
  }
  cJSON_Delete(root);
}

int pdt_suite_rqstate(void) {
  static const pdt_case_t cases[] = {
      {"spec 4.1: the request's table and drawing match the core",
       test_spec_request_table_and_drawing_match_the_core},
      {"spec 4.2: the leg's table and drawing match the core",
       test_spec_leg_table_and_drawing_match_the_core},
      {"tables refuse out-of-range states and self-moves", test_tables_refuse_out_of_range_states},
      {"a reference stream reports each move with its line",
       test_a_reference_stream_reports_each_move_with_its_line},
      {"pr1150 client gone mid-stream: STREAM -> GONE -> END",
       test_pr1150_client_gone_mid_stream_moves_to_gone_then_end},
      {"reference prefill lost is a state decode commits from",
       test_reference_prefill_lost_is_a_state_decode_commits_from},
      {"the transition hook changes no action", test_the_hook_changes_no_action},
      {"the simulator's trace shows each transition with its line",
       test_the_sim_trace_shows_each_transition_with_its_line},
  };
  return PDT_SUITE("rqstate", cases);
}
