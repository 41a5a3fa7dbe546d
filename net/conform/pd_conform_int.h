/* Internal to net/conform/pd_conform*.c: one run of one scenario (processes, client requests, the
 * mocks' legs as read from their logs) and the calls the parts make on each other. Times are
 * run-relative nanoseconds on CLOCK_MONOTONIC (the clock of the mocks' t_us), 0 = "never". */
#ifndef PD_CONFORM_INT_H
#define PD_CONFORM_INT_H
#include <curl/curl.h>
#include <sys/types.h>

#include "pd_conform.h"
#include "pd_check.h"
#include "pd_proc.h"
#include "pd_scenario.h"

#define PD_CONFORM_PATH_MAX 512u
#define PD_CONFORM_DIR_MAX 400u /* the run directory: room left for file names */
#define PD_CONFORM_FIRST_BYTES 4096u /* response bytes kept to find the serving leg's rid */
#define PD_CONFORM_MS 1000000ull

typedef struct pd_conform_worker {
  pd_proc_t proc;
  uint16_t port, boot_port;
  char log[PD_CONFORM_PATH_MAX], out[PD_CONFORM_PATH_MAX];
} pd_conform_worker_t;

/* One client request: the checker's record (c) plus the socket side. */
typedef struct pd_conform_req {
  pd_client_request_t c;
  struct pd_conform_runner *run;
  CURL *e;
  struct curl_slist *hdrs;
  char *body; /* malloc'd, body_len + 1 bytes */
  size_t body_len;
  uint64_t t_plan;  /* planned arrival (scaled) */
  uint64_t disc_ns; /* disconnect this long after arrival (scaled), 0 never */
  uint64_t t_disc, t_bound;
  int state; /* 0 not sent, 1 live, 2 over */
  int is_cut; /* still open at its bound: the runner gave up (not an end) */
  int ct_sse; /* the current response head says text/event-stream */
  char xrid[48];
  char first[PD_CONFORM_FIRST_BYTES];
  size_t first_len;
  /* attribution of legs (pd_conform_judge.c) */
  uint64_t t_first_unit, t_last_unit_end;
  uint64_t t_served; /* first arrival of the attempt whose output the client received */
  uint32_t n_units, cap_units;
  int32_t *units; /* indices of the attempts tied to it so far */
} pd_conform_req_t;

/* One generation request a mock logged (a "leg"). */
typedef struct pd_conform_logged_leg {
  uint32_t worker;
  pd_role_t role;
  uint64_t req;
  char rid[128], xrid[64], room_s[24], host[64];
  char kv_key[17];   /* vLLM, 16 hex digits: the key pinned KV is read by (pd_worker_kv_key of
                        the request id, mock_workers/pd_worker_body.h): prefill, of its rid
                        (named remote_request_id in its answer, V1.5); decode, of its
                        kv_transfer_params.remote_request_id (copied from that answer, V1.7),
                        from its request line or its first kv_read/kv_notify/kv_heartbeat
                        line; "" unknown */
  int has_room, n_rooms, is_stream, has_logprob, boot_port, rid_given; /* rid_given -1: unknown */
  int routed_dp_rank, prefill_dp_rank; /* S2.14: the body's DP ranks, -1 absent (I22) */
  uint64_t room, rooms_hash;
  int has_hash;
  uint64_t t_arrive, t_slot_taken, t_slot_freed, t_peer_closed, t_end;
  uint64_t kv_pages, kv_pages_max, t_kv_freed; /* from kv_taken / kv_freed (I18) */
  int slot_taken, fault, end_status;
  int reject_status; /* the worker refused it with a status of its own (`reject`: 400) */
  pd_truth_t truth;
  uint32_t aborts;
  int32_t client, unit, partner;
  int32_t resend_of; /* the same body reached the same worker before (an HTTP client's resend) */
  uint32_t nth;       /* its worker's nth generation request (1-based, log order) */
  int room_array;     /* bootstrap_room was an array: 1, a number: 0, not logged: -1 */
  uint64_t *rooms;    /* every room of a batch (n_rooms of them; malloc'd), else NULL */
  uint32_t fired;     /* fault kinds logged for it (bit per pd_fault_kind_t, modifiers too) */
  int is_path_cut;    /* a network fault cut its path (`net_cut`): the gateway saw a reset or
                         silence, which may be recorded as a failure or timeout (I4) */
  int kv_from;        /* vLLM decode: where its prompt's KV came from (pd_wengine_kv_from_t, from
                         the kv_from line or slot_freed's field; V1.15 stale reads), 0 unknown */
} pd_conform_logged_leg_t;

