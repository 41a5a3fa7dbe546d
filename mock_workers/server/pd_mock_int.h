/* Internal to mock_workers/server/pd_mock*.c and mock_workers/server/pd_bootstrap.c: the mock's state and the calls its
 * parts make on each other. Threads: libmicrohttpd's polling thread runs the HTTP callbacks
 * (pd_mock_http.c), the engine thread runs timers, the worker engine's deadlines, the
 * bootstrap sockets and the accept loop (pd_mock.c, pd_bootstrap.c). Both hold m->mu for
 * every touch of the state below (the worker engine included, pd_mock_drive.c); only the
 * engine thread (and pd_mock_del after the engine stopped) resumes connections. */
#ifndef PD_MOCK_INT_H
#define PD_MOCK_INT_H
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>

#include "pd_buf.h"
#include "pd_heap.h"
#include "pd_map.h"
#include "pd_httpd.h"
#include "pd_mock.h"
#include "pd_mock_ledger.h"
#include "pd_request.h"
#include "pd_wengine.h"
#include "pd_worker.h" /* pd_truth_t, pd_worker_leg_state_t: the worker engine's states */
#include "pd_worker_shared.h"

#define PD_MOCK_RID_MAX 256u
#define PD_MOCK_XRID_MAX 128u
#define PD_MOCK_HOST_MAX 256u
#define PD_MOCK_LINE_MAX 256u /* one bootstrap or KV side-channel line, newline included */
#define PD_MOCK_ENGINE_MAX 128u /* a remote_engine_id the mock keeps (longer: never ours) */
/* How often (real time) the engine looks for clients gone from suspended connections
 * (libmicrohttpd does not watch a suspended socket). */
#define PD_MOCK_PEER_CHECK_MS 20u
/* A leg's rendered but unsent bytes: a whole answer of the largest token count a scenario
 * asks for fits many times over; the bound stops a client that never reads. */
#define PD_MOCK_MAX_OUT_BYTES (256u * 1024u * 1024u)

/* The mock's own timers, for I/O only (heap item kind; a = leg slot, b = leg id, c = leg
 * timer generation); the worker's deadlines are the worker engine's (pd_mock_drive.c). */
enum {
  MT_CRASH = 1, /* worker crash_at_ms (no leg) */
  MT_RESTART,   /* worker restart_at_ms (no leg) */
  MT_OPEN,      /* the request reaches the worker (worker open_delay_ms) */
};

/* How a leg's HTTP exchange ends once its queued bytes are written. */
typedef enum {
  PD_MOCK_OUTPUT_END_NONE = 0,
  PD_MOCK_OUTPUT_END_CLEAN,   /* complete response (chunked: terminating chunk) */
  PD_MOCK_OUTPUT_END_READ,    /* body read error: the connection is cut mid-body */
  PD_MOCK_OUTPUT_END_RESET,   /* connection reset (RST) */
  PD_MOCK_OUTPUT_END_REFUSED, /* connect_refused / worker down: RST before any byte */
} pd_mock_output_end_t;


