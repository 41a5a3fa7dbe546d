/* `pdref conform` against source-first (vLLM-family) gateways (docs/conformance.md, issue 13
 * §3): the toy proxy model's own X-Request-Id, the placeholders of vLLM-family command lines,
 * legs tied by the KV key the mocks log (remote_request_id), pinned KV read from the mocks'
 * pin lines, the commit window of a stream served as application/json; then real runs against
 * tests/pdt_sfproxy.py (stand-ins for vLLM's toy proxy and llm-d's sidecar, not pdref's code)
 * and `pdref gateway --protocol vllm`. Socket runs are one request each at scale 0.5, every wait
 * bounded. */
#include <errno.h>
#include <limits.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pd_conform.h"
#include "pd_conform_int.h"
#include "pd_wengine.h"
#include "pd_world.h"
#include "pdt_conform.h"
#include "pdt_net.h"
#include "pdt_sf.h"

#define MS_NS 1000000ull
#define SF_SCALE 0.5 /* a 50 ms disconnect and the mocks' 20 ms hang-up poll stay well short of
                        * a 150 ms prefill on a loaded machine under ASan */

/* ---------- the toy proxy's own X-Request-Id (core) ---------- */

static int is_uuid4(const char *s) {
  regex_t re;
  if (regcomp(&re, "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
              REG_EXTENDED | REG_NOSUB))
    return 0;
  int ok = s && regexec(&re, s, 0, NULL, 0) == 0;
  regfree(&re);
  return ok;
}

/* V1.1: one uuid4 per client request on both legs, drawn from the gateway's PRNG (a seed
 * replays it); the other source-first modes forward the client's headers (xrid NULL). */
static void test_toy_proxy_sets_its_own_request_id_on_both_legs(void) {
  harness_t h, again;
  sf_init(&h, PD_MODE_VLLM_TOY_PROXY);
  sf_init(&again, PD_MODE_VLLM_TOY_PROXY);
  sf_request(&h, "/v1/completions", SF_COMPLETIONS);
  sf_request(&again, "/v1/completions", SF_COMPLETIONS);
  char first[40] = "";
  snprintf(first, sizeof first, "%s", sf_open(&h, 0)->xrid ? sf_open(&h, 0)->xrid : "");
  PDT_TRUE(is_uuid4(first));
  PDT_EQ_STR(sf_open(&again, 0)->xrid ? sf_open(&again, 0)->xrid : "", first); /* replayed */
  sf_answer(&h, 1, 200, SF_KV);
  PDT_EQ_INT(sf_open(&h, 0)->role, PD_ROLE_DECODE);
  PDT_EQ_STR(sf_open(&h, 0)->xrid ? sf_open(&h, 0)->xrid : "", first); /* the same on decode */
  sf_request_id(&h, 8, "/v1/completions", SF_COMPLETIONS);
  const char *second = sf_open(&h, 0)->xrid;
  PDT_TRUE(is_uuid4(second) && strcmp(second, first) != 0); /* fresh per request */
  h_free(&h);
  h_free(&again);
  static const pd_mode_t others[] = {PD_MODE_LLMD_SIDECAR, PD_MODE_MOONCAKE_PROXY,
                                     PD_MODE_REFERENCE};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    sf_init(&h, others[i]);
    sf_request(&h, "/v1/completions", SF_COMPLETIONS);
    PDT_EQ_INT(h_count(&h, PD_ACT_OPEN_LEG) >= 1, 1);
    PDT_TRUE(sf_open(&h, 0)->xrid == NULL);
    h_free(&h);
  }
}

/* ---------- placeholders ---------- */