/* What the client reads as a stream: an SSE head, or any 2xx head of a request that asked for
 * a stream (vLLM's toy and Mooncake proxies serve streams as application/json, V1.24-V1.25;
 * the checker reads it the same way, sim/pd_check.c). */
static inline int pd_conform_reads_sse(const pd_client_request_t *c) {
  return c->is_sse_head || (c->is_stream && c->head_status >= 200 && c->head_status < 300);
}

typedef struct pd_conform_runner {
  const pd_scenario_t *s;
  pd_scenario_t *ss; /* the scaled copy the checker reads (deadline, grace) */
  const pd_conform_opts_t *o;
  pd_conform_result_t *r;
  pd_judge_t judge;       /* what the checker reads (pd_conform_judge_init) */
  pd_world_stats_t stats; /* the checker's counts (judge.stats points here) */
  uint32_t violations;    /* mask of the invariants violated in the run */
  uint32_t n_nomem;       /* allocations that failed while reading or judging: an error */
  char dir[PD_CONFORM_DIR_MAX];
  pd_conform_worker_t wk[PD_SCENARIO_MAX_WORKERS];
  uint32_t n_wk;
  pd_proc_t gw;
  uint16_t gw_port;
  char *hdr[PD_CONFORM_MAX_HEADERS]; /* the client headers, expanded (malloc'd) */
  char gw_out[PD_CONFORM_PATH_MAX];
  uint64_t t0_abs; /* CLOCK_MONOTONIC ns of run time 0 (just before the first request) */
  uint64_t grace_ns, bound_ns, t_gw_stop;
  pd_conform_req_t *reqs;
  uint32_t n_reqs;
  pd_conform_logged_leg_t *legs;
  size_t n_legs, cap_legs;
  uint32_t collisions;
  char collision_worker[32];
  uint32_t n_req_lines[PD_SCENARIO_MAX_WORKERS]; /* `request` lines read per worker */
  uint64_t t_crash[PD_SCENARIO_MAX_WORKERS];     /* the mock's `crash` line (run time), 0 none */
  uint8_t crash_pin[PD_SCENARIO_MAX_WORKERS];     /* its crash freed a pinned request's KV
                                                     (vLLM: `kv_unpinned` reason `crash`) */
  uint8_t
      tfault_fired[PD_SCENARIO_MAX_TRAFFIC_FAULTS]; /* a `traffic_fault` line named that entry */
} pd_conform_runner_t;

/* ---------- pd_conform_proc.c: processes and ports ---------- */
uint64_t pd_conform_now_abs(void);
uint64_t pd_conform_now(const pd_conform_runner_t *run); /* run-relative */
void pd_conform_sleep_ms(unsigned ms);
int pd_conform_stopping(const pd_conform_runner_t *run);
int pd_conform_free_port(uint16_t *port);
/* Start every mock and wait for their ready lines. 0, or -1 with err. */
int pd_conform_start_mocks(pd_conform_runner_t *run, char *err, size_t cap);
/* Start `/bin/sh -c cmd` in its own process group; wait until gw_port accepts. */
int pd_conform_start_gateway(pd_conform_runner_t *run, const char *cmd, char *err, size_t cap);
void pd_conform_stop_gateway(pd_conform_runner_t *run);
void pd_conform_stop_mocks(pd_conform_runner_t *run);
/* The last line(s) of a child's output file, for error messages. */
void pd_conform_tail(const char *path, char *out, size_t cap);

/* ---------- pd_conform_client.c: the client workload ---------- */
int pd_conform_plan(pd_conform_runner_t *run);  /* draw the requests as the simulator does */
int pd_conform_drive(pd_conform_runner_t *run); /* run them over HTTP; 0 or -1 (stopped) */
/* One blocking request to 127.0.0.1:port (POST when post is not NULL): the body (malloc'd,
 * NUL-terminated, at most 4 MiB; free()) or NULL on a transport error, an empty body or one
 * over the limit. *status (if given): the HTTP status, 0 when none came. */
char *pd_conform_http(uint16_t port, const char *path, const char *post, unsigned timeout_ms,
                 long *status);
void pd_conform_reqs_free(pd_conform_runner_t *run);

/* ---------- pd_conform_log.c, pd_conform_judge.c, pd_conform_verdict.c ---------- */
int pd_conform_read_logs(pd_conform_runner_t *run, char *err, size_t cap);
void pd_conform_legs_free(pd_conform_runner_t *run); /* the legs and what they own */

