/* Between fork and exec the child makes only async-signal-safe calls. */
#define _GNU_SOURCE /* pipe2 */
#include "pd_proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Descriptors the child closes before exec: the first this many (the rest are CLOEXEC). */
#define PD_PROC_CLOSE_FDS_MAX 4096
/* How often a bounded wait looks again, and how long the group's leftovers may take. */
#define PD_PROC_POLL_MS 2u
#define PD_PROC_ORPHAN_REAP_MS 1000u

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void close_if(int fd) {
  if (fd >= 0) close(fd);
}

/* The child's stdin, stdout, stderr and (pipe) the parent's read end; -1 on failure. */
static int open_io(const pd_proc_opts_t *o, int io[3], int *read_end) {
  int pfd[2] = {-1, -1};
  io[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (o->out_path)
    io[1] = open(o->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  else if (pipe2(pfd, O_CLOEXEC) == 0)
    io[1] = pfd[1];
  else
    io[1] = -1;
  *read_end = pfd[0];
  int trunc = o->is_err_append ? O_APPEND : O_TRUNC;
  io[2] = o->err_path ? open(o->err_path, O_WRONLY | O_CREAT | trunc | O_CLOEXEC, 0644) : -1;
  if (io[0] >= 0 && io[1] >= 0 && (!o->err_path || io[2] >= 0)) return 0;
  int e = errno;
  for (int i = 0; i < 3; i++) close_if(io[i]);
  close_if(*read_end);
  errno = e;
  return -1;
}

int pd_proc_spawn(pd_proc_t *p, const char *path, char *const argv[], const pd_proc_opts_t *o) {
  memset(p, 0, sizeof *p);
  p->out_fd = -1;
  int io[3], read_end;
  if (open_io(o, io, &read_end) != 0) return -1;
  long maxfd = sysconf(_SC_OPEN_MAX);
  if (maxfd < 0 || maxfd > PD_PROC_CLOSE_FDS_MAX) maxfd = PD_PROC_CLOSE_FDS_MAX;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    if (o->is_group) setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* the parent dying takes its children along */
    if (getppid() != parent) _exit(127); /* it died before prctl */
    dup2(io[0], 0);
    dup2(io[1], 1); /* dup2 clears O_CLOEXEC on the copy */
    if (io[2] >= 0) dup2(io[2], 2);
    else if (o->is_err_to_out) dup2(io[1], 2);
    for (int fd = 3; fd < (int)maxfd; fd++) close(fd);
    execv(path, argv);
    _exit(127);
  }
  int e = errno;
  for (int i = 0; i < 3; i++) close_if(io[i]);
  if (pid < 0) {
    close_if(read_end);
    errno = e;
    return -1;
  }
  if (o->is_group) setpgid(pid, pid); /* both sides: no window where a group kill misses it */
  p->pid = pid;
  p->is_group = o->is_group;
  p->out_fd = read_end;
  return 0;
}

int pd_proc_read_line(pd_proc_t *p, char *line, size_t cap, uint32_t timeout_ms,
                      const volatile sig_atomic_t *stop) {
  if (cap < 2 || p->out_fd < 0) return -1;
  size_t n = 0;
  line[0] = 0;
  uint64_t deadline = now_ms() + timeout_ms;
  while (!memchr(line, '\n', n)) { /* bounded by the deadline and by cap */
    uint64_t now = now_ms();
    if (now >= deadline || (stop && *stop) || n + 1 >= cap) return -1;
    struct pollfd pf = {p->out_fd, POLLIN, 0};
    int r = poll(&pf, 1, (int)(deadline - now) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    ssize_t k = read(p->out_fd, line + n, cap - 1 - n);
    if (k <= 0) return -1; /* it exited before it was ready */
    n += (size_t)k;
    line[n] = 0;
  }
  return 0;
}

int pd_proc_is_gone(pd_proc_t *p) {
  if (!p->pid || p->is_reaped) return 1;
  pid_t r = waitpid(p->pid, &p->status, WNOHANG);
  if (r == p->pid || (r < 0 && errno == ECHILD)) p->is_reaped = 1;
  return p->is_reaped;
}

void pd_proc_signal(const pd_proc_t *p, int sig) {
  if (!p->pid) return;
  if (p->is_group && kill(-p->pid, sig) == 0) return; /* sh and whatever it started */
  if (!p->is_reaped) kill(p->pid, sig);
}

/* Reap the members of a stopped leader's group that are our children (orphans handed to a
 * subreaper), within PD_PROC_ORPHAN_REAP_MS. */
static void reap_group(pid_t pgid) {
  uint64_t end = now_ms() + PD_PROC_ORPHAN_REAP_MS;
  for (uint32_t guard = 0; guard < 100000; guard++) { /* bounded by end */
    pid_t r = waitpid(-pgid, NULL, WNOHANG);
    if (r > 0) continue;
    if ((r < 0 && errno == ECHILD) || now_ms() > end) break;
    sleep_ms(1);
  }
}

void pd_proc_stop_all(pd_proc_t *const ps[], size_t n, uint32_t timeout_ms) {
  for (size_t i = 0; i < n; i++)
    if (!pd_proc_is_gone(ps[i])) pd_proc_signal(ps[i], SIGTERM);
  uint64_t end = now_ms() + timeout_ms;
  for (uint32_t guard = 0; guard < 1000000; guard++) { /* bounded by end */
    size_t left = 0;
    for (size_t i = 0; i < n; i++) left += !pd_proc_is_gone(ps[i]);
    if (!left || now_ms() > end) break;
    sleep_ms(PD_PROC_POLL_MS);
  }
  for (size_t i = 0; i < n; i++) {
    pd_proc_t *p = ps[i];
    if (!pd_proc_is_gone(p)) {
      pd_proc_signal(p, SIGKILL);
      pid_t r = waitpid(p->pid, &p->status, 0); /* SIGKILL cannot be ignored */
      if (r == p->pid || (r < 0 && errno == ECHILD)) p->is_reaped = 1;
    }
    if (p->pid && p->is_group) kill(-p->pid, SIGKILL); /* anything its leader left behind */
  }
  for (size_t i = 0; i < n; i++) {
    pd_proc_t *p = ps[i];
    if (p->pid && p->is_group) reap_group(p->pid);
    close_if(p->out_fd);
    p->out_fd = -1;
    p->pid = 0; /* stopped: a second stop is a no-op (the pid may be reused) */
  }
}

void pd_proc_stop(pd_proc_t *p, uint32_t timeout_ms) {
  pd_proc_t *const one[1] = {p};
  pd_proc_stop_all(one, 1, timeout_ms);
}

void pd_proc_subreaper(void) { prctl(PR_SET_CHILD_SUBREAPER, 1); }

/* ---------- loopback ports ---------- */

static struct sockaddr_in loopback(uint16_t port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

int pd_proc_free_port(uint16_t *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = loopback(0);
  socklen_t len = sizeof a;
  int rc = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                   getsockname(fd, (struct sockaddr *)&a, &len) == 0
               ? 0
               : -1;
  close(fd);
  if (rc == 0) *port = ntohs(a.sin_port);
  return rc;
}

int pd_proc_port_accepts(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a = loopback(port);
  int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0; /* loopback: at once */
  close(fd);
  return ok;
}

int pd_proc_wait_port(pd_proc_t *p, uint16_t port, uint32_t timeout_ms,
                      const volatile sig_atomic_t *stop) {
  for (uint32_t waited = 0; waited <= timeout_ms; waited += 20) { /* bounded */
    if (pd_proc_port_accepts(port)) return 0;
    if (pd_proc_is_gone(p) || (stop && *stop)) return -1;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return -1;
}
