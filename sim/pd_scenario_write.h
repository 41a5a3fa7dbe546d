/* pd_scenario_write: a scenario back to the file format of docs/scenarios.md, the inverse of
 * pd_scenario_parse. Keys whose value equals the loader's default are left out, so a written
 * file reads like a hand-written one; parsing the text gives back the same struct (tested in
 * tests/test_explore.c). Used by the explorer to save shrunk cases. */
#ifndef PD_SCENARIO_WRITE_H
#define PD_SCENARIO_WRITE_H
#include <stddef.h>

#include "pd_scenario.h"

/* Render s as indented JSON (two spaces, a final newline). On success *out is a NUL-terminated
 * heap string of *len bytes the caller releases with free(). Returns 0, PD_ERR_INVAL (NULL
 * arguments, or a field outside what the loader accepts, e.g. an unknown enum value) or
 * PD_ERR_NOMEM. */
int pd_scenario_write_json(const pd_scenario_t *s, char **out, size_t *len);

/* Write the rendering to `path` (replacing the file). PD_ERR_IO with "<path>: <why>" in err
 * when the file cannot be written; otherwise as pd_scenario_write_json. */
int pd_scenario_save(const pd_scenario_t *s, const char *path, char *err, size_t errlen);

#endif
