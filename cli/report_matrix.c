/* report: the scenario x mode matrix of a sim run (or scenario x gateway of a conform run),
 * one cell per result row, and each row's details (description, reason, replay, cost, and a
 * swimlane for a FAIL row). The result record's HTML renderer: every row is parsed into the
 * record of cli/cli_result.h (pd_cli_result_parse), which sim run and conform render as text
 * and JSON, and drawn from it; only the keys one command writes alone (sim run's metrics,
 * conform's notes) are read from the row itself (the record's src). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli_result.h"
#include "pd_scenario.h"
#include "report.h"

#define MAX_COLS 16     /* modes (or gateway labels) per matrix; more share the last column */
#define MAX_TROWS 8192  /* table rows per matrix */

typedef struct trow {
  const char *scenario; /* the rows' scenario name (or file, for an error row) */
  int cell[MAX_COLS];   /* JSON row index per column, -1 none */
  int error_row;        /* >= 0: an error row, drawn as one cell across the columns */
} trow_t;

typedef struct grid {
  const char *cols[MAX_COLS];
  int n_cols;
  trow_t *t;
  int n_t;
} grid_t;

static int col_of(grid_t *g, const char *mode) {
  for (int c = 0; c < g->n_cols; c++)
    if (!strcmp(g->cols[c], mode)) return c;
  if (g->n_cols == MAX_COLS) return MAX_COLS - 1;
  g->cols[g->n_cols] = mode;
  return g->n_cols++;
}

static const char *or_empty(const char *s) { return s ? s : ""; }

static const char *row_name(const pd_cli_result_t *x) {
  return x->scenario && x->scenario[0] ? x->scenario : or_empty(x->file);
}

/* The record's verdict as the page colours it. */
static pd_report_verdict_t verdict_of(const pd_cli_result_t *x) {
  switch (x->verdict) {
  case PD_CLI_AS_EXPECTED: return PD_VERDICT_EXPECTED;
  case PD_CLI_LIMIT: return PD_VERDICT_LIMIT;
  case PD_CLI_NOT_EXERCISED: return PD_VERDICT_NX;
  case PD_CLI_SKIPPED: return PD_VERDICT_SKIPPED;
  case PD_CLI_ERROR: return PD_VERDICT_ERROR;
  default: return PD_VERDICT_FAIL;
  }
}

/* The row's own violations in words ("I3 stranded-slot, I10 load-truth"); "" none. */
static int own_text(const pd_cli_result_t *x, char *buf, size_t cap) {
  pd_cli_inv_text(x->violated, buf, cap);
  int known = 0;
  for (uint32_t m = x->violated; m; m &= m - 1) known++;
  int other = x->n_ids - known;
  size_t n = strlen(buf);
  if (other > 0 && n + 1 < cap) /* an ID of another pdref's: a violation all the same */
    snprintf(buf + n, cap - n, "%s%d more this pdref does not know", n ? ", " : "", other);
  return x->n_ids;
}

static trow_t *new_trow(grid_t *g, const char *scenario) {
  if (g->n_t == MAX_TROWS) return NULL;
  trow_t *t = &g->t[g->n_t++];
  t->scenario = scenario;
  for (int c = 0; c < MAX_COLS; c++) t->cell[c] = -1;
  t->error_row = -1;
  return t;
}

/* Place each JSON row: a scenario's table row gets one cell per mode; a second row of the
 * same scenario and mode opens a new table row, so every JSON row has its own cell. */
static void build(grid_t *g, const pd_cli_result_t *rec, int n) {
  for (int idx = 0; idx < n; idx++) {
    const pd_cli_result_t *x = &rec[idx];
    const char *name = row_name(x), *mode = or_empty(x->mode);
    if (x->verdict == PD_CLI_ERROR && !mode[0]) {
      trow_t *t = new_trow(g, name);
      if (t) t->error_row = idx;
      continue;
    }
    int c = col_of(g, mode[0] ? mode : "?");
    trow_t *t = NULL;
    for (int k = g->n_t - 1; k >= 0 && !t; k--) /* bounded by MAX_TROWS */
      if (g->t[k].error_row < 0 && !strcmp(g->t[k].scenario, name) && g->t[k].cell[c] < 0)
        t = &g->t[k];
    if (!t) t = new_trow(g, name);
    if (t) t->cell[c] = idx;
  }
}

