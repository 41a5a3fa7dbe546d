/* cli/report_*.c: the HTML report's writer (escaping, one matrix cell per result row, error
 * rows, both row shapes), its loading errors, the swimlane reader of Trace Event Format, and
 * the metrics JSON it draws from (sim/pd_metrics_series.c). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_result.h"
#include "pd_metrics.h"
#include "pdt.h"
#include "pdt_cli.h"
#include "report.h"

/* The text fn wrote into a memory stream (caller frees). */
#define CAPTURE(buf, len, stmt)                  \
  do {                                           \
    FILE *cap_f_ = open_memstream(&(buf), &(len)); \
    PDT_TRUE(cap_f_ != NULL);                    \
    if (cap_f_) {                                \
      FILE *out = cap_f_;                        \
      stmt;                                      \
      fclose(cap_f_);                            \
    }                                            \
  } while (0)

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static void test_escape_text_and_attributes(void) {
  char *b = NULL;
  size_t len = 0;
  CAPTURE(b, len, pd_report_esc(out, "<script>alert('x')</script> & \"q\""));
  PDT_EQ_STR(b, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
  free(b);
  /* control bytes, a stray continuation byte, an overlong '/', a surrogate: U+FFFD each;
   * well-formed UTF-8 (é, €, 😀) passes through */
  CAPTURE(b, len, pd_report_esc(out, "a\x01" "b\x80" "c\xc0\xaf" "d\xed\xa0\x80" "e\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
  PDT_EQ_STR(b, "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd" "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                "e\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  free(b);
  CAPTURE(b, len, pd_report_esc(out, NULL));
  PDT_EQ_U64(len, 0);
  free(b);
}

/* Both shapes of "violated" read into the record's mask; an ID of another pdref's counts. */
static void test_violated_old_and_new_shapes(void) {
  cJSON *old = cJSON_Parse("{\"violated\": \"I3,I10\"}");
  cJSON *neu = cJSON_Parse("{\"violated\": [\"I2\", \"I3\", \"I99\"], \"violated_names\": [\"orphan-leg\", \"x<y\"]}");
  cJSON *none = cJSON_Parse("{\"violated\": []}");
  pd_cli_result_t x;
  pd_cli_result_parse(old, &x);
  PDT_EQ_U64(x.violated, 1u << 2 | 1u << 9);
  PDT_EQ_INT(x.n_ids, 2);
  pd_cli_result_parse(neu, &x);
  PDT_EQ_U64(x.violated, 1u << 1 | 1u << 2);
  PDT_EQ_INT(x.n_ids, 3);
  pd_cli_result_parse(none, &x);
  PDT_EQ_U64(x.violated, 0);
  PDT_EQ_INT(x.n_ids, 0);
  cJSON_Delete(old);
  cJSON_Delete(neu);
  cJSON_Delete(none);
}

/* Rows: two old-shape sim rows, a new-shape FAIL row with a hostile scenario name, a
 * not-exercised row, a duplicate scenario x mode, and a file that did not load. */
static const char *const sim_rows =
    "{\"rows\": ["
    "{\"scenario\": \"a\", \"file\": \"x/a.json\", \"mode\": \"joined\", \"violated\": \"I3\","
    " \"expected\": \"I3\", \"matched\": true, \"status\": \"as expected\", \"reason\": \"r1\"},"
    "{\"scenario\": \"a\", \"file\": \"x/a.json\", \"mode\": \"reference\", \"violated\": \"\","
    " \"expected\": \"\", \"matched\": true, \"status\": \"as expected\"},"
    "{\"scenario\": \"<img src=x onerror=alert(1)>\", \"file\": \"x/b.json\", \"mode\": \"pr1150\","
    " \"violated\": [\"I2\"], \"violated_names\": [\"orphan-leg\"], \"expected\": null, \"seed\": 7,"
    " \"replay\": \"build/pdref sim run 'x/b.json' --mode pr1150 --seed 7\", \"matched\": false,"
    " \"status\": \"unexpected\", \"reason\": \"<b>bold</b>\"},"
    "{\"scenario\": \"c\", \"file\": \"x/c.json\", \"mode\": \"minilb\", \"violated\": [],"
    " \"expected\": [], \"matched\": false, \"status\": \"not exercised\"},"
    "{\"scenario\": \"a\", \"file\": \"x/a.json\", \"mode\": \"joined\", \"violated\": \"I3\","
    " \"expected\": \"I3\", \"matched\": true, \"status\": \"as expected\"},"
    "{\"file\": \"x/bad.json\", \"status\": \"error\", \"error\": \"x/bad.json:3: '<' unexpected\"}"
    "], \"passed\": 3, \"failed\": 1, \"not_exercised\": 1}";

static int page(const char *json, pd_report_kind_t kind, char **html, pd_report_stats_t *st) {
  pd_report_t r = {.n = 1};
  pd_report_opts_t o = {.swimlanes = 0, .swim_max_requests = 0, .swim_max = 0,
                        .prog = "/opt/pdref/bin/pdref"}; /* as `pdref report` was run */
  size_t len = 0;
  r.in[0].path = strdup("in<1>.json");
  r.in[0].kind = kind;
  r.in[0].root = cJSON_Parse(json);
  PDT_TRUE(r.in[0].root != NULL);
  PDT_EQ_INT(pd_report_classify(r.in[0].root), kind);
  int rc = -1;
  CAPTURE(*html, len, rc = pd_report_html(&r, &o, out, st));
  pd_report_free(&r);
  return rc;
}

static void test_one_cell_per_row_and_verdicts(void) {
  char *h = NULL;
  pd_report_stats_t st;
  PDT_EQ_INT(page(sim_rows, PD_REPORT_SIM, &h, &st), 0);
  PDT_EQ_U64(st.cells, 6);
  PDT_EQ_U64(count(h, "data-verdict="), 6);
  PDT_EQ_U64(count(h, "data-verdict=\"expected\""), 3);
  PDT_EQ_U64(count(h, "data-verdict=\"fail\""), 1);
  PDT_EQ_U64(count(h, "data-verdict=\"not-exercised\""), 1);
  PDT_EQ_U64(count(h, "data-verdict=\"error\""), 1);
  PDT_EQ_U64(st.verdicts[PD_VERDICT_EXPECTED], 3);
  PDT_EQ_U64(count(h, "<details class=\"row\""), 6); /* every row has its details */
  /* the duplicate joined row of "a" is a second table row, not a lost cell */
  PDT_EQ_U64(count(h, "<tr><td class=\"s\">a</td>"), 2);
  PDT_TRUE(strstr(h, "<th>joined</th><th>reference</th><th>pr1150</th><th>minilb</th>") != NULL);
  PDT_TRUE(strstr(h, ">UNEXPECTED: <span class=\"own-v\">violates</span> I2 orphan-leg "
                     "(expected any (no expectation))</a>") != NULL);
  /* the colour is the word; the text is the row's own verdict, a violation never "pass" */
  PDT_TRUE(strstr(h, "data-verdict=\"expected\" data-own=\"violates\"") != NULL);
  PDT_TRUE(strstr(h, "data-verdict=\"expected\" data-own=\"pass\"") != NULL);
  PDT_TRUE(strstr(h, "shown") == NULL); /* no second green for "as expected, violating" */
  /* per-mode totals: joined has the two "a" rows, as expected, both violating */
  PDT_TRUE(strstr(h, "<tfoot><tr><td class=\"s\">totals per mode</td>"
                     "<td>2 as expected<br>own: 0 pass, 2 violate</td>") != NULL);
  free(h);
}

static void test_strings_from_results_are_escaped(void) {
  char *h = NULL;
  pd_report_stats_t st;
  PDT_EQ_INT(page(sim_rows, PD_REPORT_SIM, &h, &st), 0);
  PDT_TRUE(strstr(h, "<img") == NULL);
  PDT_TRUE(strstr(h, "<b>bold") == NULL);
  PDT_TRUE(strstr(h, "&lt;img src=x onerror=alert(1)&gt;") != NULL);
  PDT_TRUE(strstr(h, "&lt;b&gt;bold&lt;/b&gt;") != NULL);
  PDT_TRUE(strstr(h, "sim run &#39;x/b.json&#39; --mode pr1150 --seed 7") != NULL);
  PDT_TRUE(strstr(h, "in&lt;1&gt;.json") != NULL);
  PDT_TRUE(strstr(h, "http://") == NULL || strstr(h, "http://www.w3.org/2000/svg") != NULL);
  PDT_TRUE(strstr(h, "src=\"http") == NULL && strstr(h, "href=\"http") == NULL); /* no network */
  free(h);
}

static void test_error_row_is_one_cell_across_the_modes(void) {
  char *h = NULL;
  pd_report_stats_t st;
  PDT_EQ_INT(page(sim_rows, PD_REPORT_SIM, &h, &st), 0);
  const char *e = strstr(h, "data-verdict=\"error\"");
  PDT_TRUE(e != NULL);
  PDT_TRUE(e && strncmp(e, "data-verdict=\"error\" data-own=\"-\" colspan=\"4\"", 45) == 0);
  PDT_TRUE(strstr(h, "x/bad.json:3: &#39;&lt;&#39; unexpected") != NULL);
  free(h);
}

static void test_old_rows_get_a_replay_and_expectations_read(void) {
  char *h = NULL;
  pd_report_stats_t st;
  PDT_EQ_INT(page(sim_rows, PD_REPORT_SIM, &h, &st), 0);
  PDT_TRUE(strstr(h, "<pre>/opt/pdref/bin/pdref sim run x/a.json --mode joined</pre>") != NULL);
  PDT_TRUE(strstr(h, "<b>expected</b> any (no expectation)") != NULL); /* null */
  PDT_TRUE(strstr(h, "<b>expected</b> pass") != NULL);                   /* [] and "" */
  free(h);
}

/* The one vocabulary (cli_rows.h): rows of today's sim run and conform name their word in
 * "status" and the document its command; every word has its cell, and the summary counts
 * them in the same words (no "passed"/"FAIL" totals). */
static void test_the_vocabulary_words_each_have_a_cell(void) {
  static const char rows[] =
      "{\"command\": \"conform\", \"rows\": ["
      "{\"scenario\": \"a\", \"file\": \"a.json\", \"mode\": \"m\", \"status\": \"as expected\","
      " \"violated\": [\"I1\"], \"expected\": [\"I1\"], \"matched\": true},"
      "{\"scenario\": \"b\", \"file\": \"b.json\", \"mode\": \"m\", \"status\": \"deployment limit\","
      " \"violated\": [\"I19\"], \"expected\": [\"I19\"], \"matched\": true},"
      "{\"scenario\": \"c\", \"file\": \"c.json\", \"mode\": \"m\", \"status\": \"unexpected\","
      " \"violated\": [\"I3\"], \"expected\": [], \"matched\": false},"
      "{\"scenario\": \"d\", \"file\": \"d.json\", \"mode\": \"m\", \"status\": \"not exercised\","
      " \"violated\": [\"I1\"], \"expected\": [\"I1\"], \"matched\": true},"
      "{\"scenario\": \"e\", \"file\": \"e.json\", \"mode\": \"m\", \"status\": \"skipped\","
      " \"reason\": \"the mode does not speak SGLang's protocol\"}],"
      " \"as_expected\": 1, \"deployment_limit\": 1, \"unexpected\": 1, \"not_exercised\": 1,"
      " \"skipped\": 1, \"errors\": 0}";
  char *h = NULL;
  pd_report_stats_t st;
  PDT_EQ_INT(page(rows, PD_REPORT_CONFORM, &h, &st), 0);
  PDT_EQ_U64(st.verdicts[PD_VERDICT_EXPECTED], 1);
  PDT_EQ_U64(st.verdicts[PD_VERDICT_LIMIT], 1);
  PDT_EQ_U64(st.verdicts[PD_VERDICT_FAIL], 1);
  PDT_EQ_U64(st.verdicts[PD_VERDICT_NX], 1); /* an expected I1 without its cause */
  PDT_EQ_U64(st.verdicts[PD_VERDICT_SKIPPED], 1);
  PDT_TRUE(strstr(h, ">deployment limit: <span class=\"own-v\">violates</span> I19 freed-blocks</a>") != NULL);
  PDT_TRUE(strstr(h, ">UNEXPECTED: <span class=\"own-v\">violates</span> I3 stranded-slot "
                     "(expected pass)</a>") != NULL);
  PDT_TRUE(strstr(h, "1 as expected, 1 deployment limit, 1 UNEXPECTED, 1 not exercised, 1 "
                     "skipped, 0 error.") != NULL);
  char *req = strstr(h, "<h2 id=\"requirements\">"); /* its IDs (PDG-FAIL-1) are names */
  PDT_TRUE(req != NULL);
  if (req) *req = 0;
  PDT_TRUE(strstr(h, "FAIL") == NULL && strstr(h, "passed") == NULL);
  free(h);
}

static void test_conform_explore_and_bench_sections(void) {
  static const char conform[] =
      "{\"rows\": [{\"scenario\": \"s\", \"file\": \"f\", \"mode\": \"my-gw\", \"status\": \"ran\","
      " \"violated\": \"I3\", \"expected\": \"\", \"matched\": false, \"reason\": \"r\"}],"
      " \"passed\": 0, \"failed\": 1, \"not_exercised\": 0, \"skipped\": 0}";
  static const char explore[] =
      "{\"schema\": \"pdref-explore-result/2\", \"mode\": \"joined\", \"explored\": 10,"
      " \"seed_start\": 1, \"seed_end\": 11, \"violating_seeds\": 2, \"invariants\":"
      " {\"I3\": {\"name\": \"stranded-slot\", \"seeds\": 2, \"first_seed\": 4},"
      " \"I10\": {\"name\": \"load-truth\", \"seeds\": 1, \"first_seed\": 5}},"
      " \"findings\": [{\"invariant\": \"I3\", \"reason\": \"held <long>\", \"replay\": \"r3\","
      " \"requests\": [8, 1]}, {\"invariant\": \"I10\", \"reason\": \"I3 slot on d0 held\"}]}";
  static const char bench[] = "{\"scenario\": \"b.json\", \"mode\": \"joined\", \"events_per_s\": 5}";
  char *h = NULL;
  pd_report_stats_t st;
  PDT_EQ_INT(page(conform, PD_REPORT_CONFORM, &h, &st), 0);
  PDT_EQ_U64(st.conform_rows, 1);
  PDT_EQ_U64(count(h, "data-verdict=\"fail\""), 1);
  PDT_TRUE(strstr(h, "<th>my-gw</th>") != NULL);
  free(h);
  PDT_EQ_INT(page(explore, PD_REPORT_EXPLORE, &h, &st), 0);
  PDT_EQ_U64(st.explore_invariants, 2);
  PDT_TRUE(strstr(h, "held &lt;long&gt;") != NULL);
  /* I10's case first violates I3: its row says so, not that I3's reason is I10's */
  PDT_TRUE(strstr(h, "<td><em>the case shows it; its first violation is another invariant's:</em> "
                     "I3 slot on d0 held</td>") != NULL);
  PDT_TRUE(strstr(h, "requests 8&rarr;1") != NULL);
  free(h);
  PDT_EQ_INT(page(bench, PD_REPORT_SIM_BENCH, &h, &st), 0);
  PDT_EQ_U64(st.bench_tables, 1);
  free(h);
}

/* Rows of the wrong types, odd metrics: still one cell per row, nothing read out of bounds
 * (the suite runs under ASan+UBSan). */
static void test_rows_of_wrong_types_still_render(void) {
  static const char odd[] =
      "{\"rows\": [1, \"x\", null, {\"violated\": 5, \"expected\": {\"a\": 1}, \"mode\": 7,"
      " \"seed\": \"abc\", \"file\": 3}, {\"scenario\": \"s\", \"mode\": \"joined\", \"violated\":"
      " [1, null, \"I99\", \"I3\"], \"violated_names\": [null], \"metrics\": {\"ttft_cdf_ms\": [[1],"
      " \"x\", [50, 10], [100, 5]], \"ttft_ms\": {\"n\": 3}, \"requests\": 500, \"series\":"
      " {\"goodput_rps\": [1, \"x\", null, 3], \"bin_ms\": -5}}}]}";
  char *h = NULL;
  pd_report_stats_t st;
  PDT_EQ_INT(page(odd, PD_REPORT_SIM, &h, &st), 0);
  PDT_EQ_U64(st.cells, 5);
  /* an unknown ID is still a violation, said so */
  PDT_TRUE(strstr(h, "violates</span> I3 stranded-slot, 1 more this pdref does not know") != NULL);
  PDT_EQ_U64(st.timelines, 1);
  free(h);
}

static void write_tmp(char *path, const char *text) {
  snprintf(path, 64, "/tmp/pdt_reportXXXXXX");
  int fd = mkstemp(path);
  PDT_TRUE(fd >= 0);
  if (fd < 0) return;
  PDT_EQ_INT(write(fd, text, strlen(text)), (long long)strlen(text));
  close(fd);
}

static void test_bad_inputs_name_the_file(void) {
  pd_report_t r = {.n = 0};
  char err[512], p1[64], p2[64], p3[64];
  PDT_EQ_INT(pd_report_load(&r, "/nonexistent/r.json", err, sizeof err), 2);
  PDT_TRUE(strstr(err, "/nonexistent/r.json: No such file") == err);
  write_tmp(p1, "{\"rows\": [1, 2,]}");
  PDT_EQ_INT(pd_report_load(&r, p1, err, sizeof err), 2);
  PDT_TRUE(strstr(err, p1) == err && strstr(err, "malformed JSON at byte") != NULL);
  write_tmp(p2, "{\"hello\": 1}");
  PDT_EQ_INT(pd_report_load(&r, p2, err, sizeof err), 2);
  PDT_TRUE(strstr(err, p2) == err && strstr(err, "unknown result kind") != NULL);
  write_tmp(p3, "{\"rows\": [], \"passed\": 0}");
  PDT_EQ_INT(pd_report_load(&r, p3, err, sizeof err), 0);
  PDT_EQ_U64(r.n, 1);
  PDT_EQ_INT(r.in[0].kind, PD_REPORT_SIM);
  pd_report_free(&r);
  unlink(p1);
  unlink(p2);
  unlink(p3);
}

/* Standard Trace Event Format, as any layout of the trace writer gives it. */
static const char trace[] =
    "[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"args\":{\"name\":\"prefill p0\"}},"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":1,\"args\":{\"name\":\"slot 0\"}},"
    "{\"name\":\"leg\",\"ph\":\"X\",\"pid\":2,\"tid\":1,\"ts\":0,\"dur\":1000},"
    "{\"name\":\"<hold>\",\"ph\":\"B\",\"pid\":2,\"tid\":2,\"ts\":100},"
    "{\"name\":\"<hold>\",\"ph\":\"E\",\"pid\":2,\"tid\":2,\"ts\":900},"
    "{\"name\":\"abort\",\"ph\":\"i\",\"s\":\"t\",\"pid\":2,\"tid\":1,\"ts\":500},"
    "{\"name\":\"p0 engine\",\"ph\":\"C\",\"pid\":2,\"ts\":0,\"args\":{\"running slots\":1}},"
    "{\"name\":\"p0 engine\",\"ph\":\"C\",\"pid\":2,\"ts\":800,\"args\":{\"running slots\":0}}]";

static void test_swimlane_reads_standard_trace_events(void) {
  char *h = NULL;
  size_t len = 0;
  int drawn = 0;
  CAPTURE(h, len, drawn = pd_report_swim_draw(out, trace, strlen(trace), "t<1>"));
  PDT_EQ_INT(drawn, 1);
  PDT_TRUE(strstr(h, ">prefill p0: slot 0</text>") != NULL);   /* named process and thread */
  PDT_TRUE(strstr(h, ">prefill p0: pid 2 tid 2</text>") != NULL); /* an unnamed thread */
  PDT_TRUE(strstr(h, ">prefill p0: p0 engine running slots (max 1)</text>") != NULL);
  PDT_EQ_U64(count(h, "<rect class=\"span\""), 2); /* the X span and the B/E pair */
  PDT_EQ_U64(count(h, "<path class=\"inst\""), 1);
  PDT_TRUE(strstr(h, "&lt;hold&gt; 0.100..0.900 ms") != NULL);
  PDT_TRUE(strstr(h, "<title>t&lt;1&gt;</title>") != NULL);
  free(h);
  CAPTURE(h, len, drawn = pd_report_swim_draw(out, "[]", 2, "empty"));
  PDT_EQ_INT(drawn, 0);
  PDT_TRUE(strstr(h, "no events") != NULL);
  free(h);
}

/* A span the checker marked: only its time (until what it started ended) is drawn. */
static void test_swimlane_shows_the_violation_window(void) {
  static const char tr[] =
      "[{\"name\":\"request\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":100},"
      "{\"name\":\"request (VIOLATION)\",\"ph\":\"X\",\"pid\":1,\"tid\":2,\"ts\":50000,\"dur\":100000},"
      "{\"name\":\"slot\",\"ph\":\"X\",\"pid\":3,\"tid\":7,\"ts\":40000,\"dur\":20000},"
      "{\"name\":\"held\",\"ph\":\"X\",\"pid\":3,\"tid\":9,\"ts\":60000,\"dur\":340000},"
      "{\"name\":\"late\",\"ph\":\"X\",\"pid\":3,\"tid\":8,\"ts\":900000,\"dur\":10}]";
  char *h = NULL;
  size_t len = 0;
  int drawn = 0;
  CAPTURE(h, len, drawn = pd_report_swim_draw(out, tr, strlen(tr), "w"));
  PDT_EQ_INT(drawn, 1);
  /* the marked request, the slot under it, and a hold it started that outlives it */
  PDT_EQ_U64(count(h, "<rect class=\"span\""), 3);
  PDT_TRUE(strstr(h, "fill=\"#d62728\"><title>request (VIOLATION)") != NULL);
  PDT_TRUE(strstr(h, ">late") == NULL && strstr(h, "pid 1 tid 1") == NULL);
  PDT_TRUE(strstr(h, "From 40.0 to 400.0 ms") != NULL); /* what is in the window */
  free(h);
}

static void test_fail_row_is_rerun_for_its_swimlane(void) {
  static const char row_json[] =
      "{\"scenario\": \"decode-503-while-prefill-detached\", \"file\": \"" PD_SOURCE_DIR
      "/scenarios/decode-503-while-prefill-detached.json\", \"mode\": \"pr1150\", \"violated\":"
      " [\"I2\", \"I3\"], \"requests\": 1}";
  cJSON *row = cJSON_Parse(row_json);
  pd_cli_result_t x;
  PDT_EQ_INT(pd_cli_result_parse(row, &x), 0); /* the row's record: what the page draws from */
  pd_report_opts_t o = {.swimlanes = 1, .swim_max_requests = 10, .swim_max = 1};
  char *h = NULL;
  size_t len = 0;
  int drawn = 0;
  CAPTURE(h, len, drawn = pd_report_swimlane(out, &x, &o));
  PDT_EQ_INT(drawn, 1);
  PDT_TRUE(strstr(h, "re-run here: violated I2,I3") != NULL);
  PDT_TRUE(strstr(h, "<svg class=\"swimlane\"") != NULL);
  PDT_TRUE(count(h, "<rect class=\"span\"") >= 2);
  free(h);
  o.swim_max_requests = 0; /* too many requests: a note, no re-run */
  CAPTURE(h, len, drawn = pd_report_swimlane(out, &x, &o));
  PDT_EQ_INT(drawn, 0);
  PDT_TRUE(strstr(h, "No swimlane: 1 requests") != NULL);
  free(h);
  cJSON_Delete(row);
}

static void test_metrics_series_bins_and_bounds(void) {
  pd_metrics_t m;
  pd_metrics_init(&m, 0);
  m.runs = 1;
  m.window_ns = 10000000000ull; /* bins of 1 s */
  pd_metrics_series_stranded(&m, 500000000ull, 2500000000ull); /* 0.5 + 1 + 0.5 s */
  pd_metrics_series_ttft(&m, 1200000000ull, 30000000ull);
  pd_metrics_series_ttft(&m, 1700000000ull, 50000000ull);
  cJSON *o = cJSON_CreateObject();
  pd_metrics_series_json(&m, o);
  char *txt = cJSON_PrintUnformatted(cJSON_GetObjectItem(o, "series"));
  PDT_EQ_STR(txt, "{\"bin_ms\":1000,\"goodput_rps\":[0,0,0],\"ttft_ms_mean\":[null,40,null],"
                  "\"ttft_ms_max\":[null,50,null],\"stranded_slots\":[0.5,1,0.5]}");
  cJSON_free(txt);
  cJSON_Delete(o);
  /* a long run is merged down to at most PD_METRICS_SERIES_MAX_POINTS points */
  pd_metrics_series_ttft(&m, 9999ull * 1000000000ull, 1);
  o = cJSON_CreateObject();
  pd_metrics_series_json(&m, o);
  const cJSON *s = cJSON_GetObjectItem(o, "series");
  PDT_TRUE(cJSON_GetArraySize(cJSON_GetObjectItem(s, "stranded_slots")) <= (int)PD_METRICS_SERIES_MAX_POINTS);
  PDT_TRUE(cJSON_GetObjectItem(s, "bin_ms")->valuedouble > 1000);
  cJSON_Delete(o);
  m.runs = 2; /* pooled worlds: no timeline */
  o = cJSON_CreateObject();
  pd_metrics_series_json(&m, o);
  PDT_TRUE(cJSON_GetObjectItem(o, "series") == NULL);
  cJSON_Delete(o);
  pd_metrics_free(&m);
}


/* The smallest y coordinate (the highest point) of the first <path> after marker in h. */
static double top_of_path(const char *h, const char *marker) {
  const char *p = strstr(h, marker);
  p = p ? strstr(p, " d=\"") : NULL;
  double top = 1e9;
  for (p = p ? p + 4 : NULL; p && *p && *p != '"'; p++) {
    if (*p != 'M' && *p != 'L') continue;
    double x, y;
    if (sscanf(p + 1, "%lf %lf", &x, &y) == 2 && y < top) top = y;
  }
  return top;
}

/* A failed request never reaches a first token: a row with 10 requests and 5 first tokens
 * tops out at 50 %, not 100 % (px: the plot is y 26..208 for 100..0 %). */
static void test_ttft_cdf_counts_failed_requests(void) {
  static const char rows[] =
      "{\"rows\": [{\"scenario\": \"a\", \"file\": \"a.json\", \"mode\": \"joined\","
      " \"status\": \"as expected\", \"violated\": [], \"expected\": [],"
      " \"metrics\": {\"requests\": 10, \"ttft_ms\": {\"n\": 5},"
      " \"ttft_cdf_ms\": [[50, 10], [100, 20]]}},"
      "{\"scenario\": \"a\", \"file\": \"a.json\", \"mode\": \"reference\","
      " \"status\": \"as expected\", \"violated\": [], \"expected\": [],"
      " \"metrics\": {\"requests\": 10, \"ttft_ms\": {\"n\": 10},"
      " \"ttft_cdf_ms\": [[50, 10], [100, 20]]}}]}";
  char *h = NULL;
  pd_report_stats_t st;
  PDT_EQ_INT(page(rows, PD_REPORT_SIM, &h, &st), 0);
  double half = 208 - 0.5 * (208 - 26);
  PDT_TRUE(fabs(top_of_path(h, "stroke=\"#d62728\"") - half) < 0.6);   /* joined: 50 % */
  PDT_TRUE(fabs(top_of_path(h, "stroke=\"#2ca02c\"") - 26) < 0.6);     /* reference: 100 % */
  PDT_TRUE(strstr(h, "% of all requests (failed: never)") != NULL);
  free(h);
}

/* Charts: identical lines drawn once, both named; a long all-zero tail cut from the time
 * axis; a y axis of at least one unit (no "0.002 slots"). */
static void test_chart_identical_lines_tail_and_units(void) {
  double x[40], same[40], other[40];
  for (int i = 0; i < 40; i++) {
    x[i] = i + 0.5;
    same[i] = i < 10 ? 0.002 * i : 0; /* a tiny bump, then zero to t = 40 */
    other[i] = i < 5 ? 0.001 : 0;
  }
  pd_report_line_t l[3] = {{"joined", "#d62728", x, same, 40, 0},
                           {"pr1150", "#ff7f0e", x, same, 40, 0},
                           {"minilb", "#9467bd", x, other, 40, 0}};
  char *h = NULL;
  size_t len = 0;
  CAPTURE(h, len, pd_report_chart(out, "t", "t", "simulated time (s)", "slots", l, 3, 0, NULL, 1, NAN));
  PDT_EQ_U64(count(h, "<path "), 2);                 /* pr1150 lies on joined: drawn once */
  PDT_TRUE(strstr(h, ">joined = pr1150</text>") != NULL); /* ... and named with it */
  PDT_TRUE(strstr(h, ">0.002<") == NULL && strstr(h, ">1<") != NULL); /* y to 1 slot */
  free(h);
  double big[40];
  for (int i = 0; i < 40; i++) big[i] = i < 10 ? 5 : 0; /* busy 10 s, then 30 s of zeros */
  pd_report_line_t one[1] = {{"joined", "#d62728", x, big, 40, 0}};
  CAPTURE(h, len, pd_report_chart(out, "t", "t", "simulated time (s)", "slots", one, 1, 0, NULL, 1, NAN));
  PDT_TRUE(strstr(h, ">10<") != NULL && strstr(h, ">30<") == NULL); /* the axis ends near 11 s */
  free(h);
}

/* explore's output directory as a batch engine leaves it: two shards' results among many
 * shrunk cases (more JSON files than the report takes results). The report merges the shards
 * and lists the shrunk cases, from the directory and named one by one. */
static void test_explore_directory_shards_and_shrunk_cases(void) {
  char dir[] = "/tmp/pdt_report_exXXXXXX", p[2][128], page_path[128], c[160];
  PDT_TRUE(mkdtemp(dir) != NULL);
  snprintf(page_path, sizeof page_path, "%s/r.html", dir);
  run_t *r = calloc(1, sizeof *r);
  PDT_TRUE(r != NULL);
  if (!r) return;
  for (int i = 0; i < 2; i++) {
    char shard[8];
    snprintf(shard, sizeof shard, "%d/2", i);
    snprintf(p[i], sizeof p[i], "%s/s%d.json", dir, i);
    const char *const a[] = {"sim", "explore", "--mode", "joined", "--seeds", "12", "--shard", shard,
                             "--out", dir, "--result", p[i], "--json", NULL};
    PDT_EQ_INT(pdt_cli_run(r, "pdref", a, 1), 0);
    PDT_TRUE(r->code == 0 || r->code == 1);
  }
  for (int k = 0; k < 400; k++) { /* shrunk cases, as explore saves them */
    snprintf(c, sizeof c, "%s/joined-I3-seed%d.json", dir, 100000 + k);
    FILE *f = fopen(c, "w");
    PDT_TRUE(f != NULL);
    if (!f) break;
    fprintf(f, "{\"name\": \"explore-joined-I3-seed%d\", \"description\": \"case %d\","
               " \"tags\": [\"explore\", \"joined\", \"I3\"], \"workers\": []}\n", 100000 + k, k);
    fclose(f);
  }
  const char *const all[] = {"report", "--json", "--no-swimlanes", "--out", page_path, dir, NULL};
  PDT_EQ_INT(pdt_cli_run(r, "pdref", all, 1), 0);
  PDT_EQ_INT(r->code, 0);
  cJSON *j = cJSON_Parse(r->out);
  const cJSON *in = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "inputs"), 0);
  PDT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "inputs")), 1);
  PDT_TRUE(strstr(pd_report_str(in, "path"), "2 shards merged") != NULL);
  PDT_TRUE(pd_report_num(j, "shrunk_cases", 0) >= 400);
  cJSON_Delete(j);
  /* a shrunk case named beside the shards: listed, not "unknown result kind" */
  snprintf(c, sizeof c, "%s/joined-I3-seed100007.json", dir);
  const char *const named[] = {"report", "--json", "--no-swimlanes", "--out", page_path, p[0], p[1], c, NULL};
  PDT_EQ_INT(pdt_cli_run(r, "pdref", named, 1), 0);
  PDT_EQ_INT(r->code, 0);
  j = cJSON_Parse(r->out);
  PDT_EQ_INT((int)pd_report_num(j, "shrunk_cases", -1), 1);
  PDT_EQ_INT((int)pd_report_num(j, "explore_invariants", 0) > 0, 1);
  cJSON_Delete(j);
  /* shrunk cases alone (`explore --jobs` keeps no shard results): a page that lists them */
  const char *const alone[] = {"report", "--json", "--out", page_path, c, NULL};
  PDT_EQ_INT(pdt_cli_run(r, "pdref", alone, 1), 0);
  PDT_EQ_INT(r->code, 0);
  free(r);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  PDT_EQ_INT(system(cmd), 0);
}

