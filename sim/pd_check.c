/* The invariant checker (docs/spec.md I1-I26). Each finished request is judged from the
 * client's bytes and the workers' ground truth; the core's own word is used only for what it
 * claims (recorded outcomes, load and breaker actions), which is then held against truth.
 * Besides the records it reads only the judge context (pd_check.h), never a world. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pd_err.h"
#include "pd_worker_shared.h"

#define MS_NS 1000000ull
#define BIT(i) (1u << ((i) - 1))

/* The merged logprobs a client must see: prefill's then decode's, once (I11). */
static int logprobs_ok(const cJSON *meta) {
  const cJSON *lp = cJSON_GetObjectItemCaseSensitive(meta, "input_token_logprobs");
  if (!cJSON_IsArray(lp) || cJSON_GetArraySize(lp) != 3) return 0;
  for (int i = 0; i < 3; i++) {
    const cJSON *e = cJSON_GetArrayItem(lp, i);
    const cJSON *id = cJSON_GetArrayItem(e, 1);
    if (!cJSON_IsNumber(id) || (int)id->valuedouble != 11 + i) return 0;
  }
  return 1;
}

/* ---- a token's identity in OpenAI's shapes (mock_workers/pd_wire_openai.c) ----
 * Token k's text is "tok<k> "; SGLang's native events say "index": k instead. */

/* The token a text names, or -1 when it is not exactly "tok<k> ". */
static int64_t token_of_text(const char *t) {
  if (!t || strncmp(t, "tok", 3) != 0 || t[3] < '0' || t[3] > '9') return -1;
  char *end = NULL;
  unsigned long long k = strtoull(t + 3, &end, 10);
  return end && end[0] == ' ' && end[1] == 0 && k <= UINT32_MAX ? (int64_t)k : -1;
}

/* choices[0] of an OpenAI object, or NULL (not one: SGLang's shape). */
static const cJSON *openai_choice(const cJSON *j, int *is_openai) {
  const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "choices");
  *is_openai = cJSON_IsArray(ch);
  return *is_openai ? cJSON_GetArrayItem(ch, 0) : NULL;
}

/* The text of a choice: text (completions), delta.content or message.content (chat). */
static const char *choice_text(const cJSON *c) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text");
  if (!t) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(c, "delta");
    if (!m) m = cJSON_GetObjectItemCaseSensitive(c, "message");
    t = cJSON_GetObjectItemCaseSensitive(m, "content");
  }
  return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* An OpenAI stream chunk: one carrying no text (chat's role chunk, the usage chunk with empty
 * choices, a chunk that only says finish_reason, its delta empty) is no token; any other must
 * be the next. */
static void openai_event(pd_client_request_t *rq, const cJSON *choice) {
  const char *text = choice ? choice_text(choice) : NULL;
  if (!text || !text[0]) return;
  int64_t k = token_of_text(text);
  if (k != (int64_t)rq->next_token) rq->token_error = 1;
  else rq->next_token++;
}

/* A whole OpenAI answer: usage counts n and its text spells tok0, tok1, ... in order, every
 * one of the n unless the worker cut a long text short (then a whole token more would not
 * have fit: at least 4 KiB of text, pd_wire_openai.c). */
static int openai_body_ok(const cJSON *j, const cJSON *choice, uint32_t n) {
  const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
  const cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
  const char *t = choice ? choice_text(choice) : NULL;
  if (!cJSON_IsNumber(ct) || (uint32_t)ct->valuedouble != n || !t) return 0;
  const char *t0 = t;
  char want[24];
  uint32_t k = 0;
  for (; k < n && *t; k++) {
    int len = snprintf(want, sizeof want, "tok%u ", k);
    if (strncmp(t, want, (size_t)len) != 0) return 0;
    t += len;
  }
  return !*t && (k == n || t - t0 >= 4096);
}

/* A /generate event's findings: its index was the next token or not; whether its meta_info
 * carries input_token_logprobs (has_lp) and whether they are prefill's then decode's once
 * (is_lp_ok). I11 judges the first event and every event carrying the field. */
static void generate_event(pd_client_request_t *rq, int is_next, int has_lp, int is_lp_ok) {
  if (!is_next) rq->token_error = 1;
  else if (is_next > 0) rq->next_token++; /* < 0: a finish event that carries no token */
  if (rq->wants_logprob && (!rq->first_event_seen || has_lp)) {
    if (!is_lp_ok) rq->logprob_state = -1;
    else if (!rq->first_event_seen) rq->logprob_state = 1;
  }
  rq->first_event_seen = 1;
}

/* A rid the token object holds verbatim as a plain JSON string (printable ASCII, no quote or
 * backslash): then cJSON reads that object back as exactly the fields it was rendered from. */
