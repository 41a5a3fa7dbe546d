/* `pdref conform --level NAME`, `--list-levels` (cli/cmd_conform_level.h). */
#include "cmd_conform_level.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_json.h"
#include "cli_rows.h"

#define CMD "pdref conform"

void pd_conform_level_usage(FILE *f) {
  fprintf(f,
          "conformance levels (docs/pd-gateway-behaviour.md):\n"
          "  --level NAME       run exactly the rows of level NAME (its scenarios read from the\n"
          "                     directory given, default scenarios/) and print, per requirement,\n"
          "                     met / not met / not exercised, and whether the level is claimed\n"
          "                     (every MUST met); exit 0 claimed, 1 not, 2 bad usage\n"
          "  --list-levels      print the levels and their requirements (with --json: as JSON)\n"
          "  --requirements-doc FILE  read the requirement index from FILE instead of the copy\n"
          "                     of docs/pd-gateway-behaviour.md built into pdref\n");
}

int pd_conform_level_opt(pd_conform_level_t *L, int which, char *v) {
  if (which == PD_CONFORM_LEVEL_OPT_LEVEL) L->name = v;
  else if (which == PD_CONFORM_LEVEL_OPT_LIST) L->list = 1;
  else L->doc_path = v;
  return 0;
}

static void list_levels(const pd_conform_level_t *L) {
  const pd_reqdoc_t *d = L->doc;
  if (L->json) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", "pdref-conform-levels/1"); /* docs/conform-levels.schema.json */
    cJSON_AddStringToObject(root, "command", "conform --list-levels");
    cJSON *lv = cJSON_AddArrayToObject(root, "levels");
    cJSON_AddStringToObject(root, "version", pd_cli_version());
    cJSON_AddStringToObject(root, "source", d->path);
    for (int l = 0; l < d->n_lvl; l++) {
      cJSON *o = cJSON_CreateObject(), *ids = cJSON_CreateArray();
      cJSON_AddStringToObject(o, "name", d->lvl[l].name);
      cJSON_AddStringToObject(o, "builds_on", d->lvl[l].base);
      cJSON_AddStringToObject(o, "claim", d->lvl[l].claim);
      for (int i = 0; i < d->n_req; i++)
        if (pd_reqdoc_in_level(d, i, l)) cJSON_AddItemToArray(ids, cJSON_CreateString(d->req[i].id));
      cJSON_AddItemToObject(o, "requirements", ids);
      cJSON_AddItemToArray(lv, o);
    }
    cJSON *rq = cJSON_AddArrayToObject(root, "requirements");
    for (int i = 0; i < d->n_req; i++) {
      const pd_req_t *r = &d->req[i];
      cJSON *o = cJSON_CreateObject(), *rows = cJSON_CreateArray();
      char inv[160];
      cJSON_AddStringToObject(o, "id", r->id);
      cJSON_AddStringToObject(o, "keyword", r->keyword);
      cJSON_AddStringToObject(o, "level", r->level);
      pd_req_inv_list(r->inv, inv, sizeof inv);
      cJSON_AddStringToObject(o, "invariants", inv);
      for (int k = 0; k < r->n_rows; k++) cJSON_AddItemToArray(rows, cJSON_CreateString(r->rows[k]));
      cJSON_AddItemToObject(o, "rows", rows);
      if (r->pending[0]) cJSON_AddStringToObject(o, "pending", r->pending);
      cJSON_AddItemToArray(rq, o);
    }
    pd_cli_json_print(root);
    return;
  }
  printf("# levels of pdref %s (%s); each builds on the one before it\n", pd_cli_version(), d->path);
  for (int l = 0; l < d->n_lvl; l++) {
    int n = 0, must = 0;
    for (int i = 0; i < d->n_req; i++)
      if (pd_reqdoc_in_level(d, i, l)) {
        n++;
        must += !strcmp(d->req[i].keyword, "MUST");
      }
    printf("%-10s %d requirements (%d MUST): %s\n", d->lvl[l].name, n, must, d->lvl[l].claim);
  }
  printf("%-16s %-7s %-10s %-16s %s\n", "requirement", "keyword", "level", "invariants", "rows");
  for (int i = 0; i < d->n_req; i++) {
    const pd_req_t *r = &d->req[i];
    char inv[160];
    pd_req_inv_list(r->inv, inv, sizeof inv);
    if (r->pending[0]) printf("%-16s %-7s %-10s %-16s %s\n", r->id, r->keyword, r->level, inv, r->pending);
    else printf("%-16s %-7s %-10s %-16s %d (%s%s)\n", r->id, r->keyword, r->level, inv, r->n_rows,
                r->rows[0], r->n_rows > 1 ? ", ..." : "");
  }
}