static void expected_str(const pd_cli_result_t *x, char *buf, size_t cap);

static void cell(FILE *out, const pd_cli_result_t *x, size_t in_idx, int idx, int colspan,
                 pd_report_stats_t *st) {
  pd_report_verdict_t v = verdict_of(x);
  char ids[PD_CLI_INV_TEXT_BYTES];
  int n = own_text(x, ids, sizeof ids);
  fprintf(out, "<td class=\"cell v-%s\" data-verdict=\"%s\" data-own=\"%s\"",
          pd_report_verdict_names[v], pd_report_verdict_names[v],
          v == PD_VERDICT_ERROR || v == PD_VERDICT_SKIPPED || v == PD_VERDICT_NX ? "-"
          : n                                                                  ? "violates"
                                                                               : "pass");
  if (colspan > 1) fprintf(out, " colspan=\"%d\"", colspan);
  fputs(" title=\"", out);
  pd_report_esc(out, row_name(x));
  fputs(or_empty(x->mode)[0] ? " " : "", out);
  pd_report_esc(out, x->mode);
  fputs(": ", out);
  pd_report_esc(out, v == PD_VERDICT_ERROR ? x->error : x->reason);
  fprintf(out, "\"><a href=\"#r%zu-%d\">", in_idx, idx);
  if (v == PD_VERDICT_FAIL) fputs("UNEXPECTED: ", out);
  if (v == PD_VERDICT_LIMIT) fputs("deployment limit: ", out);
  if (v == PD_VERDICT_NX) fputs("not exercised: ", out);
  if (v == PD_VERDICT_ERROR) fputs("error", out);
  else if (v == PD_VERDICT_SKIPPED) fputs("skipped", out);
  else if (n) { /* the row's own verdict, in words: it is no pass whatever the colour */
    fputs("<span class=\"own-v\">violates</span> ", out);
    pd_report_esc(out, ids);
  } else fputs("<span class=\"own-p\">pass</span>", out);
  if (v == PD_VERDICT_FAIL) { /* what it should have been */
    char want[PD_CLI_INV_TEXT_BYTES];
    expected_str(x, want, sizeof want);
    fputs(" (expected ", out);
    pd_report_esc(out, want[0] ? want : "?");
    fputs(")", out);
  }
  fputs("</a></td>", out);
  st->cells++;
  st->verdicts[v]++;
}

/* The last line of a matrix: per column, the rows per word and per own verdict. */
static void totals(FILE *out, const grid_t *g, const pd_cli_result_t *rec) {
  fputs("<tfoot><tr><td class=\"s\">totals per mode</td>", out);
  for (int c = 0; c < g->n_cols; c++) {
    size_t per[PD_VERDICT_COUNT] = {0}, pass = 0, viol = 0;
    for (int k = 0; k < g->n_t; k++) {
      if (g->t[k].error_row >= 0 || g->t[k].cell[c] < 0) continue;
      const pd_cli_result_t *x = &rec[g->t[k].cell[c]];
      pd_report_verdict_t v = verdict_of(x);
      per[v]++;
      if (v == PD_VERDICT_EXPECTED || v == PD_VERDICT_LIMIT || v == PD_VERDICT_FAIL)
        x->n_ids ? viol++ : pass++;
    }
    fputs("<td>", out);
    for (int v = 0; v < PD_VERDICT_COUNT; v++)
      if (per[v]) fprintf(out, "%zu %s<br>", per[v], pd_report_verdict_words[v]);
    fprintf(out, "own: %zu pass, %zu violate</td>", pass, viol);
  }
  fputs("</tr></tfoot>\n", out);
}

static void table(FILE *out, const grid_t *g, const pd_cli_result_t *rec, size_t in_idx,
                  pd_report_stats_t *st) {
  fprintf(out, "<table class=\"matrix\" id=\"matrix-%zu\"><thead><tr><th>scenario</th>", in_idx);
  for (int c = 0; c < g->n_cols; c++) {
    fputs("<th>", out);
    pd_report_esc(out, g->cols[c]);
    fputs("</th>", out);
  }
  fputs("</tr></thead><tbody>\n", out);
  for (int k = 0; k < g->n_t; k++) {
    const trow_t *t = &g->t[k];
    fputs("<tr><td class=\"s\">", out);
    pd_report_esc(out, t->scenario);
    fputs("</td>", out);
    if (t->error_row >= 0) {
      cell(out, &rec[t->error_row], in_idx, t->error_row, g->n_cols > 0 ? g->n_cols : 1, st);
    }
    for (int c = 0; t->error_row < 0 && c < g->n_cols; c++) {
      if (t->cell[c] < 0) fputs("<td class=\"none\"></td>", out);
      else cell(out, &rec[t->cell[c]], in_idx, t->cell[c], 1, st);
    }
    fputs("</tr>\n", out);
  }
  fputs("</tbody>", out);
  totals(out, g, rec);
  fputs("</table>\n", out);
}

