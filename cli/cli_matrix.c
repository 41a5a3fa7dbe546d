/* The summary matrix of `pdref sim run` (cli_rows.h): a line per scenario, a character per
 * mode, two scenarios side by side so that a library fits a screen 100 columns wide. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_rows.h"
#include "pd_dispatch.h"
#include "pd_err.h"

#define NAME_COLS 39 /* a longer name is cut, its last shown character '~' */
#define LINE_COLS 100

typedef struct cell_line {
  uint64_t file; /* a hash of the scenario's path: its rows share the line */
  char name[NAME_COLS + 1];
  char cell[PD_MODE_COUNT];
} cell_line_t;

struct pd_cli_matrix {
  cell_line_t *lines;
  size_t n, cap;
  int used[PD_MODE_COUNT]; /* a mode with at least one row: it gets a column */
};

pd_cli_matrix_t *pd_cli_matrix_new(void) { return calloc(1, sizeof(pd_cli_matrix_t)); }

void pd_cli_matrix_del(pd_cli_matrix_t *m) {
  if (!m) return;
  free(m->lines);
  free(m);
}

/* FNV-1a 64 of the text. */
static uint64_t hash_text(const char *t) {
  uint64_t h = 1469598103934665603ull;
  for (; *t; t++) h = (h ^ (unsigned char)*t) * 1099511628211ull;
  return h;
}

/* The line of the file's scenario: the last one when it is the same file (rows come in
 * order). */
static cell_line_t *line_of(pd_cli_matrix_t *m, const char *file, const char *scenario) {
  uint64_t key = hash_text(file);
  char name[NAME_COLS + 1];
  snprintf(name, sizeof name, "%s", scenario);
  if (strlen(scenario) > NAME_COLS) name[NAME_COLS - 1] = '~';
  if (m->n && m->lines[m->n - 1].file == key) return &m->lines[m->n - 1];
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 128;
    cell_line_t *l = realloc(m->lines, cap * sizeof *l);
    if (!l) return NULL;
    m->lines = l;
    m->cap = cap;
  }
  cell_line_t *l = &m->lines[m->n++];
  l->file = key;
  memcpy(l->name, name, sizeof name);
  memset(l->cell, ' ', sizeof l->cell);
  return l;
}

int pd_cli_matrix_set(pd_cli_matrix_t *m, const char *file, const char *scenario, int mode,
                      char c) {
  cell_line_t *l = line_of(m, file, scenario);
  if (!l) return PD_ERR_NOMEM;
  if (mode < 0 || mode >= PD_MODE_COUNT) { /* an error before any mode ran: every column */
    memset(l->cell, c, sizeof l->cell);
    return 0;
  }
  l->cell[mode] = c;
  m->used[mode] = 1;
  return 0;
}

static const char mode_letter[PD_MODE_COUNT] = {'j', 'p', 'm', 'r', 'v', 'k', 'l'};

static void print_head(const pd_cli_matrix_t *m) {
  int col = printf("matrix: a line per scenario, a column per mode:");
  for (int k = 0; k < PD_MODE_COUNT; k++) {
    if (!m->used[k]) continue;
    int w = (int)strlen(pd_mode_name((pd_mode_t)k)) + 3;
    if (col + w > LINE_COLS) col = printf("\n       ");
    col += printf(" %c %s", mode_letter[k], pd_mode_name((pd_mode_t)k));
  }
  printf("\n        . as expected: pass   x as expected: the violations it shows   L deployment "
         "limit\n        ! UNEXPECTED   ? not exercised   - skipped   E error (file or run)   "
         "blank: no such row\n");
}

/* One scenario's part of a line: name, cells of the used modes. */
static void print_cells(const pd_cli_matrix_t *m, const cell_line_t *l) {
  printf("%-*s ", NAME_COLS, l->name);
  for (int k = 0; k < PD_MODE_COUNT; k++)
    if (m->used[k]) putchar(l->cell[k]);
}

void pd_cli_matrix_print(pd_cli_matrix_t *m) {
  int cols = 0;
  for (int k = 0; k < PD_MODE_COUNT; k++) cols += m->used[k];
  if (!cols) m->used[PD_MODE_REFERENCE] = cols = 1; /* only files that did not load */
  int width = NAME_COLS + 1 + cols + 3, per_line = LINE_COLS / width;
  if (per_line < 1) per_line = 1;
  size_t rows = (m->n + (size_t)per_line - 1) / (size_t)per_line;
  print_head(m);
  for (int c = 0; c < per_line && m->n; c++) { /* the column header */
    printf("%-*s ", NAME_COLS, c ? "" : "scenario");
    for (int k = 0; k < PD_MODE_COUNT; k++)
      if (m->used[k]) putchar(mode_letter[k]);
    printf(c + 1 < per_line && (size_t)c + 1 < m->n ? "   " : "\n");
    if ((size_t)c + 1 >= m->n) break;
  }
  for (size_t r = 0; r < rows; r++) { /* down the first column, then the second */
    for (int c = 0; c < per_line; c++) {
      size_t i = (size_t)c * rows + r;
      if (i >= m->n) break;
      if (c) printf("   ");
      print_cells(m, &m->lines[i]);
    }
    printf("\n");
  }
  pd_cli_matrix_del(m);
}
