/* pdref mock over real sockets: a prefill and a decode mock on ephemeral loopback ports, in
 * this process (pd_mock_new), driven with libcurl; and once as a child process of the built
 * pdref binary, stopped with SIGTERM. Every wait is bounded; every mock is stopped. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pd_err.h"
#include "pd_mock.h"
#include "pdt.h"
#include "pdt_net.h"
#include "pdt_curl.h"
#include "pdt_mock.h"
#include "pdt_proc.h"


/* ---------- tests ---------- */

static void test_prefill_and_decode_pair_over_bootstrap(void) {
  mk_t p, d;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&p, PD_ROLE_PREFILL, NULL, 300000, 300000, 0) == 0);
  PDT_TRUE(mk_start(&d, PD_ROLE_DECODE, NULL, 300000, 300000, 0) == 0);
  if (!p.m || !d.m) goto out;
  char body[512];
  gen_body(body, sizeof body, 1, "pair-1", pd_mock_bootstrap_port(p.m), 9007199254740993ull, 5);
  pdt_tx_t *pre = pdt_tx_new(mh, pd_mock_port(p.m), "/generate", body);
  pdt_tx_run(mh, &pre, 1, 100); /* prefill waits in bootstrap; its stream head comes at once */
  PDT_FALSE(pre->is_done);
  PDT_TRUE(pre->t_head != 0);
  pdt_tx_t *dec = pdt_tx_new(mh, pd_mock_port(d.m), "/generate", body);
  pdt_tx_t *both[] = {pre, dec};
  pdt_tx_run(mh, both, 2, 5000);
  PDT_EQ_INT(pre->rc, CURLE_OK);
  PDT_EQ_INT(dec->rc, CURLE_OK);
  PDT_EQ_INT(pre->status, 200);
  PDT_TRUE(strstr(pre->buf, "\"finish_reason\":{\"type\":\"length\",\"length\":0}") != NULL);
  PDT_TRUE(strstr(pre->buf, "\"input_token_logprobs\":[[-0.25,11,null],[-0.5,12,null]]") != NULL);
  for (int i = 0; i < 5; i++) {
    char tok[64];
    snprintf(tok, sizeof tok, "data: {\"text\":\"tok%d \",\"index\":%d,", i, i);
    PDT_TRUE(strstr(dec->buf, tok) != NULL);
  }
  PDT_TRUE(strstr(dec->buf, "\"id\":\"pair-1\"") != NULL);
  size_t dl = strlen(dec->buf);
  PDT_TRUE(dl > 14 && strcmp(dec->buf + dl - 14, "data: [DONE]\n\n") == 0);
  pdt_tx_del(mh, pre);
  pdt_tx_del(mh, dec);
  mk_stop(&p);
  mk_stop(&d);
  /* the prefill answered only after decode registered and forward + KV ran (2.5 ms) */
  long long reg = log_t(&p, "room_registered", "\"room\":\"9007199254740993\"");
  long long p_end = log_t(&p, "slot_freed", "\"truth\":\"ok\"");
  long long d_end = log_t(&d, "slot_freed", "\"truth\":\"ok\"");
  PDT_TRUE(reg > 0 && p_end >= reg + 2500);
  PDT_TRUE(d_end > reg);
  PDT_TRUE(log_t(&d, "request", "\"x_request_id\":\"test-xrid\"") > 0);
out:
  mk_free(&p);
  mk_free(&d);
  curl_multi_cleanup(mh);
}

