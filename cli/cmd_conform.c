/* `pdref conform`: run scenarios against any PD gateway over real sockets (net/conform/pd_conform.h)
 * and print the verdict table of `pdref sim run`, last line
 * `conform: N passed, M failed, K not exercised`. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_json.h"
#include "cli_result.h"
#include "cli_rows.h"
#include "cmd_conform_level.h"
#include "pd_conform.h"
#include "pd_err.h"

#define MAX_FILES 4096

static volatile sig_atomic_t g_stop; /* set by SIGINT/SIGTERM: the run cleans up and ends */

static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: pdref conform --gateway-cmd 'CMD ... {prefill_args} {decode_args} ... {port}'\n"
          "                     SCENARIO|DIR... [--mode-label M] [--timeout-scale X]\n"
          "                     [--slack-ms N] [--request-bound-ms N] [--keep] [--json]\n"
          "                     [--client-header 'NAME: VALUE']... [--allow-unexercised]\n"
          "                     [--no-warm-up]\n"
          "\n"
          "Starts one `pdref mock` per scenario worker on free loopback ports, runs CMD with\n"
          "/bin/sh -c (own process group), drives the scenario's client workload over HTTP,\n"
          "stops everything and judges the socket-observable invariants with the simulator's\n"
          "checker (docs/conformance.md).\n"
          "placeholders in CMD:\n"
          "  {prefill_urls}  http://127.0.0.1:P@BOOTSTRAP ... (space-separated)\n"
          "  {decode_urls}   http://127.0.0.1:P ...\n"
          "  {prefill_args}  --prefill http://127.0.0.1:P@BOOTSTRAP ...\n"
          "  {decode_args}   --decode http://127.0.0.1:P ...\n"
          "  {smg_prefill_args}  --prefill http://127.0.0.1:P BOOTSTRAP ... (smg, sglang_router)\n"
          "  {prefill_plain_urls} {bootstrap_ports} {prefill_ports} {decode_ports}\n"
          "  {prefill_hosts} {decode_hosts}  the same lists, one field each\n"
          "  {prefill_hostports} {decode_hostports}  127.0.0.1:P ... (space-separated)\n"
          "  {prefill_hostport_list} {decode_hostport_list}  127.0.0.1:P,127.0.0.1:P (commas)\n"
          "  {prefill_url_list} {decode_url_list}  http://127.0.0.1:P,... (commas)\n"
          "  {vllm_proxy_args}  --prefiller-hosts H... --prefiller-ports P... --decoder-hosts\n"
          "                  H... --decoder-ports P... (vLLM's toy proxy)\n"
          "  {port}          the port the gateway must listen on (127.0.0.1)\n"
          "  {pdref_gateway_args}  pdref gateway flags reproducing the simulator's gateway\n"
          "                  settings for the scenario (seed, policies, attempts, timeouts scaled)\n"
          "  {seed} {scale} {mode}\n"
          "options:\n"
          "  --mode-label M     the mode column; a mode name (joined|pr1150|minilb|reference|\n"
          "                     vllm-toy-proxy|mooncake-proxy|llmd-sidecar) also selects the\n"
          "                     scenario's expectation and runs only the scenarios whose\n"
          "                     workers' protocol it speaks (default \"gateway\": held to pass)\n"
          "  --client-header 'NAME: VALUE'  a header every client request carries (at most 4;\n"
          "                     placeholders as in CMD), e.g. llm-d's\n"
          "                     'x-prefiller-host-port: {prefill_hostport_list}'\n"
          "  --timeout-scale X  multiply every scenario duration by X (default 1; 0.01 runs a\n"
          "                     300 s timeout in 3 s)\n"
          "  --slack-ms N       smallest grace for I2/I3 on sockets (default 50)\n"
          "  --request-bound-ms N  give a request up N ms after sending it (default: its I1\n"
          "                     bound deadline_ms x scale + 250 ms + grace; raise it past the\n"
          "                     gateway's own timeouts to judge requests that end late)\n"
          "  --keep             keep each run's directory (mock logs, gateway output)\n"
          "  --json             machine-readable rows\n"
          "  --allow-unexercised  a not exercised row (a scripted fault never fired, a request\n"
          "                     reached no worker) does not make the exit status 1 (a run\n"
          "                     with no row exercised still does)\n"
          "  --no-warm-up       do not measure the gateway's forwarding latency, nor (with a\n"
          "                     load row) the request rate this machine sustains, first (no\n"
          "                     scale is then raised for either)\n"
          "Each row says one word, as sim run does: as expected, deployment limit,\n"
          "UNEXPECTED, not exercised (also an expected violation without its cause, a fault no\n"
          "mock can inject that changed the verdict, a load this machine cannot drive, legs\n"
          "tied to requests ambiguously) or skipped (every file given is a row); beside it the\n"
          "row's own verdict, pass or the invariants violated.\n"
          "example: pdref conform --timeout-scale 0.01 scenarios --gateway-cmd \\\n"
          "           'pdref gateway {prefill_args} {decode_args} --listen 127.0.0.1:{port}'\n"
          "exit: 0 every row as expected, a deployment limit or skipped, and one exercised;\n"
          "1 a row UNEXPECTED or not exercised, or no row exercised; 2 bad usage or a run\n"
          "could not be set up\n");
  pd_conform_level_usage(f);
}


