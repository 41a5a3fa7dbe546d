/* pd_wengine: the worker engine. One SGLang-like (or vLLM-like, below) worker (prefill or decode, S5.x, S2.x) as a
 * sans-IO state machine, shaped like core/: the caller feeds events (a request arrived with
 * what its body says, its client closed, /abort_request reached it, a partner registered its
 * room, the KV arrived, a crash) with `now` passed in, and reads actions from a caller-owned
 * buffer (write a head or bytes, end the exchange clean/reset/cut, tell a prefill our room,
 * hand the KV over, slot and KV pages taken or freed, the leg's truth). The engine owns its
 * deadlines: pd_wengine_next_expiry says when to call pd_wengine_expire next.
 *
 * Capacity (docs/capacity.md): a running-request limit and a KV pool in pages. Prefill:
 * bootstrap queue (waits for decode to register its room; BOOTSTRAP_TIMEOUT from arrival) ->
 * waiting queue (needs a running slot and the prompt's KV pages; head-of-line) -> one forward
 * pass at a time over a batch of waiting requests (forward_ms + forward_us_per_token x the
 * batch's tokens) -> inflight transfer (kv_ms) -> KV freed -> answer. Decode (destination
 * first): prealloc queue (FIFO, head-of-line; needs a running slot and the prompt's pages plus
 * the per-request decode reserve) -> tells the prefill (PD_WACT_CONNECT; WAITING_TIMEOUT
 * starts here, S2.8) -> waits for the KV -> streams tokens (one KV token per output token) ->
 * slot and pages freed. Prompt length comes from the request body (pd_worker_body.c).
 *
 * vLLM protocol (spec->protocol == PD_PROTOCOL_VLLM, source first, V1.3-V1.22; the engine's
 * half is pd_wengine_vllm.c): a prefill request with do_remote_decode (req.kv_mode) needs no
 * partner: waiting queue and forward pass as above, then after any lag it answers one token
 * with top-level kv_transfer_params (PD_WIRE_VLLM_PREFILL_BODY) and, when it ended capped by
 * length (max_tokens 1), PINS its prompt's KV pages (PD_WACT_PIN) past the leg's DONE, until
 * decode's read-done, empty-read or reject notification (pd_wengine_notify) or the expiry:
 * kv_abort_timeout_ms, or in lease mode kv_lease_ms extended by heartbeats to now + 2/3 of it
 * (V1.12-V1.13). Not length-capped, failed or disconnected: null params, KV freed at once
 * (V1.6, V1.20). No abort frees pinned KV (V1.16: the leg is gone, abort finds nothing).
 * A decode request with valid params (PD_KV_MODE_REMOTE_PREFILL) reserves in the prealloc
 * queue as above (V1.9), then reads (PD_WACT_PULL; the caller routes it to the named prefill's
 * pd_wengine_pull and brings back pd_wengine_pulled), takes its own kv_ms for the read, tells
 * the prefill (PD_WACT_NOTIFY read) and streams; a read of blocks no longer pinned succeeds
 * anyway and is marked PD_WACT_KV_FROM stale (V1.15); a failed read answers 500 (policy
 * `fail`, V1.22). Invalid or missing params: it computes the prompt itself (forward_ms +
 * forward_us_per_token x prompt) and streams (V1.8, V1.6). In lease mode it heartbeats
 * (PD_WACT_HEARTBEAT) from arrival until its read is done. Aborted or closed before admission
 * it notifies an empty read (V1.17); rejected at arrival (a status answer, a prompt too large)
 * it notifies a rejection (V1.18); aborted after its read began, a read-done (simplified: its
 * destination blocks are freed at once, V1.21). vLLM has no waiting timeout on decode.
 *
 * Used by the simulator (sim/pd_world_worker.c: rooms routed in memory, bytes scheduled on
 * the virtual clock) and by the real mock (mock_workers/server/: bytes over HTTP, rooms over
 * the TCP bootstrap protocol). No globals, no clock, no I/O. */
