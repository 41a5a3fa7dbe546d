/* The socket mock's fault ledger (the scenario's traffic faults, shared by the mocks of one
 * run) and its late requests (open_delay_ms), over real loopback sockets. Every wait is
 * bounded; every mock is stopped. */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pd_err.h"
#include "pd_mock.h"
#include "pd_mock_ledger.h"
#include "pdt.h"
#include "pdt_curl.h"
#include "pdt_mock.h"

/* open_delay_ms: the request reaches the model late; an /abort_request sent meanwhile finds
 * nothing live ("aborted":0), is remembered, and cancels the request when it arrives. */
static void test_abort_overtakes_a_late_request(void) {
  mk_t p;
  CURLM *mh = curl_multi_init();
  pd_scenario_worker_t w = {.name = "p0", .role = PD_ROLE_PREFILL, .split_parts = 2};
  w.open_delay_ms = 1000; /* x SPEED: 100 ms */
  PDT_TRUE(mk_start(&p, PD_ROLE_PREFILL, &w, 300000, 300000, 0) == 0);
  if (!p.m) goto out;
  char body[512];
  gen_body(body, sizeof body, 1, "late-0001", pd_mock_bootstrap_port(p.m), 6, 4);
  pdt_tx_t *t = pdt_tx_new(mh, pd_mock_port(p.m), "/generate", body);
  for (uint64_t end = pdt_now_ms() + 10000; log_t(&p, "request", NULL) < 0 && pdt_now_ms() < end;)
    pdt_tx_run(mh, &t, 1, 2); /* until the mock has the request (bounded) */
  pdt_tx_t *a = pdt_tx_once(mh, pd_mock_port(p.m), "/abort_request", "{\"rid\":\"late-0001\"}");
  PDT_TRUE(strstr(a->buf, "\"aborted\":0") != NULL); /* not there yet */
  pdt_tx_run(mh, &t, 1, 3000);
  PDT_EQ_INT(t->status, 200); /* in bootstrap: the 500 path (S2.10), an error event */
  PDT_TRUE(strstr(t->buf, "data: {\"error\"") != NULL);
  PDT_TRUE(strstr(t->buf, "\"code\":500") != NULL);
  PDT_EQ_INT(pd_mock_live_slots(p.m), 0);
  pdt_tx_del(mh, a);
  pdt_tx_del(mh, t);
  mk_stop(&p);
  PDT_TRUE(log_t(&p, "abort", "(remembered)") > 0);
out:
  mk_free(&p);
  curl_multi_cleanup(mh);
}

/* Two decode mocks of one run: the scenario's traffic fault "503 on the first decode leg of
 * request 0" strikes whichever mock gets that leg first, and only it. */
static int mk_start_tf(mk_t *k, uint32_t index, const pd_traffic_fault_t *tf, const char *ledger) {
  memset(k, 0, sizeof *k);
  pd_mock_config_t c;
  pd_mock_config_default(&c);
  c.role = PD_ROLE_DECODE;
  c.speed = SPEED;
  c.is_direct = 1;
  c.default_tokens = 4;
  c.worker_index = index;
  c.tfaults = tf;
  c.n_tfaults = 1;
  c.n_requests = 4;
  c.ledger_path = ledger;
  return mk_open(k, &c);
}

/* shared: 1 = one ledger file for both mocks; 0 = a private ledger each. Returns the
 * statuses of request 0 on mock b, then on mock a, then request 1 on mock a. */
static void run_two_mocks(int shared, int st[3]) {
  pd_traffic_fault_t tf = {.f = {.kind = PD_FAULT_STATUS, .status = 503, .nth_from = 1, .nth_to = 1,
                          .prob = 1.0},
                    .role = PD_ROLE_DECODE, .request = 0};
  char ledger[] = "/tmp/pdt-ledger-XXXXXX";
  int fd = mkstemp(ledger);
  if (fd >= 0) close(fd);
  mk_t a, b;
  CURLM *mh = curl_multi_init();
  st[0] = st[1] = st[2] = -1;
  int ok = mk_start_tf(&a, 1, &tf, shared ? ledger : NULL) == 0;
  ok = mk_start_tf(&b, 2, &tf, shared ? ledger : NULL) == 0 && ok;
  const char *r0 = "{\"text\":\"pdconf-00abcd-0 hello\",\"stream\":false}";
  const char *r1 = "{\"text\":\"pdconf-00abcd-1 hello\",\"stream\":false}";
  if (ok) {
    pdt_tx_t *t = pdt_tx_once(mh, pd_mock_port(b.m), "/generate", r0);
    st[0] = t->status;
    pdt_tx_del(mh, t);
    t = pdt_tx_once(mh, pd_mock_port(a.m), "/generate", r0); /* the retry, elsewhere */
    st[1] = t->status;
    pdt_tx_del(mh, t);
    t = pdt_tx_once(mh, pd_mock_port(a.m), "/generate", r1);
    st[2] = t->status;
    pdt_tx_del(mh, t);
  }
  mk_stop(&b);
  PDT_TRUE(!ok || log_t(&b, "traffic_fault", "\"index\":0") > 0);
  mk_free(&a);
  mk_free(&b);
  curl_multi_cleanup(mh);
  unlink(ledger);
}

static void test_mocks_sharing_a_ledger_fault_one_leg(void) {
  int st[3];
  run_two_mocks(1, st);
  PDT_EQ_INT(st[0], 503); /* the first decode leg of request 0, on mock b */
  PDT_EQ_INT(st[1], 200); /* its second decode leg, on mock a: no fault */
  PDT_EQ_INT(st[2], 200); /* request 1: not targeted */
  run_two_mocks(0, st);   /* without a shared ledger each mock counts its own legs */
  PDT_EQ_INT(st[0], 503);
  PDT_EQ_INT(st[1], 503);
}

