/* Hostile HTTP input on the real sockets (issue 10; net/httpd/pd_httpd.h): the built `pdref gateway`
 * (a prefill and a decode mock behind it) and a `pdref mock` on its own, each started as a
 * child process on 127.0.0.1 ephemeral ports with a healthy stream running alongside. Every
 * input is sent with raw sockets; each test asserts the status and JSON body, the time to the
 * answer, the healthy stream unharmed, the processes alive, their descriptors back to the
 * baseline after, and a SIGTERM stop (HH_STOP_MS). Every wait is bounded. */
#include <errno.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pdt.h"
#include "pdt_curl.h"
#include "pdt_net.h"
#include "pdt_proc.h"

#define HH_LIMIT 64u    /* --max-connections in the lowered-limit tests */
#define HH_DEADLINE_S 1 /* --client-deadline-s */
#define HH_FD_SLACK 8   /* pooled upstream connections may come and go */
#define HH_BIG (9u * 1024u * 1024u)
#define HH_STOP_MS 5000u /* SIGTERM to exit */
/* A prompt answer: the alternatives wait for a 9 MiB body or the 10 s default deadline, so
 * 3 s tells them apart with room for a loaded 2-core machine under sanitizers. */
#define HH_ANSWER_MS 3000u

enum { P_PREFILL, P_DECODE, P_GW, P_MOCK, P_N };

/* --max-connections-per-peer for the gateway of the next hh_start (0: not given). */
static unsigned hh_per_peer;

typedef struct hh {
  pid_t pid[P_N];
  uint16_t port[P_N], boot_port;
  int base_fds[P_N];
  long base_rss_kb[P_N];
} hh_t;

/* ---------- processes ---------- */

/* The gateway and its two mocks, and a lone decode mock. limit/deadline 0: the defaults. */
static int hh_start(hh_t *h, unsigned limit, unsigned deadline) {
  memset(h, 0, sizeof *h);
  char bin[PATH_MAX + 8], ready[512], lim[16], dl[16], pre[96], dec[64];
  if (pdt_pdref_path(bin, sizeof bin) != 0) return -1;
  snprintf(lim, sizeof lim, "%u", limit);
  snprintf(dl, sizeof dl, "%u", deadline);
  char *pa[] = {bin, "mock", "--role", "prefill", "--listen", "127.0.0.1:0", "--bootstrap-port",
                "0", "--json", NULL};
  char *da[] = {bin, "mock", "--role", "decode", "--listen", "127.0.0.1:0", "--json", NULL};
  if ((h->pid[P_PREFILL] = pdt_spawn(pa, ready, sizeof ready, 10000)) < 0) return -1;
  h->port[P_PREFILL] = (uint16_t)pdt_json_uint(ready, "\"port\":");
  h->boot_port = (uint16_t)pdt_json_uint(ready, "\"bootstrap_port\":");
  if ((h->pid[P_DECODE] = pdt_spawn(da, ready, sizeof ready, 10000)) < 0) return -1;
  h->port[P_DECODE] = (uint16_t)pdt_json_uint(ready, "\"port\":");
  snprintf(pre, sizeof pre, "http://127.0.0.1:%u@%u", h->port[P_PREFILL], h->boot_port);
  snprintf(dec, sizeof dec, "http://127.0.0.1:%u", h->port[P_DECODE]);
  char *ga[16] = {bin, "gateway", "--prefill", pre, "--decode", dec, "--listen", "127.0.0.1:0",
                  "--json"};
  int k = 9;
  if (limit) ga[k++] = "--max-connections", ga[k++] = lim;
  if (deadline) ga[k++] = "--client-deadline-s", ga[k++] = dl;
  char pp[16];
  snprintf(pp, sizeof pp, "%u", hh_per_peer);
  if (hh_per_peer) ga[k++] = "--max-connections-per-peer", ga[k++] = pp;
  ga[k] = NULL;
  if ((h->pid[P_GW] = pdt_spawn(ga, ready, sizeof ready, 10000)) < 0) return -1;
  h->port[P_GW] = (uint16_t)pdt_json_uint(ready, "\"port\":");
  char *ma[] = {bin, "mock", "--role", "decode", "--direct", "--listen", "127.0.0.1:0", "--json",
                "--max-connections", limit ? lim : "0", "--client-deadline-s",
                deadline ? dl : "0", NULL};
  if ((h->pid[P_MOCK] = pdt_spawn(ma, ready, sizeof ready, 10000)) < 0) return -1;
  h->port[P_MOCK] = (uint16_t)pdt_json_uint(ready, "\"port\":");
  return 0;
}

/* SIGTERM each process; 0 when every one exited 0 within HH_STOP_MS (an ignored SIGTERM
 * fails; the limit is generous for a loaded machine under sanitizers). */
static int hh_stop(hh_t *h) {
  int bad = 0;
  for (int i = P_N; i-- > 0;) {
    if (h->pid[i] <= 0) continue;
    kill(h->pid[i], SIGTERM);
    int status = 0, done = pdt_reap(h->pid[i], HH_STOP_MS, &status) == 0;
    if (!done) fprintf(stderr, "test_hostile_http: process %d ignored SIGTERM for %u ms\n", i, HH_STOP_MS);
    bad += !done || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    h->pid[i] = 0;
  }
  return bad;
}

