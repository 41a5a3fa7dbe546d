/* The mock's event log: one JSON object per line, flushed per line, written under m->mu so
 * lines never interleave. The fields are documented in docs/mock.md ("Event log"). 64-bit
 * values (rooms) travel as decimal strings. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pd_mock_int.h"

const char *pd_mock_log_truth(pd_truth_t t) {
  switch (t) {
  case PD_TRUTH_OK: return "ok";
  case PD_TRUTH_FAILED: return "failed";
  case PD_TRUTH_STALLED: return "stalled";
  case PD_TRUTH_CANCELLED: return "cancelled";
  case PD_TRUTH_NEVER: return "never";
  default: return "pending";
  }
}

static void add_u64_str(cJSON *j, const char *key, uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%" PRIu64, v);
  cJSON_AddStringToObject(j, key, b);
}

static cJSON *begin(const char *ev, const pd_mock_leg_t *leg) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  cJSON_AddNumberToObject(j, "t_us", (double)(pd_mock_now_ns() / 1000u));
  cJSON_AddStringToObject(j, "ev", ev);
  if (!leg) return j;
  cJSON_AddNumberToObject(j, "req", (double)leg->id);
  cJSON_AddStringToObject(j, "rid", leg->rid);
  if (leg->has_room) add_u64_str(j, "room", leg->room);
  else cJSON_AddNullToObject(j, "room");
  return j;
}

static void end(pd_mock_t *m, cJSON *j) {
  if (!j) return;
  char *s = m->log ? cJSON_PrintUnformatted(j) : NULL;
  if (s) {
    fputs(s, m->log);
    fputc('\n', m->log);
    fflush(m->log);
    cJSON_free(s);
  }
  cJSON_Delete(j);
}

void pd_mock_log(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg) {
  if (m->log) end(m, begin(ev, leg));
}

void pd_mock_log_request(pd_mock_t *m, const pd_mock_leg_t *leg) {
  if (!m->log) return;
  cJSON *j = begin("request", leg);
  if (!j) return;
  cJSON_AddStringToObject(j, "path", leg->path ? leg->path : "");
  cJSON_AddBoolToObject(j, "stream", leg->is_stream);
  cJSON_AddBoolToObject(j, "logprob", leg->has_logprob);
  if (leg->xrid[0]) cJSON_AddStringToObject(j, "x_request_id", leg->xrid);
  else cJSON_AddNullToObject(j, "x_request_id");
  cJSON_AddStringToObject(j, "role", leg->m->cfg.role == PD_ROLE_PREFILL ? "prefill" : "decode");
  cJSON_AddStringToObject(j, "worker", leg->m->worker.name);
  cJSON_AddNumberToObject(j, "tokens", leg->tokens);
  cJSON_AddNumberToObject(j, "n_rooms", leg->n_rooms);
  cJSON_AddBoolToObject(j, "rid_given", leg->rid_given);
  char h[17];
  snprintf(h, sizeof h, "%016llx", (unsigned long long)leg->rooms_hash);
  cJSON_AddStringToObject(j, "rooms_hash", h); /* room list, host and port, for I8 equality */
  if (leg->has_room) cJSON_AddBoolToObject(j, "room_array", leg->is_room_array);
  cJSON *rooms = leg->rooms ? cJSON_AddArrayToObject(j, "rooms") : NULL;
  for (int i = 0; rooms && i < leg->n_rooms; i++) { /* every room of a batch, as strings */
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, leg->rooms[i]);
    cJSON_AddItemToArray(rooms, cJSON_CreateString(b));
  }
  if (leg->boot_host[0]) cJSON_AddStringToObject(j, "bootstrap_host", leg->boot_host);
  if (leg->boot_port > 0) cJSON_AddNumberToObject(j, "bootstrap_port", leg->boot_port);
  /* S2.14: the DP ranks its body named (I22 on sockets) */
  if (leg->routed_dp_rank >= 0) cJSON_AddNumberToObject(j, "routed_dp_rank", leg->routed_dp_rank);
  if (leg->prefill_dp_rank >= 0)
    cJSON_AddNumberToObject(j, "disagg_prefill_dp_rank", leg->prefill_dp_rank);
  end(m, j);
}

void pd_mock_log_str(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg, const char *key,
                 const char *val) {
  if (!m->log) return;
  cJSON *j = begin(ev, leg);
  if (j) cJSON_AddStringToObject(j, key, val);
  end(m, j);
}

void pd_mock_log_str2(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg, const char *k1,
                      const char *v1, const char *k2, const char *v2) {
  if (!m->log) return;
  cJSON *j = begin(ev, leg);
  if (j) cJSON_AddStringToObject(j, k1, v1);
  if (j) cJSON_AddStringToObject(j, k2, v2);
  end(m, j);
}

void pd_mock_log_int(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg, const char *key,
                 long long val) {
  if (!m->log) return;
  cJSON *j = begin(ev, leg);
  if (j) cJSON_AddNumberToObject(j, key, (double)val);
  end(m, j);
}

void pd_mock_log_room(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg, uint64_t room) {
  if (!m->log) return;
  cJSON *j = begin(ev, leg);
  if (!j) return;
  cJSON_DeleteItemFromObjectCaseSensitive(j, "room");
  add_u64_str(j, "room", room);
  end(m, j);
}

void pd_mock_log_kv(pd_mock_t *m, const char *ev, const pd_mock_leg_t *leg, uint64_t req,
                    uint64_t key, const char *skey, const char *sval, const char *nkey,
                    long long nval) {
  if (!m->log) return;
  cJSON *j = begin(ev, leg);
  if (!j) return;
  if (!leg && req) cJSON_AddNumberToObject(j, "req", (double)req);
  char h[17];
  snprintf(h, sizeof h, "%016" PRIx64, key);
  cJSON_AddStringToObject(j, "key", h);
  if (skey) cJSON_AddStringToObject(j, skey, sval ? sval : "");
  if (nkey) cJSON_AddNumberToObject(j, nkey, (double)nval);
  end(m, j);
}