/* Decode registers first; the prefill that comes later (non-stream) pairs with it. */
static void test_decode_first_then_prefill_nonstream(void) {
  mk_t p, d;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&p, PD_ROLE_PREFILL, NULL, 300000, 300000, 0) == 0);
  PDT_TRUE(mk_start(&d, PD_ROLE_DECODE, NULL, 300000, 300000, 0) == 0);
  if (!p.m || !d.m) goto out;
  char body[512];
  gen_body(body, sizeof body, 0, "late-prefill", pd_mock_bootstrap_port(p.m), 88, 3);
  pdt_tx_t *dec = pdt_tx_new(mh, pd_mock_port(d.m), "/generate", body);
  pdt_tx_run(mh, &dec, 1, 100); /* registered, waiting for the KV */
  PDT_FALSE(dec->is_done);
  pdt_tx_t *pre = pdt_tx_new(mh, pd_mock_port(p.m), "/generate", body);
  pdt_tx_t *both[] = {pre, dec};
  pdt_tx_run(mh, both, 2, 5000);
  PDT_EQ_INT(pre->status, 200);
  PDT_EQ_INT(dec->status, 200);
  PDT_TRUE(strstr(pre->buf, "{\"text\":\"\",\"meta_info\":{\"id\":\"late-prefill\"") == pre->buf);
  PDT_TRUE(strstr(dec->buf, "{\"text\":\"tok0 tok1 tok2 \",") == dec->buf);
  PDT_TRUE(strstr(dec->buf, "\"input_token_logprobs\":[[-0.75,13,null]]") != NULL);
  pdt_tx_del(mh, pre);
  pdt_tx_del(mh, dec);
out:
  mk_free(&p);
  mk_free(&d);
  curl_multi_cleanup(mh);
}

/* A gateway that gives up on decode before it reaches the room leaves the prefill blocked in
 * bootstrap until its timeout (seed finding 1). */
static void test_cancelled_decode_leaves_prefill_blocked(void) {
  pd_scenario_worker_t w = pdt_default_worker(1);
  add_fault(&w, PD_FAULT_HANG_BEFORE_HEAD, 0, 0, 1);
  mk_t p, d;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&p, PD_ROLE_PREFILL, NULL, 6000, 300000, 0) == 0); /* 600 ms */
  PDT_TRUE(mk_start(&d, PD_ROLE_DECODE, &w, 300000, 300000, 0) == 0);
  if (!p.m || !d.m) goto out;
  char body[512];
  gen_body(body, sizeof body, 1, "blocked", pd_mock_bootstrap_port(p.m), 99, 3);
  pdt_tx_t *pre = pdt_tx_new(mh, pd_mock_port(p.m), "/generate", body);
  pdt_tx_t *dec = pdt_tx_new(mh, pd_mock_port(d.m), "/generate", body);
  pdt_tx_t *both[] = {pre, dec};
  pdt_tx_run(mh, both, 2, 100);
  PDT_TRUE(wait_slots(d.m, 1, 2000));
  pdt_tx_del(mh, dec); /* the gateway cancels decode: it frees at once, prefill does not */
  PDT_TRUE(wait_slots(d.m, 0, 2000));
  PDT_EQ_INT(pd_mock_live_slots(p.m), 1);
  pdt_tx_run(mh, &pre, 1, 5000);
  PDT_TRUE(pre->t_done - pre->t_start >= 580);
  PDT_TRUE(strstr(pre->buf, "data: {\"error\":") != NULL); /* 500 under the 200 stream head */
  PDT_EQ_INT(pd_mock_live_slots(p.m), 0);
  pdt_tx_del(mh, pre);
out:
  mk_free(&p);
  mk_free(&d);
  curl_multi_cleanup(mh);
}