/* ---------- raw sockets ---------- */

/* Read what comes until the peer closes or limit_ms pass; returns bytes read. */
static size_t drain(int fd, char *out, size_t cap, unsigned limit_ms) {
  size_t len = 0;
  uint64_t end = pdt_now_ms() + limit_ms;
  char sink[4096];
  for (uint64_t now = pdt_now_ms(); now < end; now = pdt_now_ms()) {
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, (int)(end - now)) <= 0) break;
    char *dst = len + 1 < cap ? out + len : sink;
    size_t room = len + 1 < cap ? cap - 1 - len : sizeof sink;
    ssize_t n = recv(fd, dst, room, 0);
    if (n <= 0) break;
    if (dst != sink) len += (size_t)n;
  }
  if (cap) out[len] = 0;
  return len;
}

/* Send all of p (stops quietly when the server hangs up). */
static void send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return;
    p += k;
    n -= (size_t)k;
  }
}

static int count_of(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* One well-formed JSON error: a single status line with this status, JSON body naming it. */
static int is_json_error(const char *resp, int status) {
  char line[32], num[24];
  snprintf(line, sizeof line, "HTTP/1.1 %d ", status);
  snprintf(num, sizeof num, "%d", status);
  const char *body = strstr(resp, "\r\n\r\n");
  return strncmp(resp, line, strlen(line)) == 0 && count_of(resp, "HTTP/1.") == 1 &&
         strstr(resp, "application/json") && body && body[4] == '{' && strstr(body, "\"error\"") &&
         strstr(body, num);
}

/* ---------- the healthy stream ---------- */

typedef struct healthy {
  pthread_t th;
  uint16_t port;
  unsigned tokens, loops;
  volatile int stop;
  int ok, bad;
} healthy_t;

static void *healthy_main(void *arg) {
  healthy_t *hs = arg;
  char req[256], *resp = malloc(1 << 20);
  for (unsigned i = 0; resp && i < hs->loops && (i == 0 || !hs->stop); i++) {
    int body_n = snprintf(req, sizeof req, "{\"text\":\"x\",\"stream\":true,"
                          "\"sampling_params\":{\"max_new_tokens\":%u}}", hs->tokens);
    char head[160];
    int hn = snprintf(head, sizeof head, "POST /generate HTTP/1.1\r\nHost: x\r\nConnection: close"
                      "\r\nContent-Length: %d\r\n\r\n", body_n);
    int fd = pdt_dial(hs->port);
    if (fd < 0) { hs->bad++; continue; }
    send_all(fd, head, (size_t)hn);
    send_all(fd, req, (size_t)body_n);
    drain(fd, resp, 1 << 20, 15000);
    close(fd);
    if (strncmp(resp, "HTTP/1.1 200", 12) == 0 && strstr(resp, "data: [DONE]"))
      hs->ok++;
    else
      hs->bad++;
  }
  free(resp);
  return NULL;
}

static void healthy_start(healthy_t *hs, uint16_t port, unsigned tokens, unsigned loops) {
  memset(hs, 0, sizeof *hs);
  hs->port = port;
  hs->tokens = tokens;
  hs->loops = loops;
  pthread_create(&hs->th, NULL, healthy_main, hs);
}

static void healthy_join(healthy_t *hs) {
  hs->stop = 1;
  pthread_join(hs->th, NULL);
  PDT_TRUE(hs->ok >= 1);
  PDT_EQ_INT(hs->bad, 0);
}

/* GET /health answered 200 within HH_ANSWER_MS. */
static int health_ok(uint16_t port) {
  int fd = pdt_dial(port);
  if (fd < 0) return 0;
  const char *q = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  uint64_t t0 = pdt_now_ms();
  send_all(fd, q, strlen(q));
  char buf[512];
  drain(fd, buf, sizeof buf, HH_ANSWER_MS);
  close(fd);
  return strncmp(buf, "HTTP/1.1 200", 12) == 0 && pdt_now_ms() - t0 < HH_ANSWER_MS;
}

static void record_base(hh_t *h) {
  for (int i = 0; i < P_N; i++) {
    h->base_fds[i] = pdt_count_fds(h->pid[i]);
    h->base_rss_kb[i] = pdt_rss_kb(h->pid[i]);
  }
}

/* Every process alive, with its descriptors back near the baseline (waits up to 5 s: a
 * loaded sanitizer build closes 4,000 sockets slowly), and serving again. */
static void check_after(hh_t *h) {
  for (int i = 0; i < P_N; i++) {
    PDT_TRUE(pdt_is_alive(h->pid[i]));
    int n = pdt_count_fds(h->pid[i]);
    for (int k = 0; k < 100 && n > h->base_fds[i] + HH_FD_SLACK; k++) {
      pdt_sleep_ms(50);
      n = pdt_count_fds(h->pid[i]);
    }
    PDT_TRUE(n >= 0 && n <= h->base_fds[i] + HH_FD_SLACK);
    if (n > h->base_fds[i] + HH_FD_SLACK)
      fprintf(stderr, "test_hostile_http: process %d has %d fds, baseline %d\n", i, n,
              h->base_fds[i]);
    long rss = pdt_rss_kb(h->pid[i]); /* nothing held per flooded connection or dropped body */
    if (rss > 2 * h->base_rss_kb[i] + 32 * 1024)
      fprintf(stderr, "test_hostile_http: process %d RSS %ld kB, baseline %ld kB\n", i, rss,
              h->base_rss_kb[i]);
    PDT_TRUE(rss > 0 && rss <= 2 * h->base_rss_kb[i] + 32 * 1024);
  }
  int ok = 0;
  for (int k = 0; k < 3 && !ok; k++) ok = health_ok(h->port[P_GW]) && health_ok(h->port[P_MOCK]);
  if (!ok) fprintf(stderr, "test_hostile_http: /health not answered within %u ms after\n", HH_ANSWER_MS);
  PDT_TRUE(ok);
}

static int hh_setup(hh_t *h, unsigned limit, unsigned deadline) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 12000) {
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 12000 ? 12000 : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  signal(SIGPIPE, SIG_IGN);
  int rc = hh_start(h, limit, deadline);
  PDT_EQ_INT(rc, 0);
  if (rc) {
    hh_stop(h);
    return -1;
  }
  PDT_TRUE(health_ok(h->port[P_GW]) && health_ok(h->port[P_MOCK]));
  pdt_sleep_ms(50);
  record_base(h);
  return 0;
}