/* The invariants of m with their names: "I2 orphan-leg, I3 stranded-slot". */
static void mask_str(uint32_t m, char *buf, size_t cap) { pd_cli_inv_text(m, buf, cap); }

typedef struct opts {
  pd_conform_opts_t c;
  int json, allow_unexercised, no_warm_up;
  char bin[PATH_MAX];
  /* the warm-up per workers' protocol (pd_protocol_t): measured when a row of it will run */
  int has_proto[2];
  double fwd_ms[2];
  char warm_why[2][256];
  int has_load[2];    /* a row of that protocol is a load (pd_conform_row_rate) */
  double rate[2];     /* requests a second the rate warm-up sustained, 0 = not measured */
  char rate_why[2][256];
  const char *prog; /* the program as run: the replay command's first word */
  pd_conform_level_t level; /* --level, --list-levels (cmd_conform_level.c) */
} opts_t;

#define CMD "pdref conform"

enum {
  OPT_GATEWAY_CMD = PD_CLI_OPT_FIRST, OPT_MODE_LABEL, OPT_TIMEOUT_SCALE, OPT_SLACK_MS,
  OPT_REQUEST_BOUND_MS, OPT_KEEP, OPT_JSON, OPT_ALLOW_UNEXERCISED, OPT_NO_WARM_UP,
  OPT_CLIENT_HEADER, OPT_LEVEL, OPT_LIST_LEVELS, OPT_REQUIREMENTS_DOC
};

static const struct option long_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"gateway-cmd", required_argument, NULL, OPT_GATEWAY_CMD},
    {"mode-label", required_argument, NULL, OPT_MODE_LABEL},
    {"timeout-scale", required_argument, NULL, OPT_TIMEOUT_SCALE},
    {"slack-ms", required_argument, NULL, OPT_SLACK_MS},
    {"request-bound-ms", required_argument, NULL, OPT_REQUEST_BOUND_MS},
    {"keep", no_argument, NULL, OPT_KEEP},
    {"json", no_argument, NULL, OPT_JSON},
    {"allow-unexercised", no_argument, NULL, OPT_ALLOW_UNEXERCISED},
    {"no-warm-up", no_argument, NULL, OPT_NO_WARM_UP},
    {"client-header", required_argument, NULL, OPT_CLIENT_HEADER},
    {"level", required_argument, NULL, OPT_LEVEL},
    {"list-levels", no_argument, NULL, OPT_LIST_LEVELS},
    {"requirements-doc", required_argument, NULL, OPT_REQUIREMENTS_DOC},
    {NULL, 0, NULL, 0},
};

