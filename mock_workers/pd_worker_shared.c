/* Fault selection and wire rendering shared by the simulator's worker model and the
 * real-socket mock (see pd_worker_shared.h). Moved here unchanged from pd_worker_model.c. */
#include "pd_worker_shared.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "pd_hash.h"

/* ---------- fault selection ---------- */

static int fault_matches(pd_prng_t *rng, const pd_fault_t *f, uint32_t nth) {
  if (f->nth_from && (nth < f->nth_from || nth > f->nth_to)) return 0;
  if (f->prob >= 1.0) return 1;
  return pd_prng_unit(rng) < f->prob;
}

/* Swarm-style random fault for load scenarios (workload.fault_rate). */
static const pd_fault_t random_faults[] = {
    {PD_FAULT_STATUS, 503, 0, 0, 0, 0, 1.0},       {PD_FAULT_STATUS, 500, 0, 0, 0, 0, 1.0},
    {PD_FAULT_RESET_BEFORE_HEAD, 0, 0, 0, 0, 0, 1.0}, {PD_FAULT_RESET_MID_STREAM, 0, 2, 0, 0, 0, 1.0},
    {PD_FAULT_SSE_ERROR, 0, 1, 0, 0, 0, 1.0},      {PD_FAULT_TRUNCATE, 0, 3, 0, 0, 0, 1.0},
    {PD_FAULT_HANG_BEFORE_HEAD, 0, 0, 0, 0, 0, 1.0}, {PD_FAULT_HANG_MID_STREAM, 0, 2, 0, 0, 0, 1.0},
    {PD_FAULT_KV_FAIL, 0, 0, 0, 0, 0, 1.0},        {PD_FAULT_PREFILL_LAG, 0, 0, 150, 0, 0, 1.0},
    {PD_FAULT_SLOW_DRIP, 0, 0, 40, 0, 0, 1.0},     {PD_FAULT_STATUS, 429, 0, 0, 0, 0, 1.0},
};

int pd_worker_status_is_healthy(int status) {
  return status < 500 && status != 408 && status != 429;
}

int pd_worker_status_is_deferred(const pd_fault_t *fp, int is_decode, int is_stream) {
  return fp && fp->kind == PD_FAULT_STATUS && fp->after_tokens > 0 && is_decode && !is_stream;
}

static void apply(const pd_fault_t *f, pd_fault_choice_t *out) {
  if (f->kind == PD_FAULT_PREFILL_LAG) out->lag_ms = f->ms;
  else if (f->kind == PD_FAULT_SLOW_DRIP) out->drip_ms = f->ms;
  else if (out->fault < 0) { out->fault = (int)f->kind; out->fp = f; }
}

/* Does traffic fault i strike this leg? A leg in its range claims a sticky fault's worker
 * (the first to get there keeps it); a later leg on that worker strikes too. */
static int traffic_matches(const pd_traffic_view_t *t, uint32_t i) {
  const pd_traffic_fault_t *tf = &t->tf[i];
  if (tf->role != t->role || t->request == PD_TRAFFIC_FAULT_ANY) return 0;
  if (tf->request != PD_TRAFFIC_FAULT_ANY && tf->request != t->request) return 0;
  uint32_t me = t->worker + 1u, none = 0;
  if (t->leg_no >= tf->f.nth_from && t->leg_no <= tf->f.nth_to) {
    if (tf->is_sticky) atomic_compare_exchange_strong(&t->owner[i], &none, me);
    return 1;
  }
  return tf->is_sticky && atomic_load(&t->owner[i]) == me;
}

int pd_worker_pick_fault(const pd_scenario_worker_t *spec, uint32_t nth, double fault_rate,
                   const pd_traffic_view_t *t, pd_prng_t *rng, pd_fault_choice_t *out) {
  int fired = -1;
  out->fault = -1;
  for (uint32_t i = 0; t && i < t->n_tf; i++) {
    if (!traffic_matches(t, i)) continue;
    apply(&t->tf[i].f, out);
    if (fired < 0) fired = (int)i;
  }
  for (uint32_t i = 0; i < spec->n_faults; i++) {
    const pd_fault_t *f = &spec->faults[i];
    if (fault_matches(rng, f, nth)) apply(f, out);
  }
  if (out->fault < 0 && fault_rate > 0 && pd_prng_unit(rng) < fault_rate) {
    apply(&random_faults[pd_prng_below(rng, sizeof random_faults / sizeof *random_faults)], out);
  }
  return fired;
}

