/* The scenario's client workload on real sockets: the same requests as the simulator's
 * client (sim/pd_world.c: stream/logprob/disconnect drawn from the run's world PRNG in the
 * same order, the same bodies, arrivals at the scaled times), sent with one libcurl multi
 * handle in one loop. What the client sees is fed to the checker's own observer
 * (pd_check_client_data): head status and type, SSE events, [DONE], error events, token
 * indices, a non-stream body. Each request is bounded: disconnect at disconnect_at_ms
 * (scaled), given up at deadline_ms (scaled) plus slack. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pd_buf.h"
#include "pd_conform_int.h"

#define WAIT_MAX_NS (5 * PD_CONFORM_MS)

static int draw(pd_prng_t *r, double frac) {
  if (frac >= 1.0) return 1;
  if (frac <= 0.0) return 0;
  return pd_prng_unit(r) < frac;
}

static uint64_t scaled(const pd_conform_runner_t *run, uint64_t ns) {
  double v = (double)ns * run->o->scale;
  return v >= 9.0e18 ? (uint64_t)9.0e18 : (uint64_t)v;
}


int pd_conform_plan(pd_conform_runner_t *run) {
  const pd_scenario_workload_t *wl = &run->s->workload;
  uint32_t n = wl->requests;
  run->reqs = calloc(n ? n : 1, sizeof *run->reqs);
  if (!run->reqs) return -1;
  run->n_reqs = n;
  pd_prng_t root, gw_rng, world;
  pd_prng_init(&root, run->s->config.seed);
  pd_prng_fork(&root, 1, &gw_rng); /* the simulator forks the gateway's stream first */
  pd_prng_fork(&root, 2, &world);
  uint64_t t = pd_scenario_arrival_gap_ns(wl, 0, &world), tag = pd_conform_now_abs() / 1000u;
  for (uint32_t i = 0; i < n; i++) {
    pd_conform_req_t *q = &run->reqs[i];
    q->run = run;
    q->c.id = i;
    q->c.is_stream = draw(&world, wl->stream);
    q->c.wants_logprob = draw(&world, wl->logprob);
    q->c.tokens = wl->tokens;
    q->c.prompt_tokens = pd_scenario_prompt_tokens(wl, run->s->config.seed, i); /* as the sim */
    q->c.prio = pd_scenario_prio(wl, run->s->config.seed, i); /* R-ADMIT-PRIO, as the sim */
    pd_sse_init(&q->c.sse, NULL);
    pd_buf_init(&q->c.body, PD_WORLD_MAX_BODY_BYTES); /* as the simulator keeps it */
    if (wl->disconnect_at_ms && draw(&world, wl->disconnect_prob)) {
      q->disc_ns = scaled(run, wl->disconnect_at_ms * PD_CONFORM_MS);
      if (!q->disc_ns) q->disc_ns = 1;
    }
    q->t_plan = scaled(run, t);
    if (i + 1 < n) t = pd_scenario_arrival_next_ns(wl, i + 1, t, &world); /* as the simulator */
    snprintf(q->xrid, sizeof q->xrid, "pdconf-%06llx-%u", (unsigned long long)(tag & 0xffffff), i);
    /* the id rides in the prompt too: every gateway forwards the prompt to both legs, so the
       mocks tie legs exactly even behind a gateway that drops X-Request-Id (mini_lb) */
    size_t cap = pd_world_client_body_cap(wl, q->c.prompt_tokens, strlen(q->xrid));
    q->body = malloc(cap);
    if (!q->body) return -1;
    q->body_len = pd_world_client_body(&q->c, wl, q->xrid, q->body, cap);
    q->body[q->body_len] = 0;
  }
  return 0;
}

/* ---------- libcurl callbacks ---------- */

static void take_head(pd_conform_req_t *q) {
  long code = 0;
  curl_easy_getinfo(q->e, CURLINFO_RESPONSE_CODE, &code);
  if (code < 200 || q->c.t_head) return;
  q->c.head_status = (int)code;
  q->c.is_sse_head = q->ct_sse;
  q->c.t_head = pd_conform_now(q->run);
}

