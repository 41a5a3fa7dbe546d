/* pd_worker: the types of the worker engine (mock_workers/), shared by the simulator (sim/)
 * and the real-socket mock (mock_workers/server/): a worker's spec and fault scripts, what a
 * worker really did with a leg (its truth) and the worker-side states of a leg. Depends on
 * core/ only; nothing here includes a sim/ header (core <- mock_workers <- {sim, mock}). */
#ifndef PD_WORKER_H
#define PD_WORKER_H
#include <stdint.h>

#include "pd_dispatch.h"

#define PD_SCENARIO_MAX_FAULTS 16u      /* per worker */
#define PD_SCENARIO_MAX_SPLIT 16u       /* largest split_parts */
#define PD_TRAFFIC_FAULT_ANY UINT32_MAX   /* pd_traffic_fault_t.request: every request */

typedef enum {
  PD_FAULT_STATUS = 0,          /* head with `status` and a JSON error body */
  PD_FAULT_HANG_BEFORE_HEAD,    /* accepts, never answers */
  PD_FAULT_HANG_MID_STREAM,     /* stops after `after_tokens` events, connection open */
  PD_FAULT_RESET_BEFORE_HEAD,   /* connection reset before any byte */
  PD_FAULT_RESET_MID_STREAM,    /* reset after `after_tokens` events */
  PD_FAULT_SSE_ERROR,           /* 200, then an SSE error event after `after_tokens` events */
  PD_FAULT_TRUNCATE,            /* clean end after `after_tokens` events, no [DONE] */
  PD_FAULT_SLOW_DRIP,           /* `ms` between tokens instead of token_ms */
  PD_FAULT_CONNECT_REFUSED,     /* connection refused */
  PD_FAULT_BOOTSTRAP_NEVER_SERVED, /* prefill: its bootstrap server never answers the room */
  PD_FAULT_NEVER_CONNECT,       /* decode: never connects to the bootstrap room */
  PD_FAULT_KV_FAIL,             /* KV transfer fails: prefill 500 / error event, decode too */
  PD_FAULT_PREFILL_LAG,         /* prefill answers `ms` after the KV transfer (sglang #22853) */
  PD_FAULT_BODY_ERROR,          /* prefill: body read error after the KV transfer */
  PD_FAULT_ERROR_AFTER_KV,      /* prefill: error answer `ms` after the KV transfer (stream:
                                   an SSE error event under its 200 head) */
  /* Network faults: on the path between gateway and worker, not in the worker. The worker
   * runs the request as if nothing happened (its side of the connection stays half-open:
   * it hears neither the cut nor the gateway's later close, only an /abort_request or its
   * own timeouts end it); what it writes after the cut is lost. The cut strikes `ms` after
   * the request reached the worker, or (after_tokens > 0, decode) before event after_tokens. */
  PD_FAULT_NET_RESET,           /* the gateway sees the connection reset */
  PD_FAULT_RESPONSE_LOST,       /* the gateway sees nothing more: no error, no bytes */
  PD_FAULT_KIND_COUNT
} pd_fault_kind_t;

/* The fault kinds before the network ones (pdref sim explore draws its worlds' kinds from
 * these, so every seed keeps the world it generated before they came). */
#define PD_FAULT_WORKER_KIND_COUNT ((int)PD_FAULT_NET_RESET)
static inline int pd_fault_is_net(int kind) {
  return kind == (int)PD_FAULT_NET_RESET || kind == (int)PD_FAULT_RESPONSE_LOST;
}

typedef struct pd_fault {
  pd_fault_kind_t kind;
  int status;            /* STATUS: the HTTP status (400..599) */
  uint32_t after_tokens; /* mid-stream kinds */
  uint64_t ms;           /* SLOW_DRIP, PREFILL_LAG, ERROR_AFTER_KV; the network kinds: when
                            the path is cut, after the request reached the worker */
  uint32_t nth_from;     /* applies to this worker's requests nth_from..nth_to (1-based, */
  uint32_t nth_to;       /*  inclusive); both 0 = every request */
  double prob;           /* probability per matching request, default 1.0 */
} pd_fault_t;

typedef enum { PD_CHUNK_EVENT = 0, PD_CHUNK_SPLIT = 1, PD_CHUNK_COALESCE = 2 } pd_chunking_t;

/* The PD protocol a worker speaks (pd_protocol_t, defined in core/pd_dispatch.h, which the
 * gateway's modes share): SGLang's (destination first: both legs meet at a bootstrap room) or
 * vLLM's NIXL one (source first: prefill answers with kv_transfer_params and pins its KV until
 * decode reads it or it expires, V1.3-V1.19). */

