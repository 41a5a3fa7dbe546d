#include "pd_trace.h"

#include <stdlib.h>
#include <string.h>

#include "pd_hash.h"
#include "pd_rqstate.h"

/* ---------- the hash: binary fields, one 64-bit word at a time ---------- */

/* Each step is a bijection of h ^ v (xorshift, odd multiply, xorshift: pd_hash_mix64), so two
 * event streams that differ in one word always hash differently. */
static uint64_t mix(uint64_t h, uint64_t v) { return pd_hash_mix64(h ^ v); }

/* A string: its length, then its bytes eight at a time, least significant first. */
static uint64_t mix_str(uint64_t h, const char *s) {
  size_t n = s ? strlen(s) : 0;
  h = mix(h, n);
  for (size_t i = 0; i < n; i += 8) { /* bounded by n */
    uint64_t w = 0;
    for (size_t k = 0; k < 8 && i + k < n; k++) w |= (uint64_t)(unsigned char)s[i + k] << 8 * k;
    h = mix(h, w);
  }
  return h;
}

static uint64_t mix_args(uint64_t h, const pd_trace_arg_t *a, uint32_t n) {
  h = mix(h, n);
  for (uint32_t i = 0; i < n; i++) { /* keys and kinds are the code's, fixed: values only */
    if (a[i].kind == PD_TRACE_STR) h = mix_str(h, a[i].s);
    else if (a[i].kind == PD_TRACE_IDS) {
      h = mix(h, a[i].n);
      for (uint32_t k = 0; k < a[i].n; k++) h = mix(h, a[i].ids[k]);
    } else h = mix(h, a[i].u);
  }
  return h;
}

static void hash_event(pd_trace_t *t, const pd_trace_ev_t *e) {
  uint64_t h = mix(t->hash, (uint64_t)(unsigned char)e->ph << 32 | e->pid);
  h = mix(h, e->group);
  h = mix(h, e->key);
  h = e->name_id ? mix(h, e->name_id) : mix_str(h, e->name);
  h = mix(h, e->num);
  h = mix(h, e->t0);
  h = mix(h, e->ph == 'X' ? e->t1 : 0);
  t->hash = mix_args(h, e->args, e->n_args);
  t->events++;
}

/* ---------- text, only when writing: appended to the trace's arena ---------- */

static int text_reserve(pd_trace_t *t, size_t more) {
  if (t->n_text + more <= t->cap_text) return 0;
  size_t cap = t->cap_text ? t->cap_text : 4096;
  while (cap < t->n_text + more) cap *= 2; /* bounded: doubles past any size_t request */
  char *p = realloc(t->text, cap);
  if (!p) return -1;
  t->text = p;
  t->cap_text = cap;
  return 0;
}

static void put(pd_trace_t *t, const char *s, size_t n) {
  if (t->err || text_reserve(t, n)) {
    t->err = 1;
    return;
  }
  memcpy(t->text + t->n_text, s, n);
  t->n_text += n;
}

static void puts_(pd_trace_t *t, const char *s) { put(t, s, strlen(s)); }

static void put_u64(pd_trace_t *t, uint64_t x) {
  char d[20];
  size_t i = sizeof d;
  do {
    d[--i] = (char)('0' + x % 10);
    x /= 10;
  } while (x && i > 0);
  put(t, d + i, sizeof d - i);
}

/* Nanoseconds as microseconds with exactly three decimals: 1234567 -> 1234.567. */
static void put_us(pd_trace_t *t, uint64_t ns) {
  uint64_t r = ns % 1000;
  char frac[4] = {'.', (char)('0' + r / 100), (char)('0' + r / 10 % 10), (char)('0' + r % 10)};
  put_u64(t, ns / 1000);
  put(t, frac, sizeof frac);
}

static void put_escape(pd_trace_t *t, unsigned char c) {
  static const char hex[] = "0123456789abcdef";
  char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
  switch (c) {
  case '"': put(t, "\\\"", 2); break;
  case '\\': put(t, "\\\\", 2); break;
  case '\n': put(t, "\\n", 2); break;
  case '\r': put(t, "\\r", 2); break;
  case '\t': put(t, "\\t", 2); break;
  default: put(t, u, sizeof u); break;
  }
}

