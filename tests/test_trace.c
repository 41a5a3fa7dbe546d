/* pd_trace: output is JSON a trace viewer accepts (ids as strings, names escaped), and the
 * hash is over the events' binary fields: the same with or without a file, changed by any
 * field of any span or instant, blind to counters and names (written only). */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "pd_trace.h"
#include "pdt.h"

/* A trace written into memory; text is NUL-terminated after close. */
typedef struct mem_trace {
  FILE *f;
  char *text;
  size_t len;
  pd_trace_t t;
} mem_trace_t;

static int mem_open(mem_trace_t *m) {
  m->text = NULL;
  m->len = 0;
  m->f = open_memstream(&m->text, &m->len);
  PDT_TRUE(m->f != NULL);
  if (!m->f) return -1;
  pd_trace_init(&m->t, m->f);
  return 0;
}

static uint64_t mem_close(mem_trace_t *m) {
  uint64_t h = pd_trace_finish(&m->t);
  fclose(m->f);
  return h;
}

static const uint64_t rooms[] = {3965725936104210123ull, 7};

/* The events of the main scenario; out NULL gives the hash-only run. */
static void record_scenario(pd_trace_t *t) {
  pd_trace_name(t, PD_TRACE_WORKER, UINT32_MAX, 10, "prefill p0");
  pd_trace_name(t, PD_TRACE_WORKER, 0, 0, "slot");
  pd_trace_arg_t a[] = {PD_TRACE_ARG_U("tokens", 512), PD_TRACE_ARG_ID("room", rooms[0]),
                        {"rooms", PD_TRACE_IDS, 0, NULL, rooms, 2},
                        {"violated", PD_TRACE_INVS, 1u << 1 | 1u << 13, NULL, NULL, 0},
                        PD_TRACE_ARG_B("stream", 1), PD_TRACE_ARG_S("worker", "p0")};
  pd_trace_ev_t x = {'X', PD_TRACE_WORKER, 0, 3, 0, "req %u prefill", 7, 1234567, 2234567, a, 6};
  pd_trace_emit(t, &x);
  pd_trace_ev_t i = {'i', PD_TRACE_WORKER, 0, 3, 0, "first_token", 0, 5000, 5000, NULL, 0};
  pd_trace_emit(t, &i);
  pd_trace_arg_t c[] = {PD_TRACE_ARG_U("running", 2)};
  pd_trace_counter(t, PD_TRACE_WORKER, "engine", 6000, c, 1);
}

static cJSON *field(const cJSON *o, const char *k) {
  return cJSON_GetObjectItemCaseSensitive(o, k);
}

static void check_str(const cJSON *o, const char *k, const char *want) {
  const cJSON *v = field(o, k);
  PDT_TRUE(cJSON_IsString(v));
  PDT_EQ_STR(cJSON_IsString(v) ? v->valuestring : NULL, want);
}

static void check_num(const cJSON *o, const char *k, double want) {
  const cJSON *v = field(o, k);
  PDT_TRUE(cJSON_IsNumber(v));
  double got = cJSON_IsNumber(v) ? v->valuedouble : -1e300;
  double diff = got > want ? got - want : want - got;
  char msg[128];
  snprintf(msg, sizeof msg, "%s: %.3f vs %.3f", k, got, want);
  CU_assertImplementation(diff < 1e-6, __LINE__, msg, __FILE__, "", CU_FALSE);
}

/* The first event with this ph (and name, if given). */
static const cJSON *find(const cJSON *arr, const char *ph, const char *name) {
  const cJSON *e;
  cJSON_ArrayForEach(e, arr) {
    if (strcmp(cJSON_GetStringValue(field(e, "ph")) ? cJSON_GetStringValue(field(e, "ph")) : "",
               ph) != 0)
      continue;
    const char *n = cJSON_GetStringValue(field(e, "name"));
    if (!name || (n && strcmp(n, name) == 0)) return e;
  }
  return NULL;
}

