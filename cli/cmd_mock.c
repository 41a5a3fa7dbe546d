/* `pdref mock`: one SGLang-like or vLLM-like prefill or decode worker on real sockets
 * (mock_workers/server/pd_mock.h, docs/mock.md). Parses the flags, loads the worker from a scenario file if asked, prints
 * one ready line with the bound ports, and serves until SIGINT/SIGTERM. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "cli_json.h"
#include "pd_mock.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: pdref mock --role prefill|decode [--listen HOST:PORT] [--bootstrap-port P]\n"
          "                  [--scenario FILE --worker NAME] [--log EVENTS.jsonl]\n"
          "                  [--fault-ledger FILE]\n"
          "                  [--bootstrap-timeout-ms N] [--waiting-timeout-ms N] [--speed X]\n"
          "                  [--seed N] [--direct] [--clock-on-start] [--json]\n"
          "                  [--max-connections N] [--client-deadline-s N]\n"
          "                  [--max-running N] [--kv-tokens N] [--page-size N]\n"
          "                  [--protocol sglang|vllm] [--kv-port P] [--kv-expiry timeout|lease]\n"
          "                  [--kv-abort-timeout-ms N] [--kv-lease-ms N] [--kv-heartbeat-ms N]\n"
          "                  [--transfer-group G] [--dp-size N] [--capacity-per-rank]\n"
          "\n"
          "An SGLang-like or vLLM-like PD worker on real sockets, for testing gateways\n"
          "(docs/mock.md).\n"
          "  --role R            prefill or decode (optional with --worker: the worker's role)\n"
          "  --listen HOST:PORT  address to serve HTTP on: a host name, IPv4 or [IPv6]\n"
          "                      (default 127.0.0.1:0; port 0 = a free one, printed on the\n"
          "                      ready line; a name binds its first IPv4 address, else IPv6)\n"
          "  --bootstrap-port P  prefill: the bootstrap port on the same host, where decode\n"
          "                      meets prefill at a room to take over the KV (the rendezvous)\n"
          "                      (default 8998 as SGLang; 0 = a free port)\n"
          "  --scenario FILE     take behaviour, faults, timeouts and seed from a scenario\n"
          "  --worker NAME       ... for this worker of the scenario (required with --scenario)\n"
          "  --log FILE          event log, JSON lines flushed per line ('-' = stdout)\n"
          "  --fault-ledger FILE the fault ledger this run's mocks share, so a scenario's\n"
          "                      traffic faults strike one leg whichever mock gets it\n"
          "                      (made when missing; default: private to this mock)\n"
          "  --bootstrap-timeout-ms N  prefill wait for its decode (default: scenario, 300000)\n"
          "  --waiting-timeout-ms N    decode wait for the KV (default: scenario, 300000)\n"
          "  --speed X           multiply every duration by X (0.01: a 300 s timeout is 3 s)\n"
          "  --seed N            fault seed (default: the scenario's config.seed, else 1)\n"
          "  --direct            decode: a request without bootstrap_room needs no prefill\n"
          "  --clock-on-start    crash_at_ms/restart_at_ms count from POST /pdref/start (a\n"
          "                      test runner's time 0), not from start-up\n"
          "  --json              print the ready line as JSON: ready, pid, host, port, listen,\n"
          "                      url, role, worker, bootstrap_port, protocol, kv_port\n"
          "  --max-connections N HTTP connections at once, 503 beyond (0/default 2048)\n"
          "  --client-deadline-s N  a request must be whole (headers and body) this long\n"
          "                      after the accept or the previous response, else 408\n"
          "                      (0/default 10)\n"
          "  --max-running N     running-request limit (default: scenario, 2048)\n"
          "  --kv-tokens N       KV pool in tokens (default: scenario, 1048576)\n"
          "  --page-size N       tokens per KV page (default: scenario, 1)\n"
          "  --protocol P        sglang (bootstrap rooms, destination first) or vllm\n"
          "                      (kv_transfer_params, source first) (default: scenario, sglang)\n"
          "  --kv-port P         vllm prefill: the KV side channel's port on the same host, named\n"
          "                      as remote_port in its answers (default 5600 as vLLM; 0 = a free\n"
          "                      port); the same listener as --bootstrap-port, either flag sets it\n"
          "  --kv-expiry E       vllm prefill: pinned KV expires by a fixed timeout or a lease\n"
          "                      that decode's heartbeats extend (default: scenario, timeout)\n"
          "  --kv-abort-timeout-ms N  vllm prefill, timeout mode (default: scenario, 480000)\n"
          "  --kv-lease-ms N     vllm, lease mode: the lease (default: scenario, 30000)\n"
          "  --kv-heartbeat-ms N vllm decode, lease mode: heartbeat period (default: lease / 6)\n"
          "  --transfer-group G  sglang: KV transfer group, 0..255, the scenario's\n"
          "                      transfer_group: a prefill and a decode of different groups\n"
          "                      cannot transfer, both legs fail (default: scenario, 0)\n"
          "  --dp-size N         sglang: data-parallel ranks, 1..64; a prefill runs a request\n"
          "                      on its routed_dp_rank, else bootstrap_room %% N, and pairs only\n"
          "                      with a decode that looked the room up on that rank (its\n"
          "                      disagg_prefill_dp_rank, else room %% N) (default: scenario, 1)\n"
          "  --capacity-per-rank sglang, --dp-size > 1: each rank gets 1/N of --max-running and\n"
          "                      --kv-tokens and its requests wait only for its share\n"
          "                      (default: scenario, off: the ranks share one pool)\n"
          "Ready line (stdout): pdref mock: <role> <worker> http://HOST:PORT bootstrap P\n"
          "                     (vllm: ... kv P vllm)\n"
          "example: pdref mock --role prefill --listen 127.0.0.1:30001 --bootstrap-port 8998\n"
          "example: pdref mock --role prefill --transfer-group 1 --dp-size 2 --bootstrap-port 0\n"
          "exit: 0 after SIGINT/SIGTERM, 1 cannot start, 2 bad usage or input\n");
}

typedef struct mock_opts {
  pd_mock_config_t c;
  pd_scenario_worker_t w; /* the worker with the capacity flags applied (when given) */
  uint32_t max_running, page_size;
  uint64_t kv_tokens;
  int has_capacity, has_worker_opts;
  const char *protocol, *kv_expiry;
  uint64_t kv_abort_ms, kv_lease_ms, kv_heartbeat_ms;
  int has_kv_abort, has_kv_lease, has_kv_heartbeat;
  uint32_t transfer_group, dp_size; /* --transfer-group, --dp-size (O5.2, S2.14) */
  int has_transfer_group, has_dp_size, is_capacity_per_rank;
  const char *scenario, *worker, *log, *role;
  char host[64];
  int has_boot_port, has_bto, has_wto, has_seed, is_json;
} mock_opts_t;

