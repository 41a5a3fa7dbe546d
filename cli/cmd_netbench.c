/* `pdref gateway bench`: the gateway on loopback against `pdref mock` workers. Starts one
 * prefill mock, one decode mock (--direct) and `pdref gateway` as child processes (own process
 * groups, always reaped, every wait bounded), then for each concurrency level measures TTFT
 * and inter-token gaps of streaming /generate requests three ways: straight to the decode
 * (direct), client-driven PD with bootstrap fields (pd, no gateway), and through the gateway;
 * then relay throughput with token_ms 0. Prints what the gateway adds, its RSS and CPU, and
 * the targets (docs/benchmarks.md). The client is net/bench/pd_netbench.c. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_progress.h"
#include "pd_dispatch.h"
#include "pd_err.h"
#include "cmd_netbench.h"
#include "pd_conform.h"
#include "pd_netbench.h"
#include "pd_proc.h"
#include "pd_scenario.h"

#define NETBENCH_START_TIMEOUT_MS 10000u /* a child's ready line */
#define NETBENCH_STOP_TIMEOUT_MS 5000u   /* SIGTERM to exit, then SIGKILL */

static volatile sig_atomic_t netbench_stop;
static void on_signal(int sig) {
  (void)sig;
  netbench_stop = 1;
}

const char *const pd_netbench_path_names[NETBENCH_PATHS] = {"direct", "pd", "gateway"};

static void usage(FILE *f) {
  fprintf(f,
          "usage: pdref gateway bench [--concurrency N,N,...] [--tokens K] [--token-ms T]\n"
          "                           [--first-token-ms F] [--requests N] [--no-pd]\n"
          "                           [--tp-streams S] [--tp-tokens K] [--tp-token-ms T]\n"
          "                           [--no-throughput] [--mode M] [--timeout-s S] [--json]\n"
          "                           [--gateway-cmd 'CMD ... {prefill_args} ... {port}' [--label L]]\n"
          "\n"
          "Starts a prefill mock, a decode mock and `pdref gateway` (or any gateway, with\n"
          "--gateway-cmd) on free loopback ports and measures what the gateway adds to a\n"
          "streaming client (docs/benchmarks.md).\n"
          "  --concurrency LIST  concurrent streams per level (default 1,64,512)\n"
          "  --tokens K          tokens per request (default 64)\n"
          "  --token-ms T        decode: ms between tokens (default 5)\n"
          "  --first-token-ms F  decode: KV (or, direct, request) to first token (default 2)\n"
          "  --requests N        measured requests per level and path (default max(16, 4 x C));\n"
          "                      a TTFT p99 needs 100 (fewer: printed as -, null in JSON)\n"
          "  --no-pd             skip the client-driven PD path (no gateway)\n"
          "  --tp-streams S      throughput run: streams (default 64)\n"
          "  --tp-tokens K       throughput run: tokens per stream (default 16000)\n"
          "  --tp-token-ms T     throughput run: ms between tokens (default 0)\n"
          "  --no-throughput     skip the throughput run\n"
          "  --mode M            pdref gateway's mode (default reference)\n"
          "  --timeout-s S       bound on each measured run (default 60)\n"
          "  --json              one JSON document on stdout\n"
          "  --gateway-cmd CMD   measure this gateway instead of pdref's: run with /bin/sh -c in\n"
          "                      its own process group, conform's placeholders ({prefill_args},\n"
          "                      {decode_urls}, {prefill_hosts}, {port}, ...: pdref conform\n"
          "                      --help); ready once {port} accepts connections. RSS and CPU\n"
          "                      are its whole process group's\n"
          "  --label L           its name in the report (default: the command's first word)\n"
          PD_CLI_MODES_HELP
          "Prefill forward_ms and kv_ms are 0, so the paths differ only by the rendezvous (the\n"
          "client, or the gateway, sends both legs with one bootstrap room, where prefill and\n"
          "decode meet to hand over the KV) and the gateway.\n"
          "example: pdref gateway bench --concurrency 1,64 --no-throughput\n"
          "exit: 0 ok, 1 a request failed or a process did not start, 2 bad usage\n");
}

/* ---------- options ---------- */

#define CMD "pdref gateway bench"

