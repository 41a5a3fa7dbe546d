/* `pdref gateway`: the real PD gateway on the dispatch core (net/gateway/pd_gateway.h). Parses the
 * flags, raises the descriptor limit, runs the loop until SIGINT/SIGTERM. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_json.h"
#include "pd_err.h"
#include "pd_gateway.h"

#define MS_NS 1000000ull

static pd_gateway_t *volatile g_running; /* for the signal handler only */

static void usage(FILE *f) {
  fprintf(f, "usage: pdref gateway --prefill URL[@BOOTSTRAP_PORT]... --decode URL...\n"
             "                     [--listen HOST:PORT] [--mode M] [--protocol sglang|vllm]\n"
             "                     [--policy P | --prefill-policy P --decode-policy P]\n"
             "                     [--max-attempts N] [--connect-timeout-ms N]\n"
             "                     [--first-token-timeout-ms N] [--idle-timeout-ms N]\n"
             "                     [--total-timeout-ms N] [--commit-timeout-ms N]\n"
             "                     [--token-budget-ms N] [--request-timeout-ms N]\n"
             "                     [--tail-timeout-ms N] [--head-timeout-ms N]\n"
             "                     [--retry-backoff-ms N] [--retry-max-backoff-ms N]\n"
             "                     [--breaker-failures N] [--breaker-open-ms N]\n"
             "                     [--breaker-window-ms N] [--max-body-bytes N]\n"
             "                     [--max-connections N] [--client-timeout-s N]\n"
             "                     [--client-deadline-s N] [--max-connections-per-peer N]\n"
             "                     [--abort-timeout-ms N] [--seed N]\n"
             "                     [--prefill-groups G,G,...] [--decode-groups G,G,...]\n"
             "                     [--prefill-abort-ignored B,B,...]\n"
             "                     [--prefill-limit N] [--decode-limit N] [--admit-queue N]\n"
             "                     [--admit-queue-ms N]\n"
             "                     [--verbose] [--json]\n"
             "\n"
             "A PD gateway on real sockets driving pdref's dispatch core (docs/gateway.md): each\n"
             "request goes to a prefill worker and a decode worker, which meet to hand over the\n"
             "KV cache (SGLang: at a bootstrap room on prefill's bootstrap port, the rendezvous;\n"
             "vLLM: decode reads what prefill's answer names).\n"
             "  --prefill URL[@P]  prefill worker base URL, e.g. http://127.0.0.1:30001@8998\n"
             "                     (@P: bootstrap port injected into requests; else null);\n"
             "                     required, repeat for more workers\n"
             "  --decode URL       decode worker base URL; required, repeatable\n"
             "  --listen HOST:PORT address to serve on: a host name, IPv4 or [IPv6] (default\n"
             "                     127.0.0.1:8000; a name binds its first IPv4 address, else\n"
             "                     IPv6; port 0 = a free one, printed on the ready line)\n"
             "  --mode M           dispatch rules (default reference)\n"
             "  --protocol P       the workers' PD protocol: sglang, or vllm (source-first,\n"
             "                     docs/spec.md R-SF-*) (default: the mode's own)\n"
             "  --policy P         random | round_robin | power_of_two, both roles (default\n"
             "                     round_robin; minilb random); --prefill-policy P and\n"
             "                     --decode-policy P set one role each\n"
             "  --max-attempts N   attempts per request, the first included, 1..16 (default 5;\n"
             "                     minilb 1)\n"
             "timeouts in ms, 0 = none; a default named after a mode is that mode's, the\n"
             "others have none (docs/spec.md R-TIMEOUT):\n"
             "  --connect-timeout-ms N      per leg TCP connect (default 10000; minilb none)\n"
             "  --first-token-timeout-ms N  arrival to decode's first token (reference 30000)\n"
             "  --idle-timeout-ms N         longest gap between a leg's events (reference 30000)\n"
             "  --commit-timeout-ms N       arrival to the commit, the first byte sent to the\n"
             "                              client, after which no retry is possible, across\n"
             "                              retries and backoff; 504 past it (reference 90000)\n"
             "  --token-budget-ms N         per requested output token, added to a non-stream\n"
             "                              request's idle and commit budgets (reference 100)\n"
             "  --total-timeout-ms N        caps the whole request (reference 600000;\n"
             "                              docs/spec.md R-PROGRESS)\n"
             "  --request-timeout-ms N      per-leg total of the smg and mini_lb models\n"
             "                              (joined, pr1150 1800000; minilb 3600000)\n"
             "  --tail-timeout-ms N         the tail: how long the prefill leg stays watched\n"
             "                              (and aborted if still open) after the client's\n"
             "                              answer ended (reference 500; docs/spec.md R-TAIL)\n"
             "  --head-timeout-ms N         how long a stream leg may go without its 200\n"
             "                              status line and headers (reference 5000)\n"
             "  --abort-timeout-ms N        bound on each POST /abort_request (default 2000)\n"
             "  --retry-backoff-ms N, --retry-max-backoff-ms N  first and largest pause\n"
             "                     before a retry (default 50, 30000; x1.5 per attempt, +/-20%%)\n"
             "  --breaker-failures N  failures that open a worker's breaker, 0 = no breaker\n"
             "                     (default 10: smg consecutive, reference 10 and >= 50%% in the\n"
             "                     window; minilb no breaker)\n"
             "  --breaker-open-ms N   how long an open breaker stays open (default 60000)\n"
             "  --breaker-window-ms N the reference breaker's window (default 120000)\n"
             "  --max-body-bytes N    client body limit, 413 beyond (default 4194304)\n"
             "  --max-connections N   client connections served, 503 beyond (default 1024)\n"
             "  --max-connections-per-peer N  of those, from one client IP address: its\n"
             "                     own longest-idle kept-alive connection makes room, else 503\n"
             "                     per_peer_limit (default 0: no own bound)\n"
             "  --client-timeout-s N  idle client connection timeout (default 30)\n"
             "  --client-deadline-s N a request must be whole (headers and body) this long\n"
             "                     after the accept or the previous response, else 408\n"
             "                     (default 10)\n"
             "  --seed N           PRNG seed for rooms, rids, policies (default: from the clock)\n"
             "  --prefill-groups L KV transfer group (0..255) of each --prefill worker, in\n"
             "                     order, comma-separated; --decode-groups L the same for\n"
             "                     --decode. The reference pairs within a group (docs/spec.md\n"
             "                     R-PAIR-GROUP); the models ignore groups (default: all 0)\n"
             "  --prefill-abort-ignored L  1 or 0 for each --prefill worker, in order: 1 declares\n"
             "                     that its engine ignores an abort after the KV commit; the\n"
             "                     reference then lets decode collect the KV when the client\n"
             "                     leaves (docs/spec.md R-ABORT-COMMITTED; default: all 0)\n"
             "reference admission (docs/spec.md R-ADMIT-*; on when a limit is given):\n"
             "  --prefill-limit N, --decode-limit N  requests in flight each prefill / decode\n"
             "                     worker is sent at most (its running slots; default 0: no\n"
             "                     limit); the excess waits at the gateway for a pair with room\n"
             "  --admit-queue N    requests that may wait, 503 admission_queue_full beyond\n"
             "                     (default 1024; 0 = admission off)\n"
             "  --admit-queue-ms N how long after its arrival a request may wait: 503\n"
             "                     admission_queue_timeout then, or at once when its backlog\n"
             "                     would keep it longer (admission_queue_wait) (default\n"
             "                     20000); a shed 503 carries Retry-After: 1\n"
             "  --verbose          log server, upstream and core errors to stderr (default off)\n"
             "  --json             print the ready line as JSON: ready, pid, host, port, listen,\n"
             "                     url, mode, prefill, decode (as pdref mock's) (default: text)\n"
             PD_CLI_MODES_HELP
             "Routes: POST /generate /v1/completions /v1/chat/completions; GET /health\n"
             "/readiness /metrics; info routes proxied to the first prefill worker.\n"
             "example: pdref gateway --prefill http://127.0.0.1:30001@8998 \\\n"
             "           --decode http://127.0.0.1:30002 --listen 127.0.0.1:8000\n"
             "exit: 0 after SIGINT/SIGTERM, 1 cannot start, 2 bad usage\n");
}

