/* pd_proc: a child starts with its output where asked, its ready line is read, and stopping
 * it (SIGTERM, then SIGKILL past the timeout) reaps it and the rest of its process group.
 * Children are /bin/sh scripts; every wait is bounded. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pd_proc.h"
#include "pdt.h"
#include "pdt_curl.h"

#define PROC_LINE_MS 5000u
#define PROC_STOP_MS 2000u

static int sh(pd_proc_t *p, const char *script, const pd_proc_opts_t *o) {
  char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
  return pd_proc_spawn(p, argv[0], argv, o);
}

static void test_ready_line_then_sigterm(void) {
  pd_proc_t p;
  pd_proc_opts_t o = {.is_group = 1};
  PDT_EQ_INT(sh(&p, "echo '{\"ready\":1}'; exec sleep 30", &o), 0);
  PDT_TRUE(p.pid > 0 && p.out_fd >= 0);
  char line[64];
  PDT_EQ_INT(pd_proc_read_line(&p, line, sizeof line, PROC_LINE_MS, NULL), 0);
  PDT_EQ_STR(line, "{\"ready\":1}\n");
  PDT_FALSE(pd_proc_is_gone(&p));
  uint64_t t0 = pdt_now_ms();
  pd_proc_stop(&p, PROC_STOP_MS);
  PDT_TRUE(pdt_now_ms() - t0 < PROC_STOP_MS); /* SIGTERM was enough: no wait for the timeout */
  PDT_TRUE(p.is_reaped && WIFSIGNALED(p.status) && WTERMSIG(p.status) == SIGTERM);
  PDT_EQ_INT(p.pid, 0);
  PDT_EQ_INT(p.out_fd, -1);
  pd_proc_stop(&p, PROC_STOP_MS); /* a second stop is a no-op */
}

static void test_sigterm_ignored_means_sigkill(void) {
  pd_proc_t p;
  pd_proc_opts_t o = {0};
  PDT_EQ_INT(sh(&p, "trap '' TERM; echo ready; while :; do sleep 1; done", &o), 0);
  char line[64];
  PDT_EQ_INT(pd_proc_read_line(&p, line, sizeof line, PROC_LINE_MS, NULL), 0);
  uint64_t t0 = pdt_now_ms();
  pd_proc_stop(&p, 200);
  PDT_TRUE(pdt_now_ms() - t0 >= 200);
  PDT_TRUE(p.is_reaped && WIFSIGNALED(p.status) && WTERMSIG(p.status) == SIGKILL);
}

/* What a group leader left running when it exited is killed with the group and reaped (we
 * are its subreaper). */
static void test_stop_takes_the_whole_group(void) {
  pd_proc_subreaper();
  pd_proc_t p;
  pd_proc_opts_t o = {.is_group = 1};
  PDT_EQ_INT(sh(&p, "sleep 30 & echo $!", &o), 0); /* the leader exits at once */
  char line[64];
  PDT_EQ_INT(pd_proc_read_line(&p, line, sizeof line, PROC_LINE_MS, NULL), 0);
  pid_t bg = (pid_t)strtol(line, NULL, 10);
  for (int i = 0; i < 500 && !pd_proc_is_gone(&p); i++) pdt_sleep_ms(10);
  PDT_TRUE(p.is_reaped && bg > 0 && kill(bg, 0) == 0); /* the leader is gone, sleep is not */
  pd_proc_stop(&p, 200);
  PDT_TRUE(p.is_reaped);
  PDT_TRUE(bg > 0 && kill(bg, 0) != 0 && errno == ESRCH); /* gone and reaped, not a zombie */
}

static void test_output_to_files(void) {
  char out[] = "/tmp/pdt_proc_out_XXXXXX", err[] = "/tmp/pdt_proc_err_XXXXXX";
  int fo = mkstemp(out), fe = mkstemp(err);
  PDT_TRUE(fo >= 0 && fe >= 0);
  if (fo < 0 || fe < 0) return;
  PDT_TRUE(write(fe, "old\n", 4) == 4);
  close(fo), close(fe);
  pd_proc_t p;
  pd_proc_opts_t both = {.out_path = out, .is_err_to_out = 1};
  PDT_EQ_INT(sh(&p, "echo to-out; echo to-err >&2", &both), 0);
  PDT_TRUE(p.out_fd == -1); /* no pipe when stdout is a file */
  for (int i = 0; i < 500 && !pd_proc_is_gone(&p); i++) pdt_sleep_ms(10);
  PDT_TRUE(p.is_reaped && WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0);
  pd_proc_stop(&p, PROC_STOP_MS);
  char buf[128] = "";
  FILE *f = fopen(out, "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  PDT_EQ_STR(buf, "to-out\nto-err\n");
  pd_proc_opts_t apart = {.out_path = out, .err_path = err, .is_err_append = 1};
  PDT_EQ_INT(sh(&p, "echo only-err >&2", &apart), 0);
  for (int i = 0; i < 500 && !pd_proc_is_gone(&p); i++) pdt_sleep_ms(10);
  pd_proc_stop(&p, PROC_STOP_MS);
  f = fopen(err, "r");
  n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  PDT_EQ_STR(buf, "old\nonly-err\n"); /* appended */
  unlink(out), unlink(err);
}

static void test_no_ready_line_fails_in_time(void) {
  pd_proc_t p;
  pd_proc_opts_t o = {0};
  PDT_EQ_INT(sh(&p, "exec sleep 30", &o), 0);
  char line[64];
  uint64_t t0 = pdt_now_ms();
  PDT_EQ_INT(pd_proc_read_line(&p, line, sizeof line, 100, NULL), -1);
  PDT_TRUE(pdt_now_ms() - t0 < PROC_LINE_MS);
  pd_proc_stop(&p, PROC_STOP_MS);
  PDT_EQ_INT(sh(&p, "exit 3", &o), 0); /* exits without a line: -1 at once */
  PDT_EQ_INT(pd_proc_read_line(&p, line, sizeof line, PROC_LINE_MS, NULL), -1);
  pd_proc_stop(&p, PROC_STOP_MS);
  PDT_TRUE(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 3);
  char *argv[] = {"/nonexistent/pdref", NULL};
  PDT_EQ_INT(pd_proc_spawn(&p, argv[0], argv, &o), 0); /* exec fails in the child: 127 */
  PDT_EQ_INT(pd_proc_read_line(&p, line, sizeof line, PROC_LINE_MS, NULL), -1);
  pd_proc_stop(&p, PROC_STOP_MS);
  PDT_TRUE(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 127);
  pd_proc_opts_t bad = {.out_path = "/nonexistent/dir/out"};
  PDT_EQ_INT(pd_proc_spawn(&p, "/bin/sh", argv, &bad), -1);
  PDT_EQ_INT(p.pid, 0);
}

int pdt_suite_proc(void) {
  static const pdt_case_t cases[] = {
      {"the ready line is read, then SIGTERM stops and reaps it", test_ready_line_then_sigterm},
      {"a child that ignores SIGTERM is killed after the timeout",
       test_sigterm_ignored_means_sigkill},
      {"stopping a group leader kills and reaps its group", test_stop_takes_the_whole_group},
      {"stdout and stderr go to files, stderr appended", test_output_to_files},
      {"no ready line: -1 within the timeout, exit status kept", test_no_ready_line_fails_in_time},
  };
  return PDT_SUITE("proc", cases);
}
