/* The mock's HTTP side: libmicrohttpd with its internal polling thread and suspend/resume,
 * fed by the engine's accept loop (MHD_add_connection, so a crash can really refuse
 * connections). Routes, request bodies, and the worker model's output (pd_mock_output_*, in
 * pd_mock.c) turned into responses: an SSE stream read from the leg's buffer, or a whole response
 * once it is complete. A connection with nothing to send is suspended; the engine resumes it. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pd_err.h"
#include "pd_mock_int.h"

enum { R_GENERATE, R_COMPLETIONS, R_CHAT, R_HEALTH, R_SERVER_INFO, R_MODEL_INFO, R_MODELS,
       R_ABORT, R_FLUSH, R_START, R_NOT_FOUND };
enum { M_GET = 1, M_POST = 2 };
/* libmicrohttpd's idle timeout for a connection that sends nothing. */
#define PD_MOCK_IDLE_TIMEOUT_S 60u

static const struct {
  const char *path;
  int route, methods;
} routes[] = {
    {"/generate", R_GENERATE, M_POST},          {"/v1/completions", R_COMPLETIONS, M_POST},
    {"/v1/chat/completions", R_CHAT, M_POST},   {"/health", R_HEALTH, M_GET},
    {"/health_generate", R_HEALTH, M_GET},      {"/get_server_info", R_SERVER_INFO, M_GET},
    {"/server_info", R_SERVER_INFO, M_GET},     {"/get_model_info", R_MODEL_INFO, M_GET},
    {"/model_info", R_MODEL_INFO, M_GET},       {"/v1/models", R_MODELS, M_GET},
    {"/abort_request", R_ABORT, M_POST},        {"/flush_cache", R_FLUSH, M_GET | M_POST},
    {"/pdref/start", R_START, M_POST}, /* test control: the runner's workload starts now */
};

/* Per HTTP request (libmicrohttpd's req_cls). */
typedef struct pd_mock_http_ctx {
  int route, is_method_ok, is_too_large;
  const char *path; /* static route path */
  pd_buf_t body; /* at most PD_REQUEST_MAX_BODY_BYTES */
  pd_mock_leg_t *leg;
} pd_mock_http_ctx_t;

/* ---------- replies ---------- */

/* A response decided under m->mu and queued after it is released: libmicrohttpd takes a
 * response's own lock to queue it and holds that lock while it calls our reader, which takes
 * m->mu, so queueing under m->mu would order the two locks both ways. */
typedef struct pd_reply {
  int is_set;
  unsigned status;
  const char *type;
  char *body; /* malloc'd; libmicrohttpd frees it */
  size_t len;
  pd_mock_leg_t *leg; /* a callback response over this leg's output instead of body */
  uint64_t size;  /* its length: MHD_SIZE_UNKNOWN for a stream */
  int is_close;   /* Connection: close (the request's framing cannot be trusted) */
} pd_reply_t;

static enum MHD_Result respond(pd_reply_t *rp, unsigned status, const char *type,
                               const char *body, size_t len) {
  rp->body = malloc(len ? len : 1);
  if (!rp->body) return MHD_NO;
  memcpy(rp->body, body, len);
  rp->len = len;
  rp->status = status;
  rp->type = type;
  rp->is_set = 1;
  return MHD_YES;
}

static enum MHD_Result respond_cjson(pd_reply_t *rp, unsigned status, cJSON *j) {
  char *s = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  if (!s) return MHD_NO;
  enum MHD_Result rc = respond(rp, status, "application/json", s, strlen(s));
  cJSON_free(s);
  return rc;
}

/* {"error":{"message":..., "type":..., "code":status}} (OpenAI's shape, as SGLang's). */
static enum MHD_Result respond_error(pd_reply_t *rp, unsigned status, const char *type,
                                     const char *msg) {
  cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
  cJSON_AddStringToObject(e, "message", msg);
  cJSON_AddStringToObject(e, "type", type);
  cJSON_AddNumberToObject(e, "code", status);
  return respond_cjson(rp, status, j);
}