static int has_sse_type(const char *p, size_t len) {
  static const char want[] = "text/event-stream";
  for (size_t i = 0; i + sizeof want - 1 <= len; i++)
    if (strncasecmp(p + i, want, sizeof want - 1) == 0) return 1;
  return 0;
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud) {
  pd_conform_req_t *q = ud;
  size_t len = size * n;
  if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0) q->ct_sse = 0; /* a new (maybe 1xx) head */
  else if (len >= 13 && strncasecmp(buf, "content-type:", 13) == 0) q->ct_sse = has_sse_type(buf, len);
  else if (len <= 2 && (buf[0] == '\r' || buf[0] == '\n')) take_head(q);
  return len;
}

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
  pd_conform_req_t *q = ud;
  size_t len = size * n;
  if (!q->c.t_head) take_head(q);
  uint64_t now = pd_conform_now(q->run);
  if (!q->c.t_first_data) q->c.t_first_data = now;
  size_t room = sizeof q->first - 1 - q->first_len;
  memcpy(q->first + q->first_len, p, len < room ? len : room);
  q->first_len += len < room ? len : room;
  q->first[q->first_len] = 0;
  (void)pd_check_client_data(&q->c, (const uint8_t *)p, len); /* a lost record is counted */
  return len;
}

/* ---------- requests ---------- */

