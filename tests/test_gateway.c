/* The real-socket gateway (net/pd_gateway.h) on 127.0.0.1 ephemeral ports: a tiny fake worker
 * (libmicrohttpd, a thread per connection) answers /generate with a fixed SSE stream, a 503,
 * or a slow stream, and records what it saw (requests, rids, aborts, early closes). The
 * gateway runs its loop in a thread; the client is blocking libcurl with timeouts. Every
 * wait is bounded. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pd_gateway.h"
#include "pdt.h"
#include "pdt_curl.h"

/* ---------- fake worker ---------- */

typedef enum { FAKE_OK = 0, FAKE_503 = 1 } fake_mode_t;

typedef struct fake {
  struct MHD_Daemon *d;
  uint16_t port;
  char url[64];
  fake_mode_t mode;
  int tokens;   /* data events before [DONE] */
  int token_ms; /* pause before each event after the first */
  pthread_mutex_t mu;
  int n_generate, n_abort, n_closed_early, n_info;
  int drop_nth; /* > 0: the n-th /generate is read, then its connection closed unanswered */
  char last_rid[64], abort_rid[64], last_xrid[64];
  char rids[8][64]; /* the first 8 /generate rids, in order */
} fake_t;

typedef struct fake_req {
  fake_t *f;
  char body[8192];
  size_t len;
  int is_generate, next;
} fake_req_t;

static int event_text(int i, int tokens, char *out, size_t cap) {
  if (i >= tokens) return snprintf(out, cap, "data: [DONE]\n\n");
  return snprintf(out, cap, "data: {\"text\":\"t%d\",\"meta_info\":{\"id\":\"x\"}}\n\n", i);
}

static void expected_stream(int tokens, char *out, size_t cap) {
  size_t off = 0;
  for (int i = 0; i <= tokens && off < cap; i++)
    off += (size_t)event_text(i, tokens, out + off, cap - off);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static ssize_t fake_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  fake_req_t *r = cls;
  if (r->next > r->f->tokens) return MHD_CONTENT_READER_END_OF_STREAM;
  if (r->next > 0 && r->f->token_ms) sleep_ms(r->f->token_ms); /* own thread: may block */
  int n = event_text(r->next, r->f->tokens, buf, max);
  r->next++;
  return n;
}

static enum MHD_Result fake_json(struct MHD_Connection *c, unsigned status, const char *s) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(s), (void *)(uintptr_t)s, MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, "Content-Type", "application/json");
  enum MHD_Result ok = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ok;
}

static void take_rid(const fake_req_t *r, char *out, size_t cap) {
  cJSON *j = cJSON_ParseWithLength(r->body, r->len);
  cJSON *rid = j ? cJSON_GetObjectItemCaseSensitive(j, "rid") : NULL;
  snprintf(out, cap, "%s", cJSON_IsString(rid) ? rid->valuestring : "");
  cJSON_Delete(j);
}

static enum MHD_Result fake_generate(fake_t *f, fake_req_t *r, struct MHD_Connection *c) {
  const char *xr = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
  pthread_mutex_lock(&f->mu);
  int nth = ++f->n_generate;
  take_rid(r, f->last_rid, sizeof f->last_rid);
  if (nth <= 8) snprintf(f->rids[nth - 1], sizeof f->rids[0], "%s", f->last_rid);
  snprintf(f->last_xrid, sizeof f->last_xrid, "%s", xr ? xr : "");
  pthread_mutex_unlock(&f->mu);
  if (nth == f->drop_nth) return MHD_NO; /* read, never answered: a reset before the head */
  if (f->mode == FAKE_503) return fake_json(c, 503, "{\"error\":{\"message\":\"busy\"}}");
  cJSON *j = cJSON_ParseWithLength(r->body, r->len);
  int is_stream = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "stream"));
  cJSON_Delete(j);
  if (!is_stream) return fake_json(c, 200, "{\"text\":\"abc\",\"meta_info\":{\"id\":\"x\"}}");
  r->is_generate = 1;
  struct MHD_Response *resp =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, fake_reader, r, NULL);
  MHD_add_response_header(resp, "Content-Type", "text/event-stream");
  enum MHD_Result ok = MHD_queue_response(c, 200, resp);
  MHD_destroy_response(resp);
  return ok;
}

