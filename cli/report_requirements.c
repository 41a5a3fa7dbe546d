/* The requirement x gateway matrix (cli/report_requirements.h). */
#include "report_requirements.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli_json.h"
#include "cli_result.h"
#include "cli_rows.h"
#include "conform_level.h"
#include "pd_scenario.h"
#include "report.h"

#define CMD "pdref report"
#define MAX_COLS 32

typedef struct column {
  char name[96];
  pd_req_verdict_t v[PD_REQ_MAX];
  int present[PD_REQ_MAX]; /* the run had the requirement */
  char note[PD_REQ_MAX][256];
} column_t;

typedef struct cache_ent {
  char file[512];
  int ok;
  uint32_t allowed;
} cache_ent_t;

typedef struct ctx {
  const pd_reqdoc_t *d;
  column_t *col;
  int n_col;
  pd_scenario_t *s;
  cache_ent_t *cache;
  size_t n_cache, cap_cache;
} ctx_t;

/* ["I3", "I10"] or "I3,I10" into a mask (conform's "judged", which the record does not hold). */
static uint32_t mask_of(const cJSON *v) {
  uint32_t m = 0;
  if (cJSON_IsArray(v)) {
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
      if (cJSON_IsString(e) && e->valuestring[0] == 'I') {
        int k = atoi(e->valuestring + 1);
        if (k >= 1 && k <= PD_INVARIANT_COUNT) m |= 1u << (k - 1);
      }
    }
  } else if (cJSON_IsString(v)) {
    for (const char *p = v->valuestring; (p = strchr(p, 'I')); p++) {
      int k = atoi(p + 1);
      if (k >= 1 && k <= PD_INVARIANT_COUNT) m |= 1u << (k - 1);
    }
  }
  return m;
}

/* What the reference is expected to violate on the row's scenario: from its file (cached),
 * else from a reference row of the same input; 0 (held to pass) when neither says. */
static uint32_t allowed_of(ctx_t *c, const cJSON *row, const cJSON *rows) {
  const char *file = pd_report_str(row, "file"), *name = pd_report_str(row, "scenario");
  for (size_t i = 0; i < c->n_cache; i++)
    if (!strcmp(c->cache[i].file, file) && c->cache[i].ok) return c->cache[i].allowed;
  char err[512];
  if (file[0] && strlen(file) < sizeof c->cache[0].file &&
      pd_scenario_load(c->s, file, err, sizeof err) == 0) {
    uint32_t a = c->s->expect[PD_MODE_REFERENCE].is_set ? c->s->expect[PD_MODE_REFERENCE].violated_mask : 0;
    if (c->n_cache == c->cap_cache) {
      size_t nc = c->cap_cache ? c->cap_cache * 2 : 64;
      cache_ent_t *n = realloc(c->cache, nc * sizeof *n);
      if (!n) return a;
      c->cache = n;
      c->cap_cache = nc;
    }
    cache_ent_t *e = &c->cache[c->n_cache++];
    snprintf(e->file, sizeof e->file, "%s", file);
    e->ok = 1;
    e->allowed = a;
    return a;
  }
  const cJSON *r;
  cJSON_ArrayForEach(r, rows) {
    pd_cli_result_t x;
    pd_cli_result_parse(r, &x);
    if (x.scenario && !strcmp(x.scenario, name) && x.mode && !strcmp(x.mode, "reference"))
      return x.expected;
  }
  return 0;
}

static column_t *new_col(ctx_t *c, const char *name) {
  if (c->n_col >= MAX_COLS) return NULL;
  column_t *col = &c->col[c->n_col++];
  memset(col, 0, sizeof *col);
  snprintf(col->name, sizeof col->name, "%s", name);
  return col;
}