int pd_conform_level_setup(pd_conform_level_t *L, char **paths, int n_paths, char **files,
                           int *n_files, int max) {
  if (!L->name && !L->list && !L->doc_path) return PD_CONFORM_LEVEL_NONE;
  char err[600];
  L->doc = malloc(sizeof *L->doc);
  if (!L->doc) return 2;
  if (pd_reqdoc_load(L->doc, L->doc_path, err, sizeof err)) {
    fprintf(stderr, CMD ": %s\n", err);
    return 2;
  }
  if (L->list) {
    list_levels(L);
    return 0;
  }
  if (!L->name) {
    fprintf(stderr, CMD ": --requirements-doc needs --level or --list-levels\n");
    return 2;
  }
  if ((L->lvl = pd_reqdoc_level(L->doc, L->name)) < 0) {
    char names[256];
    pd_reqdoc_level_names(L->doc, names, sizeof names);
    fprintf(stderr, CMD ": --level: no level '%s' (levels: %s)\n", L->name, names);
    return 2;
  }
  const char *dir = n_paths ? paths[0] : "scenarios";
  struct stat st;
  if (n_paths > 1 || stat(dir, &st) || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, CMD ": --level takes one scenario directory (the rows are the level's), "
            "got %s%s\n", n_paths > 1 ? "several paths" : dir, n_paths > 1 ? "" : ": not a directory");
    return 2;
  }
  const pd_reqdoc_t *d = L->doc;
  *n_files = 0;
  for (int i = 0; i < d->n_req; i++) {
    if (!pd_reqdoc_in_level(d, i, L->lvl)) continue;
    for (int k = 0; k < d->req[i].n_rows; k++) {
      char path[1024];
      snprintf(path, sizeof path, "%s/%s.json", dir, d->req[i].rows[k]);
      int dup = 0;
      for (int f = 0; f < *n_files && !dup; f++) dup = !strcmp(files[f], path);
      if (dup) continue;
      if (stat(path, &st)) {
        fprintf(stderr, CMD ": level %s: %s names %s: no such file\n", L->name, d->req[i].id, path);
        return 2;
      }
      if (*n_files >= max || !(files[*n_files] = strdup(path))) return 2;
      (*n_files)++;
    }
  }
  L->cap = (size_t)*n_files + 1;
  L->rows = calloc(L->cap, sizeof *L->rows);
  return L->rows ? PD_CONFORM_LEVEL_FILES : 2;
}

void pd_conform_level_row(pd_conform_level_t *L, const pd_scenario_t *s,
                          const pd_conform_result_t *r, int verdict) {
  if (!L->name || !L->rows || L->n >= L->cap) return;
  pd_req_row_t *w = &L->rows[L->n];
  w->scenario = strdup(s->name);
  if (!w->scenario) return;
  w->status = verdict;
  /* a row tested something when its word says it ran (not "not exercised": a fault that never
   * fired, a load or a fault the mocks cannot drive) and its own account says so */
  w->exercised = (verdict == PD_CLI_AS_EXPECTED || verdict == PD_CLI_LIMIT ||
                  verdict == PD_CLI_UNEXPECTED) && r->status == PD_CONFORM_RAN && r->exercised;
  w->got = r->got;
  w->judged = r->judged;
  w->allowed = s->expect[PD_MODE_REFERENCE].is_set ? s->expect[PD_MODE_REFERENCE].violated_mask : 0;
  L->n++;
}

typedef struct tally {
  int must[PD_REQ_VERDICTS], other[PD_REQ_VERDICTS], pending;
  char must_ids[PD_REQ_VERDICTS][512];
} tally_t;

static void eval_all(const pd_conform_level_t *L, pd_req_result_t *res, tally_t *t) {
  const pd_reqdoc_t *d = L->doc;
  memset(t, 0, sizeof *t);
  memset(res, 0, sizeof *res * PD_REQ_MAX);
  for (int i = 0; i < d->n_req; i++) {
    if (!pd_reqdoc_in_level(d, i, L->lvl)) continue;
    pd_req_eval(&d->req[i], L->rows, L->n, &res[i]);
    t->pending += d->req[i].pending[0] != 0;
    if (!strcmp(d->req[i].keyword, "MUST")) {
      char *ids = t->must_ids[res[i].v];
      t->must[res[i].v]++;
      snprintf(ids + strlen(ids), 512 - strlen(ids), "%s%s", ids[0] ? ", " : "", d->req[i].id);
    } else {
      t->other[res[i].v]++;
    }
  }
}

static int claimed(const pd_conform_level_t *L, const pd_req_result_t *res) {
  pd_req_verdict_t v[PD_REQ_MAX];
  for (int i = 0; i < L->doc->n_req; i++) v[i] = res[i].v;
  return pd_reqdoc_claims(L->doc, L->lvl, v, NULL);
}