static void test_decode_without_prefill_times_out(void) {
  mk_t d;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&d, PD_ROLE_DECODE, NULL, 300000, 2000, 0) == 0); /* 200 ms at SPEED */
  if (!d.m) goto out;
  char body[512];
  gen_body(body, sizeof body, 1, "lonely-d", 1, 77, 4); /* port 1: nobody listens */
  pdt_tx_t *t = pdt_tx_once(mh, pd_mock_port(d.m), "/generate", body);
  PDT_EQ_INT(t->rc, CURLE_OK);
  PDT_EQ_INT(t->status, 200); /* the stream head came at once; the error follows */
  PDT_TRUE(t->t_done - t->t_start >= 180 && t->t_done - t->t_start < 3000);
  PDT_TRUE(strstr(t->buf, "data: {\"error\":") != NULL);
  PDT_TRUE(strstr(t->buf, "data: [DONE]") != NULL);
  PDT_TRUE(strstr(t->buf, "tok0") == NULL);
  gen_body(body, sizeof body, 0, "lonely-n", 1, 78, 4);
  pdt_tx_t *n = pdt_tx_once(mh, pd_mock_port(d.m), "/generate", body);
  PDT_EQ_INT(n->status, 500);
  pdt_tx_del(mh, t);
  pdt_tx_del(mh, n);
  mk_stop(&d);
  PDT_TRUE(log_t(&d, "slot_freed", "\"truth\":\"failed\"") > 0);
out:
  mk_free(&d);
  curl_multi_cleanup(mh);
}

static void test_abort_frees_prefill_stuck_in_bootstrap(void) {
  mk_t p;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&p, PD_ROLE_PREFILL, NULL, 300000, 300000, 0) == 0);
  if (!p.m) goto out;
  char body[512];
  gen_body(body, sizeof body, 0, "stuck-7", pd_mock_bootstrap_port(p.m), 4242, 4);
  pdt_tx_t *t = pdt_tx_new(mh, pd_mock_port(p.m), "/generate", body);
  pdt_tx_run(mh, &t, 1, 50);
  PDT_TRUE(wait_slots(p.m, 1, 2000));
  pdt_tx_del(mh, t); /* the client leaves: a request in bootstrap keeps its slot */
  PDT_TRUE(wait_log(&p, "peer_closed", "stuck-7", 10000) > 0); /* the mock has seen it */
  pdt_sleep_ms(100); /* the abort comes 100 ms after the close, however late that was seen */
  PDT_EQ_INT(pd_mock_live_slots(p.m), 1);
  pdt_tx_t *a = pdt_tx_once(mh, pd_mock_port(p.m), "/abort_request", "{\"rid\":\"stuck\"}");
  PDT_EQ_INT(a->status, 200);
  PDT_TRUE(strstr(a->buf, "\"aborted\":1") != NULL);
  PDT_TRUE(wait_slots(p.m, 0, 2000));
  pdt_tx_del(mh, a);
  mk_stop(&p);
  long long closed = log_t(&p, "peer_closed", "stuck-7");
  long long freed = log_t(&p, "slot_freed", "\"truth\":\"stalled\"");
  PDT_TRUE(closed > 0 && freed >= closed + 90000); /* freed by the abort, not the close */
  PDT_TRUE(log_t(&p, "abort", "\"prefix\":\"stuck\"") > 0);
out:
  mk_free(&p);
  curl_multi_cleanup(mh);
}

static void test_abort_that_overtakes_its_request_still_cancels_it(void) {
  mk_t p;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&p, PD_ROLE_PREFILL, NULL, 300000, 300000, 0) == 0);
  if (!p.m) goto out;
  pdt_tx_t *a = pdt_tx_once(mh, pd_mock_port(p.m), "/abort_request", "{\"rid\":\"early\"}");
  PDT_TRUE(strstr(a->buf, "\"aborted\":0") != NULL);
  char body[512];
  gen_body(body, sizeof body, 1, "early-0001", pd_mock_bootstrap_port(p.m), 5, 4);
  pdt_tx_t *t = pdt_tx_once(mh, pd_mock_port(p.m), "/generate", body);
  PDT_EQ_INT(t->status, 200); /* in bootstrap: the 500 path (S2.10), an error event */
  PDT_TRUE(strstr(t->buf, "data: {\"error\"") != NULL);
  PDT_TRUE(strstr(t->buf, "\"code\":500") != NULL);
  PDT_TRUE(strstr(t->buf, "data: [DONE]") != NULL);
  PDT_EQ_INT(pd_mock_live_slots(p.m), 0);
  pdt_tx_del(mh, a);
  pdt_tx_del(mh, t);
