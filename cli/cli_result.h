/* cli_result: one typed result record per verdict row, its parser and its renderers. `pdref
 * sim run` (cli_rows.c) and `pdref conform` (cmd_conform.c) fill one per row and render it with
 * pd_cli_result_json (JSON) and pd_cli_result_text_head (text), so the keys they share are the
 * same keys, in the same order, with the same types (docs/sim-run.schema.json,
 * docs/conform.schema.json). Each command then adds the keys only it has (sim run: trace_hash,
 * events, metrics; conform: judged, legs, quiescent). `pdref report` reads each row back into
 * the record with pd_cli_result_parse and draws its HTML from it (cli/report_matrix.c: the
 * third renderer; its requirement matrix and swimlanes read the record too). */
#ifndef PD_CLI_RESULT_H
#define PD_CLI_RESULT_H
#include <stdint.h>

#include "cli_rows.h"

struct cJSON;

typedef struct pd_cli_result {
  const char *scenario, *file, *mode; /* scenario NULL: a file that did not load */
  pd_cli_verdict_t verdict;
  /* the row's own verdict and its expectation (a run; not for skipped and error rows) */
  uint32_t violated, expected;
  int expected_set; /* 0: the scenario sets no expectation for the mode ("expected": null) */
  int matched;
  int exercised;    /* 1/0; -1 not known (the row did not run): the key is left out */
  const char *reason;      /* the first violation's words ("" none); a skipped row: why */
  const char *error;       /* an error row: "file:line: message" (NULL otherwise) */
  const char *limit_why;   /* PD_CLI_LIMIT: the deployment limit the scenario declares */
  const char *declared_unexercised; /* the scenario declares the mode unexercised: why */
  const char *never_fired;          /* fault entries that never fired ("" / NULL none) */
  uint64_t seed, tie_seed;
  int has_tie_seed;
  const char *replay; /* the command that replays the row, as the user invoked pdref */
  /* what the row exercised (has_counts: the row ran) */
  int has_counts;
  double faults_exercised, faults_total, requests, requests_served;
  int has_ttft; /* the run measures TTFT (the simulator): "ttft_ms_mean" is written */
  double ttft_ms_mean; /* NAN: no request reached a first token ("ttft_ms_mean": null) */
  /* filled by pd_cli_result_parse only (zero when a command fills the record from its run) */
  const struct cJSON *src; /* the row parsed: the keys only one command writes (sim run's
                            * metrics, conform's notes) are read from it */
  int n_ids;    /* IDs in "violated" (those the mask cannot hold too: n_ids > 0 is a violation) */
  int has_seed; /* "seed" was there (seed is 0 otherwise) */
} pd_cli_result_t;

/* The record's JSON object: scenario, file, mode, status, violated, violated_names,
 * expected, matched, exercised, seed, tie_seed, replay, reason, deployment_limit,
 * declared_unexercised, never_fired, faults_exercised, faults_total, requests,
 * requests_served, ttft_ms_mean; a skipped row only head, status and reason; an error row
 * file, (scenario, mode,) status, error. NULL when out of memory. */
struct cJSON *pd_cli_result_json(const pd_cli_result_t *r);

/* The record back from its JSON: a row of `sim run --json` or `conform --json` (any command's
 * row that pd_cli_result_json wrote, and the older shapes `pdref report` reads: "violated"
 * and "expected" as comma strings, no "status" but "matched"). Strings point into row (r is
 * valid while row lives); a key absent leaves its field as pd_cli_result_json leaves it out
 * (NULL, 0, -1 for exercised, has_counts/has_ttft/has_tie_seed 0). The verdict: "status" as
 * pd_cli_verdict_json words it; else "error" present: an error; else "matched" true/false:
 * as expected/UNEXPECTED; else UNEXPECTED. IDs beyond PD_INVARIANT_COUNT count in n_ids
 * only. "status" may also be the text's word ("UNEXPECTED"). 0, or -1 when row is no JSON
 * object (r zeroed, UNEXPECTED). */
int pd_cli_result_parse(const struct cJSON *row, pd_cli_result_t *r);

/* The record's text renderer, the table's first columns: scenario (or the file's base name),
 * mode, the verdict word and the row's own verdict ("pass", or the violated invariants with
 * their names), no newline; a skipped row "-  (why)" and the newline. sim run and conform
 * both start their lines with it. */
void pd_cli_result_text_head(const pd_cli_result_t *r);

/* A seed into j under key: a JSON number up to 2^53 (exact in a double), a decimal string
 * above it (the scenario files' rule, docs/scenarios.md). */
void pd_cli_result_add_seed(struct cJSON *j, const char *key, uint64_t seed);

#endif
