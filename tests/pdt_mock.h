/* pdt_mock: mocks in the test process (pd_mock_new with an in-memory event log) and the
 * helpers the mock tests share. Header-only (static inline). */
#ifndef PDT_MOCK_H
#define PDT_MOCK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
  pd_scenario_worker_t w;
} mk_t;

/* Start the mock of config c (k zeroed); its log is a temporary file, flushed a line at a
 * time, so a test can read it while the mock runs (log_t). */
static inline int mk_open(mk_t *k, pd_mock_config_t *c) {
  char err[256] = "no temporary file for the log";
  k->log = tmpfile();
  c->log = k->log;
  k->m = k->log ? pd_mock_new(c, err, sizeof err) : NULL;
  if (!k->m) fprintf(stderr, "mock: %s\n", err);
  return k->m ? 0 : -1;
}

/* Re-read the log file into k->log_buf: every line the mock has flushed so far. */
static inline void mk_read_log(mk_t *k) {
  struct stat st;
  if (!k->log || fstat(fileno(k->log), &st) != 0) return;
  char *b = realloc(k->log_buf, (size_t)st.st_size + 1);
  if (!b) return;
  ssize_t n = pread(fileno(k->log), b, (size_t)st.st_size, 0);
  k->log_len = n > 0 ? (size_t)n : 0;
  b[k->log_len] = 0;
  k->log_buf = b;
}

static inline int mk_start_ex(mk_t *k, pd_role_t role, const pd_scenario_worker_t *w,
                              uint64_t bto_ms, uint64_t wto_ms, int is_direct,
                              int is_clock_on_start) {
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
  return mk_open(k, &c);
}

static inline int mk_start(mk_t *k, pd_role_t role, const pd_scenario_worker_t *w, uint64_t bto_ms,
                    uint64_t wto_ms, int is_direct) {
  return mk_start_ex(k, role, w, bto_ms, wto_ms, is_direct, 0);
}

/* Stop the mock; its log stays readable in k->log_buf until mk_free. */
static inline void mk_stop(mk_t *k) {
  pd_mock_del(k->m);
  k->m = NULL;
  mk_read_log(k);
  if (k->log) fclose(k->log);
  k->log = NULL;
}

static inline void mk_free(mk_t *k) {
  if (k->m || k->log) mk_stop(k);
  free(k->log_buf);
  k->log_buf = NULL;
}

/* t_us of the first log line with this event and containing needle (NULL: any); -1 if none.
 * While the mock runs, the lines it has written so far. */
static inline long long log_t(mk_t *k, const char *ev, const char *needle) {
  char want[64];
  mk_read_log(k);
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

/* Wait until the log has that line (log_t >= 0), within limit_ms: its t_us, or -1. */
static inline long long wait_log(mk_t *k, const char *ev, const char *needle, unsigned limit_ms) {
  uint64_t end = pdt_now_ms() + limit_ms;
  long long t;
  while ((t = log_t(k, ev, needle)) < 0 && pdt_now_ms() < end) pdt_sleep_ms(2);
  return t;
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


/* Worker i of the default scenario (0: prefill p0, 1: decode d0), to add faults to. */
static inline pd_scenario_worker_t pdt_default_worker(uint32_t i) {
  pd_scenario_worker_t w;
  pd_scenario_t *s = calloc(1, sizeof *s);
  memset(&w, 0, sizeof w);
  if (!s) return w;
  pd_scenario_defaults(s);
  w = s->workers[i];
  free(s);
  return w;
}

static inline void add_fault(pd_scenario_worker_t *w, pd_fault_kind_t k, int status, uint32_t after,
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