/* vLLM: what a request's kv_transfer_params ask of the worker (V1.1, V1.7, V1.8). */
typedef enum {
  PD_KV_MODE_NONE = 0,       /* none (or a role they do not apply to): an ordinary request */
  PD_KV_MODE_REMOTE_DECODE,  /* prefill: do_remote_decode, keep the KV for decode to read */
  PD_KV_MODE_REMOTE_PREFILL, /* decode: do_remote_prefill with every field it needs: read */
  PD_KV_MODE_INVALID,        /* decode: do_remote_prefill with a field missing: compute the
                                prompt locally ("Got invalid KVTransferParams", V1.8) */
} pd_kv_mode_t;

/* vLLM: how a prefill's pinned KV expires when nobody reads it. */
typedef enum {
  PD_KV_EXPIRY_TIMEOUT = 0, /* older: one fixed VLLM_NIXL_ABORT_REQUEST_TIMEOUT (V1.12) */
  PD_KV_EXPIRY_LEASE = 1,   /* newer: a lease that decode's heartbeats extend (V1.13) */
} pd_kv_expiry_t;

/* vLLM prefill: the kv_transfer_params it answers a request for a remote decode with. */
typedef enum {
  PD_KV_PARAMS_VALID = 0,   /* every field decode needs (V1.5), blocks pinned */
  PD_KV_PARAMS_NULL = 1,    /* its one token ends as a stop, not capped by length (an
                               end-of-sequence first token in older versions): null params,
                               blocks freed at once (V1.6) */
  PD_KV_PARAMS_INVALID = 2, /* without remote_request_id (a prefill older than vLLM PR #29665,
                               V1.5): blocks pinned, but a newer decode finds the params
                               invalid and computes locally (V1.8) */
  PD_KV_PARAMS_UNKNOWN_ENGINE = 3, /* every field, blocks pinned, but remote_engine_id and
                                      remote_host name no engine of the deployment: decode's
                                      handshake, and so its read, fails (V1.22) and no
                                      notification reaches the prefill */
} pd_kv_params_t;

/* A fault that follows the traffic, not a worker name: legs nth_from..nth_to (1-based, counted
 * per request and role in the order they reach a worker) of role `role` of request `request`
 * (0-based, or every request), whichever worker gets them. Sticky: the worker that got it
 * keeps failing that way for every later leg of that role of the matching requests. The
 * simulator keeps the leg counts per request; the socket mocks share them in a ledger file. */
typedef struct pd_traffic_fault {
  pd_fault_t f;     /* kind, status, after_tokens, ms; nth_from..nth_to = the legs; prob 1 */
  pd_role_t role;
  uint32_t request; /* PD_TRAFFIC_FAULT_ANY: every request */
  int is_sticky;
} pd_traffic_fault_t;


