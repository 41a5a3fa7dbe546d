/* Helpers for the tests that start real pdref processes (test_conform*.c, test_mock.c): where
 * the built `pdref` is, a library scenario by name, conform options for pdref's gateway. */
#ifndef PDT_NET_H
#define PDT_NET_H
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pd_conform.h"
#include "pd_scenario.h"
#include "pdt.h"

#ifndef PD_SOURCE_DIR
#define PD_SOURCE_DIR "."
#endif

/* The pdref binary next to the test binary: 0 when it is there and executable. */
static inline int pdt_pdref_path(char *out, size_t cap) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = 0;
  char *slash = strrchr(self, '/');
  if (!slash) return -1;
  *slash = 0;
  snprintf(out, cap, "%s/pdref", self);
  return access(out, X_OK);
}

/* scenarios/NAME.json, loaded (malloc'd; free()), or NULL with the reason on stderr. */
static inline pd_scenario_t *pdt_load_scenario(const char *name) {
  pd_scenario_t *s = malloc(sizeof *s);
  char path[1024], err[512];
  snprintf(path, sizeof path, "%s/scenarios/%s.json", PD_SOURCE_DIR, name);
  if (s && pd_scenario_load(s, path, err, sizeof err) == 0) return s;
  fprintf(stderr, "test: %s\n", s ? err : "out of memory");
  free(s);
  return NULL;
}

/* A scenario written from JSON text to a fresh directory under /tmp (the mocks read the file)
 * and loaded: malloc'd (free()), or NULL with the reason on stderr. pdt_drop_scenario removes
 * the file and its directory. */
static inline pd_scenario_t *pdt_scenario_from_json(const char *json) {
  char dir[] = "/tmp/pdt-scn-XXXXXX", path[64], err[512];
  if (!mkdtemp(dir)) return NULL;
  snprintf(path, sizeof path, "%s/s.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  fputs(json, f);
  fclose(f);
  pd_scenario_t *s = malloc(sizeof *s);
  if (s && pd_scenario_load(s, path, err, sizeof err) == 0) return s;
  fprintf(stderr, "test: %s\n", s ? err : "out of memory");
  free(s);
  return NULL;
}

static inline void pdt_drop_scenario(pd_scenario_t *s) {
  if (!s) return;
  unlink(s->path);
  char *slash = strrchr(s->path, '/');
  if (slash) {
    *slash = 0;
    rmdir(s->path);
  }
  free(s);
}

/* Options for `pdref conform` against `bin gateway --mode mode` with the mode's settings
 * ({pdref_gateway_args}), at timeout scale 0.01; cmd (cap bytes) holds the command line. */
static inline void pdt_conform_opts(pd_conform_opts_t *o, const char *bin, const char *mode,
                                    char *cmd, size_t cap) {
  pd_conform_opts_default(o);
  snprintf(cmd, cap,
           "exec %s gateway --mode %s {prefill_args} {decode_args} --listen 127.0.0.1:{port} "
           "{pdref_gateway_args}",
           bin, mode);
  o->gateway_cmd = cmd;
  o->pdref_bin = bin;
  pd_conform_set_label(o, mode);
  o->scale = 0.01;
  o->slack_ms = 100; /* sanitizer builds are slow to notice a hang-up */
}

/* One library row driven over real sockets: the pdref binary, the scenario, the conform
 * options for `pdref gateway --mode MODE` (pdt_conform_opts) and the result. The options point
 * into the struct (bin, cmd): keep it where it was opened. */
typedef struct pdt_row {
  char bin[PATH_MAX + 8], cmd[PATH_MAX + 512];
  pd_scenario_t *s;
  pd_conform_opts_t o;
  pd_conform_result_t r;
} pdt_row_t;

/* scenarios/NAME.json against pdref's gateway in MODE at timeout scale SCALE. 0; -1 when pdref
 * is not built (nothing to judge) or the scenario does not load (a failed assertion): the
 * caller returns, nothing to free. Otherwise pdt_row_close frees. */
static inline int pdt_row_open(pdt_row_t *x, const char *name, const char *mode, double scale) {
  x->s = NULL;
  if (pdt_pdref_path(x->bin, sizeof x->bin) != 0) {
    fprintf(stderr, "test: %s not built, %s skipped\n", x->bin, name);
    return -1;
  }
  x->s = pdt_load_scenario(name);
  PDT_TRUE(x->s != NULL);
  if (!x->s) return -1;
  pdt_conform_opts(&x->o, x->bin, mode, x->cmd, sizeof x->cmd);
  x->o.scale = scale;
  return 0;
}

/* Run the row: the runner's return and the row's status are asserted (0, ran); 0 when both
 * hold. */
static inline int pdt_row_run(pdt_row_t *x) {
  int rc = pd_conform_run(x->s, &x->o, &x->r);
  PDT_EQ_INT(rc, 0);
  PDT_EQ_INT(x->r.status, PD_CONFORM_RAN);
  return rc == 0 && x->r.status == PD_CONFORM_RAN ? 0 : -1;
}

static inline void pdt_row_close(pdt_row_t *x) {
  free(x->s);
  x->s = NULL;
}

/* pdt_row_open, then pdt_row_run: 0 when the row ran (pdt_row_close frees); -1 when it did
 * not, with nothing left to free. */
static inline int pdt_row_open_run(pdt_row_t *x, const char *name, const char *mode, double scale) {
  if (pdt_row_open(x, name, mode, scale) != 0) return -1;
  if (pdt_row_run(x) == 0) return 0;
  pdt_row_close(x);
  return -1;
}

#endif