static enum MHD_Result fake_access(void *cls, struct MHD_Connection *c, const char *url,
                                   const char *method, const char *version, const char *upload,
                                   size_t *upload_size, void **req_cls) {
  (void)method;
  (void)version;
  fake_t *f = cls;
  fake_req_t *r = *req_cls;
  if (!r) {
    r = calloc(1, sizeof *r);
    if (!r) return MHD_NO;
    r->f = f;
    *req_cls = r;
    return MHD_YES;
  }
  if (*upload_size) {
    size_t n = *upload_size < sizeof r->body - r->len ? *upload_size : sizeof r->body - r->len;
    memcpy(r->body + r->len, upload, n);
    r->len += n;
    *upload_size = 0;
    return MHD_YES;
  }
  if (strcmp(url, "/abort_request") == 0) {
    pthread_mutex_lock(&f->mu);
    f->n_abort++;
    take_rid(r, f->abort_rid, sizeof f->abort_rid);
    pthread_mutex_unlock(&f->mu);
    return fake_json(c, 200, "{}");
  }
  if (strcmp(url, "/generate") == 0) return fake_generate(f, r, c);
  pthread_mutex_lock(&f->mu);
  f->n_info++;
  pthread_mutex_unlock(&f->mu);
  return fake_json(c, 200, "{\"model_path\":\"fake-model\"}");
}

static void fake_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                           enum MHD_RequestTerminationCode toe) {
  (void)c;
  fake_t *f = cls;
  fake_req_t *r = *req_cls;
  if (!r) return;
  if (r->is_generate && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
    pthread_mutex_lock(&f->mu);
    f->n_closed_early++;
    pthread_mutex_unlock(&f->mu);
  }
  free(r);
  *req_cls = NULL;
}

static int fake_start(fake_t *f, fake_mode_t mode, int tokens, int token_ms) {
  memset(f, 0, sizeof *f);
  pthread_mutex_init(&f->mu, NULL);
  f->mode = mode;
  f->tokens = tokens;
  f->token_ms = token_ms;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  f->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL,
                          NULL, fake_access, f, MHD_OPTION_SOCK_ADDR, &sa,
                          MHD_OPTION_NOTIFY_COMPLETED, fake_completed, f,
                          MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10, MHD_OPTION_END);
  if (!f->d) return -1;
  f->port = MHD_get_daemon_info(f->d, MHD_DAEMON_INFO_BIND_PORT)->port;
  snprintf(f->url, sizeof f->url, "http://127.0.0.1:%u", (unsigned)f->port);
  return 0;
}

static void fake_stop(fake_t *f) {
  if (f->d) MHD_stop_daemon(f->d);
  f->d = NULL;
  pthread_mutex_destroy(&f->mu);
}

static int fake_get(fake_t *f, const int *field) {
  pthread_mutex_lock(&f->mu);
  int v = *field;
  pthread_mutex_unlock(&f->mu);
  return v;
}

/* Wait up to ms for *field >= want. */
static int wait_for(fake_t *f, const int *field, int want, int ms) {
  for (int t = 0; t < ms; t += 10) {
    if (fake_get(f, field) >= want) return 1;
    sleep_ms(10);
  }
  return fake_get(f, field) >= want;
}

/* ---------- the gateway in a thread ---------- */

typedef struct gwrun {
  pd_gateway_t *g;
  pthread_t th;
  uint16_t port;
} gwrun_t;

static void *gw_main(void *p) {
  pd_gateway_run(p);
  return NULL;
}

typedef struct gwopt {
  pd_mode_t mode;
  size_t max_body;          /* 0: default */
  uint32_t max_connections; /* 0: default */
  uint64_t idle_ms;         /* 0: default */
} gwopt_t;