#ifndef PD_WENGINE_H
#define PD_WENGINE_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_alloc.h"
#include "pd_prng.h"
#include "pd_worker.h"

typedef struct pd_wengine pd_wengine_t;

typedef struct pd_wengine_config {
  const pd_scenario_worker_t *spec; /* timings, chunking, faults, capacity (outlives the engine) */
  uint32_t worker_index;            /* in its scenario (traffic faults, sticky owner) */
  uint64_t bootstrap_timeout_ms;    /* S5.4 / S2.8 */
  uint64_t waiting_timeout_ms;      /* S5.5 / S2.8 */
  double fault_rate;                /* workload.fault_rate */
  const pd_traffic_fault_t *tfaults;
  uint32_t n_tfaults;
  _Atomic uint32_t *tf_owner;       /* n_tfaults entries (sticky traffic faults), may be NULL */
  pd_prng_t *fault_rng;             /* caller-owned: one stream may serve many engines */
  double time_scale;                /* ns per scenario ms = 1e6 x time_scale (0: 1.0) */
  uint64_t reconnect_ms;            /* decode: bootstrap connection retry after a loss */
} pd_wengine_config_t;

/* What the engine needs to know about one request (from its body, pd_worker_body.c). */
typedef struct pd_wengine_req {
  int is_stream;
  int has_room;          /* a bootstrap room to meet at (decode without one: see is_direct) */
  uint64_t room, rooms_hash;
  uint32_t tokens;       /* decode: output tokens */
  uint32_t prompt_tokens;
  uint32_t request;      /* traffic faults: 0-based request index or PD_TRAFFIC_FAULT_ANY */
  uint32_t leg_no;       /* traffic faults: 1-based leg number of its role in its request */
  int can_connect;       /* decode: the body names a bootstrap server to reach */
  int is_direct;         /* decode without a room on a direct worker: the KV is local */
  /* vLLM workers only (ignored by SGLang ones) */
  int kv_mode;           /* pd_kv_mode_t, from kv_transfer_params (pd_worker_kvp_mode) */
  uint64_t kv_key;       /* prefill: the key decode reads its pinned KV by (pd_worker_kv_key of
                            the request id its answer names); decode: its remote_request_id's */
  uint32_t max_tokens;   /* prefill: 1 ends capped by length (V1.5); anything else, 0 (absent)
                            included, ends with its one token as a stop: null params (V1.6) */
  /* SGLang DP ranks (S2.14): prefill runs on routed_rank when given, else on room % dp_size;
   * decode looks its room up on prefill_rank when given, else on room % the prefill's dp_size */
  int has_routed_rank, has_prefill_rank;
  uint32_t routed_rank, prefill_rank;
} pd_wengine_req_t;

typedef enum {
  PD_WENGINE_END_CLEAN = 1, /* complete exchange (chunked: terminating chunk) */
  PD_WENGINE_END_READ,      /* body cut mid-way (a body read error at the gateway) */
  PD_WENGINE_END_RESET,     /* connection reset */
  PD_WENGINE_END_REFUSED,   /* refused before any byte */
} pd_wengine_end_t;

