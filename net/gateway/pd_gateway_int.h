/* Internal to net/gateway/pd_gateway*.c and net/gateway/pd_gateway_*.c: the loop object, the client
 * connection, the core request record and the upstream transfer, shared by the loop (pd_gateway.c),
 * the HTTP side (pd_gateway_http.c) and the libcurl side (pd_gateway_upstream.c). */
#ifndef PD_GATEWAY_INT_H
#define PD_GATEWAY_INT_H
#include <curl/curl.h>
#include <microhttpd.h>
#include <stdatomic.h>

#include "pd_buf.h"
#include "pd_gateway.h"
#include "pd_gateway_metrics.h"
#include "pd_httpd.h"

/* epoll data tags (top byte of data.u64). */
enum {
  PD_GATEWAY_TAG_MHD = 1,
  PD_GATEWAY_TAG_CURL = 2,
  PD_GATEWAY_TAG_WATCH = 3,
  PD_GATEWAY_TAG_WAKE = 4
};
#define PD_GATEWAY_TAG(t, v) (((uint64_t)(t) << 56) | (uint64_t)(v))

/* Core requests alive at once: they may outlive their client connection (R-TAIL, pr1150's
 * detached prefill), so the table is larger than the connection limit. */
#define PD_GATEWAY_INFLIGHT_PER_CONN 4u
/* Bytes queued for one client beyond what its socket takes: a reader slower than this is
 * treated as gone (its legs are cancelled) rather than buffered without bound. */
#define PD_GATEWAY_HTTP_MAX_OUT_BYTES (16u * 1024u * 1024u)
/* Backpressure: a decode leg stops being read (CURL_WRITEFUNC_PAUSE) while its client has
 * more than PAUSE bytes unsent, and is read again once the client is down to RESUME. With
 * one SSE event at most a few hundred bytes, that is some 100 events of slack per stream,
 * and a stream's buffer stays below 64 KiB whatever the client's speed. */
#define PD_GATEWAY_HTTP_PAUSE_BYTES (32u * 1024u)
#define PD_GATEWAY_HTTP_RESUME_BYTES (8u * 1024u)
/* Sent bytes at the front of a client buffer are dropped (memmove) past this much. */
#define PD_GATEWAY_HTTP_COMPACT_BYTES (16u * 1024u)
/* Direct streams whose writes wait for the end of one libcurl call (more: written at once). */
#define PD_GATEWAY_DEFER_MAX 1024u
/* Largest proxied info response. */
#define PD_GATEWAY_UPSTREAM_MAX_INFO_BYTES (1024u * 1024u)
/* Abort posts in flight; beyond it an abort is dropped (and counted). */
#define PD_GATEWAY_UPSTREAM_MAX_ABORTS 4096u

/* A client's output buffer: at most PD_GATEWAY_HTTP_MAX_OUT_BYTES unsent past out_off, which is
 * compacted once it reaches PD_GATEWAY_HTTP_COMPACT_BYTES; or an info answer relayed whole. */
#define PD_GATEWAY_HTTP_OUT_BUF_BYTES                                                              \
  (PD_GATEWAY_HTTP_MAX_OUT_BYTES + PD_GATEWAY_HTTP_COMPACT_BYTES +                                 \
   PD_GATEWAY_UPSTREAM_MAX_INFO_BYTES)

typedef enum {
  PD_GATEWAY_HTTP_CORE = 0,
  PD_GATEWAY_HTTP_LOCAL = 1,
  PD_GATEWAY_HTTP_INFO = 2,
  PD_GATEWAY_HTTP_REJECT = 3
} pd_gateway_http_kind_t;

struct pd_gateway_request;
struct pd_gateway_transfer;

/* The longest X-Request-Id a client may send (longer: 400). */
#define PD_GATEWAY_HTTP_MAX_XRID 256u

