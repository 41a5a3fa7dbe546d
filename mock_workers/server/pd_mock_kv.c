/* vLLM's KV side channel on real sockets (docs/mock.md, "vLLM workers"): what the simulator
 * routes in memory (sim/pd_world_worker.c, on_vllm) travels here as one short line per TCP
 * connection, from a decode mock to the prefill mock its kv_transfer_params name
 * (remote_host:remote_port, the prefill's bootstrap listener; remote_engine_id, its name):
 *   READ <engine_id> <key>\n                     answered  PULLED <key> ok|stale|failed\n
 *   NOTIFY <engine_id> <key> read|empty|reject\n  (no answer; the sender closes)
 *   HEARTBEAT <engine_id> <key>\n                 (no answer; the sender closes)
 * key: 16 lowercase hex digits (pd_worker_kv_key of the request id). Lines are at most
 * PD_MOCK_LINE_MAX bytes; a bad line is logged (kv_bad_line) and dropped, a longer one
 * drops its connection. A READ refused, closed, unanswered within PD_MOCK_KV_TIMEOUT_MS or
 * sent to another engine id fails (PD_WENGINE_READ_FAILED, V1.22), as in the simulator.
 * Connections, the listener and the line reader are pd_bootstrap.c's; all under m->mu. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_mock_int.h"

#define MS_NS 1000000ull

static const char *notify_name(uint32_t kind) {
  switch (kind) {
  case PD_WENGINE_NOTIFY_EMPTY: return "empty";
  case PD_WENGINE_NOTIFY_REJECT: return "reject";
  default: return "read";
  }
}

static int notify_kind(const char *s) {
  if (!strcmp(s, "read")) return PD_WENGINE_NOTIFY_READ;
  if (!strcmp(s, "empty")) return PD_WENGINE_NOTIFY_EMPTY;
  if (!strcmp(s, "reject")) return PD_WENGINE_NOTIFY_REJECT;
  return 0;
}

static const char *read_name(int r) {
  switch (r) {
  case PD_WENGINE_READ_OK: return "ok";
  case PD_WENGINE_READ_STALE: return "stale";
  default: return "failed";
  }
}

static int read_result(const char *s) {
  if (!strcmp(s, "ok")) return PD_WENGINE_READ_OK;
  if (!strcmp(s, "stale")) return PD_WENGINE_READ_STALE;
  if (!strcmp(s, "failed")) return PD_WENGINE_READ_FAILED;
  return 0;
}

/* Exactly 16 hex digits. */
static int parse_key(const char *s, uint64_t *key) {
  if (strlen(s) != 16 || strspn(s, "0123456789abcdefABCDEF") != 16) return 0;
  *key = strtoull(s, NULL, 16);
  return 1;
}

/* The engine id as it travels: printable bytes without spaces, else "?" (never ours). */
static void engine_token(const char *id, char *out, size_t cap) {
  int is_ok = id[0] != 0;
  for (const char *p = id; *p; p++)
    if (*p <= ' ' || *p > '~') is_ok = 0;
  snprintf(out, cap, "%s", is_ok ? id : "?");
}

/* Split a line into at most 4 space-separated words (in place); returns the count, 5 when
 * there are more. */
static int words(char *line, char *w[4]) {
  int n = 0;
  for (char *save = NULL, *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
    if (n == 4) return 5;
    w[n++] = t;
  }
  return n;
}

/* Logged with its text, every byte outside printable ASCII as '?' (the log stays JSON). */
static void bad_line(pd_mock_t *m, const char *line, const char *why) {
  char text[PD_MOCK_LINE_MAX];
  size_t n = 0;
  for (; line[n] && n + 1 < sizeof text; n++)
    text[n] = line[n] >= ' ' && line[n] <= '~' ? line[n] : '?';
  text[n] = 0;
  pd_mock_log_str2(m, "kv_bad_line", NULL, "why", why, "line", text);
}