/* The body of a JSON string (no quotes); runs of plain bytes are copied in one piece. Bytes
 * >= 0x80 pass through (names are expected to be UTF-8). */
static void put_str_body(pd_trace_t *t, const char *s) {
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  while (*p) { /* bounded by the string's NUL */
    const unsigned char *run = p;
    while (*p >= 0x20 && *p != '"' && *p != '\\') p++;
    put(t, (const char *)run, (size_t)(p - run));
    if (*p) put_escape(t, *p++);
  }
}

static void put_str(pd_trace_t *t, const char *s) {
  put(t, "\"", 1);
  put_str_body(t, s);
  put(t, "\"", 1);
}

/* The event's name: "%u" (first only) replaced by num. */
static void put_name(pd_trace_t *t, const char *name, uint64_t num) {
  const char *pc = name ? strstr(name, "%u") : NULL;
  put(t, "\"", 1);
  if (!pc) put_str_body(t, name);
  else {
    char head[128];
    size_t n = (size_t)(pc - name) < sizeof head - 1 ? (size_t)(pc - name) : sizeof head - 1;
    memcpy(head, name, n);
    head[n] = 0;
    put_str_body(t, head);
    put_u64(t, num);
    put_str_body(t, pc + 2);
  }
  put(t, "\"", 1);
}

static void put_invs(pd_trace_t *t, uint64_t m) {
  int first = 1;
  put(t, "\"", 1);
  for (int i = 0; i < 64; i++)
    if (m >> i & 1u) {
      put(t, first ? "I" : ",I", first ? 1 : 2);
      put_u64(t, (uint64_t)i + 1);
      first = 0;
    }
  put(t, "\"", 1);
}

static void put_arg(pd_trace_t *t, const pd_trace_arg_t *a) {
  put(t, "\"", 1);
  puts_(t, a->key);
  put(t, "\":", 2);
  switch (a->kind) {
  case PD_TRACE_U64: put_u64(t, a->u); break;
  case PD_TRACE_BOOL: puts_(t, a->u ? "true" : "false"); break;
  case PD_TRACE_ID: put(t, "\"", 1); put_u64(t, a->u); put(t, "\"", 1); break;
  case PD_TRACE_STR: case PD_TRACE_ENUM: put_str(t, a->s); break;
  case PD_TRACE_INVS: put_invs(t, a->u); break;
  case PD_TRACE_IDS:
    put(t, "[", 1);
    for (uint32_t i = 0; i < a->n; i++) {
      put(t, i ? ",\"" : "\"", i ? 2 : 1);
      put_u64(t, a->ids[i]);
      put(t, "\"", 1);
    }
    put(t, "]", 1);
    break;
  }
}

static void put_args(pd_trace_t *t, const pd_trace_arg_t *a, uint32_t n) {
  put(t, ",\"args\":{", 9);
  for (uint32_t i = 0; i < n; i++) {
    if (i) put(t, ",", 1);
    put_arg(t, &a[i]);
  }
  put(t, "}", 1);
}

static void keep(pd_trace_t *t, char ph, uint32_t pid, uint32_t group, uint64_t key, uint64_t t0,
                 uint64_t t1, size_t off) {
  if (t->err) return;
  if (t->n_recs == t->cap_recs) {
    size_t cap = t->cap_recs ? 2 * t->cap_recs : 256;
    pd_trace_rec_t *p = realloc(t->recs, cap * sizeof *p);
    if (!p) {
      t->err = 1;
      return;
    }
    t->recs = p;
    t->cap_recs = cap;
  }
  t->recs[t->n_recs++] = (pd_trace_rec_t){ph, pid, group, 0, key, t0, t1, off, t->n_text - off};
}

