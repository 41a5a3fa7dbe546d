/* Helpers for the source-first dispatch tests (test_dispatch_sf.c, test_dispatch_sfref.c): a
 * gateway of a vLLM-family mode with two prefills (p0 bootstrap port 9000, p1 none) and two
 * decodes, requests on the OpenAI routes, and the bodies of the legs the core opened. */
#ifndef PDT_SF_H
#define PDT_SF_H
#include "pdt_harness.h"

/* A gateway with config c and allocator alloc (NULL: libc); h->gw NULL when it failed. */
static inline void sf_init_alloc(harness_t *h, const pd_gw_config_t *c, const pd_alloc_t *alloc) {
  memset(h, 0, sizeof *h);
  pd_prng_init(&h->rng, 42);
  h->gw = pd_gw_new(alloc, c, &h->rng);
  if (!h->gw) return;
  pd_gw_add_worker(h->gw, PD_ROLE_PREFILL, "p0", "p0", 9000);
  pd_gw_add_worker(h->gw, PD_ROLE_PREFILL, "p1", "p1", -1);
  pd_gw_add_worker(h->gw, PD_ROLE_DECODE, "d0", "d0", -1);
  pd_gw_add_worker(h->gw, PD_ROLE_DECODE, "d1", "d1", -1);
  pd_actbuf_init(&h->out, alloc);
}

static inline void sf_init_cfg(harness_t *h, const pd_gw_config_t *c) { sf_init_alloc(h, c, NULL); }

static inline void sf_init(harness_t *h, pd_mode_t mode) {
  pd_gw_config_t c;
  pd_gw_config_default(&c, mode);
  c.protocol = PD_PROTOCOL_VLLM;
  sf_init_cfg(h, &c);
}

static inline void sf_request_id(harness_t *h, uint64_t id, const char *path, const char *body) {
  pd_event_t ev = {.kind = PD_EV_CLIENT_REQUEST, .req_id = id, .path = path,
                   .data = (const uint8_t *)body, .len = strlen(body)};
  h_feed(h, ev);
}

static inline void sf_request(harness_t *h, const char *path, const char *body) {
  sf_request_id(h, 7, path, body);
}

/* The nth OPEN_LEG of this step; when there is none, an empty stand-in (kind CLIENT_END,
 * role prefill, worker UINT32_MAX, empty body and path) so a failing check reports, not
 * crashes. */
static inline const pd_action_t *sf_open(harness_t *h, int nth) {
  static const pd_action_t none = {.kind = PD_ACT_CLIENT_END, .worker = UINT32_MAX,
                                   .str = "", .data = (const uint8_t *)""};
  const pd_action_t *a = h_find(h, PD_ACT_OPEN_LEG, nth);
  return a ? a : &none;
}

/* The body of the nth OPEN_LEG of this step, parsed (cJSON_Delete it), or NULL. */
static inline cJSON *sf_open_body(harness_t *h, int nth) {
  const pd_action_t *a = h_find(h, PD_ACT_OPEN_LEG, nth);
  return a ? cJSON_ParseWithLength((const char *)a->data, a->len) : NULL;
}

/* a equals the JSON text b, member order aside. */
static inline int sf_json_eq(const cJSON *a, const char *b) {
  cJSON *j = cJSON_Parse(b);
  int eq = a && j && cJSON_Compare(a, j, 1);
  cJSON_Delete(j);
  return eq;
}

static inline const cJSON *sf_get(const cJSON *o, const char *k) {
  return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* o[k] as a number, -1 when it is not one. */
static inline double sf_num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* The flag (1: text/event-stream) of this step's first client head, -1 when none. */
static inline int sf_head_flag(harness_t *h) {
  const pd_action_t *a = h_find(h, PD_ACT_CLIENT_HEAD, 0);
  return a ? a->flag : -1;
}

/* A leg event of request 7 whose data is split in two events at `at`. */
static inline void sf_data_split(harness_t *h, uint64_t leg, const char *data, size_t at) {
  char first[4096];
  size_t n = strlen(data);
  if (at > n || at >= sizeof first) at = n;
  memcpy(first, data, at);
  first[at] = 0;
  h_leg(h, PD_EV_UP_DATA, leg, 0, first);
  h_leg(h, PD_EV_UP_DATA, leg, 0, data + at);
}

/* Prefill's answer: a one-token completion with these kv_transfer_params (a JSON text, or
 * NULL for none). */
static inline void sf_answer(harness_t *h, uint64_t leg, int status, const char *kv) {
  char body[1024];
  snprintf(body, sizeof body,
           "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
           "\"text\":\"a\",\"finish_reason\":\"length\"}]%s%s}",
           kv ? ",\"kv_transfer_params\":" : "", kv ? kv : "");
  h_leg(h, PD_EV_UP_HEAD, leg, status, NULL);
  sf_data_split(h, leg, body, 17);
  h_leg(h, PD_EV_UP_END, leg, 0, NULL);
}

#define SF_KV                                                                                  \
  "{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_block_ids\":[[1,2,3]],"      \
  "\"remote_engine_id\":\"e-0\",\"remote_request_id\":\"r-1\",\"remote_host\":\"p0\","         \
  "\"remote_port\":5600,\"tp_size\":1,\"remote_blocks_expiry_time\":1733242342.125}"
#define SF_CHAT                                                                                \
  "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"     \
  "\"stream_options\":{\"include_usage\":true},\"max_tokens\":50,"                             \
  "\"max_completion_tokens\":60,\"min_tokens\":5,\"min_completion_tokens\":4}"
#define SF_COMPLETIONS                                                                         \
  "{\"model\":\"m\",\"prompt\":\"hi\",\"stream\":true,\"max_tokens\":50,\"min_tokens\":5}"
#define SF_COMPLETIONS_NS "{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":3}"
#define SF_CHUNK0 "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n"
#define SF_CHUNK1 "data: {\"choices\":[{\"index\":0,\"text\":\"b\"}]}\n\n"

#endif
