/* pd_proc: the child processes the conformance runner and the benchmark start (mocks and a
 * gateway): spawn one with its output where the caller wants it, read its ready line, and
 * stop it: SIGTERM, a bounded wait, SIGKILL, reap. Every wait is bounded; a stopped child is
 * reaped. A child dies with its parent (PR_SET_PDEATHSIG). */
#ifndef PD_PROC_H
#define PD_PROC_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct pd_proc {
  pid_t pid;    /* 0: not started */
  int is_group; /* leads its own process group: signals go to the whole group */
  int is_reaped;
  int status;   /* waitpid status, once reaped */
  int out_fd;   /* read end of its stdout pipe; -1: none */
} pd_proc_t;

typedef struct pd_proc_opts {
  const char *out_path; /* stdout to this file (truncated); NULL: a pipe, read at out_fd */
  const char *err_path; /* stderr to this file; NULL: ours, or stdout's (is_err_to_out) */
  int is_err_append;    /* err_path is appended to, not truncated */
  int is_err_to_out;    /* stderr goes where stdout goes */
  int is_group;         /* the child leads a process group of its own */
} pd_proc_opts_t;

/* Start path with argv (argv[0] its name, NULL-terminated), stdin from /dev/null, every other
 * descriptor closed. 0, or -1 with errno (nothing left running, *p has pid 0). */
int pd_proc_spawn(pd_proc_t *p, const char *path, char *const argv[], const pd_proc_opts_t *o);

/* Read the child's stdout pipe until a newline, into line (NUL-terminated), within timeout_ms
 * or until *stop (stop may be NULL). 0; -1 when it closed its stdout (exited), the time ran
 * out, *stop was set, or the line did not fit. */
int pd_proc_read_line(pd_proc_t *p, char *line, size_t cap, uint32_t timeout_ms,
                      const volatile sig_atomic_t *stop);

/* Reap without blocking: 1 when the child is gone (or never started). */
int pd_proc_is_gone(pd_proc_t *p);

/* Send sig to the child (to its group when it leads one). */
void pd_proc_signal(const pd_proc_t *p, int sig);

/* Stop n children together: SIGTERM, up to timeout_ms for all of them to exit, SIGKILL to
 * the rest; each is reaped, its pipe closed, and a group leader's group is killed and its
 * leftover members reaped (those that are our children: see pd_proc_subreaper). */
void pd_proc_stop_all(pd_proc_t *const ps[], size_t n, uint32_t timeout_ms);
void pd_proc_stop(pd_proc_t *p, uint32_t timeout_ms);

/* A free TCP port on 127.0.0.1 (bound, read and released: another process may take it before
 * the caller does, which the caller's start then reports). 0 or -1. */
int pd_proc_free_port(uint16_t *port);

/* 1 when something accepts TCP connections on 127.0.0.1:port. */
int pd_proc_port_accepts(uint16_t port);

/* Wait until 127.0.0.1:port accepts, polling every 20 ms, within timeout_ms, while p runs
 * and *stop is unset (stop may be NULL). 0, or -1 (p exited, time ran out, or stopped). */
int pd_proc_wait_port(pd_proc_t *p, uint16_t port, uint32_t timeout_ms,
                      const volatile sig_atomic_t *stop);

/* Make this process the reaper of its children's orphans (PR_SET_CHILD_SUBREAPER), so that
 * pd_proc_stop_all can reap what a stopped group leader left behind. */
void pd_proc_subreaper(void);

#endif