/* One generation request on this worker (a "leg" in the simulator's words). */
typedef struct pd_mock_leg {
  struct pd_mock *m;
  uint64_t id;   /* mock-local request id ("req" in the log) */
  uint32_t slot; /* index in m->legs */
  uint32_t live_idx;
  uint64_t tgen; /* timer generation: bumped when the leg finishes */
  /* the request */
  const char *path;
  int is_stream, has_logprob, has_room, n_rooms;
  int rid_given; /* the request carried a rid (else it was made up here, as SGLang does) */
  uint64_t room, rooms_hash;
  uint64_t *rooms;   /* every room of a batch when n_rooms > 1 (owned), else NULL */
  int is_room_array; /* bootstrap_room came as an array (a batch), not one number */
  char rid[PD_MOCK_RID_MAX];
  char *rid_json; /* rid JSON-escaped, no quotes (owned) */
  char boot_host[PD_MOCK_HOST_MAX];
  int boot_port;  /* < 0: none */
  uint32_t tokens;
  uint32_t prompt_tokens; /* the prompt's length in tokens (pd_worker_body.c) */
  pd_wire_api_t api;      /* the route and what OpenAI's shapes echo (pd_wire_render) */
  char xrid[PD_MOCK_XRID_MAX];
  uint32_t req_index; /* the runner's request index from its id in the prompt, or
                         PD_TRAFFIC_FAULT_ANY (no traffic fault applies) */
  /* vLLM workers (pd_mock_kv.c): what kv_transfer_params asked (pd_worker_body.c) */
  int kv_mode;        /* pd_kv_mode_t */
  uint64_t kv_key;    /* prefill: its rid's key; decode: its remote_request_id's */
  uint32_t max_tokens;
  int routed_dp_rank, prefill_dp_rank; /* SGLang DP ranks from the body (S2.14), -1 absent */
  char kv_host[PD_MOCK_HOST_MAX]; /* decode: remote_host, remote_port, remote_engine_id */
  int kv_port;
  char kv_engine[PD_MOCK_ENGINE_MAX];
  int kv_from;        /* decode: pd_wengine_kv_from_t, 0 before the engine said */
  /* what the worker engine said of it (pd_mock_drive.c) */
  pd_worker_leg_state_t wstate;
  int slot_taken;
  uint64_t kv_pages, kv_pages_max; /* KV pages it holds now, the most it held */
  pd_truth_t truth;
  int boot;          /* bootstrap connection index (prefill: paired decode; decode: own) */
  uint32_t aborts;
  int is_held;         /* held back from the model until MT_OPEN (open_delay_ms) */
  int is_path_cut;     /* a network fault cut its path: the HTTP side ends without the engine */
  int is_closed_early; /* the client closed while it was held back */
  /* the HTTP side */
  struct MHD_Connection *conn;
  int fd;
  int is_attached;   /* libmicrohttpd still has the request */
  int has_response;  /* a callback response still points at this leg */
  int is_suspended, want_resume, is_peer_closed;
  int head_status, head_is_sse, head_queued;
  pd_buf_t out;   /* rendered bytes; those before out_off were handed to libmicrohttpd */
  size_t out_off;
  pd_mock_output_end_t end;
} pd_mock_leg_t;

typedef enum {
  BOOTSTRAP_CONN_FREE = 0,
  BOOTSTRAP_CONN_CONNECTING,
  BOOTSTRAP_CONN_OPEN,
  BOOTSTRAP_CONN_REGISTERED,
  BOOTSTRAP_CONN_PAIRED
} pd_mock_bootstrap_conn_state_t;

/* One bootstrap connection: on a prefill mock an accepted decode, on a decode mock its own
 * connection to a prefill's bootstrap server (docs/mock.md, "Bootstrap protocol"). */
typedef struct pd_mock_bootstrap_conn {
  int fd;
  pd_mock_bootstrap_conn_state_t state;
  uint32_t live_idx;
  uint64_t room, hash, seq; /* prefill: seq numbers its registration (its engine token) */
  uint32_t flags;      /* REG flags: PD_MOCK_BOOTSTRAP_F_KV_FAIL */
  uint64_t t_open_ns;  /* prefill: when it was accepted (its REG line is due in time) */
  pd_mock_leg_t *leg;      /* prefill: the paired prefill leg; decode: the owning decode leg */
  char rbuf[PD_MOCK_LINE_MAX];
  size_t rlen;
  /* vLLM decode: its own side-channel connection (pd_mock_kv.c) carries one line, sent once
   * connected; a READ (leg set) then waits for its answer until kv_deadline_ns, a NOTIFY or
   * HEARTBEAT (no leg) closes once sent */
  char wbuf[PD_MOCK_LINE_MAX];
  uint64_t key, kv_deadline_ns;
} pd_mock_bootstrap_conn_t;
#define PD_MOCK_BOOTSTRAP_F_KV_FAIL 1u

typedef struct pd_aborted {
  char rid[PD_MOCK_RID_MAX];
  uint64_t t_ns;
} pd_aborted_t;