/* One client request on one MHD connection (MHD's *req_cls). */
typedef struct pd_gateway_conn {
  struct pd_gateway *g;
  struct MHD_Connection *mc;
  struct pd_gateway_conn *prev, *next; /* g->conns */
  pd_gateway_http_kind_t kind;
  int route;             /* pd_gateway_route_t */
  const char *path;      /* static route path for the core */
  struct pd_gateway_request *rq;   /* core request, NULL before feeding and after its DONE */
  struct pd_gateway_transfer *info; /* proxied info transfer */
  pd_buf_t body;       /* request body */
  struct curl_slist *fwd; /* client headers forwarded to the worker legs (R1.28) */
  uint32_t n_fwd;
  size_t body_seen;      /* bytes uploaded, kept or not */
  int is_too_large, is_fed, is_suspended, is_queued, is_recorded;
  int head_status, is_sse, saw_data;
  uint32_t retry_after_s; /* R-ADMIT-SHED: the head's Retry-After (0: none) */
  pd_buf_t out; /* response bytes not yet taken by MHD */
  size_t out_off;
  int is_ended, is_abort, is_gone;
  int fd, is_watched;
  int is_http11; /* an HTTP/1.1 request: MHD frames an SSE answer chunked */
  int is_direct; /* the stream's chunks go straight to the socket (pd_gateway_client.c) */
  int is_corked; /* TCP_CORK from the SSE head until the first chunk is written (one segment) */
  int is_out_wait;       /* direct: bytes wait for room (EPOLLOUT on the watch) */
  int is_deferred;       /* direct: in g->defer, its chunks go out when libcurl returns */
  uint64_t out_wait_ns;  /* direct: when the socket last took bytes while some wait */
  uint64_t t_start_ns;
  char reject_msg[256]; /* PD_GATEWAY_HTTP_REJECT: the 404/405 message */
  /* The request's X-Request-Id (R-XRID): the client's, or one the gateway made (is_xrid_own),
   * replaced by the core's own id when the core puts one on the legs (vllm-toy-proxy); echoed
   * on the response. */
  char xrid[PD_GATEWAY_HTTP_MAX_XRID + 1];
  int is_xrid_own;
  pd_prio_t prio; /* R-ADMIT-PRIO: x-gateway-inference-objective, default standard */
} pd_gateway_conn_t;

/* One core request (req_id = gen << 24 | slot). */
typedef struct pd_gateway_request {
  uint64_t id;
  pd_gateway_conn_t *conn;
  struct pd_gateway_transfer *legs[PD_MAX_LEGS];
  uint32_t n_legs;
} pd_gateway_request_t;

typedef enum {
  PD_GATEWAY_UPSTREAM_CORE = 0,
  PD_GATEWAY_UPSTREAM_ABORT = 1,
  PD_GATEWAY_UPSTREAM_INFO = 2
} pd_gateway_upstream_kind_t;
typedef enum {
  PD_GATEWAY_UPSTREAM_NEW = 0,
  PD_GATEWAY_UPSTREAM_ACTIVE = 1
} pd_gateway_upstream_state_t;

/* One libcurl transfer: a core leg, an abort post or an info proxy. */
typedef struct pd_gateway_transfer {
  struct pd_gateway *g;
  pd_gateway_upstream_kind_t kind;
  pd_gateway_upstream_state_t state;
  CURL *easy;
  struct curl_slist *hdrs;
  struct pd_gateway_transfer *prev, *next; /* g->legs */
  struct pd_gateway_transfer *next_dirty;  /* g->dirty: to add or to remove at the next flush */
  int is_dirty;
  pd_gateway_request_t *rq;    /* CORE: owner, NULL once closed or finished */
  pd_gateway_conn_t *conn; /* INFO: owner, NULL once the client left */
  uint64_t leg_id;
  pd_role_t role;
  uint32_t worker;
  int is_head_sent, is_closed, is_finished;
  int is_paused, want_resume; /* backpressure: reads paused; resume at the next flush */
  uint32_t n_sends; /* times libcurl was about to send the request (prereq_cb) */
  int pool_role;    /* CORE: the role whose handle pool takes the easy handle back; else -1 */
  int is_ok;        /* finished with CURLE_OK: the handle may be reused */
  long status;
  pd_buf_t resp; /* INFO: response body */
} pd_gateway_transfer_t;

