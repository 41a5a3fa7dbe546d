/* The client side of the gateway: libmicrohttpd in external epoll mode. A request is read
 * whole (bounded), handed to the core as PD_EV_CLIENT_REQUEST, and its connection suspended
 * until the core has something for it; the core's client actions fill a per-connection
 * buffer and resume it. Suspended connections are blind to hang-ups, so the loop watches
 * each fed request's socket for EPOLLRDHUP itself (pd_gateway_watch). What the core and the loop
 * write into a connection is in pd_gateway_client.c. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "pd_err.h"
#include "pd_gateway_int.h"

/* MHD hands the reader at most this much per call, and callocs it per streaming response
 * (64 KiB x 512 streams cost 32 MB; 8 KiB 4 MB). One SSE event per chunk is a few hundred
 * bytes; a backlog goes out 2 KiB a chunk. */
#define PD_GATEWAY_HTTP_BLOCK_BYTES (2u * 1024u)
/* libmicrohttpd's memory pool per connection (request head, body pieces, response head, the
 * chunk being written): above the gate's 8 KiB bound on a first head (pd_httpd.h), so that
 * MHD never answers those itself; a 7.8 KB head still gets its 200. 16 KiB cost 8.4 MB at
 * 512 streams (heaptrack), 12 KiB 6.3 MB. */
#define PD_GATEWAY_HTTP_POOL_BYTES (12u * 1024u)
_Static_assert(PD_GATEWAY_HTTP_POOL_BYTES >= PD_HTTPD_MAX_HEAD + 4096u, "a first head fits MHD's pool");

static const struct {
  const char *path;
  pd_gateway_http_kind_t kind;
  pd_gateway_route_t route;
} routes[] = {
    {"/generate", PD_GATEWAY_HTTP_CORE, PD_GATEWAY_ROUTE_GENERATE},
    {"/v1/completions", PD_GATEWAY_HTTP_CORE, PD_GATEWAY_ROUTE_COMPLETIONS},
    {"/v1/chat/completions", PD_GATEWAY_HTTP_CORE, PD_GATEWAY_ROUTE_CHAT},
    {"/health", PD_GATEWAY_HTTP_LOCAL, PD_GATEWAY_ROUTE_HEALTH},
    {"/readiness", PD_GATEWAY_HTTP_LOCAL, PD_GATEWAY_ROUTE_READINESS},
    {"/metrics", PD_GATEWAY_HTTP_LOCAL, PD_GATEWAY_ROUTE_METRICS},
    {"/get_server_info", PD_GATEWAY_HTTP_INFO, PD_GATEWAY_ROUTE_INFO},
    {"/server_info", PD_GATEWAY_HTTP_INFO, PD_GATEWAY_ROUTE_INFO},
    {"/get_model_info", PD_GATEWAY_HTTP_INFO, PD_GATEWAY_ROUTE_INFO},
    {"/model_info", PD_GATEWAY_HTTP_INFO, PD_GATEWAY_ROUTE_INFO},
    {"/v1/models", PD_GATEWAY_HTTP_INFO, PD_GATEWAY_ROUTE_INFO},
};
#define PD_GATEWAY_HTTP_NROUTES (sizeof routes / sizeof routes[0])

/* ---------- connections ---------- */

static pd_gateway_conn_t *conn_new(pd_gateway_t *g, struct MHD_Connection *mc) {
  pd_gateway_conn_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->g = g;
  c->mc = mc;
  c->fd = -1;
  c->route = PD_GATEWAY_ROUTE_OTHER;
  pd_buf_init(&c->body, g->cfg.max_body_bytes); /* take_upload keeps it within the limit */
  pd_buf_init(&c->out, PD_GATEWAY_HTTP_OUT_BUF_BYTES);
  c->next = g->conns;
  if (g->conns) g->conns->prev = c;
  g->conns = c;
  return c;
}

static void conn_del(pd_gateway_t *g, pd_gateway_conn_t *c) {
  assert(!c->is_deferred); /* g->defer is empty outside libcurl's calls */
  if (c->prev)
    c->prev->next = c->next;
  else
    g->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  pd_buf_free(NULL, &c->body);
  pd_buf_free(NULL, &c->out);
  curl_slist_free_all(c->fwd);
  if (c->is_corked) g->n_corked--; /* the socket goes with the connection */
  free(c);
}

