/* R-ADMIT-PRIO over sockets: pdref-gateway reads the request's class from the header
 * x-gateway-inference-objective (critical | standard | sheddable; anything else is a 400
 * naming the header, no leg sent), hands it to the core, and /metrics counts admission's
 * sheds by class and its evictions. Against fake workers (tests/pdt_gateway.h), bounded. */

#include "pdt_gateway.h"

typedef struct bg_prio {
  uint16_t port;
  resp_t r;
  CURLcode rc;
} bg_prio_t;

static void *bg_stream_prio(void *arg) {
  bg_prio_t *b = arg;
  b->rc = http(b->port, "POST", "/generate", stream_req, 0, &b->r);
  return NULL;
}

/* An unknown class is refused with 400 naming the header; a known one is served. */
static void test_unknown_class_is_a_400_naming_the_header(void) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 3, 0) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0, 0, 0}, &p, 1, &d, 1) == 0) {
    static resp_t r;
    memset(&r, 0, sizeof r);
    PDT_EQ_INT(http_h(g.port, "POST", "/generate", stream_req, 0,
                      "x-gateway-inference-objective: urgent", &r),
               CURLE_OK);
    PDT_EQ_INT(r.status, 400);
    PDT_TRUE(strstr(r.body, "x-gateway-inference-objective") != NULL);
    PDT_TRUE(strstr(r.body, "urgent") != NULL);
    PDT_EQ_INT(fake_get(&p, &p.n_generate), 0); /* no leg for it */
    memset(&r, 0, sizeof r);
    PDT_EQ_INT(http_h(g.port, "POST", "/generate", stream_req, 0,
                      "x-gateway-inference-objective: critical", &r),
               CURLE_OK);
    PDT_EQ_INT(r.status, 200);
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

/* Decode admits one; while its stream runs, a sheddable request waits and is shed at its
 * 200 ms queue deadline, the message naming its class; /metrics counts it as sheddable. */
static void test_shed_counts_by_class_in_metrics(void) {
  fake_t p, d;
  gwrun_t g;
  PDT_TRUE(fake_start(&p, FAKE_OK, 1, 0) == 0 && fake_start(&d, FAKE_OK, 20, 50) == 0);
  if (gw_start(&g, (gwopt_t){PD_MODE_REFERENCE, 0, 0, 0, 1, 200}, &p, 1, &d, 1) == 0) {
    static bg_prio_t a;
    memset(&a, 0, sizeof a);
    a.port = g.port;
    pthread_t th;
    int started = pthread_create(&th, NULL, bg_stream_prio, &a) == 0;
    PDT_TRUE(started);
    PDT_TRUE(wait_for(&d, &d.n_generate, 1, 3000)); /* the first stream holds decode */
    static resp_t r;
    memset(&r, 0, sizeof r);
    PDT_EQ_INT(http_h(g.port, "POST", "/generate", stream_req, 0,
                      "x-gateway-inference-objective: sheddable", &r),
               CURLE_OK);
    PDT_EQ_INT(r.status, 503);
    PDT_TRUE(strstr(r.body, "class: sheddable") != NULL);
    if (started) pthread_join(th, NULL);
    PDT_EQ_INT(a.r.status, 200);
    memset(&r, 0, sizeof r);
    http(g.port, "GET", "/metrics", NULL, 0, &r);
    PDT_TRUE(strstr(r.body, "pdref_admission_shed_by_class_total{class=\"sheddable\"} 1\n") !=
             NULL);
    PDT_TRUE(strstr(r.body, "pdref_admission_shed_by_class_total{class=\"critical\"} 0\n") !=
             NULL);
    PDT_TRUE(strstr(r.body, "pdref_admission_evicted_total 0\n") != NULL);
    gw_stop(&g);
  }
  fake_stop(&p);
  fake_stop(&d);
}

int pdt_suite_gateway_prio(void) {
  static const pdt_case_t cases[] = {
      {"an unknown class is a 400 naming the header", test_unknown_class_is_a_400_naming_the_header},
      {"sheds are counted by class in /metrics", test_shed_counts_by_class_in_metrics},
  };
  return PDT_SUITE("gateway_prio", cases);
}
