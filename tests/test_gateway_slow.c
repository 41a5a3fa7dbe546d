/* A client that stops reading, against the real-socket gateway (tests/pdt_gateway.h): the
 * gateway holds decode back instead of buffering the stream, and loses nothing when the
 * client reads again. Every wait is bounded. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pdt_gateway.h"

typedef struct slow {
  int paused_until_told; /* write_cb answers PAUSE while set */
  char carry[256];       /* a partial event */
  size_t clen;
  int next, bad, done, events;
} slow_t;

static void slow_event(slow_t *s, const char *ev) {
  s->events++;
  if (!strcmp(ev, "data: [DONE]")) {
    s->done++;
    return;
  }
  int n = -1;
  if (sscanf(ev, "data: {\"text\":\"t%d\"", &n) != 1 || n != s->next) s->bad++;
  s->next = n + 1;
}

static size_t slow_write(char *p, size_t size, size_t n, void *ud) {
  slow_t *s = ud;
  size_t len = size * n;
  if (s->paused_until_told) return CURL_WRITEFUNC_PAUSE;
  for (size_t i = 0; i < len; i++) {
    if (s->clen + 1 >= sizeof s->carry) {
      s->bad++;
      s->clen = 0;
    }
    s->carry[s->clen++] = p[i];
    if (s->clen >= 2 && s->carry[s->clen - 1] == '\n' && s->carry[s->clen - 2] == '\n') {
      s->carry[s->clen - 2] = 0;
      slow_event(s, s->carry);
      s->clen = 0;
    }
  }
  return len;
}

static int small_rcvbuf(void *ud, curl_socket_t fd, curlsocktype purpose) {
  (void)ud;
  (void)purpose;
  int v = 4096; /* the kernel holds little for this client: the gateway must */
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
  return CURL_SOCKOPT_OK;
}

static long metric(uint16_t port, const char *name) {
  static resp_t r;
  memset(&r, 0, sizeof r);
  http(port, "GET", "/metrics", NULL, 0, &r);
  char key[128];
  snprintf(key, sizeof key, "\n%s ", name);
  const char *at = strstr(r.body, key);
  return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

/* A client that stops reading mid-stream: the gateway stops reading decode (backpressure)
 * instead of buffering the stream, and holds at most about PD_GATEWAY_HTTP_PAUSE_BYTES for it; when
 * the client reads again every event arrives, in order, once. */
static void test_slow_client_backpressure(void) {
  enum { TOKENS = 200000 }; /* ~10 MB of SSE: more than the kernel buffers on the way */
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, TOKENS, 0) == 0);
  /* idle 200 ms, the client pauses 500 ms: the stall is the client's, so the core's idle
     deadline waits while decode is held back (PD_EV_CLIENT_BLOCKED), and nothing is cut */
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 200, 0, 0}, &p, 1, &d, 1) == 0) {
    char url[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/generate", (unsigned)g.port);
    static slow_t s;
    memset(&s, 0, sizeof s);
    s.paused_until_told = 1;
    CURLM *m = curl_multi_init();
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, stream_req);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, slow_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 1024L);
    curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, small_rcvbuf);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 120000L);
    curl_multi_add_handle(m, e);
    int running = 1;
    long buffered = -1, pauses = -1;
    /* bounded by time (120 s: 10 MB through ASan builds on a loaded 2-core machine) and by
       turns. The client stops reading for at least 0.5 s (more than the 200 ms idle timeout)
       and until the gateway has paused decode, which takes filling the kernel's buffers first
       (up to 10 s on a slow machine; past that, the assertion below fails). */
    uint64_t t0 = pdt_now_ms(), t_look = 0;
    int resumed = 0;
    for (int t = 0; t < 1000000 && running && pdt_now_ms() - t0 < 120000; t++) {
      curl_multi_perform(m, &running);
      curl_multi_poll(m, NULL, 0, 10, NULL);
      if (s.paused_until_told) sleep_ms(1); /* a paused transfer's socket stays readable, so the
                                               poll returns at once: do not burn the turns */
      uint64_t now = pdt_now_ms();
      if (!resumed && now - t0 >= 500 && now - t_look >= 50) {
        t_look = now;
        pauses = metric(g.port, "pdref_upstream_pauses_total");
        if (pauses < 1 && now - t0 < 10000) continue; /* decode not held back yet */
        resumed = 1;
        buffered = metric(g.port, "pdref_client_buffered_bytes_max");
        s.paused_until_told = 0;
        curl_easy_pause(e, CURLPAUSE_CONT);
      }
    }
    PDT_TRUE(pauses >= 1);
    PDT_TRUE(buffered >= 0 && buffered <= 64 * 1024); /* pause threshold + one read */
    PDT_EQ_INT(running, 0);
    PDT_EQ_INT(s.bad, 0); /* an SSE error event ("decode stalled") would count as bad */
    PDT_EQ_INT(s.next, TOKENS);
    PDT_EQ_INT(s.done, 1);
    curl_multi_remove_handle(m, e);
    curl_easy_cleanup(e);
    curl_multi_cleanup(m);
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