static void suspend(pd_gateway_conn_t *c) {
  if (c->is_suspended) return;
  MHD_suspend_connection(c->mc);
  c->is_suspended = 1;
}

void pd_gateway_http_wake(pd_gateway_conn_t *c) {
  if (!c->is_suspended) return;
  c->is_suspended = 0;
  c->g->mhd_kick = 1;
  MHD_resume_connection(c->mc);
}

static void record(pd_gateway_conn_t *c, int status) {
  if (c->is_recorded) return;
  c->is_recorded = 1;
  pd_gateway_metrics_request(&c->g->metrics, c->route, status);
}

/* ---------- responses ---------- */

static enum MHD_Result respond(pd_gateway_conn_t *c, int status, const char *ctype,
                               const char *body, size_t len, int is_close) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  if (c->xrid[0]) MHD_add_response_header(r, "X-Request-Id", c->xrid); /* R-XRID */
  if (c->retry_after_s && status == c->head_status) { /* R-ADMIT-SHED */
    char ra[16];
    snprintf(ra, sizeof ra, "%u", c->retry_after_s);
    MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra);
  }
  if (is_close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ok = MHD_queue_response(c->mc, (unsigned)status, r);
  MHD_destroy_response(r);
  if (ok == MHD_YES) {
    c->is_queued = 1;
    record(c, status);
  }
  return ok;
}

/* The core's error body shape (R1.42): {"error":{"type","code","message","status"}}. */
static enum MHD_Result respond_error(pd_gateway_conn_t *c, int status, const char *code,
                                     const char *msg, int is_close) {
  cJSON *root = cJSON_CreateObject();
  cJSON *err = cJSON_AddObjectToObject(root, "error");
  const char *phrase = MHD_get_reason_phrase_for((unsigned)status);
  cJSON_AddStringToObject(err, "type", phrase && *phrase ? phrase : "Error");
  cJSON_AddStringToObject(err, "code", code);
  cJSON_AddStringToObject(err, "message", msg);
  cJSON_AddNumberToObject(err, "status", status);
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!s) return MHD_NO;
  enum MHD_Result ok = respond(c, status, "application/json", s, strlen(s), is_close);
  cJSON_free(s);
  return ok;
}

/* MHD asks for the next chunk, with everything before it sent. Once it finds nothing, an SSE
 * stream on HTTP/1.1 goes direct: its chunks are written straight to the socket
 * (pd_gateway_client.c) while MHD keeps the connection suspended, and MHD is resumed only to
 * end it (the last chunk, or the cut of an abort). */
static ssize_t reader_next(pd_gateway_conn_t *c, char *buf, size_t max);

/* The head is out when MHD first asks: a corked head leaves with the first chunk (written
 * direct in reader_next) or alone, now. */
static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  pd_gateway_conn_t *c = cls;
  ssize_t n = reader_next(c, buf, max);
  if (c->is_corked) pd_gateway_http_cork(c->g, c, 0);
  return n;
}

