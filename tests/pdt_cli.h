/* pdt_cli: run the built pdref (or pdref-gateway) next to the test binary to its exit, as a
 * user runs it, with its output kept: test_cli.c, test_cli_out.c. Every run is bounded (a
 * child still running after PDT_CLI_LIMIT_MS is killed). Header-only (static inline). */
#ifndef PDT_CLI_H
#define PDT_CLI_H
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pdt_net.h"
#include "pdt_proc.h"

#define PDT_CLI_LIMIT_MS 20000u /* one CLI run, start to exit */
#define PDT_CLI_OUT_BYTES 262144u

typedef struct run {
  int code;                    /* exit status, or -1 when it did not exit by itself */
  char out[PDT_CLI_OUT_BYTES]; /* stdout (and stderr, interleaved, unless split) */
  char err[PDT_CLI_OUT_BYTES]; /* stderr when split */
} run_t;

/* Read both pipes into r until they close or the limit passes. */
static inline void pdt_cli_drain(run_t *r, int out_fd, int err_fd) {
  size_t len[2] = {0, 0};
  char *buf[2] = {r->out, r->err};
  struct pollfd pf[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  uint64_t end = pdt_now_ms() + PDT_CLI_LIMIT_MS;
  while ((pf[0].fd >= 0 || pf[1].fd >= 0) && pdt_now_ms() < end) {
    if (poll(pf, 2, 50) <= 0) continue;
    for (int i = 0; i < 2; i++) {
      if (pf[i].fd < 0 || !pf[i].revents) continue;
      ssize_t k = len[i] + 1 < PDT_CLI_OUT_BYTES
                      ? read(pf[i].fd, buf[i] + len[i], PDT_CLI_OUT_BYTES - 1 - len[i])
                      : 0;
      if (k <= 0) pf[i].fd = -1;
      else len[i] += (size_t)k;
    }
  }
  r->out[len[0]] = '\0';
  r->err[len[1]] = '\0';
}

/* Run bin_name (next to this test) with args, NULL-terminated, and argv0 as its argv[0] (as a
 * shell passes the word typed: "pdref" found on PATH; NULL: its path); stderr into r->err
 * when split, else into r->out with stdout. 0, or -1 when not built. */
static inline int pdt_cli_run_as(run_t *r, const char *bin_name, const char *argv0,
                                 const char *const *args, int split) {
  char bin[PATH_MAX + 32], *argv[40];
  if (pdt_pdref_path(bin, sizeof bin) != 0) return -1;
  snprintf(strrchr(bin, '/') + 1, sizeof bin - (size_t)(strrchr(bin, '/') + 1 - bin), "%s",
           bin_name);
  if (access(bin, X_OK) != 0) return -1;
  int n = 0;
  argv[n++] = bin;
  for (; args[n - 1] && n < 39; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  int po[2], pe[2] = {-1, -1};
  if (pipe(po) < 0 || (split && pipe(pe) < 0)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(po[1], 1);
    dup2(split ? pe[1] : po[1], 2);
    close(po[0]);
    close(po[1]);
    if (split) close(pe[0]), close(pe[1]);
    if (argv0) argv[0] = (char *)argv0;
    execv(bin, argv);
    _exit(127);
  }
  close(po[1]);
  if (split) close(pe[1]);
  pdt_cli_drain(r, pid > 0 ? po[0] : -1, pid > 0 ? pe[0] : -1);
  close(po[0]);
  if (split) close(pe[0]);
  int status = 0;
  r->code = pid > 0 && pdt_reap(pid, 2000, &status) == 0 && WIFEXITED(status)
                ? WEXITSTATUS(status)
                : -1;
  return 0;
}

/* Run bin_name (next to this test) by its path with args: pdt_cli_run_as. */
static inline int pdt_cli_run(run_t *r, const char *bin_name, const char *const *args, int split) {
  return pdt_cli_run_as(r, bin_name, NULL, args, split);
}

/* out contains want (printed on failure). */
#define PDT_HAS(out, want)                                                            \
  do {                                                                              \
    if (!strstr(out, want)) fprintf(stderr, "test: no '%s' in:\n%s\n", want, out);  \
    PDT_TRUE(strstr(out, want) != NULL);                                            \
  } while (0)

#endif