/* ---------- decode ---------- */

static void read_failed(pd_mock_t *m, pd_mock_leg_t *d, const char *why) {
  pd_mock_log_kv(m, "kv_read", d, 0, d->kv_key, "result", "failed", NULL, 0);
  pd_mock_log_str(m, "kv_read_error", d, "why", why);
  pd_mock_drive_pulled(m, d, PD_WENGINE_READ_FAILED);
}

void pd_mock_kv_act(pd_mock_t *m, pd_mock_leg_t *d, const pd_wact_t *a) {
  char line[PD_MOCK_LINE_MAX], eng[PD_MOCK_ENGINE_MAX];
  int is_read = a->kind == PD_WACT_PULL;
  engine_token(d->kv_engine, eng, sizeof eng);
  if (is_read) {
    snprintf(line, sizeof line, "READ %s %016" PRIx64 "\n", eng, a->b);
  } else if (a->kind == PD_WACT_NOTIFY) {
    snprintf(line, sizeof line, "NOTIFY %s %016" PRIx64 " %s\n", eng, a->b, notify_name(a->a));
    pd_mock_log_kv(m, "kv_notify", d, 0, a->b, "kind", notify_name(a->a), NULL, 0);
  } else {
    snprintf(line, sizeof line, "HEARTBEAT %s %016" PRIx64 "\n", eng, a->b);
    pd_mock_log_kv(m, "kv_heartbeat", d, 0, a->b, NULL, NULL, NULL, 0);
  }
  int is_open = 0;
  int bc = d->kv_host[0] && d->kv_port > 0
               ? pd_mock_bootstrap_dial(m, d->kv_host, d->kv_port, is_read ? d : NULL, &is_open)
               : -1;
  if (bc < 0) {
    if (is_read) read_failed(m, d, "refused");
    else pd_mock_log_kv(m, "kv_send_failed", d, 0, a->b, "why", "refused", NULL, 0);
    return;
  }
  pd_mock_bootstrap_conn_t *b = pd_mock_bootstrap_get(m, bc);
  snprintf(b->wbuf, sizeof b->wbuf, "%s", line);
  b->key = a->b;
  b->kv_deadline_ns = pd_mock_now_ns() + PD_MOCK_KV_TIMEOUT_MS * MS_NS;
  if (is_read) {
    assert(d->boot < 0); /* a vLLM decode has no other connection, and reads once */
    d->boot = bc;
  }
  if (is_open) pd_mock_kv_connected(m, bc);
}

void pd_mock_kv_connected(pd_mock_t *m, int bc) {
  pd_mock_bootstrap_conn_t *b = pd_mock_bootstrap_get(m, bc);
  int is_read = b->leg != NULL;
  b->state = BOOTSTRAP_CONN_REGISTERED; /* its line is on its way */
  if (pd_mock_bootstrap_send_line(m, bc, b->wbuf) < 0) return; /* lost: the leg was told */
  if (!is_read) pd_mock_bootstrap_close(m, bc); /* a NOTIFY or HEARTBEAT: done */
}

/* decode: the prefill's answer to our READ. */
static void on_answer(pd_mock_t *m, int bc, char *line) {
  pd_mock_bootstrap_conn_t *b = pd_mock_bootstrap_get(m, bc);
  pd_mock_leg_t *d = b->leg;
  char *w[4], copy[PD_MOCK_LINE_MAX];
  snprintf(copy, sizeof copy, "%s", line);
  uint64_t key = 0;
  int r = 0, n = words(line, w);
  if (n != 3 || strcmp(w[0], "PULLED") || !parse_key(w[1], &key) || !(r = read_result(w[2])) ||
      key != b->key) {
    bad_line(m, copy, "expected PULLED <key> ok|stale|failed for our READ");
    return;
  }
  if (!d || d->boot != bc) { /* the leg is gone: nobody waits */
    pd_mock_bootstrap_close(m, bc);
    return;
  }
  d->boot = -1;
  pd_mock_bootstrap_close(m, bc);
  pd_mock_log_kv(m, "kv_read", d, 0, key, "result", read_name(r), NULL, 0);
  pd_mock_drive_pulled(m, d, r);
}