/* The event's JSON after its pid and tid: "name","ph","ts"[,"dur"][,"s"],"args"}. */
static void put_event(pd_trace_t *t, const pd_trace_ev_t *e) {
  size_t off = t->n_text;
  puts_(t, "\"name\":");
  put_name(t, e->name, e->num);
  puts_(t, e->ph == 'X' ? ",\"ph\":\"X\",\"ts\":" : ",\"ph\":\"i\",\"s\":\"t\",\"ts\":");
  put_us(t, e->t0);
  if (e->ph == 'X') {
    puts_(t, ",\"dur\":");
    put_us(t, e->t1 > e->t0 ? e->t1 - e->t0 : 0); /* a reversed span is shown empty */
  }
  put_args(t, e->args, e->n_args);
  put(t, "}", 1);
  keep(t, e->ph, e->pid, e->group, e->key, e->t0, e->t1 > e->t0 ? e->t1 : e->t0, off);
}

/* ---------- the API ---------- */

void pd_trace_init(pd_trace_t *t, FILE *out) {
  memset(t, 0, sizeof *t);
  t->out = out;
  t->hash = PD_FNV1A_OFFSET;
}

void pd_trace_emit(pd_trace_t *t, const pd_trace_ev_t *e) {
  hash_event(t, e);
  if (t->out) put_event(t, e);
}

void pd_trace_name(pd_trace_t *t, uint32_t pid, uint32_t group, int sort, const char *name) {
  if (!t->out || t->err) return;
  if (t->n_names == t->cap_names) {
    size_t cap = t->cap_names ? 2 * t->cap_names : 32;
    pd_trace_name_t *p = realloc(t->names, cap * sizeof *p);
    if (!p) {
      t->err = 1;
      return;
    }
    t->names = p;
    t->cap_names = cap;
  }
  char *copy = strdup(name ? name : "");
  if (!copy) {
    t->err = 1;
    return;
  }
  t->names[t->n_names++] = (pd_trace_name_t){pid, group, sort, copy};
}

void pd_trace_counter(pd_trace_t *t, uint32_t pid, const char *name, uint64_t t_ns,
                      const pd_trace_arg_t *args, uint32_t n_args) {
  if (!t->out) return;
  size_t off = t->n_text;
  puts_(t, "\"name\":");
  put_str(t, name);
  puts_(t, ",\"ph\":\"C\",\"ts\":");
  put_us(t, t_ns);
  put_args(t, args, n_args);
  put(t, "}", 1);
  keep(t, 'C', pid, 0, 0, t_ns, t_ns, off);
}

void pd_trace_on_transition(void *ctx, const pd_transition_t *tr) {
  pd_trace_t *t = ctx;
  int is_rq = tr->machine == PD_MACHINE_REQUEST;
  uint32_t pid = is_rq ? PD_TRACE_CLIENTS : PD_TRACE_GATEWAY;
  uint64_t key = is_rq ? tr->req_id : tr->leg_id;
  uint64_t h = mix(t->hash, (uint64_t)'T' << 32 | pid);
  h = mix(h, key);
  h = mix(h, (uint64_t)(uint32_t)tr->from << 32 | (uint32_t)tr->to);
  t->hash = mix(h, tr->now_ns);
  t->events++;
  if (!t->out) return;
  const char *from = is_rq ? pd_rq_state_name(tr->from) : pd_leg_state_name(tr->from);
  const char *to = is_rq ? pd_rq_state_name(tr->to) : pd_leg_state_name(tr->to);
  char name[64];
  snprintf(name, sizeof name, "%s %s->%s", is_rq ? "rq" : "leg", from ? from : "?", to ? to : "?");
  pd_trace_arg_t a[3] = {PD_TRACE_ARG_ID(is_rq ? "req" : "leg", key),
                         PD_TRACE_ARG_S("file", tr->file), PD_TRACE_ARG_U("line", tr->line)};
  pd_trace_ev_t e = {'i', pid, 0, key, 0, name, 0, tr->now_ns, tr->now_ns, a, 3};
  put_event(t, &e);
}

uint64_t pd_trace_finish(pd_trace_t *t) {
  if (t->out) {
    pd_trace_write(t);
    fflush(t->out);
    t->out = NULL; /* later events are only hashed */
  }
  free(t->recs);
  free(t->text);
  for (size_t i = 0; i < t->n_names; i++) free(t->names[i].name);
  free(t->names);
  t->recs = NULL;
  t->text = NULL;
  t->names = NULL;
  t->n_recs = t->cap_recs = t->n_text = t->cap_text = t->n_names = t->cap_names = 0;
  return t->hash;
}