static int is_plain_rid(const char *rid) {
  for (const char *c = rid; *c; c++)
    if (*c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\') return 0;
  return 1;
}

/* The client's event, if its bytes are those of the next token as the request's newest decode
 * leg rendered it (pd_wire_token_json), or that event once merged (PD_LP_MERGED): its findings
 * are known without a parse. Returns 0 (nothing judged) when the bytes differ in any way; then
 * the event is parsed (tests/test_check_bytes.c holds both readings to the same findings). */
/* The same on an OpenAI route: the client's event is one of the events the worker writes
 * for the next token (pd_wire_openai_render: chat's role chunk before the first, the token's
 * chunk, after the last SGLang's chat finish chunk and the usage chunk), SGLang's ids or
 * vLLM's. Only the token's chunk carries text ("tok<k> "); the others carry none. */
static int known_openai_event(pd_client_request_t *rq, const pd_wire_leg_t *wl,
                              const pd_sse_event_t *ev) {
  char want[2048];
  int vllm_first = (ev->len >= 12 && memcmp(ev->data, "{\"id\":\"cmpl-", 12) == 0) ||
                   (ev->len >= 16 && memcmp(ev->data, "{\"id\":\"chatcmpl-", 16) == 0);
  uint32_t k = rq->next_token;
  int chunk_at = k == 0 && wl->api->route == PD_ROUTE_CHAT; /* after the role chunk */
  for (int t = 0; t < 2; t++) {
    size_t n = pd_wire_openai_render(wl, t ^ vllm_first, PD_WIRE_TOKEN, k << 2, want, sizeof want);
    size_t at = 0;
    for (int i = 0; at + 8 <= n && i < 4; i++) { /* each "data: <object>\n\n" */
      const char *end = memchr(want + at, '\n', n - at); /* objects hold no newline */
      if (!end || memcmp(want + at, "data: ", 6) != 0) break;
      size_t len = (size_t)(end - want) - at - 6;
      if (len == ev->len && memcmp(want + at + 6, ev->data, len) == 0) {
        if (i == chunk_at) rq->next_token++;
        rq->first_event_seen = 1;
        rq->known_events++;
        return 1;
      }
      at += 6 + len + 2;
    }
  }
  return 0;
}

static int known_event(pd_client_request_t *rq, const pd_sse_event_t *ev) {
  const pd_worker_leg_t *d = rq->legs;
  while (d && d->role != PD_ROLE_DECODE) d = d->next_in_req; /* newest first */
  if (rq->is_parse_only || !d || !is_plain_rid(d->rid)) return 0;
  pd_wire_leg_t wl = {d->rid, d->is_stream, d->has_logprob, d->tokens, &d->api};
  if (d->api.route != PD_ROUTE_GENERATE) return known_openai_event(rq, &wl, ev);
  char want[256];
  size_t n = pd_wire_token_json(&wl, rq->next_token, d->has_logprob ? PD_LP_DECODE : NULL, want,
                                sizeof want);
  if (n && n == ev->len && memcmp(want, ev->data, n) == 0) {
    generate_event(rq, 1, d->has_logprob, 0); /* one element: decode's alone */
    rq->known_events++;
    return 1;
  }
  if (!d->has_logprob) return 0;
  n = pd_wire_token_json(&wl, rq->next_token, PD_LP_MERGED, want, sizeof want);
  if (!n || n != ev->len || memcmp(want, ev->data, n) != 0) return 0;
  generate_event(rq, 1, 1, 1);
  rq->known_events++;
  return 1;
}

/* A /generate event that ends the output without a token (SGLang's one output for a request
 * of 0 tokens, R-ZERO-TOKENS): no index, empty text, a finish_reason, and completion_tokens
 * 0, for a request that asked for 0 tokens, once. Anything else without an index (prefill's
 * own answer forwarded, a second end) is a token error. */
static int is_finish_only(const pd_client_request_t *rq, const cJSON *j, const cJSON *mi) {
  if (rq->tokens != 0 || rq->saw_finish_only) return 0;
  uint32_t have = 0;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "text");
  const cJSON *ct = mi ? cJSON_GetObjectItemCaseSensitive(mi, "completion_tokens") : NULL;
  return cJSON_IsString(t) && t->valuestring[0] == '\0' && cJSON_IsNumber(ct) &&
         ct->valuedouble == (double)have &&
         cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(mi, "finish_reason"));
}

/* An event's data must be one JSON value and nothing after it but white space: cJSON alone
 * stops at the end of the first value and would read `{...}junk` as `{...}`, which no
 * client's parser accepts (a token error, I6). */
static cJSON *parse_whole(const char *p, size_t len) {
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(p, len, &end, 0);
  if (!j) return NULL;
  size_t at = end >= p && end <= p + len ? (size_t)(end - p) : len;
  while (at < len && (p[at] == ' ' || p[at] == '\t' || p[at] == '\r' || p[at] == '\n')) at++;
  if (at == len) return j;
  cJSON_Delete(j);
  return NULL;
}

static void client_event(pd_client_request_t *rq, const pd_sse_event_t *ev) {
  if (rq->saw_done) {
    rq->events_after_done = 1;
    return;
  }
  if (ev->kind == PD_SSE_DONE) {
    rq->saw_done = 1;
    return;
  }
  if (ev->kind == PD_SSE_ERROR) {
    rq->saw_error_event = 1;
    return;
  }
  if (known_event(rq, ev)) return;
  cJSON *j = parse_whole(ev->data, ev->len);
  int is_openai = 0;
  const cJSON *choice = openai_choice(j, &is_openai);
  if (is_openai) { /* I11 is judged on /generate only */
    openai_event(rq, choice);
    rq->first_event_seen = 1;
    cJSON_Delete(j);
    return;
  }
  const cJSON *idx = j ? cJSON_GetObjectItemCaseSensitive(j, "index") : NULL;
  const cJSON *mi = j ? cJSON_GetObjectItemCaseSensitive(j, "meta_info") : NULL;
  int has_lp = mi && cJSON_GetObjectItemCaseSensitive(mi, "input_token_logprobs");
  int is_next = cJSON_IsNumber(idx) && (uint32_t)idx->valuedouble == rq->next_token;
  if (!idx && is_finish_only(rq, j, mi)) {
    is_next = -1;
    rq->saw_finish_only = 1;
  }
  generate_event(rq, is_next, has_lp, logprobs_ok(mi));
  cJSON_Delete(j);
}