struct pd_mock {
  pd_mock_config_t cfg;
  pd_scenario_worker_t worker;
  int is_vllm;    /* worker.protocol is vLLM: the bootstrap port is the KV side channel */
  char *name_json; /* the worker's name JSON-escaped: its remote_engine_id (owned) */
  pthread_mutex_t mu;
  pthread_t engine;       /* written by pd_mock_new, read by pd_mock_del only */
  pthread_t engine_tid;   /* the engine's own id, set under mu when it starts */
  int engine_started, is_engine_running, stopping, is_down;
  int is_clock_started; /* POST /pdref/start came (cfg.is_clock_on_start) */
  struct MHD_Daemon *daemon;
  pd_httpd_t httpd; /* connection limit, request deadline, framing (while daemon is set) */
  int http_listen, boot_listen, wake[2];
  uint16_t port, boot_port;
  uint64_t t0_ns, poll_deadline_ns, next_peer_check_ns;
  uint64_t accept_pause_until_ns; /* engine only: out of descriptors, stop accepting a while */
  uint64_t boot_expiry_ns; /* engine only: the next overdue REG line (pd_mock_bootstrap_expire) */
  int engine_asleep;
  pd_heap_t timers;
  pd_wengine_t *eng;   /* the worker (pd_mock_drive.c) */
  pd_wact_buf_t acts;  /* its actions, carried out under m->mu */
  pd_map_t pin_pages;  /* vLLM prefill: engine leg id of a pinned leg -> the most KV pages it
                          held (uintptr_t), for its kv_freed line once the leg is gone */
  uint64_t eng_now;    /* the engine's clock: monotonic ns, never behind */
  int is_applying;
  uint64_t reap[PD_MOCK_MAX_LEGS]; /* engine ids of legs the worker finished (to free) */
  uint32_t n_reap;
  int is_reap_all;     /* reap overflowed: look at every live leg */
  pd_mock_leg_t *legs[PD_MOCK_MAX_LEGS];
  uint32_t free_slots[PD_MOCK_MAX_LEGS], n_free;
  pd_mock_leg_t *live[PD_MOCK_MAX_LEGS];
  uint32_t n_live, live_slots;
  pd_mock_leg_t *resume[PD_MOCK_MAX_LEGS];
  uint32_t n_resume;
  pd_mock_bootstrap_conn_t *bc; /* PD_MOCK_MAX_BOOT_CONNS */
  uint32_t bc_free[PD_MOCK_MAX_BOOT_CONNS], n_bc_free;
  uint32_t bc_live[PD_MOCK_MAX_BOOT_CONNS], n_bc_live;
  uint64_t next_id, next_seq;
  pd_traffic_fault_t tfaults[PD_SCENARIO_MAX_TRAFFIC_FAULTS];
  pd_mock_ledger_t ledger; /* mapped when there are traffic faults */
  pd_prng_t fault_rng, rid_rng;
  pd_aborted_t aborted[PD_MOCK_ABORT_MEMORY];
  uint32_t aborted_next;
  FILE *log;
};

/* ---------- pd_mock.c: clock, timers, legs ---------- */
uint64_t pd_mock_now_ns(void);
uint64_t pd_mock_scaled_ns(const pd_mock_t *m, uint64_t ms);
/* Arm a timer for a leg (NULL leg: a worker timer); wakes the engine when it is earlier than
 * the engine's sleep. */
void pd_mock_timer(pd_mock_t *m, pd_mock_leg_t *leg, int kind, uint64_t delay_ns);
/* POST /pdref/start (m->mu held): with cfg.is_clock_on_start, schedule the crash and restart
 * from now. 1 if it did, 0 if not asked for or already done. */
int pd_mock_clock_start(pd_mock_t *m);
void pd_mock_wake(pd_mock_t *m);
/* accept() failed: out of descriptors pauses both listeners briefly (no busy loop). */
void pd_mock_accept_failed(pd_mock_t *m, int err);
int pd_mock_accept_paused(const pd_mock_t *m);
int pd_mock_on_engine(const pd_mock_t *m);
/* A new leg in a free slot, or NULL (PD_MOCK_MAX_LEGS live, or no memory). */
pd_mock_leg_t *pd_mock_leg_new(pd_mock_t *m);
/* Free the leg when nothing refers to it any more (worker done, HTTP and response gone). */
void pd_mock_leg_del_if_unused(pd_mock_t *m, pd_mock_leg_t *leg);
/* Queue a resume of a suspended leg's connection (done by the engine, outside m->mu). */
void pd_mock_want_resume(pd_mock_t *m, pd_mock_leg_t *leg);

/* ---------- pd_mock_http.c ---------- */
int pd_mock_http_start(pd_mock_t *m, char *err, size_t errlen);
void pd_mock_http_stop(pd_mock_t *m); /* every connection resumed; stops the daemon */
/* A non-blocking, close-on-exec listening socket on host:port (port 0: ephemeral). */
int pd_mock_listen(const char *host, uint16_t port, int *fd, uint16_t *bound, char *err,
                   size_t errlen);