static void test_vllm_family_placeholders_expand(void) {
  pd_scenario_t *s = pdt_load_scenario("sf-decode-connect-refused"); /* p0, d0, d1 */
  PDT_TRUE(s != NULL);
  if (!s) return;
  pd_conform_opts_t o;
  pd_conform_opts_default(&o);
  uint16_t ports[] = {1001, 2001, 2002}, boot[] = {3001, 0, 0};
  char out[2048], err[256] = "";
  PDT_EQ_INT(pd_conform_expand(s, &o, "toy {vllm_proxy_args}", ports, boot, 9, out, sizeof out,
                               err, sizeof err), 0);
  PDT_EQ_STR(out, "toy --prefiller-hosts 127.0.0.1 --prefiller-ports 1001 --decoder-hosts "
                  "127.0.0.1 127.0.0.1 --decoder-ports 2001 2002");
  PDT_EQ_INT(pd_conform_expand(s, &o, "{prefill_url_list}|{decode_url_list}|{decode_hostports}|"
                               "{decode_hostport_list}|{prefill_hostports}",
                               ports, boot, 9, out, sizeof out, err, sizeof err), 0);
  PDT_EQ_STR(out, "http://127.0.0.1:1001|http://127.0.0.1:2001,http://127.0.0.1:2002|"
                  "127.0.0.1:2001 127.0.0.1:2002|127.0.0.1:2001,127.0.0.1:2002|127.0.0.1:1001");
  pd_conform_set_label(&o, "reference");
  PDT_EQ_INT(pd_conform_expand(s, &o, "{pdref_gateway_args}", ports, boot, 9, out, sizeof out,
                               err, sizeof err), 0);
  PDT_TRUE(strstr(out, "--protocol vllm") != NULL);
  pd_conform_set_label(&o, "joined"); /* an SGLang model does not run a vLLM scenario */
  PDT_TRUE(pd_conform_mode_skips(s, &o));
  pd_conform_set_label(&o, "llmd-sidecar");
  PDT_FALSE(pd_conform_mode_skips(s, &o));
  free(s);
}

/* ---------- a run's legs, by hand ---------- */

#define SX_LEGS 8

typedef struct sfx {
  pdt_cfx_t c;
  pd_conform_req_t reqs[2];
  pd_conform_logged_leg_t legs[SX_LEGS];
  pd_conform_unit_t u[SX_LEGS + 1];
} sfx_t;

/* sf-decode-connect-refused's workers (p0, d0, d1: indices 0, 1, 2), n streaming requests. */
static int sfx_init(sfx_t *f, const char *mode, uint32_t n) {
  memset(f, 0, sizeof *f);
  if (n > 2 ||
      pdt_cfx_init(&f->c, "sf-decode-connect-refused", mode, f->reqs, n, f->legs, SX_LEGS, 12000, 0))
    return -1;
  for (uint32_t i = 0; i < n; i++) {
    pd_conform_req_t *q = &f->reqs[i];
    q->c.t_arrival = (i + 1) * MS_NS / 2;
    q->t_bound = q->c.t_arrival + f->c.run.bound_ns;
    snprintf(q->xrid, sizeof q->xrid, "pdconf-sfx-%u", i);
  }
  return 0;
}

static void sfx_free(sfx_t *f) { pdt_cfx_free(&f->c); }

/* A vLLM leg (no room) on worker w with KV key `key` ("" none) and logged id xrid. */
static pd_conform_logged_leg_t *sfx_leg(sfx_t *f, uint32_t w, const char *key, const char *xrid,
                                        double arrive_ms, double closed_ms) {
  pd_conform_runner_t *run = &f->c.run;
  pd_conform_logged_leg_t *l = &run->legs[run->n_legs++];
  memset(l, 0, sizeof *l);
  l->worker = w;
  l->role = run->s->workers[w].role;
  l->req = run->n_legs;
  snprintf(l->rid, sizeof l->rid, "%032zx", run->n_legs);
  snprintf(l->kv_key, sizeof l->kv_key, "%s", key);
  snprintf(l->xrid, sizeof l->xrid, "%s", xrid);
  l->is_stream = l->role == PD_ROLE_DECODE;
  l->rid_given = 0;
  l->boot_port = -1;
  l->t_arrive = (uint64_t)(arrive_ms * MS_NS);
  l->t_peer_closed = (uint64_t)(closed_ms * MS_NS);
  l->end_status = 200;
  l->truth = PD_TRUTH_OK;
  l->fault = -1;
  l->client = l->unit = l->partner = l->resend_of = -1;
  return l;
}

