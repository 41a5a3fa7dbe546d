/* pd_mock: one SGLang-like PD worker (prefill or decode) on real sockets. An HTTP/1.1 server
 * (libmicrohttpd, internal polling thread, suspend/resume) speaks SGLang's wire format (W6.x),
 * a bootstrap rendezvous over TCP pairs prefill and decode by room (S5.x, docs/mock.md), and
 * one engine thread with a timer heap runs the worker model of sim/pd_world_worker.c with
 * the faults of a scenario worker. Every request's ground truth goes to a JSON-lines event
 * log. No thread per request; all state behind one mutex. */
#ifndef PD_MOCK_H
#define PD_MOCK_H
#include <stdint.h>
#include <stdio.h>

#include "pd_scenario.h"

/* Live generation requests one mock holds (HTTP attached or stuck in bootstrap). Beyond it a
 * request gets 503: a mock is a test fixture, and 4096 covers the 512-stream benchmark with
 * its prefill tails eight times over. */
#define PD_MOCK_MAX_LEGS 4096u
/* Simultaneous HTTP connections (default of --max-connections): the mock counts them and
 * answers 503 beyond, below libmicrohttpd's own limit (net/httpd/pd_httpd.h). */
#define PD_MOCK_MAX_CONNECTIONS 2048u
/* A request must be whole (headers and body) this long after the accept or the previous
 * response (default of --client-deadline-s), else 408. */
#define PD_MOCK_CLIENT_DEADLINE_S 10u
/* Bootstrap connections a prefill mock serves at once (one per waiting decode request). */
#define PD_MOCK_MAX_BOOT_CONNS 4096u
/* An accepted bootstrap connection must send its REG line within this time (a decode sends
 * it as soon as it connects); at most this many may be waiting for theirs: beyond it the
 * oldest is closed (a decode that loses its connection reconnects). Idle connections to
 * the bootstrap port can so hold neither the table nor descriptors (docs/mock.md). */
#define PD_MOCK_BOOT_REG_TIMEOUT_MS 1000u
#define PD_MOCK_BOOT_MAX_UNREGISTERED 256u
/* Aborted rids remembered so an abort that overtakes its request still cancels it. */
#define PD_MOCK_ABORT_MEMORY 1024u
#define PD_MOCK_ABORT_MEMORY_MS 30000u
/* Largest output a request may ask for (the scenario format's limit on workload.tokens). */
#define PD_MOCK_MAX_TOKENS 100000u
/* A decode retries its bootstrap connection this often (real time) while it waits for KV. */
#define PD_MOCK_BOOT_RETRY_MS 50u
/* vLLM decode: a READ on the KV side channel not answered within this (real) time failed;
 * a NOTIFY or HEARTBEAT not sent within it is dropped (the prefill answers a READ at once). */
#define PD_MOCK_KV_TIMEOUT_MS 2000u
/* vLLM prefill: the side-channel port when none is given (VLLM_NIXL_SIDE_CHANNEL_PORT's
 * default, V1.5). */
#define PD_MOCK_KV_DEFAULT_PORT 5600u

typedef struct pd_mock_config {
  pd_role_t role;
  const pd_scenario_worker_t *worker; /* behaviour and faults; copied at pd_mock_new */
  uint32_t worker_index;         /* index of the worker in its scenario (seeds its faults) */
  uint64_t seed;                 /* scenario config.seed */
  double fault_rate;             /* scenario workload.fault_rate */
  uint32_t default_tokens;       /* output tokens when the body names none (workload.tokens) */
  uint64_t bootstrap_timeout_ms; /* S5.4 */
  uint64_t waiting_timeout_ms;   /* S5.5 */
  double speed;                  /* every duration is multiplied by this (0.01: 300 s -> 3 s) */
  const char *listen_host;       /* numeric IPv4, e.g. "127.0.0.1" */
  uint16_t port;                 /* 0: ephemeral (read it back with pd_mock_port) */
  uint16_t bootstrap_port;       /* prefill only; 0: ephemeral */
  int is_direct;                 /* decode: a request without bootstrap_room needs no KV */
  int is_clock_on_start;         /* crash_at_ms/restart_at_ms count from POST /pdref/start,
                                    not from start-up (a runner's workload time 0) */
  const pd_traffic_fault_t *tfaults; /* the scenario's traffic faults (copied), n_tfaults of them */
  uint32_t n_tfaults;
  uint32_t n_requests;           /* workload.requests: the ledger's size */
  const char *ledger_path;       /* fault ledger shared with the run's other mocks; NULL: a
                                    private one (mock_workers/server/pd_mock_ledger.h) */
  FILE *log;                     /* event log (JSON lines) or NULL; not closed by the mock */
  uint32_t max_connections;      /* HTTP connections at once; 0: PD_MOCK_MAX_CONNECTIONS */
  uint32_t client_deadline_s;    /* a whole request; 0: PD_MOCK_CLIENT_DEADLINE_S */
} pd_mock_config_t;

typedef struct pd_mock pd_mock_t;

/* Fill c with the defaults: prefill, scenario defaults for worker p0, timeouts 300 s, speed 1,
 * 127.0.0.1, port 0, bootstrap port 0. */
void pd_mock_config_default(pd_mock_config_t *c);

/* Create and start a mock: binds both ports, starts the HTTP daemon and the engine thread.
 * Returns NULL and writes why into err (e.g. "listen 127.0.0.1:8000: Address already in
 * use"). */
pd_mock_t *pd_mock_new(const pd_mock_config_t *c, char *err, size_t errlen);

/* Bound ports (useful after asking for port 0). The bootstrap port is 0 for a decode mock. */
uint16_t pd_mock_port(const pd_mock_t *m);
uint16_t pd_mock_bootstrap_port(const pd_mock_t *m);

/* Requests that currently hold a slot (for tests and /get_server_info). */
uint32_t pd_mock_live_slots(pd_mock_t *m);

/* Stop: stops the engine, resumes every suspended connection, stops the HTTP daemon, closes
 * every socket, flushes the log, frees everything. NULL is a no-op. */
void pd_mock_del(pd_mock_t *m);

#endif
