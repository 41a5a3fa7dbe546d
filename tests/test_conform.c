/* pdref conform (net/conform/pd_conform.h) through the real pdref binary: `pdref mock` children and
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
     would be 1 ms after sending, often before decode registered its room). At 0.01 the
     reference's 5 s head deadline is 50 ms, which an ASan gateway on a machine at load 8 can
     miss for a healthy leg (I4 from /metrics: a timeout recorded for a prefill whose truth
     was ok, seen on decode-503-while-prefill-detached and happy-path-stream): the machine's
     limit, not the gateway's, so these rows run at 0.05 (250 ms) too. */
  static const struct { const char *name; double scale; } cases[] = {
      {"happy-path-stream", 0.05},
      {"decode-503-while-prefill-detached", 0.05},
      {"prefill-sse-error-under-200-stream", 0.05},
      {"client-disconnect-during-decode-stream", 0.05},
      {"prompt-larger-than-decode-pool", 0.05}, /* the decode's 400 (a reject line) */
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
      if (!pd_mode_speaks((pd_mode_t)m, pd_scenario_protocol(s))) continue;
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
  signal(SIGPIPE, SIG_IGN);
  pdt_row_t x;
  if (pdt_row_open_run(&x, "decode-crash-and-restart", "reference", 0.01) != 0) return;
  PDT_TRUE(x.r.scale >= 0.1); /* the scenario's socket_min_scale */
  PDT_EQ_INT(x.r.legs_by_timing, 0);
  PDT_TRUE(x.r.judged & PD_CONFORM_BIT(PD_INVARIANT_OUTCOME));
  char what[512]; /* a failure names the violation (a load-timing one was seen once) */
  snprintf(what, sizeof what, "decode-crash-and-restart / reference: conform %#x (%s)", x.r.got,
           x.r.reason);
  CU_assertImplementation(x.r.got == 0, __LINE__, what, __FILE__, "", CU_FALSE);
  PDT_TRUE(x.r.matched);
  assert_no_survivors(&x.r);
  pdt_conform_opts(&x.o, x.bin, "minilb", x.cmd, sizeof x.cmd);
  if (pdt_row_run(&x) == 0) {
    PDT_EQ_INT(x.r.legs_by_timing, 0); /* no header on the legs, the prompt carries the id */
    PDT_TRUE(x.r.matched);
    assert_no_survivors(&x.r);
  }
  pdt_row_close(&x);
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


/* Issue 9 item 4: a gateway that sends its own X-Request-Id (tests/pdt_proxy.py puts a
 * uuid4 in front of `pdref gateway`, as vLLM's proxies do) must not hide the runner's id in
 * the prompt: every leg is still tied by it. Four concurrent non-stream requests. */
static void test_foreign_request_id_does_not_hide_the_runners(void) {
  char bin[PATH_MAX + 8], cmd[2 * PATH_MAX + 256];
  if (pdt_pdref_path(bin, sizeof bin) != 0 || system("python3 -c 'import http.server' 2>/dev/null")) {
    fprintf(stderr, "test_conform: pdref or python3 missing, foreign-id test skipped\n");
    return;
  }
  pd_scenario_t *s = pdt_load_scenario("happy-path-nonstream");
  PDT_TRUE(s != NULL);
  if (!s) return;
  s->workload.requests = 4;
  pd_conform_opts_t o;
  pdt_conform_opts(&o, bin, "reference", cmd, sizeof cmd);
  snprintf(cmd, sizeof cmd,
           "exec python3 %s/tests/pdt_proxy.py {port} --rewrite-id -- %s gateway --mode reference "
           "{prefill_args} {decode_args} {pdref_gateway_args}",
           PD_SOURCE_DIR, bin);
  o.scale = 0.1;
  pd_conform_result_t r;
  PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
  PDT_EQ_INT(r.status, PD_CONFORM_RAN);
  PDT_EQ_INT(r.legs, 8);
  PDT_EQ_INT(r.legs_by_id, 8);
  PDT_EQ_INT(r.got, 0);
  assert_no_survivors(&r);
  free(s);
}

/* Issue 9 item 5 on real sockets: the only prefill is down from 50 ms, so the second request's
 * every prefill connect is refused and reference answers 502 while its last attempt's decode
 * request may still be on its way (before the fix, I6 in 4 runs of 4 at scale 0.1). The
 * simulator passes; so must conform, in every run. */
static void test_refused_last_prefill_is_no_retry_after_commit(void) {
  char bin[PATH_MAX + 8], cmd[PATH_MAX + 256];
  if (pdt_pdref_path(bin, sizeof bin) != 0) return;
  signal(SIGPIPE, SIG_IGN);
  pd_scenario_t *s = pdt_scenario_from_json(
      "{\"name\": \"prefill-down-every-attempt\", \"description\": \"p0 crashes at 50 ms\","
      " \"workers\": [{\"name\": \"p0\", \"role\": \"prefill\", \"crash_at_ms\": 50},"
      " {\"name\": \"d0\", \"role\": \"decode\"}], \"workload\": {\"requests\": 2,"
      " \"interval_ms\": 100, \"stream\": true}, \"expect\": {\"reference\": \"pass\"}}");
  PDT_TRUE(s != NULL);
  if (!s) return;
  pd_world_stats_t st;
  uint32_t sim = 0;
  uint64_t hash = 0;
  PDT_EQ_INT(pd_world_run(s, PD_MODE_REFERENCE, s->config.seed, NULL, &st, &sim, &hash), 0);
  PDT_EQ_INT(sim, 0);
  for (int run = 0; run < 3; run++) {
    pd_conform_opts_t o;
    pdt_conform_opts(&o, bin, "reference", cmd, sizeof cmd);
    o.scale = 0.1;
    pd_conform_result_t r;
    PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
    PDT_EQ_INT(r.status, PD_CONFORM_RAN);
    PDT_FALSE(r.got & PD_CONFORM_BIT(PD_INVARIANT_COMMIT));
    PDT_EQ_INT(r.got, 0);
    assert_no_survivors(&r);
  }
  pdt_drop_scenario(s);
}

/* Every room of a batch reaches the checker (G18): the mocks log them ("rooms", and whether
 * bootstrap_room was an array), so a chat n=2 through reference logs two distinct rooms on
 * each leg. Where the checker judges every room, joined's scalar fields for a text array are
 * I8 on sockets as in the simulator. */
static void test_batch_rooms_reach_the_checker(void) {
  char bin[PATH_MAX + 8], cmd[PATH_MAX + 256], path[sizeof ((pd_conform_result_t *)0)->dir + 32];
  if (pdt_pdref_path(bin, sizeof bin) != 0) return;
  signal(SIGPIPE, SIG_IGN);
  pd_scenario_t *s = pdt_load_scenario("batch-chat-n2");
  PDT_TRUE(s != NULL);
  if (!s) return;
  pd_conform_opts_t o;
  pdt_conform_opts(&o, bin, "reference", cmd, sizeof cmd);
  o.keep = 1;
  pd_conform_result_t r;
  PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
  PDT_EQ_INT(r.status, PD_CONFORM_RAN);
  PDT_EQ_INT(r.got, 0);
  for (uint32_t w = 0; w < s->n_workers; w++) {
    snprintf(path, sizeof path, "%s/w%u.jsonl", r.dir, w);
    FILE *f = fopen(path, "r");
    char line[4096];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
      if (strstr(line, "\"ev\":\"request\"")) {
        const char *p = strstr(line, "\"rooms\":[\"");
        char a[24] = "", b[24] = "";
        found = p && sscanf(p, "\"rooms\":[\"%23[0-9]\",\"%23[0-9]\"]", a, b) == 2 &&
                strcmp(a, b) != 0 && strstr(line, "\"room_array\":true") != NULL;
      }
    if (f) fclose(f);
    PDT_TRUE(found);
  }
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", r.dir);
  PDT_EQ_INT(system(cmd), 0);
  free(s);
#if PD_INVARIANT_COUNT >= 17
  s = pdt_load_scenario("batch-generate-text-array");
  PDT_TRUE(s != NULL);
  if (!s) return;
  pdt_conform_opts(&o, bin, "joined", cmd, sizeof cmd);
  PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
  PDT_TRUE(r.got & PD_CONFORM_BIT(PD_INVARIANT_ROOMS));
  PDT_TRUE(r.matched);
  free(s);
#endif
}

int pdt_suite_conform(void) {
  static const pdt_case_t cases[] = {
      {"placeholders expand", test_placeholders_expand},
      {"gateway seed matches the simulator's stream", test_gateway_seed_matches_the_simulators_stream},
      {"skips what sockets cannot run", test_skips_what_sockets_cannot_run},
      {"a failed gateway leaves no process", test_failed_gateway_leaves_no_process},
      {"batch rooms reach the checker", test_batch_rooms_reach_the_checker},
      {"a refused last prefill is no retry after commit",
       test_refused_last_prefill_is_no_retry_after_commit},
      {"a gateway's own X-Request-Id does not hide the runner's id",
       test_foreign_request_id_does_not_hide_the_runners},
      {"a crash is judged when every leg is tied by X-Request-Id or the prompt's id",
       test_crash_judged_when_legs_are_tied_by_request_id},
      {"parity with the simulator on a subset, all modes", test_parity_with_the_simulator_on_a_subset},
  };
  return PDT_SUITE("conform", cases);
}
