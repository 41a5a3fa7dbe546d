/* report: explore's findings per invariant, and the bench results, as tables. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "pd_explore.h"
#include "report.h"

static void td_str(FILE *out, const char *s, int is_code) {
  fputs(is_code ? "<td><code>" : "<td>", out);
  pd_report_esc(out, s);
  fputs(is_code ? "</code></td>" : "</td>", out);
}

static void td_num(FILE *out, double v, const char *fmt) {
  fputs("<td>", out);
  fprintf(out, fmt, v);
  fputs("</td>", out);
}

/* A finding of explore (its own "findings" entry) or of a merge ("smallest"). */
static const cJSON *finding_of(const cJSON *root, const char *id, const cJSON *inv) {
  const cJSON *sm = cJSON_GetObjectItemCaseSensitive(inv, "smallest");
  if (cJSON_IsObject(sm)) return sm;
  const cJSON *f;
  cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(root, "findings"))
    if (!strcmp(pd_report_str(f, "invariant"), id)) return f;
  return NULL;
}

/* "requests": [found, shrunk] -> "8 -> 1"; "" when absent. */
static void sizes(FILE *out, const cJSON *f, const char *key) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(f, key);
  const cJSON *x = cJSON_GetArrayItem(a, 0), *y = cJSON_GetArrayItem(a, 1);
  if (cJSON_IsNumber(x) && cJSON_IsNumber(y)) fprintf(out, "%s %.0f&rarr;%.0f ", key, x->valuedouble, y->valuedouble);
}

void pd_report_explore(FILE *out, const pd_report_input_t *in, pd_report_stats_t *st) {
  const cJSON *r = in->root;
  fputs("<h3>mode <code>", out);
  pd_report_esc(out, pd_report_str(r, "mode"));
  fputs("</code>: <code>", out);
  pd_report_esc(out, in->path);
  fprintf(out, "</code></h3>\n<p>%.0f seeds explored (from ", pd_report_num(r, "explored", 0));
  char sb[32];
  pd_report_esc(out, pd_report_seed(r, "seed_start", sb, sizeof sb));
  fputs(" to ", out);
  pd_report_esc(out, pd_report_seed(r, "seed_end", sb, sizeof sb));
  fprintf(out, ", exclusive), %.0f violating.</p>\n", pd_report_num(r, "violating_seeds", 0));
  fputs("<table class=\"explore\"><thead><tr><th>invariant</th><th>name</th><th>violating seeds</th>"
        "<th>first seed</th><th>shrunk finding</th><th>size</th><th>replay</th></tr></thead><tbody>\n",
        out);
  const cJSON *inv;
  cJSON_ArrayForEach(inv, cJSON_GetObjectItemCaseSensitive(r, "invariants")) {
    if (!inv->string) continue;
    const cJSON *f = finding_of(r, inv->string, inv);
    fputs("<tr>", out);
    td_str(out, inv->string, 0);
    td_str(out, pd_report_str(inv, "name"), 0);
    td_num(out, pd_report_num(inv, "seeds", 0), "%.0f");
    td_str(out, pd_report_seed(inv, "first_seed", sb, sizeof sb), 1);
    /* "reason" is the shrunk case's first violation: another invariant's, when the case
     * shows this one only later; say so rather than print it as this invariant's */
    const char *why = f ? pd_report_str(f, "reason") : "";
    int other = why[0] ? pd_explore_reason_inv(why) : 0;
    if (other && other != atoi(inv->string + (inv->string[0] == 'I'))) {
      fputs("<td><em>the case shows it; its first violation is another invariant's:</em> ", out);
      pd_report_esc(out, why);
      fputs("</td>", out);
    } else {
      td_str(out, why, 0);
    }
    fputs("<td>", out);
    if (f) {
      sizes(out, f, "requests");
      sizes(out, f, "workers");
      sizes(out, f, "faults");
    }
    fputs("</td>", out);
    td_str(out, f ? pd_report_str(f, "replay") : "", 1);
    fputs("</tr>\n", out);
    st->explore_invariants++;
  }
  fputs("</tbody></table>\n", out);
}

static void row_num(FILE *out, const cJSON *o, const char *key, const char *label, const char *fmt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(v)) return;
  fprintf(out, "<tr><th>%s</th>", label);
  td_num(out, v->valuedouble, fmt);
  fputs("</tr>\n", out);
}