out:
  mk_free(&p);
  curl_multi_cleanup(mh);
}

static void test_bootstrap_timeout_answers_500(void) {
  mk_t p;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&p, PD_ROLE_PREFILL, NULL, 1500, 300000, 0) == 0); /* 150 ms */
  if (!p.m) goto out;
  char body[512];
  gen_body(body, sizeof body, 0, "no-decode", pd_mock_bootstrap_port(p.m), 6, 4);
  pdt_tx_t *t = pdt_tx_once(mh, pd_mock_port(p.m), "/generate", body);
  PDT_EQ_INT(t->status, 500);
  PDT_TRUE(t->t_done - t->t_start >= 130);
  PDT_TRUE(strstr(t->buf, "\"error\"") != NULL);
  pdt_tx_del(mh, t);
out:
  mk_free(&p);
  curl_multi_cleanup(mh);
}

static void test_bad_input_gets_json_errors(void) {
  mk_t p;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&p, PD_ROLE_PREFILL, NULL, 300000, 300000, 0) == 0);
  if (!p.m) goto out;
  uint16_t port = pd_mock_port(p.m);
  pdt_tx_t *t = pdt_tx_once(mh, port, "/generate", "{\"text\":");
  PDT_EQ_INT(t->status, 400);
  PDT_TRUE(strstr(t->buf, "{\"error\":{\"message\":\"body: malformed JSON at byte") == t->buf);
  pdt_tx_del(mh, t);
  t = pdt_tx_once(mh, port, "/generate", "{\"text\":\"a\",\"bootstrap_room\":\"x\"}");
  PDT_EQ_INT(t->status, 400);
  PDT_TRUE(strstr(t->buf, "bootstrap_room") != NULL);
  pdt_tx_del(mh, t);
  t = pdt_tx_once(mh, port, "/nope", NULL);
  PDT_EQ_INT(t->status, 404);
  PDT_TRUE(strstr(t->buf, "\"code\":404") != NULL);
  pdt_tx_del(mh, t);
  t = pdt_tx_once(mh, port, "/abort_request", "[1]");
  PDT_EQ_INT(t->status, 400);
  pdt_tx_del(mh, t);
  t = pdt_tx_once(mh, port, "/health", NULL);
  PDT_EQ_INT(t->status, 200);
  pdt_tx_del(mh, t);
  t = pdt_tx_once(mh, port, "/get_server_info", NULL);
  PDT_TRUE(strstr(t->buf, "\"disaggregation_mode\":\"prefill\"") != NULL);
  pdt_tx_del(mh, t);
  PDT_EQ_INT(pd_mock_live_slots(p.m), 0);
out:
  mk_free(&p);
  curl_multi_cleanup(mh);
}

