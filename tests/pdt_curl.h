/* pdt_curl: a tiny libcurl multi client for tests that talk HTTP to real servers on
 * loopback: start transfers, run them to their end within a bound, read status and body.
 * Header-only (static inline) so each test file that includes it stays self-contained. */
#ifndef PDT_CURL_H
#define PDT_CURL_H
#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct pdt_tx {
  CURL *e;
  struct curl_slist *hdrs;
  char body[256];
  char buf[32768];
  size_t len;
  long status;
  int rc, is_done;
  uint64_t t_start, t_head, t_done;
} pdt_tx_t;

static inline uint64_t pdt_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void pdt_sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static inline size_t pdt_tx_write(char *p, size_t sz, size_t n, void *ud) {
  pdt_tx_t *t = ud;
  size_t k = sz * n, room = sizeof t->buf - 1 - t->len;
  memcpy(t->buf + t->len, p, k < room ? k : room);
  t->len += k < room ? k : room;
  t->buf[t->len] = 0;
  return k;
}

static inline size_t pdt_tx_header(char *p, size_t sz, size_t n, void *ud) {
  (void)p;
  pdt_tx_t *t = ud;
  if (!t->t_head) t->t_head = pdt_now_ms();
  return sz * n;
}

/* body NULL: GET. The transfer starts on the next pdt_tx_run. */
static inline pdt_tx_t *pdt_tx_new(CURLM *mh, uint16_t port, const char *path, const char *body) {
  pdt_tx_t *t = calloc(1, sizeof *t);
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
  t->e = curl_easy_init();
  curl_easy_setopt(t->e, CURLOPT_URL, url);
  curl_easy_setopt(t->e, CURLOPT_WRITEFUNCTION, pdt_tx_write);
  curl_easy_setopt(t->e, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(t->e, CURLOPT_HEADERFUNCTION, pdt_tx_header);
  curl_easy_setopt(t->e, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(t->e, CURLOPT_PRIVATE, t);
  curl_easy_setopt(t->e, CURLOPT_TIMEOUT_MS, 10000L);
  /* a fresh connection each time: libcurl silently re-sends a request whose reused
   * connection closed before any byte, which would hide reset_before_head */
  curl_easy_setopt(t->e, CURLOPT_FORBID_REUSE, 1L);
  if (body) {
    snprintf(t->body, sizeof t->body, "%s", body);
    t->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    t->hdrs = curl_slist_append(t->hdrs, "X-Request-Id: test-xrid");
    curl_easy_setopt(t->e, CURLOPT_HTTPHEADER, t->hdrs);
    curl_easy_setopt(t->e, CURLOPT_POSTFIELDS, t->body);
  }
  t->t_start = pdt_now_ms();
  curl_multi_add_handle(mh, t->e);
  return t;
}

/* Run transfers until every one in ts is done, or limit_ms passes. */
static inline void pdt_tx_run(CURLM *mh, pdt_tx_t **ts, size_t n, unsigned limit_ms) {
  uint64_t end = pdt_now_ms() + limit_ms;
  while (pdt_now_ms() < end) { /* bounded by the deadline */
    int running = 0, left = 0;
    curl_multi_perform(mh, &running);
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(mh, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      pdt_tx_t *t = NULL;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
      t->rc = (int)msg->data.result;
      t->is_done = 1;
      t->t_done = pdt_now_ms();
      curl_easy_getinfo(t->e, CURLINFO_RESPONSE_CODE, &t->status);
    }
    size_t done = 0;
    for (size_t i = 0; i < n; i++) done += ts[i]->is_done;
    if (done == n) return;
    curl_multi_poll(mh, NULL, 0, 5, NULL);
  }
}

/* Stop a transfer (closing its connection if it is still running: the client leaves). */
static inline void pdt_tx_del(CURLM *mh, pdt_tx_t *t) {
  if (!t) return;
  curl_multi_remove_handle(mh, t->e);
  curl_easy_cleanup(t->e);
  curl_slist_free_all(t->hdrs);
  free(t);
}

/* One request, run to its end. */
static inline pdt_tx_t *pdt_tx_once(CURLM *mh, uint16_t port, const char *path, const char *body) {
  pdt_tx_t *t = pdt_tx_new(mh, port, path, body);
  pdt_tx_run(mh, &t, 1, 5000);
  return t;
}

#endif