void pd_mock_http_accept(pd_mock_t *m); /* engine: accept and hand to libmicrohttpd */
/* Output of the worker model (the simulator's W2G messages). */
void pd_mock_output_head(pd_mock_t *m, pd_mock_leg_t *leg, int status, int is_sse);
void pd_mock_output_render(pd_mock_t *m, pd_mock_leg_t *leg, int kind, uint32_t arg);
void pd_mock_output_end(pd_mock_t *m, pd_mock_leg_t *leg, pd_mock_output_end_t end);
int pd_mock_output_can_send(const pd_mock_leg_t *leg);

/* ---------- pd_mock_drive.c: the worker engine on real sockets ---------- */
int pd_mock_drive_start(pd_mock_t *m); /* after the ledger is open; 0 or PD_ERR_NOMEM */
void pd_mock_drive_free(pd_mock_t *m);
/* The request reaches the worker: opened in the engine, then the abort of an earlier
 * /abort_request that named its rid (an abort that overtook it). */
void pd_mock_drive_arrive(pd_mock_t *m, pd_mock_leg_t *leg);
void pd_mock_drive_open_due(pd_mock_t *m, pd_mock_leg_t *leg); /* MT_OPEN: held leg arrives */
void pd_mock_drive_close(pd_mock_t *m, pd_mock_leg_t *leg); /* the client closed the connection */
void pd_mock_drive_abort(pd_mock_t *m, pd_mock_leg_t *leg); /* /abort_request matched the leg */
void pd_mock_drive_crash(pd_mock_t *m);
void pd_mock_drive_restart(pd_mock_t *m);
/* The engine's next deadline (monotonic ns, UINT64_MAX none) and firing those due at t_ns. */
uint64_t pd_mock_drive_next_ns(const pd_mock_t *m);
void pd_mock_drive_expire(pd_mock_t *m, uint64_t t_ns);
/* Free the legs the worker finished that nothing refers to any more (engine thread, when no
 * caller holds a leg). */
void pd_mock_drive_reap(pd_mock_t *m);
/* bootstrap events */
uint64_t pd_mock_drive_token(const pd_mock_t *m, int bc); /* prefill: a registration's token */
void pd_mock_drive_registered(pd_mock_t *m, int bc); /* prefill: a decode registered a room */
void pd_mock_drive_unregistered(pd_mock_t *m, uint64_t token); /* prefill: it is gone */
void pd_mock_drive_paired(pd_mock_t *m, pd_mock_leg_t *d); /* decode: the prefill said PAIR */
void pd_mock_drive_kv(pd_mock_t *m, pd_mock_leg_t *d, int is_ok); /* decode: KV or FAIL */
void pd_mock_drive_boot_lost(pd_mock_t *m, pd_mock_leg_t *d); /* decode: connection lost */
/* vLLM decode: the answer to its READ (pd_wengine_read_t) came, or the read failed. */
void pd_mock_drive_pulled(pd_mock_t *m, pd_mock_leg_t *d, int r);
/* vLLM prefill: a decode's READ (token: the connection's, pd_mock_drive_token), NOTIFY
 * (pd_wengine_notify_t) or HEARTBEAT for key. */
void pd_mock_drive_pull(pd_mock_t *m, int bc, uint64_t key);
void pd_mock_drive_notify(pd_mock_t *m, uint64_t key, int kind);
void pd_mock_drive_heartbeat(pd_mock_t *m, uint64_t key);
/* /abort_request: abort every live leg whose rid starts with prefix; returns the count. */
uint32_t pd_mock_drive_abort_prefix(pd_mock_t *m, const char *prefix);
/* A new request whose rid an earlier abort named (within PD_MOCK_ABORT_MEMORY_MS). */
int pd_mock_drive_was_aborted(pd_mock_t *m, const char *rid);

/* ---------- pd_bootstrap.c ---------- */
int pd_mock_bootstrap_listen(pd_mock_t *m, char *err, size_t errlen);
int pd_mock_bootstrap_init(pd_mock_t *m);
void pd_mock_bootstrap_free(pd_mock_t *m);
void pd_mock_bootstrap_close_all(pd_mock_t *m);
/* Close accepted connections whose REG line is overdue (PD_MOCK_BOOT_REG_TIMEOUT_MS);
 * returns when the next one falls due, or UINT64_MAX. */
