/* The requirement index of docs/pd-gateway-behaviour.md and per-requirement verdicts
 * (conform_level.h). */
#include "conform_level.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_rows.h"
#include "pd_scenario.h"

extern const unsigned char pd_behaviour_doc[];
extern const size_t pd_behaviour_doc_len;

static void trim(char *s) {
  size_t n = strlen(s), i = 0;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = 0;
  while (s[i] == ' ' || s[i] == '\t') i++;
  memmove(s, s + i, n - i + 1);
}

/* Split a table line "| a | b | c |" into at most max cells (trimmed, in place). */
static int cells(char *line, char **out, int max) {
  int n = 0;
  char *p = strchr(line, '|');
  if (!p) return 0;
  p++;
  while (*p && n < max + 1) {
    char *q = strchr(p, '|');
    if (!q) break;
    *q = 0;
    if (n < max) {
      trim(p);
      out[n] = p;
    }
    n++;
    p = q + 1;
  }
  return n;
}

static int copy(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) return -1;
  memcpy(dst, src, n + 1);
  return 0;
}

/* "I5, I6, I14" into a mask; -1 on a word that is no invariant. */
static int parse_inv(const char *s, uint32_t *mask) {
  *mask = 0;
  while (*s) {
    while (*s == ' ' || *s == ',') s++;
    if (!*s) break;
    if (*s != 'I') return -1;
    char *end;
    long k = strtol(s + 1, &end, 10);
    if (end == s + 1 || k < 1 || k > PD_INVARIANT_COUNT) return -1;
    *mask |= 1u << (k - 1);
    s = end;
    while (*s == ' ') s++;
    if (*s && *s != ',') return -1;
  }
  return *mask ? 0 : -1;
}

static int parse_rows(pd_req_t *r, char *s) {
  if (!strncmp(s, "pending issue ", 14)) return copy(r->pending, sizeof r->pending, s);
  for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
    trim(tok);
    size_t n = strlen(tok);
    if (n >= 2 && tok[0] == '`' && tok[n - 1] == '`') {
      tok[n - 1] = 0;
      tok++;
    }
    if (!tok[0]) continue;
    if (r->n_rows >= PD_REQ_MAX_ROWS || copy(r->rows[r->n_rows], PD_REQ_NAME_BYTES, tok)) return -1;
    r->n_rows++;
  }
  return r->n_rows ? 0 : -1;
}

