/* pd_sse: incremental SSE framer. The buffer holds [0, consumed) = events already returned
 * (kept so their `raw` stays valid until the next feed), then pending bytes. Event ends are
 * found by a forward scan that never revisits a byte: a '\n' ends a blank line when the byte
 * before it is '\n' (or "\n\r"), which needs only two bytes of look-back, so byte-by-byte
 * feeding stays linear. */
#include "pd_sse.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "pd_err.h"

#define SSE_MIN_CAP 256u

void pd_sse_init(pd_sse_t *s, const pd_alloc_t *alloc) {
  memset(s, 0, sizeof *s);
  s->alloc = alloc;
}

void pd_sse_free(pd_sse_t *s) {
  const pd_alloc_t *a = s->alloc;
  pd_free(a, s->buf);
  pd_free(a, s->payload);
  memset(s, 0, sizeof *s);
  s->alloc = a;
}

/* Grow *p to hold at least need bytes (doubling; at most one step per bit of size_t). */
static int grow(const pd_alloc_t *a, void **p, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : SSE_MIN_CAP;
  for (int i = 0; i < 64 && n < need; i++) n = n > ((size_t)-1) / 2 ? need : n * 2;
  if (n < need) n = need;
  void *q = pd_realloc(a, *p, n);
  if (!q) return PD_ERR_NOMEM;
  *p = q;
  *cap = n;
  return 0;
}

/* Does the '\n' at i end a blank line? Position 0 is always a line start: the stream start,
 * or (after compaction) the byte after an event's final '\n'. */
static int is_event_end(const uint8_t *b, size_t i) {
  if (b[i] != '\n') return 0;
  if (i == 0 || b[i - 1] == '\n') return 1;
  return b[i - 1] == '\r' && (i == 1 || b[i - 2] == '\n');
}

/* Bytes after the last event end, searching back no further than limit + 1 bytes (a result
 * above limit only says "more than limit"). */
static size_t tail_len(const pd_sse_t *s, size_t limit) {
  size_t lo = s->consumed;
  if (s->len - lo > limit + 1) lo = s->len - limit - 1;
  for (size_t i = s->len; i > lo; i--)
    if (is_event_end(s->buf, i - 1)) return s->len - i;
  return s->len - lo;
}

/* Drop returned events from the front of the buffer (invalidates their raw pointers). */
static void compact(pd_sse_t *s) {
  if (s->consumed == 0) return;
  size_t keep = s->len - s->consumed;
  if (keep) memmove(s->buf, s->buf + s->consumed, keep);
  s->len = keep;
  s->scan = s->scan > s->consumed ? s->scan - s->consumed : 0;
  s->consumed = 0;
}

int pd_sse_feed(pd_sse_t *s, const uint8_t *data, size_t len) {
  if (s->is_broken) return PD_ERR_TOO_LARGE;
  if (len == 0) return 0;
  compact(s);
  if (len > ((size_t)-1) - s->len) {
    s->is_broken = 1;
    return PD_ERR_TOO_LARGE;
  }
  void *p = s->buf;
  int rc = grow(s->alloc, &p, &s->cap, s->len + len);
  s->buf = p;
  if (rc < 0) return rc;
  memcpy(s->buf + s->len, data, len);
  s->len += len;
  if (s->len > PD_SSE_MAX_EVENT_BYTES && tail_len(s, PD_SSE_MAX_EVENT_BYTES) >
                                             PD_SSE_MAX_EVENT_BYTES) {
    s->is_broken = 1;
    return PD_ERR_TOO_LARGE;
  }
  return 0;
}

/* Append the value of one data line to the payload (joined by '\n'). */
static void add_data_line(pd_sse_t *s, size_t *plen, int *has_data, const uint8_t *v,
                          size_t n) {
  if (n > 0 && v[0] == ' ') {
    v++;
    n--;
  }
  if (*has_data) s->payload[(*plen)++] = '\n';
  if (n) memcpy(s->payload + *plen, v, n);
  *plen += n;
  *has_data = 1;
}

/* Build the payload of the event buf[start, end) (end is just past its blank line). The
 * payload is never longer than the event, so one reservation of end - start + 1 suffices. */
