/* pd_trace: output is JSON a trace viewer accepts, and the hash is the same with or without
 * a file and changes with any event. */
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

/* The events of the main scenario; out NULL gives the hash-only run. */
static void record_scenario(pd_trace_t *t) {
  pd_trace_track(t, 1, 7, "req 7");
  pd_trace_span(t, 2, 3, "prefill", 1234567, 2234567, "{\"tokens\":512}");
  pd_trace_instant(t, 4, 9, "first_token", 5000, NULL);
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

static void check_events(const cJSON *arr) {
  const cJSON *m = cJSON_GetArrayItem(arr, 0), *x = cJSON_GetArrayItem(arr, 1),
              *i = cJSON_GetArrayItem(arr, 2);
  check_str(m, "ph", "M");
  check_str(m, "name", "thread_name");
  check_num(m, "pid", 1);
  check_num(m, "tid", 7);
  check_str(field(m, "args"), "name", "req 7");
  check_str(x, "ph", "X");
  check_str(x, "name", "prefill");
  check_num(x, "pid", 2);
  check_num(x, "ts", 1234.567);
  check_num(x, "dur", 1000.0);
  check_num(field(x, "args"), "tokens", 512);
  check_str(i, "ph", "i");
  check_str(i, "s", "t");
  check_num(i, "ts", 5.0);
  PDT_TRUE(field(i, "args") == NULL);
}

static void test_output_is_json_with_expected_events(void) {
  mem_trace_t m;
  if (mem_open(&m) != 0) return;
  record_scenario(&m.t);
  PDT_EQ_U64(m.t.events, 3);
  mem_close(&m);
  PDT_TRUE(strstr(m.text, "\"ts\":1234.567") != NULL);
  PDT_TRUE(strstr(m.text, "\"ts\":5.000") != NULL);
  cJSON *root = cJSON_ParseWithLength(m.text, m.len);
  PDT_TRUE(cJSON_IsArray(root));
  PDT_EQ_INT(cJSON_GetArraySize(root), 3);
  if (cJSON_IsArray(root) && cJSON_GetArraySize(root) == 3) check_events(root);
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
  PDT_EQ_U64(t.events, 3);
  PDT_EQ_U64(pd_trace_finish(&t), with_file);
}

static uint64_t hash_with_span(uint32_t pid, const char *name, uint64_t t1_ns,
                               const char *args) {
  pd_trace_t t;
  pd_trace_init(&t, NULL);
  pd_trace_track(&t, 1, 7, "req 7");
  pd_trace_span(&t, pid, 3, name, 1000, t1_ns, args);
  return pd_trace_finish(&t);
}

static void test_different_event_changes_hash(void) {
  uint64_t base = hash_with_span(2, "decode", 5000, NULL);
  PDT_EQ_U64(hash_with_span(2, "decode", 5000, NULL), base);
  PDT_TRUE(hash_with_span(2, "decode", 5001, NULL) != base);
  PDT_TRUE(hash_with_span(3, "decode", 5000, NULL) != base);
  PDT_TRUE(hash_with_span(2, "decodf", 5000, NULL) != base);
  PDT_TRUE(hash_with_span(2, "decode", 5000, "{}") != base);
  pd_trace_t t;
  pd_trace_init(&t, NULL);
  PDT_TRUE(pd_trace_finish(&t) != base);
}

static void test_name_escaping_keeps_json_valid(void) {
  static const char nasty[] = "a\"b\\c\nd\te\x01" "f\x1f" "</g>";
  mem_trace_t m;
  if (mem_open(&m) != 0) return;
  pd_trace_track(&m.t, 1, 1, nasty);
  pd_trace_instant(&m.t, 1, 1, nasty, 1, "{\"k\":\"v\"}");
  pd_trace_span(&m.t, 1, 1, "", 0, 0, NULL);
  mem_close(&m);
  cJSON *root = cJSON_ParseWithLength(m.text, m.len);
  PDT_TRUE(cJSON_IsArray(root));
  PDT_EQ_INT(cJSON_GetArraySize(root), 3);
  if (cJSON_GetArraySize(root) == 3) {
    check_str(field(cJSON_GetArrayItem(root, 0), "args"), "name", nasty);
    check_str(cJSON_GetArrayItem(root, 1), "name", nasty);
    check_str(cJSON_GetArrayItem(root, 2), "name", "");
  }
  PDT_TRUE(strstr(m.text, "\\u0001") != NULL);
  if (!root) printf("\ntrace output:\n%s\n", m.text);
  cJSON_Delete(root);
  free(m.text);
}

static void test_long_name_survives_buffering(void) {
  char name[3000];
  for (size_t i = 0; i < sizeof name - 1; i++) name[i] = (i % 97 == 0) ? '"' : (char)('a' + i % 26);
  name[sizeof name - 1] = '\0';
  FILE *f = tmpfile();
  PDT_TRUE(f != NULL);
  if (!f) return;
  pd_trace_t t;
  pd_trace_init(&t, f);
  pd_trace_span(&t, 2, 2, name, 10, 20, NULL);
  pd_trace_finish(&t);
  long len = ftell(f);
  rewind(f);
  char *buf = calloc(1, (size_t)len + 1);
  size_t got = buf ? fread(buf, 1, (size_t)len, f) : 0;
  fclose(f);
  PDT_EQ_U64(got, (uint64_t)len);
  cJSON *root = buf ? cJSON_Parse(buf) : NULL;
  PDT_EQ_INT(cJSON_GetArraySize(root), 1);
  if (cJSON_GetArraySize(root) == 1) check_str(cJSON_GetArrayItem(root, 0), "name", name);
  cJSON_Delete(root);
  free(buf);
}

int pdt_suite_trace(void) {
  static const pdt_case_t cases[] = {
      {"output parses as JSON with the expected events", test_output_is_json_with_expected_events},
      {"zero events still give a valid empty array", test_zero_events_is_empty_array},
      {"same events give the same hash with and without a file",
       test_hash_same_with_and_without_file},
      {"a different event gives a different hash", test_different_event_changes_hash},
      {"names with quote, backslash and control chars stay valid JSON",
       test_name_escaping_keeps_json_valid},
      {"a name longer than the event buffer is written whole", test_long_name_survives_buffering},
  };
  return PDT_SUITE("trace", cases);
}