/* One option with its value v; 0, or PD_ERR_INVAL (the message printed). */
static int apply_opt(void *ctx, int c, int index, char *v) {
  opts_t *o = ctx;
  (void)index;
  switch (c) {
  case OPT_GATEWAY_CMD: o->c.gateway_cmd = v; return 0;
  case OPT_MODE_LABEL: pd_conform_set_label(&o->c, v); return 0;
  case OPT_TIMEOUT_SCALE: return pd_cli_parse_positive(CMD, "--timeout-scale", v, 100, &o->c.scale);
  case OPT_SLACK_MS: return pd_cli_parse_u32(CMD, "--slack-ms", v, 0, 600000, &o->c.slack_ms);
  case OPT_REQUEST_BOUND_MS:
    return pd_cli_parse_u64(CMD, "--request-bound-ms", v, 0, 86400000ull, &o->c.bound_ms);
  case OPT_KEEP: o->c.keep = 1; return 0;
  case OPT_JSON: o->json = o->level.json = 1; return 0;
  case OPT_LEVEL: case OPT_LIST_LEVELS: case OPT_REQUIREMENTS_DOC:
    return pd_conform_level_opt(&o->level, c - OPT_LEVEL, v);
  case OPT_ALLOW_UNEXERCISED: o->allow_unexercised = 1; return 0;
  case OPT_CLIENT_HEADER:
    if (o->c.n_client_headers >= PD_CONFORM_MAX_HEADERS || !strchr(v, ':') || strpbrk(v, "\r\n")) {
      fprintf(stderr, "%s: --client-header: expected 'NAME: VALUE' on one line, at most %u "
              "times\n", CMD, PD_CONFORM_MAX_HEADERS);
      return PD_ERR_INVAL;
    }
    o->c.client_header[o->c.n_client_headers++] = v;
    return 0;
  default: o->no_warm_up = 1; return 0; /* OPT_NO_WARM_UP */
  }
}

/* Returns -1 to go on, or an exit code (0 after --help, 2 on bad usage). */
static int parse(int argc, char **argv, opts_t *o, char **files, int *n_files) {
  static char *paths[MAX_FILES];
  int n_paths = 0;
  pd_conform_opts_default(&o->c);
  pd_cli_parser_t p = {CMD, long_opts, usage, apply_opt, o, paths, MAX_FILES, &n_paths};
  int rc = pd_cli_parse(&p, argc, argv);
  if (rc >= 0) return rc;
  int level = pd_conform_level_setup(&o->level, paths, n_paths, files, n_files, MAX_FILES);
  if (level >= 0) return level;
  if (!o->c.gateway_cmd || !o->c.gateway_cmd[0]) {
    fprintf(stderr, "pdref conform: --gateway-cmd is required (try --help)\n");
    return 2;
  }
  if (!n_paths && level != PD_CONFORM_LEVEL_FILES) {
    fprintf(stderr, "pdref conform: no scenario file or directory given (try --help)\n");
    return 2;
  }
  ssize_t n = readlink("/proc/self/exe", o->bin, sizeof o->bin - 1);
  if (n <= 0) {
    fprintf(stderr, "pdref conform: cannot find its own binary (/proc/self/exe)\n");
    return 2;
  }
  o->bin[n] = 0;
  o->c.pdref_bin = o->bin;
  if (level == PD_CONFORM_LEVEL_FILES) return -1;
  rc = pd_cli_collect_json(CMD, paths, n_paths, files, n_files, MAX_FILES);
  return rc ? rc : -1;
}

static const char *const proto_name[] = {"SGLang", "vLLM"};

