/* pd_trace_write: the kept events as Chrome/Perfetto trace-event JSON (an array).
 *
 * Lanes: each (process, group)'s spans, sorted by start, go to the lowest lane whose last span
 * ended by then, so a group has as many lanes (threads) as its spans ever overlapped; an
 * instant goes to the lane of the span with its process and key, else lane 0. Lanes are
 * numbered (tid) from TID0 across the whole file in process, group and lane order: a tid is
 * never reused by another process nor equal to a pid (viewers may key threads by tid alone,
 * and take tid == pid for a process's main thread). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pd_trace.h"

#define TID0 1000u /* above every pid (PD_TRACE_WORKER + the most workers) */

typedef struct group_lanes {
  uint32_t pid, group, n;
  uint64_t base; /* the tid of lane 0 */
} group_lanes_t;

typedef struct key_lane {
  uint32_t pid, group, lane;
  uint64_t key;
} key_lane_t;

typedef struct lanes {
  group_lanes_t *g;
  size_t n_g;
  key_lane_t *k;
  size_t n_k;
} lanes_t;

/* ---------- packing spans onto lanes ---------- */

/* A span's sort key (qsort has no context argument: the fields travel with the index). */
typedef struct span {
  uint32_t pid, group;
  uint64_t t0, t1;
  size_t idx;
} span_t;

static int cmp_span(const void *a, const void *b) {
  const span_t *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->group != y->group) return x->group < y->group ? -1 : 1;
  if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
  if (x->t1 != y->t1) return x->t1 > y->t1 ? -1 : 1; /* the longer first */
  return x->idx < y->idx ? -1 : 1;
}

static int cmp_key(const void *a, const void *b) {
  const key_lane_t *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return 0;
}

/* The lowest lane free at t0 (ends[] grows by one when none is). */
static uint32_t take_lane(uint64_t **ends, uint32_t *n, uint32_t *cap, uint64_t t0, uint64_t t1) {
  uint32_t i = 0;
  while (i < *n && (*ends)[i] > t0) i++; /* bounded by n */
  if (i == *n) {
    if (*n == *cap) {
      uint32_t c = *cap ? 2 * *cap : 64;
      uint64_t *p = realloc(*ends, c * sizeof *p);
      if (!p) return 0; /* out of memory: lane 0, overlapping (the file stays valid) */
      *ends = p;
      *cap = c;
    }
    (*n)++;
  }
  (*ends)[i] = t1;
  return i;
}

static group_lanes_t *group_of(lanes_t *l, uint32_t pid, uint32_t group, size_t cap) {
  for (size_t i = 0; i < l->n_g; i++)
    if (l->g[i].pid == pid && l->g[i].group == group) return &l->g[i];
  if (l->n_g == cap) return NULL;
  l->g[l->n_g] = (group_lanes_t){pid, group, 0, 0};
  return &l->g[l->n_g++];
}

/* Spans onto lanes, in (process, group, start) order; each span's key remembered. */
static void pack_spans(pd_trace_t *t, lanes_t *l, span_t *sp, size_t n, size_t cap_g) {
  qsort(sp, n, sizeof *sp, cmp_span);
  uint64_t *ends = NULL;
  uint32_t n_ends = 0, cap_ends = 0;
  group_lanes_t *g = NULL;
  for (size_t i = 0; i < n; i++) {
    pd_trace_rec_t *r = &t->recs[sp[i].idx];
    if (i == 0 || r->pid != sp[i - 1].pid || r->group != sp[i - 1].group) { /* a new group */
      n_ends = 0;
      g = group_of(l, r->pid, r->group, cap_g);
    }
    r->lane = take_lane(&ends, &n_ends, &cap_ends, r->t0, r->t1);
    if (g && g->n < n_ends) g->n = n_ends;
    l->k[l->n_k++] = (key_lane_t){r->pid, r->group, r->lane, r->key};
  }
  free(ends);
  qsort(l->k, l->n_k, sizeof *l->k, cmp_key);
}

/* Instants onto their span's lane; counters have none. */
static void place_instants(pd_trace_t *t, lanes_t *l, size_t cap_g) {
  group_lanes_t *g = NULL;
  for (size_t i = 0; i < t->n_recs; i++) {
    pd_trace_rec_t *r = &t->recs[i];
    if (r->ph != 'i') continue;
    key_lane_t want = {r->pid, 0, 0, r->key};
    const key_lane_t *k = l->n_k ? bsearch(&want, l->k, l->n_k, sizeof want, cmp_key) : NULL;
    r->group = k ? k->group : 0;
    r->lane = k ? k->lane : 0;
    if (!g || g->pid != r->pid || g->group != r->group) g = group_of(l, r->pid, r->group, cap_g);
    if (g && g->n <= r->lane) g->n = r->lane + 1;
  }
}

static int cmp_group(const void *a, const void *b) {
  const group_lanes_t *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  return x->group < y->group ? -1 : x->group > y->group;
}