static void on_signal(int sig) {
  (void)sig;
  pd_gateway_t *g = g_running;
  if (g) pd_gateway_stop(g);
}

#define CMD "pdref gateway"

static int add_worker(pd_gateway_config_t *c, int is_prefill, char *spec) {
  uint32_t *n = is_prefill ? &c->n_prefill : &c->n_decode;
  pd_gateway_worker_t *w = is_prefill ? c->prefill : c->decode;
  int port = -1;
  if (*n >= PD_MAX_WORKERS || pd_gateway_parse_worker(spec, &port) || (!is_prefill && port >= 0)) {
    fprintf(stderr, CMD ": --%s: expected http://HOST:PORT%s, got '%s'\n",
            is_prefill ? "prefill" : "decode", is_prefill ? "[@BOOTSTRAP_PORT]" : "", spec);
    return 2;
  }
  w[*n].url = spec;
  w[*n].bootstrap_port = port;
  (*n)++;
  return 0;
}

static int set_policy(const char *flag, const char *v, pd_gw_config_t *core, int role) {
  pd_policy_kind_t k;
  if (pd_policy_parse(v, &k)) {
    fprintf(stderr, CMD ": %s: unknown policy '%s'\n", flag, v);
    return 2;
  }
  if (role != 1) core->policy[PD_ROLE_PREFILL] = k;
  if (role != 0) core->policy[PD_ROLE_DECODE] = k;
  return 0;
}