/* --concurrency 1,64,512: at most NETBENCH_MAX_LEVELS levels. */
static int parse_levels(netbench_opts_t *o, const char *s) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", s);
  o->n_levels = 0;
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (o->n_levels == NETBENCH_MAX_LEVELS) {
      fprintf(stderr, CMD ": --concurrency: at most %u levels\n", NETBENCH_MAX_LEVELS);
      return 2;
    }
    if (pd_cli_parse_u32(CMD, "--concurrency", t, 1, PD_NETBENCH_MAX_CONCURRENCY,
                         &o->levels[o->n_levels++]))
      return 2;
  }
  return o->n_levels ? 0 : pd_cli_parse_u32(CMD, "--concurrency", s, 1, 1, &o->levels[0]);
}

/* The numeric options: flag, field, range; the option of num_opts[k] has val
 * PD_CLI_OPT_FIRST + k. */
static const struct {
  const char *flag;
  size_t off;
  uint32_t lo, hi;
} num_opts[] = {
    {"--tokens", offsetof(netbench_opts_t, tokens), 1, PD_NETBENCH_MAX_TOKENS},
    {"--token-ms", offsetof(netbench_opts_t, token_ms), 0, 60000},
    {"--first-token-ms", offsetof(netbench_opts_t, first_token_ms), 0, 60000},
    {"--requests", offsetof(netbench_opts_t, requests), 1, PD_NETBENCH_MAX_REQUESTS},
    {"--tp-streams", offsetof(netbench_opts_t, tp_streams), 1, PD_NETBENCH_MAX_CONCURRENCY},
    {"--tp-tokens", offsetof(netbench_opts_t, tp_tokens), 1, PD_NETBENCH_MAX_TOKENS},
    {"--tp-token-ms", offsetof(netbench_opts_t, tp_token_ms), 0, 60000},
    {"--timeout-s", offsetof(netbench_opts_t, timeout_s), 1, 3600},
};
#define NETBENCH_NUM_OPTS (sizeof num_opts / sizeof num_opts[0])

enum {
  OPT_CONCURRENCY = PD_CLI_OPT_FIRST + 32, OPT_MODE, OPT_JSON, OPT_NO_PD, OPT_NO_TP, OPT_GW_CMD,
  OPT_LABEL
};

static const struct option long_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"tokens", required_argument, NULL, PD_CLI_OPT_FIRST + 0},
    {"token-ms", required_argument, NULL, PD_CLI_OPT_FIRST + 1},
    {"first-token-ms", required_argument, NULL, PD_CLI_OPT_FIRST + 2},
    {"requests", required_argument, NULL, PD_CLI_OPT_FIRST + 3},
    {"tp-streams", required_argument, NULL, PD_CLI_OPT_FIRST + 4},
    {"tp-tokens", required_argument, NULL, PD_CLI_OPT_FIRST + 5},
    {"tp-token-ms", required_argument, NULL, PD_CLI_OPT_FIRST + 6},
    {"timeout-s", required_argument, NULL, PD_CLI_OPT_FIRST + 7},
    {"concurrency", required_argument, NULL, OPT_CONCURRENCY},
    {"mode", required_argument, NULL, OPT_MODE},
    {"json", no_argument, NULL, OPT_JSON},
    {"no-pd", no_argument, NULL, OPT_NO_PD},
    {"no-throughput", no_argument, NULL, OPT_NO_TP},
    {"gateway-cmd", required_argument, NULL, OPT_GW_CMD},
    {"label", required_argument, NULL, OPT_LABEL},
    {NULL, 0, NULL, 0},
};

/* One option with its value: 0, or 2 on a bad value. */
static int apply_opt(void *ctx, int c, int index, char *v) {
  netbench_opts_t *o = ctx;
  pd_mode_t m;
  (void)index;
  size_t k = (size_t)(c - PD_CLI_OPT_FIRST);
  if (c >= PD_CLI_OPT_FIRST && k < NETBENCH_NUM_OPTS) {
    assert(strcmp(num_opts[k].flag + 2, long_opts[1 + k].name) == 0); /* the tables agree */
    return pd_cli_parse_u32(CMD, num_opts[k].flag, v, num_opts[k].lo, num_opts[k].hi,
                            (uint32_t *)(void *)((char *)o + num_opts[k].off)) ? 2 : 0;
  }
  switch (c) {
  case OPT_CONCURRENCY:
    return parse_levels(o, v);
  case OPT_MODE:
    o->mode = v;
    return pd_cli_parse_mode(CMD, "--mode", v, &m) ? 2 : 0;
  case OPT_JSON:
    o->is_json = 1;
    return 0;
  case OPT_NO_PD:
    o->is_pd = 0;
    return 0;
  case OPT_GW_CMD:
    o->gateway_cmd = v;
    if (!v[0] || strlen(v) > 4000)
      return fprintf(stderr, CMD ": --gateway-cmd: expected a command of 1..4000 bytes\n"), 2;
    return 0;
  case OPT_LABEL:
    if (!v[0] || strlen(v) >= sizeof o->label)
      return fprintf(stderr, CMD ": --label: expected 1..%zu bytes\n", sizeof o->label - 1), 2;
    snprintf(o->label, sizeof o->label, "%s", v);
    return 0;
  default: /* OPT_NO_TP */
    o->is_tp = 0;
    return 0;
  }
}

