/* `pdref conform --level NAME` and `--list-levels` (docs/pd-gateway-behaviour.md section 2):
 * the rows of a conformance level, run as any conform rows, then one verdict per requirement
 * (met / not met / not exercised) and whether the level is claimed. cmd_conform.c calls these
 * hooks; the requirements come from cli/conform_level.h. */
#ifndef PD_CMD_CONFORM_LEVEL_H
#define PD_CMD_CONFORM_LEVEL_H
#include <stdio.h>

#include "conform_level.h"
#include "pd_conform.h"

struct cJSON;

typedef struct pd_conform_level {
  const char *name;     /* --level NAME, or NULL: an ordinary conform run */
  const char *doc_path; /* --requirements-doc FILE, or NULL: the copy built in */
  int list;             /* --list-levels */
  int json;             /* --json */
  pd_reqdoc_t *doc;
  int lvl;              /* the level's index in doc */
  pd_req_row_t *rows;   /* one per row run, scenario names owned */
  size_t n, cap;
} pd_conform_level_t;

enum { PD_CONFORM_LEVEL_OPT_LEVEL = 0, PD_CONFORM_LEVEL_OPT_LIST, PD_CONFORM_LEVEL_OPT_DOC };
#define PD_CONFORM_LEVEL_NONE (-1)  /* no --level: the run goes on as given */
#define PD_CONFORM_LEVEL_FILES (-2) /* --level: files hold the level's rows, the run goes on */

void pd_conform_level_usage(FILE *f);
/* One of the options above with its value (NULL for --list-levels). 0. */
int pd_conform_level_opt(pd_conform_level_t *L, int which, char *v);
/* After option parsing. paths: the directory the level's scenarios are read from (none:
 * "scenarios"). Returns an exit code (0 after --list-levels, 2 on bad usage, named on stderr),
 * PD_CONFORM_LEVEL_NONE, or PD_CONFORM_LEVEL_FILES with files[] (malloc'd) and *n_files set. */
int pd_conform_level_setup(pd_conform_level_t *L, char **paths, int n_paths, char **files,
                           int *n_files, int max);
/* A row that ran (or was skipped or errored); verdict a pd_cli_verdict_t. */
void pd_conform_level_row(pd_conform_level_t *L, const pd_scenario_t *s,
                          const pd_conform_result_t *r, int verdict);
/* The requirement table and the claim (text), or "level" and "requirements" in root (JSON). */
void pd_conform_level_print(const pd_conform_level_t *L);
void pd_conform_level_json(const pd_conform_level_t *L, struct cJSON *root);
/* The exit status: rows_exit when it is 2, else 0 when the level is claimed, 1 when not. */
int pd_conform_level_exit(const pd_conform_level_t *L, int rows_exit);
void pd_conform_level_free(pd_conform_level_t *L);

#endif