static void check_events(const cJSON *arr) {
  const cJSON *pn = find(arr, "M", "process_name"), *x = find(arr, "X", NULL),
              *i = find(arr, "i", NULL), *c = find(arr, "C", NULL);
  PDT_TRUE(pn && x && i && c);
  if (!pn || !x || !i || !c) return;
  check_num(pn, "pid", PD_TRACE_WORKER);
  check_str(field(pn, "args"), "name", "prefill p0");
  PDT_TRUE(find(arr, "M", "process_sort_index") != NULL);
  const cJSON *tn = find(arr, "M", "thread_name");
  PDT_TRUE(tn != NULL);
  if (tn) check_str(field(tn, "args"), "name", "slot 0");
  check_str(x, "name", "req 7 prefill");
  check_num(x, "pid", PD_TRACE_WORKER);
  check_num(x, "ts", 1234.567);
  check_num(x, "dur", 1000.0);
  const cJSON *args = field(x, "args");
  check_num(args, "tokens", 512);
  check_str(args, "room", "3965725936104210123"); /* exact: a string, not a double */
  PDT_EQ_STR(cJSON_GetStringValue(cJSON_GetArrayItem(field(args, "rooms"), 0)),
             "3965725936104210123");
  PDT_EQ_STR(cJSON_GetStringValue(cJSON_GetArrayItem(field(args, "rooms"), 1)), "7");
  check_str(args, "violated", "I2,I14");
  PDT_TRUE(cJSON_IsTrue(field(args, "stream")));
  check_str(i, "s", "t");
  check_num(i, "ts", 5.0);
  PDT_EQ_INT(field(i, "tid")->valueint, field(x, "tid")->valueint); /* the span's lane */
  check_num(field(c, "args"), "running", 2);
}

static void test_output_is_json_with_expected_events(void) {
  mem_trace_t m;
  if (mem_open(&m) != 0) return;
  record_scenario(&m.t);
  PDT_EQ_U64(m.t.events, 2); /* spans and instants; the counter is not an event of the hash */
  mem_close(&m);
  PDT_TRUE(strstr(m.text, "\"ts\":1234.567") != NULL);
  PDT_TRUE(strstr(m.text, "\"ts\":5.000") != NULL);
  cJSON *root = cJSON_ParseWithLength(m.text, m.len);
  PDT_TRUE(cJSON_IsArray(root));
  if (cJSON_IsArray(root)) check_events(root);
  if (!root) printf("\ntrace output:\n%s\n", m.text);
  cJSON_Delete(root);
  free(m.text);
}

static void test_zero_events_is_empty_array(void) {
  mem_trace_t m;
  if (mem_open(&m) != 0) return;
  mem_close(&m);
  cJSON *root = cJSON_ParseWithLength(m.text, m.len);
  PDT_TRUE(cJSON_IsArray(root));
  PDT_EQ_INT(cJSON_GetArraySize(root), 0);
  cJSON_Delete(root);
  free(m.text);
}

static void test_hash_same_with_and_without_file(void) {
  mem_trace_t m;
  if (mem_open(&m) != 0) return;
  record_scenario(&m.t);
  uint64_t with_file = mem_close(&m);
  free(m.text);
  pd_trace_t t;
  pd_trace_init(&t, NULL);
  record_scenario(&t);
  PDT_EQ_U64(t.events, 2);
  PDT_EQ_U64(pd_trace_finish(&t), with_file);
}

/* One span, with one field changed by `which` (0: none). */
static uint64_t hash_with_span(int which) {
  pd_trace_t t;
  pd_trace_init(&t, NULL);
  uint64_t ids[] = {5, which == 9 ? 7 : 6};
  pd_trace_arg_t a[] = {PD_TRACE_ARG_U("n", which == 7 ? 2 : 1),
                        PD_TRACE_ARG_S("s", which == 8 ? "ab" : "aa"),
                        {"ids", PD_TRACE_IDS, 0, NULL, ids, 2}};
  pd_trace_ev_t e = {which == 1 ? 'i' : 'X', which == 2 ? 3 : 2, which == 3 ? 1 : 0,
                     which == 4 ? 4 : 3, which == 12 ? 2 : 0, which == 5 ? "decodf %u" : "decode %u", 9,
                     1000, which == 6 ? 5001 : 5000, a, 3};
  pd_trace_emit(&t, &e);
  if (which == 10) pd_trace_emit(&t, &e);
  if (which == 11) { /* written only: names and counters do not move the hash */
    pd_trace_name(&t, 2, UINT32_MAX, 0, "x");
    pd_trace_counter(&t, 2, "c", 1, a, 1);
  }
  return pd_trace_finish(&t);
}

