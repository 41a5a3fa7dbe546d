/* The benchmark client: C stream slots, each running its requests back to back, all on one
 * libcurl multi handle driven through its socket API by one epoll set (poll-free, so 512
 * streams cost what their ready sockets cost). Timestamps are taken in the write callback,
 * i.e. right after libcurl read the bytes. SSE framing is counted, not parsed: an event is
 * the bytes up to a blank line, classified by its first 16 bytes. */
#define _GNU_SOURCE
#include "pd_netbench.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "pd_err.h"

#define NETBENCH_PFX 16u         /* bytes of an event kept to classify it */
#define NETBENCH_EPOLL_BATCH 256 /* ready fds per epoll_wait */
#define NETBENCH_MAX_WAIT_MS 100 /* longest sleep, so stop and the deadline are seen */
#define NETBENCH_MAX_INFO_PER_TURN 100000u
#define NETBENCH_BODY_BYTES 384u

typedef struct netbench_engine netbench_engine_t;

typedef struct netbench_stream {
  netbench_engine_t *e;
  CURL *easy[2]; /* [0] measured stream, [1] PD path's prefill leg */
  int is_live[2];
  char body[NETBENCH_BODY_BYTES];
  uint64_t t_start_ns, t_first_ns, t_last_ns;
  uint32_t tokens;
  int is_active, is_done_seen, is_error_event, is_failed, is_after_done;
  char pfx[NETBENCH_PFX];
  uint32_t plen;
  int prev_nl;
  uint64_t *gap_ns; /* this request's gaps, committed to the result if it ends ok */
  uint32_t n_gap, cap_gap;
} netbench_stream_t;

struct netbench_engine {
  const pd_netbench_run_t *run;
  pd_netbench_result_t *res;
  CURLM *multi;
  int ep;
  uint64_t timer_ns; /* libcurl's timeout; UINT64_MAX: none */
  netbench_stream_t *streams;
  struct curl_slist *hdrs;
  uint32_t started, finished;
  uint32_t *idle; /* slots with no request, a stack */
  uint32_t n_idle;
  uint64_t room;
  uint64_t cap_gap; /* capacity of res->gap_ns */
  /* the batch being run: the warm-up round, then the measured one */
  uint32_t requests, tokens;
  int is_recording;
  uint64_t t0_ns, stagger_ns; /* first round: request i starts at t0 + i x stagger */
};

uint64_t pd_netbench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((format(printf, 2, 3))) static void note_error(netbench_engine_t *e, const char *fmt,
                                                             ...) {
  if (e->res->first_error[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->res->first_error, sizeof e->res->first_error, fmt, ap);
  va_end(ap);
}

/* ---------- SSE counting ---------- */

static int has_prefix(const netbench_stream_t *s, const char *p) {
  size_t n = strlen(p);
  return s->plen >= n && memcmp(s->pfx, p, n) == 0;
}

static void event_end(netbench_stream_t *s, uint64_t now) {
  netbench_engine_t *e = s->e;
  if (!has_prefix(s, "data:")) return; /* comment or other field */
  if (has_prefix(s, "data: [DONE]")) {
    s->is_done_seen = 1;
    return;
  }
  if (has_prefix(s, "data: {\"error\"")) {
    s->is_error_event = 1;
    return;
  }
  if (s->is_done_seen) s->is_after_done = 1;
  s->tokens++;
  e->res->events++;
  if (s->tokens == 1) {
    s->t_first_ns = s->t_last_ns = now;
    return; /* TTFT is recorded when the request ends ok */
  }
  uint64_t gap = now - s->t_last_ns;
  s->t_last_ns = now;
  if (!e->is_recording) return;
  if (s->n_gap < s->cap_gap) s->gap_ns[s->n_gap++] = gap;
}

static void pfx_add(netbench_stream_t *s, const char *p, size_t n) {
  size_t k = NETBENCH_PFX - s->plen < n ? NETBENCH_PFX - s->plen : n;
  memcpy(s->pfx + s->plen, p, k);
  s->plen += (uint32_t)k;
}

static size_t body_cb(char *p, size_t size, size_t nmemb, void *ud) {
  netbench_stream_t *s = ud;
  size_t len = size * nmemb, i = 0;
  uint64_t now = pd_netbench_now_ns();
  s->e->res->reads++;
  while (i < len) { /* bounded: i grows every pass */
    const char *nl = memchr(p + i, '\n', len - i);
    if (!nl) {
      pfx_add(s, p + i, len - i);
      s->prev_nl = 0;
      break;
    }
    size_t seg = (size_t)(nl - (p + i)) + 1;
    if (seg == 1 && s->prev_nl) {
      event_end(s, now);
      s->plen = 0;
      s->prev_nl = 0;
    } else {
      pfx_add(s, p + i, seg);
      s->prev_nl = 1;
    }
    i += seg;
  }
  return len;
}

static size_t discard_cb(char *p, size_t size, size_t nmemb, void *ud) {
  (void)p;
  (void)ud;
  return size * nmemb;
}

/* ---------- libcurl plumbing ---------- */

static int sock_cb(CURL *easy, curl_socket_t fd, int what, void *ud, void *sockp) {
  (void)easy;
  (void)sockp;
  netbench_engine_t *e = ud;
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(e->ep, EPOLL_CTL_DEL, fd, NULL);
    return 0;
  }
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.data.fd = fd;
  ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
  if (epoll_ctl(e->ep, EPOLL_CTL_MOD, fd, &ev) < 0 && errno == ENOENT)
    epoll_ctl(e->ep, EPOLL_CTL_ADD, fd, &ev);
  return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *ud) {
  (void)multi;
  netbench_engine_t *e = ud;
  e->timer_ns =
      timeout_ms < 0 ? UINT64_MAX : pd_netbench_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  return 0;
}

