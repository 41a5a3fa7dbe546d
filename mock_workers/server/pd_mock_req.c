/* What the mock takes from a generation request: the body's fields through the one worker
 * parser (mock_workers/pd_worker_body.c, the simulator's too), the output length, a made-up
 * rid when there is none, and the id the event log ties a leg by. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_mock_int.h"
#include "pd_worker_body.h"

char *pd_mock_req_escape(const char *s) {
  cJSON *j = cJSON_CreateString(s);
  char *p = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  if (!p) return NULL;
  size_t n = strlen(p);
  char *out = malloc(n);
  if (out && n >= 2) {
    memcpy(out, p + 1, n - 2); /* strip the quotes */
    out[n - 2] = 0;
  }
  cJSON_free(p);
  return out;
}

/* vLLM: what kv_transfer_params ask of this worker (the simulator's reading,
 * sim/pd_world_worker.c pd_worker_model_read_kvp). The prefill's key is its rid's: the rid its
 * answer names as remote_request_id. */
static void read_kvp(pd_mock_leg_t *leg, const pd_worker_body_t *b) {
  int is_decode = leg->m->cfg.role == PD_ROLE_DECODE;
  leg->kv_mode = pd_worker_kvp_mode(&b->kvp, is_decode);
  leg->max_tokens = b->max_tokens;
  leg->kv_key = pd_worker_kv_key(is_decode ? b->kvp.request_id : leg->rid);
  snprintf(leg->kv_host, sizeof leg->kv_host, "%s", b->kvp.host);
  leg->kv_port = b->kvp.port;
  snprintf(leg->kv_engine, sizeof leg->kv_engine, "%s", b->kvp.engine_id);
}

int pd_mock_req_fill(pd_mock_leg_t *leg, const pd_request_t *r, const char *body, size_t len,
                 uint32_t default_tokens, pd_prng_t *rid_rng, char *err, size_t errlen) {
  pd_worker_body_t b;
  int rc = pd_worker_body_read(&b, r->json, body, len, NULL, err, errlen);
  leg->rooms = b.rooms; /* owned by the leg from here, freed with it */
  if (rc < 0) return rc;
  leg->is_stream = r->is_stream;
  leg->has_logprob = b.has_logprob;
  leg->rooms_hash = b.rooms_hash;
  leg->has_room = b.has_room;
  leg->is_room_array = b.has_room && b.is_room_array;
  leg->n_rooms = b.has_room ? b.n_rooms : 0;
  leg->room = b.room;
  leg->prompt_tokens = b.prompt_tokens;
  leg->api = b.api;
  leg->api.route = (int)r->route;
  snprintf(leg->boot_host, sizeof leg->boot_host, "%s", b.boot_host);
  leg->boot_port = b.boot_port;
  if (b.has_rid) {
    snprintf(leg->rid, sizeof leg->rid, "%s", b.rid);
    leg->rid_given = 1;
  } else { /* SGLang makes one up (uuid4().hex) */
    uint64_t x = pd_prng_next(rid_rng), y = pd_prng_next(rid_rng);
    snprintf(leg->rid, sizeof leg->rid, "%016" PRIx64 "%016" PRIx64, x, y);
  }
  leg->routed_dp_rank = b.routed_dp_rank; /* S2.14 */
  leg->prefill_dp_rank = b.prefill_dp_rank;
  if (leg->m->is_vllm) read_kvp(leg, &b);
  leg->tokens = r->max_tokens ? r->max_tokens : default_tokens;
  if (b.has_max_tokens && b.max_tokens == 0) { /* a stated 0 (docs/mock.md, "max tokens 0") */
    if (leg->m->is_vllm) { /* vLLM's sampling parameters refuse it */
      snprintf(err, errlen, "max_tokens must be at least 1, got 0");
      return PD_ERR_FIELD;
    }
    leg->tokens = 0; /* SGLang allows 0: the request ends with no output token */
  }
  if (leg->tokens > PD_MOCK_MAX_TOKENS) leg->tokens = PD_MOCK_MAX_TOKENS;
  leg->rid_json = pd_mock_req_escape(leg->rid);
  if (!leg->rid_json) {
    snprintf(err, errlen, "out of memory");
    return PD_ERR_NOMEM;
  }
  return 0;
}

/* ---------- the id a leg is tied by ---------- */

#define CONFORM_ID_PREFIX "pdconf-"

static int is_id_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
}

void pd_mock_req_body_tag(const char *body, size_t len, char *out, size_t cap) {
  static const char key[] = CONFORM_ID_PREFIX;
  out[0] = 0;
  if (!body || cap < 2) return;
  for (size_t i = 0; i + sizeof key - 1 <= len; i++) {
    if (memcmp(body + i, key, sizeof key - 1) != 0) continue;
    size_t n = 0;
    while (i + n < len && n + 1 < cap && is_id_char(body[i + n]))
      n++;
    memcpy(out, body + i, n);
    out[n] = 0;
    return;
  }
}

void pd_mock_req_pick_xrid(const char *header, const char *body, size_t len, char *out,
                           size_t cap) {
  if (!cap) return;
  out[0] = 0;
  if (header && !strncmp(header, CONFORM_ID_PREFIX, sizeof CONFORM_ID_PREFIX - 1)) {
    snprintf(out, cap, "%s", header);
    return;
  }
  pd_mock_req_body_tag(body, len, out, cap);
  if (!out[0] && header) snprintf(out, cap, "%s", header);
}