#define CMD "pdref mock"

enum {
  OPT_ROLE = PD_CLI_OPT_FIRST, OPT_LISTEN, OPT_SCENARIO, OPT_WORKER, OPT_LOG, OPT_LEDGER,
  OPT_SPEED, OPT_BOOT_PORT, OPT_BOOT_TIMEOUT, OPT_WAIT_TIMEOUT, OPT_MAX_CONN, OPT_DEADLINE,
  OPT_SEED, OPT_JSON, OPT_DIRECT, OPT_CLOCK_ON_START, OPT_MAX_RUNNING, OPT_KV_TOKENS,
  OPT_PAGE_SIZE, OPT_PROTOCOL, OPT_KV_PORT, OPT_KV_EXPIRY, OPT_KV_ABORT, OPT_KV_LEASE,
  OPT_KV_HEARTBEAT, OPT_TRANSFER_GROUP, OPT_DP_SIZE, OPT_CAPACITY_PER_RANK
};

static const struct option long_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"role", required_argument, NULL, OPT_ROLE},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"scenario", required_argument, NULL, OPT_SCENARIO},
    {"worker", required_argument, NULL, OPT_WORKER},
    {"log", required_argument, NULL, OPT_LOG},
    {"fault-ledger", required_argument, NULL, OPT_LEDGER},
    {"speed", required_argument, NULL, OPT_SPEED},
    {"bootstrap-port", required_argument, NULL, OPT_BOOT_PORT},
    {"bootstrap-timeout-ms", required_argument, NULL, OPT_BOOT_TIMEOUT},
    {"waiting-timeout-ms", required_argument, NULL, OPT_WAIT_TIMEOUT},
    {"max-connections", required_argument, NULL, OPT_MAX_CONN},
    {"client-deadline-s", required_argument, NULL, OPT_DEADLINE},
    {"seed", required_argument, NULL, OPT_SEED},
    {"json", no_argument, NULL, OPT_JSON},
    {"direct", no_argument, NULL, OPT_DIRECT},
    {"clock-on-start", no_argument, NULL, OPT_CLOCK_ON_START},
    {"max-running", required_argument, NULL, OPT_MAX_RUNNING},
    {"kv-tokens", required_argument, NULL, OPT_KV_TOKENS},
    {"page-size", required_argument, NULL, OPT_PAGE_SIZE},
    {"protocol", required_argument, NULL, OPT_PROTOCOL},
    {"kv-port", required_argument, NULL, OPT_KV_PORT},
    {"kv-expiry", required_argument, NULL, OPT_KV_EXPIRY},
    {"kv-abort-timeout-ms", required_argument, NULL, OPT_KV_ABORT},
    {"kv-lease-ms", required_argument, NULL, OPT_KV_LEASE},
    {"kv-heartbeat-ms", required_argument, NULL, OPT_KV_HEARTBEAT},
    {"transfer-group", required_argument, NULL, OPT_TRANSFER_GROUP},
    {"dp-size", required_argument, NULL, OPT_DP_SIZE},
    {"capacity-per-rank", no_argument, NULL, OPT_CAPACITY_PER_RANK},
    {NULL, 0, NULL, 0},
};

