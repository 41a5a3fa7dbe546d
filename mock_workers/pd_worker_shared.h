/* pd_worker_shared: the parts of the SGLang-like worker model that the simulator
 * (sim/pd_world_worker.c) and the real-socket mock (mock_workers/server/pd_mock*.c) share,
 * so both pick the same faults by the same rules and write the same bytes: fault selection and wire
 * rendering (W6.3, W6.4). Pure functions: no world, no clock, no socket. */
#ifndef PD_WORKER_SHARED_H
#define PD_WORKER_SHARED_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_prng.h"
#include "pd_request.h"
#include "pd_worker.h"

/* The fault chosen for one request, and the two modifiers that combine with it. */
typedef struct pd_fault_choice {
  int fault;             /* pd_fault_kind_t, or -1 for none */
  const pd_fault_t *fp;  /* the chosen fault (its after_tokens, status, ms); unchanged if none */
  uint64_t lag_ms;       /* PREFILL_LAG, unchanged if none applies */
  uint64_t drip_ms;      /* SLOW_DRIP, unchanged if none applies */
} pd_fault_choice_t;

/* A leg as the traffic faults (the scenario's top-level "faults") see it. The caller keeps the
 * ledger: leg_no is this leg's number among the legs of its role of its request, counted in
 * the order they reached a worker (the simulator per request; the socket mocks in a shared
 * file, mock_workers/server/pd_mock_ledger.c), and owner holds, per traffic fault, the worker index + 1 a
 * sticky fault stuck to (0: none yet). */
typedef struct pd_traffic_view {
  const pd_traffic_fault_t *tf;
  uint32_t n_tf;
  uint32_t request;        /* 0-based; PD_TRAFFIC_FAULT_ANY: unknown, no traffic fault applies */
  pd_role_t role;
  uint32_t leg_no;         /* 1-based */
  uint32_t worker;         /* the worker's index in its scenario */
  _Atomic uint32_t *owner; /* n_tf entries */
} pd_traffic_view_t;

/* Choose the fault of a worker's nth request (1-based). First the traffic faults (t, may be
 * NULL): each that matches this leg applies (and a sticky one claims the worker); then every
 * scripted fault whose nth range holds nth is drawn with its prob. prefill_lag and slow_drip
 * set their modifier, the first other kind is the fault. With none, a random fault from a
 * fixed set with probability fault_rate (workload.fault_rate). Draws from rng in a fixed
 * order (traffic faults draw nothing), so one seed replays. The caller initialises *out
 * (fault -1, its current fp, lag_ms, drip_ms). Returns the index of the traffic fault that
 * fired, or -1. */
int pd_worker_pick_fault(const pd_scenario_worker_t *spec, uint32_t nth, double fault_rate,
                   const pd_traffic_view_t *t, pd_prng_t *rng, pd_fault_choice_t *out);

/* The truth of a leg answered with an injected status: a 4xx other than 408/429 is the
 * worker correctly refusing the request (R3.2), so the worker is healthy; the rest failed. */
int pd_worker_status_is_healthy(int status);

/* A `status` fault with after_tokens > 0 on a non-stream decode answers after generating
 * that many tokens (the KV arrived; prefill succeeded), not at once. */
int pd_worker_status_is_deferred(const pd_fault_t *fp, int is_decode, int is_stream);

/* How much later than the KV transfer (and any prefill_lag) an error_after_kv prefill gives
 * its error answer: the fault's ms; 0 for any other fault. */
static inline uint64_t pd_worker_late_error_ms(int fault, const pd_fault_t *fp) {
  return fault == (int)PD_FAULT_ERROR_AFTER_KV && fp ? fp->ms : 0;
}

/* the standard logprob parts: prefill's and decode's input_token_logprobs */
#define PD_LP_PREFILL "[[-0.25,11,null],[-0.5,12,null]]"
#define PD_LP_DECODE "[[-0.75,13,null]]"
/* the two merged, as cJSON prints the merged array (the client's view after a merge) */
#define PD_LP_MERGED "[[-0.25,11,null],[-0.5,12,null],[-0.75,13,null]]"