/* Columns from the rows of one input, one per mode label. */
static int from_rows(ctx_t *c, const cJSON *rows, int is_sim, const char *name) {
  const cJSON *r;
  char modes[MAX_COLS][64];
  int n_modes = 0;
  cJSON_ArrayForEach(r, rows) {
    const char *m = pd_report_str(r, "mode");
    int seen = 0;
    for (int i = 0; i < n_modes && !seen; i++) seen = !strcmp(modes[i], m);
    if (!seen && m[0] && n_modes < MAX_COLS) snprintf(modes[n_modes++], 64, "%s", m);
  }
  size_t n_rows = (size_t)cJSON_GetArraySize(rows);
  pd_req_row_t *w = calloc(n_rows + 1, sizeof *w);
  if (!w) return 2;
  for (int m = 0; m < n_modes; m++) {
    char cname[96];
    if (name && n_modes == 1) snprintf(cname, sizeof cname, "%.90s", name);
    else if (name) snprintf(cname, sizeof cname, "%.40s:%.40s", name, modes[m]);
    else snprintf(cname, sizeof cname, "%.60s%s", modes[m], is_sim ? " (sim)" : " (conform)");
    column_t *col = new_col(c, cname);
    if (!col) {
      free(w);
      fprintf(stderr, CMD ": more than %d columns\n", MAX_COLS);
      return 2;
    }
    size_t n = 0;
    cJSON_ArrayForEach(r, rows) {
      pd_cli_result_t rec; /* the row's result record (cli_result.h) */
      pd_cli_result_parse(r, &rec);
      if (strcmp(rec.mode ? rec.mode : "", modes[m])) continue;
      pd_req_row_t *x = &w[n++];
      x->scenario = rec.scenario ? rec.scenario : "";
      x->status = rec.verdict; /* as the matrix reads it: old rows by "matched" */
      int ran = x->status == PD_CLI_AS_EXPECTED || x->status == PD_CLI_LIMIT ||
                x->status == PD_CLI_UNEXPECTED;
      x->exercised = ran && (is_sim ? !rec.declared_unexercised : rec.exercised == 1);
      x->got = rec.violated;
      x->judged = is_sim ? (1u << PD_INVARIANT_COUNT) - 1u
                         : mask_of(cJSON_GetObjectItemCaseSensitive(r, "judged"));
      x->allowed = allowed_of(c, r, rows);
    }
    /* a scenario of the input with no row for this mode is one the mode does not speak
     * (sim run --mode all runs each scenario only under the modes of its protocol) */
    size_t n_own = n;
    cJSON_ArrayForEach(r, rows) {
      const char *sc = pd_report_str(r, "scenario");
      int seen = 0;
      for (size_t i = 0; i < n && !seen; i++) seen = !strcmp(w[i].scenario, sc);
      if (seen || n >= n_rows) continue;
      w[n].scenario = sc;
      w[n++].status = PD_CLI_SKIPPED;
    }
    (void)n_own;
    for (int i = 0; i < c->d->n_req; i++) {
      pd_req_result_t res;
      pd_req_eval(&c->d->req[i], w, n, &res);
      col->present[i] = 1;
      col->v[i] = res.v;
      snprintf(col->note[i], sizeof col->note[i], "%.250s", res.note);
    }
  }
  free(w);
  return 0;
}

/* A column from a `conform --level --json` result's "requirements". */
static int from_level(ctx_t *c, const cJSON *root, const cJSON *reqs, const char *name) {
  char cname[96];
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(root, "rows"), *first = cJSON_GetArrayItem(rows, 0);
  if (name) snprintf(cname, sizeof cname, "%s", name);
  else snprintf(cname, sizeof cname, "%s (conform)", first ? pd_report_str(first, "mode") : "gateway");
  column_t *col = new_col(c, cname);
  if (!col) return 2;
  const cJSON *q;
  cJSON_ArrayForEach(q, reqs) {
    const char *id = pd_report_str(q, "id"), *v = pd_report_str(q, "verdict");
    for (int i = 0; i < c->d->n_req; i++) {
      if (strcmp(c->d->req[i].id, id)) continue;
      col->present[i] = 1;
      col->v[i] = !strcmp(v, "met") ? PD_REQ_MET : !strcmp(v, "not met") ? PD_REQ_NOT_MET : PD_REQ_NX;
      snprintf(col->note[i], sizeof col->note[i], "%s", pd_report_str(q, "why"));
    }
  }
  return 0;
}