/* A stream is read by the request's `stream` flag when the head says 2xx, whatever its media
 * type (vLLM's toy and Mooncake proxies serve streams as application/json, V1.24-V1.25); an
 * error head's body is an SSE stream only when it says so. */
static int reads_as_sse(const pd_client_request_t *rq) {
  int ok = rq->head_status >= 200 && rq->head_status < 300;
  return rq->is_sse_head || (rq->is_stream && ok);
}

int pd_check_client_data(pd_client_request_t *rq, const uint8_t *p, size_t len) {
  if (!reads_as_sse(rq)) { /* a JSON body: keep it whole */
    if (rq->is_record_lost) return PD_ERR_NOMEM;
    int rc = pd_buf_append(NULL, &rq->body, p, len);
    if (rc) rq->is_record_lost = 1; /* out of memory, or past PD_WORLD_MAX_BODY_BYTES */
    return rc;
  }
  if (pd_sse_feed(&rq->sse, p, len)) { /* over the framer's limit: reported as I6 */
    rq->token_error = 1;
    return 0;
  }
  pd_sse_event_t ev;
  for (uint32_t guard = 0; guard < 1u << 20 && pd_sse_next(&rq->sse, &ev) == 1; guard++)
    client_event(rq, &ev);
  return 0;
}

/* A non-stream body: complete JSON with every token and (if asked) merged logprobs. */
static int body_clean(pd_client_request_t *rq) {
  cJSON *j = cJSON_ParseWithLength((const char *)rq->body.p, rq->body.len);
  int ok = 0;
  int is_openai = 0;
  const cJSON *choice = openai_choice(j, &is_openai);
  if (j && is_openai && !cJSON_GetObjectItemCaseSensitive(j, "error")) {
    ok = openai_body_ok(j, choice, rq->tokens);
    if (ok) rq->next_token = rq->tokens;
  } else if (j && !cJSON_GetObjectItemCaseSensitive(j, "error")) {
    const cJSON *mi = cJSON_GetObjectItemCaseSensitive(j, "meta_info");
    const cJSON *ct = mi ? cJSON_GetObjectItemCaseSensitive(mi, "completion_tokens") : NULL;
    ok = cJSON_IsNumber(ct) && (uint32_t)ct->valuedouble == rq->tokens;
    if (ok) rq->next_token = rq->tokens;
    if (rq->wants_logprob) rq->logprob_state = mi && logprobs_ok(mi) ? 1 : -1;
  }
  cJSON_Delete(j);
  return ok;
}

/* Does the client believe it got a complete, clean generation? */
static int looks_clean(pd_client_request_t *rq) {
  if (!rq->ended || rq->aborted || rq->head_status < 200 || rq->head_status >= 300) return 0;
  if (!rq->is_stream) return body_clean(rq);
  return rq->saw_done && !rq->saw_error_event;
}

/* I4: which recorded outcomes agree with what the worker really did. `cancelled` is neutral
 * and claims nothing about the worker, unless the worker's failure had reached the gateway
 * by the instant it closed the leg: then it hides a real failure (R-OUTCOME). */
static int outcome_agrees(const pd_worker_leg_t *l) {
  pd_truth_t t = l->truth;
  pd_outcome_t o = l->outcome;
  if (o == PD_OUTCOME_CANCELLED) return !l->is_failed_at_close;
  /* a cut path (net_reset, response_lost): the gateway saw a reset or silence, which it
     cannot tell from the worker's own failure or stall */
  if (l->is_path_fault && (o == PD_OUTCOME_FAILURE || o == PD_OUTCOME_TIMEOUT)) return 1;
  switch (t) {
  case PD_TRUTH_OK: return o == PD_OUTCOME_SUCCESS;
  case PD_TRUTH_FAILED:
  case PD_TRUTH_NEVER: return o == PD_OUTCOME_FAILURE || o == PD_OUTCOME_TIMEOUT;
  case PD_TRUTH_STALLED:
  case PD_TRUTH_PENDING:
    return o == PD_OUTCOME_TIMEOUT || o == PD_OUTCOME_FAILURE || o == PD_OUTCOME_CANCELLED;
  case PD_TRUTH_CANCELLED: return o == PD_OUTCOME_CANCELLED || o == PD_OUTCOME_SUCCESS;
  }
  assert(!"a leg's truth outside pd_truth_t");
  return 0;
}

/* Closed at the gateway / slot freed: flags first, so a time of 0 (net_us 0) counts as a time.
 * A record built from a socket run's logs may carry only the time (never 0 there). */
static int leg_closed(const pd_worker_leg_t *l) { return !l->gw_open; }
static int slot_freed(const pd_worker_leg_t *l) { return l->is_slot_freed || l->t_slot_freed != 0; }
/* I3, I18: was a resource held at some instant past `limit` (the client's end + grace)? One
 * still held is; one freed is when its release came after the limit and after its taking: a
 * request that reached its worker only after the limit (a slow wire, the abort ahead of it,
 * Q7) and was dropped in the instant it was taken held nothing past it. */