static ssize_t reader_next(pd_gateway_conn_t *c, char *buf, size_t max) {
  if (c->is_gone) return MHD_CONTENT_READER_END_WITH_ERROR; /* cancelled: cut it short */
  if (c->is_direct) { /* resumed to end: direct bytes are never MHD's to frame */
    if (pd_gateway_http_backlog(c) || !c->is_ended) return MHD_CONTENT_READER_END_WITH_ERROR;
    return c->is_abort ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
  }
  size_t avail = pd_gateway_http_backlog(c);
  /* The head is out (MHD calls the reader only then): an SSE stream that will go direct sends
   * its first bytes direct too, one MHD_run (an epoll_wait and a walk of MHD's lists) sooner. */
  if (avail && !c->is_ended && c->is_sse && c->is_http11 && c->fd >= 0 && c->is_watched) {
    int rc = pd_gateway_http_direct_first(c->g, c);
    if (rc < 0) return MHD_CONTENT_READER_END_WITH_ERROR;
    if (rc == 0) {
      if (c->rq && pd_gateway_http_backlog(c) <= PD_GATEWAY_HTTP_RESUME_BYTES)
        pd_gateway_upstream_resume_req(c->g, c->rq);
      suspend(c); /* resumed only to end the stream */
      return 0;
    }
  }
  if (avail) {
    size_t n = avail < max ? avail : max;
    memcpy(buf, c->out.p + c->out_off, n);
    c->out_off += n;
    if (c->out_off == c->out.len) c->out.len = c->out_off = 0;
    if (c->rq && pd_gateway_http_backlog(c) <= PD_GATEWAY_HTTP_RESUME_BYTES)
      pd_gateway_upstream_resume_req(c->g, c->rq);
    return (ssize_t)n;
  }
  if (c->rq) pd_gateway_upstream_resume_req(c->g, c->rq);
  if (c->is_ended)
    return c->is_abort ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
  if (c->is_sse && c->is_http11 && c->fd >= 0 && c->is_watched) c->is_direct = 1;
  suspend(c); /* resumed by the next client action (direct: by its end) */
  return 0;
}

/* Queue the core's response once its head is known: whole JSON answers with a length, the
 * rest (SSE, or anything that may still abort) streamed chunked through reader(). */
static enum MHD_Result try_respond(pd_gateway_conn_t *c) {
  if (c->is_gone) return MHD_NO;
  if (c->is_queued) return MHD_YES;
  if (!c->head_status) {
    if (c->is_ended) return MHD_NO; /* ended without a head (an abort): just close */
    suspend(c);
    return MHD_YES;
  }
  const char *ctype = c->is_sse ? "text/event-stream" : "application/json";
  if (!c->is_sse && c->is_ended && !c->is_abort) {
    enum MHD_Result ok = respond(c, c->head_status, ctype, pd_buf_str(&c->out) + c->out_off,
                                 c->out.len - c->out_off, 0);
    c->out.len = c->out_off = 0;
    return ok;
  }
  struct MHD_Response *r = MHD_create_response_from_callback(
      MHD_SIZE_UNKNOWN, PD_GATEWAY_HTTP_BLOCK_BYTES, reader, c, NULL);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  if (c->xrid[0]) MHD_add_response_header(r, "X-Request-Id", c->xrid); /* R-XRID */
  if (c->is_sse) MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  enum MHD_Result ok = MHD_queue_response(c->mc, (unsigned)c->head_status, r);
  MHD_destroy_response(r);
  if (ok == MHD_YES) {
    c->is_queued = 1;
    record(c, c->head_status);
  }
  return ok;
}

/* ---------- local routes ---------- */

static enum MHD_Result respond_readiness(pd_gateway_t *g, pd_gateway_conn_t *c) {
  uint32_t ok[2] = {0, 0};
  uint64_t now = pd_gateway_now_ns();
  for (int r = 0; r < 2; r++)
    for (uint32_t w = 0; w < pd_gw_worker_count(g->core, (pd_role_t)r); w++)
      if (pd_gw_breaker_state(g->core, (pd_role_t)r, w, now) != PD_BREAKER_OPEN) ok[r]++;
  int is_ready = ok[0] > 0 && ok[1] > 0;
  char body[160];
  int n = snprintf(body, sizeof body,
                   "{\"status\":\"%s\",\"prefill_available\":%u,\"decode_available\":%u}",
                   is_ready ? "ready" : "not_ready", ok[0], ok[1]);
  return respond(c, is_ready ? 200 : 503, "application/json", body, (size_t)n, 0);
}

