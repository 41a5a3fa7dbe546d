/* pd_sse: an incremental Server-Sent-Events framer. Bytes go in as they arrive from the
 * wire, in any chunking (an event split over several chunks, several events in one chunk);
 * complete events come out. Only what SGLang writes matters: `data:` lines ended by a blank
 * line, LF or CRLF line ends. The `[DONE]` sentinel and `{"error":...}` payloads are
 * classified so callers need not re-parse them. Fuzzed (fuzz/fuzz_sse.c). */
#ifndef PD_SSE_H
#define PD_SSE_H
#include <stddef.h>
#include <stdint.h>

#include "pd_alloc.h"

/* Largest event we buffer (bytes as received, which bound its payload). A longer event is
 * a protocol error: SGLang events are a few KiB; 4 MiB bounds memory per leg. */
#define PD_SSE_MAX_EVENT_BYTES (4u * 1024u * 1024u)

typedef enum {
  PD_SSE_DATA = 0,  /* ordinary data event (JSON payload, not classified further) */
  PD_SSE_DONE = 1,  /* data: [DONE] */
  PD_SSE_ERROR = 2, /* data payload is a JSON object with a top-level "error" member */
} pd_sse_kind_t;

typedef struct pd_sse_event {
  pd_sse_kind_t kind;
  const char *data; /* payload: the data lines joined by '\n', NUL-terminated; valid until
                       the next pd_sse_next/pd_sse_feed/pd_sse_free call */
  size_t len;
  const uint8_t *raw; /* the event's bytes exactly as received, including the terminating
                         blank line; valid until the next pd_sse_feed/pd_sse_free call */
  size_t raw_len;
} pd_sse_event_t;

typedef struct pd_sse {
  const pd_alloc_t *alloc;
  uint8_t *buf; /* unconsumed bytes */
  size_t len, cap;
  size_t scan; /* how far buf has been searched for an event end */
  char *payload;
  size_t payload_cap;
  size_t consumed; /* bytes at the front of buf already returned as events (dropped on
                      the next feed) */
  int is_broken;   /* an event exceeded PD_SSE_MAX_EVENT_BYTES */
} pd_sse_t;

void pd_sse_init(pd_sse_t *s, const pd_alloc_t *alloc);
void pd_sse_free(pd_sse_t *s);

/* Append bytes. Returns 0, PD_ERR_NOMEM, or PD_ERR_TOO_LARGE when the pending event would
 * exceed PD_SSE_MAX_EVENT_BYTES (the framer is then broken and rejects further input). */
int pd_sse_feed(pd_sse_t *s, const uint8_t *data, size_t len);

/* Take the next complete event. Returns 1 and fills *ev, 0 when no complete event is
 * buffered, PD_ERR_NOMEM, or PD_ERR_TOO_LARGE once the framer is broken. Events are returned
 * in order, each exactly once. Comment lines (": ...") and fields other than data are
 * ignored; an event with no data lines is skipped. */
int pd_sse_next(pd_sse_t *s, pd_sse_event_t *ev);

/* Bytes buffered that do not yet form a complete event. */
size_t pd_sse_pending(const pd_sse_t *s);

/* Classify one payload (used by pd_sse_next; exposed for tests). */
pd_sse_kind_t pd_sse_classify(const char *data, size_t len);

#endif