#define PD_WIRE_MODEL_MAX 64u /* the longest model name echoed (pd_wire_api_t.model) */

/* The API a request came on, for OpenAI's shapes (pd_wire_openai.c): filled by the body
 * parser (pd_worker_body.c) and the route by the caller, from the request's path. */
typedef struct pd_wire_api {
  int route;              /* pd_route_t: PD_ROUTE_GENERATE renders SGLang's native shape */
  int has_usage;          /* stream_options.include_usage: a stream ends with a usage chunk */
  uint32_t prompt_tokens; /* usage.prompt_tokens */
  char model[PD_WIRE_MODEL_MAX]; /* the request's "model" when it is printable ASCII with no
                                    quote or backslash and fits, else "" (echoed "default") */
} pd_wire_api_t;

/* What the renderer needs to know about a request. */
typedef struct pd_wire_leg {
  const char *rid;   /* already JSON-escaped, without quotes */
  int is_stream;
  int has_logprob;
  uint32_t tokens;   /* output tokens of a decode request */
  const pd_wire_api_t *api; /* NULL: SGLang's /generate */
} pd_wire_leg_t;

/* What a vLLM worker adds (pd_wire_render_vllm): its prefill answer names where decode reads
 * (V1.5); its error bodies and events take vLLM's shape (V1.28, V1.31). */
typedef struct pd_wire_vllm {
  const char *engine_id; /* remote_engine_id (already JSON-escaped, without quotes; each of
                            these two strings under PD_WIRE_NAME_MAX bytes) */
  const char *kv_host;   /* remote_host (likewise; NULL: "localhost") */
  int kv_port;           /* remote_port */
} pd_wire_vllm_t;

/* Message kinds (equal to the simulator's W2G_* kinds that carry bytes). */
enum {
  PD_WIRE_TOKEN = 2,        /* arg = token index << 2 | part (0 whole, 1 first half, 2 second
                             half, 3 this and the next token) */
  PD_WIRE_DONE_EVENT = 3,   /* data: [DONE]; arg = 1: after a finish event with no token (a
                               request for 0 tokens, R-ZERO-TOKENS) */
  PD_WIRE_ERROR_EVENT = 4,  /* arg = code: data: {"error":{...}} */
  PD_WIRE_PREFILL_BODY = 5, /* arg = 1: only the first half / first event (body error follows) */
  PD_WIRE_DECODE_BODY = 6,  /* the whole non-stream decode answer */
  PD_WIRE_ERROR_BODY = 7,   /* arg = status: JSON error document */
  PD_WIRE_ABORT_EVENT = 16, /* mock only: finish_reason abort as one SSE event and [DONE] */
  PD_WIRE_ABORT_BODY = 17,  /* mock only: finish_reason abort as a JSON document */
  PD_WIRE_VLLM_PREFILL_BODY = 18, /* vLLM prefill's one-token answer with top-level
                                     kv_transfer_params (V1.4, V1.5): arg = the blocks to list
                                     (0: null params, V1.6) | PD_WIRE_CUT (only the first half:
                                     a body error follows) | PD_WIRE_NO_RID (the params lack
                                     remote_request_id, V1.8) | PD_WIRE_UNKNOWN_ENGINE
                                     (remote_engine_id and remote_host name no engine:
                                     PD_WIRE_UNKNOWN_ENGINE_NAME) */
};
#define PD_WIRE_CUT 0x00800000u /* below bit 24, as PD_WIRE_NO_RID: the simulator carries a SEND's arg in 24 bits */
#define PD_WIRE_NO_RID 0x00400000u /* below bit 24: the simulator carries a SEND's arg in 24 bits */
#define PD_WIRE_UNKNOWN_ENGINE 0x00200000u /* below bit 24, as PD_WIRE_NO_RID */
/* kv_params unknown_engine's remote_engine_id and remote_host: longer than any worker's name
 * (at most 31 bytes) and in the .invalid domain (RFC 6761), so it names nothing in the
 * simulator's world nor on a mock's network */