static enum MHD_Result respond_metrics(pd_gateway_t *g, pd_gateway_conn_t *c) {
  pd_gateway_metrics_view_t v = {.core = g->core,
                     .names = {g->urls[0], g->urls[1]},
                     .n = {g->cfg.n_prefill, g->cfg.n_decode},
                     .now_ns = pd_gateway_now_ns(),
                     .connections = g->n_conns,
                     .requests_live = g->n_slots - g->n_free};
  uint32_t guard = 0;
  for (const pd_gateway_conn_t *o = g->conns; o && guard < (1u << 24);
       o = o->next, guard++) {
    uint64_t b = pd_gateway_http_backlog(o);
    v.buffered_bytes += b;
    if (b > v.buffered_max) v.buffered_max = b;
  }
  char *text = NULL;
  size_t len = 0;
  if (pd_gateway_metrics_render(&g->metrics, &v, &text, &len))
    return respond_error(c, 500, "internal_error", "out of memory", 0);
  enum MHD_Result ok = respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, 0);
  free(text);
  return ok;
}

static enum MHD_Result respond_local(pd_gateway_t *g, pd_gateway_conn_t *c) {
  switch (c->route) {
  case PD_GATEWAY_ROUTE_READINESS: return respond_readiness(g, c);
  case PD_GATEWAY_ROUTE_METRICS: return respond_metrics(g, c);
  default: return respond(c, 200, "application/json", "{\"status\":\"ok\"}", 15, 0);
  }
}

/* ---------- the access handler ---------- */

static void classify(pd_gateway_conn_t *c, const char *url, const char *method) {
  int is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  c->kind = PD_GATEWAY_HTTP_REJECT;
  c->head_status = 404;
  for (size_t i = 0; i < PD_GATEWAY_HTTP_NROUTES; i++) {
    if (strcmp(url, routes[i].path) != 0) continue;
    c->route = routes[i].route;
    c->path = routes[i].path;
    int is_ok = routes[i].kind == PD_GATEWAY_HTTP_CORE ? strcmp(method, "POST") == 0 : is_get;
    c->kind = is_ok ? routes[i].kind : PD_GATEWAY_HTTP_REJECT;
    c->head_status = is_ok ? 0 : 405;
    return;
  }
}

/* X-Request-Id, which the gateway forwards to both legs (R1.28): one, short, printable. A
 * second one or an over-long one was dropped without notice; now the request is refused. */
typedef struct xrid_check {
  unsigned n;
  int is_long, is_ctl;
} xrid_check_t;

static enum MHD_Result xrid_iter(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size) {
  (void)kind;
  (void)key_size;
  xrid_check_t *x = cls;
  if (!key || strcasecmp(key, "X-Request-Id") != 0) return MHD_YES;
  x->n++;
  if (value_size > PD_GATEWAY_HTTP_MAX_XRID) x->is_long = 1;
  for (size_t i = 0; value && i < value_size; i++)
    if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f) x->is_ctl = 1;
  return MHD_YES;
}

/* The request's id (R-XRID): the client's X-Request-Id when it sent an acceptable one, else
 * a uuid4 of the gateway's own, which goes to both legs like a client's would. */
static void xrid_take(pd_gateway_t *g, pd_gateway_conn_t *c, int is_refused) {
  const char *v = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "X-Request-Id");
  if (!is_refused && v && *v && strlen(v) <= PD_GATEWAY_HTTP_MAX_XRID) {
    snprintf(c->xrid, sizeof c->xrid, "%s", v);
    return;
  }
  uint64_t a = pd_prng_next(&g->xrid_rng), b = pd_prng_next(&g->xrid_rng);
  snprintf(c->xrid, sizeof c->xrid, "%08x-%04x-4%03x-%04x-%012llx", (unsigned)(a >> 32),
           (unsigned)(a >> 16) & 0xffffu, (unsigned)a & 0xfffu,
           (unsigned)(0x8000u | ((b >> 48) & 0x3fffu)), (unsigned long long)(b & 0xffffffffffffull));
  c->is_xrid_own = 1;
}

static int xrid_bad(struct MHD_Connection *mc, char *msg, size_t cap) {
  xrid_check_t x = {0, 0, 0};
  MHD_get_connection_values_n(mc, MHD_HEADER_KIND, xrid_iter, &x);
  if (x.n > 1)
    snprintf(msg, cap, "header 'X-Request-Id': given %u times, at most once", x.n);
  else if (x.is_long)
    snprintf(msg, cap, "header 'X-Request-Id': longer than %u bytes", PD_GATEWAY_HTTP_MAX_XRID);
  else if (x.is_ctl)
    snprintf(msg, cap, "header 'X-Request-Id': a control character in the value");
  else
    return 0;
  return 1;
}