static void print_warm_up(const opts_t *o) {
  for (int p = 0; p < 2; p++) {
    if (!o->has_proto[p]) continue;
    const char *w = o->has_proto[1 - p] ? proto_name[p] : "", *sp = w[0] ? " " : "";
    if (o->warm_why[p][0])
      printf("# warm-up%s%s: not measured (%s): no scale raised for the gateway's speed\n", sp, w,
             o->warm_why[p]);
    else
      printf("# warm-up%s%s: the gateway forwards a request in %.2f ms (a scenario time under %gx "
             "that, scaled, raises the row's scale)\n", sp, w, o->fwd_ms[p], PD_CONFORM_FWD_FACTOR);
    if (!o->has_load[p]) continue;
    if (o->rate_why[p][0])
      printf("# warm-up%s%s: request rate not measured (%s): no load row's scale raised\n", sp, w,
             o->rate_why[p]);
    else
      printf("# warm-up%s%s: this machine sustains %.0f requests a second with this gateway (a load "
             "row asking over 1/%g of that, scaled, runs at a larger scale, or is not exercised "
             "when even scale 1 asks too much)\n", sp, w, o->rate[p], PD_CONFORM_RATE_FACTOR);
  }
}

static void print_header(const opts_t *o) {
  char judged[PD_CLI_INV_TEXT_BYTES], not_judged[PD_CLI_INV_TEXT_BYTES];
  uint32_t m = pd_conform_judged_mask(&o->c);
  mask_str(m, judged, sizeof judged);
  mask_str(((1u << PD_INVARIANT_COUNT) - 1u) & ~m, not_judged, sizeof not_judged);
  printf("# conform: %s\n", o->c.gateway_cmd);
  printf("# judged on sockets: %s\n", judged);
  printf("# not judged: %s (gateway internals: I4 outcomes and I17 quiescence, both judged "
         "per row from /metrics where the gateway exposes them; I9/I10 loads, I12 breaker%s; "
         "I13 is the simulator's; I16 is judged from the worker logs alone)\n",
         not_judged, o->c.has_mode ? "" : ", I7 attempt limit (no mode label)");
  printf("# timeout scale %g: scenario and worker durations x%g, grace >= %u ms\n", o->c.scale,
         o->c.scale, o->c.slack_ms);
  if (o->no_warm_up) printf("# warm-up: skipped (--no-warm-up)\n");
  else print_warm_up(o);
  printf("%-46s %-14s %-16s %s\n", "scenario", "mode", "verdict", "the row's own (pass, or violated)");
}

/* The vocabulary is cli_rows.h's, in the same order. */
_Static_assert((int)PD_CONFORM_AS_EXPECTED == (int)PD_CLI_AS_EXPECTED &&
                   (int)PD_CONFORM_LIMIT == (int)PD_CLI_LIMIT &&
                   (int)PD_CONFORM_UNEXPECTED == (int)PD_CLI_UNEXPECTED &&
                   (int)PD_CONFORM_NOT_EXERCISED == (int)PD_CLI_NOT_EXERCISED &&
                   (int)PD_CONFORM_SKIP == (int)PD_CLI_SKIPPED && (int)PD_CONFORM_ERR == (int)PD_CLI_ERROR,
               "one vocabulary");

static pd_cli_verdict_t verdict_of(const pd_conform_result_t *r) {
  return (pd_cli_verdict_t)pd_conform_verdict(r);
}

/* "pass", or the invariants with their names. */
static void own_str(uint32_t m, char *buf, size_t cap) {
  if (m) mask_str(m, buf, cap);
  else snprintf(buf, cap, "pass");
}

/* The scenario's expectation for the row, as the sockets can show it: "(expects I1,I14;
 * observable here: I1)" when the scenario expects more than these sockets judge. */