static int held_past(uint64_t t_freed, int is_held, uint64_t t_taken, uint64_t limit) {
  if (is_held) return 1;
  return t_freed > limit && t_freed > t_taken;
}

static uint64_t closed_at(const pd_judge_t *j, const pd_worker_leg_t *l) {
  return leg_closed(l) ? l->t_gw_closed : j->now;
}

/* The name of scenario worker `worker` (a leg's worker is always one of them). */
static const char *worker_name(const pd_judge_t *j, uint32_t worker) {
  assert(worker < j->s->n_workers);
  return j->s->workers[worker].name;
}

#define FLAG(inv, ...)                                             \
  do {                                                             \
    if (!(v & BIT(inv)) && !*reason) snprintf(reason, cap, __VA_ARGS__); \
    v |= BIT(inv);                                                 \
  } while (0)

static uint64_t room_at(const pd_worker_leg_t *l, int i) {
  return l->rooms ? l->rooms[i] : l->room;
}

/* Does leg o carry room r (any of its rooms)? */
static int has_room(const pd_worker_leg_t *o, uint64_t r) {
  for (int i = 0; i < o->n_rooms; i++)
    if (room_at(o, i) == r) return 1;
  return 0;
}

/* The number of rooms a worker needs for this request: SGLang splits a `text` or `prompt` array
 * of n >= 2 into n requests and indexes the bootstrap fields per item (io_struct
 * GenerateReqInput.__getitem__); a scalar room is either an error there or, in the versions that
 * normalise it, copied to every item (one room shared by n requests). So an array of n rooms.
 * 0: not judged (not a batch, or chat `n`, whose normalisation differs between SGLang versions). */
static int rooms_needed(const pd_scenario_workload_t *wl) {
  if (wl->batch < 2 || wl->route == PD_ROUTE_CHAT) return 0;
  return wl->route == PD_ROUTE_GENERATE || wl->route == PD_ROUTE_COMPLETIONS ? (int)wl->batch : 0;
}

/* I8: both legs of an attempt carry the same bootstrap data and rid; a batch of n carries n
 * distinct rooms; no room is reused by another attempt of the request. */
static uint32_t check_rooms(const pd_judge_t *j, pd_client_request_t *rq, char *reason,
                            size_t cap) {
  uint32_t v = 0;
  int need = rooms_needed(&j->s->workload);
  for (pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    for (pd_worker_leg_t *o = l->next_in_req; o; o = o->next_in_req) {
      if (o->attempt != l->attempt || o->role == l->role) continue;
      if (o->rooms_hash != l->rooms_hash || o->has_rid != l->has_rid ||
          (l->has_rid && strcmp(o->rid, l->rid) != 0))
        FLAG(PD_INVARIANT_ROOMS, "I8 attempt %u legs disagree on bootstrap room or rid",
             l->attempt);
    }
    if (need && l->n_rooms && (l->is_room_scalar || l->n_rooms != need))
      FLAG(PD_INVARIANT_ROOMS, "I8 a batch of %d sent %s %d room%s to %s", need,
           l->is_room_scalar ? "a scalar:" : "an array of", l->n_rooms, l->n_rooms == 1 ? "" : "s",
           worker_name(j, l->worker));
    for (int i = 0; i < l->n_rooms; i++) {
      uint64_t r = room_at(l, i);
      for (int k = i + 1; k < l->n_rooms; k++)
        if (room_at(l, k) == r)
          FLAG(PD_INVARIANT_ROOMS, "I8 batch items %d and %d share room %llu", i, k,
               (unsigned long long)r);
      for (pd_worker_leg_t *o = l->next_in_req; o; o = o->next_in_req)
        if (o->attempt != l->attempt && has_room(o, r))
          FLAG(PD_INVARIANT_ROOMS, "I8 attempts %u and %u reuse room %llu", o->attempt, l->attempt,
               (unsigned long long)r);
    }
  }
  return v;
}

/* R-ABORT-COMMITTED (I2, I3, I18): a prefill declared abort_after_commit_ignored frees its
 * committed KV only when a receiver collected it or at its transfer timeout. When it sent
 * released: the later of its KV's and its slot's release (now while either is held). */
static uint64_t sender_free_at(const pd_judge_t *j, const pd_worker_leg_t *p) {
  uint64_t kv = p->kv_pages ? j->now : p->t_kv_freed;
  uint64_t slot = !p->slot_taken ? 0 : slot_freed(p) ? p->t_slot_freed : j->now;
  return kv > slot ? kv : slot;
}

/* The attempt's prefill leg on such a worker that still held KV when the client's end came
 * (the transfer may have committed), or NULL. */
static const pd_worker_leg_t *committed_sender(const pd_judge_t *j, const pd_client_request_t *rq,
                                               uint32_t attempt, uint64_t t_end) {
  for (const pd_worker_leg_t *p = rq->legs; p; p = p->next_in_req)
    if (p->attempt == attempt && p->role == PD_ROLE_PREFILL &&
        j->s->workers[p->worker].abort_after_commit_ignored != 0 && p->kv_pages_max &&
        p->t_kv_taken <= t_end && (p->kv_pages || p->t_kv_freed > t_end))
      return p;
  return NULL;
}

