/* cli_rows: what the verdict-printing subcommands of the pdref binary share (sim run, sim
 * explore, explore merge, conform): invariant sets as "I2 orphan-leg, I3 stranded-slot" in
 * text and as arrays in JSON (names from pd_invariant_name, sim/pd_scenario.c: one table);
 * and the rows, summary matrix and summary line of `pdref sim run` (docs/scenarios.md
 * "Reading the output"). Linked into pdref only (it needs the simulator). */
#ifndef PD_CLI_ROWS_H
#define PD_CLI_ROWS_H
#include <stddef.h>
#include <stdint.h>

#include "pd_metrics.h"
#include "pd_world.h"

struct cJSON;

/* The set bits of mask as "I2 orphan-leg, I3 stranded-slot" ("" for 0); stops before
 * overflowing buf (PD_CLI_INV_TEXT_BYTES holds every invariant). */
#define PD_CLI_INV_TEXT_BYTES 640
void pd_cli_inv_text(uint32_t mask, char *buf, size_t cap);
/* Add key: ["I2", "I3"] and names_key: ["orphan-leg", "stranded-slot"] (names_key NULL:
 * only the codes) to object j. */
void pd_cli_inv_add(struct cJSON *j, const char *key, const char *names_key, uint32_t mask);
/* A checker reason "I3 prefill slot ..." as "I3 stranded-slot: prefill slot ..." (the first
 * word that is an invariant's ID gets its name: "request 0: I3 stranded-slot: ..."); a text
 * without one is copied as it is. */
void pd_cli_reason_text(const char *reason, char *buf, size_t cap);

/* One scenario x mode row of `pdref sim run`. */
typedef struct pd_cli_row {
  const pd_scenario_t *s;
  pd_mode_t mode;
  uint64_t seed, tie_seed; /* the run's (a --seed/--tie-seed given, else the scenario's) */
  uint32_t got, want;
  int want_set, matched;
  int exercised; /* every fault entry fired and some request reached a worker */
  int declared;  /* the scenario declares this mode unexercised ("unexercised") */
  uint64_t hash;
  pd_world_stats_t st;
  pd_metrics_t mx;      /* the first run's cost (pd_metrics.h) */
  const char *trace;    /* where this row's trace was written, or NULL */
} pd_cli_row_t;

/* How rows are shown, and what was counted. */
typedef struct pd_cli_rows {
  int json, only_unexpected, quiet, metrics, has_seed;
  int passed, failed, unexercised, errors;
  struct cJSON *arr;  /* --json: the rows so far */
  const char *json_out;    /* --json-out FILE: every row's JSON there as well (NULL: no) */
  struct cJSON *file_arr;  /* --json-out: the rows so far, none filtered out */
  struct pd_cli_matrix *matrix; /* text: one cell per row */
  const char *prog;   /* the program as run, which replay commands begin with (NULL: pdref) */
} pd_cli_rows_t;

/* Start: the header line (text, unless quiet or only_unexpected). 0, or PD_ERR_NOMEM. */
int pd_cli_rows_begin(pd_cli_rows_t *o);
/* One row: counted, printed (text or JSON) unless filtered out, and kept for the matrix. */
void pd_cli_rows_add(pd_cli_rows_t *o, const pd_cli_row_t *r);
/* A file that could not be read or run: file, and msg as "file:line: message". Counted as an
 * error, printed as an error row (never filtered out) and on stderr. */
void pd_cli_rows_error(pd_cli_rows_t *o, const char *file, const char *scenario, int mode,
                       const char *msg);
/* End: the matrix and the summary line (text) or the JSON document; frees what o holds.
 * With json_out, the JSON document (every row) is written to that file as well.
 * Returns the exit code: 2 after an error row or a json_out that cannot be written, 1 a row not as expected or not exercised,
 * else 0. */
int pd_cli_rows_end(pd_cli_rows_t *o);

/* The summary matrix (cli_matrix.c): one line per scenario, one character per mode. */
typedef struct pd_cli_matrix pd_cli_matrix_t;
pd_cli_matrix_t *pd_cli_matrix_new(void);
/* The cell of file's scenario under mode (-1: every mode): c is one of the legend's
 * characters. Consecutive rows of one file share a line. 0, or PD_ERR_NOMEM (dropped). */
int pd_cli_matrix_set(pd_cli_matrix_t *m, const char *file, const char *scenario, int mode,
                      char c);
/* Print the legend and the matrix (two scenarios a line, within 100 columns), then free it. */
void pd_cli_matrix_print(pd_cli_matrix_t *m);
void pd_cli_matrix_del(pd_cli_matrix_t *m);

#endif