/* The record's keys (cli_result.h), in the order pd_cli_result_json writes them. */
static const char *const record_keys[] = {
    "file", "scenario", "mode", "status", "reason", "violated", "violated_names", "expected",
    "matched", "exercised", "seed", "tie_seed", "replay", "error", "deployment_limit",
    "declared_unexercised", "never_fired", "faults_exercised", "faults_total", "requests",
    "requests_served", "ttft_ms_mean"};

static int is_record_key(const char *k) {
  for (size_t i = 0; i < sizeof record_keys / sizeof record_keys[0]; i++)
    if (!strcmp(k, record_keys[i])) return 1;
  return 0;
}

/* Every row of doc's "rows" parsed into the record and rendered back as JSON gives the row's
 * record keys, with the same values in the same order (the command's own keys aside). */
static void round_trip(const cJSON *doc, int *n_rows) {
  const cJSON *row;
  cJSON_ArrayForEach(row, cJSON_GetObjectItem(doc, "rows")) {
    pd_cli_result_t x;
    PDT_EQ_INT(pd_cli_result_parse(row, &x), 0);
    cJSON *back = pd_cli_result_json(&x);
    PDT_TRUE(back != NULL);
    const cJSON *a = row->child, *b = back ? back->child : NULL;
    for (; a; a = a->next) { /* the row's record keys, in order, each equal */
      if (!is_record_key(a->string)) continue;
      int same = b && !strcmp(a->string, b->string) && cJSON_Compare(a, b, 1);
      if (!same) {
        char *t = cJSON_PrintUnformatted(row);
        fprintf(stderr, "round trip: key %s (back: %s) of %s\n", a->string, b ? b->string : "-", t);
        free(t);
      }
      PDT_TRUE(same);
      b = b ? b->next : NULL;
    }
    PDT_TRUE(b == NULL); /* and no key the row did not have */
    cJSON_Delete(back);
    (*n_rows)++;
  }
}

