/* cli/: the option checks (cli/cli_args.c) as functions, and the built pdref and pdref-gateway
 * binaries (next to this test binary) as a user runs them: a bad number, an unknown option or
 * a missing value exits 2 naming the option; --help and --version exit 0. Every run is
 * bounded (a child still running after PDT_CLI_LIMIT_MS is killed). */
#include <cjson/cJSON.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "cli_progress.h"
#include "pd_err.h"
#include "pdt.h"
#include "pdt_cli.h"
#include "pdt_net.h"
#include "pdt_proc.h"

/* ---------- the parse helpers ---------- */

static int u64(const char *text, uint64_t min, uint64_t max, uint64_t *out) {
  return pd_cli_parse_u64("test", "--n", text, min, max, out);
}

static void test_u64_accepts_whole_numbers_in_range(void) {
  uint64_t v = 7;
  PDT_EQ_INT(u64("500", 0, 1000, &v), 0);
  PDT_EQ_U64(v, 500);
  PDT_EQ_INT(u64("1", 1, 10, &v), 0); /* both edges are inside */
  PDT_EQ_U64(v, 1);
  PDT_EQ_INT(u64("10", 1, 10, &v), 0);
  PDT_EQ_U64(v, 10);
  PDT_EQ_INT(u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
  PDT_EQ_U64(v, UINT64_MAX);
  PDT_EQ_INT(u64("007", 0, 10, &v), 0); /* leading zeros are still decimal */
  PDT_EQ_U64(v, 7);
  PDT_EQ_INT(u64("-0", 0, 10, &v), 0);
  PDT_EQ_U64(v, 0);
}

static void test_u64_rejects_garbage_sign_overflow_and_range(void) {
  static const char *const bad[] = {"500x", "", " 5", "5 ", "+5", "0x10", "1e3", "abc", "-",
                                    "1.5", "-1", "-18446744073709551615",
                                    "18446744073709551616", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t v = 42;
    int rc = u64(bad[i], 0, UINT64_MAX, &v);
    if (rc != PD_ERR_INVAL) fprintf(stderr, "test_cli: '%s' was accepted\n", bad[i]);
    PDT_EQ_INT(rc, PD_ERR_INVAL);
    PDT_EQ_U64(v, 42); /* untouched on error */
  }
  uint64_t v = 42;
  PDT_EQ_INT(u64("0", 1, 10, &v), PD_ERR_INVAL); /* one below min */
  PDT_EQ_INT(u64("11", 1, 10, &v), PD_ERR_INVAL); /* one above max */
  PDT_EQ_U64(v, 42);
}

static void test_u32_narrows_to_its_range(void) {
  uint32_t v = 3;
  PDT_EQ_INT(pd_cli_parse_u32("test", "--n", "4294967295", 0, UINT32_MAX, &v), 0);
  PDT_EQ_U64(v, UINT32_MAX);
  PDT_EQ_INT(pd_cli_parse_u32("test", "--n", "4294967296", 0, UINT32_MAX, &v), PD_ERR_INVAL);
  PDT_EQ_INT(pd_cli_parse_u32("test", "--n", "65", 1, 64, &v), PD_ERR_INVAL);
  PDT_EQ_U64(v, UINT32_MAX);
}

static void test_double_is_finite_whole_and_in_range(void) {
  double v = -1;
  PDT_EQ_INT(pd_cli_parse_double("test", "--f", "0.25", 0, 1, &v), 0);
  PDT_TRUE(v == 0.25);
  PDT_EQ_INT(pd_cli_parse_double("test", "--f", "0", 0, 1, &v), 0); /* edges inside */
  PDT_TRUE(v == 0);
  PDT_EQ_INT(pd_cli_parse_double("test", "--f", "1", 0, 1, &v), 0);
  PDT_TRUE(v == 1);
  PDT_EQ_INT(pd_cli_parse_double("test", "--f", "1e-2", 0, 1, &v), 0);
  PDT_TRUE(v == 0.01);
  static const char *const bad[] = {"abc", "", "0.5x", " 0.5", "nan", "inf", "-inf", "1e999",
                                    "-0.0001", "1.0001", "0x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    double w = 7;
    int rc = pd_cli_parse_double("test", "--f", bad[i], 0, 1, &w);
    if (rc != PD_ERR_INVAL) fprintf(stderr, "test_cli: '%s' was accepted\n", bad[i]);
    PDT_EQ_INT(rc, PD_ERR_INVAL);
    PDT_TRUE(w == 7);
  }
}

static void test_positive_excludes_zero(void) {
  double v = 0;
  PDT_EQ_INT(pd_cli_parse_positive("test", "--s", "0", 100, &v), PD_ERR_INVAL);
  PDT_EQ_INT(pd_cli_parse_positive("test", "--s", "-1", 100, &v), PD_ERR_INVAL);
  PDT_EQ_INT(pd_cli_parse_positive("test", "--s", "100.5", 100, &v), PD_ERR_INVAL);
  PDT_EQ_INT(pd_cli_parse_positive("test", "--s", "0.001", 100, &v), 0);
  PDT_TRUE(v == 0.001);
  PDT_EQ_INT(pd_cli_parse_positive("test", "--s", "100", 100, &v), 0);
  PDT_TRUE(v == 100);
}

static void test_host_port(void) {
  char host[16] = "";
  uint16_t port = 1;
  PDT_EQ_INT(pd_cli_parse_host_port("test", "--listen", "127.0.0.1:8000", host, sizeof host,
                                    &port), 0);
  PDT_EQ_STR(host, "127.0.0.1");
  PDT_EQ_U64(port, 8000);
  PDT_EQ_INT(pd_cli_parse_host_port("test", "--listen", "[::1]:0", host, sizeof host, &port), 0);
  PDT_EQ_STR(host, "::1");
  PDT_EQ_U64(port, 0);
  PDT_EQ_INT(pd_cli_parse_host_port("test", "--listen", "h:65535", host, sizeof host, &port), 0);
  PDT_EQ_U64(port, 65535);
  static const char *const bad[] = {"127.0.0.1", ":80", "h:", "h:65536", "h:8x", "h:-1", "",
                                    "h:123456", "[]:80", "a-host-name-too-long:80"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = pd_cli_parse_host_port("test", "--listen", bad[i], host, sizeof host, &port);
    if (rc != PD_ERR_INVAL) fprintf(stderr, "test_cli: '%s' was accepted\n", bad[i]);
    PDT_EQ_INT(rc, PD_ERR_INVAL);
  }
  PDT_EQ_STR(host, "h"); /* the last good parse */
}

static void test_mode_names(void) {
  pd_mode_t m = PD_MODE_JOINED;
  PDT_EQ_INT(pd_cli_parse_mode("test", "--mode", "reference", &m), 0);
  PDT_EQ_INT(m, PD_MODE_REFERENCE);
  PDT_EQ_INT(pd_cli_parse_mode("test", "--mode", "Reference", &m), PD_ERR_INVAL);
}

static void test_progress_is_silent_with_json(void) {
  pd_cli_progress_t p;
  pd_cli_progress_init(&p, 1);
  PDT_EQ_INT(p.is_on, 0);
  pd_cli_progress_draw(&p, 1, "%d requests", 5);
  PDT_EQ_INT(p.line_chars, 0); /* nothing drawn, nothing to clear */
  PDT_TRUE(pd_cli_progress_elapsed_s(&p) >= 0);
}

static int parsed_n;

static int apply_n(void *ctx, int val, int index, char *value) {
  (void)ctx;
  PDT_EQ_INT(val, PD_CLI_OPT_FIRST);
  PDT_EQ_INT(index, 1);
  return pd_cli_parse_u32("test", "--n", value, 0, 100, (uint32_t *)&parsed_n);
}

static void no_usage(FILE *f) { (void)f; }

static void test_parse_loop_words_in_order_and_after_dashes(void) {
  static const struct option opts[] = {
      {"help", no_argument, NULL, 'h'}, {"n", required_argument, NULL, PD_CLI_OPT_FIRST}, {0}};
  char a0[] = "cmd", a1[] = "a", a2[] = "--n", a3[] = "5", a4[] = "b", a5[] = "--", a6[] = "--c";
  char *argv[] = {a0, a1, a2, a3, a4, a5, a6, NULL};
  char *words[4];
  int n_words = 0;
  parsed_n = -1;
  pd_cli_parser_t p = {"test", opts, no_usage, apply_n, NULL, words, 4, &n_words};
  PDT_EQ_INT(pd_cli_parse(&p, 7, argv), -1);
  PDT_EQ_INT(parsed_n, 5);
  PDT_EQ_INT(n_words, 3);
  if (n_words == 3) {
    PDT_EQ_STR(words[0], "a");
    PDT_EQ_STR(words[1], "b");
    PDT_EQ_STR(words[2], "--c"); /* after "--", a word even if it looks like an option */
  }
  char b0[] = "cmd", b1[] = "--n=7", b2[] = "stray";
  char *argv2[] = {b0, b1, b2, NULL};
  p.words = NULL; /* this command takes no words */
  PDT_EQ_INT(pd_cli_parse(&p, 3, argv2), 2);
  PDT_EQ_INT(parsed_n, 7);
  char c0[] = "cmd", c1[] = "--n", c2[] = "7x";
  char *argv3[] = {c0, c1, c2, NULL};
  PDT_EQ_INT(pd_cli_parse(&p, 3, argv3), 2); /* a bad value stops the parse */
  char d0[] = "cmd", d1[] = "-h", d2[] = "--bogus";
  char *argv4[] = {d0, d1, d2, NULL};
  PDT_EQ_INT(pd_cli_parse(&p, 3, argv4), 0); /* --help first: usage, exit 0 */
}

/* ---------- the binaries ---------- */

/* Run bin_name (next to this test) with args, NULL-terminated, stdout and stderr together
 * in r->out; 0, or -1 when not built. */
static int run_bin(run_t *r, const char *bin_name, const char *const *args) {
  return pdt_cli_run(r, bin_name, args, 0);
}

static run_t *pdref(const char *const *args) {
  static run_t r;
  memset(&r, 0, sizeof r);
  if (run_bin(&r, "pdref", args) != 0) {
    fprintf(stderr, "test_cli: pdref not built next to the tests, binary test skipped\n");
    return NULL;
  }
  return &r;
}


static void test_bad_number_exits_2_naming_flag_and_value(void) {
  const char *args[] = {"sim", "bench", "--requests", "500x", NULL};
  run_t *r = pdref(args);
  if (!r) return;
  PDT_EQ_INT(r->code, 2);
  PDT_HAS(r->out, "pdref sim bench: --requests: '500x' is not a number");
  PDT_TRUE(strstr(r->out, "requests/s") == NULL); /* nothing ran */
  const char *rate[] = {"sim", "bench", "--fault-rate", "abc", NULL};
  r = pdref(rate);
  PDT_EQ_INT(r->code, 2);
  PDT_HAS(r->out, "--fault-rate: 'abc' is not a number");
  const char *range[] = {"sim", "bench", "--fault-rate", "1.5", NULL};
  r = pdref(range);
  PDT_EQ_INT(r->code, 2);
  PDT_HAS(r->out, "--fault-rate: '1.5' is out of range 0..1");
  const char *cap[] = {"mock", "--role", "decode", "--max-running", "0", NULL};
  r = pdref(cap);
  PDT_EQ_INT(r->code, 2);
  PDT_HAS(r->out, "--max-running: '0' is out of range 1..");
}

static void test_good_numbers_still_run(void) {
  const char *args[] = {"sim", "bench", "--requests", "500", "--fault-rate", "0", "--json", NULL};
  run_t *r = pdref(args);
  if (!r) return;
  PDT_EQ_INT(r->code, 0);
  PDT_HAS(r->out, "\"requests\":\t500,");
  const char *eq[] = {"sim", "bench", "--requests=300", "--json", NULL}; /* --flag=value */
  r = pdref(eq);
  PDT_EQ_INT(r->code, 0);
  PDT_HAS(r->out, "\"requests\":\t300,");
}

#define BENCH_SCENARIO PD_SOURCE_DIR "/bench/scenarios/hour-1000rps-8p8d.json"

/* One number of a sim bench --json object; -1 when absent. */
static double bench_num(const cJSON *j, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* sim bench --scenario at a smaller size: 2,000 requests 1 ms apart last about 2 simulated
 * s; --rate 4000 puts them 0.25 ms apart (about 0.5 s); RSS sampled every tenth. */
static void test_bench_scenario_requests_and_rate(void) {
  const char *base[] = {"sim", "bench", "--scenario", BENCH_SCENARIO, "--requests", "2000",
                        "--fault-rate", "0", "--json", NULL};
  const char *fast[] = {"sim", "bench", "--scenario", BENCH_SCENARIO, "--requests", "2000",
                        "--fault-rate", "0", "--rate", "4000", "--json", NULL};
  double sim_s[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    run_t *r = pdref(k ? fast : base);
    if (!r) return;
    PDT_EQ_INT(r->code, 0);
    cJSON *j = cJSON_Parse(r->out);
    PDT_TRUE(j != NULL);
    if (!j) return;
    PDT_TRUE(bench_num(j, "requests") == 2000);
    PDT_TRUE(bench_num(j, "events_per_s") > 0 && bench_num(j, "peak_rss_kib") > 0);
    PDT_TRUE(bench_num(j, "violating_requests") == 0);
    sim_s[k] = bench_num(j, "simulated_s");
    const cJSON *rss = cJSON_GetObjectItemCaseSensitive(j, "rss_kib_by_tenth");
    PDT_EQ_INT(cJSON_GetArraySize(rss), 10);
    for (int i = 0; i < cJSON_GetArraySize(rss); i++)
      PDT_TRUE(cJSON_GetArrayItem(rss, i)->valuedouble > 0);
    cJSON_Delete(j);
  }
  PDT_TRUE(sim_s[0] > 1.8 && sim_s[0] < 2.6);
  PDT_TRUE(sim_s[1] > 0.4 && sim_s[1] < 0.8);
}

/* Each of these exits 2 with the message: --rate on a scenario of bursts, a missing file,
 * a rate of 0, and 2 M requests 1000 s apart (past PD_SCENARIO_MAX_MS). */
/* `gateway bench --gateway-cmd`: any gateway command, its workers given by conform's
 * placeholders, measured on the same paths as pdref's own; a template that does not expand is
 * bad usage (exit 2, naming it), a command that exits before listening is reported (exit 1). */
static void test_gateway_bench_measures_any_gateway_command(void) {
  char gw[PATH_MAX + 32], cmd[PATH_MAX + 128];
  if (pdt_pdref_path(gw, sizeof gw) != 0) return;
  snprintf(strrchr(gw, '/') + 1, sizeof gw - (size_t)(strrchr(gw, '/') + 1 - gw), "pdref-gateway");
  if (access(gw, X_OK) != 0) return;
  snprintf(cmd, sizeof cmd, "%s {prefill_args} {decode_args} --listen 127.0.0.1:{port}", gw);
  const char *args[] = {"gateway", "bench", "--concurrency", "1", "--requests", "4", "--tokens",
                        "4", "--token-ms", "1", "--no-throughput", "--json", "--gateway-cmd",
                        cmd, NULL};
  run_t *r = pdref(args);
  if (!r) return;
  PDT_EQ_INT(r->code, 0);
  cJSON *j = cJSON_Parse(r->out);
  const cJSON *lv = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "levels"), 0);
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(lv, "gateway");
  const cJSON *pd = cJSON_GetObjectItemCaseSensitive(lv, "pd");
  PDT_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "gateway_label")),
             "pdref-gateway");
  const char *expanded = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "gateway_cmd"));
  PDT_TRUE(expanded && strstr(expanded, " --prefill http://127.0.0.1:") &&
           strstr(expanded, " --decode http://127.0.0.1:") && !strchr(expanded, '{'));
  PDT_EQ_INT((int)bench_num(g, "ok"), 4);
  PDT_EQ_INT((int)bench_num(pd, "ok"), 4);
  PDT_TRUE(bench_num(g, "ttft_p50_us") > 0);
  /* 4 requests: a p50, no p99 (it would be the slowest sample), and no added p99 either */
  PDT_EQ_INT((int)bench_num(g, "ttft_samples"), 4);
  PDT_TRUE(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(g, "ttft_p99_us")));
  PDT_TRUE(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(lv, "added_ttft_p99_us")));
  const char *const added[] = {"added_ttft_p50_us", "added_itl_p50_us", "gateway_alone_ttft_p50_us"};
  for (size_t i = 0; i < sizeof added / sizeof added[0]; i++) /* measured, never below 0 */
    PDT_TRUE(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(lv, added[i])) &&
             bench_num(lv, added[i]) >= 0);
  const cJSON *tg;
  cJSON_ArrayForEach(tg, cJSON_GetObjectItemCaseSensitive(j, "targets")) { /* named, no issue # */
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tg, "name"));
    PDT_TRUE(name && (name[0] < '0' || name[0] > '9'));
  }
  PDT_TRUE(bench_num(cJSON_GetObjectItemCaseSensitive(j, "gateway"), "peak_rss_kib") > 0);
  cJSON_Delete(j);
  if (r->code != 0) fprintf(stderr, "test_cli: gateway bench output:\n%s\n", r->out);
  const char *bad[] = {"gateway", "bench", "--no-throughput", "--gateway-cmd", "gw {nope}", NULL};
  r = pdref(bad);
  PDT_EQ_INT(r->code, 2);
  PDT_HAS(r->out, "unknown placeholder {nope}");
  const char *gone[] = {"gateway", "bench", "--no-throughput", "--concurrency", "1",
                        "--gateway-cmd", "exit 3 # {port}", NULL};
  r = pdref(gone);
  PDT_EQ_INT(r->code, 1);
  PDT_HAS(r->out, "did not accept connections on 127.0.0.1:");
}