/* The options that set a number; 0, or PD_ERR_INVAL (the message printed). */
static int apply_number(mock_opts_t *o, int c, const char *v) {
  uint32_t n = 0;
  int rc;
  switch (c) {
  case OPT_SPEED:
    return pd_cli_parse_positive(CMD, "--speed", v, 1e6, &o->c.speed);
  case OPT_BOOT_PORT:
  case OPT_KV_PORT: /* one listener: SGLang's bootstrap server or vLLM's side channel */
    o->has_boot_port = 1;
    rc = pd_cli_parse_u32(CMD, c == OPT_KV_PORT ? "--kv-port" : "--bootstrap-port", v, 0, 65535,
                          &n);
    if (!rc) o->c.bootstrap_port = (uint16_t)n;
    return rc;
  case OPT_BOOT_TIMEOUT:
    o->has_bto = 1;
    return pd_cli_parse_u64(CMD, "--bootstrap-timeout-ms", v, 0, PD_SCENARIO_MAX_MS,
                            &o->c.bootstrap_timeout_ms);
  case OPT_WAIT_TIMEOUT:
    o->has_wto = 1;
    return pd_cli_parse_u64(CMD, "--waiting-timeout-ms", v, 0, PD_SCENARIO_MAX_MS,
                            &o->c.waiting_timeout_ms);
  case OPT_MAX_CONN: /* 0: the default */
    rc = pd_cli_parse_u32(CMD, "--max-connections", v, 0, PD_MOCK_MAX_CONNECTIONS, &n);
    if (!rc) o->c.max_connections = n;
    return rc;
  case OPT_DEADLINE: /* 0: the default */
    rc = pd_cli_parse_u32(CMD, "--client-deadline-s", v, 0, 3600, &n);
    if (!rc) o->c.client_deadline_s = n;
    return rc;
  case OPT_MAX_RUNNING:
    o->has_capacity = 1;
    return pd_cli_parse_u32(CMD, "--max-running", v, 1, UINT32_MAX, &o->max_running);
  case OPT_KV_TOKENS:
    o->has_capacity = 1;
    return pd_cli_parse_u64(CMD, "--kv-tokens", v, 1, UINT64_MAX / 4, &o->kv_tokens);
  case OPT_PAGE_SIZE:
    o->has_capacity = 1;
    return pd_cli_parse_u32(CMD, "--page-size", v, 1, 1u << 20, &o->page_size);
  case OPT_KV_ABORT:
    o->has_worker_opts = o->has_kv_abort = 1;
    return pd_cli_parse_u64(CMD, "--kv-abort-timeout-ms", v, 1, PD_SCENARIO_MAX_MS, &o->kv_abort_ms);
  case OPT_KV_LEASE:
    o->has_worker_opts = o->has_kv_lease = 1;
    return pd_cli_parse_u64(CMD, "--kv-lease-ms", v, 1, PD_SCENARIO_MAX_MS, &o->kv_lease_ms);
  case OPT_KV_HEARTBEAT:
    o->has_worker_opts = o->has_kv_heartbeat = 1;
    return pd_cli_parse_u64(CMD, "--kv-heartbeat-ms", v, 0, PD_SCENARIO_MAX_MS,
                            &o->kv_heartbeat_ms);
  case OPT_TRANSFER_GROUP: /* the scenario key's range (sim/pd_scenario.c) */
    o->has_worker_opts = o->has_transfer_group = 1;
    return pd_cli_parse_u32(CMD, "--transfer-group", v, 0, 255, &o->transfer_group);
  case OPT_DP_SIZE:
    o->has_worker_opts = o->has_dp_size = 1;
    return pd_cli_parse_u32(CMD, "--dp-size", v, 1, 64, &o->dp_size);
  default: /* OPT_SEED */
    o->has_seed = 1;
    return pd_cli_parse_u64(CMD, "--seed", v, 0, UINT64_MAX, &o->c.seed);
  }
}