static void test_ledger_rejects_another_scenario(void) {
  char ledger[] = "/tmp/pdt-ledger-XXXXXX", err[256];
  int fd = mkstemp(ledger);
  if (fd >= 0) close(fd);
  pd_mock_ledger_t a, b;
  PDT_EQ_INT(pd_mock_ledger_open(&a, ledger, 4, err, sizeof err), 0);
  PDT_EQ_INT(pd_mock_ledger_open(&b, ledger, 5, err, sizeof err), PD_ERR_INVAL);
  PDT_TRUE(strstr(err, "another scenario") != NULL);
  PDT_EQ_INT(pd_mock_ledger_open(&b, ledger, 4, err, sizeof err), 0);
  PDT_EQ_U64(pd_mock_ledger_next_leg(&a, 3, PD_ROLE_DECODE), 1);
  PDT_EQ_U64(pd_mock_ledger_next_leg(&b, 3, PD_ROLE_DECODE), 2); /* the same counter */
  PDT_EQ_U64(pd_mock_ledger_next_leg(&b, 3, PD_ROLE_PREFILL), 1);
  PDT_EQ_U64(pd_mock_ledger_next_leg(&b, 4, PD_ROLE_PREFILL), 0); /* out of range */
  pd_mock_ledger_close(&a);
  pd_mock_ledger_close(&b);
  unlink(ledger);
}

/* Pump the transfers until the log has that line (bounded): its t_us, or -1. */
static long long pump_until_log(CURLM *mh, pdt_tx_t **ts, size_t n, mk_t *k, const char *ev,
                                const char *needle, unsigned limit_ms) {
  long long t = -1;
  for (uint64_t end = pdt_now_ms() + limit_ms; (t = log_t(k, ev, needle)) < 0 && pdt_now_ms() < end;)
    pdt_tx_run(mh, ts, n, 5);
  return t;
}

/* The worker engine's capacity on sockets: a decode mock with max_running 1 registers the
 * first request's room at once; the second waits in the prealloc queue (no REG line, shown
 * as queued) until an abort frees the running slot. */
static void test_decode_running_limit_queues_requests(void) {
  mk_t p, d;
  CURLM *mh = curl_multi_init();
  pd_scenario_worker_t w = {.name = "d0", .role = PD_ROLE_DECODE, .split_parts = 2};
  w.max_running = 1;
  int ok = mk_start(&p, PD_ROLE_PREFILL, NULL, 300000, 300000, 0) == 0;
  ok = mk_start(&d, PD_ROLE_DECODE, &w, 300000, 300000, 0) == 0 && ok;
  PDT_TRUE(ok);
  if (ok) {
    char b1[512], b2[512];
    gen_body(b1, sizeof b1, 1, "capa-1", pd_mock_bootstrap_port(p.m), 11, 4);
    gen_body(b2, sizeof b2, 1, "capb-2", pd_mock_bootstrap_port(p.m), 12, 4);
    pdt_tx_t *t[2] = {pdt_tx_new(mh, pd_mock_port(d.m), "/generate", b1), NULL};
    PDT_TRUE(pump_until_log(mh, t, 1, &d, "room_registered", "\"room\":\"11\"", 10000) > 0);
    t[1] = pdt_tx_new(mh, pd_mock_port(d.m), "/generate", b2);
    PDT_TRUE(pump_until_log(mh, t, 2, &d, "request", "capb-2", 10000) > 0);
    pdt_tx_run(mh, t, 2, 200); /* time to register, were it admitted */
    PDT_TRUE(log_t(&d, "room_registered", "\"room\":\"12\"") < 0);
    pdt_tx_t *info = pdt_tx_once(mh, pd_mock_port(d.m), "/get_server_info", NULL);
    PDT_TRUE(strstr(info->buf, "\"running\":1,") != NULL);
    PDT_TRUE(strstr(info->buf, "\"queued\":1,") != NULL);
    pdt_tx_del(mh, info);
    pdt_tx_t *a = pdt_tx_once(mh, pd_mock_port(d.m), "/abort_request", "{\"rid\":\"capa\"}");
    pdt_tx_del(mh, a);
    PDT_TRUE(pump_until_log(mh, t, 2, &d, "room_registered", "\"room\":\"12\"", 10000) > 0);
    a = pdt_tx_once(mh, pd_mock_port(d.m), "/abort_request", "{\"rid\":\"capb\"}");
    pdt_tx_del(mh, a);
    pdt_tx_run(mh, t, 2, 10000);
    for (int i = 0; i < 2; i++) { /* waiting for the KV: the 500 path (S2.10) */
      PDT_EQ_INT(t[i]->status, 200);
      PDT_TRUE(strstr(t[i]->buf, "\"code\":500") != NULL);
      pdt_tx_del(mh, t[i]);
    }
    PDT_TRUE(wait_slots(d.m, 0, 5000));
  }
  mk_free(&p);
  mk_free(&d);
  curl_multi_cleanup(mh);
}

int pdt_suite_mock_more(void) {
  static const pdt_case_t cases[] = {
      {"open_delay_ms: an abort overtakes a late request and still cancels it", test_abort_overtakes_a_late_request},
      {"two mocks sharing a fault ledger: only the first leg gets the fault", test_mocks_sharing_a_ledger_fault_one_leg},
      {"a fault ledger made for another scenario is refused", test_ledger_rejects_another_scenario},
      {"max_running 1: a second decode request waits for the slot, without registering its room",
       test_decode_running_limit_queues_requests},
  };
  return PDT_SUITE("mock_more", cases);
}