static const char *cell(const column_t *col, int i) {
  if (!col->present[i]) return "-";
  return col->v[i] == PD_REQ_MET ? "met" : col->v[i] == PD_REQ_NOT_MET ? "NOT MET" : "n/e";
}

static int claims(const pd_reqdoc_t *d, const column_t *col, int l) {
  return pd_reqdoc_claims(d, l, col->v, col->present);
}

static void print_text(FILE *out, const ctx_t *c) {
  const pd_reqdoc_t *d = c->d;
  int w[MAX_COLS];
  fprintf(out, "%-16s %-6s", "requirement", "kw");
  for (int k = 0; k < c->n_col; k++) {
    w[k] = (int)strlen(c->col[k].name);
    if (w[k] < 7) w[k] = 7;
    fprintf(out, " | %-*s", w[k], c->col[k].name);
  }
  fprintf(out, "\n");
  for (int i = 0; i < d->n_req; i++) {
    fprintf(out, "%-16s %-6s", d->req[i].id, d->req[i].keyword);
    for (int k = 0; k < c->n_col; k++) fprintf(out, " | %-*s", w[k], cell(&c->col[k], i));
    fprintf(out, "\n");
  }
  for (int l = 0; l < d->n_lvl; l++) {
    char lab[64];
    snprintf(lab, sizeof lab, "level %s", d->lvl[l].name);
    fprintf(out, "%-23s", lab);
    for (int k = 0; k < c->n_col; k++)
      fprintf(out, " | %-*s", w[k], claims(d, &c->col[k], l) ? "claimed" : "no");
    fprintf(out, "\n");
  }
  fprintf(out, "met: every row of the gateway's protocol exercised it, none violated its invariants "
          "beyond the reference's allowance; NOT MET: a row did; n/e: not exercised (a row that "
          "tested nothing, invariants these runs cannot judge, pending rows); -: not in that run\n");
  for (int k = 0; k < c->n_col; k++)
    for (int i = 0; i < d->n_req; i++)
      if (c->col[k].present[i] && c->col[k].v[i] == PD_REQ_NOT_MET)
        fprintf(out, "  %s %s: %s\n", c->col[k].name, d->req[i].id, c->col[k].note[i]);
}

static void print_json(const ctx_t *c) {
  const pd_reqdoc_t *d = c->d;
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "schema", PD_REPORT_REQ_SCHEMA);
  cJSON_AddStringToObject(root, "command", "report --requirements");
  cJSON *cols = cJSON_AddArrayToObject(root, "columns");
  for (int k = 0; k < c->n_col; k++) cJSON_AddItemToArray(cols, cJSON_CreateString(c->col[k].name));
  cJSON *rq = cJSON_AddArrayToObject(root, "requirements");
  for (int i = 0; i < d->n_req; i++) {
    cJSON *o = cJSON_CreateObject(), *cells = cJSON_CreateObject(), *why = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", d->req[i].id);
    cJSON_AddStringToObject(o, "keyword", d->req[i].keyword);
    cJSON_AddStringToObject(o, "level", d->req[i].level);
    for (int k = 0; k < c->n_col; k++) {
      if (!c->col[k].present[i]) cJSON_AddNullToObject(cells, c->col[k].name);
      else cJSON_AddStringToObject(cells, c->col[k].name, pd_req_verdict_word(c->col[k].v[i]));
      if (c->col[k].present[i] && c->col[k].note[i][0])
        cJSON_AddStringToObject(why, c->col[k].name, c->col[k].note[i]);
    }
    cJSON_AddItemToObject(o, "cells", cells);
    cJSON_AddItemToObject(o, "why", why);
    cJSON_AddItemToArray(rq, o);
  }
  cJSON *lv = cJSON_AddArrayToObject(root, "levels");
  for (int l = 0; l < d->n_lvl; l++) {
    cJSON *o = cJSON_CreateObject(), *by = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", d->lvl[l].name);
    for (int k = 0; k < c->n_col; k++) cJSON_AddBoolToObject(by, c->col[k].name, claims(d, &c->col[k], l));
    cJSON_AddItemToObject(o, "claimed", by);
    cJSON_AddItemToArray(lv, o);
  }
  pd_cli_json_print(root);
}