static void print_observable(const pd_scenario_t *s, const opts_t *o, const pd_conform_result_t *r) {
  pd_mode_t em = o->c.has_mode ? o->c.mode : PD_MODE_REFERENCE;
  uint32_t full = s->expect[em].violated_mask, seen = r->want & ~r->maybe;
  if (!r->want_set || full == seen) return;
  char a[PD_CLI_INV_TEXT_BYTES], b[PD_CLI_INV_TEXT_BYTES];
  own_str(full, a, sizeof a);
  own_str(seen, b, sizeof b);
  printf("    observable over sockets: %s (the scenario expects %s", b, a);
  if (full & ~r->judged) printf("; not judged on sockets for this row: the rest of it");
  printf(")\n");
  if (r->observe_note[0]) printf("    note: %s\n", r->observe_note);
}

#define PD_CONFORM_REPLAY_BYTES (4096 + PD_CLI_PROG_BYTES)
static void replay_cmd(const pd_scenario_t *s, const opts_t *o, char *buf, size_t cap);

static void print_row(const pd_scenario_t *s, const opts_t *o, const pd_conform_result_t *r) {
  char want[PD_CLI_INV_TEXT_BYTES], reason[600];
  pd_cli_verdict_t v = verdict_of(r);
  const char *label = o->c.mode_label;
  if (r->status == PD_CONFORM_SKIPPED) {
    printf("%-46s %-14s %-16s -  (%s)\n", s->name, label, pd_cli_verdict_word(v), r->reason);
    return;
  }
  if (r->status == PD_CONFORM_ERROR) {
    printf("%-46s %-14s %-16s -  (run failed)\n    %s\n", s->name, label, pd_cli_verdict_word(v),
           r->reason);
    return;
  }
  own_str(r->want & ~r->maybe, want, sizeof want);
  pd_cli_result_t x = {.scenario = s->name, .file = s->path, .mode = label, .verdict = v,
                       .violated = r->got};
  pd_cli_result_text_head(&x); /* the record's text renderer: the first columns */
  if (!r->matched) printf(" (expected %s)", want);
  printf("  [faults exercised %u/%u, requests served %u/%u", r->faults_fired, r->faults_n,
         r->served, r->sent);
  if (r->unserved_excused) printf(", %u unserved after a failure or shed at capacity", r->unserved_excused);
  printf("]\n");
  if (v == PD_CLI_NOT_EXERCISED) printf("    not exercised: %s\n", r->nx_reason);
  else if (!r->exercised && r->declared_nx)
    printf("    note: not exercised (%s), as the scenario declares for this mode: %s\n",
           r->nx_reason, r->declared_nx);
  if (v == PD_CLI_LIMIT)
    printf("    deployment limit: %s\n",
           s->expect[o->c.has_mode ? o->c.mode : PD_MODE_REFERENCE].limit_why);
  if (r->got || !r->matched) {
    pd_cli_reason_text(r->reason[0] ? r->reason : r->got ? "violation" : "no violation", reason,
                       sizeof reason);
    printf("    %s\n", reason);
    static char replay[PD_CONFORM_REPLAY_BYTES]; /* the JSON row's "replay", the same words */
    replay_cmd(s, o, replay, sizeof replay);
    printf("    replay: %s\n", replay);
  }
  print_observable(s, o, r);
  if (r->metrics_reason[0] && strcmp(r->metrics_reason, r->reason))
    printf("    %s\n", r->metrics_reason);
  if (r->legs_by_timing && (r->got || !r->matched || r->legs_ambiguous))
    printf("    note: %u of %u legs tied to requests by arrival order only (no X-Request-Id on the "
           "legs, no rid in the response)%s\n", r->legs_by_timing, r->legs,
           r->legs_ambiguous ? "; some of them could belong to another request" : "");
  if (r->scale_note[0])
    printf("    note: %s\n", r->scale_note);
  else if (r->scale != o->c.scale)
    printf("    note: ran at timeout scale %g (the scenario's socket_min_scale)\n", r->scale);
  if (r->status == PD_CONFORM_RAN && r->quiescent == 0 &&
      !(r->judged & PD_CONFORM_BIT(PD_CONFORM_INV_QUIESCENCE)))
    printf("    note: %s (from /metrics; reported, not judged)\n", r->quiet_reason);
  if (r->dir[0]) printf("    logs: %s\n", r->dir);
}