static CURL *easy_new(netbench_engine_t *e, netbench_stream_t *s, const char *url,
                      int is_measured) {
  CURL *c = curl_easy_init();
  if (!c) return NULL;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PRIVATE, s);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, e->hdrs);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, s->body);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, is_measured ? body_cb : discard_cb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
  return c;
}

static int n_legs(const netbench_engine_t *e) {
  return e->run->path == PD_NETBENCH_PD ? 2 : 1;
}

static void body_fill(netbench_engine_t *e, netbench_stream_t *s) {
  const pd_netbench_run_t *r = e->run;
  char pd[160] = "";
  if (r->path == PD_NETBENCH_PD)
    snprintf(pd, sizeof pd,
             ",\"bootstrap_host\":\"127.0.0.1\",\"bootstrap_port\":%u,\"bootstrap_room\":%" PRIu64,
             (unsigned)r->bootstrap_port, e->room++);
  snprintf(s->body, sizeof s->body,
           "{\"text\":\"pdref gateway bench\",\"stream\":true,"
           "\"sampling_params\":{\"max_new_tokens\":%u}%s}",
           (unsigned)e->tokens, pd);
}

/* The request in slot s is over (every leg finished): judge it, count it, free the slot. */
static void stream_finish(netbench_engine_t *e, netbench_stream_t *s) {
  pd_netbench_result_t *r = e->res;
  s->is_active = 0;
  e->finished++;
  e->idle[e->n_idle++] = (uint32_t)(s - e->streams);
  if (!s->is_failed) {
    s->is_failed = 1;
    if (s->is_error_event)
      note_error(e, "stream: an SSE error event");
    else if (!s->is_done_seen)
      note_error(e, "stream: no data: [DONE]");
    else if (s->is_after_done)
      note_error(e, "stream: data after [DONE]");
    else if (s->tokens != e->tokens)
      note_error(e, "stream: %u token events, expected %u", (unsigned)s->tokens,
                 (unsigned)e->tokens);
    else
      s->is_failed = 0;
  }
  if (s->is_failed) {
    r->errors++;
  } else {
    r->ok++;
    if (e->is_recording && r->ttft_ns) r->ttft_ns[r->n_ttft++] = s->t_first_ns - s->t_start_ns;
    for (uint32_t i = 0; i < s->n_gap && r->n_gap < e->cap_gap; i++)
      r->gap_ns[r->n_gap++] = s->gap_ns[i];
  }
  if (e->run->on_progress && e->is_recording)
    e->run->on_progress(e->run->ud, e->finished, e->requests);
}