/* One option with its value; 0, or PD_ERR_INVAL on a bad value. */
static int apply_opt(void *ctx, int c, int index, char *v) {
  mock_opts_t *o = ctx;
  (void)index;
  switch (c) {
  case OPT_ROLE: o->role = v; return 0;
  case OPT_LISTEN:
    return pd_cli_parse_listen(CMD, "--listen", v, o->host, sizeof o->host, &o->c.port);
  case OPT_SCENARIO: o->scenario = v; return 0;
  case OPT_WORKER: o->worker = v; return 0;
  case OPT_LOG: o->log = v; return 0;
  case OPT_LEDGER: o->c.ledger_path = v; return 0;
  case OPT_JSON: o->is_json = 1; return 0;
  case OPT_DIRECT: o->c.is_direct = 1; return 0;
  case OPT_CLOCK_ON_START: o->c.is_clock_on_start = 1; return 0;
  case OPT_PROTOCOL: o->protocol = v, o->has_worker_opts = 1; return 0;
  case OPT_KV_EXPIRY: o->kv_expiry = v, o->has_worker_opts = 1; return 0;
  case OPT_CAPACITY_PER_RANK: o->is_capacity_per_rank = o->has_worker_opts = 1; return 0;
  default: return apply_number(o, c, v);
  }
}

/* The worker, its role and the scenario-wide settings; the scenario stays alive in *s. */
static int apply_scenario(mock_opts_t *o, pd_scenario_t *s) {
  char err[512];
  if (!o->worker) {
    fprintf(stderr, "pdref mock: --scenario needs --worker NAME\n");
    return 2;
  }
  if (pd_scenario_load(s, o->scenario, err, sizeof err) < 0) {
    fprintf(stderr, "pdref mock: %s\n", err);
    return 2;
  }
  for (uint32_t i = 0; i < s->n_workers; i++) {
    if (strcmp(s->workers[i].name, o->worker) != 0) continue;
    o->c.worker = &s->workers[i];
    o->c.worker_index = i;
    o->c.role = s->workers[i].role;
  }
  if (!o->c.worker) {
    fprintf(stderr, "pdref mock: %s: no worker named '%s'\n", o->scenario, o->worker);
    return 2;
  }
  if (!o->has_seed) o->c.seed = s->config.seed;
  if (!o->has_bto) o->c.bootstrap_timeout_ms = s->config.bootstrap_timeout_ms;
  if (!o->has_wto) o->c.waiting_timeout_ms = s->config.waiting_timeout_ms;
  o->c.fault_rate = s->workload.fault_rate;
  o->c.default_tokens = s->workload.tokens;
  o->c.tfaults = s->tfaults;
  o->c.n_tfaults = s->n_tfaults;
  o->c.n_requests = s->workload.requests;
  return 0;
}