typedef enum {
  PD_WACT_HEAD = 1,  /* a = status, b = 1 when the body is SSE */
  PD_WACT_SEND,      /* a = pd_wire kind (PD_WIRE_*), b = its arg, c = parts (>= 2: cut the
                        rendered bytes into c chunks of near-equal length) */
  PD_WACT_END,       /* a = pd_wengine_end_t; nothing more is written on this leg */
  PD_WACT_CONNECT,   /* decode: tell the prefill named in the body our room (send_metadata):
                        room, b = rooms_hash, a = flags (PD_WENGINE_REG_*) */
  PD_WACT_PAIRED,    /* prefill: paired with the registration b (its token) */
  PD_WACT_KV_SEND,   /* prefill: the transfer to registration b ended, a = 1 ok / 0 failed */
  PD_WACT_UNPAIR,    /* the leg is done while linked to a partner: drop the link (prefill:
                        b = the registration token; decode: its own connection) */
  PD_WACT_STATE,     /* a = pd_worker_leg_state_t (every change) */
  PD_WACT_FAULT,     /* a = fault kind + 1 (0 none), b = traffic fault index + 1 (0 none),
                        c = lag_ms << 32 | drip_ms (each capped at 2^32 - 1) */
  PD_WACT_FIRED,     /* the leg's injected fault took effect */
  PD_WACT_STATUS,    /* a = the injected status sent */
  PD_WACT_SLOT,      /* a = 1 the worker took the request's slot, 0 freed it */
  PD_WACT_RUNNING,   /* a = 1 a running slot taken (capacity), 0 freed */
  PD_WACT_KV,        /* a = KV pages this leg holds now (0: freed) */
  PD_WACT_DONE,      /* a = pd_truth_t; the engine forgot the leg (its id may be reused) */
  PD_WACT_REJECT,    /* a = status: the request cannot ever fit (S2.5: 400); precedes DONE */
  /* vLLM (source first) */
  PD_WACT_PIN,       /* prefill: leg id's KV, read by key c: a = pd_wengine_pin_t, b = pages
                        still pinned (PIN_HELD: the pages, just before the leg's DONE; any
                        other: 0, freed, after it: the id may name a forgotten leg) */
  PD_WACT_PULL,      /* decode: READ the KV pinned under key b on the prefill its body names
                        (remote_engine_id / remote_host:remote_port); answer pd_wengine_pulled */
  PD_WACT_PULLED,    /* prefill: the read by token b (pd_wengine_pull) of key c:
                        a = pd_wengine_read_t; id = the pinned leg (0: none) */
  PD_WACT_NOTIFY,    /* decode: tell the prefill its body names: a = pd_wengine_notify_t,
                        b = key */
  PD_WACT_HEARTBEAT, /* decode (lease mode): extend the lease of key b on that prefill */
  PD_WACT_KV_FROM,   /* decode: where its prompt's KV comes from, a = pd_wengine_kv_from_t */
  /* network faults (PD_FAULT_NET_RESET, PD_FAULT_RESPONSE_LOST) */
  PD_WACT_NET,       /* the path to the gateway is cut now (after PD_WACT_FIRED): a =
                        pd_wengine_net_t. The engine writes nothing more on the leg and ignores
                        its close (the worker never hears of the cut); the driver makes the
                        gateway see it: a reset, or nothing at all */
} pd_wact_kind_t;

typedef enum {
  PD_WENGINE_NET_RESET = 1, /* the gateway sees the connection reset */
  PD_WENGINE_NET_LOST,      /* the gateway sees nothing more (no bytes, no end) */
} pd_wengine_net_t;

typedef enum {
  PD_WENGINE_PIN_HELD = 1, /* pinned for a remote read (V1.5) */
  PD_WENGINE_PIN_READ,     /* freed: decode's read-done notification (V1.11) */
  PD_WENGINE_PIN_EMPTY,    /* freed: decode aborted before scheduling it (V1.17) */
  PD_WENGINE_PIN_REJECTED, /* freed: decode rejected it before admission (V1.18) */
  PD_WENGINE_PIN_EXPIRED,  /* freed: the timeout or the lease ran out unread (V1.12, V1.13) */
  PD_WENGINE_PIN_CRASH,    /* freed: the worker died */
} pd_wengine_pin_t;

typedef enum {
  PD_WENGINE_READ_OK = 1, /* the blocks were pinned: the read gets the prompt's KV */
  PD_WENGINE_READ_STALE,  /* nothing pinned under that key (freed, expired, never): the read
                             "succeeds" from whatever the blocks hold now (V1.15) */
  PD_WENGINE_READ_FAILED, /* a transfer error (a kv_fail fault, the prefill down; V1.22) */
} pd_wengine_read_t;

typedef enum {
  PD_WENGINE_NOTIFY_READ = 1, /* the read is done (V1.11) */
  PD_WENGINE_NOTIFY_EMPTY,    /* aborted before scheduling: an empty read (V1.17) */
  PD_WENGINE_NOTIFY_REJECT,   /* rejected before admission (V1.18) */
} pd_wengine_notify_t;