/* Capacity such a sender held past the client's end is the gateway's fault only when the
 * gateway orphaned the transfer: it closed the attempt's decode leg (the receiver) before the
 * sender let go. A receiver kept open until then excuses the hold (the worker's own pace). */
static int sender_excused(const pd_judge_t *j, const pd_client_request_t *rq,
                          const pd_worker_leg_t *l, uint64_t t_end) {
  if (committed_sender(j, rq, l->attempt, t_end) != l) return 0;
  uint64_t freed = sender_free_at(j, l);
  for (const pd_worker_leg_t *d = rq->legs; d; d = d->next_in_req)
    if (d->attempt == l->attempt && d->role == PD_ROLE_DECODE &&
        (!leg_closed(d) || d->t_gw_closed >= freed))
      return 1;
  return 0;
}

/* I18 (I3 for KV pages): a leg that held KV pages has freed them all no later than
 * t_end + grace; one that never held any is not judged (a record from logs, a worker without
 * capacity). */
static uint32_t check_kv(const pd_judge_t *j, const pd_client_request_t *rq, uint64_t t_end,
                         char *reason, size_t cap) {
  uint32_t v = 0;
  uint64_t grace = j->s->config.grace_ms * MS_NS;
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    if (!l->kv_pages_max || !held_past(l->t_kv_freed, l->kv_pages != 0, l->t_kv_taken,
                                       t_end + grace) || sender_excused(j, rq, l, t_end))
      continue;
    if (l->kv_pages && j->is_kv_deferred && j->now <= t_end + grace) continue; /* not yet known */
    uint64_t until = l->kv_pages ? j->now : l->t_kv_freed;
    FLAG(PD_INVARIANT_STRANDED_KV, "I18 %llu KV pages of a %s leg on %s %s %.1f ms after the "
         "client's end", (unsigned long long)(l->kv_pages ? l->kv_pages : l->kv_pages_max),
         pd_role_name(l->role), worker_name(j, l->worker),
         l->kv_pages ? "still held when judged" : "held",
         (double)(until > t_end ? until - t_end : 0) / 1e6);
  }
  return v;
}

/* I2's bound after the client's end: the mode's own promise when it has one (pd_judge_t),
 * else the grace. */
static uint64_t close_bound_ns(const pd_judge_t *j, const pd_client_request_t *rq) {
  uint64_t grace = j->s->config.grace_ms * MS_NS;
  if (!j->is_cancel_bound) return grace;
  uint64_t b = rq->gone ? j->cancel_gone_ns : j->cancel_end_ns;
  return b < grace && (rq->gone || b) ? b : grace; /* no tail (0): the grace */
}

static uint32_t check_legs(const pd_judge_t *j, pd_client_request_t *rq, uint64_t t_end,
                           char *reason, size_t cap) {
  uint32_t v = 0;
  uint64_t grace = j->s->config.grace_ms * MS_NS, bound = close_bound_ns(j, rq);
  for (pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    const char *wn = worker_name(j, l->worker);
    /* R-ABORT-COMMITTED: legs kept to collect a committed transfer from a sender that ignores
       aborts may stay open until it let go, then the grace */
    const pd_worker_leg_t *snd = rq->gone ? committed_sender(j, rq, l->attempt, t_end) : NULL;
    uint64_t from = snd && sender_free_at(j, snd) > t_end ? sender_free_at(j, snd) : t_end;
    uint64_t lb = snd ? grace : bound;
    if (!leg_closed(l) || l->t_gw_closed > from + lb)
      FLAG(PD_INVARIANT_ORPHAN_LEG, "I2 %s leg to %s open %.1f ms after the client's end%s",
           pd_role_name(l->role), wn, (double)(closed_at(j, l) - t_end) / 1e6,
           bound == grace ? "" : rq->gone ? " (the mode cancels at once)"
                                          : " (past the mode's tail)");
    if (l->slot_taken && held_past(slot_freed(l) ? l->t_slot_freed : j->now, !slot_freed(l),
                                   l->t_slot_taken, t_end + grace) &&
        !sender_excused(j, rq, l, t_end))
      FLAG(PD_INVARIANT_STRANDED_SLOT, "I3 %s slot on %s held %.1f ms after the client's end",
           pd_role_name(l->role), wn,
           (double)((slot_freed(l) ? l->t_slot_freed : j->now) - t_end) / 1e6);
    if (l->outcomes > 1)
      FLAG(PD_INVARIANT_OUTCOME, "I4 %s got %d outcomes for one leg", wn, l->outcomes);
    /* Q10: the reference records an outcome for every leg it opened (R-OUTCOME); the
       upstream models keep their own gaps (minilb records none) */
    if (!l->outcomes && j->mode == PD_MODE_REFERENCE && !j->is_outcome_blind)
      FLAG(PD_INVARIANT_OUTCOME, "I4 %s: no outcome recorded for its %s leg", wn,
           pd_role_name(l->role));
    /* R-OUTCOME: the reference blames a worker for its own leg only; one that merely waited
       on its partner (worker truth at the instant the outcome was recorded) is not to blame */
    if (l->is_partner_blamed && j->mode == PD_MODE_REFERENCE)
      FLAG(PD_INVARIANT_OUTCOME, "I4 %s recorded %s for its %s leg, which only waited on its "
           "partner", wn, pd_outcome_name(l->outcome), pd_role_name(l->role));
    if (l->outcomes && !outcome_agrees(l))
      FLAG(PD_INVARIANT_OUTCOME, "I4 %s recorded %s but really %s", wn, pd_outcome_name(l->outcome),
           l->is_failed_at_close && l->outcome == PD_OUTCOME_CANCELLED
               ? "had failed when the gateway closed it"
           : l->truth == PD_TRUTH_OK ? "succeeded" : l->truth == PD_TRUTH_FAILED ? "failed"
           : l->truth == PD_TRUTH_CANCELLED ? "was cancelled while healthy" : "stalled");
  }
  return v | check_rooms(j, rq, reason, cap) | check_kv(j, rq, t_end, reason, cap);
}