/* ---------- connection floods ---------- */

typedef struct flood_res {
  unsigned opened, refused, json503;
} flood_res_t;

/* Open n idle connections; within HH_ANSWER_MS of the last (or until want are refused), count those
 * refused (a close, or a 503 JSON) and then close them all. */
static flood_res_t flood(uint16_t port, unsigned n, unsigned want) {
  flood_res_t r = {0, 0, 0};
  struct pollfd *pf = calloc(n, sizeof *pf);
  if (!pf) return r;
  for (unsigned i = 0; i < n; i++) {
    pf[i].fd = pdt_dial(port);
    pf[i].events = POLLIN;
    r.opened += pf[i].fd >= 0;
  }
  uint64_t end = pdt_now_ms() + HH_ANSWER_MS;
  for (uint64_t now = pdt_now_ms(); now < end && r.refused < want; now = pdt_now_ms()) {
    if (poll(pf, n, (int)(end - now)) <= 0) break;
    for (unsigned i = 0; i < n; i++) {
      if (pf[i].fd < 0 || !pf[i].revents) continue;
      char buf[1024];
      ssize_t k = recv(pf[i].fd, buf, sizeof buf - 1, 0);
      buf[k > 0 ? k : 0] = 0;
      if (k > 0) {
        drain(pf[i].fd, buf + k, sizeof buf - (size_t)k, 200); /* the rest, to the close */
        r.json503 += is_json_error(buf, 503);
      }
      r.refused++;
      close(pf[i].fd);
      pf[i].fd = -1;
    }
  }
  for (unsigned i = 0; i < n; i++)
    if (pf[i].fd >= 0) close(pf[i].fd);
  free(pf);
  return r;
}

/* n connections to the gateway and to the mock, each with limit connections allowed (0: the
 * defaults) and a healthy stream holding one of them. */
static void flood_round(hh_t *h, unsigned limit, unsigned n_gw, unsigned n_mock) {
  healthy_t hg, hm;
  unsigned tokens = limit ? 150 : 400; /* outlasts the flood (~1 s at the defaults) */
  healthy_start(&hg, h->port[P_GW], tokens, 1);
  healthy_start(&hm, h->port[P_MOCK], tokens, 1);
  pdt_sleep_ms(150); /* both streams are under way */
  uint64_t t0 = pdt_now_ms();
  unsigned lim_gw = limit ? limit : 1024u, lim_mock = limit ? limit : 2048u;
  flood_res_t g = flood(h->port[P_GW], n_gw, n_gw - lim_gw + 1);
  flood_res_t m = flood(h->port[P_MOCK], n_mock, n_mock - lim_mock + 1);
  fprintf(stderr, "test_hostile_http: flood gw %u/%u refused (%u 503), mock %u/%u (%u 503), %llu ms\n",
          g.refused, g.opened, g.json503, m.refused, m.opened, m.json503,
          (unsigned long long)(pdt_now_ms() - t0));
  PDT_EQ_INT(g.opened, n_gw);
  PDT_EQ_INT(m.opened, n_mock);
  /* the healthy stream holds one connection, unless it is over already (slow builds) */
  PDT_TRUE(g.refused >= n_gw - lim_gw && g.refused <= n_gw - lim_gw + 1);
  PDT_TRUE(m.refused >= n_mock - lim_mock && m.refused <= n_mock - lim_mock + 1);
  PDT_TRUE(g.json503 >= 1);          /* past libmicrohttpd's own limit: closed */
  PDT_EQ_INT(m.json503, m.refused);  /* the mock counts at accept: 503 for each */
  healthy_join(&hg);
  healthy_join(&hm);
  check_after(h);
}