/* "pdref conform --gateway-cmd 'CMD' FILE --mode-label M --timeout-scale X ...": the row
 * again, with the options that change its verdict. */
static void replay_cmd(const pd_scenario_t *s, const opts_t *o, char *buf, size_t cap) {
  snprintf(buf, cap, "%s conform --gateway-cmd ", o->prog);
  pd_cli_shell_quote(buf, cap, o->c.gateway_cmd);
  size_t n = strlen(buf);
  snprintf(buf + n, cap - n, " %s --mode-label %s --timeout-scale %g", s->path,
           o->c.mode_label, o->c.scale);
  if (o->c.slack_ms != PD_CONFORM_DEFAULT_SLACK_MS)
    snprintf(buf + strlen(buf), cap - strlen(buf), " --slack-ms %u", o->c.slack_ms);
  if (o->c.bound_ms)
    snprintf(buf + strlen(buf), cap - strlen(buf), " --request-bound-ms %llu",
             (unsigned long long)o->c.bound_ms);
  for (uint32_t i = 0; i < o->c.n_client_headers; i++) {
    snprintf(buf + strlen(buf), cap - strlen(buf), " --client-header ");
    pd_cli_shell_quote(buf, cap, o->c.client_header[i]);
  }
}

static cJSON *json_row(const pd_scenario_t *s, const opts_t *o, const pd_conform_result_t *r) {
  pd_cli_verdict_t v = verdict_of(r);
  int nx = v == PD_CLI_NOT_EXERCISED;
  static char replay[PD_CONFORM_REPLAY_BYTES];
  replay_cmd(s, o, replay, sizeof replay);
  int ran = r->status == PD_CONFORM_RAN;
  /* the shared record (cli_result.h): a skipped row is head, status and reason */
  pd_cli_result_t x = {
      .scenario = s->name, .file = s->path, .mode = o->c.mode_label, .verdict = v,
      .violated = r->got, .expected = r->want, .expected_set = r->want_set,
      .matched = r->matched, .exercised = ran ? r->exercised : -1, .reason = r->reason,
      .error = r->status == PD_CONFORM_ERROR ? r->reason : NULL,
      .limit_why = s->expect[o->c.has_mode ? o->c.mode : PD_MODE_REFERENCE].limit_why,
      .declared_unexercised = ran ? r->declared_nx : NULL, .seed = s->config.seed,
      .replay = replay, .has_counts = ran, .faults_exercised = r->faults_fired,
      .faults_total = r->faults_n, .requests = r->requests, .requests_served = r->served};
  if (v == PD_CLI_SKIPPED) x.verdict = PD_CLI_SKIPPED;
  cJSON *j = pd_cli_result_json(&x);
  if (!j || v == PD_CLI_SKIPPED) return j;
  if (r->status == PD_CONFORM_RAN) {
    pd_cli_inv_add(j, "observable", NULL, r->want & ~r->maybe); /* what must show here */
    pd_cli_inv_add(j, "judged_if_seen", NULL, r->maybe);         /* may not show here */
    if (r->observe_note[0]) cJSON_AddStringToObject(j, "observable_note", r->observe_note);
  }
  pd_cli_inv_add(j, "judged", NULL, r->judged);
  if (r->metrics_reason[0]) cJSON_AddStringToObject(j, "metrics_reason", r->metrics_reason);
  const pd_cli_json_num_t counts[] = {
      {"clean", r->clean}, {"client_errors", r->client_errors},
      {"disconnected", r->gone}, {"cut_off", r->cut_off}, {"legs", r->legs},
      {"legs_unattributed", r->legs_unattributed}, {"legs_by_timing", r->legs_by_timing},
      {"legs_by_id", r->legs_by_id}, {"legs_resent", r->legs_resent},
      {"legs_ambiguous", r->legs_ambiguous}};
  pd_cli_json_add_nums(j, counts, sizeof counts / sizeof counts[0]);
  if (r->status == PD_CONFORM_RAN) {
    if (nx || (!r->exercised && r->declared_nx))
      cJSON_AddStringToObject(j, "not_exercised", r->nx_reason);
    if (r->cannot_drive[0]) cJSON_AddStringToObject(j, "cannot_drive", r->cannot_drive);
    const pd_cli_json_num_t more[] = {{"requests_sent", r->sent},
                                      {"requests_unserved_excused", r->unserved_excused}};
    pd_cli_json_add_nums(j, more, sizeof more / sizeof more[0]);
  }
  cJSON_AddNumberToObject(j, "elapsed_s", r->seconds);
  if (r->status != PD_CONFORM_SKIPPED) cJSON_AddNumberToObject(j, "scale", r->scale);
  if (r->scale_note[0]) cJSON_AddStringToObject(j, "scale_note", r->scale_note);
  if (r->status == PD_CONFORM_RAN) cJSON_AddNumberToObject(j, "forward_ms", r->fwd_ms);
  if (r->status == PD_CONFORM_RAN && r->quiescent >= 0) {
    cJSON_AddBoolToObject(j, "quiescent", r->quiescent);
    if (!r->quiescent) cJSON_AddStringToObject(j, "quiescence", r->quiet_reason);
  }
  if (r->dir[0]) cJSON_AddStringToObject(j, "dir", r->dir);
  return j;
}

