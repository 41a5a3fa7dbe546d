/* pd_netbench: the client side of `pdref gateway bench` (cli/cmd_netbench.c). Runs N
 * streaming /generate requests, at most C in flight, over libcurl multi driven by one epoll
 * set in the calling thread, and records per request the time from sending to the first SSE
 * data event (TTFT) and every gap between consecutive data events (inter-token latency). A
 * request counts as ok only with HTTP 200, a clean transfer, exactly the asked number of
 * token events, no error event and a final `data: [DONE]`. */
#ifndef PD_NETBENCH_H
#define PD_NETBENCH_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pd_proc.h"

/* Streams in flight in one run: each is one or two client sockets (PD path), and 4096 is
 * eight times the largest level. */
#define PD_NETBENCH_MAX_CONCURRENCY 4096u
/* Requests in one run, and tokens per request (the mock's own output limit). */
#define PD_NETBENCH_MAX_REQUESTS 1000000u
#define PD_NETBENCH_MAX_TOKENS 100000u
/* Inter-token gaps kept per run (32 MiB of samples); later gaps are counted, not kept. */
#define PD_NETBENCH_MAX_GAPS (4u << 20)

/* How the measured stream reaches the decode worker. */
typedef enum pd_netbench_path {
  PD_NETBENCH_DIRECT,  /* client -> decode mock, no bootstrap fields (mock started with --direct) */
  PD_NETBENCH_PD,      /* client -> prefill and decode mocks itself, same bootstrap fields: the
                    rendezvous without a gateway */
  PD_NETBENCH_GATEWAY, /* client -> gateway -> both mocks */
} pd_netbench_path_t;

typedef struct pd_netbench_run {
  pd_netbench_path_t path;
  const char *url;         /* measured stream: the decode's or the gateway's /generate */
  const char *prefill_url; /* PD_NETBENCH_PD: the prefill's /generate */
  uint16_t bootstrap_port; /* PD_NETBENCH_PD: the prefill's bootstrap port */
  uint64_t first_room;     /* PD_NETBENCH_PD: rooms used are first_room, first_room + 1, ... */
  uint32_t concurrency;    /* 1..PD_NETBENCH_MAX_CONCURRENCY */
  uint32_t requests;       /* 1..PD_NETBENCH_MAX_REQUESTS */
  uint32_t tokens;         /* max_new_tokens of every request, 1..PD_NETBENCH_MAX_TOKENS */
  uint64_t timeout_ns;     /* bound on the whole run; requests open then are errors */
  uint64_t stagger_ns;     /* measured batch: slot i's first request starts i x stagger_ns
                              after the first, so arrivals are spread (steady load), not a
                              burst of C at once every round */
  int is_recording;        /* keep the TTFT and gap samples */
  int is_warmup;           /* first one 1-token request per slot on the same connection pool,
                              unmeasured (so the measured requests reuse open connections) */
  /* called after each finished request (may be NULL) */
  void (*on_progress)(void *ud, uint32_t done, uint32_t total);
  void *ud;
  const volatile sig_atomic_t *stop; /* set (e.g. by SIGINT): end now, unfinished = errors */
} pd_netbench_run_t;

typedef struct pd_netbench_result {
  uint32_t ok, errors; /* measured requests; ok + errors == requests */
  uint32_t warmup_errors;
  uint64_t events;   /* token data events received on measured streams */
  uint64_t reads;    /* write callbacks (client reads) on measured streams */
  uint64_t wall_ns;  /* measured batch: first send to last completion */
  uint64_t *ttft_ns; /* sorted ascending, n_ttft of them (ok requests only) */
  uint64_t n_ttft;
  uint64_t *gap_ns; /* sorted ascending, n_gap of them (ok requests only) */
  uint64_t n_gap;
  char first_error[192]; /* the first failure, e.g. "HTTP 503", "62 of 64 tokens" */
} pd_netbench_result_t;

/* Run one measured batch. Returns 0 (the outcome is in res, errors included), or
 * PD_ERR_INVAL for a bad run, PD_ERR_NOMEM, PD_ERR_IO when epoll or libcurl cannot start.
 * res is always initialised; free it with pd_netbench_result_free. */
int pd_netbench_run(const pd_netbench_run_t *run, pd_netbench_result_t *res);
void pd_netbench_result_free(pd_netbench_result_t *res);

/* Nearest-rank percentile (p in 0..100) of the sorted v[0..n); 0 when n is 0. */
uint64_t pd_netbench_percentile(const uint64_t *v, uint64_t n, double p);

/* CLOCK_MONOTONIC in ns. */
uint64_t pd_netbench_now_ns(void);

/* ---------- the processes under test ---------- */

typedef pd_proc_t pd_netbench_child_t; /* pid 0: none */

/* Start exe with args (args[0] is its argv[0], NULL-terminated) in its own process group, its
 * stdout on a pipe, its stderr appended to err_path (NULL: ours), and PR_SET_PDEATHSIG so
 * it does not outlive us (pd_proc_spawn); then read its first
 * stdout line (the ready line) into line, NUL-terminated, within timeout_ms or until *stop.
 * Returns 0, or -1 when it could not start, exited, or was not ready in time; in every case
 * call pd_netbench_child_stop afterwards. */
int pd_netbench_child_start(pd_netbench_child_t *c, const char *exe, char *const args[],
                            const char *err_path, char *line, size_t cap, uint32_t timeout_ms,
                            const volatile sig_atomic_t *stop);

/* SIGTERM to its process group, up to timeout_ms for it to exit, then SIGKILL; reaped in
 * every case (bounded), its pipe closed. A stopped or never-started child is a no-op. */
void pd_netbench_child_stop(pd_netbench_child_t *c, uint32_t timeout_ms);

/* VmHWM (peak RSS) of pid in KiB, and its utime + stime in seconds; 0 when unreadable. */
long pd_netbench_proc_hwm_kib(pid_t pid);
double pd_netbench_proc_cpu_s(pid_t pid);
/* The same summed over the live members of process group pgid (a gateway command run with
 * /bin/sh -c: the shell and what it started). */
long pd_netbench_group_hwm_kib(pid_t pgid);
double pd_netbench_group_cpu_s(pid_t pgid);

#endif