/* The report's parser is the renderers' inverse: real rows of sim run (ran, skipped, an
 * error, a tie seed, a violation) and conform's row shapes come back key for key. */
static void test_result_record_round_trips_rows(void) {
  char bad[64], dir[] = "/tmp/pdt_report_rtXXXXXX";
  write_tmp(bad, "{\"name\": \"bad\"");
  PDT_TRUE(mkdtemp(dir) != NULL);
  run_t *r = calloc(1, sizeof *r);
  PDT_TRUE(r != NULL);
  if (!r) return;
  int n = 0;
  const char *const sim[] = {"sim", "run", PD_SOURCE_DIR "/scenarios/decode-503-while-prefill-detached.json",
                             PD_SOURCE_DIR "/scenarios/sf-client-disconnect-after-decode-refused.json",
                             bad, "--mode", "joined", "--json", NULL};
  const char *const tie[] = {"sim", "run", PD_SOURCE_DIR "/scenarios/batch-chat-n2.json", "--mode", "all",
                             "--seed", "18446744073709551615", "--tie-seed", "3", "--json", NULL};
  const char *const *runs[] = {sim, tie};
  for (int k = 0; k < 2; k++) {
    PDT_EQ_INT(pdt_cli_run(r, "pdref", runs[k], 1), 0);
    cJSON *doc = cJSON_Parse(r->out);
    PDT_TRUE(doc != NULL);
    round_trip(doc, &n);
    cJSON_Delete(doc);
  }
  static const char conform[] =
      "{\"rows\": [{\"scenario\": \"s\", \"file\": \"s.json\", \"mode\": \"gw\", \"status\": "
      "\"deployment limit\", \"violated\": [\"I19\"], \"violated_names\": [\"freed-blocks\"], "
      "\"expected\": [\"I19\"], \"matched\": true, \"exercised\": true, \"seed\": 1, "
      "\"replay\": \"pdref conform s.json\", \"reason\": \"r\", \"deployment_limit\": \"why\", "
      "\"declared_unexercised\": \"d\", \"faults_exercised\": 1, \"faults_total\": 2, "
      "\"requests\": 3, \"requests_served\": 2, \"legs\": 4},"
      "{\"file\": \"x.json\", \"scenario\": \"x\", \"mode\": \"gw\", \"status\": \"error\", "
      "\"error\": \"x.json:1: no\"},"
      "{\"scenario\": \"y\", \"file\": \"y.json\", \"mode\": \"gw\", \"status\": \"skipped\", "
      "\"reason\": \"vLLM\"}]}";
  cJSON *doc = cJSON_Parse(conform);
  round_trip(doc, &n);
  cJSON_Delete(doc);
  PDT_TRUE(n >= 10); /* 3 + 7 modes + 3 */
  free(r);
  unlink(bad);
  rmdir(dir);
}