#define K1 "00000000000000a1"
#define K2 "00000000000000b2"

/* A decode pairs with the prefill its params name (one attempt), a second decode with the same
 * params is a decode-only retry (an attempt of its own), and a decode sent before its prefill
 * (Mooncake's proxy) pairs with it by request. */
static void test_source_first_legs_pair_into_attempts(void) {
  sfx_t f;
  if (sfx_init(&f, "reference", 2)) {
    PDT_TRUE(0);
    return;
  }
  sfx_leg(&f, 0, K1, "pdconf-sfx-0", 1, 3);   /* 0: p0 */
  sfx_leg(&f, 1, K1, "pdconf-sfx-0", 4, 5);   /* 1: d0, reads K1 */
  sfx_leg(&f, 2, K1, "pdconf-sfx-0", 6, 20);  /* 2: d1, the same params again */
  sfx_leg(&f, 1, "", "pdconf-sfx-1", 30, 40); /* 3: d0 before its prefill, no params */
  sfx_leg(&f, 0, K2, "pdconf-sfx-1", 31, 33); /* 4: p0 */
  uint32_t nu = pd_conform_attribute(&f.c.run, f.u);
  PDT_EQ_INT(nu, 3);
  PDT_EQ_INT(f.legs[0].partner, 1);
  PDT_EQ_INT(f.legs[2].partner, -1);
  PDT_EQ_INT(f.legs[3].partner, 4);
  PDT_EQ_INT(f.c.r.legs_by_id, 5);
  PDT_EQ_INT(f.c.r.legs_by_timing, 0);
  sfx_free(&f);
}

/* A decode leg without the runner's id (a gateway that rewrote header and prompt) belongs to
 * the request of the prefill leg whose KV key it read. */
static void test_decode_tied_by_remote_request_id(void) {
  sfx_t f;
  if (sfx_init(&f, "vllm-toy-proxy", 2)) {
    PDT_TRUE(0);
    return;
  }
  sfx_leg(&f, 0, K1, "pdconf-sfx-1", 1, 3);
  sfx_leg(&f, 1, K1, "5f0c6f1e-uuid-of-the-gateway", 4, 9);
  pd_conform_attribute(&f.c.run, f.u);
  PDT_EQ_INT(f.legs[1].client, 1);
  PDT_EQ_INT(f.legs[0].partner, 1);
  PDT_EQ_INT(f.c.r.legs_by_id, 2);
  PDT_EQ_INT(f.c.r.legs_by_remote_id, 1);
  sfx_free(&f);
}

/* I6 on a 2xx stream served as application/json (the toy proxy's, V1.24): a decode-only
 * attempt that reached its worker after the client's first byte is a retry after commit. */
static void test_json_stream_has_a_commit_window(void) {
  sfx_t f;
  if (sfx_init(&f, "reference", 1)) {
    PDT_TRUE(0);
    return;
  }
  pd_client_request_t *c = &f.reqs[0].c;
  c->ended = 1;
  c->head_status = 200;
  c->is_sse_head = 0;
  c->t_head = c->t_first_data = 10 * MS_NS;
  c->t_end = 50 * MS_NS;
  sfx_leg(&f, 0, K1, "pdconf-sfx-0", 1, 3);
  sfx_leg(&f, 1, K1, "pdconf-sfx-0", 4, 20);
  sfx_leg(&f, 2, K1, "pdconf-sfx-0", 25, 45);
  char err[200] = "";
  PDT_EQ_INT(pd_conform_judge(&f.c.run, err, sizeof err), 0);
  PDT_TRUE(f.c.run.violations & PD_CONFORM_BIT(PD_INVARIANT_COMMIT));
  sfx_free(&f);
}