static void print_json(cJSON *rows, const int *count, const opts_t *o) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "schema", PD_CLI_SCHEMA_CONFORM);
  cJSON_AddStringToObject(root, "command", "conform");
  cJSON_AddStringToObject(root, "gateway_cmd", o->c.gateway_cmd);
  for (int p = 0; p < 2 && !o->no_warm_up; p++) { /* SGLang's first: "forward_ms" as before */
    if (!o->has_proto[p]) continue;
    int first = !o->has_proto[0] || p == 0;
    cJSON_AddNumberToObject(root, first ? "forward_ms" : "forward_ms_vllm", o->fwd_ms[p]);
    if (o->has_load[p])
      cJSON_AddNumberToObject(root, first ? "requests_per_s" : "requests_per_s_vllm", o->rate[p]);
    if (o->warm_why[p][0])
      cJSON_AddStringToObject(root, first ? "warm_up_error" : "warm_up_error_vllm", o->warm_why[p]);
  }
  pd_cli_verdict_summary_json(root, rows, count);
  pd_conform_level_json(&o->level, root);
  pd_cli_json_print(root);
}

/* A file that did not load: {"file", "status": "error", "error": "file:line: message"} in
 * rows (JSON), else a row of the table; and the message on stderr either way. */
static void error_row(cJSON *rows, const char *file, const char *msg) {
  fprintf(stderr, "pdref conform: %s\n", msg);
  if (rows) {
    pd_cli_result_t x = {.file = file, .verdict = PD_CLI_ERROR, .error = msg};
    cJSON_AddItemToArray(rows, pd_cli_result_json(&x));
    return;
  }
  const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  printf("%-46s %-14s %-16s -  (file)\n    %s\n", base, "-", "error", msg);
  fflush(stdout);
}

/* Which workers' protocols the rows will have, and a warm-up for each (unless --no-warm-up).
 * A file that does not load is left to the main loop to report. 0, or -1 out of memory. */