void pd_mock_kv_lost(pd_mock_t *m, int bc, const char *why) {
  pd_mock_bootstrap_conn_t *b = pd_mock_bootstrap_get(m, bc);
  if (m->cfg.role == PD_ROLE_PREFILL) { /* a decode closed, or sent too long a line */
    if (!strcmp(why, "line too long")) bad_line(m, "", why);
    pd_mock_bootstrap_close(m, bc);
    return;
  }
  pd_mock_leg_t *d = b->leg;
  uint64_t key = b->key;
  int is_read = d && d->boot == bc;
  if (is_read) d->boot = -1;
  pd_mock_bootstrap_close(m, bc);
  if (is_read) read_failed(m, d, why);
  else if (!d) pd_mock_log_kv(m, "kv_send_failed", NULL, 0, key, "why", why, NULL, 0);
}

/* ---------- prefill ---------- */

void pd_mock_kv_answer(pd_mock_t *m, int bc, const pd_mock_leg_t *leg, uint64_t key, int r) {
  pd_mock_log_kv(m, "kv_served", leg, 0, key, "result", read_name(r), NULL, 0);
  if (bc < 0) return;
  char line[64];
  snprintf(line, sizeof line, "PULLED %016" PRIx64 " %s\n", key, read_name(r));
  pd_mock_bootstrap_send_line(m, bc, line); /* a failure closes it */
}

/* prefill: READ, NOTIFY or HEARTBEAT from a decode. */
static void on_request(pd_mock_t *m, int bc, char *line) {
  pd_mock_bootstrap_conn_t *b = pd_mock_bootstrap_get(m, bc);
  char *w[4], copy[PD_MOCK_LINE_MAX];
  snprintf(copy, sizeof copy, "%s", line);
  b->t_open_ns = pd_mock_now_ns(); /* an idle connection closes PD_MOCK_BOOT_REG_TIMEOUT_MS
                                      after its last line */
  uint64_t key = 0;
  int n = words(line, w), kind = 0;
  int is_read = n == 3 && !strcmp(w[0], "READ");
  int is_notify = n == 4 && !strcmp(w[0], "NOTIFY") && (kind = notify_kind(w[3]));
  int is_beat = n == 3 && !strcmp(w[0], "HEARTBEAT");
  if (!(is_read || is_notify || is_beat) || !parse_key(w[2], &key)) {
    bad_line(m, copy, "expected READ|NOTIFY|HEARTBEAT <engine_id> <key> [read|empty|reject]");
    return;
  }
  if (strcmp(w[1], m->worker.name) != 0) { /* not ours: the read fails (NIXL's handshake
                                              checks the engine id) */
    pd_mock_log_kv(m, "kv_wrong_engine", NULL, 0, key, "engine_id", w[1], NULL, 0);
    if (is_read) pd_mock_kv_answer(m, bc, NULL, key, PD_WENGINE_READ_FAILED);
    return;
  }
  if (is_read) {
    b->seq = ++m->next_seq; /* the token the engine's answer names */
    pd_mock_drive_pull(m, bc, key);
  } else if (is_notify) {
    pd_mock_drive_notify(m, key, kind);
  } else {
    pd_mock_drive_heartbeat(m, key);
  }
}

void pd_mock_kv_on_line(pd_mock_t *m, int bc, const char *line) {
  char buf[PD_MOCK_LINE_MAX];
  snprintf(buf, sizeof buf, "%s", line);
  size_t n = strlen(buf);
  if (n && buf[n - 1] == '\r') buf[n - 1] = 0;
  if (m->cfg.role == PD_ROLE_PREFILL) on_request(m, bc, buf);
  else on_answer(m, bc, buf);
}