static ssize_t leg_reader(void *cls, uint64_t pos, char *buf, size_t max);
static void leg_reader_free(void *cls);

/* Queue a planned reply (m->mu not held). */
static enum MHD_Result reply_send(pd_mock_t *m, struct MHD_Connection *c, pd_reply_t *rp) {
  struct MHD_Response *r =
      rp->leg ? MHD_create_response_from_callback(rp->size, 4096, leg_reader, rp->leg,
                                                  leg_reader_free)
              : MHD_create_response_from_buffer(rp->len, rp->body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(rp->body);
    if (!rp->leg) return MHD_NO;
    pthread_mutex_lock(&m->mu);
    rp->leg->has_response = 0;
    pd_mock_leg_del_if_unused(m, rp->leg);
    pthread_mutex_unlock(&m->mu);
    return MHD_NO;
  }
  if (rp->type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, rp->type);
  if (rp->is_close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result rc = MHD_queue_response(c, rp->status, r);
  MHD_destroy_response(r);
  return rc;
}

/* Reset the TCP connection now (RST, not FIN): libmicrohttpd would shut the socket down
 * cleanly before closing it, so disconnect it first (connect with AF_UNSPEC aborts a Linux
 * TCP socket); libmicrohttpd still owns and closes the descriptor. */
static void reset_tcp(int fd) {
  struct linger lg = {1, 0};
  struct sockaddr sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_family = AF_UNSPEC;
  if (fd < 0) return;
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  (void)connect(fd, &sa, sizeof sa);
}

static int conn_fd(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  return ci ? ci->connect_fd : -1;
}

/* ---------- responses of generation requests ---------- */

static ssize_t reader_step(pd_mock_t *m, pd_mock_leg_t *leg, char *buf, size_t max) {
  if (m->stopping || leg->is_peer_closed) return MHD_CONTENT_READER_END_WITH_ERROR;
  size_t avail = leg->out.len - leg->out_off;
  if (avail) {
    size_t n = avail < max ? avail : max;
    memcpy(buf, leg->out.p + leg->out_off, n);
    leg->out_off += n;
    return (ssize_t)n;
  }
  switch (leg->end) {
  case PD_MOCK_OUTPUT_END_NONE: /* nothing yet: sleep until the engine has more */
    MHD_suspend_connection(leg->conn);
    leg->is_suspended = 1;
    return 0;
  case PD_MOCK_OUTPUT_END_CLEAN: return MHD_CONTENT_READER_END_OF_STREAM;
  case PD_MOCK_OUTPUT_END_READ: return MHD_CONTENT_READER_END_WITH_ERROR;
  default: reset_tcp(leg->fd); return MHD_CONTENT_READER_END_WITH_ERROR; /* reset */
  }
}

static ssize_t leg_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  pd_mock_leg_t *leg = cls;
  pd_mock_t *m = leg->m;
  pthread_mutex_lock(&m->mu);
  ssize_t n = reader_step(m, leg, buf, max);
  pthread_mutex_unlock(&m->mu);
  return n;
}

static void leg_reader_free(void *cls) {
  pd_mock_leg_t *leg = cls;
  pd_mock_t *m = leg->m;
  pthread_mutex_lock(&m->mu);
  leg->has_response = 0;
  pd_mock_leg_del_if_unused(m, leg);
  pthread_mutex_unlock(&m->mu);
}

/* Plan the head: an SSE stream read from the leg, a whole buffered response, or (body read
 * error) a response whose declared length is longer than what will come. */
