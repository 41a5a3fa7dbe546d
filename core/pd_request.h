/* pd_request: a client request as the dispatch core sees it. Parses the body once with
 * cJSON, derives route, stream/logprob flags and batch size (each mode's own rule, R1.2,
 * R1.3, M8.2), and renders each attempt's leg body with the bootstrap fields (R1.23-R1.26)
 * and, where the mode wants it, a shared `rid`. Fuzzed (fuzz/fuzz_request.c). */
#ifndef PD_REQUEST_H
#define PD_REQUEST_H
#include <stddef.h>
#include <stdint.h>

#include "pd_alloc.h"

/* Largest client body accepted (bytes); larger is PD_ERR_TOO_LARGE (HTTP 413 on the wire). */
#define PD_REQUEST_MAX_BODY_BYTES (4u * 1024u * 1024u)
/* Largest batch we inject bootstrap arrays for; larger is PD_ERR_LIMIT (HTTP 400). */
#define PD_REQUEST_MAX_BATCH 1024u

typedef enum {
  PD_ROUTE_GENERATE = 0,    /* POST /generate */
  PD_ROUTE_COMPLETIONS = 1, /* POST /v1/completions */
  PD_ROUTE_CHAT = 2,        /* POST /v1/chat/completions */
} pd_route_t;

/* Which rule decides "is this a batch" (they differ upstream; see docs/spec.md R-BATCH). */
typedef enum {
  PD_BATCH_RULE_SMG = 0,       /* R1.3: generate input_ids list-of-lists only; chat n>1;
                                  completions: any non-empty prompt array */
  PD_BATCH_RULE_MINILB = 1,    /* M8.2: generate only: text list, or input_ids[0] a list;
                                  /v1/ routes never */
  PD_BATCH_RULE_REFERENCE = 2, /* generate: text list or input_ids list-of-lists; chat n>1;
                                  completions: prompt array of strings or of arrays (an
                                  array of integers is one tokenized prompt) */
} pd_batch_rule_t;

typedef struct pd_request {
  const pd_alloc_t *alloc;
  pd_route_t route;
  int is_stream;      /* body.stream is true */
  int return_logprob; /* R1.2: generate return_logprob; chat logprobs true; completions
                         logprobs present and not null */
  uint32_t batch_size; /* 0: not a batch (scalar bootstrap fields) */
  uint32_t max_tokens; /* requested output tokens if stated (sampling_params.max_new_tokens,
                          max_tokens, max_completion_tokens), else 0 */
  int is_zero_tokens;  /* a stated 0 (not "absent"): SGLang's sampling parameters accept it and
                          the request ends with no output token (docs/spec.md R-ZERO-TOKENS) */
  void *json;          /* cJSON*, owned */
  char *base;          /* json printed without the members pd_request_render sets (cJSON's
                          allocator), made by the first render; NULL: none yet */
  size_t base_len;
  int base_flags;      /* which optional members base leaves out: 1 rid, 2 routed_dp_rank,
                          4 both DP ranks */
} pd_request_t;

/* Route of a path; PD_ERR_ROUTE for anything else. */
int pd_request_route(const char *path, pd_route_t *out);
const char *pd_route_path(pd_route_t route);

/* Parse a client request. On error fills err (a NUL-terminated message naming what and where,
 * e.g. "body: expected a JSON object" or "stream: expected a boolean") and returns
 * PD_ERR_ROUTE, PD_ERR_TOO_LARGE, PD_ERR_JSON, PD_ERR_NOT_OBJECT, PD_ERR_FIELD, PD_ERR_LIMIT
 * or PD_ERR_NOMEM. On success the request owns its parsed body; free with pd_request_free. */
int pd_request_parse(pd_request_t *r, const pd_alloc_t *alloc, const char *path,
                     const char *body, size_t len, pd_batch_rule_t rule, char *err,
                     size_t errlen);
void pd_request_free(pd_request_t *r);

typedef struct pd_bootstrap {
  const char *host;      /* prefill worker's bootstrap host */
  int port;              /* bootstrap port; < 0 renders JSON null (R1.24) */
  const uint64_t *rooms; /* batch_size rooms, or 1 when not a batch */
  const char *rid;       /* NULL: no rid injected; else scalar rid, or for a batch an array
                            of "<rid>-<i>" (i = 0..n-1, 4 hex digits) */
  int dp_rank;           /* < 0: none */
  int is_dp_stripped;    /* leave the client's routed_dp_rank and disagg_prefill_dp_rank out:
                            the workers derive the rank from the room (R-PAIR-RANK) */
} pd_bootstrap_t;

/* Render the body of one leg: the client JSON plus bootstrap_host/port/room (scalars, or
 * arrays of batch_size with one room each) and rid. Existing fields of those names are
 * replaced. *out is allocated with the request's allocator (pd_free), NUL-terminated.
 * The bytes are cJSON's unformatted print of that document (members in the client's order,
 * then the injected ones), but the client's part is printed once per request (r->base) and
 * the injected members by hand. Returns 0, PD_ERR_NOMEM or PD_ERR_INVAL (rooms missing). */
int pd_request_render(pd_request_t *r, const pd_bootstrap_t *b, char **out, size_t *out_len);

#endif
