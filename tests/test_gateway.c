/* The real-socket gateway (net/gateway/pd_gateway.h) against fake workers (tests/pdt_gateway.h):
 * streams pass through, retries, bad input, a client gone, local routes, the connection
 * limit, resets on reused connections, X-Request-Id. A client that stops reading is in
 * test_gateway_slow.c. Every wait is bounded. */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pdt_gateway.h"
#include "pdt_proc.h"

/* ---------- tests ---------- */

typedef struct bg_req {
  uint16_t port;
  resp_t r;
  CURLcode rc;
} bg_req_t;

static void *bg_stream(void *arg) {
  bg_req_t *b = arg;
  b->rc = http(b->port, "POST", "/generate", stream_req, 0, &b->r);
  return NULL;
}

/* R-ADMIT-*, over sockets: decode admits one request; while its stream runs, a second
 * request waits at the gateway (no leg sent) and is shed at its 200 ms queue deadline with
 * 503, Retry-After: 1 and a JSON body naming the limit; /metrics counts it by reason. */
static void test_admission_sheds_with_retry_after_and_metrics(void) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 20, 50) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0, 1, 200}, &p, 1, &d, 1) == 0) {
    static bg_req_t a;
    memset(&a, 0, sizeof a);
    a.port = g.port;
    pthread_t th;
    int started = pthread_create(&th, NULL, bg_stream, &a) == 0;
    PDT_TRUE(started);
    PDT_TRUE(wait_for(&d, &d.n_generate, 1, 3000)); /* the first stream holds decode */
    static resp_t r;
    memset(&r, 0, sizeof r);
    PDT_EQ_INT(http(g.port, "POST", "/generate", stream_req, 0, &r), CURLE_OK);
    PDT_EQ_INT(r.status, 503);
    PDT_EQ_INT(r.retry_after, 1);
    PDT_TRUE(strstr(r.body, "\"code\":\"admission_queue_") != NULL);
    PDT_TRUE(strstr(r.body, "admit_queue_ms 200") != NULL);
    PDT_EQ_INT(fake_get(&d, &d.n_generate), 1); /* no leg was sent for it */
    PDT_EQ_INT(fake_get(&p, &p.n_generate), 1);
    if (started) pthread_join(th, NULL);
    PDT_EQ_INT(a.rc, CURLE_OK);
    PDT_EQ_INT(a.r.status, 200);
    memset(&r, 0, sizeof r);
    http(g.port, "GET", "/metrics", NULL, 0, &r);
    PDT_TRUE(strstr(r.body, "pdref_admission_queued_total 1\n") != NULL);
    PDT_TRUE(strstr(r.body, "pdref_admission_shed_total{reason=\"queue_timeout\"} 1\n") != NULL ||
             strstr(r.body, "pdref_admission_shed_total{reason=\"queue_wait\"} 1\n") != NULL);
    PDT_TRUE(strstr(r.body, "pdref_admission_queue_length 0\n") != NULL);
    PDT_TRUE(strstr(r.body, "pdref_retry_denied_total 0\n") != NULL);
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

/* One streamed completion through a fresh gateway in mode m: every byte of decode's stream,
 * one request per worker, one rid for both legs where the mode sends one. */
static void stream_once(pd_mode_t m) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 5, 5) == 0);
  if (gw_start(&g, (gwopt_t){m, 0, 0, 0, 0, 0}, &p, 1, &d, 1) == 0) {
    static resp_t r;
    memset(&r, 0, sizeof r);
    PDT_EQ_INT(http(g.port, "POST", "/generate", stream_req, 0, &r), CURLE_OK);
    PDT_EQ_INT(r.status, 200);
    PDT_EQ_STR(r.ctype, "text/event-stream");
    char want[1024];
    expected_stream(5, want, sizeof want);
    PDT_EQ_STR(r.body, want);
    PDT_TRUE(wait_for(&p, &p.n_generate, 1, 2000)); /* pr1150's detached prefill may lag */
    PDT_EQ_INT(fake_get(&d, &d.n_generate), 1);
    if (m == PD_MODE_REFERENCE) {
      PDT_TRUE(strncmp(d.last_rid, "pdref-", 6) == 0);
      PDT_EQ_STR(p.last_rid, d.last_rid); /* one rid for both legs */
    }
    memset(&r, 0, sizeof r);
    http(g.port, "GET", "/metrics", NULL, 0, &r);
    PDT_TRUE(strstr(r.body, "pdref_requests_total{route=\"/generate\",status=\"200\"} 1\n") !=
             NULL);
    PDT_TRUE(strstr(r.body, "pdref_ttft_seconds_count 1\n") != NULL);
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

static void test_stream_passes_through(void) {
  for (int m = 0; m < PD_MODE_COUNT; m++)
    if (pd_mode_speaks((pd_mode_t)m, PD_PROTOCOL_SGLANG)) stream_once((pd_mode_t)m);
}

/* A decode that writes its events back to back: many arrive in one read of the gateway's,
 * and their chunks leave together when libcurl returns (g->defer): every byte, in order. */
static void test_burst_of_events_passes_through_whole(void) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 300, 0) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0, 0, 0}, &p, 1, &d, 1) == 0) {
    for (int i = 0; i < 3; i++) {
      static resp_t r;
      static char want[32768];
      memset(&r, 0, sizeof r);
      PDT_EQ_INT(http(g.port, "POST", "/generate", stream_req, 0, &r), CURLE_OK);
      PDT_EQ_INT(r.status, 200);
      expected_stream(300, want, sizeof want);
      PDT_EQ_STR(r.body, want);
    }
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

static void test_decode_503_retried_on_other_decode(void) {
  fake_t p, d[2];
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d[0], FAKE_503, 0, 0) == 0 &&
           fake_start(&d[1], FAKE_OK, 3, 0) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0, 0, 0}, &p, 1, d, 2) == 0) {
    static resp_t r;
    memset(&r, 0, sizeof r);
    PDT_EQ_INT(http(g.port, "POST", "/generate", stream_req, 0, &r), CURLE_OK);
    PDT_EQ_INT(r.status, 200);
    char want[1024];
    expected_stream(3, want, sizeof want);
    PDT_EQ_STR(r.body, want);
    PDT_EQ_INT(fake_get(&d[0], &d[0].n_generate), 1); /* round robin starts at d0: 503 */
    PDT_EQ_INT(fake_get(&d[1], &d[1].n_generate), 1); /* the retry excludes d0 */
    PDT_EQ_INT(fake_get(&p, &p.n_generate), 2);       /* one prefill per attempt */
    memset(&r, 0, sizeof r);
    http(g.port, "GET", "/metrics", NULL, 0, &r);
    PDT_TRUE(strstr(r.body, "pdref_retries_total 1\n") != NULL);
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d[0]);
  fake_stop(&d[1]);
}