/* Flags that set a number. */
static int set_number(const char *f, const char *v, pd_gateway_config_t *c) {
  uint64_t x = 0;
  pd_gw_config_t *k = &c->core;
  static const struct {
    const char *flag;
    size_t off;
  } ns_flags[] = {
      {"--connect-timeout-ms", offsetof(pd_gw_config_t, connect_timeout_ns)},
      {"--first-token-timeout-ms", offsetof(pd_gw_config_t, first_token_timeout_ns)},
      {"--idle-timeout-ms", offsetof(pd_gw_config_t, idle_timeout_ns)},
      {"--total-timeout-ms", offsetof(pd_gw_config_t, total_timeout_ns)},
      {"--commit-timeout-ms", offsetof(pd_gw_config_t, commit_timeout_ns)},
      {"--token-budget-ms", offsetof(pd_gw_config_t, token_budget_ns)},
      {"--request-timeout-ms", offsetof(pd_gw_config_t, request_timeout_ns)},
      {"--tail-timeout-ms", offsetof(pd_gw_config_t, prefill_tail_timeout_ns)},
      {"--head-timeout-ms", offsetof(pd_gw_config_t, head_timeout_ns)},
      {"--admit-queue-ms", offsetof(pd_gw_config_t, admit_queue_ns)},
  };
  for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
    if (strcmp(f, ns_flags[i].flag)) continue;
    if (pd_cli_parse_u64(CMD, f, v, 0, 1000ull * 86400 * 365, &x)) return 2;
    *(uint64_t *)(void *)((char *)k + ns_flags[i].off) = x * MS_NS;
    return 0;
  }
  if (!strcmp(f, "--prefill-limit") || !strcmp(f, "--decode-limit")) {
    if (pd_cli_parse_u64(CMD, f, v, 0, 1000000, &x)) return 2;
    *(f[2] == 'p' ? &c->prefill_limit : &c->decode_limit) = (uint32_t)x;
  } else if (!strcmp(f, "--admit-queue")) {
    if (pd_cli_parse_u64(CMD, f, v, 0, 1000000, &x)) return 2;
    k->admit_queue_max = (uint32_t)x;
  } else if (!strcmp(f, "--max-attempts")) {
    if (pd_cli_parse_u64(CMD, f, v, 1, PD_MAX_ATTEMPTS, &x)) return 2;
    k->retry.max_attempts = (uint32_t)x;
  } else if (!strcmp(f, "--retry-backoff-ms")) {
    if (pd_cli_parse_u64(CMD, f, v, 0, 3600000, &x)) return 2;
    k->retry.initial_backoff_ms = x;
  } else if (!strcmp(f, "--retry-max-backoff-ms")) {
    if (pd_cli_parse_u64(CMD, f, v, 0, 3600000, &x)) return 2;
    k->retry.max_backoff_ms = x;
  } else if (!strcmp(f, "--breaker-failures")) {
    if (pd_cli_parse_u64(CMD, f, v, 0, 1000000, &x)) return 2;
    k->breaker.failure_threshold = x ? (uint32_t)x : UINT32_MAX; /* 0: no breaker */
  } else if (!strcmp(f, "--breaker-open-ms")) {
    if (pd_cli_parse_u64(CMD, f, v, 1, 1000ull * 86400, &x)) return 2;
    k->breaker.open_ns = x * MS_NS;
  } else if (!strcmp(f, "--breaker-window-ms")) {
    if (pd_cli_parse_u64(CMD, f, v, 1, 1000ull * 86400, &x)) return 2;
    k->breaker.window_ns = x * MS_NS;
  } else if (!strcmp(f, "--max-body-bytes")) {
    if (pd_cli_parse_u64(CMD, f, v, 1, 1ull << 30, &x)) return 2;
    c->max_body_bytes = (size_t)x;
  } else if (!strcmp(f, "--max-connections")) {
    if (pd_cli_parse_u64(CMD, f, v, 1, 65536, &x)) return 2;
    c->max_connections = (uint32_t)x;
  } else if (!strcmp(f, "--max-connections-per-peer")) {
    if (pd_cli_parse_u64(CMD, f, v, 0, 65536, &x)) return 2;
    c->max_conns_per_peer = (uint32_t)x;
  } else if (!strcmp(f, "--client-timeout-s")) {
    if (pd_cli_parse_u64(CMD, f, v, 0, 86400, &x)) return 2;
    c->client_timeout_s = (uint32_t)x;
  } else if (!strcmp(f, "--client-deadline-s")) {
    if (pd_cli_parse_u64(CMD, f, v, 1, 3600, &x)) return 2;
    c->client_deadline_s = (uint32_t)x;
  } else if (!strcmp(f, "--abort-timeout-ms")) {
    if (pd_cli_parse_u64(CMD, f, v, 1, 600000, &x)) return 2;
    c->abort_timeout_ms = (uint32_t)x;
  } else if (!strcmp(f, "--seed")) {
    if (pd_cli_parse_u64(CMD, f, v, 0, UINT64_MAX, &x)) return 2;
    c->seed = x;
  } else {
    assert(!"a numeric option without a setter");
    return 2;
  }
  return 0;
}