#define PD_GATEWAY_PRIO_HEADER "x-gateway-inference-objective"

static enum MHD_Result on_first(pd_gateway_t *g, struct MHD_Connection *mc, const char *url,
                                const char *method, const char *version, void **req_cls) {
  pd_gateway_conn_t *c = conn_new(g, mc);
  if (!c) return MHD_NO;
  *req_cls = c;
  c->is_http11 = version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
  classify(c, url, method);
  if (pd_httpd_is_killed(&g->httpd, mc)) return MHD_NO; /* refused: a 503 is out already */
  char why[160];
  if (pd_httpd_framing(&g->httpd, mc, why, sizeof why)) {
    c->is_ended = 1; /* no id echoed: the head itself is not trusted */
    return respond_error(c, 400, "bad_framing", why, 1);
  }
  int is_xrid_bad = xrid_bad(mc, why, sizeof why);
  if (is_xrid_bad) { /* answered once the body is read: keeps keep-alive */
    c->kind = PD_GATEWAY_HTTP_REJECT;
    c->head_status = 400;
    snprintf(c->reject_msg, sizeof c->reject_msg, "%s", why);
  }
  xrid_take(g, c, is_xrid_bad); /* a refused one is not echoed: the answer carries one of ours */
  /* R-ADMIT-PRIO: the class, as the Gateway API Inference Extension names its objective */
  const char *obj = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, PD_GATEWAY_PRIO_HEADER);
  int prio = obj ? pd_prio_parse(obj) : PD_PRIO_STANDARD;
  if (prio >= 0) {
    c->prio = (pd_prio_t)prio;
  } else if (c->kind == PD_GATEWAY_HTTP_CORE) { /* answered once the body is read */
    c->kind = PD_GATEWAY_HTTP_REJECT;
    c->head_status = 400;
    snprintf(c->reject_msg, sizeof c->reject_msg,
             "header '" PD_GATEWAY_PRIO_HEADER "': '%.60s' is not critical, standard or sheddable",
             obj);
  }
  const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Length");
  if (cl && strtoull(cl, NULL, 10) > g->cfg.max_body_bytes) { /* any route: nobody reads it */
    char msg[160];
    snprintf(msg, sizeof msg, "body: Content-Length %.30s exceeds the limit of %zu bytes", cl,
             g->cfg.max_body_bytes);
    c->is_ended = 1;
    return respond_error(c, 413, "payload_too_large", msg, 1);
  }
  if (c->kind == PD_GATEWAY_HTTP_REJECT && c->head_status != 400) {
    snprintf(c->reject_msg, sizeof c->reject_msg, "%s %.200s: %s", method, url,
             c->head_status == 404 ? "no such route" : "method not allowed on this route");
    return MHD_YES; /* answered once the body (if any, bounded) is read: keeps keep-alive */
  }
  return MHD_YES;
}

static enum MHD_Result take_upload(pd_gateway_t *g, pd_gateway_conn_t *c, const char *p, size_t n) {
  c->body_seen += n;
  /* A body nobody reads is dropped as it comes, so that the answer (413 for one over the
   * limit: MHD 0.9.75 cannot answer mid-upload) follows its end; --client-deadline-s bounds
   * how long that may take. */
  if (c->is_queued || c->kind != PD_GATEWAY_HTTP_CORE) return MHD_YES;
  if (!c->is_too_large && c->body.len + n > g->cfg.max_body_bytes) {
    c->is_too_large = 1;
    pd_buf_free(NULL, &c->body);
  }
  if (c->is_too_large) return MHD_YES;
  if (pd_buf_append(NULL, &c->body, p, n)) return MHD_NO;
  return MHD_YES;
}

/* The client headers smg forwards to both legs (R1.28): identity and trace context, so that
 * a worker's logs (and conform's attribution) tie a leg to the client's request. */
static const char *const fwd_names[] = {"authorization", "x-request-id",     "x-correlation-id",
                                        "traceparent",   "tracestate",       "x-smg-routing-key"};
