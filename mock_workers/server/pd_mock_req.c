/* What the mock reads from a generation request body (the same fields and rules as the
 * simulator's parse_leg_body in sim/pd_world_loop.c): stream, logprob, rid, bootstrap
 * host/port/room(s) and the room hash that must be equal on both legs, and the output
 * length. Rooms are read exactly from the text when cJSON's double would round them. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_mock_int.h"

static size_t count_occurrences(const char *s, size_t len, const char *pat, const char **first) {
  size_t n = 0, pl = strlen(pat);
  *first = NULL;
  for (size_t i = 0; i + pl <= len; i++) {
    if (memcmp(s + i, pat, pl) != 0) continue;
    if (!n) *first = s + i;
    n++;
  }
  return n;
}

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* The first room as written, when the key occurs once in the text and its value (or the
 * first item of its array) is a plain integer that agrees with cJSON's double. */
static uint64_t exact_room(const char *body, size_t len, double d) {
  uint64_t fallback = d >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)d;
  const char *k, *end = body + len;
  if (count_occurrences(body, len, "\"bootstrap_room\"", &k) != 1) return fallback;
  const char *p = skip_ws(k + 16, end);
  if (p >= end || *p != ':') return fallback;
  p = skip_ws(p + 1, end);
  if (p < end && *p == '[') p = skip_ws(p + 1, end);
  char digits[24];
  size_t n = 0;
  while (p + n < end && n < 21 && p[n] >= '0' && p[n] <= '9') {
    digits[n] = p[n];
    n++;
  }
  if (!n || n > 20 || (p + n < end && strchr(".eE", p[n]) && p[n])) return fallback;
  digits[n] = 0;
  uint64_t v = strtoull(digits, NULL, 10);
  return fabs((double)v - d) <= fabs(d) * 1e-15 + 1.0 ? v : fallback;
}

static int fail(char *err, size_t errlen, const char *msg) {
  snprintf(err, errlen, "%s", msg);
  return PD_ERR_FIELD;
}

/* Every room of a batch, for the event log (each batch item must get its own, G18). Rooms
 * past the first are read through cJSON's double: exact up to 2^53, as the rooms a PD
 * gateway draws are (R-ROOM: 53 bits). */
static int read_rooms(pd_mock_leg_t *leg, const cJSON *room, char *err, size_t errlen) {
  leg->rooms = malloc((size_t)leg->n_rooms * sizeof *leg->rooms);
  if (!leg->rooms) {
    snprintf(err, errlen, "out of memory");
    return PD_ERR_NOMEM;
  }
  int i = 0;
  for (const cJSON *it = room->child; it && i < leg->n_rooms; it = it->next, i++) {
    double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
    if (d < 0) return fail(err, errlen, "bootstrap_room: expected an array of non-negative integers");
    leg->rooms[i] = i ? (d >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)d) : leg->room;
  }
  return 0;
}

static int read_bootstrap(pd_mock_leg_t *leg, const cJSON *j, const char *body, size_t len,
                          char *err, size_t errlen) {
  const cJSON *room = cJSON_GetObjectItemCaseSensitive(j, "bootstrap_room");
  const cJSON *host = cJSON_GetObjectItemCaseSensitive(j, "bootstrap_host");
  const cJSON *port = cJSON_GetObjectItemCaseSensitive(j, "bootstrap_port");
  leg->rooms_hash = pd_wire_rooms_hash(room, host, port);
  leg->boot_port = -1;
  /* a batch carries arrays, one entry per item (R1.25, M8.2): the first item's address is
   * the batch's, as the first room keys the rendezvous */
  if (cJSON_IsArray(host)) host = cJSON_GetArrayItem(host, 0);
  if (cJSON_IsArray(port)) port = cJSON_GetArrayItem(port, 0);
  if (cJSON_IsString(host)) {
    if (strlen(host->valuestring) >= sizeof leg->boot_host)
      return fail(err, errlen, "bootstrap_host: longer than 255 bytes");
    snprintf(leg->boot_host, sizeof leg->boot_host, "%s", host->valuestring);
  }
  if (cJSON_IsNumber(port)) {
    if (port->valuedouble < 0 || port->valuedouble > 65535)
      return fail(err, errlen, "bootstrap_port: expected an integer in 0..65535");
    leg->boot_port = (int)port->valuedouble;
  }
  if (!room || cJSON_IsNull(room)) return 0;
  const cJSON *first = room;
  leg->n_rooms = 1;
  if (cJSON_IsArray(room)) {
    leg->is_room_array = 1;
    leg->n_rooms = cJSON_GetArraySize(room);
    first = cJSON_GetArrayItem(room, 0);
  }
  if (!cJSON_IsNumber(first) || first->valuedouble < 0)
    return fail(err, errlen, "bootstrap_room: expected a non-negative integer or an array of them");
  leg->has_room = 1;
  leg->room = exact_room(body, len, first->valuedouble);
  return leg->n_rooms > 1 ? read_rooms(leg, room, err, errlen) : 0;
}

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

int pd_mock_req_fill(pd_mock_leg_t *leg, const pd_request_t *r, const char *body, size_t len,
                 uint32_t default_tokens, pd_prng_t *rid_rng, char *err, size_t errlen) {
  const cJSON *j = r->json;
  leg->is_stream = r->is_stream;
  const cJSON *lp = cJSON_GetObjectItemCaseSensitive(j, "return_logprob");
  const cJSON *lp2 = cJSON_GetObjectItemCaseSensitive(j, "logprobs");
  leg->has_logprob = cJSON_IsTrue(lp) || cJSON_IsTrue(lp2) || cJSON_IsNumber(lp2);
  int rc = read_bootstrap(leg, j, body, len, err, errlen);
  if (rc < 0) return rc;
  const cJSON *rid = cJSON_GetObjectItemCaseSensitive(j, "rid");
  if (cJSON_IsArray(rid)) rid = cJSON_GetArrayItem(rid, 0);
  if (cJSON_IsString(rid)) {
    if (strlen(rid->valuestring) >= sizeof leg->rid)
      return fail(err, errlen, "rid: longer than 255 bytes");
    snprintf(leg->rid, sizeof leg->rid, "%s", rid->valuestring);
    leg->rid_given = 1;
  } else { /* SGLang makes one up (uuid4().hex) */
    uint64_t a = pd_prng_next(rid_rng), b = pd_prng_next(rid_rng);
    snprintf(leg->rid, sizeof leg->rid, "%016" PRIx64 "%016" PRIx64, a, b);
  }
  leg->tokens = r->max_tokens ? r->max_tokens : default_tokens;
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