static enum MHD_Result plan_head(pd_mock_leg_t *leg, pd_reply_t *rp) {
  size_t avail = leg->out.len - leg->out_off;
  const char *type = leg->head_is_sse ? "text/event-stream" : "application/json";
  leg->head_queued = 1;
  if (!leg->head_is_sse && leg->end == PD_MOCK_OUTPUT_END_CLEAN) {
    enum MHD_Result rc = respond(rp, (unsigned)leg->head_status, type,
                                 pd_buf_str(&leg->out) + leg->out_off, avail);
    leg->out_off = leg->out.len = 0;
    return rc;
  }
  rp->is_set = 1;
  rp->status = (unsigned)leg->head_status;
  rp->type = type;
  rp->leg = leg;
  rp->size = leg->head_is_sse ? MHD_SIZE_UNKNOWN : avail + 1;
  leg->has_response = 1;
  return MHD_YES;
}

/* Called on the request's last header/body call and again after each resume until the head
 * is queued. */
static enum MHD_Result progress(pd_mock_t *m, pd_mock_leg_t *leg, pd_reply_t *rp) {
  if (m->stopping || leg->is_peer_closed) return MHD_NO;
  if (leg->head_queued) return MHD_YES;
  if (leg->end == PD_MOCK_OUTPUT_END_RESET || leg->end == PD_MOCK_OUTPUT_END_REFUSED) {
    reset_tcp(leg->fd);
    return MHD_NO;
  }
  if (leg->end != PD_MOCK_OUTPUT_END_NONE && !leg->head_status) { /* a read error before any head */
    leg->head_status = 200;
    leg->head_is_sse = leg->is_stream && leg->end == PD_MOCK_OUTPUT_END_CLEAN;
  }
  if (leg->head_status && (leg->head_is_sse || leg->end != PD_MOCK_OUTPUT_END_NONE))
    return plan_head(leg, rp);
  MHD_suspend_connection(leg->conn);
  leg->is_suspended = 1;
  return MHD_YES;
}

