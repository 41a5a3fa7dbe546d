/* Scenario-reader test helpers: parse a document written with single quotes (turned into
 * double quotes, so C strings stay readable) and expect the reader's exact error. */
#ifndef PDT_SCENARIO_H
#define PDT_SCENARIO_H
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_scenario.h"
#include "pd_scenario_write.h"
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

/* Parse src (single quotes) into s, write it, parse the text back into t and write that:
 * the second text must equal the first (a fixpoint). Returns the first text (the caller
 * frees it), or NULL after failing the test. */
static inline char *pdt_scenario_round_trip(const char *src, pd_scenario_t *s, pd_scenario_t *t) {
  char err[PDT_SCENARIO_ERR_BYTES], *txt = NULL, *txt2 = NULL;
  size_t len = 0, len2 = 0;
  if (!s || !t || parse_q(s, src, err) != 0 || pd_scenario_write_json(s, &txt, &len) != 0) {
    PDT_TRUE(0);
    free(txt);
    return NULL;
  }
  PDT_EQ_INT(pd_scenario_parse(t, "back.json", txt, len, err, sizeof err), 0);
  PDT_EQ_STR(err, "");
  PDT_EQ_INT(pd_scenario_write_json(t, &txt2, &len2), 0);
  PDT_EQ_STR(txt2, txt); /* the text is a fixpoint */
  free(txt2);
  return txt;
}

#endif