static void test_bad_input_answers(void) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 1, 0) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 1024, 0, 0, 0, 0}, &p, 1, &d, 1) == 0) {
    static resp_t r;
    memset(&r, 0, sizeof r);
    http(g.port, "POST", "/generate", "{\"text\":", 0, &r); /* malformed JSON */
    PDT_EQ_INT(r.status, 400);
    PDT_EQ_STR(r.ctype, "application/json");
    PDT_TRUE(strstr(r.body, "\"invalid_request\"") && strstr(r.body, "malformed JSON"));
    memset(&r, 0, sizeof r);
    http(g.port, "POST", "/v1/completions", "[1,2]", 0, &r); /* not an object */
    PDT_EQ_INT(r.status, 400);
    memset(&r, 0, sizeof r);
    http(g.port, "GET", "/nope", NULL, 0, &r);
    PDT_EQ_INT(r.status, 404);
    PDT_TRUE(strstr(r.body, "\"unknown_route\"") != NULL);
    memset(&r, 0, sizeof r);
    http(g.port, "GET", "/generate", NULL, 0, &r);
    PDT_EQ_INT(r.status, 405);
    static char big[4096];
    memset(big, 'a', sizeof big - 1);
    for (int chunked = 0; chunked < 2; chunked++) { /* Content-Length, then chunked */
      memset(&r, 0, sizeof r);
      http(g.port, "POST", "/generate", big, chunked, &r);
      PDT_EQ_INT(r.status, 413);
      PDT_TRUE(strstr(r.body, "\"payload_too_large\"") != NULL);
    }
    PDT_EQ_INT(fake_get(&d, &d.n_generate), 0); /* none of it reached a worker */
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

static void test_client_gone_closes_decode_and_aborts(void) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 300, 20) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0, 0, 0}, &p, 1, &d, 1) == 0) {
    static resp_t r;
    memset(&r, 0, sizeof r);
    r.stop_after_events = 3;
    PDT_EQ_INT(http(g.port, "POST", "/generate", stream_req, 0, &r), CURLE_WRITE_ERROR);
    PDT_EQ_INT(r.status, 200);
    PDT_TRUE(wait_for(&d, &d.n_abort, 1, 3000));        /* POST /abort_request reached decode */
    PDT_TRUE(wait_for(&d, &d.n_closed_early, 1, 3000)); /* and its stream was cut */
    pthread_mutex_lock(&d.mu);
    PDT_EQ_STR(d.abort_rid, d.last_rid);
    pthread_mutex_unlock(&d.mu);
    memset(&r, 0, sizeof r);
    http(g.port, "GET", "/metrics", NULL, 0, &r);
    PDT_TRUE(strstr(r.body, "pdref_client_disconnects_total 1\n") != NULL);
    PDT_TRUE(strstr(r.body, "pdref_requests_in_flight 0\n") != NULL);
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

/* Read from fd until buf holds `until` (bounded: 3 s per read, at most 1000 reads). */
static size_t read_until(int fd, char *buf, size_t cap, const char *until, int n_until) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < 1000 && len + 1 < cap; i++) {
    int n_seen = 0;
    for (const char *q = buf; (q = strstr(q, until)) != NULL; q += strlen(until)) n_seen++;
    if (n_seen >= n_until) break;
    ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
    if (n <= 0) break;
    len += (size_t)n;
    buf[len] = '\0';
  }
  return len;
}