/* The mocks' pin lines: kv_pinned keeps a finished prefill's pages held, kv_unpinned (logged
 * by request once the leg is gone) frees them; the KV key comes from the pin and read lines,
 * and a decode's kv_from line says it read freed blocks. */
static void test_pinned_kv_is_read_from_the_logs(void) {
  sfx_t f;
  if (sfx_init(&f, "reference", 1)) {
    PDT_TRUE(0);
    return;
  }
  char dir[] = "/tmp/pdt-conform-sf-XXXXXX";
  PDT_TRUE(mkdtemp(dir) != NULL);
  static const char *const lines[3][8] = {
      {"{\"t_us\":1000,\"ev\":\"request\",\"req\":1,\"rid\":\"r-1\",\"room\":null,\"stream\":false,"
       "\"x_request_id\":\"pdconf-sfx-0\",\"role\":\"prefill\"}",
       "{\"t_us\":1100,\"ev\":\"kv_taken\",\"req\":1,\"pages\":2}",
       "{\"t_us\":1500,\"ev\":\"kv_pinned\",\"req\":1,\"key\":\"" K1 "\",\"pages\":2}",
       "{\"t_us\":1600,\"ev\":\"response_end\",\"req\":1,\"status\":200}",
       "{\"t_us\":8900,\"ev\":\"crash\"}",
       "{\"t_us\":9000,\"ev\":\"kv_unpinned\",\"req\":1,\"key\":\"" K1 "\",\"reason\":\"crash\"}",
       NULL},
      {"{\"t_us\":2000,\"ev\":\"request\",\"req\":1,\"rid\":\"r-2\",\"room\":null,\"stream\":true,"
       "\"x_request_id\":\"pdconf-sfx-0\",\"role\":\"decode\"}",
       "{\"t_us\":2500,\"ev\":\"kv_read\",\"req\":1,\"key\":\"" K1 "\",\"result\":\"stale\"}",
       "{\"t_us\":2600,\"ev\":\"kv_from\",\"req\":1,\"from\":\"stale\"}", NULL},
      {"{\"t_us\":3000,\"ev\":\"request\",\"req\":1,\"rid\":\"r-3\",\"room\":null,\"stream\":false,"
       "\"x_request_id\":\"pdconf-sfx-0\",\"role\":\"decode\"}", NULL}};
  f.c.run.n_wk = 3;
  for (uint32_t w = 0; w < 3; w++) {
    snprintf(f.c.run.wk[w].log, sizeof f.c.run.wk[w].log, "%s/w%u.jsonl", dir, w);
    FILE *lf = fopen(f.c.run.wk[w].log, "w");
    for (int k = 0; lf && lines[w][k]; k++) fprintf(lf, "%s\n", lines[w][k]);
    if (lf) fclose(lf);
  }
  f.c.run.legs = NULL; /* the reader allocates its own */
  f.c.run.cap_legs = 0;
  char err[200] = "";
  PDT_EQ_INT(pd_conform_read_logs(&f.c.run, err, sizeof err), 0);
  PDT_EQ_U64(f.c.run.n_legs, 3);
  if (f.c.run.n_legs == 3) {
    const pd_conform_logged_leg_t *p = &f.c.run.legs[0], *d = &f.c.run.legs[1];
    PDT_EQ_STR(p->kv_key, K1);
    PDT_EQ_U64(p->kv_pages_max, 2);
    PDT_EQ_U64(p->kv_pages, 0);
    PDT_EQ_U64(p->t_kv_freed, 9000000); /* kv_unpinned, 9000 us */
    PDT_TRUE(f.c.run.crash_pin[0] && !f.c.run.crash_pin[1]); /* the crash struck a pin: exercised */
    PDT_EQ_STR(d->kv_key, K1);
    PDT_EQ_INT(d->kv_from, PD_WENGINE_KV_FROM_STALE); /* V1.15, for I19 */
    PDT_EQ_STR(f.c.run.legs[2].kv_key, "");
  }
  pd_conform_legs_free(&f.c.run);
  for (uint32_t w = 0; w < 3; w++) unlink(f.c.run.wk[w].log);
  rmdir(dir);
  sfx_free(&f);
}