/* Start the next request in an idle slot. A leg libcurl refuses fails the request. */
static void stream_start(netbench_engine_t *e) {
  netbench_stream_t *s = &e->streams[e->idle[--e->n_idle]];
  e->started++;
  body_fill(e, s);
  s->tokens = s->n_gap = s->plen = 0;
  s->is_done_seen = s->is_error_event = s->is_failed = s->is_after_done = s->prev_nl = 0;
  s->t_start_ns = s->t_first_ns = pd_netbench_now_ns();
  s->is_active = 1;
  for (int k = n_legs(e) - 1; k >= 0; k--) { /* PD: both legs go out in the same turn */
    curl_easy_setopt(s->easy[k], CURLOPT_POSTFIELDSIZE, (long)strlen(s->body));
    if (curl_multi_add_handle(e->multi, s->easy[k]) != CURLM_OK) {
      note_error(e, "client: curl_multi_add_handle failed");
      s->is_failed = 1;
      continue;
    }
    s->is_live[k] = 1;
  }
  if (!s->is_live[0] && !s->is_live[1]) stream_finish(e, s);
}

static void leg_done(netbench_engine_t *e, CURL *easy, CURLcode rc) {
  char *priv = NULL;
  curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
  netbench_stream_t *s = (netbench_stream_t *)(void *)priv;
  if (!s) return;
  int k = s->easy[1] == easy ? 1 : 0;
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  curl_multi_remove_handle(e->multi, easy);
  s->is_live[k] = 0;
  const char *who = k ? "prefill leg" : "stream";
  if (rc != CURLE_OK) {
    note_error(e, "%s: %s (curl %d)", who, curl_easy_strerror(rc), (int)rc);
    s->is_failed = 1;
  } else if (status != 200) {
    note_error(e, "%s: HTTP %ld", who, status);
    s->is_failed = 1;
  }
  if (!s->is_live[0] && !s->is_live[1]) stream_finish(e, s);
}

/* Cut every open request (deadline or stop): each counts as an error. */
static void cut_all(netbench_engine_t *e, const char *why) {
  for (uint32_t i = 0; i < e->run->concurrency; i++) {
    netbench_stream_t *s = &e->streams[i];
    if (!s->is_active) continue;
    for (int k = 0; k < 2; k++)
      if (s->is_live[k]) {
        curl_multi_remove_handle(e->multi, s->easy[k]);
        s->is_live[k] = 0;
      }
    note_error(e, "%s", why);
    s->is_failed = 1;
    stream_finish(e, s);
  }
}

static void drain_info(netbench_engine_t *e) {
  int left = 0;
  for (uint32_t i = 0; i < NETBENCH_MAX_INFO_PER_TURN; i++) {
    CURLMsg *m = curl_multi_info_read(e->multi, &left);
    if (!m) break;
    if (m->msg == CURLMSG_DONE) leg_done(e, m->easy_handle, m->data.result);
  }
}

