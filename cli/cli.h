/* Subcommand entry points of the pdref binary; each returns the process exit code. argv[0] is
 * the command word ("run", "gateway", ...), the options follow, as getopt_long expects. prog
 * is the program as the user ran it (pd_cli_prog_name), which the commands that print replay
 * commands begin them with. */
#ifndef PD_CLI_H
#define PD_CLI_H
#include <stddef.h>
#include <stdint.h>

int pd_cli_sim_run(const char *prog, int argc, char **argv);
int pd_cli_sim_bench(const char *prog, int argc, char **argv);
/* The single-threaded simulator commands (sim bench, sim explore) call this first, before any
 * cJSON use: cJSON then takes its blocks from one pool (core/pd_pool.h), not from malloc. */
void pd_cli_pool_cjson(void);
int pd_cli_sim_explore(const char *prog, int argc, char **argv);
int pd_cli_sim_new(const char *prog, int argc, char **argv); /* cmd_sim_new.c: a template */
int pd_cli_sim_explore_merge(int argc, char **argv); /* argv[0] "merge" */
/* `sim explore --jobs n` (cmd_explore_jobs.c): run the exploration argv (argv[0] "explore")
 * as n shard processes of this program; quiet: no progress bar. 0 with docs[i] shard i's
 * result (the caller folds and deletes them), or 2 after the message (a shard failed). */
#define PD_CLI_EXPLORE_MAX_JOBS 256u
struct cJSON;
int pd_cli_explore_jobs(const char *prog, int argc, char **argv, unsigned n, int quiet,
                        struct cJSON **docs); /* docs[n]: the shards' results (0) */
unsigned pd_cli_explore_default_jobs(void); /* online cores, 1..PD_CLI_EXPLORE_MAX_JOBS */
/* A --jobs parent gives each shard a pipe's write end in this variable; the shard writes its
 * progress lines there (cmd_explore.c, progress). */
#define PD_CLI_EXPLORE_PROGRESS_FD_ENV "PDREF_EXPLORE_PROGRESS_FD"
/* Fold n explore results (paths name them in messages) as `pdref sim explore merge` does: the
 * merged --json document, or NULL after a message on stderr (different settings, a gap or an
 * overlap in the seeds, a result whose count disagrees with its range). */
struct cJSON *pd_cli_explore_fold(const struct cJSON *const *docs, const char *const *paths, int n);
/* An explore result file's text (NUL-terminated, *len bytes; free()), or NULL when it cannot
 * be read or is over the merge's size bound. */
char *pd_cli_explore_read(const char *path, size_t *len);
/* o[key] as a seed (a number, or a decimal string above 2^53) into *out: 0, or -1. */
int pd_cli_explore_u64(const struct cJSON *o, const char *key, uint64_t *out);
int pd_cli_gateway(int argc, char **argv);
int pd_cli_gateway_bench(int argc, char **argv);
int pd_cli_mock(int argc, char **argv);
int pd_cli_conform(const char *prog, int argc, char **argv);
int pd_cli_report(const char *prog, int argc, char **argv);

/* Expand FILE|DIR arguments into at most max paths (caller frees each with free());
 * directories give their *.json files sorted by name. Returns 0, or 2 after printing
 * "<cmd>: <path>: ..." for a missing path. */
int pd_cli_collect_json(const char *cmd, char **args, int n, char **out, int *n_out, int max);

/* 1 when host (a --listen address) is a loopback address (127.0.0.0/8, ::1, "localhost"). */
int pd_cli_is_loopback(const char *host);
/* When host is not a loopback address, print to stderr "<cmd>: warning: listening on <host>,
 * not a loopback address: <exposed>" and return 1; else print nothing and return 0. */
int pd_cli_warn_exposed(const char *cmd, const char *host, const char *exposed);
/* Raise the soft limit on open descriptors to want (or the hard limit, when lower); a
 * failure leaves it as it was. */
void pd_cli_raise_fd_limit(uint64_t want);
/* The set bits of mask (bit i-1 = invariant Ii, i = 1..n_bits) as "I2,I5" with sep between
 * them; "" for 0. Stops before overflowing buf. */
void pd_cli_mask_str(uint32_t mask, int n_bits, const char *sep, char *buf, size_t cap);
/* A scenario load error (pd_scenario_load's "path: $.json.path: message") as
 * "path:LINE: $.json.path: message": LINE is where the JSON path leads in the file (its
 * first PD_CLI_ERROR_SCAN_BYTES), the line of a syntax error, else 1. */
#define PD_CLI_ERROR_SCAN_BYTES (16u << 20)
void pd_cli_file_error(const char *path, const char *err, char *out, size_t cap);
/* SIGINT/SIGTERM -> on_stop, SIGPIPE ignored. */
void pd_cli_install_signals(void (*on_stop)(int));

#endif