/* The scenario files of one matrix's rows, read for their descriptions (the last one kept). */
typedef struct desc_cache {
  pd_scenario_t *s;
  char last[256], desc[512];
} desc_cache_t;

static const char *description(desc_cache_t *c, const char *path) {
  if (!path || !path[0]) return "";
  if (!strcmp(path, c->last)) return c->desc;
  snprintf(c->last, sizeof c->last, "%s", path);
  c->desc[0] = 0;
  if (!c->s && !(c->s = malloc(sizeof *c->s))) return "";
  char err[256];
  if (pd_scenario_load(c->s, path, err, sizeof err) == 0)
    snprintf(c->desc, sizeof c->desc, "%s", c->s->description);
  return c->desc;
}

static void kv(FILE *out, const char *k, const char *v, int is_code) {
  if (!v || !v[0]) return;
  fprintf(out, "<p><b>%s</b> %s", k, is_code ? "<code>" : "");
  pd_report_esc(out, v);
  fprintf(out, "%s</p>\n", is_code ? "</code>" : "");
}

static void replay(FILE *out, const pd_cli_result_t *x, int is_sim, const char *prog) {
  const char *rp = or_empty(x->replay);
  char buf[1024];
  if (!rp[0] && is_sim && or_empty(x->file)[0] && or_empty(x->mode)[0] &&
      x->verdict != PD_CLI_ERROR) { /* an old row, or a skipped one: from file, mode, seed */
    int n = snprintf(buf, sizeof buf, "%s sim run %s --mode %s", prog ? prog : "pdref", x->file,
                     or_empty(x->mode));
    if (n > 0 && (size_t)n < sizeof buf && x->has_seed)
      snprintf(buf + n, sizeof buf - (size_t)n, " --seed %llu", (unsigned long long)x->seed);
    rp = buf;
  }
  if (!rp[0]) return;
  fputs("<p><b>replay</b></p><pre>", out);
  pd_report_esc(out, rp);
  fputs("</pre>\n", out);
}

static void cost(FILE *out, const cJSON *row) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(row, "metrics");
  if (!cJSON_IsObject(m)) return;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "ttft_ms");
  const cJSON *cap = cJSON_GetObjectItemCaseSensitive(m, "capacity");
  fprintf(out, "<p><b>cost</b> goodput %.2f/s (%.0f of %.0f requests good), TTFT p50 %.1f ms "
               "p99 %.1f ms, stranded slot-s %.1f (beyond grace %.1f), stranded KV page-s %.1f</p>\n",
          pd_report_num(m, "goodput_rps", 0), pd_report_num(m, "good", 0),
          pd_report_num(m, "requests", 0), pd_report_num(t, "p50", 0), pd_report_num(t, "p99", 0),
          pd_report_num(cap, "stranded_slot_s", 0), pd_report_num(cap, "stranded_slot_beyond_grace_s", 0),
          pd_report_num(cap, "stranded_kv_page_s", 0));
}

/* The expectation in words: "pass", the invariants, or "any (no expectation)"; "" for a row
 * that did not run (an error or skipped row has none). */
static void expected_str(const pd_cli_result_t *x, char *buf, size_t cap) {
  buf[0] = 0;
  if (x->verdict == PD_CLI_ERROR || x->verdict == PD_CLI_SKIPPED) return;
  if (!x->expected_set) snprintf(buf, cap, "any (no expectation)");
  else if (!x->expected) snprintf(buf, cap, "pass");
  else pd_cli_inv_text(x->expected, buf, cap);
}