/* One turn: start what may start, sleep until a socket or libcurl's timer, act on both. */
static void turn(netbench_engine_t *e, uint64_t deadline_ns) {
  int running = 0;
  uint64_t now = pd_netbench_now_ns(), next_start = UINT64_MAX;
  while (e->n_idle && e->started < e->requests) { /* bounded by requests */
    if (e->started < e->run->concurrency && e->stagger_ns) {
      next_start = e->t0_ns + e->started * e->stagger_ns;
      if (next_start > now) break;
      next_start = UINT64_MAX;
    }
    stream_start(e);
  }
  now = pd_netbench_now_ns(); /* after the starts: libcurl's timer is due now, wait 0 */
  uint64_t until = e->timer_ns < deadline_ns ? e->timer_ns : deadline_ns;
  if (next_start < until) until = next_start;
  int wait_ms = until <= now ? 0 : (int)((until - now + 999999u) / 1000000u);
  if (wait_ms > NETBENCH_MAX_WAIT_MS) wait_ms = NETBENCH_MAX_WAIT_MS;
  struct epoll_event evs[NETBENCH_EPOLL_BATCH];
  int n = epoll_wait(e->ep, evs, NETBENCH_EPOLL_BATCH, wait_ms);
  for (int i = 0; i < n; i++) {
    int flags = (evs[i].events & (EPOLLIN | EPOLLHUP) ? CURL_CSELECT_IN : 0) |
                (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
    curl_multi_socket_action(e->multi, evs[i].data.fd, flags, &running);
  }
  if (e->timer_ns <= pd_netbench_now_ns()) {
    e->timer_ns = UINT64_MAX;
    curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  }
  drain_info(e);
}

static int engine_init(netbench_engine_t *e, const pd_netbench_run_t *run,
                       pd_netbench_result_t *res) {
  uint32_t c = run->concurrency;
  e->run = run;
  e->res = res;
  e->timer_ns = UINT64_MAX;
  e->room = run->first_room;
  e->ep = epoll_create1(EPOLL_CLOEXEC);
  e->multi = curl_multi_init();
  e->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
  if (e->hdrs) e->hdrs = curl_slist_append(e->hdrs, "Expect:");
  e->streams = calloc(c, sizeof *e->streams);
  e->idle = calloc(c, sizeof *e->idle);
  if (e->ep < 0 || !e->multi || !e->hdrs) return PD_ERR_IO;
  if (!e->streams || !e->idle) return PD_ERR_NOMEM;
  curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
  curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
  curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
  curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, (long)(2 * c + 16));
  uint32_t per_stream = run->tokens - 1;
  if (run->is_recording && per_stream > PD_NETBENCH_MAX_GAPS / c)
    per_stream = PD_NETBENCH_MAX_GAPS / c;
  uint64_t want_gaps = (uint64_t)run->requests * (run->tokens - 1);
  e->cap_gap =
      run->is_recording ? (want_gaps < PD_NETBENCH_MAX_GAPS ? want_gaps : PD_NETBENCH_MAX_GAPS) : 0;
  if (run->is_recording) {
    res->ttft_ns = calloc(run->requests, sizeof *res->ttft_ns);
    res->gap_ns = calloc(e->cap_gap ? e->cap_gap : 1, sizeof *res->gap_ns);
    if (!res->ttft_ns || !res->gap_ns) return PD_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < c; i++) {
    netbench_stream_t *s = &e->streams[i];
    s->e = e;
    e->idle[e->n_idle++] = c - 1 - i;
    s->easy[0] = easy_new(e, s, run->url, 1);
    if (!s->easy[0]) return PD_ERR_NOMEM;
    if (run->path == PD_NETBENCH_PD && !(s->easy[1] = easy_new(e, s, run->prefill_url, 0)))
      return PD_ERR_NOMEM;
    if (run->is_recording && per_stream) {
      s->cap_gap = per_stream;
      if (!(s->gap_ns = calloc(per_stream, sizeof *s->gap_ns))) return PD_ERR_NOMEM;
    }
  }
  return 0;
}