static void test_flood_limit_plus_one(void) {
  hh_t h;
  if (hh_setup(&h, HH_LIMIT, 0)) return;
  flood_round(&h, HH_LIMIT, HH_LIMIT + 1, HH_LIMIT + 1);
  PDT_EQ_INT(hh_stop(&h), 0);
}

static void test_flood_twice_the_limit(void) {
  hh_t h;
  if (hh_setup(&h, HH_LIMIT, 0)) return;
  flood_round(&h, HH_LIMIT, 2 * HH_LIMIT, 2 * HH_LIMIT);
  flood_round(&h, HH_LIMIT, 2 * HH_LIMIT, 2 * HH_LIMIT); /* and again: nothing leaked */
  PDT_EQ_INT(hh_stop(&h), 0);
}

/* The defaults: 1,024 (gateway) and 2,048 (mock: 2,049 idle connections wedged
 * libmicrohttpd 0.9.75 for good before it counted its own), at the limit + 1 and twice. */
static void test_flood_default_limits(void) {
  hh_t h;
  if (hh_setup(&h, 0, 0)) return;
  flood_round(&h, 0, 1024 + 1, 2048 + 1);
  flood_round(&h, 0, 2 * 1024, 2 * 2048);
  PDT_EQ_INT(hh_stop(&h), 0);
}

/* ---------- slowloris ---------- */

#define SLOW_N 20 /* per kind and target */

typedef struct slow {
  int fd;
  uint64_t t_open, t_end; /* t_end: the scan that saw the answer or the close */
  uint64_t t_quiet;       /* the last scan that saw nothing: the answer came after it */
  char resp[512];
  size_t len;
} slow_t;

static void slow_open(slow_t *s, uint16_t port, int is_body) {
  memset(s, 0, sizeof *s);
  s->fd = pdt_dial(port);
  s->t_open = s->t_quiet = pdt_now_ms();
  const char *h = is_body ? "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"
                          : "POST /generate HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  if (s->fd >= 0) send_all(s->fd, h, strlen(h));
}

/* Trickle one byte a 100 ms into every open connection; a connection ends at the first
 * byte of an answer or the close. At most limit_ms. */
static void slow_run(slow_t *v, size_t n, uint16_t port_a, uint16_t port_b, unsigned limit_ms) {
  uint64_t end = pdt_now_ms() + limit_ms;
  size_t open = n;
  unsigned probes = 0, probes_ok = 0;
  while (open && pdt_now_ms() < end) {
    for (size_t i = 0; i < n; i++) {
      if (v[i].fd < 0 || v[i].t_end) continue;
      send(v[i].fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      char buf[512];
      ssize_t k = recv(v[i].fd, buf, sizeof buf - 1, MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        v[i].t_quiet = pdt_now_ms();
        continue;
      }
      v[i].t_end = pdt_now_ms();
      if (k > 0) {
        memcpy(v[i].resp, buf, (size_t)k);
        v[i].len = drain(v[i].fd, v[i].resp + k, sizeof v[i].resp - (size_t)k, 200) + (size_t)k;
      }
      open--;
    }
    probes += 2; /* healthy clients keep being served meanwhile */
    probes_ok += health_ok(port_a) + health_ok(port_b);
    pdt_sleep_ms(100);
  }
  PDT_EQ_INT(probes_ok, probes);
  PDT_EQ_INT(open, 0);
}

static void test_slowloris_is_cut_at_the_deadline(void) {
  hh_t h;
  if (hh_setup(&h, HH_LIMIT, HH_DEADLINE_S)) return;
  healthy_t hg, hm;
  healthy_start(&hg, h.port[P_GW], 100, 4);
  healthy_start(&hm, h.port[P_MOCK], 100, 4);
  slow_t v[4 * SLOW_N];
  for (int i = 0; i < 4 * SLOW_N; i++)
    slow_open(&v[i], i % 2 ? h.port[P_MOCK] : h.port[P_GW], i / (2 * SLOW_N));
  slow_run(v, 4 * SLOW_N, h.port[P_GW], h.port[P_MOCK], 4000);
  unsigned n408 = 0;
  for (int i = 0; i < 4 * SLOW_N; i++) {
    /* cut between t_quiet and t_end: not before 0.9 s, and by 2 s (the scans are 100 ms
       apart plus the probes, which a loaded machine may slow; the cut is bracketed) */
    PDT_TRUE(v[i].fd >= 0 && v[i].t_end && v[i].t_end - v[i].t_open >= 900 &&
             v[i].t_quiet - v[i].t_open <= 2000);
    n408 += is_json_error(v[i].resp, 408);
    if (v[i].fd >= 0) close(v[i].fd);
  }
  PDT_EQ_INT(n408, 4 * SLOW_N);
  healthy_join(&hg);
  healthy_join(&hm);
  check_after(&h);
  PDT_EQ_INT(hh_stop(&h), 0);
}

/* ---------- oversized bodies and framing ---------- */

/* Send head, then body (raw bytes), read the answer; its time in *ms. */
static void exchange(uint16_t port, const char *head, const char *body, size_t blen, char *out,
                     size_t cap, uint64_t *ms) {
  uint64_t t0 = pdt_now_ms();
  int fd = pdt_dial(port);
  out[0] = 0;
  if (fd < 0) return;
  send_all(fd, head, strlen(head));
  if (body) send_all(fd, body, blen);
  drain(fd, out, cap, 2000);
  close(fd);
  *ms = pdt_now_ms() - t0;
}

/* HH_BIG bytes as chunks of 64 KiB with the last chunk (malloc'd), length in *len. */
static char *chunked_body(size_t *len) {
  size_t step = 65536, n = HH_BIG / step;
  char *b = malloc(n * (step + 16) + 8), *p = b;
  if (!b) return NULL;
  for (size_t i = 0; i < n; i++) {
    p += snprintf(p, 16, "%zx\r\n", step);
    memset(p, 'x', step);
    p += step;
    memcpy(p, "\r\n", 2);
    p += 2;
  }
  memcpy(p, "0\r\n\r\n", 5);
  *len = (size_t)(p + 5 - b);
  return b;
}

static void test_oversized_bodies_get_413_json(void) {
  hh_t h;
  if (hh_setup(&h, HH_LIMIT, 0)) return;
  healthy_t hg, hm;
  healthy_start(&hg, h.port[P_GW], 100, 3);
  healthy_start(&hm, h.port[P_MOCK], 100, 3);
  size_t clen = 0;
  char *chunked = chunked_body(&clen), *flat = malloc(HH_BIG), head[256], resp[2048];
  if (flat) memset(flat, 'x', HH_BIG);
  PDT_TRUE(chunked && flat);
  static const struct { const char *method, *path; int is_chunked; } in[] = {
      {"POST", "/generate", 1}, {"POST", "/no/such/route", 1}, {"POST", "/no/such/route", 0},
      {"GET", "/generate", 0},  {"GET", "/health", 1},
  };
  for (int t = 0; chunked && flat && t < 2; t++) {
    uint16_t port = h.port[t ? P_MOCK : P_GW];
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
      if (in[i].is_chunked)
        snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                 in[i].method, in[i].path);
      else
        snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %u\r\n\r\n",
                 in[i].method, in[i].path, HH_BIG);
      uint64_t ms = 9999;
      exchange(port, head, in[i].is_chunked ? chunked : flat, in[i].is_chunked ? clen : HH_BIG,
               resp, sizeof resp, &ms);
      if (!is_json_error(resp, 413) || ms >= HH_ANSWER_MS)
        fprintf(stderr, "test_hostile_http: %s %s %s to %s: %llu ms: %.200s\n", in[i].method,
                in[i].path, in[i].is_chunked ? "chunked" : "length", t ? "mock" : "gateway",
                (unsigned long long)ms, resp);
      PDT_TRUE(is_json_error(resp, 413));
      PDT_TRUE(ms < HH_ANSWER_MS);
    }
  }
  free(chunked);
  free(flat);
  healthy_join(&hg);
  healthy_join(&hm);
  check_after(&h);
  PDT_EQ_INT(hh_stop(&h), 0);
}