#define PD_WIRE_UNKNOWN_ENGINE_NAME "engine-of-another-deployment.invalid"
#define PD_WIRE_MAX_BLOCKS 1024u /* block ids a vLLM prefill answer lists at most */
#define PD_WIRE_NAME_MAX 256u    /* pd_wire_render_cap's room for engine_id and kv_host each */

/* A token message's part (PD_WIRE_TOKEN's arg & 3) of the len bytes rendered in buf: 1 the
 * first half, 2 the second half (moved to buf's start), else all. Returns its length. */
size_t pd_wire_token_part(char *buf, size_t len, uint32_t part);

/* Token k's SGLang event object (the payload of its "data: " line, as PD_WIRE_TOKEN renders
 * it) with lp as its meta_info.input_token_logprobs (NULL: none, as without logprobs):
 * PD_LP_DECODE is what the worker sends, PD_LP_MERGED what a client sees once merged.
 * Returns its length, 0 when it does not fit in cap with its NUL. */
size_t pd_wire_token_json(const pd_wire_leg_t *leg, uint32_t k, const char *lp, char *buf,
                          size_t cap);

/* Render one message into buf; returns its length, 0 when it does not fit in cap (or the kind
 * is unknown). A non-stream decode body needs about 32 + 12 * tokens bytes.
 *
 * The shape follows the route (leg->api): /generate SGLang's native {"text","meta_info"};
 * /v1/completions and /v1/chat/completions OpenAI's objects and chunks (pd_wire_openai.c).
 * Token k's text is "tok<k> " in every shape, so a reader can check each token's identity
 * and order (sim/pd_check.c): SGLang's events also carry "index": k. */
size_t pd_wire_render(const pd_wire_leg_t *leg, int kind, uint32_t arg, char *buf, size_t cap);

/* The same for a vLLM worker's leg (v NULL: as pd_wire_render, which renders
 * PD_WIRE_VLLM_PREFILL_BODY with an empty engine id, host localhost, port 5600). */
size_t pd_wire_render_vllm(const pd_wire_leg_t *leg, const pd_wire_vllm_t *v, int kind,
                           uint32_t arg, char *buf, size_t cap);

/* Bytes pd_wire_render may need for this kind on this leg (rid length included). */
size_t pd_wire_render_cap(const pd_wire_leg_t *leg, int kind);

/* ---- OpenAI's shapes (pd_wire_openai.c; the routes other than /generate) ---- */

/* Does this leg answer in OpenAI's shape? */
static inline int pd_wire_is_openai(const pd_wire_leg_t *leg) {
  return leg->api && leg->api->route != PD_ROUTE_GENERATE;
}
/* One message of kind on an OpenAI route (W6.6-W6.9): ids are the rid (SGLang) or
 * "cmpl-<rid>" / "chatcmpl-<rid>" (is_vllm); error kinds take SGLang's OpenAI shape (vLLM's
 * are pd_wire_render_vllm's). pd_wire_render and pd_wire_render_vllm call it for those routes. */
size_t pd_wire_openai_render(const pd_wire_leg_t *leg, int is_vllm, int kind, uint32_t arg,
                             char *buf, size_t cap);
/* vLLM prefill's one-token answer (PD_WIRE_VLLM_PREFILL_BODY, arg as there) in the route's
 * shape: a chat.completion on /v1/chat/completions, else a text_completion (V1.4, V1.5). */
size_t pd_wire_openai_vllm_prefill(const pd_wire_leg_t *leg, const pd_wire_vllm_t *v,
                                   uint32_t arg, char *buf, size_t cap);

/* FNV-1a over a request's bootstrap fields as parsed values (type, a number's double, a
 * string's bytes, an array's elements; absent ones as absent), not their printed text: equal
 * on both legs of a pair iff host, port and rooms are (as cJSON would print them). */
struct cJSON;
uint64_t pd_wire_rooms_hash(const struct cJSON *room, const struct cJSON *host,
                          const struct cJSON *port);

#endif