/* ---------- real runs ---------- */

static void assert_no_survivors(const pd_conform_result_t *r) {
  PDT_TRUE(r->n_pids > 0);
  for (uint32_t i = 0; i < r->n_pids; i++) {
    errno = 0;
    PDT_TRUE(kill(-r->pids[i], 0) == -1 && errno == ESRCH);
  }
  errno = 0;
  PDT_TRUE(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
}

/* Three rows a source-first gateway must exercise: a healthy stream (served as
 * application/json by the toy proxy), a decode 503 after the head (its fault fires), a client
 * leaving during prefill (the prefill's pinned KV). */
static const char *const sf_rows[] = {"sf-happy-path-stream", "sf-decode-503-before-first-token",
                                      "sf-client-disconnect-during-prefill"};

/* One row against cmd: the verdict it must reach (all, on what the row judged), and every leg
 * tied by the runner's id. */
static void run_row(const char *bin, const char *label, const char *cmd, const char *header,
                    const char *name, uint32_t all) {
  pd_scenario_t *s = pdt_load_scenario(name);
  PDT_TRUE(s != NULL);
  if (!s) return;
  pd_conform_opts_t o;
  pd_conform_opts_default(&o);
  o.gateway_cmd = cmd;
  o.pdref_bin = bin;
  pd_conform_set_label(&o, label);
  o.scale = SF_SCALE;
  o.slack_ms = 100;
  if (header) o.client_header[o.n_client_headers++] = header;
  pd_conform_result_t r;
  PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
  uint32_t want = all & r.judged;
  char what[512];
  snprintf(what, sizeof what, "%s / %s: got %#x want %#x (%s)", name, label, r.got, want, r.reason);
  CU_assertImplementation(r.status == PD_CONFORM_RAN && r.got == want, __LINE__, what, __FILE__,
                          "", CU_FALSE);
  PDT_EQ_INT(r.served, r.sent);              /* no row of 404s */
  PDT_EQ_INT(r.faults_fired, r.faults_n);    /* the fault fired */
  PDT_EQ_INT(r.legs_by_id, r.legs);          /* tied by the runner's id: the prompt's */
  PDT_TRUE(r.legs >= 1);
  assert_no_survivors(&r);
  free(s);
}

/* tests/pdt_sfproxy.py, vLLM's toy proxy as docs/upstream.md describes it, gets the verdicts
 * the toy proxy's simulator model predicts (each scenario's vllm-toy-proxy expectation). */
static void test_toy_proxy_stand_in_gets_the_models_verdicts(void) {
  char bin[PATH_MAX + 8], cmd[2 * PATH_MAX + 128];
  if (pdt_pdref_path(bin, sizeof bin) != 0 ||
      system("python3 -c 'import http.server' 2>/dev/null")) {
    fprintf(stderr, "test_conform_sf: pdref or python3 missing, stand-in test skipped\n");
    return;
  }
  signal(SIGPIPE, SIG_IGN);
  snprintf(cmd, sizeof cmd, "exec python3 %s/tests/pdt_sfproxy.py --port {port} {vllm_proxy_args}",
           PD_SOURCE_DIR);
  for (size_t i = 0; i < sizeof sf_rows / sizeof sf_rows[0]; i++) {
    pd_scenario_t *s = pdt_load_scenario(sf_rows[i]);
    if (!s) continue;
    uint32_t want = s->expect[PD_MODE_VLLM_TOY_PROXY].violated_mask;
    free(s);
    run_row(bin, "vllm-toy-proxy", cmd, NULL, sf_rows[i], want);
  }
}

/* The same stand-in as llm-d's sidecar (--style llmd), which takes its prefill from the
 * x-prefiller-host-port header a client header gives it (--client-header): prefill's 500
 * falls back to decode alone, decode's 503 goes back as it is (V1.27), as its model predicts.
 * Without the header no prefill would be sent and prefill's fault would not fire. */
static void test_llmd_stand_in_takes_its_prefill_from_a_client_header(void) {
  char bin[PATH_MAX + 8], cmd[2 * PATH_MAX + 128];
  if (pdt_pdref_path(bin, sizeof bin) != 0 ||
      system("python3 -c 'import http.server' 2>/dev/null"))
    return;
  signal(SIGPIPE, SIG_IGN);
  snprintf(cmd, sizeof cmd, "exec python3 %s/tests/pdt_sfproxy.py --style llmd --port {port} "
           "--vllm-port {decode_ports}", PD_SOURCE_DIR);
  static const char *const rows[] = {"sf-prefill-500-stream", "sf-decode-503-before-first-token"};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    pd_scenario_t *s = pdt_load_scenario(rows[i]);
    if (!s) continue;
    uint32_t want = s->expect[PD_MODE_LLMD_SIDECAR].violated_mask;
    free(s);
    run_row(bin, "llmd-sidecar", cmd, "x-prefiller-host-port: {prefill_hostport_list}", rows[i],
            want);
  }
}