/* The scenario fault script, request by request, seen on the wire (decode in direct mode). */
static void test_decode_faults_on_the_wire(void) {
  pd_scenario_worker_t w = pdt_default_worker(1);
  add_fault(&w, PD_FAULT_STATUS, 503, 0, 1);
  add_fault(&w, PD_FAULT_RESET_BEFORE_HEAD, 0, 0, 2);
  add_fault(&w, PD_FAULT_SSE_ERROR, 0, 1, 3);
  add_fault(&w, PD_FAULT_TRUNCATE, 0, 2, 4);
  add_fault(&w, PD_FAULT_RESET_MID_STREAM, 0, 2, 5);
  mk_t d;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&d, PD_ROLE_DECODE, &w, 300000, 300000, 1) == 0);
  if (!d.m) goto out;
  const char *req = "{\"text\":\"x\",\"stream\":true,\"sampling_params\":{\"max_new_tokens\":4}}";
  pdt_tx_t *t[6];
  for (int i = 0; i < 6; i++) t[i] = pdt_tx_once(mh, pd_mock_port(d.m), "/generate", req);
  PDT_EQ_INT(t[0]->status, 503);
  PDT_TRUE(strstr(t[0]->buf, "\"code\":503") != NULL);
  PDT_TRUE(t[1]->rc == CURLE_RECV_ERROR || t[1]->rc == CURLE_GOT_NOTHING);
  PDT_TRUE(strstr(t[2]->buf, "tok0") && strstr(t[2]->buf, "data: {\"error\":") &&
           strstr(t[2]->buf, "[DONE]"));
  PDT_EQ_INT(t[3]->rc, CURLE_OK); /* clean end, no [DONE] */
  PDT_TRUE(strstr(t[3]->buf, "tok1") && !strstr(t[3]->buf, "[DONE]"));
  PDT_TRUE(t[4]->rc != CURLE_OK && strstr(t[4]->buf, "tok1") && !strstr(t[4]->buf, "tok2"));
  PDT_TRUE(t[5]->rc == CURLE_OK && strstr(t[5]->buf, "tok3") && strstr(t[5]->buf, "[DONE]"));
  for (int i = 0; i < 6; i++) pdt_tx_del(mh, t[i]);
  mk_stop(&d);
  PDT_TRUE(log_t(&d, "fault", "\"kind\":\"reset_before_head\"") > 0);
  PDT_TRUE(log_t(&d, "fault", "\"kind\":\"truncate\"") > 0);
out:
  mk_free(&d);
  curl_multi_cleanup(mh);
}

/* kv_fail on the prefill: both legs give an error answer (KVPoll.Failed). */
static void test_kv_fail_fails_both_legs(void) {
  pd_scenario_worker_t w = pdt_default_worker(0);
  add_fault(&w, PD_FAULT_KV_FAIL, 0, 0, 1);
  mk_t p, d;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&p, PD_ROLE_PREFILL, &w, 300000, 300000, 0) == 0);
  PDT_TRUE(mk_start(&d, PD_ROLE_DECODE, NULL, 300000, 300000, 0) == 0);
  if (!p.m || !d.m) goto out;
  char body[512];
  gen_body(body, sizeof body, 0, "kvf", pd_mock_bootstrap_port(p.m), 31337, 4);
  pdt_tx_t *ts[] = {pdt_tx_new(mh, pd_mock_port(p.m), "/generate", body),
                pdt_tx_new(mh, pd_mock_port(d.m), "/generate", body)};
  pdt_tx_run(mh, ts, 2, 5000);
  PDT_EQ_INT(ts[0]->status, 500);
  PDT_EQ_INT(ts[1]->status, 500);
  pdt_tx_del(mh, ts[0]);
  pdt_tx_del(mh, ts[1]);
out:
  mk_free(&p);
  mk_free(&d);
  curl_multi_cleanup(mh);
}

/* --clock-on-start: crash_at_ms counts from POST /pdref/start (a runner's time 0), not from
 * start-up; the route starts the clock once. */
static void test_crash_clock_starts_on_request(void) {
  mk_t p;
  CURLM *mh = curl_multi_init();
  pd_scenario_worker_t w = {.name = "p0", .role = PD_ROLE_PREFILL};
  w.crash_at_ms = 400; /* x SPEED: 40 ms */
  PDT_TRUE(mk_start_ex(&p, PD_ROLE_PREFILL, &w, 300000, 300000, 0, 1) == 0);
  if (!p.m) goto out;
  pdt_sleep_ms(80); /* past the crash time counted from start-up */
  pdt_tx_t *t = pdt_tx_once(mh, pd_mock_port(p.m), "/pdref/start", "");
  PDT_EQ_INT(t->status, 200); /* still up: it answers */
  PDT_TRUE(strstr(t->buf, "\"started\":true") != NULL);
  pdt_tx_del(mh, t);
  t = pdt_tx_once(mh, pd_mock_port(p.m), "/pdref/start", "");
  PDT_TRUE(strstr(t->buf, "\"started\":false") != NULL); /* once */
  pdt_tx_del(mh, t);
  long long t_crash = wait_log(&p, "crash", NULL, 10000), t_start = log_t(&p, "clock_start", NULL);
  PDT_TRUE(t_start > 0 && t_crash > 0);
  /* 40 ms after the start, not after start-up (that would be 40 ms *before* the start, and
   * the start request would have found the mock down). The log's two stamps are taken where
   * each event is handled, a few ms apart from the clock itself on a loaded machine: CI saw
   * 37.x ms once with a bound of 38; 20 ms still tells the two clocks apart by 60 ms. */
  PDT_TRUE(t_crash - t_start >= 20000);
out:
  mk_free(&p);
  curl_multi_cleanup(mh);
}

