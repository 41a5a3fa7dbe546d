/* report: `pdref report` turns result files (sim run, sim explore and explore merge, conform,
 * sim bench and gateway bench, all --json) into one self-contained HTML page: inline CSS,
 * hand-drawn inline SVG, no network. Every string taken from a result file is escaped
 * (pd_report_esc). docs/report.md. */
#ifndef PD_REPORT_H
#define PD_REPORT_H
#include <stddef.h>
#include <stdio.h>

struct cJSON;
struct pd_cli_result; /* cli_result.h: the result record the matrix is drawn from */

#define PD_REPORT_SCHEMA "pdref-report/1" /* report --json (docs/report.schema.json) */
#define PD_REPORT_REQ_SCHEMA "pdref-report-requirements/1" /* report --requirements --json
                                                             (docs/report-requirements.schema.json) */
#define PD_REPORT_MAX_INPUTS 64
#define PD_REPORT_MAX_FILE_BYTES (256u << 20) /* a result file larger than this is refused */

typedef enum pd_report_kind {
  PD_REPORT_SIM = 0,  /* sim run --json: {"command": "sim run", "rows": [...], "as_expected", ...} */
  PD_REPORT_EXPLORE,  /* sim explore --json, or sim explore merge --json */
  PD_REPORT_CONFORM,  /* conform --json: rows, and "skipped" */
  PD_REPORT_SIM_BENCH, /* sim bench --json */
  PD_REPORT_GW_BENCH, /* gateway bench --json */
  PD_REPORT_KINDS
} pd_report_kind_t;

extern const char *const pd_report_kind_names[PD_REPORT_KINDS];

typedef struct pd_report_input {
  char *path;
  pd_report_kind_t kind;
  struct cJSON *root;
} pd_report_input_t;

#define PD_REPORT_MAX_DIR_FILES 16384 /* *.json files read from one directory given */
#define PD_REPORT_MAX_CASES 4096      /* explore's shrunk cases listed on the page */

/* A shrunk case `pdref sim explore` saved (DIR/<mode>-I<n>-seed<N>.json): a scenario file,
 * not a result. The report lists it (file, invariant, description, replay command). */
typedef struct pd_report_case {
  char *path, *name, *description, *mode, *inv; /* mode and inv from its tags ("" unknown) */
} pd_report_case_t;

typedef struct pd_report {
  pd_report_input_t in[PD_REPORT_MAX_INPUTS];
  size_t n;
  int is_skipping_unknown; /* set while loading a directory's files: pd_report_load skips a JSON
                              file that is no result nor a shrunk case */
  size_t skipped;          /* ... and counts it here (shrunk cases too, named or found) */
  pd_report_case_t *cases; /* explore's shrunk cases among the files, named or in a directory */
  size_t n_cases;
} pd_report_t;

/* A row's verdict, one colour each in the matrix. */
typedef enum pd_report_verdict {
  PD_VERDICT_EXPECTED = 0, /* what the scenario expects (a pass, or the bug it demonstrates) */
  PD_VERDICT_FAIL,         /* UNEXPECTED: not what it expects */
  PD_VERDICT_NX,           /* not exercised */
  PD_VERDICT_ERROR,        /* the file did not load, or the row did not run */
  PD_VERDICT_LIMIT,        /* as expected: a deployment limit the scenario declares */
  PD_VERDICT_SKIPPED,      /* not run (the mode does not speak the workers' protocol, ...) */
  PD_VERDICT_COUNT
} pd_report_verdict_t;

extern const char *const pd_report_verdict_names[PD_VERDICT_COUNT]; /* "expected", "fail", ... */
/* The words the page shows for them (cli_rows.h's vocabulary): "as expected", "UNEXPECTED", ... */
extern const char *const pd_report_verdict_words[PD_VERDICT_COUNT];

/* What the page holds, for --json and the tests. */
typedef struct pd_report_stats {
  size_t cells;                     /* matrix cells, one per result row */
  size_t verdicts[PD_VERDICT_COUNT]; /* cells per verdict */
  size_t cdf_modes, timelines, swimlanes, explore_invariants, conform_rows, bench_tables;
  size_t shrunk_cases;              /* explore's shrunk cases listed */
  size_t req_rows, req_cols;        /* the requirement matrix (report_requirements.c) */
  size_t bytes;                     /* of HTML written */
} pd_report_stats_t;

typedef struct pd_report_opts {
  int swimlanes;            /* 1: re-run each FAIL row with a trace in memory and draw it */
  size_t swim_max_requests; /* rows with more requests than this get no swimlane */
  size_t swim_max;          /* at most this many swimlanes on the page */
  const char *prog;         /* an old row's replay command begins with it (NULL: pdref) */
} pd_report_opts_t;