/* `pdref gateway --protocol vllm`: the reference passes every row; its toy proxy model (its own
 * uuid X-Request-Id, legs tied by the prompt's id) gives the simulator's verdicts. */
static void test_pdref_gateway_source_first_rows(void) {
  char bin[PATH_MAX + 8], cmd[PATH_MAX + 256];
  if (pdt_pdref_path(bin, sizeof bin) != 0) return;
  signal(SIGPIPE, SIG_IGN);
  static const pd_mode_t modes[] = {PD_MODE_REFERENCE, PD_MODE_VLLM_TOY_PROXY};
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    snprintf(cmd, sizeof cmd, "exec %s gateway --mode %s {prefill_args} {decode_args} --listen "
             "127.0.0.1:{port} {pdref_gateway_args}", bin, pd_mode_name(modes[m]));
    for (size_t i = 0; i < sizeof sf_rows / sizeof sf_rows[0]; i++) {
      pd_scenario_t *s = pdt_load_scenario(sf_rows[i]);
      if (!s) continue;
      pd_world_stats_t st;
      uint32_t sim = 0;
      uint64_t hash = 0;
      PDT_EQ_INT(pd_world_run(s, modes[m], s->config.seed, NULL, &st, &sim, &hash), 0);
      if (modes[m] == PD_MODE_REFERENCE) PDT_EQ_INT(sim, 0);
      free(s);
      run_row(bin, pd_mode_name(modes[m]), cmd, NULL, sf_rows[i], sim);
    }
  }
}

int pdt_suite_conform_sf(void) {
  static const pdt_case_t cases[] = {
      {"toy proxy sets its own X-Request-Id on both legs",
       test_toy_proxy_sets_its_own_request_id_on_both_legs},
      {"vLLM-family placeholders expand", test_vllm_family_placeholders_expand},
      {"source-first legs pair into attempts", test_source_first_legs_pair_into_attempts},
      {"a decode is tied by remote_request_id", test_decode_tied_by_remote_request_id},
      {"a stream served as application/json has a commit window",
       test_json_stream_has_a_commit_window},
      {"pinned KV is read from the mocks' logs", test_pinned_kv_is_read_from_the_logs},
      {"a toy proxy stand-in gets the model's verdicts",
       test_toy_proxy_stand_in_gets_the_models_verdicts},
      {"an llm-d stand-in takes its prefill from a client header",
       test_llmd_stand_in_takes_its_prefill_from_a_client_header},
      {"pdref gateway --protocol vllm: reference passes, toy model as simulated",
       test_pdref_gateway_source_first_rows},
  };
  return PDT_SUITE("conform_sf", cases);
}
