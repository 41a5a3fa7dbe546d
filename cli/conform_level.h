/* conform_level: the requirements and conformance levels of docs/pd-gateway-behaviour.md
 * (its section 9 tables, built into the binary: cmake writes the document as bytes into
 * gen/pd_behaviour_doc.c), and the per-requirement verdict from verdict rows (met / not met /
 * not exercised, section 2 of that document). Used by `pdref conform --level`
 * (cli/cmd_conform_level.c) and `pdref report --requirements` (cli/report_requirements.c). */
#ifndef PD_CONFORM_LEVEL_H
#define PD_CONFORM_LEVEL_H
#include <stddef.h>
#include <stdint.h>

#define PD_REQ_MAX 128
#define PD_REQ_MAX_ROWS 48
#define PD_LEVEL_MAX 16
#define PD_REQ_NAME_BYTES 96

typedef struct pd_req {
  char id[48];
  char keyword[8];  /* MUST, SHOULD, MAY */
  char level[32];   /* the lowest level that contains it; "-" for none */
  uint32_t inv;     /* bit i-1 = invariant Ii */
  char pending[48]; /* "pending issue 25", or "" */
  int n_rows;
  char rows[PD_REQ_MAX_ROWS][PD_REQ_NAME_BYTES];
} pd_req_t;

typedef struct pd_level {
  char name[32], base[32]; /* base: the level it builds on, "-" for none */
  char claim[256];
} pd_level_t;

typedef struct pd_reqdoc {
  char path[256]; /* where it was read from ("built in" for the embedded copy) */
  int n_req, n_lvl;
  pd_req_t req[PD_REQ_MAX];
  pd_level_t lvl[PD_LEVEL_MAX];
} pd_reqdoc_t;

/* Parse the section 9 tables of text (len bytes). 0, or -1 with err "NAME:LINE: why". */
int pd_reqdoc_parse(pd_reqdoc_t *d, const char *text, size_t len, const char *name, char *err,
                    size_t cap);
/* path NULL: the copy built into the binary. 0, or -1 with err set. */
int pd_reqdoc_load(pd_reqdoc_t *d, const char *path, char *err, size_t cap);
/* The index of level name, or -1. */
int pd_reqdoc_level(const pd_reqdoc_t *d, const char *name);
/* 1 when requirement i belongs to level l (its own level is l or one l builds on). */
int pd_reqdoc_in_level(const pd_reqdoc_t *d, int i, int l);
/* The level names, "core, cancel, admission". */
void pd_reqdoc_level_names(const pd_reqdoc_t *d, char *buf, size_t cap);

/* One verdict row as the requirement sees it. status is a pd_cli_verdict_t (cli_rows.h). */
typedef struct pd_req_row {
  const char *scenario;
  int status;
  int exercised;    /* it ran and tested something (its faults fired, requests served) */
  uint32_t got;     /* the invariants it violated */
  uint32_t judged;  /* the invariants the run could judge (the simulator: all) */
  uint32_t allowed; /* what the reference itself is expected to violate on it */
} pd_req_row_t;

typedef enum pd_req_verdict { PD_REQ_MET = 0, PD_REQ_NOT_MET, PD_REQ_NX, PD_REQ_VERDICTS } pd_req_verdict_t;

typedef struct pd_req_result {
  pd_req_verdict_t v;
  int rows, ran, exercised, skipped; /* of the requirement's rows: listed, run, exercised, skipped */
  char note[768];                    /* why (not met: the rows and invariants) */
} pd_req_result_t;

/* "met", "not met", "not exercised". */
const char *pd_req_verdict_word(pd_req_verdict_t v);
/* The verdict of r from rows (found by scenario name; a listed row absent from rows counts as
 * not run, so it is not exercised). */
void pd_req_eval(const pd_req_t *r, const pd_req_row_t *rows, size_t n, pd_req_result_t *out);
/* 1 when a gateway with verdicts v[i] for requirement i (present[i] 0: not in its run) claims
 * level l: every MUST of the level met, and no requirement of the level pending. */
int pd_reqdoc_claims(const pd_reqdoc_t *d, int l, const pd_req_verdict_t *v, const int *present);
/* "I2, I3" for a mask. */
void pd_req_inv_list(uint32_t mask, char *buf, size_t cap);

#endif