/* ---------- wire rendering (W6.3, W6.4) ---------- */

/* Every event of a logprob stream carries meta_info.input_token_logprobs, as SGLang's do
 * (mini_lb's merge indexes it in every chunk, M8.4). */
typedef struct {
  char *p;
  size_t n, cap;
} wbuf_t;

/* As snprintf writes: what fits before the last byte of cap is written, all is counted. */
static inline void wput(wbuf_t *w, const char *s, size_t k) {
  if (w->n + k < w->cap) /* the common case: a constant k is copied inline, not by a call */
    memcpy(w->p + w->n, s, k);
  else if (w->n + 1 < w->cap)
    memcpy(w->p + w->n, s, w->cap - 1 - w->n);
  w->n += k;
}

static void wput_u32(wbuf_t *w, uint32_t v) {
  char d[10];
  size_t k = sizeof d;
  do d[--k] = (char)('0' + v % 10); while ((v /= 10) && k);
  wput(w, d + k, sizeof d - k);
}

#define WPUT_LIT(w, lit) wput((w), (lit), sizeof(lit) - 1)

/* Token k's SGLang object, its input_token_logprobs lp (NULL: none). Built by hand, not with
 * snprintf (issue 14: one per token is the simulator's most frequent text);
 * tests/test_wire_fast.c holds it to the snprintf form byte for byte. */
static void token_json(wbuf_t *w, const pd_wire_leg_t *leg, uint32_t k, const char *lp) {
  WPUT_LIT(w, "{\"text\":\"tok");
  wput_u32(w, k);
  WPUT_LIT(w, " \",\"index\":");
  wput_u32(w, k);
  WPUT_LIT(w, ",\"meta_info\":{\"id\":\"");
  const char *rid = leg->rid ? leg->rid : "(null)"; /* what glibc's "%s" printed */
  wput(w, rid, strlen(rid));
  WPUT_LIT(w, "\",\"completion_tokens\":");
  wput_u32(w, k + 1);
  if (lp) {
    WPUT_LIT(w, ",\"input_token_logprobs\":");
    wput(w, lp, strlen(lp));
  }
  WPUT_LIT(w, "}}");
}

static size_t wbuf_end(wbuf_t *w) {
  if (w->n >= w->cap) return 0;
  w->p[w->n] = '\0';
  return w->n;
}

size_t pd_wire_token_json(const pd_wire_leg_t *leg, uint32_t k, const char *lp, char *buf,
                          size_t cap) {
  wbuf_t w = {buf, 0, cap};
  token_json(&w, leg, k, lp);
  return wbuf_end(&w);
}

static size_t token_event(const pd_wire_leg_t *leg, uint32_t k, char *buf, size_t cap) {
  wbuf_t w = {buf, 0, cap};
  WPUT_LIT(&w, "data: ");
  token_json(&w, leg, k, leg->has_logprob ? PD_LP_DECODE : NULL);
  WPUT_LIT(&w, "\n\n");
  return wbuf_end(&w);
}

size_t pd_wire_token_part(char *buf, size_t len, uint32_t part) {
  if (part == 1) return len / 2;
  if (part == 2) {
    size_t h = len / 2;
    memmove(buf, buf + h, len - h);
    return len - h;
  }
  return len;
}

static size_t render_token(const pd_wire_leg_t *leg, uint32_t arg, char *buf, size_t cap) {
  uint32_t k = arg >> 2, part = arg & 3;
  size_t len = token_event(leg, k, buf, cap);
  if (part == 3 && len) return len + token_event(leg, k + 1, buf + len, cap - len);
  return pd_wire_token_part(buf, len, part);
}

static void wput_rid(wbuf_t *w, const pd_wire_leg_t *leg) {
  const char *rid = leg->rid ? leg->rid : "(null)"; /* what glibc's "%s" printed */
  wput(w, rid, strlen(rid));
}