/* ---------- the processes under test ---------- */

/* Children's stderr goes to one log in the temp dir, shown when something fails. */
static int start_child(netbench_session_t *b, pd_netbench_child_t *c, char *const args[],
                       char *line, size_t cap) {
  return pd_netbench_child_start(c, b->exe, args, b->errlog, line, cap, NETBENCH_START_TIMEOUT_MS,
                                 &netbench_stop);
}

static void show_errlog(const netbench_session_t *b) {
  FILE *f = b->errlog[0] ? fopen(b->errlog, "r") : NULL;
  char line[512];
  for (int i = 0; f && i < 40 && fgets(line, sizeof line, f); i++) /* bounded */
    if (!strstr(line, ": stopped")) fprintf(stderr, "  | %s", line);
  if (f) fclose(f);
}

static int write_scenario(netbench_session_t *b) {
  snprintf(b->dir, sizeof b->dir, "/tmp/pdref-gwbench-XXXXXX");
  if (!mkdtemp(b->dir)) return -1;
  snprintf(b->scenario, sizeof b->scenario, "%s/bench.json", b->dir);
  snprintf(b->errlog, sizeof b->errlog, "%s/stderr.log", b->dir);
  snprintf(b->gw_out, sizeof b->gw_out, "%s/gateway.out", b->dir);
  FILE *f = fopen(b->scenario, "w");
  if (!f) return -1;
  const netbench_opts_t *o = &b->o;
  fprintf(f,
          "{\"name\":\"gateway-bench\",\"workers\":["
          "{\"name\":\"p0\",\"role\":\"prefill\",\"forward_ms\":0,\"kv_ms\":0},"
          "{\"name\":\"d0\",\"role\":\"decode\",\"first_token_ms\":%u,\"token_ms\":%u},"
          "{\"name\":\"d1\",\"role\":\"decode\",\"first_token_ms\":%u,\"token_ms\":%u}],"
          "\"config\":{\"bootstrap_timeout_ms\":30000,\"waiting_timeout_ms\":30000},"
          "\"workload\":{\"tokens\":%u},\"expect\":{}}\n",
          o->first_token_ms, o->token_ms, o->first_token_ms, o->tp_token_ms, o->tokens);
  return fclose(f) ? -1 : 0;
}

/* Mock `worker` of the scenario; fills url (and the bootstrap port for the prefill). */
static int start_mock(netbench_session_t *b, pd_netbench_child_t *c, const char *worker, char *url,
                      size_t cap) {
  char line[512];
  /* clang-format off */
  char *args[] = {"pdref", "mock", "--scenario", b->scenario, "--worker", (char *)worker,
                  "--listen", "127.0.0.1:0", "--json",
                  worker[0] == 'p' ? "--bootstrap-port" : "--direct",
                  worker[0] == 'p' ? "0" : NULL, NULL};
  /* clang-format on */
  if (start_child(b, c, args, line, sizeof line) < 0) {
    fprintf(stderr, "pdref gateway bench: mock %s did not start\n", worker);
    return -1;
  }
  cJSON *j = cJSON_Parse(line);
  cJSON *port = cJSON_GetObjectItemCaseSensitive(j, "port");
  cJSON *boot = cJSON_GetObjectItemCaseSensitive(j, "bootstrap_port");
  int ok = cJSON_IsNumber(port) && cJSON_IsNumber(boot);
  if (ok) {
    snprintf(url, cap, "http://127.0.0.1:%d", port->valueint);
    if (worker[0] == 'p') b->p_boot = (uint16_t)boot->valueint;
  }
  cJSON_Delete(j);
  if (!ok) fprintf(stderr, "pdref gateway bench: mock %s: bad ready line: %s", worker, line);
  return ok ? 0 : -1;
}