/* cmd runs pdref's own gateway: "[exec ][PATH/]pdref gateway ..." or "[PATH/]pdref-gateway ...". */
static int is_pdref_gateway(const char *cmd) {
  if (!strncmp(cmd, "exec ", 5)) cmd += 5;
  size_t n = strcspn(cmd, " ");
  const char *base = cmd;
  for (const char *p = cmd; p < cmd + n; p++)
    if (*p == '/') base = p + 1;
  size_t b = (size_t)(cmd + n - base);
  if (b == 13 && !strncmp(base, "pdref-gateway", 13)) return 1;
  return b == 5 && !strncmp(base, "pdref", 5) && !strncmp(cmd + n, " gateway ", 9);
}

/* The columns of one loaded input (name NULL: named after its modes). 0, or 2 said on stderr. */
static int add_input(ctx_t *c, const pd_report_input_t *in, const char *name) {
  const cJSON *reqs = cJSON_GetObjectItemCaseSensitive(in->root, "requirements"),
              *rows = cJSON_GetObjectItemCaseSensitive(in->root, "rows");
  char own[96];
  const char *cmd = pd_report_str(in->root, "gateway_cmd");
  if (!name && in->kind == PD_REPORT_CONFORM && is_pdref_gateway(cmd)) {
    const cJSON *first = cJSON_GetArrayItem(rows, 0);
    snprintf(own, sizeof own, "pdref-gateway %.60s (conform)", first ? pd_report_str(first, "mode") : "");
    name = own;
  }
  if (in->kind == PD_REPORT_CONFORM && cJSON_IsArray(reqs)) return from_level(c, in->root, reqs, name);
  if ((in->kind == PD_REPORT_CONFORM || in->kind == PD_REPORT_SIM) && cJSON_IsArray(rows))
    return from_rows(c, rows, in->kind == PD_REPORT_SIM, name);
  fprintf(stderr, CMD ": %s: --requirements takes sim run and conform results, not %s\n", in->path,
          pd_report_kind_names[in->kind]);
  return 2;
}

static const char *cell_class(const column_t *col, int i) {
  if (!col->present[i]) return "absent";
  return col->v[i] == PD_REQ_MET ? "met" : col->v[i] == PD_REQ_NOT_MET ? "notmet" : "nx";
}

/* The matrix as an HTML section: a table.requirements, one row per requirement (its ID,
 * keyword, level), one column per gateway; a cell's title is why (not met: the rows and
 * invariants). Then a row per level: claimed or not. */
static void print_html(FILE *out, const ctx_t *c) {
  const pd_reqdoc_t *d = c->d;
  fputs("<style>table.requirements td.met{background:#d9f2d9}table.requirements td.notmet{"
        "background:#f8d0d0;font-weight:bold}table.requirements td.nx{background:#fff3c4}"
        "table.requirements td.absent{color:#888}table.requirements td,table.requirements th{"
        "padding:2px 6px;border:1px solid #ccc;font-size:13px}</style>\n", out);
  fputs("<p>Requirements of <code>docs/pd-gateway-behaviour.md</code> "
        "(rows) &times; gateways (columns). A simulator column (<code>(sim)</code>) judges every "
        "invariant from the gateway model's own records; a socket column (<code>(conform)</code>) "
        "only what the sockets show. <b>met</b>: every row of the gateway's protocol exercised "
        "it and none violated its invariants beyond the reference's allowance; <b>NOT MET</b>: "
        "a row did (hover for which); <b>n/e</b>: not exercised; <b>-</b>: not in that run. "
        "Re-run: <code>scripts/requirement-matrix.sh</code>.</p>\n", out);
  fputs("<table class=\"requirements\"><thead><tr><th>requirement</th><th>level</th>", out);
  for (int k = 0; k < c->n_col; k++) {
    fputs("<th class=\"gw\">", out);
    pd_report_esc(out, c->col[k].name);
    fputs("</th>", out);
  }
  fputs("</tr></thead><tbody>\n", out);
  for (int i = 0; i < d->n_req; i++) {
    fputs("<tr class=\"req\"><th>", out);
    pd_report_esc(out, d->req[i].id);
    fputs(" <small>", out);
    pd_report_esc(out, d->req[i].keyword);
    fputs("</small></th><td>", out);
    pd_report_esc(out, d->req[i].level);
    fputs("</td>", out);
    for (int k = 0; k < c->n_col; k++) {
      const column_t *col = &c->col[k];
      fprintf(out, "<td class=\"%s\" title=\"", cell_class(col, i));
      pd_report_esc(out, col->present[i] ? col->note[i] : "not in this run");
      fputs("\">", out);
      pd_report_esc(out, cell(col, i));
      fputs("</td>", out);
    }
    fputs("</tr>\n", out);
  }
  for (int l = 0; l < d->n_lvl; l++) {
    fputs("<tr class=\"level\"><th colspan=\"2\">level ", out);
    pd_report_esc(out, d->lvl[l].name);
    fputs("</th>", out);
    for (int k = 0; k < c->n_col; k++)
      fprintf(out, "<td class=\"%s\">%s</td>", claims(d, &c->col[k], l) ? "met" : "absent",
              claims(d, &c->col[k], l) ? "claimed" : "no");
    fputs("</tr>\n", out);
  }
  fputs("</tbody></table>\n", out);
}

