#include "pd_trace.h"

#include <stdio.h>
#include <string.h>

#include "pd_hash.h"
#include "pd_rqstate.h"

/* One event is assembled here and flushed (hashed, then written) whenever it fills, so names
 * and args of any length stream through without allocation. */
#define EV_BUF_BYTES 512

typedef struct ev_buf {
  pd_trace_t *t;
  size_t n;
  char b[EV_BUF_BYTES];
} ev_buf_t;

static void ev_flush(ev_buf_t *e) {
  e->t->hash = pd_fnv1a(e->t->hash, e->b, e->n);
  if (e->t->out && e->n) fwrite(e->b, 1, e->n, e->t->out);
  e->n = 0;
}

static void ev_put(ev_buf_t *e, const char *s, size_t len) {
  while (len > 0) { /* bounded: each pass consumes at least one byte */
    if (e->n == EV_BUF_BYTES) ev_flush(e);
    size_t k = EV_BUF_BYTES - e->n;
    if (k > len) k = len;
    memcpy(e->b + e->n, s, k);
    e->n += k;
    s += k;
    len -= k;
  }
}

static void ev_str(ev_buf_t *e, const char *s) { ev_put(e, s, strlen(s)); }

static void ev_u64(ev_buf_t *e, uint64_t x) {
  char d[20];
  size_t i = sizeof d;
  do {
    d[--i] = (char)('0' + x % 10);
    x /= 10;
  } while (x && i > 0);
  ev_put(e, d + i, sizeof d - i);
}

/* Nanoseconds as microseconds with exactly three decimals: 1234567 -> 1234.567. */
static void ev_us(ev_buf_t *e, uint64_t ns) {
  char frac[4];
  uint64_t r = ns % 1000;
  ev_u64(e, ns / 1000);
  frac[0] = '.';
  frac[1] = (char)('0' + r / 100);
  frac[2] = (char)('0' + r / 10 % 10);
  frac[3] = (char)('0' + r % 10);
  ev_put(e, frac, sizeof frac);
}

static void ev_escape_byte(ev_buf_t *e, unsigned char c) {
  static const char hex[] = "0123456789abcdef";
  char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
  switch (c) {
  case '"': ev_put(e, "\\\"", 2); break;
  case '\\': ev_put(e, "\\\\", 2); break;
  case '\b': ev_put(e, "\\b", 2); break;
  case '\f': ev_put(e, "\\f", 2); break;
  case '\n': ev_put(e, "\\n", 2); break;
  case '\r': ev_put(e, "\\r", 2); break;
  case '\t': ev_put(e, "\\t", 2); break;
  default: ev_put(e, u, sizeof u); break;
  }
}

/* A JSON string literal; runs of plain bytes are copied in one piece. Bytes >= 0x80 pass
 * through (names are expected to be UTF-8). */
static void ev_json_str(ev_buf_t *e, const char *s) {
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  ev_put(e, "\"", 1);
  while (*p) { /* bounded by the string's NUL */
    const unsigned char *run = p;
    while (*p >= 0x20 && *p != '"' && *p != '\\') p++;
    ev_put(e, (const char *)run, (size_t)(p - run));
    if (*p) ev_escape_byte(e, *p++);
  }
  ev_put(e, "\"", 1);
}

/* The file separator is not hashed: the hash covers only each event's canonical text (its
 * JSON object followed by '\n'), so it is the same with or without a file. */
static void ev_begin(ev_buf_t *e, pd_trace_t *t, const char *name, const char *ph) {
  e->t = t;
  e->n = 0;
  if (t->out) fputs(t->need_comma ? ",\n" : "\n", t->out);
  t->need_comma = 1;
  ev_str(e, "{\"name\":");
  ev_json_str(e, name);
  ev_str(e, ",\"ph\":\"");
  ev_str(e, ph);
  ev_str(e, "\"");
}

