/* `pdref sim new NAME [--out FILE|-] [--force]`: write a template scenario to start from.
 *
 * JSON has no comments and the loader rejects unknown keys, so the template carries no
 * "_comment" keys: it documents itself instead. Its `description` says what the scenario
 * shows and where every key is described; the keys a new scenario most often changes are
 * written out with their default values (a value equal to the default reads like "you may
 * change this"); and it is a real scenario — seed finding 1, a decode 503 before the first
 * token — whose `expect` holds the verdicts `pdref sim run` gives it in each SGLang mode.
 * Before writing, the text is loaded with the same loader as `sim run`, so a template that
 * would not load is never written (tests/schema_test.py also runs it and checks the schema). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "pd_err.h"
#include "pd_scenario.h"

#define CMD "pdref sim new"
#define NAME_MAX_BYTES 95 /* pd_scenario_t.name holds 95 bytes and a NUL */

/* %s is the scenario name (checked: letters, digits, '.', '_', '-', so no JSON escaping). */
static const char template_fmt[] =
    "{\n"
    "  \"name\": \"%s\",\n"
    "  \"description\": \"Replace with what this scenario shows. As written: whichever decode "
    "worker gets request 0's first leg answers 503 before any token (smg seed finding 1); a "
    "gateway should retry on the other pair and leave nothing held. Keys: docs/scenarios.md; "
    "schema: docs/scenario.schema.json\",\n"
    "  \"tags\": [\"template\"],\n"
    "  \"config\": {\n"
    "    \"seed\": 1,\n"
    "    \"prefill_policy\": \"round_robin\",\n"
    "    \"decode_policy\": \"round_robin\",\n"
    "    \"max_attempts\": 0,\n"
    "    \"deadline_ms\": 120000,\n"
    "    \"grace_ms\": 1000,\n"
    "    \"net_us\": 100,\n"
    "    \"bootstrap_timeout_ms\": 300000,\n"
    "    \"waiting_timeout_ms\": 300000\n"
    "  },\n"
    "  \"workers\": [\n"
    "    {\"name\": \"p0\", \"role\": \"prefill\", \"forward_ms\": 20, \"kv_ms\": 5},\n"
    "    {\"name\": \"p1\", \"role\": \"prefill\", \"forward_ms\": 20, \"kv_ms\": 5},\n"
    "    {\"name\": \"d0\", \"role\": \"decode\", \"first_token_ms\": 10, \"token_ms\": 5, "
    "\"faults\": []},\n"
    "    {\"name\": \"d1\", \"role\": \"decode\", \"first_token_ms\": 10, \"token_ms\": 5, "
    "\"faults\": []}\n"
    "  ],\n"
    "  \"workload\": {\n"
    "    \"requests\": 4,\n"
    "    \"route\": \"/generate\",\n"
    "    \"stream\": true,\n"
    "    \"logprob\": false,\n"
    "    \"tokens\": 8,\n"
    "    \"interval_ms\": 100,\n"
    "    \"disconnect_at_ms\": 0\n"
    "  },\n"
    "  \"faults\": [\n"
    "    {\"role\": \"decode\", \"request\": 0, \"leg\": 1, \"kind\": \"status\", \"status\": 503}\n"
    "  ],\n"
    "  \"expect\": {\n"
    "    \"joined\": [\"I3\"],\n"
    "    \"pr1150\": [\"I2\", \"I3\"],\n"
    "    \"minilb\": [\"I3\", \"I14\"],\n"
    "    \"reference\": \"pass\"\n"
    "  },\n"
    "  \"unexercised\": {}\n"
    "}\n";

static void usage(FILE *f) {
  fprintf(f,
          "usage: pdref sim new NAME [--out FILE|-] [--force]\n"
          "Writes a template scenario named NAME to NAME.json (or FILE; '-' = stdout) that\n"
          "loads and passes as written: `pdref sim run NAME.json --mode all`. Edit it from\n"
          "there. JSON has no comments and the loader rejects unknown keys, so the template\n"
          "documents itself: its description says what it shows, the keys most scenarios\n"
          "change are written out with their defaults, and its expect holds the verdicts each\n"
          "mode gives it. Every key: docs/scenarios.md; editors validate and complete with\n"
          "docs/scenario.schema.json (installed as share/pdref/scenario.schema.json).\n"
          "  NAME        the scenario's name: 1..95 of A-Z a-z 0-9 . _ - (no leading .)\n"
          "  --out FILE  where to write (default NAME.json; '-' writes to stdout)\n"
          "  --force     replace FILE when it exists (default: refuse)\n"
          "example: pdref sim new my-scenario && pdref sim run my-scenario.json --mode all\n"
          "exit: 0 written; 2 bad usage, a bad NAME, or FILE exists or cannot be written\n");
}