/* ---- report_load.c ---- */
/* Read and parse path, tell its kind and keep it in r. 0, or 2 with err set to
 * "<path>: <why>" (missing, unreadable, too large, malformed JSON at byte N, unknown result
 * kind, too many inputs). A shrunk case of explore (pd_report_is_case) is kept in r->cases
 * and counted in r->skipped, named or found in a directory. With r->is_skipping_unknown,
 * other JSON that is no result is counted in r->skipped and 0 returned. */
int pd_report_load(pd_report_t *r, const char *path, char *err, size_t cap);
/* Fold the explore results among r's inputs that are shards of one exploration (the same
 * mode) into one merged input each, as `pdref sim explore merge` does. 0, or 2 after the
 * merge's message (different settings, a gap or an overlap in the seeds). */
int pd_report_merge_shards(pd_report_t *r);
/* 1 when root is a shrunk case `pdref sim explore` saved: a scenario ("name", "workers")
 * tagged "explore". */
int pd_report_is_case(const struct cJSON *root);
/* The kind of a parsed result; -1 when it is none of them. */
int pd_report_classify(const struct cJSON *root);
void pd_report_free(pd_report_t *r);
/* A row's fields: read into the result record by pd_cli_result_parse (cli_result.h). */
/* A string member of o, or "" (absent, or not a string). */
const char *pd_report_str(const struct cJSON *o, const char *key);
/* A seed or count member of o as decimal text: a number (up to 2^53) or a decimal string
 * (above it), as explore writes them; "" when absent. Returns buf. */
const char *pd_report_seed(const struct cJSON *o, const char *key, char *buf, size_t cap);
/* A number member of o, or dflt (absent, or not a number; a numeric string is read too). */
double pd_report_num(const struct cJSON *o, const char *key, double dflt);

/* ---- report_html.c ---- */
/* s as HTML text (also safe inside a double- or single-quoted attribute): & < > " ' escaped,
 * control bytes and bytes that are not UTF-8 become U+FFFD. NULL writes nothing. */
void pd_report_esc(FILE *out, const char *s);
/* The whole page. 0, or -1 when a write failed. */
int pd_report_html(const pd_report_t *r, const pd_report_opts_t *o, FILE *out,
                   pd_report_stats_t *st);

/* ---- report_matrix.c ---- */
/* The scenario x mode matrix of one sim run or conform input, and the row details after it
 * (anchors r<input>-<row>). */
void pd_report_matrix(FILE *out, const pd_report_input_t *in, size_t idx, const pd_report_opts_t *o,
                      pd_report_stats_t *st);
void pd_report_explore(FILE *out, const pd_report_input_t *in, pd_report_stats_t *st);
void pd_report_bench(FILE *out, const pd_report_input_t *in, pd_report_stats_t *st);
/* The table of explore's shrunk cases in r (file, invariant, description, replay command). */
void pd_report_cases(FILE *out, const pd_report_t *r, const pd_report_opts_t *o,
                     pd_report_stats_t *st);

/* ---- report_svg.c ---- */
/* One line of a chart: a label, a colour, n points (x, y); y NAN is a gap. */
typedef struct pd_report_line {
  const char *label, *colour;
  const double *x, *y;
  size_t n;
  int is_step;
} pd_report_line_t;
/* A line chart (inline SVG, data-kind="kind": the browser test finds each kind) with axes and
 * a legend; x_label and y_label name the axes, with
 * their units. is_log_x: a logarithmic x axis (CDFs of TTFT). band: NULL, or [from, to] on
 * the x axis shaded (a fault burst). min_y1: the y axis reaches at least this (1 slot, not
 * 0.002). Identical lines are drawn once, their labels joined in the legend; a linear x axis
 * ends where every line stays under 1 % of the top for good, but not before x_keep (NAN:
 * no such point; a scenario's charts share its traffic's end). */
void pd_report_chart(FILE *out, const char *kind, const char *title, const char *x_label,
                     const char *y_label, const pd_report_line_t *lines, size_t n_lines,
                     int is_log_x, const double *band, double min_y1, double x_keep);
/* A "nice" axis step near range/5: 1, 2 or 5 times a power of ten. */
double pd_report_nice_step(double range);
/* The colour of mode (a fixed palette; an unknown name gets one by hash). */
const char *pd_report_mode_colour(const char *mode);
/* TTFT CDFs per mode pooled over every sim row, and the capacity scenarios' timelines. */
void pd_report_charts(FILE *out, const pd_report_t *r, pd_report_stats_t *st);

/* ---- report_swim.c ---- */
/* Re-run the sim row (its record's file, mode, seed, tie seed) with its trace in memory and
 * draw its swimlane; a paragraph saying why when it cannot. Returns 1 when one was drawn. */
int pd_report_swimlane(FILE *out, const struct pd_cli_result *x, const pd_report_opts_t *o);
/* Draw a swimlane from Trace Event Format text (a JSON array, or {"traceEvents": [...]}).
 * Returns 1 when drawn, 0 when the text held no events (a note is written instead). */
int pd_report_swim_draw(FILE *out, const char *trace, size_t len, const char *title);

#endif