struct pd_gateway {
  pd_gateway_config_t cfg;
  char *urls[2][PD_MAX_WORKERS]; /* owned copies, no trailing '/' */
  pd_prng_t rng;
  pd_prng_t xrid_rng; /* the gateway's own X-Request-Ids (not the core's draws) */
  pd_gw_t *core;
  pd_actbuf_t acts;
  int in_feed;
  struct MHD_Daemon *mhd;
  uint16_t port;
  int epfd, wakefd;
  int is_gate_ready, is_mhd_ready; /* their fds were ready this turn */
  int mhd_kick; /* a connection was resumed or handed in: MHD_run has work this turn */
  atomic_int stop;
  CURLM *multi;
  int is_curl_init;
  /* libcurl's sockets in the epoll set (pd_gateway_upstream.c, PD_GATEWAY_CURL_FD_*), by fd:
   * a pooled connection's socket stays registered between its transfers. */
  uint8_t *curl_fds;
  uint32_t n_curl_fds;
  /* Easy handles of finished core legs, per role, kept for the next leg of that role. */
  CURL **easy_pool[2];
  uint32_t n_easy_pool[2], cap_easy_pool;
  uint64_t curl_deadline_ns; /* 0 = none */
  pd_gateway_request_t **slots;
  uint32_t *gens, *free_slots;
  uint32_t n_slots, n_free;
  pd_gateway_conn_t *conns;
  uint32_t n_conns; /* open client connections (MHD notify) */
  uint32_t n_out_wait; /* direct streams whose socket is full */
  uint32_t n_corked;   /* connections with is_corked */
  /* Direct streams written to while libcurl delivers worker bytes (is_deferring): their chunks
   * collect in c->out and leave with one send per stream when curl_multi_socket_action
   * returns, so a worker read that brought n events costs one client write, not n. */
  int is_deferring;
  uint32_t n_defer;
  struct pd_gateway_conn *defer[PD_GATEWAY_DEFER_MAX];
  uint8_t *watch_fds;  /* by fd: 1 = in the epoll set for the watch (pd_gateway_watch) */
  uint32_t n_watch_fds;
  uint64_t next_stuck_ns; /* next look for direct streams whose reader stopped */
  pd_httpd_t httpd;  /* connection limit, request deadline, framing (pd_httpd.h) */
  int has_httpd;
  pd_gateway_transfer_t *legs;
  pd_gateway_transfer_t *dirty, *dirty_tail; /* legs to add or remove at the next flush, in order */
  uint32_t n_aborts;         /* abort posts in flight */
  uint64_t gone_pending[64]; /* CLIENT_GONE to feed after the current batch (slow readers) */
  uint32_t n_gone_pending;
  pd_gateway_metrics_t metrics;
};

typedef struct pd_gateway pd_gateway_t;

/* --- loop (pd_gateway.c) --- */
uint64_t pd_gateway_now_ns(void);
/* Feed one event to the core and carry out its actions. Not reentrant (checked). Returns
 * pd_gw_feed's result (0, PD_ERR_NOMEM, PD_ERR_INVAL) or PD_ERR_FATAL when reentered. */
int pd_gateway_feed(pd_gateway_t *g, const pd_event_t *ev);
pd_gateway_request_t *pd_gateway_req_new(pd_gateway_t *g);
/* Forget a request record: its legs are closed, its connection (if any) detached. */
void pd_gateway_req_del(pd_gateway_t *g, pd_gateway_request_t *rq);
pd_gateway_request_t *pd_gateway_req_find(pd_gateway_t *g, uint64_t id);
/* Watch a client socket for the peer's close (EPOLLRDHUP) / stop watching. */
void pd_gateway_watch(pd_gateway_t *g, pd_gateway_conn_t *c);
/* Add a readable-interest fd to the loop with an epoll tag. 0 or PD_ERR_IO. */
int pd_gateway_add_fd(pd_gateway_t *g, int fd, uint64_t tag);
void pd_gateway_unwatch(pd_gateway_t *g, pd_gateway_conn_t *c);
/* The request of c ended well: stop watching for it, but leave its socket registered for the
 * connection's next request (keep-alive). */