typedef enum {
  PD_WENGINE_KV_FROM_READ = 1, /* read from the prefill's pinned blocks */
  PD_WENGINE_KV_FROM_STALE,    /* read "succeeded" from blocks already freed (V1.15) */
  PD_WENGINE_KV_FROM_LOCAL,    /* computed locally: params null, missing or invalid (V1.6, V1.8) */
} pd_wengine_kv_from_t;

#define PD_WENGINE_REG_KV_FAIL 1u /* the registering decode will fail the transfer */
/* A registration's pairing topology (O5.2, S2.14): the decode's transfer group in bits 8-15;
 * bit 16 set: the prefill DP rank it looks the room up on is bits 17-31 (its body's
 * disagg_prefill_dp_rank); clear: room % the prefill's dp_size. */
#define PD_WENGINE_REG_GROUP(f) (((f) >> 8) & 0xffu)
#define PD_WENGINE_REG_HAS_RANK (1u << 16)
#define PD_WENGINE_REG_RANK(f) ((f) >> 17)
#define PD_WENGINE_REG_TOPO_MAX_RANK 32767u

typedef struct pd_wact {
  uint32_t kind; /* pd_wact_kind_t */
  uint32_t a;
  uint64_t id;   /* the leg (the caller's id) */
  uint64_t b, c;
  uint64_t room;
  const pd_fault_t *fp; /* PD_WACT_FAULT: the chosen fault (in the spec or the traffic faults) */
} pd_wact_t;

/* Caller-owned action list (grows; a failed growth is remembered in err). */
typedef struct pd_wact_buf {
  pd_wact_t *v;
  size_t n, cap;
  const pd_alloc_t *alloc;
  int err;
} pd_wact_buf_t;
void pd_wact_buf_init(pd_wact_buf_t *b, const pd_alloc_t *alloc);
void pd_wact_buf_reset(pd_wact_buf_t *b);
void pd_wact_buf_free(pd_wact_buf_t *b);

/* Capacity now (for gauges, traces and the quiescence check). */
typedef struct pd_wengine_stats {
  uint32_t legs;        /* requests the worker holds (any state) */
  uint32_t running;     /* running slots taken (decode: prealloc'd + transfer + running) */
  uint32_t max_running;
  uint32_t queued;      /* bootstrap + waiting (prefill) or prealloc (decode) queue entries */
  uint32_t inflight;    /* prefill: in a forward pass or transferring */
  uint64_t kv_used_pages, kv_total_pages;
  uint32_t is_down;
  uint32_t collisions;  /* prefill: a room registered twice (a second leg or decode) */
  uint32_t registrations; /* prefill: decode registrations not yet paired */
  uint32_t pinned;      /* vLLM prefill: finished requests whose KV is pinned */
  uint64_t kv_pinned_pages; /* their pages (part of kv_used_pages) */
} pd_wengine_stats_t;

/* The engine; NULL on no memory. cfg->spec must outlive it. */
pd_wengine_t *pd_wengine_new(const pd_wengine_config_t *cfg, const pd_alloc_t *alloc);
void pd_wengine_del(pd_wengine_t *e);

/* Events. id is the caller's leg id (unique among the engine's live legs). Each returns 0,
 * or a negative PD_ERR_* (NOMEM: the event was not applied; NOTFOUND: no such live leg). */
int pd_wengine_open(pd_wengine_t *e, uint64_t now, uint64_t id, const pd_wengine_req_t *req,
                    pd_wact_buf_t *out);
int pd_wengine_close(pd_wengine_t *e, uint64_t now, uint64_t id, pd_wact_buf_t *out);
int pd_wengine_abort(pd_wengine_t *e, uint64_t now, uint64_t id, pd_wact_buf_t *out);
/* Prefill: a decode registered room (hash, flags) under token (the caller's handle for that
 * decode: a leg id or a bootstrap connection); it pairs with the room's bootstrapping leg, or
 * waits here for one (the first registration of a room keeps it: a later one is ignored). */