#define PD_GATEWAY_HTTP_MAX_FWD 16u          /* forwarded headers per request */
#define PD_GATEWAY_HTTP_MAX_FWD_LINE 1024u   /* bytes of one forwarded header line */

static int is_forwarded(const char *name) {
  for (size_t i = 0; i < sizeof fwd_names / sizeof fwd_names[0]; i++)
    if (!strcasecmp(name, fwd_names[i])) return 1;
  return !strncasecmp(name, "x-request-id-", 13);
}

static enum MHD_Result collect_fwd(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
  (void)kind;
  pd_gateway_conn_t *c = cls;
  if (!key || !value || !is_forwarded(key)) return MHD_YES;
  if (c->n_fwd >= PD_GATEWAY_HTTP_MAX_FWD) return MHD_NO;
  char line[PD_GATEWAY_HTTP_MAX_FWD_LINE];
  int n = snprintf(line, sizeof line, "%s: %s", key, value);
  if (n < 0 || (size_t)n >= sizeof line || strpbrk(line, "\r\n")) return MHD_YES; /* not sent */
  struct curl_slist *l = curl_slist_append(c->fwd, line);
  if (!l) return MHD_NO;
  c->fwd = l;
  c->n_fwd++;
  return MHD_YES;
}

static enum MHD_Result feed_request(pd_gateway_t *g, pd_gateway_conn_t *c) {
  if (c->is_too_large) {
    char msg[120];
    snprintf(msg, sizeof msg, "body: exceeds the limit of %zu bytes", g->cfg.max_body_bytes);
    c->is_ended = 1;
    return respond_error(c, 413, "payload_too_large", msg, 1);
  }
  pd_gateway_request_t *rq = pd_gateway_req_new(g);
  if (!rq) {
    c->is_ended = 1;
    return respond_error(c, 503, "overloaded", "too many requests in flight", 0);
  }
  rq->conn = c;
  c->rq = rq;
  c->is_fed = 1;
  c->t_start_ns = pd_gateway_now_ns();
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  c->fd = ci ? ci->connect_fd : -1;
  if (g->cfg.core.mode != PD_MODE_MINILB) { /* mini_lb posts the JSON body alone */
    MHD_get_connection_values(c->mc, MHD_HEADER_KIND, collect_fwd, c);
    char line[PD_GATEWAY_HTTP_MAX_XRID + 32]; /* our own id goes to the legs too (R-XRID) */
    struct curl_slist *l = NULL;
    if (c->is_xrid_own && c->n_fwd < PD_GATEWAY_HTTP_MAX_FWD &&
        snprintf(line, sizeof line, "X-Request-Id: %s", c->xrid) < (int)sizeof line &&
        (l = curl_slist_append(c->fwd, line)) != NULL) {
      c->fwd = l;
      c->n_fwd++;
    }
  }
  pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST,
                   .req_id = rq->id,
                   .path = c->path,
                   .data = (const uint8_t *)pd_buf_str(&c->body),
                   .len = c->body.len,
                   .prio = c->prio};
  int rc = pd_gateway_feed(g, &ev); /* may answer at once (4xx) and even free rq */
  pd_buf_free(NULL, &c->body);
  if (rc && c->rq && !c->head_status) { /* the core could not take it (out of memory) */
    pd_gateway_req_del(g, c->rq);
    c->is_gone = 0;
    c->is_ended = 1;
    return respond_error(c, 500, "internal_error", pd_strerror(rc), 0);
  }
  if (c->rq && !c->is_ended) pd_gateway_watch(g, c);
  return try_respond(c);
}