static uint64_t clock_seed(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
}

static int is_json; /* --json: the ready line as one JSON object */

enum {
  OPT_MODE = PD_CLI_OPT_FIRST, OPT_PREFILL, OPT_DECODE, OPT_LISTEN, OPT_POLICY,
  OPT_PREFILL_POLICY, OPT_DECODE_POLICY, OPT_VERBOSE, OPT_JSON, OPT_PROTOCOL, OPT_NUMBER,
  OPT_PREFILL_GROUPS, OPT_DECODE_GROUPS, OPT_PREFILL_ABORT_IGNORED
};

/* Every option of set_number has val OPT_NUMBER; its name tells them apart. */
static const struct option long_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"mode", required_argument, NULL, OPT_MODE},
    {"prefill", required_argument, NULL, OPT_PREFILL},
    {"decode", required_argument, NULL, OPT_DECODE},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"prefill-policy", required_argument, NULL, OPT_PREFILL_POLICY},
    {"decode-policy", required_argument, NULL, OPT_DECODE_POLICY},
    {"verbose", no_argument, NULL, OPT_VERBOSE},
    {"json", no_argument, NULL, OPT_JSON},
    {"protocol", required_argument, NULL, OPT_PROTOCOL},
    {"prefill-groups", required_argument, NULL, OPT_PREFILL_GROUPS},
    {"decode-groups", required_argument, NULL, OPT_DECODE_GROUPS},
    {"prefill-abort-ignored", required_argument, NULL, OPT_PREFILL_ABORT_IGNORED},
    {"connect-timeout-ms", required_argument, NULL, OPT_NUMBER},
    {"first-token-timeout-ms", required_argument, NULL, OPT_NUMBER},
    {"idle-timeout-ms", required_argument, NULL, OPT_NUMBER},
    {"total-timeout-ms", required_argument, NULL, OPT_NUMBER},
    {"commit-timeout-ms", required_argument, NULL, OPT_NUMBER},
    {"token-budget-ms", required_argument, NULL, OPT_NUMBER},
    {"request-timeout-ms", required_argument, NULL, OPT_NUMBER},
    {"tail-timeout-ms", required_argument, NULL, OPT_NUMBER},
    {"head-timeout-ms", required_argument, NULL, OPT_NUMBER},
    {"max-attempts", required_argument, NULL, OPT_NUMBER},
    {"retry-backoff-ms", required_argument, NULL, OPT_NUMBER},
    {"retry-max-backoff-ms", required_argument, NULL, OPT_NUMBER},
    {"breaker-failures", required_argument, NULL, OPT_NUMBER},
    {"breaker-open-ms", required_argument, NULL, OPT_NUMBER},
    {"breaker-window-ms", required_argument, NULL, OPT_NUMBER},
    {"max-body-bytes", required_argument, NULL, OPT_NUMBER},
    {"max-connections", required_argument, NULL, OPT_NUMBER},
    {"max-connections-per-peer", required_argument, NULL, OPT_NUMBER},
    {"client-timeout-s", required_argument, NULL, OPT_NUMBER},
    {"client-deadline-s", required_argument, NULL, OPT_NUMBER},
    {"abort-timeout-ms", required_argument, NULL, OPT_NUMBER},
    {"seed", required_argument, NULL, OPT_NUMBER},
    {"prefill-limit", required_argument, NULL, OPT_NUMBER},
    {"decode-limit", required_argument, NULL, OPT_NUMBER},
    {"admit-queue", required_argument, NULL, OPT_NUMBER},
    {"admit-queue-ms", required_argument, NULL, OPT_NUMBER},
    {NULL, 0, NULL, 0},
};