/* A raw HTTP/1.1 client on a socket with a small receive buffer: sends a stream request and
 * never reads. */
static int stuck_client(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int v = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  char req[256];
  int n = snprintf(req, sizeof req,
                   "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\n\r\n%s",
                   strlen(stream_req), stream_req);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) ||
      send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

/* A client that stops reading for good while its stream is written straight to its socket
 * (MHD keeps such a connection suspended, so its own idle timeout does not apply): the
 * gateway cuts it after --client-timeout-s and closes the connection, as for a stream MHD
 * writes. Without the cut, decode stays paused and the connection open until the total
 * timeout (600 s). */
static void test_stuck_client_cut(void) {
  fake_t p, d;
  gwrun_t g;
  /* the client reads all it gets for 1 s (the gateway's buffer runs dry at its first
     backpressure pause, and the stream goes direct), then nothing more */
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 2000000, 0) == 0);
  if (gw_start_ct(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0, 0, 0}, 1, &p, 1, &d, 1) == 0) {
    int fd = stuck_client(g.port);
    PDT_TRUE(fd >= 0);
    char got[8192];
    size_t n_got = 0;
    uint64_t t_read = pdt_now_ms();
    for (int i = 0; fd >= 0 && i < 1000000 && pdt_now_ms() - t_read < 1000; i++) {
      ssize_t r = recv(fd, got, sizeof got, MSG_DONTWAIT);
      if (r > 0) n_got += (size_t)r;
      if (r == 0) break;
      if (r < 0) sleep_ms(1);
    }
    PDT_TRUE(n_got >= 1024);
    long cut = 0;
    uint64_t t0 = pdt_now_ms(); /* bounded: 1 s of timeout, 1 s sweep, ASan on a busy box */
    while (fd >= 0 && cut < 1 && pdt_now_ms() - t0 < 20000) {
      sleep_ms(100);
      cut = metric(g.port, "pdref_slow_clients_total");
    }
    int is_closed = 0; /* what the socket holds, then its end: 10 s of its own after the cut
                          (the cut may come late on a busy box) */
    char buf[4096];
    uint64_t t1 = pdt_now_ms();
    for (int i = 0; fd >= 0 && i < 100000 && !is_closed && pdt_now_ms() - t1 < 10000; i++) {
      ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) is_closed = 1;
      if (r < 0 && !is_closed) sleep_ms(10);
    }
    PDT_TRUE(is_closed);
    PDT_TRUE(cut >= 1); /* the gateway's cut (MHD's own timeout would not count it) */
    if (fd >= 0) close(fd);
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

int pdt_suite_gateway_slow(void) {
  signal(SIGPIPE, SIG_IGN);
  static const pdt_case_t cases[] = {
      {"a client that stops reading pauses decode; nothing is lost when it reads again",
       test_slow_client_backpressure},
      {"a client that stops reading for good is cut after --client-timeout-s",
       test_stuck_client_cut},
  };
  return PDT_SUITE("gateway_slow", cases);
}