static void test_bench_rate_refuses_bursts_and_bad_files(void) {
  static const struct {
    const char *args[8], *want;
  } cases[] = {
      {{"sim", "bench", "--scenario", PD_SOURCE_DIR "/scenarios/burst-arrivals-same-instant.json",
        "--rate", "100", NULL},
       "arrives in bursts, not at a rate"},
      {{"sim", "bench", "--scenario", "/nonexistent/x.json", NULL}, "pdref sim bench: /nonexistent"},
      {{"sim", "bench", "--rate", "0", NULL}, "--rate"},
      {{"sim", "bench", "--requests", "2000000", "--rate", "0.001", NULL},
       "more than 1000000000 ms"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_t *r = pdref(cases[i].args);
    if (!r) return;
    PDT_EQ_INT(r->code, 2);
    PDT_HAS(r->out, cases[i].want);
  }
}

/* The workers' protocol: a mode speaks only its own (reference both), in the gateway and in
 * explore's random worlds: each refusal exits 2 naming what is wrong. */
static void test_protocol_per_mode_is_checked(void) {
  static const struct {
    const char *args[10], *want;
  } cases[] = {
      {{"gateway", "--protocol", "tgi", "--prefill", "http://127.0.0.1:1", "--decode",
        "http://127.0.0.1:2", NULL},
       "--protocol: 'tgi'"},
      {{"gateway", "--mode", "joined", "--protocol", "vllm", "--prefill", "http://127.0.0.1:1",
        "--decode", "http://127.0.0.1:2", NULL},
       "not a protocol mode joined speaks"},
      {{"gateway", "--mode", "vllm-toy-proxy", "--protocol", "sglang", "--prefill",
        "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", NULL},
       "not a protocol mode vllm-toy-proxy speaks"},
      {{"sim", "explore", "--mode", "joined", "--protocol", "vllm", "--seeds", "1", NULL},
       "--protocol vllm: mode joined does not speak it"},
      {{"sim", "explore", "--mode", "llmd-sidecar", "--protocol", "sglang", "--seeds", "1", NULL},
       "--protocol sglang: mode llmd-sidecar does not speak it"},
      {{"sim", "explore", "--mode", "reference", "--protocol", "tgi", "--seeds", "1", NULL},
       "--protocol: expected sglang or vllm, got 'tgi'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_t *r = pdref(cases[i].args);
    if (!r) return;
    PDT_EQ_INT(r->code, 2);
    PDT_HAS(r->out, cases[i].want);
  }
}

/* Each subcommand: an unknown option and a missing value exit 2 naming the option. */
static const char *const subcommands[][2] = {
    {"sim", "run"}, {"sim", "bench"}, {"sim", "explore"}, {"gateway", NULL},
    {"gateway", "bench"}, {"mock", NULL}, {"conform", NULL},
};
#define N_SUBCOMMANDS (sizeof subcommands / sizeof subcommands[0])

static void test_unknown_option_exits_2(void) {
  for (size_t i = 0; i < N_SUBCOMMANDS; i++) {
    const char *args[] = {subcommands[i][0], subcommands[i][1] ? subcommands[i][1] : "--bogus",
                          "--bogus", NULL};
    if (!subcommands[i][1]) args[2] = NULL;
    run_t *r = pdref(args);
    if (!r) return;
    PDT_EQ_INT(r->code, 2);
    PDT_HAS(r->out, "unknown option '--bogus'");
  }
}

static void test_missing_value_exits_2(void) {
  static const char *const flag[N_SUBCOMMANDS] = {"--mode", "--requests", "--seeds", "--listen",
                                                   "--tokens", "--speed", "--gateway-cmd"};
  for (size_t i = 0; i < N_SUBCOMMANDS; i++) {
    const char *args[] = {subcommands[i][0], subcommands[i][1] ? subcommands[i][1] : flag[i],
                          flag[i], NULL};
    if (!subcommands[i][1]) args[2] = NULL;
    run_t *r = pdref(args);
    if (!r) return;
    char want[64];
    snprintf(want, sizeof want, "option '%s' needs a value", flag[i]);
    PDT_EQ_INT(r->code, 2);
    PDT_HAS(r->out, want);
  }
}

static void test_help_exits_0(void) {
  for (size_t i = 0; i < N_SUBCOMMANDS; i++) {
    const char *args[] = {subcommands[i][0], subcommands[i][1] ? subcommands[i][1] : "--help",
                          "--help", NULL};
    if (!subcommands[i][1]) args[2] = NULL;
    run_t *r = pdref(args);
    if (!r) return;
    PDT_EQ_INT(r->code, 0);
    PDT_HAS(r->out, "usage: pdref ");
  }
  const char *top[] = {"--help", NULL};
  run_t *r = pdref(top);
  if (!r) return;
  PDT_EQ_INT(r->code, 0);
  PDT_HAS(r->out, "pdref --version");
}

static void test_version(void) {
  const char *args[] = {"--version", NULL};
  run_t *r = pdref(args);
  if (!r) return;
  PDT_EQ_INT(r->code, 0);
  PDT_TRUE(strncmp(r->out, "pdref ", 6) == 0 && strlen(r->out) > 7);
  char want[128];
  snprintf(want, sizeof want, "pdref %s\n", pd_cli_version());
  PDT_EQ_STR(r->out, want);
  const char *json[] = {"--version", "--json", NULL};
  r = pdref(json);
  PDT_EQ_INT(r->code, 0);
  cJSON *j = cJSON_Parse(r->out);
  cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "version");
  PDT_TRUE(cJSON_IsString(v) && v->valuestring[0]);
  if (cJSON_IsString(v)) PDT_EQ_STR(v->valuestring, pd_cli_version());
  cJSON_Delete(j);
  static run_t g;
  if (run_bin(&g, "pdref-gateway", args) == 0) {
    PDT_EQ_INT(g.code, 0);
    PDT_TRUE(strncmp(g.out, "pdref-gateway ", 14) == 0);
  }
}

int pdt_suite_cli(void) {
  static const pdt_case_t cases[] = {
      {"u64: whole numbers in range, both edges", test_u64_accepts_whole_numbers_in_range},
      {"protocol per mode is checked", test_protocol_per_mode_is_checked},
      {"u64: garbage, sign, overflow, out of range", test_u64_rejects_garbage_sign_overflow_and_range},
      {"u32: its own range", test_u32_narrows_to_its_range},
      {"double: finite, whole text, in range", test_double_is_finite_whole_and_in_range},
      {"positive: 0 excluded, max included", test_positive_excludes_zero},
      {"host:port", test_host_port},
      {"mode names", test_mode_names},
      {"progress bar silent with --json", test_progress_is_silent_with_json},
      {"option loop: words in order, after --, errors", test_parse_loop_words_in_order_and_after_dashes},
      {"sim bench --requests 500x exits 2 naming it", test_bad_number_exits_2_naming_flag_and_value},
      {"good numbers (and --flag=value) still run", test_good_numbers_still_run},
      {"sim bench --scenario: --requests, --rate, RSS tenths", test_bench_scenario_requests_and_rate},
      {"sim bench --rate: bursts refused, bad file, 0, too long", test_bench_rate_refuses_bursts_and_bad_files},
      {"gateway bench measures any gateway command", test_gateway_bench_measures_any_gateway_command},
      {"unknown option exits 2 (every subcommand)", test_unknown_option_exits_2},
      {"missing value exits 2 (every subcommand)", test_missing_value_exits_2},
      {"--help exits 0 (every subcommand)", test_help_exits_0},
      {"--version and --version --json", test_version},
  };
  return PDT_SUITE("cli", cases);
}