/* The watch on a client socket is kept between the requests of a keep-alive connection
 * (net/gateway, g->watch_fds): a client that leaves in the middle of its second stream on
 * one connection is still seen at once, its decode cut and aborted, as on the first. */
static void test_client_gone_on_a_kept_alive_connection(void) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 20, 20) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0, 0, 0}, &p, 1, &d, 1) == 0) {
    int fd = pdt_dial(g.port);
    PDT_TRUE(fd >= 0);
    struct timeval tv = {.tv_sec = 3};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[256], buf[32768];
    int n = snprintf(req, sizeof req,
                     "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(stream_req), stream_req);
    PDT_EQ_INT(send(fd, req, (size_t)n, MSG_NOSIGNAL), n); /* the first runs to its end */
    read_until(fd, buf, sizeof buf, "\r\n0\r\n\r\n", 1);
    PDT_TRUE(strstr(buf, "data: [DONE]") != NULL);
    PDT_EQ_INT(send(fd, req, (size_t)n, MSG_NOSIGNAL), n); /* the second is cut after 3 events */
    read_until(fd, buf, sizeof buf, "data:", 3);
    PDT_TRUE(strstr(buf, "HTTP/1.1 200") != NULL);
    close(fd);
    PDT_TRUE(wait_for(&d, &d.n_abort, 1, 3000));
    PDT_TRUE(wait_for(&d, &d.n_closed_early, 1, 3000));
    static resp_t r;
    memset(&r, 0, sizeof r);
    http(g.port, "GET", "/metrics", NULL, 0, &r);
    PDT_TRUE(strstr(r.body, "pdref_client_disconnects_total 1\n") != NULL);
    PDT_TRUE(strstr(r.body, "pdref_requests_in_flight 0\n") != NULL);
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

static void test_local_and_info_routes(void) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 1, 0) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_JOINED, 0, 0, 0, 0, 0}, &p, 1, &d, 1) == 0) {
    static resp_t r;
    const char *paths[] = {"/health", "/readiness", "/get_model_info", "/v1/models"};
    for (size_t i = 0; i < 4; i++) {
      memset(&r, 0, sizeof r);
      http(g.port, "GET", paths[i], NULL, 0, &r);
      PDT_EQ_INT(r.status, 200);
    }
    PDT_TRUE(strstr(r.body, "fake-model") != NULL); /* proxied from the prefill worker */
    PDT_EQ_INT(fake_get(&p, &p.n_info), 2);
    memset(&r, 0, sizeof r);
    http(g.port, "POST", "/generate", "{\"text\":\"x\"}", 0, &r); /* non-stream */
    PDT_EQ_INT(r.status, 200);
    PDT_EQ_STR(r.body, "{\"text\":\"abc\",\"meta_info\":{\"id\":\"x\"}}");
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

static void test_connection_limit_503(void) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 1, 0) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 1, 0, 0, 0}, &p, 1, &d, 1) == 0) {
    int s = socket(AF_INET, SOCK_STREAM, 0); /* holds the one allowed connection */
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(g.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    PDT_EQ_INT(connect(s, (struct sockaddr *)&sa, sizeof sa), 0);
    static resp_t r;
    /* once the gateway holds s (a loaded machine may take a while to accept it) */
    for (uint64_t end = pdt_now_ms() + 5000; pdt_now_ms() < end; sleep_ms(20)) {
      memset(&r, 0, sizeof r);
      http(g.port, "GET", "/health", NULL, 0, &r);
      if (r.status == 503) break;
    }
    PDT_EQ_INT(r.status, 503);
    PDT_TRUE(strstr(r.body, "connection limit") != NULL);
    close(s);
    /* the slot is free again once MHD saw the close (bounded by time) */
    for (uint64_t end = pdt_now_ms() + 5000; pdt_now_ms() < end; sleep_ms(20)) {
      memset(&r, 0, sizeof r);
      http(g.port, "GET", "/health", NULL, 0, &r);
      if (r.status == 200) break;
    }
    PDT_EQ_INT(r.status, 200);
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

/* A worker that reads a request and closes its reused keep-alive connection unanswered:
 * libcurl would send the same request (same rid, same room) again on a new connection. The
 * gateway refuses that resend and the leg fails as a reset (before or after decode committed
 * the stream: a retry, or the stream goes on; the client gets its 200 either way): the
 * worker never sees one rid twice. */
static void test_reset_on_reused_connection_not_resent(void) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 2, 0) == 0);
  p.drop_nth = 2;
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0, 0, 0}, &p, 1, &d, 1) == 0) {
    static resp_t r;
    for (int i = 0; i < 2; i++) {
      memset(&r, 0, sizeof r);
      PDT_EQ_INT(http(g.port, "POST", "/generate", stream_req, 0, &r), CURLE_OK);
      PDT_EQ_INT(r.status, 200);
      PDT_TRUE(wait_for(&p, &p.n_generate, i + 1, 2000));
      sleep_ms(50); /* prefill's connection back in the pool before the next request */
    }
    sleep_ms(100); /* room for a resent copy to arrive, were there one */
    pthread_mutex_lock(&p.mu);
    /* 2 when decode committed before the reset was seen, 3 when the core retried (a new
     * attempt, a new rid); without the refusal the resent copy repeats the second rid */
    int n = p.n_generate;
    PDT_TRUE(n == 2 || n == 3);
    for (int i = 0; i < n && i < 8; i++)
      for (int j = i + 1; j < n && j < 8; j++) PDT_TRUE(strcmp(p.rids[i], p.rids[j]) != 0);
    pthread_mutex_unlock(&p.mu);
    memset(&r, 0, sizeof r);
    http(g.port, "GET", "/metrics", NULL, 0, &r);
    PDT_TRUE(strstr(r.body, "pdref_upstream_resends_refused_total 1\n") != NULL);
    PDT_TRUE(strstr(r.body, "pdref_upstream_errors_total{role=\"prefill\",kind=\"reset\"} 1\n") !=
             NULL);
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

/* R1.28: X-Request-Id (and the trace headers) reach both legs; mini_lb posts the body alone. */
static void test_request_id_forwarded(void) {
  for (int m = PD_MODE_MINILB; m <= PD_MODE_REFERENCE; m++) {
    fake_t p, d;
    gwrun_t g;
    PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 2, 0) == 0);
    if (gw_start(&g, (gwopt_t){(pd_mode_t)m, 0, 0, 0, 0, 0}, &p, 1, &d, 1) == 0) {
      static resp_t r;
      memset(&r, 0, sizeof r);
      PDT_EQ_INT(http_h(g.port, "POST", "/generate", stream_req, 0, "X-Request-Id: client-7", &r),
                 CURLE_OK);
      PDT_EQ_INT(r.status, 200);
      PDT_TRUE(wait_for(&p, &p.n_generate, 1, 2000));
      const char *want = m == PD_MODE_MINILB ? "" : "client-7";
      pthread_mutex_lock(&p.mu);
      PDT_EQ_STR(p.last_xrid, want);
      pthread_mutex_unlock(&p.mu);
      pthread_mutex_lock(&d.mu);
      PDT_EQ_STR(d.last_xrid, want);
      pthread_mutex_unlock(&d.mu);
      gw_stop(&g);
    }
    fake_stop(&p);
    fake_stop(&d);
  }
}