typedef struct pd_scenario_worker {
  char name[32];
  pd_role_t role;
  uint64_t forward_ms;     /* prefill: forward pass after bootstrap, default 20 */
  uint64_t kv_ms;          /* prefill: KV transfer time, default 5 */
  uint64_t first_token_ms; /* decode: KV arrival -> first token, default 10 */
  uint64_t token_ms;       /* decode: between tokens, default 5 */
  pd_chunking_t chunking;  /* decode SSE chunking: "event" | "split" | "coalesce"; prefill
                              streams honour "split" */
  uint32_t split_parts;    /* "split": chunks per event, 2..PD_SCENARIO_MAX_SPLIT (default 2) */
  uint64_t open_delay_ms;  /* extra latency of the gateway's request (not its close or abort)
                              on its way to this worker: an abort may overtake it */
  int breaker_initial;     /* pd_breaker_state_t the run starts with (default closed) */
  uint64_t crash_at_ms;    /* 0 none: resets every connection, refuses until restart */
  uint64_t restart_at_ms;  /* 0: never restarts */
  pd_fault_t faults[PD_SCENARIO_MAX_FAULTS];
  uint32_t n_faults;
  /* capacity (docs/capacity.md; defaults from SGLang, S2.5-S2.7) */
  uint32_t max_running;        /* running-request limit; decode counts prealloc'd and
                                  transferring rooms too (S2.6); default 2048 */
  uint64_t kv_tokens;          /* KV pool in tokens, default PD_WORKER_DEFAULT_KV_TOKENS */
  uint32_t page_size;          /* tokens per KV page, default 1 */
  uint32_t reserved_decode_tokens; /* decode: KV kept free per admitted request (S2.5), 512 */
  uint64_t forward_us_per_token;   /* prefill: forward pass grows by this per batch token, 0 */
  uint32_t max_prefill_tokens; /* prefill: a batch's token bound (one request always fits),
                                  default 16384 */
  /* protocol (vLLM keys: docs/scenarios.md) */
  pd_protocol_t protocol;      /* default sglang */
  pd_kv_expiry_t kv_expiry;    /* vLLM: default timeout */
  uint64_t kv_abort_timeout_ms; /* vLLM timeout mode: VLLM_NIXL_ABORT_REQUEST_TIMEOUT, 480 s */
  uint64_t kv_lease_ms;        /* vLLM lease mode: kv_lease_duration, 30 s (V1.13) */
  uint64_t kv_heartbeat_ms;    /* vLLM lease mode: decode's heartbeat period, 0 = lease / 6 */
  pd_kv_params_t kv_params;    /* vLLM prefill: the parameters it answers, default valid */
  /* pairing topology (docs/scenarios.md, O5.2) */
  uint32_t transfer_group;     /* KV transfer group: a prefill and a decode of different
                                  groups cannot transfer (the transfer fails), default 0 */
  uint32_t dp_size;            /* SGLang prefill: data-parallel ranks; a leg runs on its body's
                                  routed_dp_rank, else on bootstrap_room % dp_size, and a
                                  decode looks the room up on its body's disagg_prefill_dp_rank,
                                  else on bootstrap_room % dp_size (S2.14), default 1 */
  double abort_after_commit_ignored; /* 1 (true), a prefill: once its KV transfer committed
                                  (SGLang: its forward pass ended and the KV moves to the paired
                                  decode; vLLM: it answered kv_transfer_params and pinned the
                                  blocks) an abort is a no-op (close, /abort_request, and for vLLM
                                  the decode's empty-read notification): with its receiver gone
                                  the slot and KV stay held until kv_abort_timeout_ms after the
                                  commit (ai-dynamo/dynamo PR #14507, TRT-LLM), default false */
  double capacity_per_rank;    /* 1 (true), SGLang with dp_size > 1: each DP rank has its own
                                  scheduler and KV pool (S2.16): max_running_requests and
                                  max_total_tokens are split evenly among the ranks and a leg
                                  competes only for its rank's share (R-CAP-RANK); a leg runs on
                                  its body's routed_dp_rank, else on bootstrap_room % dp_size.
                                  0 (default): the ranks share one pool */
} pd_scenario_worker_t;

#define PD_WORKER_DEFAULT_MAX_RUNNING 2048u
#define PD_WORKER_DEFAULT_KV_TOKENS 1048576u
#define PD_WORKER_DEFAULT_PAGE_SIZE 1u
#define PD_WORKER_DEFAULT_DECODE_RESERVE 512u
#define PD_WORKER_DEFAULT_MAX_PREFILL_TOKENS 16384u
#define PD_WORKER_DEFAULT_KV_ABORT_TIMEOUT_MS 480000u /* V1.12 */
#define PD_WORKER_DEFAULT_KV_LEASE_MS 30000u          /* V1.13 */

/* What a worker really did with one leg (judged at the worker, never from the gateway). */
typedef enum {
  PD_TRUTH_PENDING = 0,   /* still running */
  PD_TRUTH_OK = 1,        /* answered in full (2xx, complete body, [DONE] for streams) */
  PD_TRUTH_FAILED = 2,    /* answered with an error: status, reset, error event, truncation */
  PD_TRUTH_STALLED = 3,   /* closed or aborted while hung or waiting on its partner */
  PD_TRUTH_CANCELLED = 4, /* closed or aborted while making progress */
  PD_TRUTH_NEVER = 5,     /* never reached the worker (refused) */
} pd_truth_t;

typedef enum {
  PD_WORKER_LEG_NEW = 0,
  PD_WORKER_LEG_BOOTSTRAP, /* prefill: waiting for decode to connect to the room */
  PD_WORKER_LEG_FORWARD,   /* prefill: forward pass + KV transfer */
  PD_WORKER_LEG_LAG,       /* prefill: KV sent, HTTP response not yet written */
  PD_WORKER_LEG_WAIT_KV,   /* decode: waiting for the KV */
  PD_WORKER_LEG_STREAM,    /* decode: producing tokens */
  PD_WORKER_LEG_HUNG,      /* a hang fault: no more output */
  PD_WORKER_LEG_DONE,      /* worker finished the request (slot freed) */
  PD_WORKER_LEG_QUEUED,    /* waiting for capacity: prefill's waiting queue (paired, before
                              its forward pass), decode's prealloc queue (before it tells
                              prefill its room) */
} pd_worker_leg_state_t;

#endif