/* --gateway-cmd: the template expanded for the prefill p0 and the decode now running (its
 * name, d0 or d1), with conform's placeholders (pd_conform_expand). 0 or -1. */
static int expand_gateway_cmd(netbench_session_t *b, const char *decode, uint16_t port) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[512];
  int rc = s ? pd_scenario_load(s, b->scenario, err, sizeof err) : -1;
  if (rc == 0) { /* only the two workers running: p0 and this decode */
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_workers; i++)
      if (!strcmp(s->workers[i].name, "p0") || !strcmp(s->workers[i].name, decode))
        s->workers[n++] = s->workers[i];
    s->n_workers = n;
    uint16_t ports[2] = {0, 0}, boot[2] = {0, 0};
    for (uint32_t i = 0; i < n && i < 2; i++) {
      const char *url = s->workers[i].role == PD_ROLE_PREFILL ? b->p_url : b->d_url;
      const char *colon = strrchr(url, ':');
      ports[i] = colon ? (uint16_t)strtoul(colon + 1, NULL, 10) : 0;
      boot[i] = s->workers[i].role == PD_ROLE_PREFILL ? b->p_boot : 0;
    }
    pd_conform_opts_t co;
    memset(&co, 0, sizeof co);
    co.mode_label = b->o.label;
    co.scale = 1.0;
    rc = pd_conform_expand(s, &co, b->o.gateway_cmd, ports, boot, port, b->gw_cmd,
                           sizeof b->gw_cmd, err, sizeof err);
  }
  if (rc) fprintf(stderr, CMD ": %s\n", s ? err : "out of memory");
  free(s);
  return rc ? -1 : 0;
}

/* Start the --gateway-cmd gateway and wait (bounded) until its port accepts. 0, -1, or -2
 * when the template does not expand (bad usage: exit 2). */
static int start_custom_gateway(netbench_session_t *b, const char *decode) {
  uint16_t port = 0;
  if (pd_proc_free_port(&port) < 0) return -1;
  if (expand_gateway_cmd(b, decode, port) < 0) return -2;
  char *argv[] = {"sh", "-c", b->gw_cmd, NULL};
  /* stdout to a file of its own (a pipe nobody reads would block a chatty gateway), stderr
   * appended to the log shown on failure */
  pd_proc_opts_t po = {.out_path = b->gw_out, .err_path = b->errlog, .is_err_append = 1,
                       .is_group = 1};
  if (pd_proc_spawn(&b->gw, "/bin/sh", argv, &po) != 0 ||
      pd_proc_wait_port(&b->gw, port, NETBENCH_START_TIMEOUT_MS, &netbench_stop) != 0) {
    fprintf(stderr, CMD ": the gateway command did not accept connections on 127.0.0.1:%u "
            "within %u ms: %s\n", (unsigned)port, NETBENCH_START_TIMEOUT_MS, b->gw_cmd);
    return -1;
  }
  snprintf(b->g_url, sizeof b->g_url, "http://127.0.0.1:%u", (unsigned)port);
  return 0;
}

static int start_gateway(netbench_session_t *b, const char *decode) {
  if (b->o.gateway_cmd) return start_custom_gateway(b, decode);
  char line[512], pre[96], maxc[16];
  snprintf(pre, sizeof pre, "%s@%u", b->p_url, (unsigned)b->p_boot);
  uint32_t most = b->o.tp_streams;
  for (uint32_t i = 0; i < b->o.n_levels; i++)
    most = b->o.levels[i] > most ? b->o.levels[i] : most;
  snprintf(maxc, sizeof maxc, "%u", most * 2 + 64 > 1024 ? most * 2 + 64 : 1024);
  char *args[] = {"pdref",    "gateway", "--mode",   (char *)b->o.mode, "--prefill",         pre,
                  "--decode", b->d_url,  "--listen", "127.0.0.1:0",     "--max-connections", maxc,
                  "--seed",   "1",       NULL};
  const char *at = start_child(b, &b->gw, args, line, sizeof line) < 0
                       ? NULL
                       : strstr(line, "listening on http://");
  if (!at) {
    fprintf(stderr, "pdref gateway bench: the gateway did not start\n");
    return -1;
  }
  snprintf(b->g_url, sizeof b->g_url, "%.*s", (int)strcspn(at + 13, " \n"), at + 13);
  return 0;
}