/* --prefill-groups / --decode-groups: "G,G,..." (0..255 each, at most PD_MAX_WORKERS) into
 * out[i] + 1 (0: not given, group 0). 0, or 2 with the message printed. */
static int set_groups(const char *flag, const char *v, uint32_t *out) {
  const char *p = v;
  for (uint32_t i = 0; i < PD_MAX_WORKERS; i++) {
    char *end = NULL;
    errno = 0;
    unsigned long g = *p >= '0' && *p <= '9' ? strtoul(p, &end, 10) : 256;
    if (errno || g > 255 || !end || (*end != ',' && *end != '\0')) {
      fprintf(stderr, "%s: %s: item %u of '%s' is not a group 0..255\n", CMD, flag, i + 1, v);
      return 2;
    }
    out[i] = (uint32_t)g + 1;
    if (*end == '\0') return 0;
    p = end + 1;
  }
  fprintf(stderr, "%s: %s: more than %u groups in '%s'\n", CMD, flag, PD_MAX_WORKERS, v);
  return 2;
}

typedef struct gw_parse {
  pd_gateway_config_t *cfg;
  char *host; /* the --listen host: cap bytes */
  size_t cap;
} gw_parse_t;

/* One option (long_opts[index]) with its value v; 0, or an error (the message printed). */
static int apply_opt(void *ctx, int c, int index, char *v) {
  gw_parse_t *g = ctx;
  pd_gateway_config_t *cfg = g->cfg;
  char flag[48];
  switch (c) {
  case OPT_MODE: return 0; /* read in the first pass */
  case OPT_PREFILL: return add_worker(cfg, 1, v);
  case OPT_DECODE: return add_worker(cfg, 0, v);
  case OPT_LISTEN:
    cfg->listen_host = g->host;
    return pd_cli_parse_listen(CMD, "--listen", v, g->host, g->cap, &cfg->listen_port);
  case OPT_POLICY: return set_policy("--policy", v, &cfg->core, -1);
  case OPT_PREFILL_POLICY: return set_policy("--prefill-policy", v, &cfg->core, 0);
  case OPT_DECODE_POLICY: return set_policy("--decode-policy", v, &cfg->core, 1);
  case OPT_PREFILL_GROUPS: return set_groups("--prefill-groups", v, cfg->prefill_group);
  case OPT_DECODE_GROUPS: return set_groups("--decode-groups", v, cfg->decode_group);
  case OPT_PREFILL_ABORT_IGNORED: /* 0/1 per prefill, stored + 1 */
    return set_groups("--prefill-abort-ignored", v, cfg->prefill_abort_ignored);
  case OPT_VERBOSE: cfg->is_verbose = 1; return 0;
  case OPT_JSON: is_json = 1; return 0;
  case OPT_PROTOCOL:
    if (pd_protocol_parse(v, &cfg->core.protocol) == 0 &&
        pd_mode_speaks(cfg->core.mode, cfg->core.protocol))
      return 0;
    fprintf(stderr, "%s: --protocol: '%s' is not a protocol mode %s speaks (sglang, vllm)\n",
            CMD, v, pd_mode_name(cfg->core.mode));
    return PD_ERR_INVAL;
  default: /* OPT_NUMBER */
    snprintf(flag, sizeof flag, "--%s", long_opts[index].name);
    return set_number(flag, v, cfg);
  }
}