/* I9/I10: every load acquired is released exactly once, and no later than the worker's own
 * part of the request ended (plus grace). */
static uint32_t check_loads(const pd_judge_t *j, pd_client_request_t *rq, char *reason,
                            size_t cap) {
  uint32_t v = 0;
  uint64_t grace = j->s->config.grace_ms * MS_NS;
  if (rq->load_neg) FLAG(PD_INVARIANT_LOAD_BALANCE, "I9 a load was released twice");
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 8; i++) {
      if (!rq->load_w[r][i]) continue;
      if (rq->load_bal[r][i] != 0)
        FLAG(PD_INVARIANT_LOAD_BALANCE, "I9 %s load never released", pd_role_name((pd_role_t)r));
      uint64_t worker_end = 0;
      for (pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req)
        if ((int)l->role == r && l->role_index + 1 == rq->load_w[r][i]) {
          uint64_t e = closed_at(j, l);
          if (e > worker_end) worker_end = e;
        }
      if (rq->load_t_rel[r][i] > worker_end + grace)
        FLAG(PD_INVARIANT_LOAD_TRUTH, "I10 %s load held %.1f ms after its leg ended",
             pd_role_name((pd_role_t)r), (double)(rq->load_t_rel[r][i] - worker_end) / 1e6);
    }
  return v;
}

/* Did the worker fail this leg, as far as the gateway could know? Its failure report (error
 * status, error event, transport error, truncated end; a refusal) reached the gateway no later
 * than the gateway closed the leg (`is_failed_at_close`, the same test as I4's), and the
 * failure was the worker's own: an injected fault that took effect (not one still waiting when
 * its partner's failure ended the leg), a refusal, a crash. Or it hung (or dripped) by itself
 * when the gateway cut it — whatever outcome the gateway recorded — unless a partner leg of the
 * attempt had failed to the gateway first: then it had shown the gateway nothing yet. */
static int worker_failed(const pd_client_request_t *rq, const pd_worker_leg_t *l) {
  if (l->is_path_fault) /* its path, not the worker, failed: as the gateway saw it */
    return l->is_failed_at_close ||
           (l->outcomes && (l->outcome == PD_OUTCOME_FAILURE || l->outcome == PD_OUTCOME_TIMEOUT));
  if (l->truth == PD_TRUTH_STALLED) { /* worker truth, not the outcome the gateway recorded */
    if (!l->is_own_stall) return 0;
    /* a partner: a leg of its attempt, or one the gateway closed while this one was open (a
       drain leg outlives its attempt, R-SF-KV-DRAIN, and is cut when a later one fails) */
    for (const pd_worker_leg_t *o = rq->legs; o; o = o->next_in_req)
      if (o != l && (o->attempt == l->attempt || o->t_gw_closed >= l->t_open) &&
          o->is_failed_at_close && leg_closed(o) && leg_closed(l) &&
          o->t_gw_closed <= l->t_gw_closed &&
          (o->truth == PD_TRUTH_NEVER ||
           (o->truth == PD_TRUTH_FAILED && (o->is_fault_fired || o->is_crash_hit))))
        return 0; /* its partner failed first, by its own fault: it had shown nothing yet */
    return 1;
  }
  if (!l->is_failed_at_close) return 0;
  if (l->truth == PD_TRUTH_NEVER) return 1;
  return l->truth == PD_TRUTH_FAILED && (l->is_fault_fired || l->is_crash_hit);
}

/* Did the request have a leg to worker `node` of this role before attempt `before`? With
 * failed_only: one that failed it, as the gateway knew by `t_open` (the retry leg's opening):
 * closed by then. A leg of an earlier attempt can outlive it (R-SF-KV-DRAIN's drain leg is no
 * attempt of its own and runs on beside the retry): its failure, found later, was nothing the
 * retry's choice could know. */
static const pd_worker_leg_t *tried(const pd_client_request_t *rq, pd_role_t role, uint32_t node,
                                    uint32_t before, int failed_only, uint64_t t_open) {
  for (const pd_worker_leg_t *e = rq->legs; e; e = e->next_in_req)
    if (e->role == role && e->worker == node && e->attempt < before &&
        (!failed_only || (leg_closed(e) && e->t_gw_closed <= t_open && worker_failed(rq, e))))
      return e;
  return NULL;
}

/* Did an earlier leg of l's own attempt go to worker `node` of l's role? A leg that is no
 * attempt of its own (R-SF-KV-DRAIN's drain, opened when the attempt's decode failed its
 * read) carries that attempt's number; the decode that just failed is no untried worker for
 * it. */