static void stop_gateway(netbench_session_t *b, int which) {
  if (b->gw.pid > 0) {
    b->rss_kib[which] = pd_netbench_group_hwm_kib(b->gw.pid);
    b->cpu_s[which] = pd_netbench_group_cpu_s(b->gw.pid);
  }
  pd_netbench_child_stop(&b->gw, NETBENCH_STOP_TIMEOUT_MS);
}

/* ---------- runs ---------- */

typedef struct netbench_progress {
  netbench_session_t *b;
  const char *label;
  uint32_t streams;
} netbench_progress_t;

static void on_progress(void *ud, uint32_t done, uint32_t total) {
  netbench_progress_t *p = ud;
  pd_cli_progress_draw(&p->b->bar, total ? (double)done / (double)total : 0,
                       "%u streams, %-7s %u/%u requests", (unsigned)p->streams, p->label,
                       (unsigned)done, (unsigned)total);
}

/* One measured run of `path`, warm-up included; fills st and counts errors. */
static void run_path(netbench_session_t *b, int path, uint32_t streams, uint32_t requests,
                     uint32_t tokens, int is_recording, netbench_path_stats_t *st) {
  char url[96], purl[96];
  const char *base = path == PD_NETBENCH_GATEWAY ? b->g_url : b->d_url;
  snprintf(url, sizeof url, "%s/generate", base);
  snprintf(purl, sizeof purl, "%s/generate", b->p_url);
  netbench_progress_t prog = {b, pd_netbench_path_names[path], streams};
  /* spread the first round over one request's expected duration (steady load) */
  uint64_t dur_ns = ((uint64_t)b->o.first_token_ms + (uint64_t)tokens * b->o.token_ms) * 1000000ull;
  /* clang-format off */
  pd_netbench_run_t run = {.path = (pd_netbench_path_t)path, .url = url, .prefill_url = purl,
                     .bootstrap_port = b->p_boot, .first_room = b->room,
                     .concurrency = streams, .requests = requests, .tokens = tokens,
                     .timeout_ns = (uint64_t)b->o.timeout_s * 1000000000ull,
                     .stagger_ns = is_recording ? dur_ns / streams : 0,
                     .is_recording = is_recording, .is_warmup = 1,
                     .on_progress = on_progress, .ud = &prog, .stop = &netbench_stop};
  /* clang-format on */
  b->room += (uint64_t)requests + streams + 1;
  pd_netbench_result_t r;
  double cpu0 = b->gw.pid > 0 ? pd_netbench_group_cpu_s(b->gw.pid) : 0;
  int rc = pd_netbench_run(&run, &r);
  double cpu1 = b->gw.pid > 0 ? pd_netbench_group_cpu_s(b->gw.pid) : 0;
  memset(st, 0, sizeof *st);
  st->requests = requests;
  st->ok = r.ok;
  st->errors = rc ? requests : r.errors + r.warmup_errors;
  st->events = r.events;
  st->reads = r.reads;
  st->wall_s = (double)r.wall_ns / 1e9;
  st->events_per_s = st->wall_s > 0 ? (double)r.events / st->wall_s : 0;
  st->gw_cpu_s = path == PD_NETBENCH_GATEWAY ? cpu1 - cpu0 : 0;
  st->n_ttft = r.n_ttft;
  st->n_itl = r.n_gap;
  for (int k = 0; k < 2; k++) { /* p50, p99, each only from enough samples */
    double pct = k ? 99 : 50;
    st->ttft_us[k] = r.n_ttft >= NETBENCH_MIN_SAMPLES(k)
                         ? (double)pd_netbench_percentile(r.ttft_ns, r.n_ttft, pct) / 1e3
                         : NAN;
    st->itl_us[k] = r.n_gap >= NETBENCH_MIN_SAMPLES(k)
                        ? (double)pd_netbench_percentile(r.gap_ns, r.n_gap, pct) / 1e3
                        : NAN;
  }
  snprintf(st->err, sizeof st->err, "%s", rc ? pd_strerror(rc) : r.first_error);
  b->errors += st->errors;
  pd_netbench_result_free(&r);
  pd_cli_progress_clear(&b->bar);
}

