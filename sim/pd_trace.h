/* pd_trace: a simulated run's semantic events (spans, instants), their 64-bit hash, and, when
 * a file is asked for, Chrome/Perfetto trace-event JSON.
 *
 * The hash (I13: same seed, same hash) is taken over each span's and instant's binary fields
 * (kind, process, group, key, name bytes and number, times, argument values) as it is
 * recorded, whether or not a file is written; text is formatted only for a file. Counters
 * and metadata are written, never hashed (they exist only when a file is written).
 *
 * Tracks. An event names a process (pid: PD_TRACE_CLIENTS, PD_TRACE_GATEWAY or
 * PD_TRACE_WORKER + worker index), a group inside it (the gateway's legs are grouped by
 * worker) and a key: the entity it belongs to (request id, leg id). The writer packs each
 * group's spans onto as few lanes (threads) as never overlap, greedily by start time, so a
 * track is a slot of concurrency, not an entity; an instant goes to the lane of the span with
 * its process and key (lane 0 if none). docs/traces.md describes the tracks. */
#ifndef PD_TRACE_H
#define PD_TRACE_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum {
  PD_TRACE_CLIENTS = 1, /* one span per client request, its transitions */
  PD_TRACE_GATEWAY = 2, /* one span per leg the gateway opened, grouped by worker */
  PD_TRACE_WORKER = 10, /* + worker index: one span per running slot held, counters */
};

/* An argument's value kind; key is a literal of plain characters (not escaped, not hashed). */
typedef enum pd_trace_arg_kind {
  PD_TRACE_U64,  /* u: a number */
  PD_TRACE_BOOL, /* u: true when non-zero */
  PD_TRACE_ID,   /* u: a 64-bit id, written as a decimal string (exact in any reader) */
  PD_TRACE_IDS,  /* ids[0..n): an array of ids as strings */
  PD_TRACE_STR,  /* s: a string (escaped; NULL is ""), hashed as its bytes */
  PD_TRACE_ENUM, /* u: a value that s names (a state, a worker): hashed as u, written as s */
  PD_TRACE_INVS, /* u: an invariant bit set (bit i-1 = Ii), written "I2,I14" ("" if none) */
} pd_trace_arg_kind_t;

typedef struct pd_trace_arg {
  const char *key;
  pd_trace_arg_kind_t kind;
  uint64_t u;
  const char *s;
  const uint64_t *ids;
  uint32_t n;
} pd_trace_arg_t;

#define PD_TRACE_ARG_U(k, v) ((pd_trace_arg_t){(k), PD_TRACE_U64, (uint64_t)(v), NULL, NULL, 0})
#define PD_TRACE_ARG_B(k, v) ((pd_trace_arg_t){(k), PD_TRACE_BOOL, (uint64_t)!!(v), NULL, NULL, 0})
#define PD_TRACE_ARG_ID(k, v) ((pd_trace_arg_t){(k), PD_TRACE_ID, (uint64_t)(v), NULL, NULL, 0})
#define PD_TRACE_ARG_S(k, v) ((pd_trace_arg_t){(k), PD_TRACE_STR, 0, (v), NULL, 0})
#define PD_TRACE_ARG_E(k, v, name) ((pd_trace_arg_t){(k), PD_TRACE_ENUM, (uint64_t)(v), (name), NULL, 0})

/* Names the hash covers as a number (PD_TRACE_ID_NONE: as the name's bytes). */
enum {
  PD_TRACE_ID_NONE = 0,
  PD_TRACE_ID_REQUEST,
  PD_TRACE_ID_REQUEST_VIOLATION,
  PD_TRACE_ID_PREFILL,
  PD_TRACE_ID_DECODE,
  PD_TRACE_ID_CLIENT_GONE,
  PD_TRACE_ID_ABORT_SENT,
  PD_TRACE_ID_ABORT_RECEIVED,
  PD_TRACE_ID_CRASH,
  PD_TRACE_ID_RESTART,
};

/* One span ('X', [t0, t1]) or instant ('i', at t0). name may hold "%u" once, written as num;
 * hashed as name_id (PD_TRACE_ID_*, one per fixed name) or, if 0, the name's bytes, and num. */
typedef struct pd_trace_ev {
  char ph;
  uint32_t pid, group;
  uint64_t key;
  uint32_t name_id;
  const char *name;
  uint64_t num;
  uint64_t t0, t1;
  const pd_trace_arg_t *args;
  uint32_t n_args;
} pd_trace_ev_t;

/* An event kept for the file until pd_trace_finish (text is the JSON after "tid"). */
typedef struct pd_trace_rec {
  char ph;
  uint32_t pid, group, lane;
  uint64_t key, t0, t1;
  size_t off, len; /* in the trace's text arena */
} pd_trace_rec_t;

/* A process's name and the name its groups' lanes carry ("slot", "p0 legs"). */
typedef struct pd_trace_name {
  uint32_t pid, group; /* group UINT32_MAX: the process's own name */
  int sort;
  char *name;
} pd_trace_name_t;

typedef struct pd_trace {
  FILE *out;     /* NULL: hash only */
  uint64_t hash; /* over every span and instant's binary fields */
  uint64_t events; /* spans and instants recorded */
  int err;         /* a record or name was lost (out of memory): the file is incomplete */
  /* kept only when writing */
  pd_trace_rec_t *recs;
  size_t n_recs, cap_recs;
  char *text;
  size_t n_text, cap_text;
  pd_trace_name_t *names;
  size_t n_names, cap_names;
} pd_trace_t;

/* Start a trace; out may be NULL (hash only). Nothing is written before pd_trace_finish. */
void pd_trace_init(pd_trace_t *t, FILE *out);
/* Record a span or instant: hashed, and kept for the file when writing. */
void pd_trace_emit(pd_trace_t *t, const pd_trace_ev_t *e);
/* Name a process (sort: its place in the viewer, lower first), or (group != UINT32_MAX) the
 * lanes of one of its groups: lanes are named "<name> <lane>". Only kept when writing. */
void pd_trace_name(pd_trace_t *t, uint32_t pid, uint32_t group, int sort, const char *name);
/* Counter sample ("ph":"C") at t_ns on process pid: each arg (numbers) is one counter track,
 * "<name> <key>" in Perfetto. Only written, never hashed. */
void pd_trace_counter(pd_trace_t *t, uint32_t pid, const char *name, uint64_t t_ns,
                      const pd_trace_arg_t *args, uint32_t n_args);
/* The core's transition hook (pd_gw_set_transition_hook, ctx = the trace): each request or
 * leg transition is an instant "rq HEADS->STREAM" / "leg OPEN->HEAD" on the request's key
 * (PD_TRACE_CLIENTS) or the leg's (PD_TRACE_GATEWAY). Hashed as machine, states, ids and
 * time; the core file and line are written in args, not hashed (moving code keeps the hash). */
struct pd_transition;
void pd_trace_on_transition(void *ctx, const struct pd_transition *tr);
/* Write the file (when writing: metadata, then every event on its lane), free what was kept
 * and return the hash. Events recorded later are only hashed. */
uint64_t pd_trace_finish(pd_trace_t *t);

/* pd_trace_write.c: pack the kept spans onto lanes and write the JSON array to t->out. */
void pd_trace_write(pd_trace_t *t);

#endif
