/* pd_worker_body: what a worker reads from a generation request body, one parser for the
 * simulator and the real-socket mock: stream, logprob, rid, bootstrap host/port/room(s) and
 * the hash of the bootstrap fields that must be equal on both legs of a pair. Rooms are read
 * exactly: the first from the text when cJSON's double would round it (rooms above 2^53),
 * the rest of a batch through the double (exact up to 2^53, as the rooms a PD gateway draws
 * are, R-ROOM), the prompt's length in tokens (capacity, docs/capacity.md), the output limit
 * and vLLM's kv_transfer_params (V1.1, V1.7, V1.8), and what OpenAI's answer shapes echo
 * (model, stream_options.include_usage; the route comes from the path, pd_worker_body_route).
 * Pure: no clock, no globals; the room array comes from the given allocator. */
#ifndef PD_WORKER_BODY_H
#define PD_WORKER_BODY_H
#include <stddef.h>
#include <stdint.h>

#include "pd_alloc.h"
#include "pd_worker_shared.h"

#define PD_WORKER_RID_MAX 256u
#define PD_WORKER_HOST_MAX 256u
#define PD_WORKER_ENGINE_ID_MAX 128u

/* vLLM's kv_transfer_params as a request carries them (V1.1, V1.7). */
typedef struct pd_worker_kvp {
  int is_present;        /* an object (not absent, not null) */
  int do_remote_decode, do_remote_prefill;
  int has_engine_id, has_block_ids, has_request_id, has_host, has_port;
  char engine_id[PD_WORKER_ENGINE_ID_MAX];
  uint32_t n_block_ids;  /* items of remote_block_ids (a list of lists per KV group counts all) */
  char request_id[PD_WORKER_RID_MAX];
  char host[PD_WORKER_HOST_MAX];
  int port;              /* < 0: none */
} pd_worker_kvp_t;

struct cJSON;

typedef struct pd_worker_body {
  int is_stream, has_logprob;
  int has_room_key;  /* bootstrap_room is present (null included) */
  int has_room;      /* it is a non-negative number, or an array whose first item is one */
  int is_room_array; /* it came as an array (a batch), not one number */
  int n_rooms;       /* items of the array; 1 for any other present value; 0 when absent */
  uint64_t room;     /* the first room (0 when not a number) */
  uint64_t *rooms;   /* every room when n_rooms > 1 (from the allocator), else NULL */
  uint64_t rooms_hash;
  int has_rid;
  char rid[PD_WORKER_RID_MAX]; /* empty without one */
  char boot_host[PD_WORKER_HOST_MAX];
  int boot_port;     /* < 0: none */
  uint32_t prompt_tokens; /* the prompt's length in tokens, at least 1: words (runs of
                             non-space bytes) of SGLang's "text", OpenAI's "prompt" or the chat
                             "messages[].content", token ids of "input_ids" or of a "prompt"
                             given as ids; an array (a batch) counts all its items */
  uint32_t max_tokens;    /* OpenAI's max_tokens, else max_completion_tokens, else SGLang's
                             sampling_params.max_new_tokens; 0 when none is a number >= 0 */
  int has_max_tokens;
  pd_worker_kvp_t kvp;    /* vLLM's kv_transfer_params */
  int routed_dp_rank;     /* SGLang: the DP rank the leg runs on (S2.14); -1 when absent
                             (or not an integer 0..32767) */
  int prefill_dp_rank;    /* SGLang decode: disagg_prefill_dp_rank, the prefill rank it looks
                             its room up on (S2.14); -1 when absent */
  pd_wire_api_t api;      /* what OpenAI's shapes echo: the model, stream_options.include_usage
                             and prompt_tokens; route PD_ROUTE_GENERATE until
                             pd_worker_body_route names the request's path */
} pd_worker_body_t;

/* V1.8: decode needs remote_block_ids, remote_engine_id, remote_request_id, remote_host and
 * remote_port to read from prefill; without any of them it computes the prompt itself. */
int pd_worker_kvp_is_valid(const pd_worker_kvp_t *p);
/* What the params ask of a worker of this role (pd_kv_mode_t; NONE for SGLang workers). */
int pd_worker_kvp_mode(const pd_worker_kvp_t *p, int is_decode);
/* The key a prefill's pinned KV is read by: a hash of the request id its answer names as
 * remote_request_id, and decode's remote_request_id (equal strings, equal keys). */
uint64_t pd_worker_kv_key(const char *request_id);

/* Fill b from the parsed body j (its text body[0..len), for exact rooms). Every field it can
 * read is filled even when a field is wrong; the first wrong field is named in err and the
 * result is PD_ERR_FIELD (a mock answers 400, the simulator keeps what was read).
 * PD_ERR_NOMEM when the room array could not be allocated (n_rooms then counts 1). */
int pd_worker_body_read(pd_worker_body_t *b, const struct cJSON *j, const char *body, size_t len,
                        const pd_alloc_t *a, char *err, size_t errlen);

/* The route the request came on (its path; an unknown one reads as /generate), which
 * chooses the shape of the answer (pd_wire_render). */
void pd_worker_body_route(pd_worker_body_t *b, const char *path);

#endif
