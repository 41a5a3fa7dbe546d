/* pdt_proc: child processes of the built pdref (test_mock.c, test_hostile_*.c): start one and
 * read its ready line, read a number from that line, reap it, count its descriptors and
 * memory; and a raw loopback connection. Every wait is bounded. Header-only (static inline). */
#ifndef PDT_PROC_H
#define PDT_PROC_H
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pd_proc.h"
#include "pdt_curl.h"

/* Read from fd into buf until a newline (0) or limit_ms pass or the peer closes (-1). */
static inline int pdt_read_line(int fd, char *buf, size_t cap, unsigned limit_ms) {
  size_t len = 0;
  uint64_t end = pdt_now_ms() + limit_ms;
  while (len + 1 < cap && pdt_now_ms() < end) {
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, 50) <= 0) continue;
    ssize_t n = read(fd, buf + len, cap - 1 - len);
    if (n <= 0) return -1;
    len += (size_t)n;
    buf[len] = 0;
    if (strchr(buf, '\n')) return 0;
  }
  return -1;
}

/* The number after key (e.g. "\"port\":") in s; 0 when key is absent. */
static inline unsigned pdt_json_uint(const char *s, const char *key) {
  const char *p = strstr(s, key);
  return p ? (unsigned)strtoul(p + strlen(key), NULL, 10) : 0;
}

/* Wait for pid to exit within limit_ms (0, *status set); else SIGKILL it, reap it, -1. */
static inline int pdt_reap(pid_t pid, unsigned limit_ms, int *status) {
  uint64_t end = pdt_now_ms() + limit_ms;
  while (pdt_now_ms() < end) {
    if (waitpid(pid, status, WNOHANG) == pid) return 0;
    pdt_sleep_ms(5);
  }
  kill(pid, SIGKILL);
  waitpid(pid, status, 0);
  return -1;
}

/* Start argv (argv[0] a path, stdout a pipe) and read its ready line into ready within
 * limit_ms: the pid, or -1 (the child killed and reaped). */
static inline pid_t pdt_spawn(char *const argv[], char *ready, size_t cap, unsigned limit_ms) {
  pd_proc_t p;
  pd_proc_opts_t o = {0};
  if (pd_proc_spawn(&p, argv[0], argv, &o) != 0) return -1;
  if (pd_proc_read_line(&p, ready, cap, limit_ms, NULL) != 0) {
    pd_proc_stop(&p, 0); /* SIGKILL at once, reaped */
    return -1;
  }
  close(p.out_fd); /* the ready line was all we read */
  return p.pid;
}

/* Open descriptors of pid (/proc), or -1. */
static inline int pdt_count_fds(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* VmRSS of pid in kB, or -1. */
static inline long pdt_rss_kb(pid_t pid) {
  char path[64], line[128];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) kb = strtol(line + 6, NULL, 10);
  if (f) fclose(f);
  return kb;
}

/* A child of ours that has not exited. */
static inline int pdt_is_alive(pid_t pid) { return pid > 0 && waitpid(pid, NULL, WNOHANG) == 0; }

/* A TCP connection to 127.0.0.1:port (blocking, close-on-exec), or -1. */
static inline int pdt_dial(uint16_t port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

#endif
