/* pd_gateway: the real-socket driver of the dispatch core. One thread runs one event loop
 * (epoll) over libmicrohttpd in external mode (clients) and a libcurl multi handle (worker
 * legs); it turns sockets into pd_event_t and the core's actions into sockets. See
 * docs/gateway.md for the design, the flags and the metric names. */
#ifndef PD_GATEWAY_H
#define PD_GATEWAY_H
#include <stddef.h>
#include <stdint.h>

#include "pd_dispatch.h"

/* Defaults of the safety limits (docs/gateway.md "Safe defaults"). */
#define PD_GATEWAY_DEFAULT_MAX_BODY_BYTES (4u * 1024u * 1024u)
#define PD_GATEWAY_DEFAULT_MAX_CONNECTIONS 1024u
#define PD_GATEWAY_DEFAULT_CLIENT_TIMEOUT_S 30u
/* A client request must be whole (headers and body) this long after the accept or the
 * previous response (net/httpd/pd_httpd.h), whatever it trickles. */
#define PD_GATEWAY_DEFAULT_CLIENT_DEADLINE_S 10u
#define PD_GATEWAY_DEFAULT_ABORT_TIMEOUT_MS 2000u
/* How long "the instant" of R-CANCEL lasts on sockets: a leg given up still has this long to
 * report its own failure (two workers answering 503 together arrive microseconds apart). */
#define PD_GATEWAY_DEFAULT_SETTLE_NS 1000000ull
#define PD_GATEWAY_DEFAULT_INFO_TIMEOUT_MS 10000u

typedef struct pd_gateway_worker {
  const char *url;    /* base URL, e.g. http://127.0.0.1:30001 (no path) */
  int bootstrap_port; /* prefill only: injected bootstrap_port; < 0 renders JSON null */
} pd_gateway_worker_t;

typedef struct pd_gateway_config {
  pd_gw_config_t core;     /* mode, policies, retries, breaker, core timeouts */
  uint32_t prefill_limit, decode_limit; /* R-ADMIT-LIMIT: requests in flight each prefill /
                                           decode worker admits (0: no limit, admission off
                                           for that role) */
  uint32_t prefill_group[PD_MAX_WORKERS], decode_group[PD_MAX_WORKERS]; /* the i-th worker's
                              KV transfer group + 1 (R-PAIR-GROUP); 0: not given (group 0) */
  uint32_t prefill_abort_ignored[PD_MAX_WORKERS]; /* the i-th prefill ignores an abort after
                              its KV commit: 2 yes, 1 no, 0 not given (R-ABORT-COMMITTED) */
  const char *listen_host; /* numeric address; default "127.0.0.1" */
  uint16_t listen_port;    /* 0 = an ephemeral port (pd_gateway_port tells which) */
  pd_gateway_worker_t prefill[PD_MAX_WORKERS];
  uint32_t n_prefill;
  pd_gateway_worker_t decode[PD_MAX_WORKERS];
  uint32_t n_decode;
  size_t max_body_bytes;     /* larger client bodies get 413 */
  uint32_t max_connections;  /* client connections served; beyond it 503 */
  uint32_t max_conns_per_peer; /* of those, from one client address (0: max_connections) */
  uint32_t client_timeout_s; /* idle client connection (headers, upload, slow reader) */
  uint32_t client_deadline_s; /* a whole request, from the accept or the previous response */
  uint32_t abort_timeout_ms; /* bound on each POST /abort_request */
  uint32_t info_timeout_ms;  /* bound on each proxied info request */
  uint64_t seed;             /* the core's PRNG (rooms, rids, policies, jitter) */
  int is_verbose;            /* log libmicrohttpd errors and dropped actions to stderr */
} pd_gateway_config_t;

typedef struct pd_gateway pd_gateway_t;

/* Defaults for a mode: the core's pd_gw_config_default plus the limits above, listening on
 * 127.0.0.1 with an ephemeral port and no workers. */
void pd_gateway_config_default(pd_gateway_config_t *c, pd_mode_t mode);

/* Parse "URL[@BOOTSTRAP_PORT]" in place: a trailing "@digits" is cut off into *port (else
 * *port = -1). Returns 0 or PD_ERR_INVAL (not http://host..., or a bad port). */
int pd_gateway_parse_worker(char *spec, int *port);

/* Bind the listening socket and build the loop. Returns 0 and *out, or PD_ERR_INVAL (bad
 * config: no workers, bad address), PD_ERR_IO (bind/epoll failed), PD_ERR_NOMEM; err names
 * what was wrong. */
int pd_gateway_new(const pd_gateway_config_t *cfg, pd_gateway_t **out, char *err, size_t errlen);

/* The bound port (useful after listen_port 0). */
uint16_t pd_gateway_port(const pd_gateway_t *g);

/* Run the loop until pd_gateway_stop, then cancel every live request (legs closed, aborts
 * posted) and wait up to abort_timeout_ms for the abort posts. Returns 0 or PD_ERR_IO. */
int pd_gateway_run(pd_gateway_t *g);

/* Ask the loop to stop. Async-signal-safe and thread-safe. */
void pd_gateway_stop(pd_gateway_t *g);

/* Close everything and free. Safe on NULL. */
void pd_gateway_del(pd_gateway_t *g);

#endif