static void sim_bench(FILE *out, const cJSON *r) {
  fputs("<table class=\"bench\"><tbody>\n<tr><th>scenario</th>", out);
  td_str(out, pd_report_str(r, "scenario"), 1);
  fputs("</tr>\n<tr><th>mode</th>", out);
  td_str(out, pd_report_str(r, "mode"), 0);
  fputs("</tr>\n", out);
  row_num(out, r, "requests", "requests", "%.0f");
  row_num(out, r, "events", "events", "%.0f");
  row_num(out, r, "elapsed_s", "wall seconds", "%.3f");
  row_num(out, r, "cpu_s", "CPU seconds", "%.3f");
  row_num(out, r, "simulated_s", "simulated seconds", "%.1f");
  row_num(out, r, "events_per_s", "events/s", "%.0f");
  row_num(out, r, "requests_per_s", "requests/s", "%.0f");
  row_num(out, r, "peak_rss_kib", "peak RSS (KiB)", "%.0f");
  row_num(out, r, "violating_requests", "violating requests", "%.0f");
  fputs("</tbody></table>\n", out);
}

static void gw_bench(FILE *out, const cJSON *r) {
  static const char *const keys[] = {"added_ttft_p50_us", "added_ttft_p99_us", "added_itl_p50_us",
                                     "added_itl_p99_us", "gateway_alone_ttft_p50_us",
                                     "gateway_alone_ttft_p99_us"};
  fputs("<p>gateway <code>", out);
  pd_report_esc(out, pd_report_str(r, "gateway_label"));
  fputs("</code> ", out);
  pd_report_esc(out, pd_report_str(r, "gateway_cmd"));
  pd_report_esc(out, pd_report_str(r, "mode"));
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(r, "gateway");
  fprintf(out, ", peak RSS %.0f KiB</p>\n<table class=\"bench\"><thead><tr><th>streams</th>",
          pd_report_num(g, "peak_rss_kib", 0));
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    fputs("<th>", out);
    pd_report_esc(out, keys[k]);
    fputs("</th>", out);
  }
  fputs("</tr></thead><tbody>\n", out);
  const cJSON *lv;
  cJSON_ArrayForEach(lv, cJSON_GetObjectItemCaseSensitive(r, "levels")) {
    fputs("<tr>", out);
    td_num(out, pd_report_num(lv, "streams", 0), "%.0f");
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(lv, keys[k]);
      if (cJSON_IsNumber(v)) td_num(out, v->valuedouble, "%.1f");
      else fputs("<td></td>", out);
    }
    fputs("</tr>\n", out);
  }
  fputs("</tbody></table>\n", out);
}

void pd_report_bench(FILE *out, const pd_report_input_t *in, pd_report_stats_t *st) {
  fprintf(out, "<h3>%s: <code>", pd_report_kind_names[in->kind]);
  pd_report_esc(out, in->path);
  fputs("</code></h3>\n", out);
  if (in->kind == PD_REPORT_SIM_BENCH) sim_bench(out, in->root);
  else gw_bench(out, in->root);
  st->bench_tables++;
}

void pd_report_cases(FILE *out, const pd_report_t *r, const pd_report_opts_t *o,
                     pd_report_stats_t *st) {
  if (!r->n_cases) return;
  fprintf(out, "<h3>Shrunk cases</h3>\n<p>%zu scenario files <code>pdref sim explore</code> saved, "
               "each a world shrunk to the fewest requests, workers and faults that still violate "
               "its invariant.</p>\n<table class=\"explore cases\"><thead><tr><th>file</th>"
               "<th>invariant</th><th>mode</th><th>description</th><th>replay</th></tr></thead><tbody>\n",
          r->n_cases);
  for (size_t i = 0; i < r->n_cases; i++) {
    const pd_report_case_t *c = &r->cases[i];
    fputs("<tr>", out);
    td_str(out, c->path, 1);
    td_str(out, c->inv, 0);
    td_str(out, c->mode, 0);
    td_str(out, c->description, 0);
    fputs("<td><code>", out);
    pd_report_esc(out, o && o->prog ? o->prog : "pdref");
    fputs(" sim run ", out);
    pd_report_esc(out, c->path);
    if (c->mode[0]) {
      fputs(" --mode ", out);
      pd_report_esc(out, c->mode);
    }
    fputs("</code></td></tr>\n", out);
    st->shrunk_cases++;
  }
  fputs("</tbody></table>\n", out);
}