void pd_conform_level_print(const pd_conform_level_t *L) {
  if (!L->name || !L->doc) return;
  const pd_reqdoc_t *d = L->doc;
  static pd_req_result_t res[PD_REQ_MAX]; /* every entry set by eval_all */
  tally_t t;
  eval_all(L, res, &t);
  printf("# level %s of pdref %s (%s): %s\n", L->name, pd_cli_version(), d->path,
         d->lvl[L->lvl].claim);
  printf("%-16s %-7s %-14s %-6s %s\n", "requirement", "keyword", "verdict", "rows", "why");
  for (int i = 0; i < d->n_req; i++) {
    if (!pd_reqdoc_in_level(d, i, L->lvl)) continue;
    char rows[16];
    snprintf(rows, sizeof rows, "%d/%d", res[i].exercised, res[i].rows);
    printf("%-16s %-7s %-14s %-6s %s\n", d->req[i].id, d->req[i].keyword,
           pd_req_verdict_word(res[i].v), rows, res[i].note);
  }
  printf("(rows: exercised/listed; a requirement is met only when every row of the gateway's "
         "protocol tested it)\n");
  if (claimed(L, res))
    printf("level %s: claimed: %d MUST met (SHOULD/MAY: %d met, %d not met, %d not exercised)\n",
           L->name, t.must[PD_REQ_MET], t.other[PD_REQ_MET], t.other[PD_REQ_NOT_MET],
           t.other[PD_REQ_NX]);
  else
    printf("level %s: not claimed: %d MUST met, %d not met%s%s%s, %d not exercised%s%s%s%s\n",
           L->name,
           t.must[PD_REQ_MET], t.must[PD_REQ_NOT_MET], t.must[PD_REQ_NOT_MET] ? " (" : "",
           t.must_ids[PD_REQ_NOT_MET], t.must[PD_REQ_NOT_MET] ? ")" : "", t.must[PD_REQ_NX],
           t.must[PD_REQ_NX] ? " (" : "", t.must_ids[PD_REQ_NX], t.must[PD_REQ_NX] ? ")" : "",
           t.pending ? "; requirements pending (no rows yet): a level with one cannot be claimed"
                     : "");
}

void pd_conform_level_json(const pd_conform_level_t *L, cJSON *root) {
  if (!L->name || !L->doc) return;
  const pd_reqdoc_t *d = L->doc;
  static pd_req_result_t res[PD_REQ_MAX]; /* every entry set by eval_all */
  tally_t t;
  eval_all(L, res, &t);
  cJSON *lv = cJSON_AddObjectToObject(root, "level");
  cJSON_AddStringToObject(lv, "name", L->name);
  cJSON_AddStringToObject(lv, "claim", d->lvl[L->lvl].claim);
  cJSON_AddStringToObject(lv, "version", pd_cli_version());
  cJSON_AddBoolToObject(lv, "claimed", claimed(L, res));
  cJSON_AddNumberToObject(lv, "must_met", t.must[PD_REQ_MET]);
  cJSON_AddNumberToObject(lv, "must_not_met", t.must[PD_REQ_NOT_MET]);
  cJSON_AddNumberToObject(lv, "must_not_exercised", t.must[PD_REQ_NX]);
  cJSON_AddNumberToObject(lv, "pending", t.pending);
  cJSON *arr = cJSON_AddArrayToObject(root, "requirements");
  for (int i = 0; i < d->n_req; i++) {
    if (!pd_reqdoc_in_level(d, i, L->lvl)) continue;
    cJSON *o = cJSON_CreateObject();
    char inv[160];
    cJSON_AddStringToObject(o, "id", d->req[i].id);
    cJSON_AddStringToObject(o, "keyword", d->req[i].keyword);
    cJSON_AddStringToObject(o, "level", d->req[i].level);
    pd_req_inv_list(d->req[i].inv, inv, sizeof inv);
    cJSON_AddStringToObject(o, "invariants", inv);
    cJSON_AddStringToObject(o, "verdict", pd_req_verdict_word(res[i].v));
    const pd_cli_json_num_t nums[] = {{"rows", res[i].rows}, {"rows_run", res[i].ran},
                                      {"rows_exercised", res[i].exercised},
                                      {"rows_skipped", res[i].skipped}};
    pd_cli_json_add_nums(o, nums, sizeof nums / sizeof nums[0]);
    cJSON_AddStringToObject(o, "why", res[i].note);
    cJSON_AddItemToArray(arr, o);
  }
}

int pd_conform_level_exit(const pd_conform_level_t *L, int rows_exit) {
  if (rows_exit == 2) return 2;
  static pd_req_result_t res[PD_REQ_MAX]; /* every entry set by eval_all */
  tally_t t;
  eval_all(L, res, &t);
  return claimed(L, res) ? 0 : 1;
}

void pd_conform_level_free(pd_conform_level_t *L) {
  for (size_t i = 0; i < L->n; i++) free((char *)L->rows[i].scenario);
  free(L->rows);
  free(L->doc);
  L->rows = NULL;
  L->doc = NULL;
  L->n = 0;
}