uint64_t pd_mock_bootstrap_expire(pd_mock_t *m, uint64_t now_ns);
/* Fill pollfds for the listener and every live connection; returns how many. */
size_t pd_mock_bootstrap_pollfds(pd_mock_t *m, struct pollfd *p, size_t cap, uint32_t *idx);
void pd_mock_bootstrap_on_poll(pd_mock_t *m, const struct pollfd *p, const uint32_t *idx, size_t n);
/* decode: connect and register (flags: PD_WENGINE_REG_*) */
void pd_mock_bootstrap_connect(pd_mock_t *m, pd_mock_leg_t *d, uint32_t flags);
int pd_mock_bootstrap_send(pd_mock_t *m, int bc, const char *verb, uint64_t room);
/* A non-blocking connection to host:port owned by leg (may be NULL): its index, with
 * *is_open 1 when connected at once, or -1 (refused, no room in the table). */
int pd_mock_bootstrap_dial(pd_mock_t *m, const char *host, int port, pd_mock_leg_t *leg,
                           int *is_open);
/* Write one whole line; on failure the connection is lost (closed, its leg told): -1. */
int pd_mock_bootstrap_send_line(pd_mock_t *m, int bc, const char *line);
/* Close; on a prefill a registration it carried is withdrawn from the worker engine. */
void pd_mock_bootstrap_close(pd_mock_t *m, int bc);
pd_mock_bootstrap_conn_t *pd_mock_bootstrap_get(pd_mock_t *m, int bc);

/* ---------- pd_mock_kv.c: vLLM's KV side channel (docs/mock.md, "vLLM workers") ---------- */
/* decode: the engine's PULL, NOTIFY or HEARTBEAT for leg d (pd_wact_kind_t, notify kind) */
void pd_mock_kv_act(pd_mock_t *m, pd_mock_leg_t *d, const pd_wact_t *a);
/* a connection of ours is open: send its line (a NOTIFY or HEARTBEAT then closes) */
void pd_mock_kv_connected(pd_mock_t *m, int bc);
/* one complete line on a side-channel connection (either role) */
void pd_mock_kv_on_line(pd_mock_t *m, int bc, const char *line);
/* the connection is gone (refused, closed, timed out, too long a line) before it was done */
void pd_mock_kv_lost(pd_mock_t *m, int bc, const char *why);
/* prefill: the engine's answer r (pd_wengine_read_t) to the READ of key on connection bc
 * (-1: gone meanwhile); leg: the pinned leg when the mock still has it */
void pd_mock_kv_answer(pd_mock_t *m, int bc, const pd_mock_leg_t *leg, uint64_t key, int r);

/* ---------- pd_mock_req.c ---------- */
/* Fill a leg from a parsed generation request (a missing rid is drawn from rid_rng). 0, or
 * PD_ERR_FIELD / PD_ERR_NOMEM with err. */
int pd_mock_req_fill(pd_mock_leg_t *leg, const pd_request_t *r, const char *body, size_t len,
                 uint32_t default_tokens, pd_prng_t *rid_rng, char *err, size_t errlen);
/* JSON-escape s (without quotes) into a new string; NULL on allocation failure. */
char *pd_mock_req_escape(const char *s);
/* The id the event log ties a leg by (x_request_id): the X-Request-Id header when it is a
 * conformance runner's id ("pdconf-..."), else the runner's id found in the body's prompt, else
 * the header (a gateway that sends its own uuid, as vLLM's proxies do, must not hide the
 * runner's id); empty when there is neither. header may be NULL. */
void pd_mock_req_pick_xrid(const char *header, const char *body, size_t len, char *out, size_t cap);
/* A conformance runner's id in the prompt ("pdconf-<hex>-<n>", pd_conform_client.c): every
 * gateway forwards the prompt to both legs. Empty when absent. */
void pd_mock_req_body_tag(const char *body, size_t len, char *out, size_t cap);

/* ---------- pd_mock_log.c ---------- */
/* One JSON line per event: ev + common leg fields (leg may be NULL). Extra fields are added
 * by the variants. All under m->mu, flushed per line. */
void pd_mock_log(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg);
void pd_mock_log_request(pd_mock_t *m, const pd_mock_leg_t *leg);
void pd_mock_log_str(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg, const char *key,
                 const char *val);
void pd_mock_log_int(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg, const char *key,
                 long long val);
void pd_mock_log_str2(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg, const char *k1,
                      const char *v1, const char *k2, const char *v2);
void pd_mock_log_room(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg, uint64_t room);
/* A vLLM KV line: leg's fields (or "req": req when leg is NULL and req is not 0), "key" as 16
 * hex digits, then a string field and a number field (each skipped when its name is NULL). */
void pd_mock_log_kv(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg, uint64_t req,
                    uint64_t key, const char *skey, const char *sval, const char *nkey,
                    long long nval);
const char *pd_mock_log_truth(pd_truth_t t);

#endif