static int run_all(netbench_session_t *b) {
  const netbench_opts_t *o = &b->o;
  if (write_scenario(b) < 0) {
    fprintf(stderr, "pdref gateway bench: cannot write the scenario in /tmp\n");
    return -1;
  }
  if (start_mock(b, &b->prefill, "p0", b->p_url, sizeof b->p_url) < 0 ||
      start_mock(b, &b->decode, "d0", b->d_url, sizeof b->d_url) < 0)
    return -1;
  int rc = start_gateway(b, "d0");
  if (rc < 0) return rc;
  for (uint32_t i = 0; i < o->n_levels && !netbench_stop; i++) {
    netbench_level_t *lv = &b->lv[i];
    lv->streams = o->levels[i];
    uint32_t n = o->requests ? o->requests : lv->streams * 4 > 16 ? lv->streams * 4 : 16;
    for (int p = 0; p < NETBENCH_PATHS && !netbench_stop; p++)
      if (p != PD_NETBENCH_PD || o->is_pd) run_path(b, p, lv->streams, n, o->tokens, 1, &lv->p[p]);
  }
  stop_gateway(b, 0);
  pd_netbench_child_stop(&b->decode, NETBENCH_STOP_TIMEOUT_MS);
  if (!o->is_tp || netbench_stop) return 0;
  if (start_mock(b, &b->decode, "d1", b->d_url, sizeof b->d_url) < 0) return -1;
  if ((rc = start_gateway(b, "d1")) < 0) return rc;
  run_path(b, PD_NETBENCH_GATEWAY, o->tp_streams, o->tp_streams, o->tp_tokens, 0, &b->tp);
  stop_gateway(b, 1);
  return 0;
}

/* Stop every child (bounded), show their stderr if something failed, remove the temp dir. */
static void cleanup(netbench_session_t *b, int is_failed) {
  pd_netbench_child_stop(&b->gw, NETBENCH_STOP_TIMEOUT_MS);
  pd_netbench_child_stop(&b->decode, NETBENCH_STOP_TIMEOUT_MS);
  pd_netbench_child_stop(&b->prefill, NETBENCH_STOP_TIMEOUT_MS);
  if (is_failed) show_errlog(b);
  if (b->scenario[0]) unlink(b->scenario);
  if (b->errlog[0]) unlink(b->errlog);
  if (b->gw_out[0]) unlink(b->gw_out);
  if (b->dir[0]) rmdir(b->dir);
}

int pd_cli_gateway_bench(int argc, char **argv) {
  netbench_session_t *b = calloc(1, sizeof *b);
  if (!b) return 1;
  netbench_opts_t *o = &b->o;
  uint32_t lv[] = {1, 64, 512};
  *o = (netbench_opts_t){.n_levels = 3,
                   .tokens = 64,
                   .token_ms = 5,
                   .first_token_ms = 2,
                   .tp_streams = 64,
                   .tp_tokens = 16000,
                   .tp_token_ms = 0,
                   .timeout_s = 60,
                   .is_tp = 1,
                   .is_pd = 1,
                   .mode = "reference"};
  memcpy(o->levels, lv, sizeof lv);
  pd_cli_parser_t p = {CMD, long_opts, usage, apply_opt, o, NULL, 0, NULL};
  int parsed = pd_cli_parse(&p, argc, argv);
  if (parsed >= 0) {
    free(b);
    return parsed;
  }
  if (!o->label[0] && o->gateway_cmd) /* the command's first word, without its directory */
    snprintf(o->label, sizeof o->label, "%.*s", (int)strcspn(o->gateway_cmd, " \t"),
             o->gateway_cmd);
  if (!o->label[0]) snprintf(o->label, sizeof o->label, "pdref gateway");
  if (strchr(o->label, '/')) memmove(o->label, strrchr(o->label, '/') + 1,
                                     strlen(strrchr(o->label, '/') + 1) + 1);
  ssize_t n = readlink("/proc/self/exe", b->exe, sizeof b->exe - 1);
  if (n <= 0) snprintf(b->exe, sizeof b->exe, "/proc/self/exe");
  pd_cli_progress_init(&b->bar, o->is_json);
  b->room = (1ull << 62) | ((pd_netbench_now_ns() & 0xffffffffull) << 20);
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  signal(SIGPIPE, SIG_IGN);
  pd_cli_raise_fd_limit(3 * PD_NETBENCH_MAX_CONCURRENCY + 256);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = run_all(b);
  cleanup(b, rc == -1 || b->errors);
  curl_global_cleanup();
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (netbench_stop) fprintf(stderr, "pdref gateway bench: interrupted\n");
  if (!rc) {
    if (o->is_json)
      pd_cli_nb_report_json(b);
    else
      pd_cli_nb_report_text(b);
  }
  int code = rc == -2 ? 2 : rc || netbench_stop || b->errors ? 1 : 0;
  free(b);
  return code;
}