/* Old rows: comma strings, no status; read into the same record. */
static void test_result_record_reads_old_rows(void) {
  cJSON *old = cJSON_Parse("{\"scenario\": \"a\", \"violated\": \"I3,I10\", \"expected\": \"\","
                           " \"matched\": false, \"seed\": \"7\"}");
  pd_cli_result_t x;
  PDT_EQ_INT(pd_cli_result_parse(old, &x), 0);
  PDT_EQ_INT(x.verdict, PD_CLI_UNEXPECTED);
  PDT_EQ_U64(x.violated, (1u << 2) | (1u << 9));
  PDT_EQ_INT(x.n_ids, 2);
  PDT_EQ_INT(x.expected_set, 1);
  PDT_EQ_U64(x.expected, 0);
  PDT_EQ_INT(x.has_seed, 1);
  PDT_EQ_U64(x.seed, 7);
  PDT_EQ_INT(x.exercised, -1);
  cJSON_Delete(old);
  cJSON *err = cJSON_Parse("{\"file\": \"b\", \"error\": \"b:1: x\"}");
  PDT_EQ_INT(pd_cli_result_parse(err, &x), 0);
  PDT_EQ_INT(x.verdict, PD_CLI_ERROR);
  PDT_TRUE(x.scenario == NULL);
  cJSON_Delete(err);
  cJSON *num = cJSON_CreateNumber(1);
  PDT_EQ_INT(pd_cli_result_parse(num, &x), -1);
  cJSON_Delete(num);
}