static int tried_in_attempt(const pd_client_request_t *rq, const pd_worker_leg_t *l,
                            uint32_t node) {
  for (const pd_worker_leg_t *e = rq->legs; e; e = e->next_in_req)
    if (e != l && e->role == l->role && e->worker == node && e->attempt == l->attempt &&
        e->t_open <= l->t_open)
      return 1;
  return 0;
}

/* I16 (G15): a retry leg goes to a worker that failed this request in an earlier attempt
 * while a worker of that role the request had not tried was eligible (breaker Closed, as the
 * core reported it, when the leg was opened). */
static uint32_t check_retry_target(const pd_judge_t *j, pd_client_request_t *rq, char *reason,
                                   size_t cap) {
  uint32_t v = 0;
  for (pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    if (l->attempt < 2 || !l->has_eligible ||
        !tried(rq, l->role, l->worker, l->attempt, 1, l->t_open))
      continue;
    for (uint32_t k = 0; k < j->s->n_workers && k < 64; k++) {
      if (!(l->eligible_nodes >> k & 1u) || tried(rq, l->role, k, l->attempt, 0, l->t_open) ||
          tried_in_attempt(rq, l, k))
        continue;
      FLAG(PD_INVARIANT_RETRY_FAILED,
           "I16 attempt %u went back to %s, which failed it, while %s was untried", l->attempt,
           worker_name(j, l->worker), worker_name(j, k));
      break;
    }
  }
  return v;
}

/* I15: a request the workload expects to succeed (its client stays) got a clean answer
 * whenever every worker was healthy: none down and every breaker Closed from arrival to end
 * (one the scenario started open or half-open is not), and no fault, slowness or crash on any
 * leg of it, no worker refused it with a status (a prompt larger than its pool,
 * R-CAP-TOO-LARGE: the request cannot succeed), no worker failed it by its own timeout
 * while its partner waited for capacity (is_capacity_failed), no decode's read failed on params
 * naming no prefill node (is_kv_unknown). A 503 or 504 is also excused
 * when the request waited (no leg of it running on a worker) while a role was fault-blocked:
 * no place free on that role's up workers, one held by a leg with a fault, lag or drip
 * (is_waited_behind_fault, pd_world_worker.c): the deadline or queue it ran out was spent
 * behind the fault. */
int pd_check_has_bytes(const pd_buf_t *b, const char *needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; b->len >= n && i + n <= b->len; i++)
    if (memcmp(b->p + i, needle, n) == 0) return 1;
  return 0;
}

static uint32_t check_served(const pd_client_request_t *rq, int clean, char *reason, size_t cap) {
  uint32_t v = 0;
  if (clean || rq->gone || !rq->was_healthy) return 0;
  if (rq->is_waited_behind_fault && (rq->head_status == 503 || rq->head_status == 504))
    return 0; /* its wait behind a faulted leg ran out a deadline or a queue: not a gateway's */
  if (rq->head_status == 503 && rq->is_shed_at_capacity && pd_check_has_bytes(&rq->body, "\"code\":\"admission_"))
    return 0; /* shed by admission while a role was full (worker truth, R-ADMIT-SHED) */
  int legs = 0, reached = 0;
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    if (l->fault >= 0 || l->lag_ms || l->drip_ms || l->is_crash_hit || l->injected_status ||
        l->is_capacity_failed || l->is_kv_unknown)
      return 0;
    legs++;
    reached += l->truth != PD_TRUTH_NEVER;
  }
  if (!reached)
    FLAG(PD_INVARIANT_SERVED, "I15 status %d, %s, while every worker was healthy", rq->head_status,
         legs ? "no leg reached a worker" : "no leg was sent");
  else
    FLAG(PD_INVARIANT_SERVED, "I15 status %d and no clean answer while every worker was healthy",
         rq->head_status);
  return v;
}

/* I5, I6, I7: a clean answer carries every token once and in order, no attempt follows the
 * first byte to the client, and the mode's attempt limit holds. */
static uint32_t check_tokens(const pd_judge_t *j, const pd_client_request_t *rq, int clean,
                             char *reason, size_t cap) {
  uint32_t v = 0;
  int decode_ok = 0;
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req)
    if (l->role == PD_ROLE_DECODE && l->truth == PD_TRUTH_OK) decode_ok = 1;
  if (clean && (!decode_ok || rq->next_token != rq->tokens))
    FLAG(PD_INVARIANT_FALSE_SUCCESS, "I5 clean 200 with %u of %u tokens, decode %s", rq->next_token,
         rq->tokens, decode_ok ? "ok" : "failed");
  if (rq->retry_after_commit)
    FLAG(PD_INVARIANT_COMMIT, "I6 a new attempt after bytes reached the client");
  if (rq->token_error || rq->events_after_done)
    FLAG(PD_INVARIANT_COMMIT, "I6 duplicated, lost or reordered tokens");
  if (rq->attempts > j->max_attempts)
    FLAG(PD_INVARIANT_ATTEMPTS, "I7 %u attempts > %u", rq->attempts, j->max_attempts);
  return v;
}

/* I14: a request that ended without a clean answer (its client stayed) shows the client a
 * failure: an SSE error event in a 200 stream, the worker's own status when the last attempt
 * has exactly one that reached the gateway before it closed the leg. */