static void details(FILE *out, const pd_cli_result_t *x, size_t in_idx, int idx, int is_sim,
                    const pd_report_opts_t *o, pd_report_stats_t *st, desc_cache_t *dc) {
  pd_report_verdict_t v = verdict_of(x);
  const cJSON *row = x->src;
  char ids[PD_CLI_INV_TEXT_BYTES], want[PD_CLI_INV_TEXT_BYTES];
  int n = own_text(x, ids, sizeof ids);
  fprintf(out, "<details class=\"row\" id=\"r%zu-%d\"><summary><span class=\"v-%s\">&nbsp;%s&nbsp;"
               "</span> <code>",
          in_idx, idx, pd_report_verdict_names[v], pd_report_verdict_words[v]);
  pd_report_esc(out, row_name(x));
  fputs("</code> ", out);
  pd_report_esc(out, x->mode);
  fputs("</summary><div>\n", out);
  kv(out, "file", x->file, 1);
  kv(out, "description", description(dc, x->file), 0);
  kv(out, "error", x->error, 1);
  kv(out, "violated", n ? ids : "none", 0);
  expected_str(x, want, sizeof want);
  kv(out, "expected", want, 0);
  kv(out, "reason", x->reason, 0);
  kv(out, "faults never fired", x->never_fired, 0);
  kv(out, "not exercised", pd_report_str(row, "not_exercised"), 0);
  kv(out, "from /metrics", pd_report_str(row, "metrics_reason"), 0); /* conform's */
  kv(out, "quiescence", pd_report_str(row, "quiescence"), 0);
  kv(out, "note", pd_report_str(row, "scale_note"), 0);
  kv(out, "logs", pd_report_str(row, "dir"), 1);
  replay(out, x, is_sim, o->prog);
  cost(out, row);
  if (is_sim && o->swimlanes && (n || v == PD_VERDICT_FAIL) && v != PD_VERDICT_ERROR) {
    if (st->swimlanes < o->swim_max) st->swimlanes += (size_t)pd_report_swimlane(out, x, o);
    else fprintf(out, "<p class=\"note\">No swimlane: the page has its %zu already.</p>\n", o->swim_max);
  }
  fputs("</div></details>\n", out);
}

void pd_report_matrix(FILE *out, const pd_report_input_t *in, size_t idx, const pd_report_opts_t *o,
                      pd_report_stats_t *st) {
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(in->root, "rows"), *row;
  int n_rows = cJSON_GetArraySize(rows), i = 0;
  grid_t g = {.n_cols = 0};
  g.t = calloc(MAX_TROWS, sizeof *g.t);
  pd_cli_result_t *rec = calloc(n_rows > 0 ? (size_t)n_rows : 1, sizeof *rec);
  if (!g.t || !rec) {
    free(g.t);
    free(rec);
    return;
  }
  cJSON_ArrayForEach(row, rows) pd_cli_result_parse(row, &rec[i++]); /* every row: the record */
  build(&g, rec, n_rows);
  size_t before[PD_VERDICT_COUNT];
  memcpy(before, st->verdicts, sizeof before);
  fputs("<h3>", out);
  pd_report_esc(out, in->path);
  fputs("</h3>\n", out);
  table(out, &g, rec, idx, st);
  fprintf(out, "<p class=\"summary\">%zu as expected, %zu deployment limit, %zu UNEXPECTED, %zu "
          "not exercised, %zu skipped, %zu error.</p>\n",
          st->verdicts[PD_VERDICT_EXPECTED] - before[PD_VERDICT_EXPECTED],
          st->verdicts[PD_VERDICT_LIMIT] - before[PD_VERDICT_LIMIT],
          st->verdicts[PD_VERDICT_FAIL] - before[PD_VERDICT_FAIL],
          st->verdicts[PD_VERDICT_NX] - before[PD_VERDICT_NX],
          st->verdicts[PD_VERDICT_SKIPPED] - before[PD_VERDICT_SKIPPED],
          st->verdicts[PD_VERDICT_ERROR] - before[PD_VERDICT_ERROR]);
  if (in->kind == PD_REPORT_CONFORM) st->conform_rows += (size_t)cJSON_GetArraySize(rows);
  fprintf(out, "<details class=\"rows\"><summary>Rows: the description, reason, replay command "
               "(and an UNEXPECTED row's swimlane) of each of the %d</summary>\n", cJSON_GetArraySize(rows));
  desc_cache_t dc = {.s = NULL};
  for (i = 0; i < n_rows; i++) details(out, &rec[i], idx, i, in->kind == PD_REPORT_SIM, o, st, &dc);
  free(dc.s);
  fputs("</details>\n", out);
  free(rec);
  free(g.t);
}