static const char *header(struct MHD_Connection *c, const char *name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* The request index n of the runner's id "pdconf-<hex>-<n>" in the prompt, for the traffic
 * faults; PD_TRAFFIC_FAULT_ANY when the prompt carries none. */
static uint32_t body_index(const char *body, size_t len) {
  char tag[PD_MOCK_XRID_MAX];
  pd_mock_req_body_tag(body, len, tag, sizeof tag);
  const char *dash = strrchr(tag, '-');
  uint64_t n = 0;
  if (!dash || !dash[1] || dash - tag < 8) return PD_TRAFFIC_FAULT_ANY;
  for (const char *p = dash + 1; *p; p++) {
    if (*p < '0' || *p > '9' || n > PD_SCENARIO_MAX_REQUESTS) return PD_TRAFFIC_FAULT_ANY;
    n = n * 10 + (uint64_t)(*p - '0');
  }
  return n < PD_SCENARIO_MAX_REQUESTS ? (uint32_t)n : PD_TRAFFIC_FAULT_ANY;
}

static enum MHD_Result gen_start(pd_mock_t *m, struct MHD_Connection *c, pd_mock_http_ctx_t *x,
                                 pd_reply_t *rp) {
  if (m->is_down) {
    reset_tcp(conn_fd(c));
    return MHD_NO;
  }
  pd_request_t r;
  char err[320];
  int rc = pd_request_parse(&r, NULL, x->path, pd_buf_str(&x->body), x->body.len,
                            PD_BATCH_RULE_REFERENCE, err, sizeof err);
  if (rc < 0) return respond_error(rp, rc == PD_ERR_TOO_LARGE ? 413 : 400, "invalid_request_error", err);
  pd_mock_leg_t *leg = pd_mock_leg_new(m);
  if (!leg) {
    pd_request_free(&r);
    return respond_error(rp, 503, "server_busy", "mock: too many live requests");
  }
  rc = pd_mock_req_fill(leg, &r, (const char *)x->body.p, x->body.len, m->cfg.default_tokens,
                        &m->rid_rng, err, sizeof err);
  pd_request_free(&r);
  if (rc < 0) {
    pd_mock_leg_del_if_unused(m, leg);
    return respond_error(rp, 400, "invalid_request_error", err);
  }
  pd_mock_req_pick_xrid(header(c, "X-Request-Id"), (const char *)x->body.p, x->body.len, leg->xrid,
                        sizeof leg->xrid);
  leg->req_index = body_index((const char *)x->body.p, x->body.len);
  leg->path = x->path;
  leg->conn = c;
  leg->fd = conn_fd(c);
  leg->is_attached = 1;
  x->leg = leg;
  pd_mock_log_request(m, leg);
  leg->is_held = m->worker.open_delay_ms > 0; /* a late request: an abort may overtake it */
  if (leg->is_held)
    pd_mock_timer(m, leg, MT_OPEN, pd_mock_scaled_ns(m, m->worker.open_delay_ms));
  else
    pd_mock_drive_arrive(m, leg);
  return progress(m, leg, rp);
}

/* ---------- the other routes ---------- */

static enum MHD_Result server_info(pd_mock_t *m, pd_reply_t *rp) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "version", "pdref-mock");
  cJSON_AddStringToObject(j, "model_path", "pdref/mock");
  cJSON_AddStringToObject(j, "served_model_name", "pdref-mock");
  cJSON_AddStringToObject(j, "disaggregation_mode",
                          m->cfg.role == PD_ROLE_PREFILL ? "prefill" : "decode");
  if (m->cfg.role == PD_ROLE_PREFILL)
    cJSON_AddNumberToObject(j, "disaggregation_bootstrap_port", m->boot_port);
  else
    cJSON_AddNullToObject(j, "disaggregation_bootstrap_port");
  cJSON_AddStringToObject(j, "worker", m->worker.name);
  cJSON_AddStringToObject(j, "protocol", m->is_vllm ? "vllm" : "sglang");
  if (m->is_vllm && m->cfg.role == PD_ROLE_PREFILL) /* its KV side channel (docs/mock.md) */
    cJSON_AddNumberToObject(j, "kv_port", m->boot_port);
  cJSON_AddNumberToObject(j, "live_slots", m->live_slots);
  pd_wengine_stats_t st; /* capacity now (docs/mock.md) */
  pd_wengine_stats(m->eng, &st);
  cJSON_AddNumberToObject(j, "running", st.running);
  cJSON_AddNumberToObject(j, "max_running_requests", st.max_running);
  cJSON_AddNumberToObject(j, "queued", st.queued);
  cJSON_AddNumberToObject(j, "kv_used_pages", (double)st.kv_used_pages);
  cJSON_AddNumberToObject(j, "kv_total_pages", (double)st.kv_total_pages);
  return respond_cjson(rp, 200, j);
}

static enum MHD_Result model_info(pd_reply_t *rp, int is_list) {
  cJSON *j = cJSON_CreateObject();
  if (!is_list) {
    cJSON_AddStringToObject(j, "model_path", "pdref/mock");
    cJSON_AddNullToObject(j, "tokenizer_path");
    cJSON_AddTrueToObject(j, "is_generation");
    return respond_cjson(rp, 200, j);
  }
  cJSON_AddStringToObject(j, "object", "list");
  cJSON *d = cJSON_AddArrayToObject(j, "data"), *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "id", "pdref-mock");
  cJSON_AddStringToObject(e, "object", "model");
  cJSON_AddStringToObject(e, "owned_by", "pdref");
  cJSON_AddItemToArray(d, e);
  return respond_cjson(rp, 200, j);
}

