/* Scenario-reader test helpers: parse a document written with single quotes (turned into
 * double quotes, so C strings stay readable) and expect the reader's exact error. */
#ifndef PDT_SCENARIO_H
#define PDT_SCENARIO_H
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_scenario.h"
#include "pdt.h"

#define PDT_SCENARIO_ERR_BYTES 1024
#define PAIR "'workers':[{'name':'p0','role':'prefill'},{'name':'d0','role':'decode'}]"
#define MIN_DOC(extra) "{'name':'t'," PAIR ",'expect':{}" extra "}"

static inline int parse_q(pd_scenario_t *s, const char *src, char *err) {
  size_t n = strlen(src);
  char *t = malloc(n + 1);
  if (!t) return PD_ERR_NOMEM;
  for (size_t i = 0; i <= n; i++) t[i] = src[i] == '\'' ? '"' : src[i];
  int rc = pd_scenario_parse(s, "scen.json", t, n, err, PDT_SCENARIO_ERR_BYTES);
  free(t);
  return rc;
}

static inline void expect_error(const char *src, const char *msg) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[PDT_SCENARIO_ERR_BYTES];
  if (!s) return;
  PDT_EQ_INT(parse_q(s, src, err), PD_ERR_FIELD);
  PDT_EQ_STR(err, msg);
  free(s);
}

#endif
