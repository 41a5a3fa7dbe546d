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

/* The one vocabulary of verdicts (docs/scenarios.md "Reading the output", docs/conformance.md):
 * sim run, conform and the report print these words, count them in their totals and take
 * their exit status from them. Beside the word a row shows its own verdict: "pass" or the
 * invariants it violated. */
typedef enum pd_cli_verdict {
  PD_CLI_AS_EXPECTED = 0, /* exercised, and its own verdict is its expectation */
  PD_CLI_LIMIT,           /* as expected, and what it violates is a deployment limit the
                           * scenario declares ("deployment_limit"): no gateway can pass it */
  PD_CLI_UNEXPECTED,      /* its own verdict is not its expectation */
  PD_CLI_NOT_EXERCISED,   /* it tested nothing: a fault never fired, a request reached no
                           * worker, the mocks or the machine could not drive it */
  PD_CLI_SKIPPED,         /* not run (why is said): the mode does not speak the workers'
                           * protocol, the scenario cannot run on sockets */
  PD_CLI_ERROR,           /* the file did not load, or the run could not be set up */
  PD_CLI_VERDICTS
} pd_cli_verdict_t;

/* The word as printed in the table ("as expected", "deployment limit", "UNEXPECTED", "not
 * exercised", "skipped", "error"), and as JSON has it in "status" (lowercase). */
const char *pd_cli_verdict_word(pd_cli_verdict_t v);
const char *pd_cli_verdict_json(pd_cli_verdict_t v);
/* The totals line: "CMD: N as expected, N deployment limit, N UNEXPECTED, N not exercised,
 * N skipped" (", N errors" when any; then a line saying so when no row was exercised: none as
 * expected, a deployment limit or UNEXPECTED). */
void pd_cli_verdict_summary(const char *cmd, const int *count);
/* The totals into a JSON document: "as_expected", "deployment_limit", "unexpected",
 * "not_exercised", "skipped", "errors" (with "rows", taking it). */
void pd_cli_verdict_summary_json(struct cJSON *root, struct cJSON *rows, const int *count);
/* The exit status the totals give: 2 after an error, 1 a row UNEXPECTED, a row not
 * exercised (unless allow_nx) or no row exercised at all (a run that tested nothing), else 0. */
int pd_cli_verdict_exit(const int *count, int allow_nx);

/* One scenario x mode row of `pdref sim run`. */
typedef struct pd_cli_row {
  const pd_scenario_t *s;
  pd_mode_t mode;
  uint64_t seed, tie_seed; /* the run's (a --seed/--tie-seed given, else the scenario's) */
  uint32_t got, want;
  int want_set, matched;
  int exercised; /* every fault entry fired and some request reached a worker */
  int declared;  /* the scenario declares this mode unexercised ("unexercised") */
  pd_cli_verdict_t verdict;
  const char *skip_why; /* PD_CLI_SKIPPED: why (the row has no run) */
  uint64_t hash;
  pd_world_stats_t st;
  pd_metrics_t mx;      /* the first run's cost (pd_metrics.h) */
  const char *trace;    /* where this row's trace was written, or NULL */
} pd_cli_row_t;

/* A sim run row's word from its run (cmd_sim.c): limit_mask, the scenario's deployment limits
 * for the row's mode. */
pd_cli_verdict_t pd_cli_sim_verdict(const pd_cli_row_t *r, uint32_t limit_mask);

/* How rows are shown, and what was counted. */
typedef struct pd_cli_rows {
  int json, only_unexpected, quiet, metrics, has_seed;
  int count[PD_CLI_VERDICTS]; /* rows per verdict */
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
/* A file none of whose rows ran (the mode asked for does not speak its workers' protocol):
 * a skipped row with why, counted. */
void pd_cli_rows_skip(pd_cli_rows_t *o, const pd_scenario_t *s, int mode, const char *why);
/* A file that could not be read or run: file, and msg as "file:line: message". Counted as an
 * error, printed as an error row (never filtered out) and on stderr. */
void pd_cli_rows_error(pd_cli_rows_t *o, const char *file, const char *scenario, int mode,
                       const char *msg);
/* End: the matrix and the summary line (text) or the JSON document; frees what o holds.
 * With json_out, the JSON document (every row) is written to that file as well.
 * Returns the exit code (pd_cli_verdict_exit; 2 also when json_out cannot be written). */
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