static enum MHD_Result on_info(pd_gateway_t *g, pd_gateway_conn_t *c) {
  if (c->is_gone) return MHD_NO;
  if (c->head_status) return try_respond(c);
  if (!c->info && pd_gateway_upstream_info_start(g, c, c->path))
    return respond_error(c, 500, "proxy_request_failed", "cannot start the info request", 0);
  suspend(c);
  return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **req_cls) {
  pd_gateway_t *g = cls;
  pd_gateway_conn_t *c = *req_cls;
  if (!c) {
    pd_httpd_request_begin(&g->httpd, mc);
    return on_first(g, mc, url, method, version, req_cls);
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    return take_upload(g, c, upload, n);
  }
  pd_httpd_request_whole(&g->httpd, mc);
  if (c->is_queued) return MHD_YES;
  if (c->kind != PD_GATEWAY_HTTP_CORE && c->body_seen > g->cfg.max_body_bytes) { /* e.g. chunked */
    c->kind = PD_GATEWAY_HTTP_REJECT;
    c->head_status = 413;
    snprintf(c->reject_msg, sizeof c->reject_msg, "body: exceeds the limit of %zu bytes",
             g->cfg.max_body_bytes);
  }
  switch (c->kind) {
  case PD_GATEWAY_HTTP_LOCAL: return respond_local(g, c);
  case PD_GATEWAY_HTTP_INFO: return on_info(g, c);
  case PD_GATEWAY_HTTP_CORE: return c->is_fed ? try_respond(c) : feed_request(g, c);
  default:
    c->is_ended = 1;
    return respond_error(c, c->head_status,
                         c->head_status == 404   ? "unknown_route"
                         : c->head_status == 413 ? "payload_too_large"
                         : c->head_status == 400 ? "bad_header"
                                                 : "method_not_allowed",
                         c->reject_msg, c->head_status == 413);
  }
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls,
                         enum MHD_RequestTerminationCode toe) {
  pd_gateway_t *g = cls;
  pd_httpd_request_over(&g->httpd, mc);
  pd_gateway_conn_t *c = *req_cls;
  if (!c) return;
  *req_cls = NULL;
  if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && !c->is_gone)
    pd_gateway_unwatch_keep(g, c);
  else
    pd_gateway_unwatch(g, c);
  if (c->info) pd_gateway_upstream_info_cancel(g, c);
  pd_gateway_request_t *rq = c->rq;
  if (rq) {
    rq->conn = NULL;
    c->rq = NULL;
    if (!c->is_ended) { /* the client left (or MHD gave up on it) before the end */
      if (!c->is_gone) g->metrics.client_disconnects++;
      pd_event_t ev = {.kind = PD_EV_CLIENT_GONE, .req_id = rq->id};
      pd_gateway_feed(g, &ev);
    }
  }
  if (c->kind != PD_GATEWAY_HTTP_LOCAL && !c->is_recorded) record(c, 499);
  conn_del(g, c);
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode toe) {
  pd_gateway_t *g = cls;
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (ci) pd_gateway_watch_forget(g, ci->connect_fd); /* a new socket, or one MHD closes */
  pd_httpd_notify(&g->httpd, mc, socket_ctx, toe);
  g->n_conns = pd_httpd_count(&g->httpd);
  pthread_mutex_lock(&g->httpd.mu);
  g->metrics.rejected_connections = g->httpd.refused;
  pthread_mutex_unlock(&g->httpd.mu);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  const pd_gateway_t *g = cls;
  if (!g->cfg.is_verbose) return;
  fputs("pdref gateway: mhd: ", stderr);
  vfprintf(stderr, fmt, ap);
}

/* ---------- daemon ---------- */

static int listen_addr(const pd_gateway_t *g, struct sockaddr_storage *ss, int *is_v6) {
  struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  if (getaddrinfo(g->cfg.listen_host, NULL, &hints, &ai) || !ai) return PD_ERR_INVAL;
  memcpy(ss, ai->ai_addr, ai->ai_addrlen);
  *is_v6 = ai->ai_family == AF_INET6;
  freeaddrinfo(ai);
  if (*is_v6)
    ((struct sockaddr_in6 *)ss)->sin6_port = htons(g->cfg.listen_port);
  else
    ((struct sockaddr_in *)ss)->sin_port = htons(g->cfg.listen_port);
  return 0;
}

