/* pd_merge: prepend prefill's `meta_info.input_token_logprobs` to decode's, as smg (R1.38)
 * and mini_lb (M8.3) do, plus `input_top_logprobs` and `input_token_ids_logprobs` when both
 * sides carry them (G9). Works on one JSON document: a non-stream body or one SSE event's
 * payload. Fuzzed (fuzz/fuzz_merge.c). */
#ifndef PD_MERGE_H
#define PD_MERGE_H
#include <stddef.h>

#include "pd_alloc.h"

/* 0 only when decode text can carry no meta_info.input_token_logprobs member: the key's
 * name does not occur in it and it has no backslash (so no escaped spelling of it), so
 * pd_merge_logprobs would return nonzero on it (PD_ERR_NOT_FOUND, PD_ERR_JSON or
 * PD_ERR_NOT_OBJECT). A substring check, not a parse: lets a caller that treats every
 * nonzero alike skip the parse for the events that carry no logprobs. */
int pd_merge_may_carry(const char *decode, size_t dlen);

/* Merge prefill's logprob arrays in front of decode's.
 * prefill/decode: JSON text (not necessarily NUL-terminated) of lengths plen/dlen.
 * On success returns 0 and *out (allocated with alloc; free with pd_free) holds the merged
 * decode JSON, unformatted; *out_len its length.
 * Returns PD_ERR_JSON if either text is not valid JSON, PD_ERR_NOT_OBJECT if either is not an
 * object, PD_ERR_NOT_FOUND if decode has no meta_info.input_token_logprobs array or prefill
 * has none (nothing merged, *out untouched), PD_ERR_NOMEM. */
int pd_merge_logprobs(const pd_alloc_t *alloc, const char *prefill, size_t plen,
                      const char *decode, size_t dlen, char **out, size_t *out_len);

/* Prefill's side of pd_merge_logprobs, read once for every decode event it merges into:
 * the arrays of prefill's meta_info as cJSON prints them (the merged array prints as
 * prefill's elements, a comma and decode's, so the rest of prefill's text is not needed). */
#define PD_MERGE_NKEYS 3
typedef struct pd_merge_prefill {
  int rc;         /* 0, or PD_ERR_JSON / PD_ERR_NOT_OBJECT: what a merge returns (unless decode
                     is not JSON either) */
  int has_meta;   /* meta_info is an object */
  int is_nomem;   /* an array could not be printed: a merge that needs it is PD_ERR_NOMEM */
  char *items[PD_MERGE_NKEYS]; /* each key's array printed (cJSON's allocator), NULL: none */
  size_t items_len[PD_MERGE_NKEYS];
  void *seen[PD_MERGE_NKEYS];      /* cJSON*: the last decode array merged for each key */
  char *seen_text[PD_MERGE_NKEYS]; /* and the merged array's text (cJSON's allocator) */
  char *spare;                     /* a merged text that could not be kept with its array */
} pd_merge_prefill_t;

/* Read prefill's JSON text (never fails: what it found is kept in pf->rc). Free with
 * pd_merge_prefill_free. */
void pd_merge_prefill_init(pd_merge_prefill_t *pf, const char *prefill, size_t plen);
void pd_merge_prefill_free(pd_merge_prefill_t *pf);

/* pd_merge_logprobs with prefill's side read before: the same result, byte for byte. pf also
 * keeps the last decode array merged (and its merged text) for the next event. */
int pd_merge_logprobs_with(const pd_alloc_t *alloc, pd_merge_prefill_t *pf,
                           const char *decode, size_t dlen, char **out, size_t *out_len);

/* smg's streaming merge as written (R1.39): the chunk must be UTF-8, start with "data: ",
 * not contain "[DONE]" anywhere (smg's check is `contains`) and, after stripping leading
 * "data: " prefixes and whitespace, parse as exactly one JSON value; then the given prefill
 * logprob array (JSON text; NULL or empty: none, the chunk is only re-encoded) is prepended
 * to meta_info.input_token_logprobs and the chunk re-encoded as "data: {json}\n\n".
 * Returns 0 with *out set, PD_ERR_NOT_FOUND when the chunk does not qualify (caller forwards
 * it unchanged), PD_ERR_JSON when the prefill text is not JSON, or PD_ERR_NOMEM. Models the
 * per-chunk bug: a chunk with two events or half of one is not merged. */
int pd_merge_smg_chunk(const pd_alloc_t *alloc, const char *prefill_logprobs_json,
                       size_t plen, const char *chunk, size_t clen, char **out,
                       size_t *out_len);

#endif