static void ev_ids(ev_buf_t *e, uint32_t pid, uint64_t tid) {
  ev_str(e, ",\"pid\":");
  ev_u64(e, pid);
  ev_str(e, ",\"tid\":");
  ev_u64(e, tid);
}

static void ev_end(ev_buf_t *e, const char *args_json) {
  if (args_json) {
    ev_str(e, ",\"args\":");
    ev_str(e, args_json);
  }
  ev_put(e, "}", 1);
  ev_flush(e);
  e->t->hash = pd_fnv1a(e->t->hash, "\n", 1);
  e->t->events++;
}

void pd_trace_init(pd_trace_t *t, FILE *out) {
  t->out = out;
  t->hash = PD_FNV1A_OFFSET;
  t->events = 0;
  t->need_comma = 0;
  if (out) fputs("[", out);
}

void pd_trace_track(pd_trace_t *t, uint32_t pid, uint64_t tid, const char *name) {
  ev_buf_t e;
  ev_begin(&e, t, "thread_name", "M");
  ev_ids(&e, pid, tid);
  ev_str(&e, ",\"args\":{\"name\":");
  ev_json_str(&e, name);
  ev_put(&e, "}", 1);
  ev_end(&e, NULL);
}

void pd_trace_span(pd_trace_t *t, uint32_t pid, uint64_t tid, const char *name,
                   uint64_t t0_ns, uint64_t t1_ns, const char *args_json) {
  ev_buf_t e;
  ev_begin(&e, t, name, "X");
  ev_ids(&e, pid, tid);
  ev_str(&e, ",\"ts\":");
  ev_us(&e, t0_ns);
  ev_str(&e, ",\"dur\":");
  ev_us(&e, t1_ns > t0_ns ? t1_ns - t0_ns : 0); /* a reversed span is shown empty */
  ev_end(&e, args_json);
}

void pd_trace_instant(pd_trace_t *t, uint32_t pid, uint64_t tid, const char *name,
                      uint64_t t_ns, const char *args_json) {
  ev_buf_t e;
  ev_begin(&e, t, name, "i");
  ev_str(&e, ",\"s\":\"t\"");
  ev_ids(&e, pid, tid);
  ev_str(&e, ",\"ts\":");
  ev_us(&e, t_ns);
  ev_end(&e, args_json);
}

void pd_trace_counter(pd_trace_t *t, uint32_t pid, const char *name, uint64_t t_ns,
                      const char *args_json) {
  ev_buf_t e;
  ev_begin(&e, t, name, "C");
  ev_str(&e, ",\"pid\":");
  ev_u64(&e, pid);
  ev_str(&e, ",\"ts\":");
  ev_us(&e, t_ns);
  ev_end(&e, args_json);
}

void pd_trace_on_transition(void *ctx, const pd_transition_t *tr) {
  pd_trace_t *t = ctx;
  int is_rq = tr->machine == PD_MACHINE_REQUEST;
  const char *from = is_rq ? pd_rq_state_name(tr->from) : pd_leg_state_name(tr->from);
  const char *to = is_rq ? pd_rq_state_name(tr->to) : pd_leg_state_name(tr->to);
  char name[64], args[128];
  snprintf(name, sizeof name, "%s %s->%s", is_rq ? "rq" : "leg", from ? from : "?",
           to ? to : "?");
  /* file names are core/'s own (no quote or backslash to escape) */
  snprintf(args, sizeof args, "{\"file\":\"%s\",\"line\":%d}", tr->file ? tr->file : "",
           tr->line);
  pd_trace_instant(t, is_rq ? 1u : 4u, is_rq ? tr->req_id : tr->leg_id, name, tr->now_ns, args);
}

uint64_t pd_trace_finish(pd_trace_t *t) {
  if (t->out) {
    fputs("\n]\n", t->out);
    fflush(t->out);
    /* Later events can no longer land after the closing bracket; they are only hashed. */
    t->out = NULL;
  }
  return t->hash;
}