static int start(pd_conform_runner_t *run, pd_conform_req_t *q, CURLM *mh) {
  char url[160], xr[96];
  snprintf(url, sizeof url, "http://127.0.0.1:%u%s", run->gw_port,
           pd_route_path(run->s->workload.route));
  snprintf(xr, sizeof xr, "X-Request-Id: %s", q->xrid);
  q->e = curl_easy_init();
  q->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
  if (q->hdrs) q->hdrs = curl_slist_append(q->hdrs, "Expect:");
  if (q->hdrs) q->hdrs = curl_slist_append(q->hdrs, xr);
  char cls[64]; /* R-ADMIT-PRIO: the class, when not the default */
  snprintf(cls, sizeof cls, "x-gateway-inference-objective: %s", pd_prio_name(q->c.prio));
  if (q->hdrs && q->c.prio != PD_PRIO_STANDARD) q->hdrs = curl_slist_append(q->hdrs, cls);
  for (uint32_t i = 0; i < PD_CONFORM_MAX_HEADERS && q->hdrs; i++)
    if (run->hdr[i] && run->hdr[i][0]) q->hdrs = curl_slist_append(q->hdrs, run->hdr[i]);
  uint64_t now = pd_conform_now(run);
  q->c.t_arrival = now;
  q->t_disc = q->disc_ns ? now + q->disc_ns : 0;
  q->t_bound = now + run->bound_ns;
  q->state = 1;
  if (!q->e || !q->hdrs) return -1;
  curl_easy_setopt(q->e, CURLOPT_URL, url);
  curl_easy_setopt(q->e, CURLOPT_PROXY, "");
  curl_easy_setopt(q->e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(q->e, CURLOPT_TCP_NODELAY, 1L);
  /* one connection per request: a client disconnect closes exactly this request's socket */
  curl_easy_setopt(q->e, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(q->e, CURLOPT_HTTPHEADER, q->hdrs);
  curl_easy_setopt(q->e, CURLOPT_POSTFIELDS, q->body);
  curl_easy_setopt(q->e, CURLOPT_POSTFIELDSIZE, (long)q->body_len);
  curl_easy_setopt(q->e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(q->e, CURLOPT_HEADERDATA, q);
  curl_easy_setopt(q->e, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(q->e, CURLOPT_WRITEDATA, q);
  curl_easy_setopt(q->e, CURLOPT_PRIVATE, q);
  return curl_multi_add_handle(mh, q->e) == CURLM_OK ? 0 : -1;
}

/* Close the transfer (and its connection, if still open). */
static void release(pd_conform_req_t *q, CURLM *mh) {
  if (q->e) {
    curl_multi_remove_handle(mh, q->e);
    curl_easy_cleanup(q->e);
  }
  curl_slist_free_all(q->hdrs);
  q->e = NULL;
  q->hdrs = NULL;
  q->state = 2;
}

static void finish(pd_conform_runner_t *run, pd_conform_req_t *q, CURLM *mh, CURLcode rc) {
  if (!q->c.t_head && rc == CURLE_OK) take_head(q);
  q->c.ended = 1;
  q->c.aborted = rc != CURLE_OK; /* reset, truncated body, nothing at all */
  q->c.t_end = pd_conform_now(run);
  release(q, mh);
}

static void leave(pd_conform_runner_t *run, pd_conform_req_t *q, CURLM *mh, int is_cut) {
  if (is_cut) {
    q->is_cut = 1; /* no end: the checker sees a request still open */
  } else {
    q->c.gone = 1;
    q->c.t_end = pd_conform_now(run);
  }
  release(q, mh);
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* ---------- one blocking request to a local process ---------- */

/* Largest answer pd_conform_http keeps. */
#define PD_CONFORM_MAX_ANSWER (4u * 1024u * 1024u)

static size_t on_answer(char *p, size_t size, size_t n, void *ud) {
  pd_buf_t *a = ud;
  size_t len = size * n;
  return pd_buf_append(NULL, a, p, len) ? 0 : len; /* 0: over the limit, or out of memory */
}

char *pd_conform_http(uint16_t port, const char *path, const char *post, unsigned timeout_ms,
                 long *status) {
  if (status) *status = 0;
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
  CURL *e = curl_easy_init();
  if (!e) return NULL;
  pd_buf_t a;
  pd_buf_init(&a, PD_CONFORM_MAX_ANSWER - 1); /* and its NUL */
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  if (post) curl_easy_setopt(e, CURLOPT_POSTFIELDS, post);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_answer);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &a);
  CURLcode rc = curl_easy_perform(e);
  if (rc == CURLE_OK && status) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
  curl_easy_cleanup(e);
  if (rc != CURLE_OK || !a.p) { /* transport error, over the limit, or an empty body */
    pd_buf_free(NULL, &a);
    return NULL;
  }
  return (char *)a.p; /* libc memory: the caller frees it */
}

/* Workers that crash count crash_at_ms from the workload's time 0, as in the simulator, not
 * from their start-up (mocks start before the gateway is ready): tell them it is now. A mock
 * that does not answer crashes from its start-up instead. */
static void start_clocks(pd_conform_runner_t *run) {
  for (uint32_t i = 0; i < run->s->n_workers; i++)
    if (run->s->workers[i].crash_at_ms)
      free(pd_conform_http(run->wk[i].port, "/pdref/start", "", 1000, NULL));
}

int pd_conform_drive(pd_conform_runner_t *run) {
  uint32_t n = run->n_reqs, next = 0, over = 0;
  CURLM *mh = curl_multi_init();
  if (!mh) return -1;
  start_clocks(run);
  run->t0_abs = pd_conform_now_abs() - 1000; /* run time 0, just before the first request */
  uint64_t hard_end = (n ? run->reqs[n - 1].t_plan : 0) + run->bound_ns + 5000 * PD_CONFORM_MS;
  int rc = 0;
  for (uint64_t guard = 0; over < n && guard < (1ull << 32); guard++) { /* bounded: hard_end */
    if (pd_conform_stopping(run)) { rc = -1; break; }
    uint64_t now = pd_conform_now(run);
    while (next < n && run->reqs[next].t_plan <= now)
      if (start(run, &run->reqs[next++], mh) != 0) {
        finish(run, &run->reqs[next - 1], mh, CURLE_FAILED_INIT);
        over++;
      }
    int running = 0, left = 0;
    curl_multi_perform(mh, &running);
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(mh, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      pd_conform_req_t *q = NULL;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
      CURLcode res = msg->data.result;
      if (q && q->state == 1) {
        finish(run, q, mh, res);
        over++;
      }
    }
    now = pd_conform_now(run);
    uint64_t wake = now + WAIT_MAX_NS;
    if (next < n) wake = min_u64(wake, run->reqs[next].t_plan);
    for (uint32_t i = 0; i < next; i++) {
      pd_conform_req_t *q = &run->reqs[i];
      if (q->state != 1) continue;
      if (q->t_disc && now >= q->t_disc) leave(run, q, mh, 0);
      else if (now >= q->t_bound || now >= hard_end) leave(run, q, mh, 1);
      if (q->state == 2) {
        over++;
        continue;
      }
      wake = min_u64(wake, q->t_disc ? min_u64(q->t_disc, q->t_bound) : q->t_bound);
    }
    if (now >= hard_end && next < n) break;
    uint64_t wait = wake > now ? wake - now : 0;
    /* sub-millisecond waits spin (curl_multi_poll counts in ms): arrivals and disconnects
       of a small --timeout-scale stay on time */
    curl_multi_poll(mh, NULL, 0, (int)(wait / PD_CONFORM_MS), NULL);
  }
  for (uint32_t i = 0; i < n; i++) { /* stopped early: whatever is left was not seen to end */
    pd_conform_req_t *q = &run->reqs[i];
    if (q->state == 1) leave(run, q, mh, 1);
    else if (q->state == 0) q->is_cut = 1;
  }
  curl_multi_cleanup(mh);
  return rc;
}

void pd_conform_reqs_free(pd_conform_runner_t *run) {
  for (uint32_t i = 0; i < run->n_reqs; i++) {
    pd_conform_req_t *q = &run->reqs[i];
    pd_sse_free(&q->c.sse);
    pd_buf_free(NULL, &q->c.body);
    free(q->body);
    free(q->units);
  }
  free(run->reqs);
  run->reqs = NULL;
  run->n_reqs = 0;
}