static int gw_start(gwrun_t *r, gwopt_t o, fake_t *pre, int npre, fake_t *dec, int ndec) {
  static pd_gateway_config_t c;
  pd_gateway_config_default(&c, o.mode);
  for (int i = 0; i < npre; i++)
    c.prefill[c.n_prefill++] = (pd_gateway_worker_t){pre[i].url, 8998};
  for (int i = 0; i < ndec; i++)
    c.decode[c.n_decode++] = (pd_gateway_worker_t){dec[i].url, -1};
  c.core.policy[0] = c.core.policy[1] = PD_POLICY_ROUND_ROBIN;
  c.core.first_token_timeout_ns = 3000000000ull;
  c.seed = 42;
  if (o.max_body) c.max_body_bytes = o.max_body;
  if (o.max_connections) c.max_connections = o.max_connections;
  if (o.idle_ms) c.core.idle_timeout_ns = o.idle_ms * 1000000ull;
  char err[256] = "";
  if (pd_gateway_new(&c, &r->g, err, sizeof err)) {
    fprintf(stderr, "gateway: %s\n", err);
    return -1;
  }
  r->port = pd_gateway_port(r->g);
  if (pthread_create(&r->th, NULL, gw_main, r->g)) {
    pd_gateway_del(r->g);
    return -1;
  }
  return 0;
}

static void gw_stop(gwrun_t *r) {
  pd_gateway_stop(r->g);
  pthread_join(r->th, NULL);
  pd_gateway_del(r->g);
}

/* ---------- client ---------- */

typedef struct resp {
  long status;
  char body[65536];
  size_t len;
  char ctype[128];
  int stop_after_events; /* > 0: hang up after this many SSE events */
  int events;
} resp_t;

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  resp_t *r = ud;
  size_t len = size * n, room = sizeof r->body - 1 - r->len;
  memcpy(r->body + r->len, p, len < room ? len : room);
  r->len += len < room ? len : room;
  r->body[r->len] = 0;
  r->events = 0;
  for (const char *s = r->body; (s = strstr(s, "\n\n")); s += 2)
    r->events++;
  if (r->stop_after_events && r->events >= r->stop_after_events) return 0;
  return len;
}

/* One request with an optional extra header line. */
static CURLcode http_h(uint16_t port, const char *method, const char *path, const char *body,
                       int is_chunked, const char *hdr, resp_t *out) {
  char url[256];
  snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
  CURL *e = curl_easy_init();
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
  if (is_chunked) h = curl_slist_append(h, "Transfer-Encoding: chunked");
  if (hdr) h = curl_slist_append(h, hdr);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  if (body) curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, out);
  CURLcode rc = curl_easy_perform(e);
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out->status);
  char *ct = NULL;
  curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ct);
  snprintf(out->ctype, sizeof out->ctype, "%s", ct ? ct : "");
  curl_easy_cleanup(e);
  curl_slist_free_all(h);
  return rc;
}

static CURLcode http(uint16_t port, const char *method, const char *path, const char *body,
                     int is_chunked, resp_t *out) {
  return http_h(port, method, path, body, is_chunked, NULL, out);
}

static const char stream_req[] = "{\"text\":\"hi\",\"stream\":true}";

/* ---------- tests ---------- */

/* One streamed completion through a fresh gateway in mode m: every byte of decode's stream,
 * one request per worker, one rid for both legs where the mode sends one. */
static void stream_once(pd_mode_t m) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 5, 5) == 0);
  if (gw_start(&g, (gwopt_t){m, 0, 0, 0}, &p, 1, &d, 1) == 0) {
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
    stream_once((pd_mode_t)m);
}