int pdt_suite_report(void) {
  static const pdt_case_t cases[] = {
      {"escape: markup, quotes, control and invalid UTF-8 bytes", test_escape_text_and_attributes},
      {"violated: comma string and arrays, with names", test_violated_old_and_new_shapes},
      {"matrix: one cell per row, counts per verdict", test_one_cell_per_row_and_verdicts},
      {"every string from a result is escaped", test_strings_from_results_are_escaped},
      {"an error row is one cell across the modes", test_error_row_is_one_cell_across_the_modes},
      {"old rows: replay built, expectations read", test_old_rows_get_a_replay_and_expectations_read},
      {"conform, explore and bench sections", test_conform_explore_and_bench_sections},
      {"rows of the wrong types still render", test_rows_of_wrong_types_still_render},
      {"bad inputs name the file", test_bad_inputs_name_the_file},
      {"swimlane from standard trace events", test_swimlane_reads_standard_trace_events},
      {"swimlane: the first violation's time", test_swimlane_shows_the_violation_window},
      {"a FAIL row is re-run for its swimlane", test_fail_row_is_rerun_for_its_swimlane},
      {"the vocabulary's words each have a cell and a total", test_the_vocabulary_words_each_have_a_cell},
      {"metrics series: bins, merged points, pooled none", test_metrics_series_bins_and_bounds},
      {"TTFT CDF: a failed request never reaches a first token", test_ttft_cdf_counts_failed_requests},
      {"charts: identical lines named, zero tail cut, one unit", test_chart_identical_lines_tail_and_units},
      {"explore directory: shards merged, shrunk cases listed", test_explore_directory_shards_and_shrunk_cases},
      {"result record: rows round-trip through parse and JSON", test_result_record_round_trips_rows},
      {"result record: old rows read", test_result_record_reads_old_rows},
  };
  return PDT_SUITE("report", cases);
}
