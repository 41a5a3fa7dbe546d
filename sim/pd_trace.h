/* pd_trace: Chrome/Perfetto trace-event JSON for a simulated run, and a running 64-bit hash
 * (FNV-1a) over every recorded event whether or not a file is written, so determinism is
 * testable: same seed, same hash. Tracks (tid) are one per client request, per leg and per
 * worker slot; the writer does not care what they are. */
#ifndef PD_TRACE_H
#define PD_TRACE_H
#include <stdint.h>
#include <stdio.h>

typedef struct pd_trace {
  FILE *out;     /* NULL: hash only */
  uint64_t hash; /* FNV-1a 64 over the canonical text of every event */
  uint64_t events;
  int need_comma;
} pd_trace_t;

/* Start a trace; out may be NULL (hash only). Writes the JSON array opening. */
void pd_trace_init(pd_trace_t *t, FILE *out);
/* Name a track: pid groups tracks (1 = clients, 2 = prefill workers, 3 = decode workers,
 * 4 = gateway legs), tid is the track. Emits a thread_name metadata event. */
void pd_trace_track(pd_trace_t *t, uint32_t pid, uint64_t tid, const char *name);
/* Complete span [t0, t1] in ns on (pid, tid) ("ph":"X"); args_json is NULL or the text of a
 * JSON object (already valid JSON, copied verbatim). */
void pd_trace_span(pd_trace_t *t, uint32_t pid, uint64_t tid, const char *name,
                   uint64_t t0_ns, uint64_t t1_ns, const char *args_json);
/* Instant event ("ph":"i") at t_ns. */
void pd_trace_instant(pd_trace_t *t, uint32_t pid, uint64_t tid, const char *name,
                      uint64_t t_ns, const char *args_json);
/* Counter sample ("ph":"C") at t_ns on process pid: each key of args_json (a JSON object of
 * numbers) is one counter track named "<name> <key>" in Perfetto. */
void pd_trace_counter(pd_trace_t *t, uint32_t pid, const char *name, uint64_t t_ns,
                      const char *args_json);
/* The core's transition hook (pd_gw_set_transition_hook, ctx = the trace): each request or
 * leg transition becomes an instant named "rq HEADS->STREAM" / "leg OPEN->HEAD" on the
 * request's track (pid 1) or the gateway leg's track (pid 4), with {"file","line"} of the
 * core code that made it in args. */
struct pd_transition;
void pd_trace_on_transition(void *ctx, const struct pd_transition *tr);
/* Close the JSON array (when writing) and return the hash. */
uint64_t pd_trace_finish(pd_trace_t *t);

#endif