static int resolve_role(mock_opts_t *o, pd_scenario_t *s) {
  pd_role_t want = PD_ROLE_PREFILL;
  if (o->role && strcmp(o->role, "prefill") != 0 && strcmp(o->role, "decode") != 0) {
    fprintf(stderr, "pdref mock: --role: expected prefill or decode, got '%s'\n", o->role);
    return 2;
  }
  if (o->role) want = strcmp(o->role, "prefill") == 0 ? PD_ROLE_PREFILL : PD_ROLE_DECODE;
  if (o->scenario) {
    if (apply_scenario(o, s)) return 2;
    if (o->role && want != o->c.role) {
      fprintf(stderr, "pdref mock: --role %s, but worker '%s' is a %s\n", o->role, o->worker,
              o->c.role == PD_ROLE_PREFILL ? "prefill" : "decode");
      return 2;
    }
    return 0;
  }
  if (!o->role || o->worker) {
    fprintf(stderr, o->worker ? "pdref mock: --worker needs --scenario FILE\n"
                              : "pdref mock: --role prefill|decode is required\n");
    return 2;
  }
  o->c.role = want;
  return 0;
}

/* --protocol, the --kv-* flags and the pairing topology over the worker o->w; 0, or 2 (bad
 * value, printed). */
static int apply_protocol(mock_opts_t *o) {
  pd_protocol_t p;
  if (o->protocol && pd_protocol_parse(o->protocol, &p) < 0) {
    fprintf(stderr, "pdref mock: --protocol: expected sglang or vllm, got '%s'\n", o->protocol);
    return 2;
  }
  if (o->protocol) o->w.protocol = p;
  if (o->kv_expiry && strcmp(o->kv_expiry, "timeout") && strcmp(o->kv_expiry, "lease")) {
    fprintf(stderr, "pdref mock: --kv-expiry: expected timeout or lease, got '%s'\n", o->kv_expiry);
    return 2;
  }
  if (o->kv_expiry)
    o->w.kv_expiry = strcmp(o->kv_expiry, "lease") ? PD_KV_EXPIRY_TIMEOUT : PD_KV_EXPIRY_LEASE;
  if (o->has_kv_abort) o->w.kv_abort_timeout_ms = o->kv_abort_ms;
  if (o->has_kv_lease) o->w.kv_lease_ms = o->kv_lease_ms;
  if (o->has_kv_heartbeat) o->w.kv_heartbeat_ms = o->kv_heartbeat_ms;
  if (o->has_transfer_group) o->w.transfer_group = o->transfer_group;
  if (o->has_dp_size) o->w.dp_size = o->dp_size;
  if (o->is_capacity_per_rank) o->w.capacity_per_rank = 1;
  return 0;
}

/* --max-running, --kv-tokens, --page-size, --protocol, --kv-*, --transfer-group, --dp-size,
 * --capacity-per-rank over the scenario's worker (or the defaults). */
static int apply_worker(mock_opts_t *o) {
  if (!o->has_capacity && !o->has_worker_opts) return 0;
  if (o->c.worker) {
    o->w = *o->c.worker;
  } else {
    pd_scenario_t *d = calloc(1, sizeof *d);
    if (!d) return 1;
    pd_scenario_defaults(d);
    o->w = d->workers[o->c.role == PD_ROLE_PREFILL ? 0 : 1];
    free(d);
  }
  if (o->max_running) o->w.max_running = o->max_running;
  if (o->kv_tokens) o->w.kv_tokens = o->kv_tokens;
  if (o->page_size) o->w.page_size = o->page_size;
  o->c.worker = &o->w;
  return apply_protocol(o);
}

