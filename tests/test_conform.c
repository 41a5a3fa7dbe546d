/* pdref conform (net/pd_conform.h) through the real pdref binary: `pdref mock` children and
 * `pdref gateway --mode M`, on 127.0.0.1 ephemeral ports. The verdict on the socket-judged
 * invariants must equal the simulator's for a representative subset in all four modes, and no
 * process started by a run may outlive it (also when the gateway command fails). The binary
 * is the pdref next to this test binary, as in tests/test_mock.c. Every wait is bounded. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pd_conform.h"
#include "pd_conform_int.h"
#include "pd_world.h"
#include "pdt.h"
#include "pdt_net.h"

#define SCALE 0.01

/* Nothing the run started is alive, and no child of ours is left unreaped. */
static void assert_no_survivors(const pd_conform_result_t *r) {
  PDT_TRUE(r->n_pids > 0);
  for (uint32_t i = 0; i < r->n_pids; i++) {
    errno = 0;
    PDT_TRUE(kill(r->pids[i], 0) == -1 && errno == ESRCH);  /* the process */
    errno = 0;
    PDT_TRUE(kill(-r->pids[i], 0) == -1 && errno == ESRCH); /* its process group */
  }
  errno = 0;
  PDT_TRUE(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
}

static void test_parity_with_the_simulator_on_a_subset(void) {
  /* A scale keeps each scenario's order of events on a loaded 2-core machine: the client's
     disconnect at 100 ms must still land mid-stream, after decode met prefill (at 0.01 it
     would be 1 ms after sending, often before decode registered its room). */
  static const struct { const char *name; double scale; } cases[] = {
      {"happy-path-stream", SCALE},
      {"decode-503-while-prefill-detached", SCALE},
      {"prefill-sse-error-under-200-stream", SCALE},
      {"client-disconnect-during-decode-stream", 0.05},
  };
  char bin[PATH_MAX + 8], cmd[PATH_MAX + 256];
  if (pdt_pdref_path(bin, sizeof bin) != 0) {
    fprintf(stderr, "test_conform: %s not built, parity test skipped\n", bin);
    return;
  }
  signal(SIGPIPE, SIG_IGN);
  for (size_t n = 0; n < sizeof cases / sizeof cases[0]; n++) {
    pd_scenario_t *s = pdt_load_scenario(cases[n].name);
    PDT_TRUE(s != NULL);
    if (!s) continue;
    for (int m = 0; m < PD_MODE_COUNT; m++) {
      pd_world_stats_t st;
      uint32_t sim = 0;
      uint64_t hash = 0;
      PDT_EQ_INT(pd_world_run(s, (pd_mode_t)m, s->config.seed, NULL, &st, &sim, &hash), 0);
      pd_conform_opts_t o;
      pdt_conform_opts(&o, bin, pd_mode_name((pd_mode_t)m), cmd, sizeof cmd);
      o.scale = cases[n].scale;
      pd_conform_result_t r;
      PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
      char what[512];
      snprintf(what, sizeof what, "%s / %s: conform %#x vs sim %#x (%s)", s->name,
               pd_mode_name((pd_mode_t)m), r.got, sim & r.judged, r.reason);
      CU_assertImplementation(r.status == PD_CONFORM_RAN && r.got == (sim & r.judged), __LINE__,
                              what, __FILE__, "", CU_FALSE);
      PDT_TRUE(r.matched);
      PDT_EQ_INT(r.requests, s->workload.requests);
      PDT_EQ_INT(r.legs_unattributed, 0);
      assert_no_survivors(&r);
    }
    free(s);
  }
}

/* A worker crash: refused connections leave no log line, so the row is judged only when
 * every leg is tied exactly: by X-Request-Id (reference forwards it: judged, passes, I4
 * included) or by the runner's id in the prompt (minilb drops the header but forwards the
 * prompt). A row with a leg tied by arrival order only would be skipped after the run. */
static void test_crash_judged_when_legs_are_tied_by_request_id(void) {
  char bin[PATH_MAX + 8], cmd[PATH_MAX + 256];
  if (pdt_pdref_path(bin, sizeof bin) != 0) return;
  signal(SIGPIPE, SIG_IGN);
  pd_scenario_t *s = pdt_load_scenario("decode-crash-and-restart");
  PDT_TRUE(s != NULL);
  if (!s) return;
  pd_conform_opts_t o;
  pd_conform_result_t r;
  pdt_conform_opts(&o, bin, "reference", cmd, sizeof cmd);
  PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
  PDT_EQ_INT(r.status, PD_CONFORM_RAN);
  PDT_TRUE(r.scale >= 0.1); /* the scenario's socket_min_scale */
  PDT_EQ_INT(r.legs_by_timing, 0);
  PDT_TRUE(r.judged & PD_CONFORM_BIT(PD_INV_OUTCOME));
  PDT_EQ_INT(r.got, 0);
  PDT_TRUE(r.matched);
  assert_no_survivors(&r);
  pdt_conform_opts(&o, bin, "minilb", cmd, sizeof cmd);
  PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
  PDT_EQ_INT(r.status, PD_CONFORM_RAN);
  PDT_EQ_INT(r.legs_by_timing, 0); /* no header on the legs, the prompt carries the id */
  PDT_TRUE(r.matched);
  assert_no_survivors(&r);
  free(s);
}

/* A gateway command that never listens (and leaves a background child behind), and one that
 * exits at once: both are errors within the start bound, and nothing survives. */
static void test_failed_gateway_leaves_no_process(void) {
  char bin[PATH_MAX + 8];
  if (pdt_pdref_path(bin, sizeof bin) != 0) return;
  pd_scenario_t *s = pdt_load_scenario("happy-path-stream");
  PDT_TRUE(s != NULL);
  if (!s) return;
  static const char *const cmds[] = {"sleep 30 & sleep 30 # {port}", "echo no gateway here; exit 3"};
  for (size_t i = 0; i < 2; i++) {
    pd_conform_opts_t o;
    pd_conform_opts_default(&o);
    o.gateway_cmd = cmds[i];
    o.pdref_bin = bin;
    o.scale = SCALE;
    o.start_ms = 1500;
    o.stop_ms = 1000;
    pd_conform_result_t r;
    PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
    PDT_EQ_INT(r.status, PD_CONFORM_ERROR);
    PDT_FALSE(r.matched);
    PDT_TRUE(r.seconds < 10);
    PDT_EQ_INT(r.n_pids, s->n_workers + 1);
    PDT_TRUE(i == 0 ? strstr(r.reason, "did not accept") != NULL
                    : strstr(r.reason, "exited (status 3)") != NULL &&
                          strstr(r.reason, "no gateway here") != NULL);
    assert_no_survivors(&r);
  }
  pd_conform_opts_t o; /* a template with an unknown placeholder starts nothing */
  pd_conform_opts_default(&o);
  o.gateway_cmd = "gw --listen {nope}";
  o.pdref_bin = bin;
  pd_conform_result_t r;
  PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
  PDT_EQ_INT(r.status, PD_CONFORM_ERROR);
  PDT_EQ_INT(r.n_pids, 0);
  PDT_TRUE(strstr(r.reason, "{nope}") != NULL);
  free(s);
}

static void test_skips_what_sockets_cannot_run(void) {
  pd_scenario_t *s = pdt_load_scenario("decode-crash-and-restart");
  PDT_TRUE(s != NULL);
  if (!s) return;
  pd_conform_opts_t o;
  pd_conform_opts_default(&o);
  o.gateway_cmd = "true";
  o.pdref_bin = "/nonexistent";
  PDT_TRUE(pd_conform_skip_reason(s) == NULL); /* a crash runs; skipped after, if untied */
  s->workload.requests = PD_CONFORM_MAX_REQUESTS + 1;
  pd_conform_result_t r;
  PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
  PDT_EQ_INT(r.status, PD_CONFORM_SKIPPED);
  PDT_EQ_INT(r.n_pids, 0); /* skipped before anything starts */
  PDT_TRUE(pd_conform_skip_reason(s) != NULL);
  s->workload.requests = PD_CONFORM_MAX_REQUESTS;
  PDT_TRUE(pd_conform_skip_reason(s) == NULL);
  free(s);
}

static void test_placeholders_expand(void) {
  pd_scenario_t *s = pdt_load_scenario("decode-503-while-prefill-detached"); /* p0 p1 d0 d1, seed 2 */
  PDT_TRUE(s != NULL);
  if (!s) return;
  pd_conform_opts_t o;
  pd_conform_opts_default(&o);
  pd_conform_set_label(&o, "reference");
  o.scale = 0.01;
  uint16_t ports[] = {1001, 1002, 2001, 2002}, boot[] = {3001, 3002, 0, 0};
  char out[2048], err[256] = "";
  PDT_EQ_INT(pd_conform_expand(s, &o, "gw {prefill_urls} | {decode_urls} | {port} ${HOME} {a,b}",
                               ports, boot, 8080, out, sizeof out, err, sizeof err),
             0);
  PDT_EQ_STR(out, "gw http://127.0.0.1:1001@3001 http://127.0.0.1:1002@3002 | "
                  "http://127.0.0.1:2001 http://127.0.0.1:2002 | 8080 ${HOME} {a,b}");
  PDT_EQ_INT(pd_conform_expand(s, &o, "{prefill_args} {decode_args}", ports, boot, 1, out,
                               sizeof out, err, sizeof err),
             0);
  PDT_EQ_STR(out, "--prefill http://127.0.0.1:1001@3001 --prefill http://127.0.0.1:1002@3002 "
                  "--decode http://127.0.0.1:2001 --decode http://127.0.0.1:2002");
  PDT_EQ_INT(pd_conform_expand(s, &o, "{smg_prefill_args}|{prefill_plain_urls}|{bootstrap_ports}|"
                               "{prefill_ports}|{decode_ports}|{prefill_hosts}|{decode_hosts}",
                               ports, boot, 1, out, sizeof out, err, sizeof err),
             0);
  PDT_EQ_STR(out, "--prefill http://127.0.0.1:1001 3001 --prefill http://127.0.0.1:1002 3002|"
                  "http://127.0.0.1:1001 http://127.0.0.1:1002|3001 3002|1001 1002|2001 2002|"
                  "127.0.0.1 127.0.0.1|127.0.0.1 127.0.0.1");
  PDT_EQ_INT(pd_conform_expand(s, &o, "{pdref_gateway_args}", ports, boot, 1, out, sizeof out,
                               err, sizeof err),
             0);
  /* reference defaults scaled by 0.01: 30 s -> 300 ms, total 600 s -> 6000 ms, commit 90 s ->
   * 900 ms, 100 ms a token -> 1, tail 500 -> 5 */
  PDT_TRUE(strstr(out, "--first-token-timeout-ms 300 --idle-timeout-ms 300 "
                       "--total-timeout-ms 6000 --commit-timeout-ms 900 --token-budget-ms 1 "
                       "--tail-timeout-ms 5") != NULL);
  PDT_TRUE(strstr(out, "--max-attempts 5") && strstr(out, "--prefill-policy round_robin"));
  PDT_EQ_INT(pd_conform_expand(s, &o, "x {nope}", ports, boot, 1, out, sizeof out, err, sizeof err),
             -1);
  PDT_TRUE(strstr(err, "{nope}") != NULL);
  PDT_EQ_INT(pd_conform_expand(s, &o, "{prefill_urls}", ports, boot, 1, out, 8, err, sizeof err), -1);
  free(s);
}

/* `pdref gateway --seed G` draws what the simulator's gateway draws for scenario seed S. */
static void test_gateway_seed_matches_the_simulators_stream(void) {
  for (uint64_t seed = 1; seed < 5; seed++) {
    pd_prng_t root, sim_gw, gw;
    pd_prng_init(&root, seed);
    pd_prng_fork(&root, 1, &sim_gw);
    pd_prng_init(&gw, pd_conform_gateway_seed(seed));
    for (int i = 0; i < 4; i++) PDT_EQ_U64(pd_prng_next(&gw), pd_prng_next(&sim_gw));
  }
}


/* ---------- attribution of legs without X-Request-Id (net/pd_conform_judge.c) ---------- */

#define MS_NS 1000000ull

static pd_cf_mleg_t *judge_leg(pd_cf_run_t *run, uint32_t worker, const char *room, double arrive_ms,
                               double closed_ms, int fault, int end_status, pd_truth_t truth) {
  pd_cf_mleg_t *l = &run->legs[run->n_legs++];
  memset(l, 0, sizeof *l);
  l->worker = worker;
  l->role = run->s->workers[worker].role;
  l->req = run->n_legs;
  snprintf(l->rid, sizeof l->rid, "%032zx", run->n_legs); /* made up: no rid_given */
  snprintf(l->room_s, sizeof l->room_s, "%s", room);
  l->room = strtoull(room, NULL, 10);
  l->has_room = 1;
  l->n_rooms = 1;
  l->is_stream = 1;
  l->rid_given = 0;
  l->boot_port = 8998;
  snprintf(l->host, sizeof l->host, "127.0.0.1");
  l->t_arrive = (uint64_t)(arrive_ms * MS_NS);
  l->t_peer_closed = (uint64_t)(closed_ms * MS_NS);
  l->fault = fault;
  l->end_status = end_status;
  l->truth = truth;
  l->client = l->unit = l->partner = l->resend_of = -1;
  return l;
}

/* A minilb swarm under load, reduced to two requests the gateway took out of order (seen in
 * swarm-random-faults-stream at --timeout-scale 0.1, checked against X-Request-Id): request 0
 * was given up still open with no head (its prefill hung before the head, its decode waited
 * for the KV until the gateway stopped); request 1, sent 1 ms later, got mini_lb's 500 at
 * 62 ms (its decode was reset before the head; the session closed its prefill at 68 ms).
 * Request 1's attempt reached the workers first. FIFO alone tied it to request 0 and request
 * 0's pair to request 1: a decode leg "open 12 s after the client's end" (I2) that the
 * simulator never reports. Each attempt must go where it explains how the request ended. */
static void test_judge_ties_attempts_by_how_requests_ended(void) {
  pd_scenario_t *s = pdt_load_scenario("happy-path-stream"); /* p0 (prefill), d0 (decode) */
  PDT_TRUE(s != NULL);
  if (!s) return;
  pd_conform_opts_t o;
  pd_conform_opts_default(&o);
  pd_conform_set_label(&o, "minilb");
  pd_conform_result_t r;
  memset(&r, 0, sizeof r);
  r.judged = pd_conform_judged_mask(&o);
  pd_scenario_t ss = *s;
  ss.config.deadline_ms = 12000;
  ss.config.grace_ms = 100;
  struct pd_world *w = calloc(1, sizeof *w);
  pd_cf_run_t run;
  memset(&run, 0, sizeof run);
  run.s = s;
  run.ss = &ss;
  run.o = &o;
  run.r = &r;
  run.w = w;
  run.grace_ns = 100 * MS_NS;
  run.bound_ns = 12350 * MS_NS;
  run.t_gw_stop = 12400 * MS_NS;
  pd_cf_req_t reqs[2];
  pd_cf_mleg_t legs[4];
  memset(reqs, 0, sizeof reqs);
  run.reqs = reqs;
  run.n_reqs = 2;
  run.legs = legs;
  run.cap_legs = 4;
  PDT_TRUE(w != NULL);
  if (!w) {
    free(s);
    return;
  }
  w->s = &ss;
  w->mode = PD_MODE_MINILB;
  pd_scenario_gw_config(s, w->mode, &w->gcfg);
  w->stats = &run.stats;
  w->n_nodes = s->n_workers;
  for (uint32_t i = 0; i < s->n_workers; i++) {
    w->nodes[i].spec = &ss.workers[i];
    w->nodes[i].role = s->workers[i].role;
  }
  uint32_t p0 = s->workers[0].role == PD_ROLE_PREFILL ? 0 : 1, d0 = 1 - p0;
  for (uint32_t i = 0; i < 2; i++) {
    pd_cf_req_t *q = &reqs[i];
    q->run = &run;
    q->c.id = i;
    q->c.is_stream = 1;
    q->c.tokens = 8;
    pd_sse_init(&q->c.sse, NULL);
    q->c.t_arrival = (uint64_t)((8.1 + 1.1 * i) * MS_NS);
    q->t_bound = q->c.t_arrival + run.bound_ns;
  }
  reqs[0].is_cut = 1; /* never a head, given up at its bound */
  reqs[1].c.ended = 1;
  reqs[1].c.head_status = 500;
  reqs[1].c.t_head = reqs[1].c.t_first_data = 62 * MS_NS;
  reqs[1].c.t_end = 65 * MS_NS;
  snprintf(reqs[1].first, sizeof reqs[1].first, "%s",
           "{\"error\":{\"type\":\"Internal Server Error\",\"code\":\"internal_error\"}}");
  /* request 1's attempt, first at the workers */
  judge_leg(&run, p0, "111", 42.7, 68.2, -1, 200, PD_TRUTH_PENDING);
  judge_leg(&run, d0, "111", 41.9, 42.6, PD_FAULT_RESET_BEFORE_HEAD, 0, PD_TRUTH_FAILED);
  /* request 0's, open until the gateway stopped */
  judge_leg(&run, p0, "222", 44.4, 12378.3, PD_FAULT_HANG_BEFORE_HEAD, 0, PD_TRUTH_STALLED);
  judge_leg(&run, d0, "222", 65.3, 12369.2, -1, 200, PD_TRUTH_STALLED);
  pd_cf_judge(&run);
  uint32_t got = w->violations & r.judged;
  PDT_TRUE(got & PD_CONFORM_BIT(PD_INV_TERMINATION));      /* request 0 never ended */
  PDT_FALSE(got & PD_CONFORM_BIT(PD_INV_ORPHAN_LEG));      /* no leg outlived its client */
  PDT_FALSE(got & PD_CONFORM_BIT(PD_INV_ATTEMPTS));
  PDT_EQ_INT(legs[0].unit, legs[1].unit);
  for (uint32_t i = 0; i < 2; i++) {
    PDT_EQ_INT(reqs[i].n_units, 1);
    pd_sse_free(&reqs[i].c.sse);
    free(reqs[i].units);
  }
  free(w);
  free(s);
}

int pdt_suite_conform(void) {
  static const pdt_case_t cases[] = {
      {"placeholders expand", test_placeholders_expand},
      {"gateway seed matches the simulator's stream", test_gateway_seed_matches_the_simulators_stream},
      {"skips what sockets cannot run", test_skips_what_sockets_cannot_run},
      {"judge ties attempts by how requests ended", test_judge_ties_attempts_by_how_requests_ended},
      {"a failed gateway leaves no process", test_failed_gateway_leaves_no_process},
      {"a crash is judged when every leg is tied by X-Request-Id or the prompt's id",
       test_crash_judged_when_legs_are_tied_by_request_id},
      {"parity with the simulator on a subset, all modes", test_parity_with_the_simulator_on_a_subset},
  };
  return PDT_SUITE("conform", cases);
}