/* Written by hand, as snprintf wrote them (tests/test_wire_fast.c holds them to it). */
static size_t render_prefill(const pd_wire_leg_t *leg, uint32_t arg, char *buf, size_t cap) {
  wbuf_t w = {buf, 0, cap};
  if (leg->is_stream) WPUT_LIT(&w, "data: ");
  WPUT_LIT(&w, "{\"text\":\"\",\"meta_info\":{\"id\":\"");
  wput_rid(&w, leg);
  WPUT_LIT(&w, "\",\"completion_tokens\":0,\"finish_reason\":{\"type\":\"length\",\"length\":0}");
  if (leg->has_logprob) WPUT_LIT(&w, ",\"input_token_logprobs\":" PD_LP_PREFILL);
  WPUT_LIT(&w, "}}");
  if (leg->is_stream) WPUT_LIT(&w, "\n\n");
  if (leg->is_stream && !arg) WPUT_LIT(&w, "data: [DONE]\n\n");
  size_t n = w.n; /* the whole length, as snprintf returned it */
  if (cap) buf[n < cap ? n : cap - 1] = '\0';
  if (arg && !leg->is_stream && n > 10) n = n / 2; /* cut mid-document */
  return n < cap ? n : 0;
}

static size_t render_decode_body(const pd_wire_leg_t *leg, char *buf, size_t cap) {
  wbuf_t w = {buf, 0, cap};
  WPUT_LIT(&w, "{\"text\":\"");
  for (uint32_t k = 0; k < leg->tokens && w.n + 32 < cap; k++) {
    WPUT_LIT(&w, "tok");
    wput_u32(&w, k);
    WPUT_LIT(&w, " ");
  }
  WPUT_LIT(&w, "\",\"meta_info\":{\"id\":\"");
  wput_rid(&w, leg);
  WPUT_LIT(&w, "\",\"completion_tokens\":");
  wput_u32(&w, leg->tokens);
  if (leg->has_logprob) WPUT_LIT(&w, ",\"input_token_logprobs\":" PD_LP_DECODE);
  WPUT_LIT(&w, "}}");
  return wbuf_end(&w);
}

/* SGLang's answer to /abort_request for a request whose client is still there: a normal
 * output whose finish_reason is abort (no status_code, so it is yielded, not raised). */
static int render_abort(const pd_wire_leg_t *leg, int is_event, char *buf, size_t cap) {
  return snprintf(buf, cap,
                  "%s{\"text\":\"\",\"meta_info\":{\"id\":\"%s\",\"finish_reason\":"
                  "{\"type\":\"abort\",\"message\":\"Abort by /abort_request\"}}}%s",
                  is_event ? "data: " : "", leg->rid, is_event ? "\n\ndata: [DONE]\n\n" : "");
}

/* ---------- vLLM (V1.28, V1.31; its prefill answer: pd_wire_openai.c) ---------- */

static const char *vllm_error_type(uint32_t status) {
  switch (status) {
  case 400: return "BadRequestError";
  case 404: return "NotFoundError";
  default: return status < 500 ? "BadRequestError" : "InternalServerError";
  }
}

static int render_vllm_error(uint32_t status, int is_event, char *buf, size_t cap) {
  return snprintf(buf, cap,
                  "%s{\"error\":{\"message\":\"worker returned %u\",\"type\":\"%s\","
                  "\"param\":null,\"code\":%u}}%s",
                  is_event ? "data: " : "", status, vllm_error_type(status), status,
                  is_event ? "\n\n" : "");
}