static void test_bad_framing_gets_one_400_json(void) {
  hh_t h;
  if (hh_setup(&h, HH_LIMIT, 0)) return;
  healthy_t hg, hm;
  healthy_start(&hg, h.port[P_GW], 100, 3);
  healthy_start(&hm, h.port[P_MOCK], 100, 3);
  static const char *const heads[] = {
      "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}",
      "POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      "POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n"
      "\r\n2\r\n{}\r\n0\r\n\r\n",
      "POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
      "chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      /* libmicrohttpd 0.9.75 alone wrote its HTML head twice for these */
      "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n{}",
      "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n{}",
      "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000000000000000\r\n\r\n{}",
  };
  char resp[2048];
  for (int t = 0; t < 2; t++)
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
      uint64_t ms = 9999;
      exchange(h.port[t ? P_MOCK : P_GW], heads[i], NULL, 0, resp, sizeof resp, &ms);
      if (!is_json_error(resp, 400) || ms >= HH_ANSWER_MS)
        fprintf(stderr, "test_hostile_http: framing %zu to %s: %llu ms: %.300s\n", i,
                t ? "mock" : "gateway", (unsigned long long)ms, resp);
      PDT_TRUE(is_json_error(resp, 400) && strstr(resp, "bad_framing"));
      PDT_TRUE(ms < HH_ANSWER_MS); /* answered, and the connection closed */
    }
  healthy_join(&hg);
  healthy_join(&hm);
  check_after(&h);
  PDT_EQ_INT(hh_stop(&h), 0);
}

