/* pdt_gateway: the real-socket gateway (net/gateway/pd_gateway.h) on 127.0.0.1 ephemeral ports for
 * test_gateway*.c: a tiny fake worker (libmicrohttpd, a thread per connection) answers
 * /generate with a fixed SSE stream, a 503, or a slow stream, and records what it saw
 * (requests, rids, aborts, early closes); the gateway runs its loop in a thread; the client
 * is blocking libcurl with timeouts. Every wait is bounded. Header-only (static inline). */
#ifndef PDT_GATEWAY_H
#define PDT_GATEWAY_H
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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

static inline int event_text(int i, int tokens, char *out, size_t cap) {
  if (i >= tokens) return snprintf(out, cap, "data: [DONE]\n\n");
  return snprintf(out, cap, "data: {\"text\":\"t%d\",\"meta_info\":{\"id\":\"x\"}}\n\n", i);
}

static inline void expected_stream(int tokens, char *out, size_t cap) {
  size_t off = 0;
  for (int i = 0; i <= tokens && off < cap; i++)
    off += (size_t)event_text(i, tokens, out + off, cap - off);
}

static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static inline ssize_t fake_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  fake_req_t *r = cls;
  if (r->next > r->f->tokens) return MHD_CONTENT_READER_END_OF_STREAM;
  if (r->next > 0 && r->f->token_ms) sleep_ms(r->f->token_ms); /* own thread: may block */
  int n = event_text(r->next, r->f->tokens, buf, max);
  r->next++;
  return n;
}

static inline enum MHD_Result fake_json(struct MHD_Connection *c, unsigned status, const char *s) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(s), (void *)(uintptr_t)s, MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, "Content-Type", "application/json");
  enum MHD_Result ok = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ok;
}

static inline void take_rid(const fake_req_t *r, char *out, size_t cap) {
  cJSON *j = cJSON_ParseWithLength(r->body, r->len);
  cJSON *rid = j ? cJSON_GetObjectItemCaseSensitive(j, "rid") : NULL;
  snprintf(out, cap, "%s", cJSON_IsString(rid) ? rid->valuestring : "");
  cJSON_Delete(j);
}

static inline enum MHD_Result fake_generate(fake_t *f, fake_req_t *r, struct MHD_Connection *c) {
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

static inline enum MHD_Result fake_access(void *cls, struct MHD_Connection *c, const char *url,
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
  const char *xr = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
  pthread_mutex_lock(&f->mu);
  f->n_info++;
  snprintf(f->last_xrid, sizeof f->last_xrid, "%s", xr ? xr : ""); /* e.g. a vLLM leg */
  pthread_mutex_unlock(&f->mu);
  return fake_json(c, 200, "{\"model_path\":\"fake-model\"}");
}

static inline void fake_completed(void *cls, struct MHD_Connection *c, void **req_cls,
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

static inline int fake_start(fake_t *f, fake_mode_t mode, int tokens, int token_ms) {
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

static inline void fake_stop(fake_t *f) {
  if (f->d) MHD_stop_daemon(f->d);
  f->d = NULL;
  pthread_mutex_destroy(&f->mu);
}

static inline int fake_get(fake_t *f, const int *field) {
  pthread_mutex_lock(&f->mu);
  int v = *field;
  pthread_mutex_unlock(&f->mu);
  return v;
}

/* Wait up to ms for *field >= want. */
static inline int wait_for(fake_t *f, const int *field, int want, int ms) {
  for (uint64_t end = pdt_now_ms() + (uint64_t)ms; pdt_now_ms() < end; sleep_ms(10))
    if (fake_get(f, field) >= want) return 1;
  return fake_get(f, field) >= want;
}

/* ---------- the gateway in a thread ---------- */

typedef struct gwrun {
  pd_gateway_t *g;
  pthread_t th;
  uint16_t port;
} gwrun_t;

static inline void *gw_main(void *p) {
  pd_gateway_run(p);
  return NULL;
}

typedef struct gwopt {
  pd_mode_t mode;
  size_t max_body;          /* 0: default */
  uint32_t max_connections; /* 0: default */
  uint64_t idle_ms;         /* 0: default */
  uint32_t decode_limit;    /* R-ADMIT-LIMIT per decode worker (0: none) */
  uint64_t admit_queue_ms;  /* R-ADMIT-QUEUE deadline (0: default) */
} gwopt_t;

/* gw_start with --client-timeout-s (0: default). */
static inline int gw_start_ct(gwrun_t *r, gwopt_t o, uint32_t client_timeout_s, fake_t *pre,
                              int npre, fake_t *dec, int ndec) {
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
  c.decode_limit = o.decode_limit;
  if (o.admit_queue_ms) c.core.admit_queue_ns = o.admit_queue_ms * 1000000ull;
  if (client_timeout_s) c.client_timeout_s = client_timeout_s;
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

static inline int gw_start(gwrun_t *r, gwopt_t o, fake_t *pre, int npre, fake_t *dec, int ndec) {
  return gw_start_ct(r, o, 0, pre, npre, dec, ndec);
}

static inline void gw_stop(gwrun_t *r) {
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
  char xrid[320]; /* the response's X-Request-Id ("" when none) */
  int n_xrid;     /* how many X-Request-Id header lines the response had */
  int retry_after; /* the response's Retry-After seconds (-1 when none) */
} resp_t;

static inline size_t on_head_line(char *p, size_t size, size_t n, void *ud) {
  resp_t *r = ud;
  size_t len = size * n;
  if (len > 13 && !strncasecmp(p, "X-Request-Id:", 13)) {
    size_t a = 13, e = len;
    while (a < e && p[a] == ' ') a++;
    while (e > a && (p[e - 1] == '\r' || p[e - 1] == '\n' || p[e - 1] == ' ')) e--;
    snprintf(r->xrid, sizeof r->xrid, "%.*s", (int)(e - a), p + a);
    r->n_xrid++;
  }
  if (!strncmp(p, "HTTP/", 5)) r->retry_after = -1; /* a new response head */
  if (len > 12 && !strncasecmp(p, "Retry-After:", 12)) r->retry_after = atoi(p + 12);
  return len;
}

static inline size_t on_body(char *p, size_t size, size_t n, void *ud) {
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
static inline CURLcode http_h(uint16_t port, const char *method, const char *path, const char *body,
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
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_head_line);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, out);
  CURLcode rc = curl_easy_perform(e);
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out->status);
  char *ct = NULL;
  curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ct);
  snprintf(out->ctype, sizeof out->ctype, "%s", ct ? ct : "");
  curl_easy_cleanup(e);
  curl_slist_free_all(h);
  return rc;
}

static inline CURLcode http(uint16_t port, const char *method, const char *path, const char *body,
                     int is_chunked, resp_t *out) {
  return http_h(port, method, path, body, is_chunked, NULL, out);
}

static const char stream_req[] = "{\"text\":\"hi\",\"stream\":true}";

#endif
