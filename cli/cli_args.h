/* cli_args: the option handling every pdref subcommand shares. Values are checked strictly
 * (a whole decimal number, inside its range); a bad one prints one line to stderr,
 *   <cmd>: <flag>: '<text>' is not a number
 *   <cmd>: <flag>: '<text>' is out of range <min>..<max>
 * and the parser returns PD_ERR_INVAL, after which the caller exits 2. Options are read with
 * getopt_long (pd_cli_getopt); argv[0] of a subcommand is its command word. */
#ifndef PD_CLI_ARGS_H
#define PD_CLI_ARGS_H
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pd_dispatch.h"

/* Codes pd_cli_getopt returns besides the options' own: a word that is not an option (a file
 * argument), -1 at the end. Long-only options use vals from PD_CLI_OPT_FIRST up. */
#define PD_CLI_OPT_ARG 1
#define PD_CLI_OPT_FIRST 256

/* An unsigned decimal integer: digits only (no sign, space, "0x" or suffix), min <= v <= max.
 * "-5" and a value past max (or past UINT64_MAX) are out of range. 0 or PD_ERR_INVAL. */
int pd_cli_parse_u64(const char *cmd, const char *flag, const char *text, uint64_t min,
                     uint64_t max, uint64_t *out);
/* The same for a uint32_t field (max <= UINT32_MAX). */
int pd_cli_parse_u32(const char *cmd, const char *flag, const char *text, uint32_t min,
                     uint32_t max, uint32_t *out);
/* A finite decimal number (strtod syntax, nothing after it, no leading space) with
 * min <= v <= max. 0 or PD_ERR_INVAL. */
int pd_cli_parse_double(const char *cmd, const char *flag, const char *text, double min, double max,
                        double *out);
/* A finite number with 0 < v <= max (a scale, a speed, a duration). 0 or PD_ERR_INVAL. */
int pd_cli_parse_positive(const char *cmd, const char *flag, const char *text, double max,
                          double *out);
/* HOST:PORT with a port in 0..65535; "[v6]:PORT" loses its brackets. host gets the host part
 * (fewer than cap bytes). 0 or PD_ERR_INVAL ("expected HOST:PORT"). */
int pd_cli_parse_host_port(const char *cmd, const char *flag, const char *text, char *host,
                           size_t cap, uint16_t *port);
/* A --listen value: HOST:PORT where HOST is a host name ("localhost"), an IPv4 address or
 * an IPv6 address in brackets ("[::1]:8000"; numeric only). host gets the address to bind,
 * numeric: a name's first IPv4 address, else its first IPv6 one (getaddrinfo). 0, or
 * PD_ERR_INVAL after "<cmd>: <flag>: '<text>': ..." on stderr. */
int pd_cli_parse_listen(const char *cmd, const char *flag, const char *text, char *host,
                        size_t cap, uint16_t *port);
/* The modes line every --help that takes a mode prints (the core's names, pd_mode_name). */
#define PD_CLI_MODES_HELP                                                                      \
  "modes: joined (smg today), pr1150 (smg PR #1150), minilb (SGLang's mini_lb) for SGLang's\n" \
  "       destination-first protocol; vllm-toy-proxy, mooncake-proxy, llmd-sidecar (vLLM's\n"  \
  "       proxies) for vLLM's source-first one; reference (pdref's rules) for both\n"

/* A mode name (joined, pr1150, minilb, reference). 0 or PD_ERR_INVAL ("unknown mode"). */
int pd_cli_parse_mode(const char *cmd, const char *flag, const char *text, pd_mode_t *out);

/* The program as the user ran it, for the commands pdref prints to be run again (replay
 * hints): argv0 as given. A name without a slash was found on PATH and runs from anywhere as
 * it is ("pdref" after make install); a path with one ("build/pdref", "./pdref") runs from
 * the directory where it was typed, where the command is printed. "pdref" for a missing or
 * empty argv0; a word the shell would split or expand is single-quoted. Fits in cap bytes
 * (PD_CLI_PROG_BYTES holds any path). */
#define PD_CLI_PROG_BYTES 4200
void pd_cli_prog_name(const char *argv0, char *buf, size_t cap);

/* Append text to the NUL-terminated command in buf (cap bytes) as one shell word:
 * single-quoted, ' written as '\''. Truncated to fit, always terminated. */
void pd_cli_shell_quote(char *buf, size_t cap, const char *text);

/* Start a new getopt loop over another argv (resets getopt's state). */
void pd_cli_getopt_begin(void);
/* getopt_long over argv (argv[0] the command word) with the options of opts and "-h", errors
 * left to the caller: returns an option's val, 'h', PD_CLI_OPT_ARG with optarg set to a plain
 * word (in the order given), '?' or ':' for pd_cli_option_error, or -1 at the end. index (may
 * be NULL) gets the long option's position in opts. */
int pd_cli_getopt(int argc, char **argv, const struct option *opts, int *index);
/* Print what was wrong with the option pd_cli_getopt just returned c ('?' or ':') for:
 * "<cmd>: unknown option '--x' (try --help)", "<cmd>: option '--x' needs a value", ...
 * Returns 2, the exit code. */
int pd_cli_option_error(const char *cmd, int c, char **argv);
/* "<cmd>: unexpected argument '<word>' (try --help)"; returns 2. */
int pd_cli_unexpected_arg(const char *cmd, const char *word);

/* A subcommand's whole option loop: --help prints usage(stdout); an option goes to
 * apply(ctx, val, index in opts, value or NULL), which returns 0 or an error (its message
 * printed); a plain word goes to words (up to max_words, *n_words counts them), or is an
 * error when words is NULL. */
typedef struct pd_cli_parser {
  const char *cmd; /* "pdref sim bench", for messages */
  const struct option *opts;
  void (*usage)(FILE *f);
  int (*apply)(void *ctx, int val, int index, char *value);
  void *ctx;
  char **words;
  int max_words, *n_words;
} pd_cli_parser_t;
/* Run the loop over argv (argv[0] the command word): -1 to go on, 0 after --help, 2 on bad
 * usage (unknown option, missing value, bad value, unexpected word). */
int pd_cli_parse(const pd_cli_parser_t *p, int argc, char **argv);

/* The version: `git describe --tags --always --dirty` of the source when CMake configured it,
 * else the project version of CMakeLists.txt. */
const char *pd_cli_version(void);
/* "<prog> <version>" or {"version": "<version>"} on stdout. */
void pd_cli_print_version(const char *prog, int is_json);
/* When argv (argv[0] the program) is `--version` or `--version --json` in either order, print
 * the version as above and return 1; else 0. */
int pd_cli_is_version(const char *prog, int argc, char **argv);

#endif