static int is_vllm(const mock_opts_t *o) {
  return o->c.worker && o->c.worker->protocol == PD_PROTOCOL_VLLM;
}

static void print_ready(const mock_opts_t *o, pd_mock_t *m) {
  const char *role = o->c.role == PD_ROLE_PREFILL ? "prefill" : "decode";
  const char *name = o->c.worker ? o->c.worker->name : o->c.role == PD_ROLE_PREFILL ? "p0" : "d0";
  unsigned kv_port = is_vllm(o) ? pd_mock_bootstrap_port(m) : 0; /* vLLM: the side channel */
  cJSON *j = pd_cli_ready_json(o->host, pd_mock_port(m)); /* "ready" first: conform looks */
  const char *url = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "url"));
  if (!o->is_json) {
    if (is_vllm(o)) printf("pdref mock: %s %s %s kv %u vllm\n", role, name, url, kv_port);
    else printf("pdref mock: %s %s %s bootstrap %u\n", role, name, url, pd_mock_bootstrap_port(m));
    fflush(stdout);
    cJSON_Delete(j);
    return;
  }
  cJSON_AddStringToObject(j, "role", role);
  cJSON_AddStringToObject(j, "worker", name);
  cJSON_AddNumberToObject(j, "bootstrap_port", pd_mock_bootstrap_port(m));
  cJSON_AddStringToObject(j, "protocol", is_vllm(o) ? "vllm" : "sglang");
  cJSON_AddNumberToObject(j, "kv_port", kv_port);
  pd_cli_json_print_line(j);
}

/* Serve until SIGINT/SIGTERM: blocked in every thread, taken here with sigwait. */
static int serve(mock_opts_t *o) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  /* room for every connection and bootstrap socket a full mock holds (above the default 1024) */
  pd_cli_raise_fd_limit((uint64_t)PD_MOCK_MAX_CONNECTIONS + PD_MOCK_MAX_BOOT_CONNS + 256);
  char err[512];
  pd_mock_t *m = pd_mock_new(&o->c, err, sizeof err);
  if (!m) {
    fprintf(stderr, "pdref mock: %s\n", err);
    return 1;
  }
  print_ready(o, m);
  pd_cli_warn_exposed("pdref mock", o->host,
                      "anyone who reaches it can POST /abort_request {\"abort_all\":true} (ends "
                      "every live request: 500 or finish_reason abort), POST /flush_cache and "
                      "/pdref/start, and open connections to its bootstrap port");
  int sig = 0;
  sigwait(&set, &sig);
  pd_mock_del(m);
  return 0;
}

int pd_cli_mock(int argc, char **argv) {
  mock_opts_t o;
  memset(&o, 0, sizeof o);
  pd_mock_config_default(&o.c);
  o.c.bootstrap_port = 8998; /* SGLang's default */
  snprintf(o.host, sizeof o.host, "127.0.0.1");
  pd_cli_parser_t p = {CMD, long_opts, usage, apply_opt, &o, NULL, 0, NULL};
  int rc = pd_cli_parse(&p, argc, argv);
  if (rc >= 0) return rc;
  pd_scenario_t *s = calloc(1, sizeof *s);
  rc = s ? resolve_role(&o, s) : 1;
  if (!rc) rc = apply_worker(&o);
  if (!rc && is_vllm(&o) && !o.has_boot_port) o.c.bootstrap_port = PD_MOCK_KV_DEFAULT_PORT;
  FILE *log = NULL;
  if (!rc && o.log) {
    log = strcmp(o.log, "-") == 0 ? stdout : fopen(o.log, "w");
    if (!log) {
      fprintf(stderr, "pdref mock: --log %s: %s\n", o.log, strerror(errno));
      rc = 2;
    }
  }
  o.c.listen_host = o.host;
  o.c.log = log;
  if (!rc) rc = serve(&o);
  if (log && log != stdout) fclose(log);
  free(s);
  return rc;
}