static void test_decode_503_retried_on_other_decode(void) {
  fake_t p, d[2];
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d[0], FAKE_503, 0, 0) == 0 &&
           fake_start(&d[1], FAKE_OK, 3, 0) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0}, &p, 1, d, 2) == 0) {
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
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 1024, 0, 0}, &p, 1, &d, 1) == 0) {
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
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0}, &p, 1, &d, 1) == 0) {
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

static void test_local_and_info_routes(void) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 1, 0) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_JOINED, 0, 0, 0}, &p, 1, &d, 1) == 0) {
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
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 1, 0}, &p, 1, &d, 1) == 0) {
    int s = socket(AF_INET, SOCK_STREAM, 0); /* holds the one allowed connection */
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(g.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    PDT_EQ_INT(connect(s, (struct sockaddr *)&sa, sizeof sa), 0);
    sleep_ms(50);
    static resp_t r;
    memset(&r, 0, sizeof r);
    http(g.port, "GET", "/health", NULL, 0, &r);
    PDT_EQ_INT(r.status, 503);
    PDT_TRUE(strstr(r.body, "connection limit") != NULL);
    close(s);
    for (int t = 0; t < 100; t++) { /* the slot is free again once MHD saw the close */
      memset(&r, 0, sizeof r);
      http(g.port, "GET", "/health", NULL, 0, &r);
      if (r.status == 200) break;
      sleep_ms(20);
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
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0}, &p, 1, &d, 1) == 0) {
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

/* ---------- a client that stops reading ---------- */

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
 * instead of buffering the stream, and holds at most about PD_GWH_PAUSE_BYTES for it; when
 * the client reads again every event arrives, in order, once. */
static void test_slow_client_backpressure(void) {
  enum { TOKENS = 200000 }; /* ~10 MB of SSE: more than the kernel buffers on the way */
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, TOKENS, 0) == 0);
  /* idle 200 ms, the client pauses 500 ms: the stall is the client's, so the core's idle
     deadline waits while decode is held back (PD_EV_CLIENT_BLOCKED), and nothing is cut */
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 200}, &p, 1, &d, 1) == 0) {
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
       turns; the pause is measured in time, not turns, so a slow machine still pauses 0.5 s */
    uint64_t t0 = pdt_now_ms();
    int resumed = 0;
    for (int t = 0; t < 1000000 && running && pdt_now_ms() - t0 < 120000; t++) {
      curl_multi_perform(m, &running);
      curl_multi_poll(m, NULL, 0, 10, NULL);
      if (!resumed && pdt_now_ms() - t0 >= 500) { /* 0.5 s without reading: decode paused */
        resumed = 1;
        buffered = metric(g.port, "pdref_client_buffered_bytes_max");
        pauses = metric(g.port, "pdref_upstream_pauses_total");
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

/* R1.28: X-Request-Id (and the trace headers) reach both legs; mini_lb posts the body alone. */
static void test_request_id_forwarded(void) {
  for (int m = PD_MODE_MINILB; m <= PD_MODE_REFERENCE; m++) {
    fake_t p, d;
    gwrun_t g;
    PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 2, 0) == 0);
    if (gw_start(&g, (gwopt_t){(pd_mode_t)m, 0, 0, 0}, &p, 1, &d, 1) == 0) {
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

int pdt_suite_gateway(void) {
  signal(SIGPIPE, SIG_IGN);
  static const pdt_case_t cases[] = {
      {"a streamed completion passes through with all bytes (all modes)",
       test_stream_passes_through},
      {"decode 503 before first token retries on the other decode",
       test_decode_503_retried_on_other_decode},
      {"bad JSON 400, unknown route 404, wrong method 405, oversize 413", test_bad_input_answers},
      {"client gone mid-stream closes decode and posts /abort_request",
       test_client_gone_closes_decode_and_aborts},
      {"health, readiness, info proxy, non-stream answer", test_local_and_info_routes},
      {"beyond --max-connections a client gets 503", test_connection_limit_503},
      {"a reset on a reused connection is not resent: no rid reaches a worker twice",
       test_reset_on_reused_connection_not_resent},
      {"X-Request-Id reaches both legs (not in minilb mode)", test_request_id_forwarded},
      {"a client that stops reading pauses decode; nothing is lost when it reads again",
       test_slow_client_backpressure},
  };
  return PDT_SUITE("gateway", cases);
}