int pd_report_requirements_html(FILE *out, const pd_report_t *r, size_t *n_req, size_t *n_col) {
  char err[768];
  ctx_t c = {0};
  pd_reqdoc_t *d = malloc(sizeof *d);
  c.col = calloc(MAX_COLS, sizeof *c.col);
  c.s = malloc(sizeof *c.s);
  int rc = 0;
  *n_req = *n_col = 0;
  if (!d || !c.col || !c.s) rc = 2;
  else if (pd_reqdoc_load(d, NULL, err, sizeof err)) {
    fprintf(stderr, CMD ": %s\n", err);
    rc = 2;
  }
  c.d = d;
  for (size_t i = 0; i < r->n && !rc; i++)
    if (r->in[i].kind == PD_REPORT_SIM || r->in[i].kind == PD_REPORT_CONFORM)
      rc = add_input(&c, &r->in[i], NULL);
  if (!rc && c.n_col) {
    print_html(out, &c);
    *n_req = (size_t)d->n_req;
    *n_col = (size_t)c.n_col;
  }
  free(c.cache);
  free(c.s);
  free(c.col);
  free(d);
  return rc;
}

int pd_report_requirements(FILE *out, char **args, int n, const char *doc_path, int json) {
  char err[768];
  ctx_t c = {0};
  pd_reqdoc_t *d = malloc(sizeof *d);
  pd_report_t *r = calloc(1, sizeof *r);
  c.col = calloc(MAX_COLS, sizeof *c.col);
  c.s = malloc(sizeof *c.s);
  char *names[PD_REPORT_MAX_INPUTS] = {0};
  int rc = 0;
  if (!d || !r || !c.col || !c.s) rc = 2;
  else if (pd_reqdoc_load(d, doc_path, err, sizeof err)) {
    fprintf(stderr, CMD ": %s\n", err);
    rc = 2;
  }
  c.d = d;
  for (int a = 0; a < n && !rc; a++) {
    char *eq = strchr(args[a], '='), *path = args[a];
    if (eq && eq != args[a] && !memchr(args[a], '/', (size_t)(eq - args[a]))) {
      *eq = 0;
      names[r->n] = args[a];
      path = eq + 1;
    }
    size_t idx = r->n;
    if (pd_report_load(r, path, err, sizeof err)) {
      fprintf(stderr, CMD ": %s\n", err);
      rc = 2;
      break;
    }
    rc = add_input(&c, &r->in[idx], names[idx]);
  }
  if (!rc && !c.n_col) {
    fprintf(stderr, CMD ": --requirements: no column (no rows in the results)\n");
    rc = 2;
  }
  if (!rc) {
    if (json) print_json(&c);
    else print_text(out, &c);
  }
  free(c.cache);
  free(c.s);
  free(c.col);
  if (r) pd_report_free(r);
  free(r);
  free(d);
  return rc;
}