/* Over-long request line and header block: 414 and 431 as JSON, not libmicrohttpd's HTML. */
static void test_long_line_and_head_get_json(void) {
  hh_t h;
  if (hh_setup(&h, HH_LIMIT, 0)) return;
  healthy_t hg, hm;
  healthy_start(&hg, h.port[P_GW], 100, 3);
  healthy_start(&hm, h.port[P_MOCK], 100, 3);
  enum { BIG = 40000 };
  char *line = malloc(BIG + 64), *head = malloc(BIG + 96), resp[2048];
  PDT_TRUE(line && head);
  if (line && head) {
    memcpy(line, "GET /", 5);
    memset(line + 5, 'a', BIG);
    snprintf(line + 5 + BIG, 59, " HTTP/1.1\r\nHost: x\r\n\r\n");
    snprintf(head, 64, "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ");
    size_t at = strlen(head);
    memset(head + at, 'a', BIG);
    snprintf(head + at + BIG, 8, "\r\n\r\n");
    for (int t = 0; t < 2; t++)
      for (int i = 0; i < 2; i++) {
        uint64_t ms = 9999;
        exchange(h.port[t ? P_MOCK : P_GW], i ? head : line, NULL, 0, resp, sizeof resp, &ms);
        if (!is_json_error(resp, i ? 431 : 414) || ms >= HH_ANSWER_MS)
          fprintf(stderr, "test_hostile_http: long %s to %s: %llu ms: %.300s\n",
                  i ? "head" : "line", t ? "mock" : "gateway", (unsigned long long)ms, resp);
        PDT_TRUE(is_json_error(resp, i ? 431 : 414));
        PDT_TRUE(ms < HH_ANSWER_MS);
      }
  }
  free(line);
  free(head);
  healthy_join(&hg);
  healthy_join(&hm);
  check_after(&h);
  PDT_EQ_INT(hh_stop(&h), 0);
}

/* ---------- wire exactness (issue 26) ---------- */

/* Send p (n bytes) on a new connection and read to the close (or limit_ms): 1 when the
 * server closed it. */
static int exchange_raw(uint16_t port, const char *p, size_t n, char *out, size_t cap) {
  int fd = pdt_dial(port);
  out[0] = 0;
  if (fd < 0) return 0;
  send_all(fd, p, n);
  size_t len = 0;
  int is_closed = 0;
  uint64_t end = pdt_now_ms() + 5000;
  for (uint64_t now = pdt_now_ms(); now < end && len + 1 < cap; now = pdt_now_ms()) {
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, (int)(end - now)) <= 0) break;
    ssize_t k = recv(fd, out + len, cap - 1 - len, 0);
    if (k <= 0) {
      is_closed = 1;
      break;
    }
    len += (size_t)k;
  }
  out[len] = 0;
  close(fd);
  return is_closed;
}

/* The response after the first one in resp (for a kept-alive exchange), or resp. */
static const char *second_response(const char *resp) {
  const char *p = strstr(resp + 1, "HTTP/1.1 ");
  return p ? p : resp;
}

typedef struct wire_case {
  const char *what;
  const char *req; /* sent as is; its length is given (a NUL inside) */
  size_t len;
  int n_before;     /* good responses before the refused one (a kept-alive connection) */
  const char *name; /* the header the 400 must name */
  int is_gw_only;
} wire_case_t;

#define WC(s) s, sizeof s - 1

/* Items 1 and 4 of issue 26: each answered by exactly one 400 JSON naming the header, the
 * connection closed (a smuggled request behind it is never answered), also when the bad
 * request is the second on a kept-alive connection. Before: the first two were answered
 * twice (a 400 for the 5-byte body, then a 200 for the hidden GET), the NUL and the folded
 * line were taken (X-Request-Id forwarded cut), the repeated and over-long X-Request-Id were
 * dropped without notice. */
static void test_wire_exactness(void) {
  hh_t h;
  if (hh_setup(&h, HH_LIMIT, 0)) return;
  char longx[600];
  int k = snprintf(longx, sizeof longx, "GET /health HTTP/1.1\r\nHost: x\r\nX-Request-Id: ");
  memset(longx + k, 'r', 300);
  snprintf(longx + k + 300, sizeof longx - (size_t)k - 300, "\r\nConnection: close\r\n\r\n");
  const wire_case_t cases[] = {
      {"blank before the colon of Transfer-Encoding, a GET hidden in the body",
       WC("POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: 5"
          "\r\n\r\n0\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n"),
       0, "Transfer-Encoding", 0},
      {"blank before the colon of Content-Length on a kept-alive connection",
       WC("GET /health HTTP/1.1\r\nHost: x\r\n\r\nPOST /generate HTTP/1.1\r\nHost: x\r\n"
          "Content-Length : 34\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n"),
       1, "Content-Length", 0},
      {"NUL in X-Request-Id",
       WC("GET /health HTTP/1.1\r\nHost: x\r\nX-Request-Id: ab\0cd\r\nConnection: close\r\n\r\n"),
       0, "X-Request-Id", 0},
      {"obsolete folded line",
       WC("GET /health HTTP/1.1\r\nHost: x\r\nX-Fold: one\r\n two\r\nConnection: close\r\n\r\n"), 0,
       "X-Fold", 0},
      {"X-Request-Id twice",
       WC("GET /health HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\r\nX-Request-Id: b\r\n"
          "Connection: close\r\n\r\n"),
       0, "X-Request-Id", 1},
      {"X-Request-Id twice on a kept-alive connection",
       WC("GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n"
          "X-Request-Id: a\r\nX-Request-Id: b\r\nConnection: close\r\n\r\n"),
       1, "X-Request-Id", 1},
      {"X-Request-Id of 300 bytes", longx, strlen(longx), 0, "X-Request-Id", 1},
  };
  char resp[4096];
  for (int t = 0; t < 2; t++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      const wire_case_t *c = &cases[i];
      if (t && c->is_gw_only) continue;
      int is_closed = exchange_raw(h.port[t ? P_MOCK : P_GW], c->req, c->len, resp, sizeof resp);
      const char *r = c->n_before ? second_response(resp) : resp;
      char quoted[64];
      snprintf(quoted, sizeof quoted, "'%s'", c->name);
      int ok = count_of(resp, "HTTP/1.1 ") == c->n_before + 1 && is_json_error(r, 400) &&
               strstr(r, quoted) && (c->n_before == 0 || strncmp(resp, "HTTP/1.1 200", 12) == 0);
      if (!ok || !is_closed)
        fprintf(stderr, "test_hostile_http: %s to %s: closed %d: %.600s\n", c->what,
                t ? "mock" : "gateway", is_closed, resp);
      PDT_TRUE(ok);
      PDT_TRUE(is_closed); /* no smuggled request answered after it */
    }
  check_after(&h);
  PDT_EQ_INT(hh_stop(&h), 0);
}