/* The mode first (it chooses the defaults the other options change). -1, or an exit code. */
static int parse_mode(int argc, char **argv, pd_mode_t *mode) {
  int c;
  pd_cli_getopt_begin();
  while ((c = pd_cli_getopt(argc, argv, long_opts, NULL)) != -1)
    if (c == OPT_MODE && pd_cli_parse_mode(CMD, "--mode", optarg, mode)) return 2;
  return -1;
}

/* Returns -1 to go on, or an exit code (0 after --help, 2 on bad usage). */
static int parse(int argc, char **argv, pd_gateway_config_t *c, char *host, size_t cap) {
  pd_mode_t mode = PD_MODE_REFERENCE;
  int rc = parse_mode(argc, argv, &mode);
  if (rc >= 0) return rc;
  pd_gateway_config_default(c, mode);
  c->seed = clock_seed();
  snprintf(host, cap, "127.0.0.1");
  c->listen_host = host;
  c->listen_port = 8000;
  gw_parse_t g = {c, host, cap};
  pd_cli_parser_t p = {CMD, long_opts, usage, apply_opt, &g, NULL, 0, NULL};
  rc = pd_cli_parse(&p, argc, argv);
  if (rc >= 0) return rc;
  if (!c->n_prefill || !c->n_decode) {
    fprintf(stderr, CMD ": need at least one --prefill and one --decode (try --help)\n");
    return 2;
  }
  return -1;
}

static void install_signals(void) { pd_cli_install_signals(on_signal); }

int pd_cli_gateway(int argc, char **argv) {
  static pd_gateway_config_t cfg; /* large (worker tables): not on the stack */
  char host[256];
  int rc = parse(argc, argv, &cfg, host, sizeof host);
  if (rc >= 0) return rc;
  pd_cli_raise_fd_limit((uint64_t)cfg.max_connections * 4 + 256); /* a client, 2 legs, an abort */
  install_signals();
  pd_gateway_t *g = NULL;
  char err[512] = "";
  rc = pd_gateway_new(&cfg, &g, err, sizeof err);
  if (rc) {
    fprintf(stderr, "pdref gateway: %s\n", err[0] ? err : pd_strerror(rc));
    return rc == PD_ERR_INVAL ? 2 : 1;
  }
  g_running = g;
  cJSON *j = pd_cli_ready_json(host, pd_gateway_port(g)); /* as pdref mock's */
  if (is_json) { /* for scripts that started it on port 0 */
    cJSON_AddStringToObject(j, "mode", pd_mode_name(cfg.core.mode));
    cJSON_AddNumberToObject(j, "prefill", cfg.n_prefill);
    cJSON_AddNumberToObject(j, "decode", cfg.n_decode);
    pd_cli_json_print_line(j);
  } else {
    printf("pdref gateway: listening on %s (mode %s, %u prefill, %u decode)\n",
           cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "url")),
           pd_mode_name(cfg.core.mode), cfg.n_prefill, cfg.n_decode);
    fflush(stdout);
    cJSON_Delete(j);
  }
  pd_cli_warn_exposed("pdref gateway", host,
                      "anyone who reaches it can send requests to the workers (their "
                      "Authorization header is forwarded to both legs) and read GET /metrics, "
                      "which names every worker URL");
  rc = pd_gateway_run(g);
  g_running = NULL;
  pd_gateway_del(g);
  fprintf(stderr, "pdref gateway: stopped\n");
  return rc ? 1 : 0;
}
