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
#include <sys/socket.h>

/* libmicrohttpd's limit is set this far above ours, so that ours always refuses first. */
#define PD_HTTPD_MHD_HEADROOM 64u
/* How often the sweeper looks for requests past their bound. */
#define PD_HTTPD_SWEEP_MS 100u
/* The gate's bounds on a first request head (below libmicrohttpd's memory pool, so that it
 * never answers these itself): 414 past the line, 431 past the head. */
#define PD_HTTPD_MAX_LINE 4096u
/* libmicrohttpd's per-connection memory pool (MHD_OPTION_CONNECTION_MEMORY_LIMIT) for the
 * mock: above 32 KiB, 0.9.75 maps each pool with mmap and unmaps it at the close, so a peak
 * of connections is returned to the system; at or below it the pool is malloc'd in the
 * polling thread's arena, which glibc keeps after the peak (docs/mock.md, "Limits"). */
#define PD_HTTPD_POOL_BYTES (36u * 1024u)
#define PD_HTTPD_MAX_HEAD 8192u

typedef struct pd_httpd_conn pd_httpd_conn_t;
/* Hand a checked connection to libmicrohttpd (MHD_add_connection): 0, or nonzero when it
 * refused it (it closed fd). */
typedef int (*pd_httpd_hand_fn)(void *ctx, int fd, const struct sockaddr *a, socklen_t alen);

/* A peer: the client's IP address (not its port), IPv4 as v4-mapped IPv6. */
typedef struct pd_httpd_peer {
  uint8_t a[16];
} pd_httpd_peer_t;
void pd_httpd_peer_of(const struct sockaddr *a, socklen_t alen, pd_httpd_peer_t *out);

/* A connection held by the gate until its first head is in. */
typedef struct pd_httpd_pending {
  int fd, is_killed;
  pd_httpd_peer_t peer;
  uint64_t t0_ns;
  struct sockaddr_storage addr;
  socklen_t alen;
} pd_httpd_pending_t;

typedef struct pd_httpd {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t sweeper;
  int has_sweeper, stopping;
  int is_counted_at_accept; /* the caller accepts (pd_httpd_admit); else counted at STARTED */
  uint32_t max_conns;
  uint32_t max_per_peer; /* connections from one address (pd_httpd_set_per_peer) */
  uint64_t request_ns, idle_ns; /* the bound for a request; the idle timeout (keep-alive) */
  uint32_t n_conns;             /* admitted and not yet closed */
  uint32_t n_leaving;           /* of those, idle ones shut down to make room, not closed yet */
  uint64_t refused, timed_out, bad_framing, evicted, trims;
  uint64_t refused_peer; /* of refused: one address at its limit */
  uint32_t peak_conns; /* the most connections since the last trim (trim_after_peak) */
  pd_httpd_conn_t *head;
  /* the gate (pd_httpd_gate.c) */
  int gate_ep, listen_fd, is_gate_in_sweeper;
  pd_httpd_pending_t *gate; /* max_conns slots */
  uint32_t gate_next;
  uint64_t last_sweep_ns, accept_resume_ns; /* out of descriptors: accept again then */
  pd_httpd_hand_fn hand;
  void *hand_ctx;
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

/* The gate, after pd_httpd_init and before pd_httpd_start: listen_fd (>= 0) is accepted
 * by the gate itself; hand gets each connection whose first head passed. With
 * is_in_sweeper the sweeper thread runs the gate; else the caller runs pd_httpd_gate_run
 * from its loop (pd_httpd_gate_fd is readable when there is work). */
int pd_httpd_gate_init(pd_httpd_t *h, int listen_fd, pd_httpd_hand_fn hand, void *ctx);
int pd_httpd_gate_fd(const pd_httpd_t *h);
/* A connection accepted (and admitted) by the caller, to be held until its head is in. */
void pd_httpd_gate_add(pd_httpd_t *h, int fd, const struct sockaddr *a, socklen_t alen);
/* Stop accepting: the gate's listener and every pending connection are closed. */
void pd_httpd_gate_quiesce(pd_httpd_t *h);
/* One round: accept, look at pending connections; waits up to timeout_ms. */
int pd_httpd_gate_run(pd_httpd_t *h, int timeout_ms);
/* When a caller that runs the gate only on its fd's readiness must run it anyway: the time
 * accepting resumes after running out of descriptors (0: none pending). */
uint64_t pd_httpd_gate_resume_ns(const pd_httpd_t *h);
/* The head check: 0 incomplete, 1 acceptable, or 400/414/431 with msg filled. */
int pd_httpd_head_check(const char *p, size_t n, size_t max_line, size_t max_head, char *msg,
                        size_t cap);

/* At most n connections (>= 1) from one address; default (after init) max_conns: no bound. */
void pd_httpd_set_per_peer(pd_httpd_t *h, uint32_t n);

/* Accept path (is_counted_at_accept): 1 if fd (from address a) may be handed to
 * libmicrohttpd (counted), 0 if it was refused (a 503 written, fd closed). At the limit the
 * longest-idle kept-alive connection is closed to make room first: idle connections cannot
 * lock out new clients. With its address at max_per_peer, that address's own longest-idle
 * connection makes room, else it is refused (503 "per_peer_limit"): one peer cannot take the
 * others' room. */
int pd_httpd_admit(pd_httpd_t *h, int fd, const struct sockaddr *a, socklen_t alen);
/* A connection handed in with pd_httpd_admit that libmicrohttpd refused (it is uncounted). */
void pd_httpd_unadmit(pd_httpd_t *h);

/* Forward MHD_OPTION_NOTIFY_CONNECTION here (socket_ctx is used). */
void pd_httpd_notify(pd_httpd_t *h, struct MHD_Connection *mc, void **socket_ctx,
                     enum MHD_ConnectionNotificationCode toe);
/* A request on mc has begun (first access-handler call): mc is no longer idle. */
void pd_httpd_request_begin(pd_httpd_t *h, struct MHD_Connection *mc);
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