static int build_payload(pd_sse_t *s, size_t start, size_t end, size_t *plen, int *has_data) {
  void *p = s->payload;
  int rc = grow(s->alloc, &p, &s->payload_cap, end - start + 1);
  s->payload = p;
  if (rc < 0) return rc;
  *plen = 0;
  *has_data = 0;
  size_t pos = start;
  while (pos < end) { /* each pass consumes one line, so at most end - start passes */
    const uint8_t *line = s->buf + pos;
    const uint8_t *nl = memchr(line, '\n', end - pos);
    size_t n = nl ? (size_t)(nl - line) : end - pos;
    pos += n + 1;
    if (n > 0 && line[n - 1] == '\r') n--;
    if (n == 0) break; /* the blank line that ends the event */
    if (line[0] == ':') continue; /* comment */
    const uint8_t *colon = memchr(line, ':', n);
    size_t name_len = colon ? (size_t)(colon - line) : n;
    if (name_len != 4 || memcmp(line, "data", 4) != 0) continue; /* other fields */
    size_t vstart = colon ? name_len + 1 : n;
    add_data_line(s, plen, has_data, line + vstart, n - vstart);
  }
  s->payload[*plen] = '\0';
  return 0;
}

int pd_sse_next(pd_sse_t *s, pd_sse_event_t *ev) {
  if (s->is_broken) return PD_ERR_TOO_LARGE;
  if (s->scan < s->consumed) s->scan = s->consumed;
  while (s->scan < s->len) { /* scan only moves forward, so bounded by len */
    const uint8_t *nl = memchr(s->buf + s->scan, '\n', s->len - s->scan);
    if (!nl) {
      s->scan = s->len;
      break;
    }
    size_t i = (size_t)(nl - s->buf);
    s->scan = i + 1;
    if (!is_event_end(s->buf, i)) continue;
    size_t start = s->consumed, end = i + 1;
    s->consumed = end;
    if (end - start > PD_SSE_MAX_EVENT_BYTES) {
      s->is_broken = 1;
      return PD_ERR_TOO_LARGE;
    }
    size_t plen = 0;
    int has_data = 0;
    int rc = build_payload(s, start, end, &plen, &has_data);
    if (rc < 0) return rc;
    if (!has_data) continue; /* comments only, or a stray blank line */
    ev->kind = pd_sse_classify(s->payload, plen);
    ev->data = s->payload;
    ev->len = plen;
    ev->raw = s->buf + start;
    ev->raw_len = end - start;
    return 1;
  }
  return 0;
}

size_t pd_sse_pending(const pd_sse_t *s) {
  if (s->len <= s->consumed) return 0;
  return tail_len(s, s->len - s->consumed);
}

static int is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Whether h[0, hn) holds "error" with its quotes (no memmem in C11). Horspool's search: the
 * byte under the needle's last position says how far the needle may move, so a JSON event is
 * crossed in strides of up to 7 bytes instead of one memchr per quote. */
static int has_error_key(const char *h, size_t hn) {
  static const char needle[] = "\"error\"";
  const size_t nn = sizeof needle - 1;
  for (size_t i = 0; i + nn <= hn;) { /* i grows by at least 1 */
    char last = h[i + nn - 1];
    if (last == '"' && memcmp(h + i, needle, nn) == 0) return 1;
    i += last == '"' ? 6 : last == 'e' ? 5 : last == 'o' ? 2 : last == 'r' ? 1 : nn;
  }
  return 0;
}

pd_sse_kind_t pd_sse_classify(const char *data, size_t len) {
  size_t b = 0, e = len;
  while (b < e && is_json_space(data[b])) b++;
  while (e > b && is_json_space(data[e - 1])) e--;
  if (e - b == 6 && memcmp(data + b, "[DONE]", 6) == 0) return PD_SSE_DONE;
  /* Cheap filter first: only objects that mention "error" are worth a parse. */
  if (e - b < 2 || data[b] != '{' || !has_error_key(data + b, e - b)) return PD_SSE_DATA;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(data + b, e - b, &end, 0);
  pd_sse_kind_t kind = PD_SSE_DATA;
  if (root && end == data + e && cJSON_IsObject(root) &&
      cJSON_GetObjectItemCaseSensitive(root, "error"))
    kind = PD_SSE_ERROR;
  cJSON_Delete(root);
  return kind;
}