static void engine_free(netbench_engine_t *e) {
  for (uint32_t i = 0; e->streams && i < e->run->concurrency; i++) {
    netbench_stream_t *s = &e->streams[i];
    for (int k = 0; k < 2; k++) {
      if (!s->easy[k]) continue;
      if (s->is_live[k] && e->multi) curl_multi_remove_handle(e->multi, s->easy[k]);
      curl_easy_cleanup(s->easy[k]);
    }
    free(s->gap_ns);
  }
  if (e->multi) curl_multi_cleanup(e->multi);
  if (e->ep >= 0) close(e->ep);
  curl_slist_free_all(e->hdrs);
  free(e->streams);
  free(e->idle);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Run `requests` requests of `tokens` tokens on the engine's slots, until done, stopped or
 * past the deadline; errors land in e->res. */
static void batch(netbench_engine_t *e, uint32_t requests, uint32_t tokens, int is_recording,
                  uint64_t deadline_ns) {
  e->requests = requests;
  e->tokens = tokens;
  e->is_recording = is_recording;
  e->started = e->finished = 0;
  e->t0_ns = pd_netbench_now_ns();
  e->stagger_ns = is_recording ? e->run->stagger_ns : 0;
  /* bounded: every turn waits at most NETBENCH_MAX_WAIT_MS, and the deadline ends the loop */
  while (e->finished < requests) {
    if (e->run->stop && *e->run->stop) {
      cut_all(e, "interrupted");
      break;
    }
    if (pd_netbench_now_ns() >= deadline_ns) {
      cut_all(e, "timed out: the run's bound passed with requests still open");
      break;
    }
    turn(e, deadline_ns);
  }
  e->res->errors += requests - e->finished; /* never started (stop or deadline) */
}

int pd_netbench_run(const pd_netbench_run_t *run, pd_netbench_result_t *res) {
  memset(res, 0, sizeof *res);
  if (!run || !run->url || run->concurrency == 0 ||
      run->concurrency > PD_NETBENCH_MAX_CONCURRENCY || run->requests == 0 ||
      run->requests > PD_NETBENCH_MAX_REQUESTS || run->tokens == 0 ||
      run->tokens > PD_NETBENCH_MAX_TOKENS || (run->path == PD_NETBENCH_PD && !run->prefill_url))
    return PD_ERR_INVAL;
  netbench_engine_t e;
  memset(&e, 0, sizeof e);
  e.ep = -1;
  int rc = engine_init(&e, run, res);
  if (rc) {
    e.run = run;
    engine_free(&e);
    return rc;
  }
  uint64_t deadline = pd_netbench_now_ns() + run->timeout_ns;
  if (run->is_warmup) { /* one unmeasured request per slot: connections open, pools warm */
    pd_netbench_result_t warm;
    memset(&warm, 0, sizeof warm);
    e.res = &warm;
    batch(&e, run->concurrency, 1, 0, deadline);
    res->warmup_errors = warm.errors;
    if (warm.first_error[0])
      snprintf(res->first_error, sizeof res->first_error, "warm-up: %.180s", warm.first_error);
    e.res = res;
  }
  uint64_t t0 = pd_netbench_now_ns();
  batch(&e, run->requests, run->tokens, run->is_recording, deadline);
  res->wall_ns = pd_netbench_now_ns() - t0;
  engine_free(&e);
  if (res->ttft_ns) qsort(res->ttft_ns, res->n_ttft, sizeof *res->ttft_ns, cmp_u64);
  if (res->gap_ns) qsort(res->gap_ns, res->n_gap, sizeof *res->gap_ns, cmp_u64);
  return 0;
}

void pd_netbench_result_free(pd_netbench_result_t *res) {
  if (!res) return;
  free(res->ttft_ns);
  free(res->gap_ns);
  res->ttft_ns = res->gap_ns = NULL;
  res->n_ttft = res->n_gap = 0;
}

uint64_t pd_netbench_percentile(const uint64_t *v, uint64_t n, double p) {
  if (!n) return 0;
  double rank = p / 100.0 * (double)n;
  uint64_t k = (uint64_t)rank;
  if ((double)k < rank) k++; /* ceil: nearest rank */
  if (k < 1) k = 1;
  if (k > n) k = n;
  return v[k - 1];
}

/* ---------- the processes under test ---------- */

int pd_netbench_child_start(pd_netbench_child_t *c, const char *exe, char *const args[],
                            const char *err_path, char *line, size_t cap, uint32_t timeout_ms,
                            const volatile sig_atomic_t *stop) {
  pd_proc_opts_t o = {.err_path = err_path, .is_err_append = 1, .is_group = 1};
  if (pd_proc_spawn(c, exe, args, &o) != 0) return -1;
  return pd_proc_read_line(c, line, cap, timeout_ms, stop);
}

void pd_netbench_child_stop(pd_netbench_child_t *c, uint32_t timeout_ms) {
  pd_proc_stop(c, timeout_ms);
}

long pd_netbench_proc_hwm_kib(pid_t pid) {
  char path[64], line[256];
  long kib = 0;
  snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  while (fgets(line, sizeof line, f)) /* bounded: the file is finite */
    if (!strncmp(line, "VmHWM:", 6)) kib = strtol(line + 6, NULL, 10);
  fclose(f);
  return kib;
}

double pd_netbench_proc_cpu_s(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
  unsigned long long ut = 0, st = 0;
  /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
   */
  if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return 0;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The process group of pid (field 5 of /proc/pid/stat), or -1. */
static long proc_pgrp(long pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')');
  long pgrp = -1;
  if (!p || sscanf(p + 1, " %*c %*d %ld", &pgrp) != 1) return -1;
  return pgrp;
}

/* Sum of f over the members of group pgid (each /proc entry read once; bounded by the
 * directory's size). */
static double group_sum(pid_t pgid, int is_rss) {
  DIR *d = opendir("/proc");
  if (!d) return 0;
  double sum = 0;
  for (struct dirent *e = readdir(d); e; e = readdir(d)) {
    char *end = NULL;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0 || proc_pgrp(pid) != (long)pgid) continue;
    sum += is_rss ? (double)pd_netbench_proc_hwm_kib((pid_t)pid) : pd_netbench_proc_cpu_s((pid_t)pid);
  }
  closedir(d);
  return sum;
}

long pd_netbench_group_hwm_kib(pid_t pgid) { return (long)group_sum(pgid, 1); }
double pd_netbench_group_cpu_s(pid_t pgid) { return group_sum(pgid, 0); }