/* The listening socket (the gate accepts: pd_httpd.h); its port into g->port. */
static int listen_socket(pd_gateway_t *g, const struct sockaddr_storage *ss, int is_v6) {
  socklen_t len = is_v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  int fd = socket(is_v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  struct sockaddr_storage got;
  socklen_t glen = sizeof got;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(fd, (const struct sockaddr *)ss, len) < 0 || listen(fd, 1024) < 0 ||
      getsockname(fd, (struct sockaddr *)&got, &glen) < 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  g->port = ntohs(is_v6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                        : ((struct sockaddr_in *)&got)->sin_port);
  return fd;
}

/* The gate found a good first head: libmicrohttpd takes the connection (loop thread). */
static int hand(void *ctx, int fd, const struct sockaddr *a, socklen_t alen) {
  pd_gateway_t *g = ctx;
  g->mhd_kick = 1;
  return MHD_add_connection(g->mhd, fd, a, alen) != MHD_YES;
}

void pd_gateway_http_gate(pd_gateway_t *g) {
  if (g->has_httpd) pd_httpd_gate_run(&g->httpd, 0);
}

int pd_gateway_http_start(pd_gateway_t *g, char *err, size_t errlen) {
  struct sockaddr_storage ss;
  int is_v6 = 0;
  if (listen_addr(g, &ss, &is_v6)) {
    snprintf(err, errlen, "--listen: '%s' is not a numeric IPv4/IPv6 address", g->cfg.listen_host);
    return PD_ERR_INVAL;
  }
  if (pd_httpd_init(&g->httpd, g->cfg.max_connections, g->cfg.client_deadline_s,
                    g->cfg.client_timeout_s, 1)) {
    snprintf(err, errlen, "out of memory");
    return PD_ERR_NOMEM;
  }
  g->has_httpd = 1;
  if (g->cfg.max_conns_per_peer) pd_httpd_set_per_peer(&g->httpd, g->cfg.max_conns_per_peer);
  int lfd = listen_socket(g, &ss, is_v6);
  if (lfd < 0) {
    snprintf(err, errlen, "cannot listen on %s:%u: %s", g->cfg.listen_host,
             (unsigned)g->cfg.listen_port, strerror(errno));
    return PD_ERR_IO;
  }
  if (pd_httpd_gate_init(&g->httpd, lfd, hand, g)) {
    close(lfd);
    return PD_ERR_NOMEM;
  }
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                   MHD_USE_NO_LISTEN_SOCKET;
  if (is_v6) flags |= MHD_USE_IPv6;
  g->mhd = MHD_start_daemon(
      flags, 0, NULL, NULL, on_access, g, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, g,
      MHD_OPTION_CONNECTION_LIMIT, pd_httpd_mhd_limit(&g->httpd), MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int)g->cfg.client_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, g,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, g, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      (size_t)PD_GATEWAY_HTTP_POOL_BYTES, MHD_OPTION_END);
  if (!g->mhd) {
    snprintf(err, errlen, "libmicrohttpd: cannot start the HTTP daemon");
    return PD_ERR_IO;
  }
  const union MHD_DaemonInfo *ei = MHD_get_daemon_info(g->mhd, MHD_DAEMON_INFO_EPOLL_FD);
  if (!ei || pd_httpd_start(&g->httpd)) return PD_ERR_IO;
  if (pd_gateway_add_fd(g, pd_httpd_gate_fd(&g->httpd), PD_GATEWAY_TAG(PD_GATEWAY_TAG_MHD, 1)))
    return PD_ERR_IO;
  return pd_gateway_add_fd(g, ei->epoll_fd, PD_GATEWAY_TAG(PD_GATEWAY_TAG_MHD, 0));
}

void pd_gateway_http_stop(pd_gateway_t *g) {
  if (g->has_httpd) pd_httpd_stop(&g->httpd); /* no sweep during the stop */
  if (!g->mhd) {
    if (g->has_httpd) pd_httpd_free(&g->httpd);
    g->has_httpd = 0;
    return;
  }
  for (pd_gateway_conn_t *c = g->conns; c; c = c->next) {
    c->is_gone = 1;
    pd_gateway_http_wake(c); /* MHD_stop_daemon must not meet a suspended connection */
  }
  MHD_stop_daemon(g->mhd); /* NOTIFY_COMPLETED for each: CLIENT_GONE fed, conns freed */
  g->mhd = NULL;
  pd_httpd_free(&g->httpd);
  g->has_httpd = 0;
}