int pd_reqdoc_parse(pd_reqdoc_t *d, const char *text, size_t len, const char *name, char *err,
                    size_t cap) {
  memset(d, 0, sizeof *d);
  snprintf(d->path, sizeof d->path, "%s", name);
  enum { NONE, REQ, LVL } sec = NONE;
  size_t pos = 0;
  int line_no = 0;
  char line[4096];
  while (pos < len) {
    size_t e = pos;
    while (e < len && text[e] != '\n') e++;
    size_t n = e - pos;
    line_no++;
    if (n >= sizeof line) {
      snprintf(err, cap, "%s:%d: line too long", name, line_no);
      return -1;
    }
    memcpy(line, text + pos, n);
    line[n] = 0;
    pos = e + 1;
    if (!strncmp(line, "### 9.1 ", 8)) { sec = REQ; continue; }
    if (!strncmp(line, "### 9.2 ", 8)) { sec = LVL; continue; }
    if (!strncmp(line, "## ", 3)) sec = NONE;
    if (sec == NONE || line[0] != '|' || !strncmp(line, "|---", 4)) continue;
    char *c[5];
    int k = cells(line, c, 5);
    if (k >= 1 && (!strcmp(c[0], "ID") || !strcmp(c[0], "level"))) continue;
    if (sec == REQ) {
      pd_req_t *r = &d->req[d->n_req];
      if (k != 5 || d->n_req >= PD_REQ_MAX || copy(r->id, sizeof r->id, c[0]) ||
          copy(r->keyword, sizeof r->keyword, c[1]) || copy(r->level, sizeof r->level, c[2])) {
        snprintf(err, cap, "%s:%d: a requirement row must be | ID | keyword | level | invariants "
                 "| rows |", name, line_no);
        return -1;
      }
      if (strncmp(r->id, "PDG-", 4) || (strcmp(r->keyword, "MUST") && strcmp(r->keyword, "SHOULD") &&
                                        strcmp(r->keyword, "MAY"))) {
        snprintf(err, cap, "%s:%d: '%s' '%s': not a requirement ID with MUST, SHOULD or MAY", name,
                 line_no, r->id, r->keyword);
        return -1;
      }
      if (parse_inv(c[3], &r->inv)) {
        snprintf(err, cap, "%s:%d: %s: invariants '%s' are not I1-I%d", name, line_no, r->id, c[3],
                 PD_INVARIANT_COUNT);
        return -1;
      }
      if (parse_rows(r, c[4])) {
        snprintf(err, cap, "%s:%d: %s: rows: scenario names (at most %d) or 'pending issue N'",
                 name, line_no, r->id, PD_REQ_MAX_ROWS);
        return -1;
      }
      d->n_req++;
    } else {
      pd_level_t *l = &d->lvl[d->n_lvl];
      if (k != 3 || d->n_lvl >= PD_LEVEL_MAX || copy(l->name, sizeof l->name, c[0]) ||
          copy(l->base, sizeof l->base, c[1]) || copy(l->claim, sizeof l->claim, c[2])) {
        snprintf(err, cap, "%s:%d: a level row must be | level | builds on | claim |", name, line_no);
        return -1;
      }
      d->n_lvl++;
    }
  }
  if (!d->n_req || !d->n_lvl) {
    snprintf(err, cap, "%s: no requirement index (sections 9.1 and 9.2)", name);
    return -1;
  }
  for (int i = 0; i < d->n_req; i++)
    if (strcmp(d->req[i].level, "-") && pd_reqdoc_level(d, d->req[i].level) < 0) {
      snprintf(err, cap, "%s: %s: no level '%s'", name, d->req[i].id, d->req[i].level);
      return -1;
    }
  for (int i = 0; i < d->n_lvl; i++) { /* every base exists, no loop */
    const char *b = d->lvl[i].base;
    int steps = 0;
    while (strcmp(b, "-")) {
      int j = pd_reqdoc_level(d, b);
      if (j < 0 || ++steps > d->n_lvl) {
        snprintf(err, cap, "%s: level %s: builds on '%s', %s", name, d->lvl[i].name, b,
                 j < 0 ? "which is no level" : "in a loop");
        return -1;
      }
      b = d->lvl[j].base;
    }
  }
  return 0;
}

int pd_reqdoc_load(pd_reqdoc_t *d, const char *path, char *err, size_t cap) {
  if (!path)
    return pd_reqdoc_parse(d, (const char *)pd_behaviour_doc, pd_behaviour_doc_len,
                           "built-in docs/pd-gateway-behaviour.md", err, cap);
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, cap, "%s: cannot read", path);
    return -1;
  }
  char *buf = malloc(1u << 20);
  size_t n = buf ? fread(buf, 1, (1u << 20) - 1, f) : 0;
  fclose(f);
  if (!buf) {
    snprintf(err, cap, "%s: out of memory", path);
    return -1;
  }
  int rc = pd_reqdoc_parse(d, buf, n, path, err, cap);
  free(buf);
  return rc;
}

int pd_reqdoc_level(const pd_reqdoc_t *d, const char *name) {
  for (int i = 0; i < d->n_lvl; i++)
    if (!strcmp(d->lvl[i].name, name)) return i;
  return -1;
}

int pd_reqdoc_in_level(const pd_reqdoc_t *d, int i, int l) {
  const char *b = d->lvl[l].name;
  for (int steps = 0; steps <= d->n_lvl && strcmp(b, "-"); steps++) {
    if (!strcmp(d->req[i].level, b)) return 1;
    int j = pd_reqdoc_level(d, b);
    if (j < 0) return 0;
    b = d->lvl[j].base;
  }
  return 0;
}

void pd_reqdoc_level_names(const pd_reqdoc_t *d, char *buf, size_t cap) {
  buf[0] = 0;
  for (int i = 0; i < d->n_lvl; i++)
    snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? ", " : "", d->lvl[i].name);
}