size_t pd_wire_render_vllm(const pd_wire_leg_t *leg, const pd_wire_vllm_t *v, int kind,
                           uint32_t arg, char *buf, size_t cap) {
  int n = 0;
  if (!v) return pd_wire_render(leg, kind, arg, buf, cap);
  switch (kind) {
  case PD_WIRE_VLLM_PREFILL_BODY: return pd_wire_openai_vllm_prefill(leg, v, arg, buf, cap);
  case PD_WIRE_ERROR_EVENT: n = render_vllm_error(arg, 1, buf, cap); break;
  case PD_WIRE_ERROR_BODY: n = render_vllm_error(arg, 0, buf, cap); break;
  default:
    if (pd_wire_is_openai(leg)) return pd_wire_openai_render(leg, 1, kind, arg, buf, cap);
    return pd_wire_render(leg, kind, arg, buf, cap);
  }
  return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

size_t pd_wire_render(const pd_wire_leg_t *leg, int kind, uint32_t arg, char *buf, size_t cap) {
  static const pd_wire_vllm_t anon = {"", NULL, 5600}; /* a caller that names no engine */
  int n = 0;
  if (kind == PD_WIRE_VLLM_PREFILL_BODY)
    return pd_wire_openai_vllm_prefill(leg, &anon, arg, buf, cap);
  if (pd_wire_is_openai(leg)) return pd_wire_openai_render(leg, 0, kind, arg, buf, cap);
  switch (kind) {
  case PD_WIRE_TOKEN: return render_token(leg, arg, buf, cap);
  case PD_WIRE_DONE_EVENT: {
    wbuf_t w = {buf, 0, cap};
    if (arg) { /* the end of a request for 0 tokens: SGLang's one output, no token in it */
      WPUT_LIT(&w, "data: {\"text\":\"\",\"meta_info\":{\"id\":\"");
      wput_rid(&w, leg);
      WPUT_LIT(&w, "\",\"completion_tokens\":0,\"finish_reason\":{\"type\":\"length\","
                   "\"length\":0}");
      if (leg->has_logprob) WPUT_LIT(&w, ",\"input_token_logprobs\":" PD_LP_DECODE);
      WPUT_LIT(&w, "}}\n\n");
    }
    WPUT_LIT(&w, "data: [DONE]\n\n");
    return wbuf_end(&w);
  }
  case PD_WIRE_ERROR_EVENT:
    n = snprintf(buf, cap, "data: {\"error\":{\"message\":\"worker failed\",\"code\":%u}}\n\n", arg);
    break;
  case PD_WIRE_ERROR_BODY:
    n = snprintf(buf, cap, "{\"error\":{\"message\":\"worker returned %u\",\"code\":%u}}", arg, arg);
    break;
  case PD_WIRE_PREFILL_BODY: return render_prefill(leg, arg, buf, cap);
  case PD_WIRE_DECODE_BODY: return render_decode_body(leg, buf, cap);
  case PD_WIRE_ABORT_EVENT: n = render_abort(leg, 1, buf, cap); break;
  case PD_WIRE_ABORT_BODY: n = render_abort(leg, 0, buf, cap); break;
  default: return 0;
  }
  return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

size_t pd_wire_render_cap(const pd_wire_leg_t *leg, int kind) {
  size_t rid = leg->rid ? strlen(leg->rid) : 0; /* events carry it once, coalesced twice */
  if (kind == PD_WIRE_VLLM_PREFILL_BODY || pd_wire_is_openai(leg)) {
    /* OpenAI's shapes: up to three events per token (chat's role chunk, the token, the usage
     * chunk), each naming the rid and the model, and two tokens coalesced */
    size_t model = leg->api ? strlen(leg->api->model) : 0; /* NUL-terminated in its array */
    size_t extra = kind == PD_WIRE_DECODE_BODY ? 16 * (size_t)leg->tokens : 0; /* "tok%u " */
    if (kind == PD_WIRE_VLLM_PREFILL_BODY) /* block ids, engine id and host */
      extra = 6 * (size_t)PD_WIRE_MAX_BLOCKS + 2 * PD_WIRE_NAME_MAX;
    return 2048 + 6 * (rid + model) + extra;
  }
  size_t extra = kind == PD_WIRE_DECODE_BODY ? 12 * (size_t)leg->tokens : 0;
  return 512 + 2 * rid + extra;
}

/* One value, structurally: a type tag, then a number's double (cJSON keeps numbers as
 * doubles and prints each double one way, so equal bits <=> equal printed text), a string's
 * bytes and length, an array's elements and count, an object's members. Depth-bounded: the
 * bootstrap fields are scalars or arrays of scalars. */
static uint64_t hash_value(uint64_t h, const cJSON *v, int depth) {
  h = pd_fnv1a_u64(h, v ? (uint64_t)(v->type & 0xff) + 1 : 0);
  if (!v || depth > 8) return h;
  if (cJSON_IsNumber(v)) {
    uint64_t bits; /* -0 and 0 differ here as in cJSON's print ("-0", "0") */
    memcpy(&bits, &v->valuedouble, sizeof bits);
    return pd_fnv1a_u64(h, bits);
  }
  if (cJSON_IsString(v)) {
    size_t n = strlen(v->valuestring);
    return pd_fnv1a_u64(pd_fnv1a(h, v->valuestring, n), n);
  }
  uint64_t n = 0;
  for (const cJSON *c = v->child; c && (cJSON_IsArray(v) || cJSON_IsObject(v)); c = c->next, n++) {
    if (cJSON_IsObject(v) && c->string) h = pd_fnv1a_str(h, c->string);
    h = hash_value(h, c, depth + 1);
  }
  return pd_fnv1a_u64(h, n);
}

uint64_t pd_wire_rooms_hash(const cJSON *room, const cJSON *host, const cJSON *port) {
  return hash_value(hash_value(hash_value(PD_FNV1A_OFFSET, room, 0), host, 0), port, 0);
}