/* Issue 26 item 3: HH_LIMIT kept-alive connections, each idle after one answered request,
 * do not lock out a new client: at the limit the longest-idle one is closed to make room and
 * the newcomer is served. Before: 503 for every new client until the idle timeout. */
static void test_idle_keepalive_makes_room(void) {
  hh_t h;
  if (hh_setup(&h, HH_LIMIT, 0)) return;
  const char *q = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int t = 0; t < 2; t++) {
    uint16_t port = h.port[t ? P_MOCK : P_GW];
    int fds[HH_LIMIT], n_ok = 0;
    for (unsigned i = 0; i < HH_LIMIT; i++) { /* one request each, answered, kept alive */
      fds[i] = pdt_dial(port);
      char buf[512] = "";
      if (fds[i] >= 0) {
        send_all(fds[i], q, strlen(q));
        struct pollfd pf = {fds[i], POLLIN, 0};
        ssize_t k = poll(&pf, 1, 5000) > 0 ? recv(fds[i], buf, sizeof buf - 1, 0) : -1;
        buf[k > 0 ? k : 0] = 0;
      }
      n_ok += strncmp(buf, "HTTP/1.1 200", 12) == 0 && !strstr(buf, "close");
    }
    PDT_EQ_INT(n_ok, (int)HH_LIMIT);
    int served = 0;
    for (int k = 0; k < 3; k++) served += health_ok(port); /* newcomers, one after another */
    if (served != 3)
      fprintf(stderr, "test_hostile_http: %s: %d of 3 newcomers served at the limit\n",
              t ? "mock" : "gateway", served);
    PDT_EQ_INT(served, 3);
    int n_closed = 0; /* the oldest idle ones made the room: closed, with no answer */
    for (unsigned i = 0; i < HH_LIMIT; i++) {
      struct pollfd pf = {fds[i], POLLIN, 0};
      char c;
      if (fds[i] >= 0 && poll(&pf, 1, 0) > 0 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0) n_closed++;
    }
    PDT_TRUE(n_closed >= 1 && n_closed <= 3);
    for (unsigned i = 0; i < HH_LIMIT; i++)
      if (fds[i] >= 0) close(fds[i]);
  }
  check_after(&h);
  PDT_EQ_INT(hh_stop(&h), 0);
}

/* Issue 26 item 3, per peer: with --max-connections-per-peer 4 (of 64), one address that
 * holds 4 connections mid-request (heads trickling: a slowloris wave) gets 503
 * per_peer_limit for a fifth, while the gateway still has room; once those 4 are answered
 * and idle, a fifth from that address is served and its own longest-idle connection is closed
 * to make room. On 127.0.0.1 every client is the same "peer", so the test shows the bound
 * applies to one address and that eviction within it makes room; another address would
 * count apart (pd_httpd_peer_of: the IP, not the port). Before: the fifth was served at once
 * (no bound per address), so the first assertion fails. */
static void test_per_peer_bound(void) {
  hh_t h;
  hh_per_peer = 4;
  int rc = hh_setup(&h, HH_LIMIT, 0);
  hh_per_peer = 0;
  if (rc) return;
  uint16_t port = h.port[P_GW];
  int fds[4];
  for (int i = 0; i < 4; i++) { /* four heads begun, not ended: held, not evictable */
    fds[i] = pdt_dial(port);
    if (fds[i] >= 0) send_all(fds[i], "GET /health HTTP/1.1\r\n", 22);
  }
  pdt_sleep_ms(100); /* let the gate accept them (bounded: the answer below waits) */
  int fd = pdt_dial(port);
  char buf[1024] = "";
  if (fd >= 0) {
    const char *q = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    send_all(fd, q, strlen(q));
    drain(fd, buf, sizeof buf, HH_ANSWER_MS);
    close(fd);
  }
  PDT_TRUE(strncmp(buf, "HTTP/1.1 503", 12) == 0);
  PDT_TRUE(strstr(buf, "\"code\":\"per_peer_limit\"") != NULL);
  PDT_TRUE(strstr(buf, "application/json") != NULL);
  int n_ok = 0;
  for (int i = 0; i < 4; i++) { /* the heads end: answered, kept alive, idle */
    char r[512] = "";
    if (fds[i] >= 0) {
      send_all(fds[i], "Host: x\r\n\r\n", 11);
      struct pollfd pf = {fds[i], POLLIN, 0};
      ssize_t k = poll(&pf, 1, (int)HH_ANSWER_MS) > 0 ? recv(fds[i], r, sizeof r - 1, 0) : -1;
      r[k > 0 ? k : 0] = 0;
    }
    n_ok += strncmp(r, "HTTP/1.1 200", 12) == 0;
    if (strncmp(r, "HTTP/1.1 200", 12)) fprintf(stderr, "per-peer: held head %d: '%.400s'\n", i, r);
  }
  PDT_EQ_INT(n_ok, 4);
  PDT_TRUE(health_ok(port)); /* a fifth from the same address: room made by its own idle one */
  int n_closed = 0;
  for (int i = 0; i < 4; i++) {
    struct pollfd pf = {fds[i], POLLIN, 0};
    char c;
    if (fds[i] >= 0 && poll(&pf, 1, 0) > 0 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0) n_closed++;
  }
  PDT_EQ_INT(n_closed, 1);
  for (int i = 0; i < 4; i++)
    if (fds[i] >= 0) close(fds[i]);
  check_after(&h);
  PDT_EQ_INT(hh_stop(&h), 0);
}