void pd_gateway_unwatch_keep(pd_gateway_t *g, pd_gateway_conn_t *c);
/* MHD closes the connection of fd: drop a kept registration. */
void pd_gateway_watch_forget(pd_gateway_t *g, int fd);
void pd_gateway_log(const pd_gateway_t *g, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* --- HTTP side (pd_gateway_http.c) --- */
int pd_gateway_http_start(pd_gateway_t *g, char *err, size_t errlen);
void pd_gateway_http_stop(pd_gateway_t *g);
/* Apply a CLIENT_HEAD / CLIENT_DATA / CLIENT_END action to the request's connection. */
void pd_gateway_http_client_action(pd_gateway_t *g, pd_gateway_conn_t *c, const pd_action_t *a);
/* The client socket of c hung up (watch fired). */
void pd_gateway_http_client_hup(pd_gateway_t *g, pd_gateway_conn_t *c);
/* The watched socket of a direct stream has room: send what waits (watch fired, EPOLLOUT). */
void pd_gateway_http_client_writable(pd_gateway_t *g, pd_gateway_conn_t *c);
/* TCP_CORK on (the SSE head is coming, its first chunk right after it in the same MHD_run) /
 * off (both written: they leave as one segment, so the client wakes once, and the loopback
 * carries one transmit instead of two). pd_gateway_http_uncork_all is the loop's safety net
 * for a connection MHD did not get to. */
void pd_gateway_http_cork(pd_gateway_t *g, pd_gateway_conn_t *c, int is_on);
void pd_gateway_http_uncork_all(pd_gateway_t *g);
/* Largest first chunk an SSE stream sends direct from MHD's reader (larger: MHD sends it). */
#define PD_GATEWAY_HTTP_DIRECT_FIRST_MAX 4096u
/* From MHD's reader, right after MHD sent the head: the stream goes direct and its waiting
 * bytes (at most PD_GATEWAY_HTTP_DIRECT_FIRST_MAX) go out as one chunk on the socket, in this
 * MHD_run rather than the next. 0 sent (or queued for room), 1 not taken (MHD sends them),
 * -1 the socket failed (c->is_gone set). */
int pd_gateway_http_direct_first(pd_gateway_t *g, pd_gateway_conn_t *c);
/* Send what the direct streams written during a libcurl call have collected (g->defer). */
void pd_gateway_http_flush_deferred(pd_gateway_t *g);
/* Direct streams whose reader took nothing for --client-timeout-s are cut (each turn). */
void pd_gateway_http_client_stuck(pd_gateway_t *g);
/* Resume c if it is suspended, so MHD takes its news. */
void pd_gateway_http_wake(pd_gateway_conn_t *c);
/* An info proxy finished: status (0 = transport error) and body. */
void pd_gateway_http_info_done(pd_gateway_t *g, pd_gateway_conn_t *c, long status,
                               const pd_buf_t *body);
/* Let the gate (pd_httpd.h) accept and look at new connections (each loop turn). */
void pd_gateway_http_gate(pd_gateway_t *g);
/* Cancel every live client request (shutdown); stops accepting. */
void pd_gateway_http_cancel_all(pd_gateway_t *g);

/* --- upstream side (pd_gateway_upstream.c) --- */
int pd_gateway_upstream_init(pd_gateway_t *g);
void pd_gateway_upstream_free(pd_gateway_t *g);
void pd_gateway_upstream_open(pd_gateway_t *g, pd_gateway_request_t *rq, const pd_action_t *a);
void pd_gateway_upstream_close(pd_gateway_t *g, pd_gateway_request_t *rq, const pd_action_t *a);
/* Detach every leg of rq (the core forgot the request). */
void pd_gateway_upstream_detach_req(pd_gateway_t *g, pd_gateway_request_t *rq);
int pd_gateway_upstream_info_start(pd_gateway_t *g, pd_gateway_conn_t *c, const char *path);
void pd_gateway_upstream_info_cancel(pd_gateway_t *g, pd_gateway_conn_t *c);
void pd_gateway_upstream_on_socket(pd_gateway_t *g, int fd, uint32_t epoll_events);
/* Whether libcurl watches fd now (else it is a pooled connection's idle socket). */
int pd_gateway_upstream_is_watched(const pd_gateway_t *g, int fd);
void pd_gateway_upstream_on_timeout(pd_gateway_t *g);
/* Deliver finished transfers to their owners. */
void pd_gateway_upstream_drain(pd_gateway_t *g);
/* Add new transfers to the multi handle, remove closed and finished ones. */
void pd_gateway_upstream_flush(pd_gateway_t *g);
/* The client of rq has room again: paused legs of rq resume at the next flush. */
void pd_gateway_upstream_resume_req(pd_gateway_t *g, pd_gateway_request_t *rq);
/* Bytes a client connection has queued but MHD has not taken. */
static inline size_t pd_gateway_http_backlog(const pd_gateway_conn_t *c) {
  return c->out.len - c->out_off;
}

#endif
