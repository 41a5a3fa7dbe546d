/* pdt_mock: mocks in the test process (pd_mock_new with an in-memory event log) and the
 * helpers the mock tests share. Header-only (static inline). */
#ifndef PDT_MOCK_H
#define PDT_MOCK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_mock.h"
#include "pdt_curl.h"
#include "pdt_net.h"

#define SPEED 0.1 /* the default worker: forward 2 ms, kv 0.5 ms, token 0.5 ms */

/* ---------- mocks in this process ---------- */

typedef struct mk {
  pd_mock_t *m;
  FILE *log;
  char *log_buf;
  size_t log_len;
  pd_scn_worker_t w;
} mk_t;

static inline int mk_start_ex(mk_t *k, pd_role_t role, const pd_scn_worker_t *w, uint64_t bto_ms,
                       uint64_t wto_ms, int is_direct, int is_clock_on_start) {
  memset(k, 0, sizeof *k);
  pd_mock_config_t c;
  pd_mock_config_default(&c);
  c.role = role;
  c.is_clock_on_start = is_clock_on_start;
  if (w) {
    k->w = *w;
    c.worker = &k->w;
  }
  c.speed = SPEED;
  c.bootstrap_timeout_ms = bto_ms;
  c.waiting_timeout_ms = wto_ms;
  c.is_direct = is_direct;
  c.default_tokens = 8;
  k->log = open_memstream(&k->log_buf, &k->log_len);
  c.log = k->log;
  char err[256];
  k->m = pd_mock_new(&c, err, sizeof err);
  if (!k->m) fprintf(stderr, "mock: %s\n", err);
  return k->m ? 0 : -1;
}

static inline int mk_start(mk_t *k, pd_role_t role, const pd_scn_worker_t *w, uint64_t bto_ms,
                    uint64_t wto_ms, int is_direct) {
  return mk_start_ex(k, role, w, bto_ms, wto_ms, is_direct, 0);
}

/* Stop the mock; its log stays readable in k->log_buf until mk_free. */
static inline void mk_stop(mk_t *k) {
  pd_mock_del(k->m);
  k->m = NULL;
  if (k->log) fclose(k->log);
  k->log = NULL;
}

static inline void mk_free(mk_t *k) {
  if (k->m || k->log) mk_stop(k);
  free(k->log_buf);
  k->log_buf = NULL;
}

/* t_us of the first log line with this event and containing needle (NULL: any); -1 if none. */
static inline long long log_t(const mk_t *k, const char *ev, const char *needle) {
  char want[64];
  snprintf(want, sizeof want, "\"ev\":\"%s\"", ev);
  for (const char *line = k->log_buf; line && *line;) { /* bounded by the buffer */
    const char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    char one[1024];
    snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one ? len : sizeof one - 1), line);
    if (strstr(one, want) && (!needle || strstr(one, needle)))
      return strtoll(strstr(one, "\"t_us\":") + 7, NULL, 10);
    line = nl ? nl + 1 : NULL;
  }
  return -1;
}

static inline int wait_slots(pd_mock_t *m, uint32_t want, unsigned limit_ms) {
  uint64_t end = pdt_now_ms() + limit_ms;
  while (pd_mock_live_slots(m) != want && pdt_now_ms() < end) pdt_sleep_ms(2);
  return pd_mock_live_slots(m) == want;
}

static inline void gen_body(char *out, size_t cap, int stream, const char *rid, uint16_t bport,
                     uint64_t room, int tokens) {
  snprintf(out, cap,
           "{\"text\":\"hi\",\"stream\":%s,\"rid\":\"%s\",\"bootstrap_host\":\"127.0.0.1\","
           "\"bootstrap_port\":%u,\"bootstrap_room\":%llu,\"return_logprob\":true,"
           "\"sampling_params\":{\"max_new_tokens\":%d}}",
           stream ? "true" : "false", rid, bport, (unsigned long long)room, tokens);
}


static inline void add_fault(pd_scn_worker_t *w, pd_fault_kind_t k, int status, uint32_t after,
                      uint32_t nth) {
  pd_fault_t *f = &w->faults[w->n_faults++];
  memset(f, 0, sizeof *f);
  f->kind = k;
  f->status = status;
  f->after_tokens = after;
  f->nth_from = f->nth_to = nth;
  f->prob = 1.0;
}

#endif