/* POST /abort_request {"rid": "..."} (or {"abort_all": true}): SGLang's prefix rule. */
static enum MHD_Result abort_request(pd_mock_t *m, pd_reply_t *rp, pd_mock_http_ctx_t *x) {
  cJSON *j = x->body.len ? cJSON_ParseWithLength((const char *)x->body.p, x->body.len) : NULL;
  const cJSON *rid = cJSON_GetObjectItemCaseSensitive(j, "rid");
  const char *prefix = cJSON_IsString(rid) ? rid->valuestring : NULL;
  if (!prefix && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "abort_all"))) prefix = "";
  if (!prefix) {
    cJSON_Delete(j);
    return respond_error(rp, 400, "invalid_request_error",
                         j ? "rid: expected a string" : "body: malformed JSON");
  }
  uint32_t n = pd_mock_drive_abort_prefix(m, prefix);
  cJSON_Delete(j);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "aborted", n);
  return respond_cjson(rp, 200, o);
}

static enum MHD_Result dispatch(pd_mock_t *m, struct MHD_Connection *c, pd_mock_http_ctx_t *x,
                                const char *url, pd_reply_t *rp) {
  if (x->is_too_large) { /* the body was read and dropped; the connection ends with it */
    rp->is_close = 1;
    return respond_error(rp, 413, "invalid_request_error", "body: exceeds 4 MiB");
  }
  if (x->route == R_NOT_FOUND) {
    char msg[320];
    snprintf(msg, sizeof msg, "no route %.256s", url);
    return respond_error(rp, 404, "not_found", msg);
  }
  if (!x->is_method_ok) return respond_error(rp, 405, "method_not_allowed", "method not allowed");
  switch (x->route) {
  case R_HEALTH: return respond(rp, 200, NULL, "", 0);
  case R_SERVER_INFO: return server_info(m, rp);
  case R_MODEL_INFO: return model_info(rp, 0);
  case R_MODELS: return model_info(rp, 1);
  case R_ABORT: return abort_request(m, rp, x);
  case R_FLUSH:
    pd_mock_log(m, "flush", NULL);
    return respond(rp, 200, "text/plain", "Cache flushed.\n", 15);
  case R_START: {
    int started = pd_mock_clock_start(m);
    if (started) pd_mock_log(m, "clock_start", NULL);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "started", started);
    return respond_cjson(rp, 200, o);
  }
  default: return gen_start(m, c, x, rp);
  }
}

/* ---------- libmicrohttpd callbacks ---------- */

static enum MHD_Result on_first(pd_mock_t *m, struct MHD_Connection *c, const char *url,
                                const char *method, void **req_cls) {
  pd_mock_http_ctx_t *x = calloc(1, sizeof *x);
  if (!x) return MHD_NO;
  *req_cls = x;
  pd_buf_init(&x->body, PD_REQUEST_MAX_BODY_BYTES);
  x->route = R_NOT_FOUND;
  int meth = strcmp(method, "GET") == 0 ? M_GET : strcmp(method, "POST") == 0 ? M_POST : 0;
  for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
    if (strcmp(url, routes[i].path) != 0) continue;
    x->route = routes[i].route;
    x->path = routes[i].path;
    x->is_method_ok = (routes[i].methods & meth) != 0;
  }
  pd_httpd_request_begin(&m->httpd, c);
  if (pd_httpd_is_killed(&m->httpd, c)) return MHD_NO; /* refused: a 503 is out already */
  const char *cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
  pd_reply_t rp = {0};
  char why[160], body[320];
  if (pd_httpd_framing(&m->httpd, c, why, sizeof why)) {
    size_t n = pd_httpd_error_json(body, sizeof body, 400, "bad_framing", why);
    if (respond(&rp, 400, "application/json", body, n) != MHD_YES) return MHD_NO;
    rp.is_close = 1;
    return reply_send(m, c, &rp);
  }
  if (cl && strtoull(cl, NULL, 10) > PD_REQUEST_MAX_BODY_BYTES && /* refuse before reading it */
      respond_error(&rp, 413, "invalid_request_error", "body: exceeds 4 MiB") == MHD_YES) {
    rp.is_close = 1; /* the body is not read */
    return reply_send(m, c, &rp);
  }
  return MHD_YES;
}

