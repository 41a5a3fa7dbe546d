/* pd_httpd: the HTTP-server hygiene that `pdref gateway` and `pdref mock` share on top of
 * libmicrohttpd 0.9.75 (docs/gateway.md, docs/mock.md, "Limits").
 *  - Connections are counted here and refused with a 503 JSON before libmicrohttpd's own
 *    limit is reached (0.9.75 wedges past it when connections are handed in with
 *    MHD_add_connection, and only closes them otherwise).
 *  - Every request must be whole (headers and body) within a bound counted from the accept,
 *    or from the end of the previous response on a kept-alive connection, whatever it
 *    trickles: a sweeper thread answers 408 and shuts the socket down past it (slowloris).
 *    libmicrohttpd's idle timeout is reset by each byte and cannot do this.
 *  - Framing libmicrohttpd lets through (two different Content-Length headers, a
 *    Transfer-Encoding other than "chunked") is refused with one 400 JSON.
 *  - Server-level errors share one JSON body: {"error":{"type","code","message","status"}}.
 * Thread-safe: one mutex; the notify callbacks may run on any libmicrohttpd thread. */
#ifndef PD_HTTPD_H
#define PD_HTTPD_H
#include <microhttpd.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* libmicrohttpd's limit is set this far above ours, so that ours always refuses first. */
#define PD_HTTPD_MHD_HEADROOM 64u
/* How often the sweeper looks for requests past their bound. */
#define PD_HTTPD_SWEEP_MS 100u

typedef struct pd_httpd_conn pd_httpd_conn_t;

typedef struct pd_httpd {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t sweeper;
  int has_sweeper, stopping;
  int is_counted_at_accept; /* the caller accepts (pd_httpd_admit); else counted at STARTED */
  uint32_t max_conns;
  uint64_t request_ns, idle_ns; /* the bound for a request; the idle timeout (keep-alive) */
  uint32_t n_conns;             /* admitted and not yet closed */
  uint64_t refused, timed_out, bad_framing;
  pd_httpd_conn_t *head;
} pd_httpd_t;

/* max_conns connections at once; request_s: bound for a whole request (s, >= 1); idle_s:
 * the daemon's idle timeout (a kept-alive connection gets max(request_s, idle_s) for its next
 * request). 0 or PD_ERR_NOMEM / PD_ERR_IO. Start the sweeper with pd_httpd_start. */
int pd_httpd_init(pd_httpd_t *h, uint32_t max_conns, uint32_t request_s, uint32_t idle_s,
                  int is_counted_at_accept);
int pd_httpd_start(pd_httpd_t *h);
/* Stop the sweeper (before MHD_stop_daemon); frees what is left after it. */
void pd_httpd_stop(pd_httpd_t *h);
void pd_httpd_free(pd_httpd_t *h);

/* The value for MHD_OPTION_CONNECTION_LIMIT. */
unsigned int pd_httpd_mhd_limit(const pd_httpd_t *h);

/* Accept path (is_counted_at_accept): 1 if fd may be handed to libmicrohttpd (counted), 0
 * if it was refused (a 503 written, fd closed). */
int pd_httpd_admit(pd_httpd_t *h, int fd);
/* A connection handed in with pd_httpd_admit that libmicrohttpd refused (it is uncounted). */
void pd_httpd_unadmit(pd_httpd_t *h);

/* Forward MHD_OPTION_NOTIFY_CONNECTION here (socket_ctx is used). */
void pd_httpd_notify(pd_httpd_t *h, struct MHD_Connection *mc, void **socket_ctx,
                     enum MHD_ConnectionNotificationCode toe);
/* The request on mc is whole (last access-handler call): its clock stops. */
void pd_httpd_request_whole(pd_httpd_t *h, struct MHD_Connection *mc);
/* The request on mc is over (MHD_OPTION_NOTIFY_COMPLETED): the next one's clock starts. */
void pd_httpd_request_over(pd_httpd_t *h, struct MHD_Connection *mc);

/* 1 if this connection was refused or timed out here (its socket is shut down): the access
 * handler answers nothing more on it. */
int pd_httpd_is_killed(pd_httpd_t *h, struct MHD_Connection *mc);

/* Framing check on the first access-handler call: 0, or 400 with msg filled. */
int pd_httpd_framing(pd_httpd_t *h, struct MHD_Connection *mc, char *msg, size_t cap);

/* The shared error body into buf (always NUL-terminated); returns its length. */
size_t pd_httpd_error_json(char *buf, size_t cap, unsigned status, const char *code,
                           const char *msg);

uint32_t pd_httpd_count(pd_httpd_t *h);

#endif
