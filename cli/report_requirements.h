/* `pdref report --requirements [NAME=]RESULT...`: the requirement matrix of
 * docs/pd-gateway-behaviour.md section 10: one line per requirement, one column per gateway,
 * each cell met / NOT MET / n/e (not exercised) / - (not in that run), from `conform --level
 * --json` results (their "requirements"), other `conform --json` results and `sim run --json`
 * results (one column per mode; evaluated from the rows with pd_req_eval). */
#ifndef PD_REPORT_REQUIREMENTS_H
#define PD_REPORT_REQUIREMENTS_H
#include <stdio.h>

/* args: "[NAME=]FILE" each. doc_path NULL: the built-in document. Writes the table (or JSON)
 * to out. 0, or 2 with the reason on stderr. */
int pd_report_requirements(FILE *out, char **args, int n, const char *doc_path, int json);

struct pd_report;
/* The matrix as a section of the HTML page (`pdref report`): one column per mode of every
 * sim run and conform input of r, the built-in document's requirements as rows. Writes
 * nothing when r has no such input. *n_req, *n_col: the table's size. 0, or 2 (said on
 * stderr). */
int pd_report_requirements_html(FILE *out, const struct pd_report *r, size_t *n_req, size_t *n_col);

#endif