static int warm_up(opts_t *o, pd_scenario_t *s, char **files, int n_files) {
  char err[512];
  for (int f = 0; f < n_files; f++) {
    if (pd_scenario_load(s, files[f], err, sizeof err) != 0 || pd_conform_mode_skips(s, &o->c))
      continue;
    int p = pd_scenario_protocol(s) == PD_PROTOCOL_VLLM;
    double scale = s->config.socket_min_scale > o->c.scale ? s->config.socket_min_scale : o->c.scale;
    o->has_proto[p] = 1;
    if (pd_conform_row_rate(s, scale) > 0 && !pd_conform_skip_reason(s)) o->has_load[p] = 1;
  }
  for (int p = 0; p < 2 && !o->no_warm_up && !g_stop; p++) {
    pd_protocol_t pr = p ? PD_PROTOCOL_VLLM : PD_PROTOCOL_SGLANG;
    if (o->has_proto[p] &&
        pd_conform_warm_up(&o->c, pr, &o->fwd_ms[p], o->warm_why[p], sizeof o->warm_why[p]) < 0)
      return -1;
    if (o->has_load[p] && !g_stop && /* what the load rows ask of this machine */
        pd_conform_warm_up_rate(&o->c, pr, &o->rate[p], o->rate_why[p], sizeof o->rate_why[p]) < 0)
      return -1;
  }
  return 0;
}

int pd_cli_conform(const char *prog, int argc, char **argv) {
  static opts_t o;
  static char *files[MAX_FILES];
  int n_files = 0, rc = parse(argc, argv, &o, files, &n_files);
  if (rc >= 0) {
    pd_conform_level_free(&o.level);
    return rc;
  }
  o.prog = prog;
  pd_cli_install_signals(on_signal);
  o.c.stop = &g_stop;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  pd_scenario_t *s = malloc(sizeof *s);
  cJSON *arr = o.json ? cJSON_CreateArray() : NULL;
  int count[PD_CLI_VERDICTS] = {0}, exit_code = 0;
  if (!s) return 2;
  if (warm_up(&o, s, files, n_files) < 0) {
    free(s);
    return 2;
  }
  if (!o.json) print_header(&o);
  for (int f = 0; f < n_files && exit_code != 2 && !g_stop; f++) {
    char err[512], msg[700];
    if (pd_scenario_load(s, files[f], err, sizeof err) != 0) { /* an error row; the rest run */
      pd_cli_file_error(files[f], err, msg, sizeof msg);
      error_row(arr, files[f], msg);
      count[PD_CLI_ERROR]++;
      continue;
    }
    pd_conform_result_t r;
    if (pd_conform_mode_skips(s, &o.c)) { /* every file given is a row: this one skipped */
      memset(&r, 0, sizeof r);
      r.status = PD_CONFORM_SKIPPED;
      snprintf(r.reason, sizeof r.reason, "%s does not speak %s's protocol, which the "
               "scenario's workers speak", o.c.mode_label,
               pd_scenario_protocol(s) == PD_PROTOCOL_VLLM ? "vLLM" : "SGLang");
    } else {
      o.c.fwd_ms = o.fwd_ms[pd_scenario_protocol(s) == PD_PROTOCOL_VLLM];
      o.c.rate_per_s = o.rate[pd_scenario_protocol(s) == PD_PROTOCOL_VLLM];
      if (pd_conform_run(s, &o.c, &r) != 0) {
        fprintf(stderr, "pdref conform: %s: out of memory\n", s->path);
        exit_code = 2;
        break;
      }
    }
    count[verdict_of(&r)]++;
    pd_conform_level_row(&o.level, s, &r, verdict_of(&r));
    if (arr) cJSON_AddItemToArray(arr, json_row(s, &o, &r));
    else print_row(s, &o, &r);
    fflush(stdout);
  }
  for (int f = 0; f < n_files; f++) free(files[f]);
  free(s);
  if (arr) print_json(arr, count, &o);
  else if (exit_code != 2) pd_cli_verdict_summary("conform", count);
  if (!arr && exit_code != 2) pd_conform_level_print(&o.level);
  curl_global_cleanup();
  rc = g_stop || exit_code == 2 ? 2 : pd_cli_verdict_exit(count, o.allow_unexercised);
  if (o.level.name) rc = pd_conform_level_exit(&o.level, rc);
  pd_conform_level_free(&o.level);
  return rc;
}