/* An attempt as the mocks saw it: legs paired by room (judge step 2). */
#define PD_CONFORM_UNIT_LEGS 6u
typedef struct pd_conform_unit {
  int32_t
      leg[PD_CONFORM_UNIT_LEGS]; /* a prefill and a decode leg, and legs re-sent to their worker */
  uint32_t n;
  uint64_t t_first, t_last, t_fail; /* first arrival, last close, first close (UINT64_MAX: none) */
  int32_t client;
  uint32_t attempt;
  int by_timing; /* tied by step 4 (may move), not by X-Request-Id or the response */
  int level;     /* the step-4 level that tied it */
  int is_ambiguous; /* tied by step 4 while another request passed the same level, and one of
                       them already had an attempt: it may be another request's retry */
} pd_conform_unit_t;

/* A sort key of the judge: a room, a rid or a KV key, then a time. */
typedef struct pd_conform_key {
  const char *s; /* room (attempts), rid (response pins) or KV key */
  uint64_t t;
  int32_t idx;   /* the leg */
} pd_conform_key_t;
int pd_conform_cmp_key(const void *a, const void *b); /* by s, then t */
/* A new attempt of leg a and (b >= 0) its partner b, in u[*nu]. */
void pd_conform_add_unit(pd_conform_runner_t *run, pd_conform_unit_t *u, uint32_t *nu, int32_t a,
                         int32_t b);

/* ---------- pd_conform_sf.c: source-first legs (no room) ---------- */
/* Step 1's last resort: a decode leg without the runner's id takes the request of the prefill
 * leg whose KV key it read. */
void pd_conform_tie_by_remote_id(pd_conform_runner_t *run);
/* Step 2 for the n legs without a room (legs: one key per leg, reordered): attempts by KV
 * key, else by request (vLLM scenarios), else alone. */
void pd_conform_pair_source_first(pd_conform_runner_t *run, pd_conform_unit_t *u, uint32_t *nu,
                                  pd_conform_key_t *legs, size_t n);

/* Tie every leg to a client request (u: n_legs + 1 entries); the attempts, sorted by first
 * arrival. Counts legs_by_id, legs_by_timing, legs_unattributed, legs_resent. */
uint32_t pd_conform_attribute(pd_conform_runner_t *run, pd_conform_unit_t *u);
/* When a leg's connection closed (peer_closed or response_end, the first); 0 never. */
uint64_t pd_conform_leg_closed(const pd_conform_logged_leg_t *l);
/* The client's end: a response that ended, or its own disconnect; 0 if none. */
uint64_t pd_conform_client_end(const pd_conform_req_t *q);
/* Fill run->judge from the scaled scenario (run->ss), the options and run->stats. */
void pd_conform_judge_init(pd_conform_runner_t *run);
/* Judge every request and the run-level findings into run->violations and run->stats.
 * 0, or -1 with err when the verdict cannot be trusted (memory ran out while judging, or a
 * client's body could not be kept). */
int pd_conform_judge(pd_conform_runner_t *run, char *err, size_t cap);

/* ---------- pd_conform_exercised.c: did the row test anything ---------- */
/* After pd_conform_judge: faults exercised, requests served, r->exercised and r->nx_reason. */
void pd_conform_exercised(pd_conform_runner_t *run);
/* Before t, a leg met a fault or failed, or a worker crashed: the world was not healthy (a
 * breaker may have opened; no eligible worker). */
int pd_conform_failure_before(const pd_conform_runner_t *run, uint64_t t);

/* ---------- pd_conform_warmup.c: the gateway's own speed ---------- */
double pd_conform_forward_ms(const pd_conform_runner_t *run);
/* The scale scenario s needs against a gateway that forwards in o->fwd_ms: scale itself, or
 * raised (note says so); when even 1 is too small, *too_short is set, note says so and
 * max(scale, 1) returns. */
/* Reference only: the scenario's grace minus the gateway's prefill tail, in ms at scale 1 (the
 * time a reference gateway has to act on its tail deadline before I2/I3); 0 otherwise. */
uint64_t pd_conform_tail_margin_ms(const pd_scenario_t *s, const pd_conform_opts_t *o);
double pd_conform_scale_for_speed(const pd_scenario_t *s, const pd_conform_opts_t *o, double scale,
                             int *too_short, char *note, size_t cap);

#endif