enum { OPT_OUT = PD_CLI_OPT_FIRST, OPT_FORCE };

static const struct option new_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"out", required_argument, NULL, OPT_OUT},
    {"force", no_argument, NULL, OPT_FORCE},
    {NULL, 0, NULL, 0},
};

typedef struct new_opts {
  const char *out;
  int force;
} new_opts_t;

static int apply_opt(void *ctx, int c, int index, char *v) {
  new_opts_t *o = ctx;
  (void)index;
  if (c == OPT_OUT) o->out = v;
  else o->force = 1;
  return 0;
}

static int is_valid_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > NAME_MAX_BYTES || s[0] == '.') return 0;
  for (size_t i = 0; i < n; i++)
    if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-", s[i]))
      return 0;
  return 1;
}

/* The whole text to f; 0 or PD_ERR_IO. */
static int write_all(FILE *f, const char *text, size_t len) {
  return fwrite(text, 1, len, f) == len ? 0 : PD_ERR_IO;
}

/* Write text to path: a new file unless force (O_EXCL), so an existing scenario survives. */
static int write_file(const char *path, const char *text, size_t len, int force) {
  int fd = open(path, O_WRONLY | O_CREAT | (force ? O_TRUNC : O_EXCL), 0644);
  if (fd < 0) {
    fprintf(stderr, CMD ": %s: %s%s\n", path, strerror(errno),
            errno == EEXIST ? " (use --force to replace it)" : "");
    return 2;
  }
  FILE *f = fdopen(fd, "w");
  int rc = f ? write_all(f, text, len) : PD_ERR_IO;
  if (f ? fclose(f) != 0 : close(fd) != 0) rc = PD_ERR_IO;
  if (rc) {
    fprintf(stderr, CMD ": %s: cannot write\n", path);
    return 2;
  }
  return 0;
}

/* The template for name, checked with the scenario loader; 0 or 2 (after a message). */
static int render(const char *name, char *buf, size_t cap, size_t *len) {
  int n = snprintf(buf, cap, template_fmt, name);
  if (n < 0 || (size_t)n >= cap) {
    fprintf(stderr, CMD ": internal error: the template does not fit\n");
    return 2;
  }
  *len = (size_t)n;
  pd_scenario_t *s = malloc(sizeof *s);
  char err[512];
  int rc = s ? pd_scenario_parse(s, "template", buf, *len, err, sizeof err) : PD_ERR_NOMEM;
  free(s);
  if (rc) {
    fprintf(stderr, CMD ": internal error: the template does not load: %s\n",
            rc == PD_ERR_NOMEM ? "out of memory" : err);
    return 2;
  }
  return 0;
}

int pd_cli_sim_new(const char *prog, int argc, char **argv) {
  new_opts_t o = {NULL, 0};
  char *words[2];
  int n_words = 0;
  pd_cli_parser_t p = {CMD, new_opts, usage, apply_opt, &o, words, 2, &n_words};
  int rc = pd_cli_parse(&p, argc, argv);
  if (rc >= 0) return rc;
  if (n_words != 1) {
    fprintf(stderr, CMD ": %s (try --help)\n",
            n_words ? "expected one NAME" : "no scenario NAME given");
    return 2;
  }
  const char *name = words[0];
  if (!is_valid_name(name)) {
    fprintf(stderr, CMD ": '%s': a NAME is 1..%d of A-Z a-z 0-9 . _ - (not starting with '.')\n",
            name, NAME_MAX_BYTES);
    return 2;
  }
  char text[sizeof template_fmt + NAME_MAX_BYTES], path[NAME_MAX_BYTES + 8];
  size_t len = 0;
  if (render(name, text, sizeof text, &len)) return 2;
  if (o.out && strcmp(o.out, "-") == 0) return write_all(stdout, text, len) ? 2 : 0;
  if (!o.out) snprintf(path, sizeof path, "%s.json", name);
  const char *out = o.out ? o.out : path;
  if (write_file(out, text, len, o.force)) return 2;
  fprintf(stderr, CMD ": wrote %s; replay it with: %s sim run %s --mode all\n", out, prog, out);
  return 0;
}