int pd_reqdoc_claims(const pd_reqdoc_t *d, int l, const pd_req_verdict_t *v, const int *present) {
  int must = 0;
  for (int i = 0; i < d->n_req; i++) {
    if (!pd_reqdoc_in_level(d, i, l)) continue;
    if (d->req[i].pending[0]) return 0; /* a level with rows still to come cannot be claimed */
    if (strcmp(d->req[i].keyword, "MUST")) continue;
    must++;
    if ((present && !present[i]) || v[i] != PD_REQ_MET) return 0;
  }
  return must > 0;
}

static const char *const word[PD_REQ_VERDICTS] = {"met", "not met", "not exercised"};

const char *pd_req_verdict_word(pd_req_verdict_t v) {
  return (unsigned)v < PD_REQ_VERDICTS ? word[v] : "not exercised";
}

void pd_req_inv_list(uint32_t mask, char *buf, size_t cap) {
  buf[0] = 0;
  for (int i = 1; i <= PD_INVARIANT_COUNT; i++)
    if (mask >> (i - 1) & 1u)
      snprintf(buf + strlen(buf), cap - strlen(buf), "%sI%d", buf[0] ? ", " : "", i);
}

static void add_note(char *note, size_t cap, const char *fmt, const char *a, const char *b) {
  size_t n = strlen(note);
  if (n + 8 >= cap) return;
  snprintf(note + n, cap - n, fmt, n ? "; " : "", a, b);
}

void pd_req_eval(const pd_req_t *r, const pd_req_row_t *rows, size_t n, pd_req_result_t *out) {
  memset(out, 0, sizeof *out);
  out->rows = r->n_rows;
  if (r->pending[0]) {
    out->v = PD_REQ_NX;
    snprintf(out->note, sizeof out->note, "%s: no rows yet", r->pending);
    return;
  }
  int not_met = 0, nx = 0;
  uint32_t unjudged = 0;
  char nx_note[512] = "", bad_note[512] = "";
  for (int k = 0; k < r->n_rows; k++) {
    const pd_req_row_t *w = NULL;
    for (size_t i = 0; i < n && !w; i++)
      if (rows[i].scenario && !strcmp(rows[i].scenario, r->rows[k])) w = &rows[i];
    if (!w) {
      nx++;
      add_note(nx_note, sizeof nx_note, "%s%s not run%s", r->rows[k], "");
      continue;
    }
    if (w->status == PD_CLI_SKIPPED) {
      out->skipped++;
      continue;
    }
    out->ran++;
    if (w->status == PD_CLI_ERROR || !w->exercised) {
      nx++;
      add_note(nx_note, sizeof nx_note, "%s%s %s", r->rows[k],
               w->status == PD_CLI_ERROR ? "errored" : "not exercised");
      continue;
    }
    uint32_t j = r->inv & w->judged;
    unjudged |= r->inv & ~w->judged;
    if (!j) {
      nx++;
      add_note(nx_note, sizeof nx_note, "%s%s: %s not judged there", r->rows[k], "its invariants");
      continue;
    }
    out->exercised++;
    uint32_t bad = w->got & j & ~w->allowed;
    if (bad) {
      char inv[160];
      pd_req_inv_list(bad, inv, sizeof inv);
      not_met++;
      add_note(bad_note, sizeof bad_note, "%s%s %s", r->rows[k], inv);
    }
  }
  if (not_met) {
    out->v = PD_REQ_NOT_MET;
    snprintf(out->note, sizeof out->note, "%s", bad_note);
  } else if (!out->ran) {
    out->v = PD_REQ_NX;
    snprintf(out->note, sizeof out->note, "%s",
             out->skipped ? "every row skipped (not the gateway's protocol)" : nx_note);
  } else if (nx) {
    out->v = PD_REQ_NX;
    snprintf(out->note, sizeof out->note, "%s", nx_note);
  } else {
    out->v = PD_REQ_MET;
  }
  if (unjudged && out->v != PD_REQ_NOT_MET) {
    char inv[160];
    pd_req_inv_list(unjudged, inv, sizeof inv);
    size_t m = strlen(out->note);
    snprintf(out->note + m, sizeof out->note - m, "%s%s not judged on some rows", m ? "; " : "",
             inv);
  }
}