static uint32_t check_error_visible(const pd_judge_t *j, const pd_client_request_t *rq,
                                    char *reason, size_t cap) {
  uint32_t v = 0;
  int ok2xx = rq->head_status >= 200 && rq->head_status < 300;
  if (ok2xx && rq->is_stream && !rq->saw_error_event)
    FLAG(PD_INVARIANT_ERROR_VISIBLE, "I14 a failed 200 stream ended without an SSE error event");
  if (ok2xx || !rq->head_status) return v;
  int want = 0, ambiguous = 0;
  uint32_t last = 0;
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req)
    if (l->attempt > last) last = l->attempt;
  for (const pd_worker_leg_t *l = rq->legs; l; l = l->next_in_req) {
    if (l->attempt != last) continue;
    /* a status the gateway never saw: it had closed the leg before the request even reached
     * the worker (a deadline that gave up on the attempt in the instant it started), so its
     * answer cannot carry it */
    if (l->injected_status && j->is_close_order_known && !l->gw_open &&
        l->t_gw_closed < l->t_open_arrive)
      continue;
    if (!l->injected_status) { /* failed without a status of its own: ambiguous */
      if (l->truth == PD_TRUTH_FAILED || l->truth == PD_TRUTH_NEVER) ambiguous = 1;
      continue;
    }
    if (want && want != l->injected_status) ambiguous = 1;
    want = l->injected_status;
  }
  if (want && !ambiguous && want != rq->head_status)
    FLAG(PD_INVARIANT_ERROR_VISIBLE, "I14 worker said %d, client got %d", want, rq->head_status);
  return v;
}

/* The run's counts: how the client's request ended, and a clean stream's TTFT. */
static void tally(pd_world_stats_t *st, const pd_client_request_t *rq, int clean) {
  if (clean && rq->is_stream && (rq->has_first_data || rq->t_first_data)) {
    uint64_t ttft = rq->t_first_data - rq->t_arrival; /* a clean stream's first bytes are SSE */
    st->ttft_sum_ns += ttft;
    st->ttft_n++;
    if (ttft > st->ttft_max_ns) st->ttft_max_ns = ttft;
  }
  if (clean) st->clean_success++;
  else if (rq->gone) st->aborted++;
  else st->client_errors++;
}

uint32_t pd_check_request(pd_judge_t *j, pd_client_request_t *rq, char *reason, size_t cap) {
  assert(j->s && j->stats && j->max_attempts >= 1);
  uint32_t v = 0;
  const pd_scenario_config_t *c = &j->s->config;
  *reason = 0;
  if (rq->is_record_lost) j->stats->records_lost++;
  int terminated = rq->ended || rq->gone;
  uint64_t t_end = terminated ? rq->t_end : j->now;
  if (!terminated || t_end > rq->t_arrival + c->deadline_ms * MS_NS)
    FLAG(PD_INVARIANT_TERMINATION, "I1 no end within %llu ms (%s after %.1f ms)",
         (unsigned long long)c->deadline_ms, terminated ? "ended" : "still open",
         (double)(t_end - rq->t_arrival) / 1e6);
  if (!terminated) { /* cut off by the run's horizon: the end-relative checks (I2, I3, I9, I10,
                       I14) have no end to measure from; only I1 and I12 stand */
    v |= rq->violations & BIT(PD_INVARIANT_BREAKER);
    return v;
  }
  v |= check_legs(j, rq, t_end, reason, cap);
  v |= pd_check_freed_blocks(j, rq, reason, cap); /* I19, pd_check_sf.c */
  v |= pd_check_disaggregated(j, rq, reason, cap); /* I20, pd_check_sf.c */
  v |= pd_check_pair_group(j, rq, reason, cap);      /* I21, pd_check_topo.c */
  v |= pd_check_rank_agreement(j, rq, reason, cap);  /* I22, pd_check_topo.c */
  v |= pd_check_queue_deadline(j, rq, reason, cap);  /* I24, pd_check_goodput.c */
  int clean = !rq->gone && looks_clean(rq);
  v |= check_tokens(j, rq, clean, reason, cap);
  v |= check_loads(j, rq, reason, cap);
  v |= check_retry_target(j, rq, reason, cap);
  /* I11 judges SGLang's native route only: on the OpenAI routes `logprobs` asks for the
     output's logprobs, which decode alone produces, so there is nothing of prefill's to merge
     and mini_lb rightly merges nothing there (M8.3) */
  if (clean && rq->wants_logprob && j->s->workload.route == PD_ROUTE_GENERATE &&
      rq->logprob_state != 1)
    FLAG(PD_INVARIANT_LOGPROBS, "I11 input_token_logprobs not prefill++decode exactly once");
  v |= rq->violations & BIT(PD_INVARIANT_BREAKER);
  if ((rq->violations & BIT(PD_INVARIANT_BREAKER)) && !*reason)
  {
    if (rq->is_breaker_unjust)
      snprintf(reason, cap, "I12 %s's breaker opened without cause: too few failures of its own "
               "(worker truth) for the breaker's rule", worker_name(j, (uint32_t)rq->is_breaker_unjust - 1));
    else
      snprintf(reason, cap, "I12 a request went to a worker whose breaker was open or probing");
  }
  if (!rq->gone && !clean) v |= check_error_visible(j, rq, reason, cap);
  v |= check_served(rq, clean, reason, cap);
  rq->is_clean = clean;
  tally(j->stats, rq, clean);
  return v;
}