/* A uuid4 as the gateway makes its own ids. */
static int looks_uuid4(const char *s) {
  static const char form[] = "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx";
  if (strlen(s) != sizeof form - 1) return 0;
  for (size_t i = 0; form[i]; i++) {
    int hex = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    if (form[i] == '-' ? s[i] != '-' : form[i] == '4' ? s[i] != '4' : form[i] == 'y' ? !strchr("89ab", s[i]) : !hex)
      return 0;
  }
  return 1;
}

/* R-XRID: the response carries the request's X-Request-Id, once: the client's when it sent
 * one, else one the gateway made, which is also the one both legs carried (SGLang family:
 * forwarded like a client's; vllm-toy-proxy: the core's own uuid on the legs is echoed). */
static void test_request_id_echoed_or_made(void) {
  static const pd_mode_t modes[] = {PD_MODE_PR1150, PD_MODE_REFERENCE, PD_MODE_MINILB,
                                    PD_MODE_VLLM_TOY_PROXY, PD_MODE_MOONCAKE_PROXY};
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    int is_vllm = modes[m] >= PD_MODE_VLLM_TOY_PROXY;
    const char *path = is_vllm ? "/v1/completions" : "/generate";
    const char *body = is_vllm ? "{\"prompt\":\"hi\",\"stream\":true}" : stream_req;
    fake_t p, d;
    gwrun_t g;
    PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 2, 0) == 0);
    if (gw_start(&g, (gwopt_t){modes[m], 0, 0, 0, 0, 0}, &p, 1, &d, 1) == 0) {
      static resp_t r, r2, r3;
      memset(&r, 0, sizeof r);
      PDT_EQ_INT(http_h(g.port, "POST", path, body, 0, "X-Request-Id: client-7", &r), CURLE_OK);
      PDT_EQ_STR(r.xrid, "client-7"); /* echoed, whatever the answer */
      PDT_EQ_INT(r.n_xrid, 1);
      memset(&r2, 0, sizeof r2);
      PDT_EQ_INT(http(g.port, "POST", path, body, 0, &r2), CURLE_OK);
      PDT_EQ_INT(r2.n_xrid, 1);
      PDT_TRUE(looks_uuid4(r2.xrid)); /* made: none was sent */
      if (modes[m] != PD_MODE_MINILB) { /* the made one is what the prefill leg carried */
        char seen[64] = "";
        for (int i = 0; i < 200 && strcmp(seen, r2.xrid) != 0; i++) { /* <= 2 s */
          if (i) sleep_ms(10);
          pthread_mutex_lock(&p.mu);
          snprintf(seen, sizeof seen, "%s", p.last_xrid);
          pthread_mutex_unlock(&p.mu);
        }
        PDT_EQ_STR(seen, r2.xrid);
        if (!is_vllm) { /* SGLang: both legs at once; the decode leg carried it too */
          pthread_mutex_lock(&d.mu);
          PDT_EQ_STR(d.last_xrid, r2.xrid);
          pthread_mutex_unlock(&d.mu);
        }
      }
      memset(&r3, 0, sizeof r3);
      PDT_EQ_INT(http(g.port, "GET", "/health", NULL, 0, &r3), CURLE_OK);
      PDT_TRUE(looks_uuid4(r3.xrid) && strcmp(r3.xrid, r2.xrid) != 0); /* one per request */
      gw_stop(&g);
    }
    fake_stop(&p);
    fake_stop(&d);
  }
}

