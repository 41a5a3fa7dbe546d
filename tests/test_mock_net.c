/* The socket mock's network faults (docs/mock.md, "Network faults"), over real loopback
 * sockets: the mock cuts the path (resets the connection, or writes nothing more) while its
 * worker engine keeps the request as if the client were still there, until an
 * /abort_request or its own end. Every wait is bounded; every mock is stopped. */
#include <curl/curl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "pd_conform.h"
#include "pd_mock.h"
#include "pdt.h"
#include "pdt_curl.h"
#include "pdt_mock.h"
#include "pdt_net.h"

static pd_scenario_worker_t default_worker(pd_role_t role) {
  pd_scenario_t *s = calloc(1, sizeof *s);
  pd_scenario_worker_t w = {0};
  PDT_TRUE(s != NULL);
  if (s) {
    pd_scenario_defaults(s);
    w = s->workers[role == PD_ROLE_PREFILL ? 0 : 1];
  }
  free(s);
  return w;
}

/* net_reset on a prefill in bootstrap: the client sees a transport error before any byte,
 * the worker keeps its slot (no decode ever registers) until /abort_request names the rid;
 * the abort finds it live and frees it (truth stalled: it waited on its partner). */
static void test_net_reset_keeps_the_prefill_until_aborted(void) {
  pd_scenario_worker_t w = default_worker(PD_ROLE_PREFILL);
  add_fault(&w, PD_FAULT_NET_RESET, 0, 0, 1);
  mk_t p;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&p, PD_ROLE_PREFILL, &w, 300000, 300000, 0) == 0);
  if (!p.m) goto out;
  char body[512];
  gen_body(body, sizeof body, 1, "netcut-0001", pd_mock_bootstrap_port(p.m), 7, 4);
  pdt_tx_t *t = pdt_tx_once(mh, pd_mock_port(p.m), "/generate", body);
  PDT_TRUE(t->is_done);
  PDT_TRUE(t->rc == CURLE_RECV_ERROR || t->rc == CURLE_GOT_NOTHING); /* reset, no head */
  PDT_EQ_U64(t->len, 0);
  pdt_tx_del(mh, t);
  PDT_TRUE(wait_log(&p, "net_cut", "\"gateway_sees\":\"reset\"", 2000) > 0);
  PDT_TRUE(wait_log(&p, "peer_closed", NULL, 2000) > 0); /* the mock's HTTP side is over */
  pdt_sleep_ms(100); /* the worker never heard of it: its slot stays */
  PDT_EQ_INT(pd_mock_live_slots(p.m), 1);
  PDT_TRUE(log_t(&p, "slot_freed", NULL) < 0);
  pdt_tx_t *a = pdt_tx_once(mh, pd_mock_port(p.m), "/abort_request", "{\"rid\":\"netcut-0001\"}");
  PDT_TRUE(strstr(a->buf, "\"aborted\":1") != NULL);
  pdt_tx_del(mh, a);
  PDT_TRUE(wait_slots(p.m, 0, 2000));
  PDT_TRUE(log_t(&p, "slot_freed", "\"truth\":\"stalled\"") > 0);
  mk_stop(&p);
  PDT_TRUE(log_t(&p, "fault", "\"kind\":\"net_reset\"") > 0);
out:
  mk_free(&p);
  curl_multi_cleanup(mh);
}

/* response_lost after 2 events on a direct decode stream: the client gets the head and two
 * tokens, then nothing (no error, no end) while the worker generates the rest and finishes
 * (truth ok, slot freed) with the connection still open; the client's later close changes
 * nothing at the worker. */
static void test_response_lost_goes_silent_while_the_worker_finishes(void) {
  pd_scenario_worker_t w = default_worker(PD_ROLE_DECODE);
  add_fault(&w, PD_FAULT_RESPONSE_LOST, 0, 2, 1);
  mk_t d;
  CURLM *mh = curl_multi_init();
  PDT_TRUE(mk_start(&d, PD_ROLE_DECODE, &w, 300000, 300000, 1) == 0);
  if (!d.m) goto out;
  const char *req = "{\"text\":\"x\",\"stream\":true,\"sampling_params\":{\"max_new_tokens\":6}}";
  pdt_tx_t *t = pdt_tx_new(mh, pd_mock_port(d.m), "/generate", req);
  for (uint64_t end = pdt_now_ms() + 5000;
       log_t(&d, "slot_freed", NULL) < 0 && !t->is_done && pdt_now_ms() < end;)
    pdt_tx_run(mh, &t, 1, 2); /* the client reads while the worker runs (bounded) */
  PDT_TRUE(log_t(&d, "net_cut", "\"gateway_sees\":\"nothing\"") > 0);
  PDT_TRUE(log_t(&d, "slot_freed", "\"truth\":\"ok\"") > 0); /* it ran to its end */
  pdt_tx_run(mh, &t, 1, 300); /* whatever reached the client by now */
  PDT_FALSE(t->is_done);       /* no end, no error: silence */
  PDT_EQ_INT(t->status, 0);
  PDT_TRUE(strstr(t->buf, "tok1") != NULL);
  PDT_TRUE(strstr(t->buf, "tok2") == NULL && strstr(t->buf, "[DONE]") == NULL);
  PDT_EQ_INT(pd_mock_live_slots(d.m), 0);
  pdt_tx_del(mh, t); /* the client gives up */
  PDT_TRUE(wait_log(&d, "peer_closed", NULL, 2000) > 0);
  mk_stop(&d);
  PDT_TRUE(log_t(&d, "fault", "\"kind\":\"response_lost\"") > 0);
out:
  mk_free(&d);
  curl_multi_cleanup(mh);
}

/* The library row over real sockets: pdref's gateway in joined mode behind the mocks. d0's
 * path is reset after 3 events; the gateway sends no /abort_request, so d0 generates on past
 * the client's end: I3 and I18 (and joined's missing error event, I14), as in the simulator.
 * joined records success for d0, which the cut leg may bear (/metrics I4 stays clean). */
static void test_conform_shows_no_abort_after_a_transport_error(void) {
  signal(SIGPIPE, SIG_IGN);
  pdt_row_t x; /* d0 generates 500 ms on past the cut: well over the grace and the slack */
  if (pdt_row_open_run(&x, "net-reset-decode-mid-stream", "joined", 0.05) != 0) return;
  PDT_EQ_INT(x.r.faults_fired, 1);
  PDT_TRUE(x.r.got & PD_CONFORM_BIT(PD_INVARIANT_STRANDED_SLOT));
  PDT_TRUE(x.r.got & PD_CONFORM_BIT(PD_INVARIANT_STRANDED_KV));
  PDT_TRUE(x.r.judged & PD_CONFORM_BIT(PD_INVARIANT_OUTCOME));
  PDT_FALSE(x.r.got & PD_CONFORM_BIT(PD_INVARIANT_OUTCOME));
  PDT_TRUE(x.r.matched);
  pdt_row_close(&x);
}

int pdt_suite_mock_net(void) {
  static const pdt_case_t cases[] = {
      {"net_reset: the client sees a reset, the prefill keeps its slot in bootstrap until "
       "/abort_request frees it",
       test_net_reset_keeps_the_prefill_until_aborted},
      {"response_lost after 2 events: the client sees silence while the decode runs to its end",
       test_response_lost_goes_silent_while_the_worker_finishes},
      {"conform: joined sends no abort after d0's path is reset, I3 and I18 over sockets",
       test_conform_shows_no_abort_after_a_transport_error},
  };
  return PDT_SUITE("mock_net", cases);
}