/* Groups in (process, group) order, each lane a tid: TID0, TID0 + 1, ... across the file. */
static void number_lanes(lanes_t *l) {
  qsort(l->g, l->n_g, sizeof *l->g, cmp_group);
  uint64_t next = TID0;
  for (size_t i = 0; i < l->n_g; i++) {
    l->g[i].base = next;
    next += l->g[i].n;
  }
}

/* The event's tid: its group's first lane + its lane. */
static uint64_t tid_of(const lanes_t *l, const pd_trace_rec_t *r) {
  group_lanes_t want = {r->pid, r->group, 0, 0};
  const group_lanes_t *g = l->n_g ? bsearch(&want, l->g, l->n_g, sizeof want, cmp_group) : NULL;
  return (g ? g->base : TID0) + r->lane;
}

static void assign_lanes(pd_trace_t *t, lanes_t *l) {
  size_t n_spans = 0;
  for (size_t i = 0; i < t->n_recs; i++) n_spans += t->recs[i].ph == 'X';
  size_t cap_g = t->n_recs + 1; /* at most one group per event */
  span_t *sp = malloc((n_spans + 1) * sizeof *sp);
  l->g = malloc(cap_g * sizeof *l->g);
  l->k = malloc((n_spans + 1) * sizeof *l->k);
  if (!sp || !l->g || !l->k) { /* out of memory: every event on lane 0 of its group */
    free(l->k);
    l->k = NULL;
    free(sp);
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < t->n_recs; i++) {
    const pd_trace_rec_t *r = &t->recs[i];
    if (r->ph == 'X') sp[n++] = (span_t){r->pid, r->group, r->t0, r->t1, i};
  }
  pack_spans(t, l, sp, n, cap_g);
  place_instants(t, l, cap_g);
  number_lanes(l);
  free(sp);
}

/* ---------- writing ---------- */

/* A JSON string's body (names come from scenario files). */
static void write_str_body(FILE *f, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) { /* bounded by the NUL */
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
}

/* The separator before the next event: none before the first. */
static void sep(FILE *f, int *n) { fputs((*n)++ ? ",\n" : "\n", f); }

static const pd_trace_name_t *name_of(const pd_trace_t *t, uint32_t pid, uint32_t group) {
  for (size_t i = 0; i < t->n_names; i++)
    if (t->names[i].pid == pid && t->names[i].group == group) return &t->names[i];
  return NULL;
}

static void write_processes(pd_trace_t *t, int *n_out) {
  for (size_t i = 0; i < t->n_names; i++) {
    const pd_trace_name_t *n = &t->names[i];
    if (n->group != UINT32_MAX) continue;
    sep(t->out, n_out);
    fprintf(t->out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRIu32
                    ",\"args\":{\"name\":\"", n->pid);
    write_str_body(t->out, n->name);
    fprintf(t->out, "\"}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%" PRIu32
                    ",\"args\":{\"sort_index\":%d}}", n->pid, n->sort);
  }
}

/* Each lane a thread named "<group's lane name> <lane>", ordered by group then lane. */
static void write_threads(pd_trace_t *t, const lanes_t *l, int *n_out) {
  for (size_t i = 0; i < l->n_g; i++) {
    const group_lanes_t *g = &l->g[i];
    const pd_trace_name_t *nm = name_of(t, g->pid, g->group);
    for (uint32_t lane = 0; lane < g->n; lane++) {
      uint64_t tid = g->base + lane;
      sep(t->out, n_out);
      fprintf(t->out, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%" PRIu32 ",\"tid\":%" PRIu64
                      ",\"args\":{\"name\":\"", g->pid, tid);
      write_str_body(t->out, nm ? nm->name : "lane");
      fprintf(t->out, " %" PRIu32 "\"}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%"
                      PRIu32 ",\"tid\":%" PRIu64 ",\"args\":{\"sort_index\":%" PRIu64 "}}",
              lane, g->pid, tid, tid);
    }
  }
}

void pd_trace_write(pd_trace_t *t) {
  lanes_t l = {NULL, 0, NULL, 0};
  assign_lanes(t, &l);
  int n_out = 0;
  fputs("[", t->out);
  write_processes(t, &n_out);
  write_threads(t, &l, &n_out);
  for (size_t i = 0; i < t->n_recs; i++) {
    const pd_trace_rec_t *r = &t->recs[i];
    sep(t->out, &n_out);
    if (r->ph == 'C') fprintf(t->out, "{\"pid\":%" PRIu32 ",", r->pid);
    else
      fprintf(t->out, "{\"pid\":%" PRIu32 ",\"tid\":%" PRIu64 ",", r->pid, tid_of(&l, r));
    fwrite(t->text + r->off, 1, r->len, t->out);
  }
  fputs("\n]\n", t->out);
  free(l.g);
  free(l.k);
}