/* Issue 26 item 6: after a peak of kept-alive connections (each after one answered request)
 * closes, RSS falls back near its baseline. Before: the gateway kept ~12.6 MB of freed
 * malloc pages (1,000 connections) and the mock ~65 MB (2,000), glibc's pages kept after the
 * free (docs/gateway.md, "Memory after a peak"). ASan's allocator keeps freed memory in its
 * quarantine, so under ASan only the peak is printed. */
#if defined(__SANITIZE_ADDRESS__)
#define HH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HH_ASAN 1
#endif
#endif
#define HH_PEAK_CONNS 1000u
#define HH_RSS_SLACK_KB (8 * 1024)

static long peak_then_rss(uint16_t port, pid_t pid, long base_kb) {
  static int fds[HH_PEAK_CONNS];
  const char *q = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  for (unsigned i = 0; i < HH_PEAK_CONNS; i++) {
    fds[i] = pdt_dial(port);
    if (fds[i] >= 0) send_all(fds[i], q, strlen(q));
  }
  for (unsigned i = 0; i < HH_PEAK_CONNS; i++) { /* every request answered: MHD holds them */
    char buf[512];
    struct pollfd pf = {fds[i], POLLIN, 0};
    if (fds[i] >= 0 && poll(&pf, 1, 5000) > 0) (void)!recv(fds[i], buf, sizeof buf, 0);
  }
  long peak = pdt_rss_kb(pid);
  for (unsigned i = 0; i < HH_PEAK_CONNS; i++)
    if (fds[i] >= 0) close(fds[i]);
  long rss = pdt_rss_kb(pid);
  for (int k = 0; k < 50 && rss > base_kb + HH_RSS_SLACK_KB; k++) { /* bounded: 5 s */
    pdt_sleep_ms(100);
    rss = pdt_rss_kb(pid);
  }
  fprintf(stderr, "test_hostile_http: RSS base %ld kB, peak %ld kB, after %ld kB\n", base_kb,
          peak, rss);
  return rss;
}

static void test_memory_after_a_peak(void) {
  hh_t h;
  if (hh_setup(&h, 0, 0)) return;
  for (int t = 0; t < 2; t++) {
    int p = t ? P_MOCK : P_GW;
    long rss = peak_then_rss(h.port[p], h.pid[p], h.base_rss_kb[p]);
#ifndef HH_ASAN
    PDT_TRUE(rss > 0 && rss <= h.base_rss_kb[p] + HH_RSS_SLACK_KB);
#else
    (void)rss;
#endif
  }
  check_after(&h);
  PDT_EQ_INT(hh_stop(&h), 0);
}

int pdt_suite_hostile_http(void) {
  static const pdt_case_t cases[] = {
      {"connection flood at the limit + 1: 503, serving, SIGTERM stops it", test_flood_limit_plus_one},
      {"connection flood at twice the limit", test_flood_twice_the_limit},
      {"connection flood at the default limits (mock 2x2048)", test_flood_default_limits},
      {"slowloris headers and bodies: 408 at the deadline, healthy served",
       test_slowloris_is_cut_at_the_deadline},
      {"oversized bodies (chunked, unknown route, wrong method): 413 JSON",
       test_oversized_bodies_get_413_json},
      {"bad framing (bad or two lengths, xchunked, both): one 400 JSON",
       test_bad_framing_gets_one_400_json},
      {"over-long request line and head: 414 and 431 JSON", test_long_line_and_head_get_json},
      {"wire exactness: smuggling by a blank before the colon, NUL, folding, X-Request-Id: one "
       "400 JSON naming the header", test_wire_exactness},
      {"idle kept-alive connections at the limit make room for a new client",
       test_idle_keepalive_makes_room},
      {"one address is bounded per peer; its own idle connection makes room",
       test_per_peer_bound},
      {"memory after a peak of kept-alive connections returns near the baseline",
       test_memory_after_a_peak},
  };
  return PDT_SUITE("hostile_http", cases);
}