int pd_wengine_register(pd_wengine_t *e, uint64_t now, uint64_t token, uint64_t room,
                        uint64_t hash, uint32_t flags, pd_wact_buf_t *out);
/* Prefill: the decode behind token is gone (its connection closed, its leg done). */
int pd_wengine_unregister(pd_wengine_t *e, uint64_t now, uint64_t token, pd_wact_buf_t *out);
/* Decode: the prefill paired with us (no reconnect after that). */
int pd_wengine_paired(pd_wengine_t *e, uint64_t now, uint64_t id, pd_wact_buf_t *out);
/* Decode: the KV arrived (ok) or the transfer failed (KVPoll.Failed). */
int pd_wengine_kv(pd_wengine_t *e, uint64_t now, uint64_t id, int ok, pd_wact_buf_t *out);
/* Decode: the bootstrap connection was lost before pairing: connect again after
 * cfg.reconnect_ms (the real mock only; the simulator never loses one). */
int pd_wengine_boot_lost(pd_wengine_t *e, uint64_t now, uint64_t id, pd_wact_buf_t *out);
/* vLLM prefill: decode (token: the caller's handle for it) reads the KV pinned under key;
 * answers PD_WACT_PULLED at once (the pin stays until a notification or its expiry). */
int pd_wengine_pull(pd_wengine_t *e, uint64_t now, uint64_t token, uint64_t key,
                    pd_wact_buf_t *out);
/* vLLM decode: the read it asked for (PD_WACT_PULL) found r (pd_wengine_read_t). */
int pd_wengine_pulled(pd_wengine_t *e, uint64_t now, uint64_t id, int r, pd_wact_buf_t *out);
/* vLLM prefill: decode's notification (pd_wengine_notify_t) for key: frees the pin. */
int pd_wengine_notify(pd_wengine_t *e, uint64_t now, uint64_t key, int kind, pd_wact_buf_t *out);
/* vLLM prefill: decode's heartbeat for key (lease mode: expiry = max(expiry, now + 2/3 of
 * the lease); timeout mode: ignored). */
int pd_wengine_heartbeat(pd_wengine_t *e, uint64_t now, uint64_t key, pd_wact_buf_t *out);
/* The worker process dies (every live leg reset) / comes back (empty). */
int pd_wengine_crash(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out);
int pd_wengine_restart(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out);
/* New faults and timings for later requests (the simulator's healed phase): cfg replaces the
 * engine's; capacity keeps its sizes. */
void pd_wengine_reconfigure(pd_wengine_t *e, const pd_wengine_config_t *cfg);

/* Deadlines: the earliest one (UINT64_MAX: none; it may have become moot, which is
 * harmless), and firing every deadline due at now. */
uint64_t pd_wengine_next_expiry(const pd_wengine_t *e);
int pd_wengine_expire(pd_wengine_t *e, uint64_t now, pd_wact_buf_t *out);

void pd_wengine_stats(const pd_wengine_t *e, pd_wengine_stats_t *st);
int pd_wengine_is_down(const pd_wengine_t *e);
/* Running places free (max_running_requests - running, 0 when full), as pd_wengine_stats
 * says; UINT32_MAX-ish without a limit. */
uint32_t pd_wengine_room(const pd_wengine_t *e);
/* The live leg's worker state (PD_WORKER_LEG_DONE when it is not live). */
pd_worker_leg_state_t pd_wengine_leg_state(const pd_wengine_t *e, uint64_t id);
/* R-CAP-RANK: the live leg waits in a capacity queue (prefill's waiting, decode's prealloc)
 * behind its DP rank's share while another rank of the worker has a running slot free: a
 * wait its rank caused (a gateway's pin), not a full worker. 0 when the ranks share one pool
 * or the leg is not queued. */
int pd_wengine_is_rank_bound(const pd_wengine_t *e, uint64_t id);

#endif