static void test_different_event_changes_hash(void) {
  uint64_t base = hash_with_span(0);
  PDT_EQ_U64(hash_with_span(0), base);
  for (int which = 1; which <= 12; which++) {
    if (which == 11) continue;
    char msg[64];
    snprintf(msg, sizeof msg, "field %d changes the hash", which);
    CU_assertImplementation(hash_with_span(which) != base, __LINE__, msg, __FILE__, "", CU_FALSE);
  }
  PDT_EQ_U64(hash_with_span(11), base);
  pd_trace_t t;
  pd_trace_init(&t, NULL);
  PDT_TRUE(pd_trace_finish(&t) != base);
}

static void test_name_escaping_keeps_json_valid(void) {
  static const char nasty[] = "a\"b\\c\nd\te\x01" "f\x1f" "</g>";
  mem_trace_t m;
  if (mem_open(&m) != 0) return;
  pd_trace_name(&m.t, 1, UINT32_MAX, 0, nasty);
  pd_trace_arg_t a[] = {PD_TRACE_ARG_S("k", nasty)};
  pd_trace_ev_t i = {'i', 1, 0, 1, 0, nasty, 0, 1, 1, a, 1};
  pd_trace_emit(&m.t, &i);
  pd_trace_ev_t x = {'X', 1, 0, 1, 0, "", 0, 0, 0, NULL, 0};
  pd_trace_emit(&m.t, &x);
  mem_close(&m);
  cJSON *root = cJSON_ParseWithLength(m.text, m.len);
  PDT_TRUE(cJSON_IsArray(root));
  const cJSON *pn = find(root, "M", "process_name"), *ie = find(root, "i", NULL),
              *xe = find(root, "X", NULL);
  PDT_TRUE(pn && ie && xe);
  if (pn && ie && xe) {
    check_str(field(pn, "args"), "name", nasty);
    check_str(ie, "name", nasty);
    check_str(field(ie, "args"), "k", nasty);
    check_str(xe, "name", "");
  }
  PDT_TRUE(strstr(m.text, "\\u0001") != NULL);
  if (!root) printf("\ntrace output:\n%s\n", m.text);
  cJSON_Delete(root);
  free(m.text);
}

static void test_long_name_is_written_whole(void) {
  char name[3000];
  for (size_t i = 0; i < sizeof name - 1; i++) name[i] = (i % 97 == 0) ? '"' : (char)('a' + i % 26);
  name[sizeof name - 1] = '\0';
  mem_trace_t m;
  if (mem_open(&m) != 0) return;
  pd_trace_ev_t x = {'X', 2, 0, 2, 0, name, 0, 10, 20, NULL, 0};
  pd_trace_emit(&m.t, &x);
  mem_close(&m);
  cJSON *root = cJSON_ParseWithLength(m.text, m.len);
  const cJSON *xe = find(root, "X", NULL);
  PDT_TRUE(xe != NULL);
  if (xe) check_str(xe, "name", name);
  cJSON_Delete(root);
  free(m.text);
}

int pdt_suite_trace(void) {
  static const pdt_case_t cases[] = {
      {"output parses as JSON with names, ids as strings and lanes",
       test_output_is_json_with_expected_events},
      {"zero events still give a valid empty array", test_zero_events_is_empty_array},
      {"same events give the same hash with and without a file",
       test_hash_same_with_and_without_file},
      {"any field of a span changes the hash; names and counters do not",
       test_different_event_changes_hash},
      {"names with quote, backslash and control chars stay valid JSON",
       test_name_escaping_keeps_json_valid},
      {"a long name is written whole", test_long_name_is_written_whole},
  };
  return PDT_SUITE("trace", cases);
}