static void take_body(pd_mock_http_ctx_t *x, const char *data, size_t n) {
  /* past the limit (or out of memory): keep reading and dropping it; answer 413 at the end */
  if (!x->is_too_large && pd_buf_append(NULL, &x->body, data, n)) x->is_too_large = 1;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **req_cls) {
  (void)version;
  pd_mock_t *m = cls;
  pd_mock_http_ctx_t *x = *req_cls;
  if (!x) return on_first(m, c, url, method, req_cls);
  if (*upload_size) {
    take_body(x, upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  pd_httpd_request_whole(&m->httpd, c);
  pd_reply_t rp = {0};
  pthread_mutex_lock(&m->mu);
  enum MHD_Result rc = m->stopping ? MHD_NO
                       : x->leg    ? progress(m, x->leg, &rp)
                                   : dispatch(m, c, x, url, &rp);
  pthread_mutex_unlock(&m->mu);
  if (rp.is_set && rc == MHD_YES) return reply_send(m, c, &rp);
  if (rp.is_set && rp.leg) { /* not sent after all: the leg's response reference goes */
    pthread_mutex_lock(&m->mu);
    rp.leg->has_response = 0;
    pd_mock_leg_del_if_unused(m, rp.leg);
    pthread_mutex_unlock(&m->mu);
  }
  free(rp.body);
  return rc;
}

/* The request is over (answered, failed, or the client left). */
static void leg_detach(pd_mock_t *m, pd_mock_leg_t *leg, enum MHD_RequestTerminationCode toe) {
  int is_client_gone = toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT ||
                       toe == MHD_REQUEST_TERMINATED_READ_ERROR;
  if (!leg->is_peer_closed && toe != MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN &&
      (leg->wstate != PD_WORKER_LEG_DONE || is_client_gone)) {
    leg->is_peer_closed = 1;
    pd_mock_log(m, "peer_closed", leg);
    pd_mock_drive_close(m, leg);
  }
  pd_mock_log_int(m, "response_end", leg, "status", leg->head_queued ? leg->head_status : 0);
  leg->is_attached = 0;
  leg->is_suspended = 0;
  leg->conn = NULL;
  leg->fd = -1;
  pd_mock_leg_del_if_unused(m, leg);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode toe) {
  pd_mock_t *m = cls;
  pd_httpd_notify(&m->httpd, c, socket_ctx, toe);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe) {
  pd_mock_t *m = cls;
  pd_httpd_request_over(&m->httpd, c);
  pd_mock_http_ctx_t *x = *req_cls;
  if (!x) return;
  *req_cls = NULL;
  if (x->leg) {
    pthread_mutex_lock(&m->mu);
    leg_detach(m, x->leg, toe);
    pthread_mutex_unlock(&m->mu);
  }
  pd_buf_free(NULL, &x->body);
  free(x);
}

/* ---------- listening ---------- */

static int listen_on(const char *host, uint16_t port, int *fd_out, uint16_t *port_out,
                     char *err, size_t errlen) {
  struct sockaddr_in6 a; /* an IPv4 or IPv6 address (numeric: the CLI resolved names) */
  struct addrinfo hints = {.ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai || ai->ai_addrlen > sizeof a) {
    if (ai) freeaddrinfo(ai);
    snprintf(err, errlen, "listen %s:%u: not a numeric IPv4 or IPv6 address", host, port);
    return PD_ERR_INVAL;
  }
  int family = ai->ai_family;
  socklen_t len = ai->ai_addrlen;
  memcpy(&a, ai->ai_addr, len);
  freeaddrinfo(ai);
  _Static_assert(offsetof(struct sockaddr_in, sin_port) ==
                     offsetof(struct sockaddr_in6, sin6_port), "one port field for both");
  a.sin6_port = htons(port); /* an IPv4 address's sin_port too */
  int fd = socket(family, SOCK_STREAM, 0), one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(fd, (struct sockaddr *)&a, len) < 0 || listen(fd, 1024) < 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) < 0 ||
      fcntl(fd, F_SETFL, O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
    snprintf(err, errlen, "listen %s:%u: %s", host, port, strerror(errno));
    if (fd >= 0) close(fd);
    return PD_ERR_IO;
  }
  *fd_out = fd;
  *port_out = ntohs(a.sin6_port);
  return 0;
}

int pd_mock_listen(const char *host, uint16_t port, int *fd, uint16_t *bound, char *err,
                   size_t errlen) {
  return listen_on(host, port, fd, bound, err, errlen);
}

/* The gate found a good first head: libmicrohttpd takes the connection. */
static int hand(void *ctx, int fd, const struct sockaddr *a, socklen_t alen) {
  pd_mock_t *m = ctx;
  return MHD_add_connection(m->daemon, fd, a, alen) != MHD_YES;
}

int pd_mock_http_start(pd_mock_t *m, char *err, size_t errlen) {
  int rc = listen_on(m->cfg.listen_host, m->cfg.port, &m->http_listen, &m->port, err, errlen);
  if (rc < 0) return rc;
  uint32_t maxc = m->cfg.max_connections ? m->cfg.max_connections : PD_MOCK_MAX_CONNECTIONS;
  uint32_t dl = m->cfg.client_deadline_s ? m->cfg.client_deadline_s : PD_MOCK_CLIENT_DEADLINE_S;
  if (pd_httpd_init(&m->httpd, maxc, dl, PD_MOCK_IDLE_TIMEOUT_S, 1)) {
    snprintf(err, errlen, "out of memory");
    return PD_ERR_NOMEM;
  }
  m->httpd.is_gate_in_sweeper = 1; /* the engine accepts, the sweeper thread gates */
  if (pd_httpd_gate_init(&m->httpd, -1, hand, m)) {
    pd_httpd_free(&m->httpd);
    snprintf(err, errlen, "out of memory");
    return PD_ERR_NOMEM;
  }
  m->daemon = MHD_start_daemon(
      MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME |
          MHD_USE_NO_LISTEN_SOCKET,
      0, NULL, NULL, on_access, m, MHD_OPTION_NOTIFY_COMPLETED, on_completed, m,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, m, MHD_OPTION_CONNECTION_LIMIT,
      pd_httpd_mhd_limit(&m->httpd), MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int)PD_MOCK_IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      (size_t)PD_HTTPD_POOL_BYTES, MHD_OPTION_END);
  if (!m->daemon || pd_httpd_start(&m->httpd)) {
    if (m->daemon) MHD_stop_daemon(m->daemon);
    m->daemon = NULL;
    pd_httpd_free(&m->httpd);
    snprintf(err, errlen, "libmicrohttpd: cannot start the HTTP daemon");
    return PD_ERR_IO;
  }
  return 0;
}

void pd_mock_http_stop(pd_mock_t *m) {
  if (!m->daemon) return;
  pd_httpd_stop(&m->httpd);
  MHD_stop_daemon(m->daemon); /* the daemon stays set: pd_mock_del logs the shutdown */
  pd_httpd_free(&m->httpd);
}

void pd_mock_http_accept(pd_mock_t *m) {
  for (int i = 0; i < 64 && m->http_listen >= 0; i++) { /* bounded per engine turn */
    struct sockaddr_storage a; /* IPv4 or IPv6 */
    socklen_t len = sizeof a;
    int fd = accept(m->http_listen, (struct sockaddr *)&a, &len);
    if (fd < 0) {
      pd_mock_accept_failed(m, errno);
      return;
    }
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (!pd_httpd_admit(&m->httpd, fd, (struct sockaddr *)&a, len)) continue; /* 503 and closed: the limit is ours */
    pd_httpd_gate_add(&m->httpd, fd, (struct sockaddr *)&a, len); /* then MHD, via hand */
  }
}