/* ---------- the binary, as a child process ---------- */

static void test_binary_serves_and_stops_on_sigterm(void) {
  char bin[PATH_MAX + 8], log[] = "/tmp/pdref_mock_test_XXXXXX", ready[512] = "";
  if (pdt_pdref_path(bin, sizeof bin) != 0) {
    fprintf(stderr, "test_mock: %s not built, binary test skipped\n", bin);
    return;
  }
  int lfd = mkstemp(log), status = 0;
  PDT_TRUE(lfd >= 0);
  if (lfd < 0) return;
  close(lfd);
  char *argv[] = {bin, "mock", "--role", "decode", "--listen", "127.0.0.1:0", "--direct",
                  "--json", "--speed", "0.1", "--log", log, NULL};
  pid_t pid = pdt_spawn(argv, ready, sizeof ready, 10000);
  PDT_TRUE(pid > 0); /* started, and its ready line read */
  if (pid <= 0) {
    unlink(log);
    return;
  }
  unsigned port = pdt_json_uint(ready, "\"port\":");
  PDT_TRUE(port > 0);
  if (port) {
    CURLM *mh = curl_multi_init();
    pdt_tx_t *t = pdt_tx_once(mh, (uint16_t)port, "/generate", "{\"text\":\"x\",\"stream\":true}");
    PDT_TRUE(strstr(t->buf, "tok7") && strstr(t->buf, "data: [DONE]"));
    pdt_tx_del(mh, t);
    curl_multi_cleanup(mh);
  }
  kill(pid, SIGTERM);
  PDT_EQ_INT(pdt_reap(pid, 10000, &status), 0);
  PDT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  FILE *f = fopen(log, "r");
  char buf[8192] = "";
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  buf[n] = 0;
  if (f) fclose(f);
  PDT_TRUE(strstr(buf, "\"ev\":\"slot_freed\"") && strstr(buf, "\"ev\":\"shutdown\""));
  unlink(log);
}

int pdt_suite_mock(void) {
  static const pdt_case_t cases[] = {
      {"prefill and decode pair over the bootstrap socket", test_prefill_and_decode_pair_over_bootstrap},
      {"decode first, prefill later, non-stream", test_decode_first_then_prefill_nonstream},
      {"a cancelled decode leaves the prefill blocked in bootstrap", test_cancelled_decode_leaves_prefill_blocked},
      {"decode without prefill times out with an error event", test_decode_without_prefill_times_out},
      {"abort frees a prefill stuck in bootstrap, a close does not", test_abort_frees_prefill_stuck_in_bootstrap},
      {"an abort that overtakes its request still cancels it", test_abort_that_overtakes_its_request_still_cancels_it},
      {"prefill bootstrap timeout answers 500", test_bootstrap_timeout_answers_500},
      {"bad input gets JSON errors", test_bad_input_gets_json_errors},
      {"decode faults on the wire", test_decode_faults_on_the_wire},
      {"kv_fail fails both legs", test_kv_fail_fails_both_legs},
      {"--clock-on-start: a crash counts from POST /pdref/start", test_crash_clock_starts_on_request},
      {"pdref mock binary serves and stops on SIGTERM", test_binary_serves_and_stops_on_sigterm},
  };
  return PDT_SUITE("mock", cases);
}