int pdt_suite_gateway(void) {
  signal(SIGPIPE, SIG_IGN);
  static const pdt_case_t cases[] = {
      {"a streamed completion passes through with all bytes (all modes)",
       test_stream_passes_through},
      {"a burst of decode events in one read reaches the client whole and in order",
       test_burst_of_events_passes_through_whole},
      {"decode 503 before first token retries on the other decode",
       test_decode_503_retried_on_other_decode},
      {"bad JSON 400, unknown route 404, wrong method 405, oversize 413", test_bad_input_answers},
      {"client gone mid-stream closes decode and posts /abort_request",
       test_client_gone_closes_decode_and_aborts},
      {"client gone mid-stream on a kept-alive connection's second request: cut and aborted",
       test_client_gone_on_a_kept_alive_connection},
      {"health, readiness, info proxy, non-stream answer", test_local_and_info_routes},
      {"beyond --max-connections a client gets 503", test_connection_limit_503},
      {"a reset on a reused connection is not resent: no rid reaches a worker twice",
       test_reset_on_reused_connection_not_resent},
      {"X-Request-Id reaches both legs (not in minilb mode)", test_request_id_forwarded},
      {"X-Request-Id echoed, or made and sent to both legs (SGLang and vLLM families)",
       test_request_id_echoed_or_made},
      {"admission sheds with 503, Retry-After and a JSON body; /metrics counts it",
       test_admission_sheds_with_retry_after_and_metrics},
  };
  return PDT_SUITE("gateway", cases);
}
