/* One conformance run of one scenario: options, placeholders of the gateway command, the
 * scaled copy of the scenario the checker reads, and the sequence start mocks -> start the
 * gateway -> drive the workload -> settle -> stop everything -> read logs -> judge. Every
 * process is stopped and reaped on every path. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pd_conform_int.h"
#include "pd_conform_metrics.h"

#define ALL_INVARIANTS ((1u << PD_INVARIANT_COUNT) - 1u)
#define SETTLE_MARGIN_MS 25u /* after grace: the mocks poll idle peers every 20 ms */
#define BOUND_SLACK_MS 250u  /* a request is given up this long after its I1 bound */
#define CMD_MAX 16384u
#define HDR_MAX 2048u /* one client header line, expanded */
#define METRICS_TIMEOUT_MS 2000u /* reading the gateway's /metrics at the end of a run */
#define QUIET_WAIT_MS 1000u      /* re-reading it while it shows work held */
#define QUIET_POLL_MS 50u

void pd_conform_opts_default(pd_conform_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->mode_label = "gateway";
  o->scale = 1.0;
  o->slack_ms = PD_CONFORM_DEFAULT_SLACK_MS;
  o->start_ms = PD_CONFORM_DEFAULT_START_MS;
  o->stop_ms = PD_CONFORM_DEFAULT_STOP_MS;
}

void pd_conform_set_label(pd_conform_opts_t *o, const char *label) {
  o->mode_label = label ? label : "gateway";
  o->has_mode = pd_mode_parse(o->mode_label, &o->mode) == 0;
}

uint32_t pd_conform_judged_mask(const pd_conform_opts_t *o) {
  uint32_t m = ALL_INVARIANTS & ~PD_CONFORM_UNJUDGED;
  if (!o->has_mode)
    m &= ~PD_CONFORM_BIT(PD_INVARIANT_ATTEMPTS); /* the attempt limit is the mode's */
  return m;
}

static int has_crash(const pd_scenario_t *s) {
  for (uint32_t i = 0; i < s->n_workers; i++)
    if (s->workers[i].crash_at_ms) return 1;
  return 0;
}

int pd_conform_mode_skips(const pd_scenario_t *s, const pd_conform_opts_t *o) {
  return o->has_mode && !pd_mode_speaks(o->mode, pd_scenario_protocol(s));
}

const char *pd_conform_skip_reason(const pd_scenario_t *s) {
  if (s->workload.requests > PD_CONFORM_MAX_REQUESTS) return "more than 50000 client requests";
  for (uint32_t i = 0; i < s->n_workers; i++) /* a gateway's breakers start closed */
    if (s->workers[i].breaker_initial != PD_BREAKER_CLOSED)
      return "a worker's breaker starts open or half-open (breaker_initial): simulator only";
  if (s->workload.users) return "a closed-loop workload (users): simulator only for now";
  if (s->workload.client_timeout_ms || s->workload.client_retries)
    return "a client timeout or client retries: simulator only for now";
  if (s->config.alloc_fail_for_ms) /* R-OWN-FAILURE: no gateway over sockets can be made to */
    return "memory pressure on the gateway (config.alloc_fail_*): simulator only";
  return NULL;
}

uint64_t pd_conform_gateway_seed(uint64_t scenario_seed) {
  pd_prng_t root; /* pd_prng_fork(root, 1): init(next(root) ^ 1 * golden) */
  pd_prng_init(&root, scenario_seed);
  return pd_prng_next(&root) ^ 0x9e3779b97f4a7c15ULL;
}

/* ---------- the gateway command ---------- */

static uint64_t scaled_ms(double ns, double scale) {
  double ms = ns / 1e6 * scale + 0.5;
  return ms < 1 ? 1 : ms > 1e12 ? (uint64_t)1e12 : (uint64_t)ms;
}

/* {pdref_gateway_args}: `pdref gateway` flags for the simulator's gateway settings, scaled.
 * With a mode label: that mode's defaults plus the scenario; without: the scenario only. */
static void pdref_args(const pd_scenario_t *s, const pd_conform_opts_t *o, char *out, size_t cap) {
  const pd_scenario_config_t *sc = &s->config;
  pd_gw_config_t c;
  pd_scenario_gw_config(s, o->has_mode ? o->mode : PD_MODE_REFERENCE, &c);
  size_t off = 0;
#define ADD(...) off += (size_t)snprintf(out + off, off < cap ? cap - off : 0, __VA_ARGS__)
  ADD("--seed %llu", (unsigned long long)pd_conform_gateway_seed(sc->seed));
  if (c.protocol == PD_PROTOCOL_VLLM) ADD(" --protocol vllm"); /* source-first workers */
  uint32_t att = c.retry.max_attempts > PD_MAX_ATTEMPTS ? PD_MAX_ATTEMPTS : c.retry.max_attempts;
  if (o->has_mode) {
    ADD(" --prefill-policy %s --decode-policy %s --max-attempts %u", pd_policy_name(c.policy[0]),
        pd_policy_name(c.policy[1]), att ? att : 1);
  } else if (sc->max_attempts) {
    ADD(" --max-attempts %u", att);
  }
  if (o->has_mode && c.retry.max_attempts > 1) /* backoff is a duration: it scales too */
    ADD(" --retry-backoff-ms %llu --retry-max-backoff-ms %llu",
        (unsigned long long)scaled_ms((double)c.retry.initial_backoff_ms * 1e6, o->scale),
        (unsigned long long)scaled_ms((double)c.retry.max_backoff_ms * 1e6, o->scale));
  uint32_t bf = o->has_mode ? c.breaker.failure_threshold : sc->breaker_failure_threshold;
  if (bf) ADD(" --breaker-failures %u", bf == UINT32_MAX ? 0u : bf);
  const struct { const char *flag; uint64_t ns, scenario_ms; } t[] = {
      {"--breaker-open-ms", bf == UINT32_MAX ? 0 : c.breaker.open_ns, sc->breaker_open_ms},
      {"--breaker-window-ms", bf == UINT32_MAX ? 0 : c.breaker.window_ns, 0},
      {"--head-timeout-ms", c.head_timeout_ns, sc->head_timeout_ms},
      {"--first-token-timeout-ms", c.first_token_timeout_ns, sc->first_token_timeout_ms},
      {"--idle-timeout-ms", c.idle_timeout_ns, sc->idle_timeout_ms},
      {"--total-timeout-ms", c.total_timeout_ns, sc->total_timeout_ms},
      {"--commit-timeout-ms", c.commit_timeout_ns, sc->commit_timeout_ms},
      {"--token-budget-ms", c.token_budget_ns, sc->token_budget_ms},
      {"--request-timeout-ms", c.request_timeout_ns, sc->request_timeout_ms},
      {"--tail-timeout-ms", c.prefill_tail_timeout_ns, sc->tail_timeout_ms},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    uint64_t ns = o->has_mode ? t[i].ns : t[i].scenario_ms * PD_CONFORM_MS;
    if (ns) ADD(" %s %llu", t[i].flag, (unsigned long long)scaled_ms((double)ns, o->scale));
  }
  /* R-PAIR-GROUP: the workers' transfer groups, in the order {prefill_args}/{decode_args}
     list them (the scenario's), when any is not 0 */
  int any = 0;
  for (uint32_t i = 0; i < s->n_workers; i++) any |= s->workers[i].transfer_group != 0;
  for (int r = 0; any && r < 2; r++) {
    const char *sep = r == 0 ? " --prefill-groups " : " --decode-groups ";
    for (uint32_t i = 0; i < s->n_workers; i++) {
      if (s->workers[i].role != (pd_role_t)r) continue;
      ADD("%s%u", sep, s->workers[i].transfer_group);
      sep = ",";
    }
  }
  /* R-ABORT-COMMITTED: the prefills declared to ignore an abort after commit, when any is */
  any = 0;
  for (uint32_t i = 0; i < s->n_workers; i++)
    any |= s->workers[i].role == PD_ROLE_PREFILL && s->workers[i].abort_after_commit_ignored != 0;
  for (const char *sep = " --prefill-abort-ignored "; any && sep; sep = NULL) {
    for (uint32_t i = 0; i < s->n_workers; i++) {
      if (s->workers[i].role != PD_ROLE_PREFILL) continue;
      ADD("%s%d", sep, s->workers[i].abort_after_commit_ignored != 0);
      sep = ",";
    }
  }
  /* R-ADMIT-LIMIT: each worker's running limit, as the simulator gives it to the core
   * (pd_world_loop.c), when the reference is what runs; `pdref gateway` takes one per role,
   * so a role whose workers differ gets the smallest (the gateway then holds more at its door
   * than the simulator would). And the queue's size and deadline (scaled); none of it when the
   * scenario turns admission off (config.admission false: admit_queue_max 0). */
  if ((!o->has_mode || o->mode == PD_MODE_REFERENCE) && c.admit_queue_max) { /* admission on */
    for (int r = 0; r < 2; r++) {
      uint32_t lim = 0;
      for (uint32_t i = 0; i < s->n_workers; i++)
        if (s->workers[i].role == (pd_role_t)r && s->workers[i].max_running < PD_WORKER_DEFAULT_MAX_RUNNING &&
            (!lim || s->workers[i].max_running < lim))
          lim = s->workers[i].max_running;
      if (lim) ADD(" --%s-limit %u", r == 0 ? "prefill" : "decode", lim);
    }
    ADD(" --admit-queue %u", c.admit_queue_max);
    if (sc->admit_queue_ms)
      ADD(" --admit-queue-ms %llu",
          (unsigned long long)scaled_ms((double)sc->admit_queue_ms * PD_CONFORM_MS, o->scale));
  }
#undef ADD
  if (off >= cap && cap) out[cap - 1] = 0;
}

static int is_ident(char ch) { return (ch >= 'a' && ch <= 'z') || ch == '_'; }

/* How a worker list is written (placeholders, docs/conformance.md). */
typedef enum {
  WL_URL_AT = 0,   /* http://127.0.0.1:P@B (prefill), http://127.0.0.1:P (decode) */
  WL_URL,          /* http://127.0.0.1:P */
  WL_PORT,         /* P */
  WL_BOOT,         /* B (prefill) */
  WL_HOST,         /* 127.0.0.1 */
  WL_ARG_AT,       /* --prefill URL@B | --decode URL (pdref gateway) */
  WL_ARG_SPACE,    /* --prefill URL B | --decode URL (smg, sglang_router) */
  WL_HOSTPORT,     /* 127.0.0.1:P */
} wl_fmt_t;

/* The role's workers in format f, separated by sep (" " or ","). */
static void worker_list(const pd_scenario_t *s, pd_role_t role, wl_fmt_t f, const char *sep_s,
                        const uint16_t *ports, const uint16_t *boot, char *out, size_t cap) {
  size_t off = 0;
  const char *flag = role == PD_ROLE_PREFILL ? "--prefill " : "--decode ";
  for (uint32_t i = 0; i < s->n_workers; i++) {
    if (s->workers[i].role != role) continue;
    int has_b = role == PD_ROLE_PREFILL && boot[i];
    const char *sep = off ? sep_s : "";
    size_t room = off < cap ? cap - off : 0;
    int n = 0;
    switch (f) {
    case WL_PORT: n = snprintf(out + off, room, "%s%u", sep, ports[i]); break;
    case WL_HOSTPORT: n = snprintf(out + off, room, "%s127.0.0.1:%u", sep, ports[i]); break;
    case WL_BOOT: n = snprintf(out + off, room, "%s%u", sep, boot[i]); break;
    case WL_HOST: n = snprintf(out + off, room, "%s127.0.0.1", sep); break;
    case WL_URL: n = snprintf(out + off, room, "%shttp://127.0.0.1:%u", sep, ports[i]); break;
    default:
      n = snprintf(out + off, room, "%s%shttp://127.0.0.1:%u", sep,
                   f == WL_URL_AT ? "" : flag, ports[i]);
      if (n > 0 && has_b && f != WL_URL_AT && f != WL_ARG_AT && (size_t)n < room)
        n += snprintf(out + off + (size_t)n, room - (size_t)n, " %u", boot[i]);
      else if (n > 0 && has_b && (size_t)n < room)
        n += snprintf(out + off + (size_t)n, room - (size_t)n, "@%u", boot[i]);
    }
    if (n > 0) off += (size_t)n;
  }
  if (off >= cap && cap) out[cap - 1] = 0;
}

/* {vllm_proxy_args}: the four lists of vLLM's toy proxy (`--prefiller-hosts H... --prefiller-ports
 * P... --decoder-hosts H... --decoder-ports P...`, toy_proxy_server.py parse_args). */
static void vllm_proxy_args(const pd_scenario_t *s, const uint16_t *ports, const uint16_t *boot,
                            char *out, size_t cap) {
  static const struct { const char *flag; pd_role_t role; wl_fmt_t f; } part[] = {
      {"--prefiller-hosts", PD_ROLE_PREFILL, WL_HOST},
      {"--prefiller-ports", PD_ROLE_PREFILL, WL_PORT},
      {"--decoder-hosts", PD_ROLE_DECODE, WL_HOST},
      {"--decoder-ports", PD_ROLE_DECODE, WL_PORT}};
  char list[4096];
  size_t off = 0;
  for (size_t i = 0; i < sizeof part / sizeof part[0]; i++) {
    worker_list(s, part[i].role, part[i].f, " ", ports, boot, list, sizeof list);
    int n = snprintf(out + off, off < cap ? cap - off : 0, "%s%s %s", i ? " " : "",
                     part[i].flag, list);
    if (n > 0) off += (size_t)n;
  }
  if (off >= cap && cap) out[cap - 1] = 0;
}

int pd_conform_expand(const pd_scenario_t *s, const pd_conform_opts_t *o, const char *tmpl,
                      const uint16_t *ports, const uint16_t *boot_ports, uint16_t gw_port,
                      char *out, size_t cap, char *err, size_t errlen) {
  size_t off = 0;
  char val[8192];
  for (size_t i = 0; tmpl[i] && i < CMD_MAX; i++) {
    size_t k = i + 1;
    while (tmpl[i] == '{' && is_ident(tmpl[k]) && k - i < 32) k++;
    if (tmpl[i] != '{' || k == i + 1 || tmpl[k] != '}' || (i && tmpl[i - 1] == '$')) {
      if (off + 1 >= cap) goto small;
      out[off++] = tmpl[i];
      continue;
    }
    char name[40];
    snprintf(name, sizeof name, "%.*s", (int)(k - i - 1), tmpl + i + 1);
    val[0] = 0;
    static const struct {
      const char *name;
      pd_role_t role;
      wl_fmt_t f;
      const char *sep;
    } lists[] = {
        {"prefill_urls", PD_ROLE_PREFILL, WL_URL_AT, " "},
        {"decode_urls", PD_ROLE_DECODE, WL_URL, " "},
        {"prefill_args", PD_ROLE_PREFILL, WL_ARG_AT, " "},
        {"decode_args", PD_ROLE_DECODE, WL_ARG_AT, " "},
        {"smg_prefill_args", PD_ROLE_PREFILL, WL_ARG_SPACE, " "},
        {"prefill_plain_urls", PD_ROLE_PREFILL, WL_URL, " "},
        {"bootstrap_ports", PD_ROLE_PREFILL, WL_BOOT, " "},
        {"prefill_ports", PD_ROLE_PREFILL, WL_PORT, " "},
        {"decode_ports", PD_ROLE_DECODE, WL_PORT, " "},
        {"prefill_hosts", PD_ROLE_PREFILL, WL_HOST, " "},
        {"decode_hosts", PD_ROLE_DECODE, WL_HOST, " "},
        {"prefill_hostports", PD_ROLE_PREFILL, WL_HOSTPORT, " "},
        {"decode_hostports", PD_ROLE_DECODE, WL_HOSTPORT, " "},
        {"prefill_hostport_list", PD_ROLE_PREFILL, WL_HOSTPORT, ","},
        {"decode_hostport_list", PD_ROLE_DECODE, WL_HOSTPORT, ","},
        {"prefill_url_list", PD_ROLE_PREFILL, WL_URL, ","},
        {"decode_url_list", PD_ROLE_DECODE, WL_URL, ","},
    };
    size_t li = 0;
    while (li < sizeof lists / sizeof lists[0] && strcmp(name, lists[li].name)) li++;
    if (li < sizeof lists / sizeof lists[0])
      worker_list(s, lists[li].role, lists[li].f, lists[li].sep, ports, boot_ports, val,
                  sizeof val);
    else if (!strcmp(name, "vllm_proxy_args"))
      vllm_proxy_args(s, ports, boot_ports, val, sizeof val);
    else if (!strcmp(name, "port")) snprintf(val, sizeof val, "%u", gw_port);
    else if (!strcmp(name, "pdref_gateway_args")) pdref_args(s, o, val, sizeof val);
    else if (!strcmp(name, "seed")) snprintf(val, sizeof val, "%llu", (unsigned long long)pd_conform_gateway_seed(s->config.seed));
    else if (!strcmp(name, "scale")) snprintf(val, sizeof val, "%.6g", o->scale);
    else if (!strcmp(name, "mode")) snprintf(val, sizeof val, "%s", o->mode_label);
    else {
      snprintf(err, errlen, "--gateway-cmd: unknown placeholder {%s}", name);
      return -1;
    }
    size_t vl = strlen(val);
    if (off + vl >= cap) goto small;
    memcpy(out + off, val, vl);
    off += vl;
    i = k;
  }
  out[off] = 0;
  return 0;
small:
  snprintf(err, errlen, "--gateway-cmd: the expanded command is longer than %zu bytes", cap);
  return -1;
}

/* ---------- the run ---------- */

static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl)) return;
  rlim_t want = 16384;
  if (rl.rlim_cur >= want) return;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
}

static void remove_dir(pd_conform_runner_t *run) {
  if (!run->dir[0]) return;
  char p[PD_CONFORM_PATH_MAX + 32];
  static const char *const ext[] = {"jsonl", "out", "err"};
  for (uint32_t i = 0; i < run->s->n_workers; i++)
    for (int k = 0; k < 3; k++) {
      snprintf(p, sizeof p, "%s/w%u.%s", run->dir, i, ext[k]);
      unlink(p);
    }
  snprintf(p, sizeof p, "%s/gateway.out", run->dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/gateway.cmd", run->dir);
  unlink(p);
  rmdir(run->dir);
}

/* The scaled scenario the checker reads (deadline, grace) and the judge context on it. */
static int make_judge(pd_conform_runner_t *run) {
  const pd_scenario_t *s = run->s;
  const pd_conform_opts_t *o = run->o;
  run->ss = malloc(sizeof *run->ss);
  if (!run->ss) return -1;
  *run->ss = *s;
  pd_scenario_config_t *c = &run->ss->config;
  c->deadline_ms = scaled_ms((double)s->config.deadline_ms * 1e6, o->scale);
  c->grace_ms = scaled_ms((double)s->config.grace_ms * 1e6, o->scale);
  if (c->grace_ms < o->slack_ms) c->grace_ms = o->slack_ms;
  run->grace_ns = c->grace_ms * PD_CONFORM_MS;
  run->bound_ns = (c->deadline_ms + BOUND_SLACK_MS) * PD_CONFORM_MS + run->grace_ns;
  if (o->bound_ms && o->bound_ms * PD_CONFORM_MS > run->bound_ns)
    run->bound_ns = o->bound_ms * PD_CONFORM_MS;
  pd_conform_judge_init(run);
  return 0;
}

/* Wait until every request that ended has had its grace (so a slot freed late is seen late). */
static void settle(pd_conform_runner_t *run) {
  uint64_t until = 0;
  for (uint32_t i = 0; i < run->n_reqs; i++) {
    const pd_client_request_t *c = &run->reqs[i].c;
    if ((c->ended || c->gone) && c->t_end > until) until = c->t_end;
  }
  until += run->grace_ns + SETTLE_MARGIN_MS * PD_CONFORM_MS;
  for (uint32_t guard = 0; guard < 100000 && !pd_conform_stopping(run); guard++) {
    uint64_t now = pd_conform_now(run);
    if (now >= until) break;
    uint64_t left = (until - now) / PD_CONFORM_MS;
    pd_conform_sleep_ms(left > 20 ? 20 : left ? (unsigned)left : 1);
  }
}

static int setup_and_drive(pd_conform_runner_t *run, char *err, size_t cap) {
  const pd_scenario_t *s = run->s;
  const char *root = run->o->tmp_root ? run->o->tmp_root : getenv("TMPDIR");
  int n = snprintf(run->dir, sizeof run->dir, "%s/pdref-conform-XXXXXX",
                   root && root[0] ? root : "/tmp");
  if (n < 0 || (size_t)n >= sizeof run->dir || !mkdtemp(run->dir)) {
    snprintf(err, cap, "cannot create a run directory under %s: %s", root ? root : "/tmp", strerror(errno));
    run->dir[0] = 0;
    return -1;
  }
  snprintf(run->r->dir, sizeof run->r->dir, "%s", run->dir);
  if (pd_conform_plan(run) || make_judge(run)) {
    snprintf(err, cap, "out of memory");
    return -1;
  }
  uint16_t ports[PD_SCENARIO_MAX_WORKERS], boot[PD_SCENARIO_MAX_WORKERS];
  char *cmd = malloc(CMD_MAX);
  if (!cmd) return -1;
  memset(ports, 0, sizeof ports);
  memset(boot, 0, sizeof boot);
  if (pd_conform_expand(s, run->o, run->o->gateway_cmd, ports, boot, 0, cmd, CMD_MAX, err, cap)) {
    free(cmd); /* a bad template fails before any process starts */
    return -1;
  }
  if (pd_conform_start_mocks(run, err, cap)) {
    free(cmd);
    return -1;
  }
  for (uint32_t i = 0; i < s->n_workers; i++) {
    ports[i] = run->wk[i].port;
    boot[i] = run->wk[i].boot_port;
  }
  if (pd_conform_free_port(&run->gw_port)) {
    snprintf(err, cap, "no free loopback port for the gateway");
    free(cmd);
    return -1;
  }
  int rc = pd_conform_expand(s, run->o, run->o->gateway_cmd, ports, boot, run->gw_port, cmd,
                             CMD_MAX, err, cap);
  for (uint32_t i = 0; !rc && i < run->o->n_client_headers && i < PD_CONFORM_MAX_HEADERS; i++) {
    run->hdr[i] = malloc(HDR_MAX);
    rc = !run->hdr[i] ? -1
                      : pd_conform_expand(s, run->o, run->o->client_header[i], ports, boot,
                                          run->gw_port, run->hdr[i], HDR_MAX, err, cap);
  }
  if (!rc) {
    char p[PD_CONFORM_PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/gateway.cmd", run->dir);
    FILE *f = fopen(p, "w"); /* the expanded command line, for --keep readers */
    if (f) {
      fprintf(f, "%s\n", cmd);
      fclose(f);
    }
    rc = pd_conform_start_gateway(run, cmd, err, cap);
  }
  free(cmd);
  if (rc) return -1;
  if (pd_conform_drive(run)) {
    snprintf(err, cap, "stopped");
    return -1;
  }
  settle(run);
  return 0;
}

/* The gateway's /metrics once the run has settled; while it still shows work held, read again
 * for up to QUIET_WAIT_MS (a gauge may lag the last close by a poll). */
static char *read_metrics(pd_conform_runner_t *run) {
  char *m = pd_conform_scrape_metrics(run->gw_port, METRICS_TIMEOUT_MS);
  for (unsigned waited = 0; m && pd_conform_metrics_busy(m) && waited < QUIET_WAIT_MS &&
                            !pd_conform_stopping(run); waited += QUIET_POLL_MS) {
    pd_conform_sleep_ms(QUIET_POLL_MS);
    char *again = pd_conform_scrape_metrics(run->gw_port, METRICS_TIMEOUT_MS);
    if (!again) break;
    free(m);
    m = again;
  }
  return m;
}

static int leg_open_at_stop(const pd_conform_runner_t *run) {
  for (size_t i = 0; i < run->n_legs; i++) {
    uint64_t c = pd_conform_leg_closed(&run->legs[i]);
    if (!c || c >= run->t_gw_stop) return 1;
  }
  return 0;
}

/* What of the expectation these sockets may not show (r->maybe, r->observe_note). A row that
 * expects I1 has a request its gateway does not end in time; the runner gives it up at its
 * bound and judges it as never ended, I1 only (docs/conformance.md "Requests that end late").
 * What that request would show at its end (I14's missing error event, a slot freed late, ...)
 * is observable only when the gateway ends it by its own timeout before the bound: the
 * mode's request (or total) timeout, scaled as {pdref_gateway_args} scales it. Without a mode
 * label the gateway's timeout is unknown. I1 itself, the attempts (I7) and rooms (I8) show
 * without the end. */
static void observe(pd_conform_runner_t *run, pd_mode_t em) {
  pd_conform_result_t *r = run->r;
  const uint32_t i1 = PD_CONFORM_BIT(PD_INVARIANT_TERMINATION);
  const uint32_t no_end = i1 | PD_CONFORM_BIT(PD_INVARIANT_ATTEMPTS) |
                          PD_CONFORM_BIT(PD_INVARIANT_ROOMS);
  const uint32_t i16 = PD_CONFORM_BIT(PD_CONFORM_INV_RETRY_FAILED);
  r->maybe = 0;
  r->observe_note[0] = 0;
  if (r->want & r->judged & i16) { /* the logs prove an I16, never its absence */
    r->maybe = i16;
    snprintf(r->observe_note, sizeof r->observe_note,
             "I16 is judged from the worker logs alone, where they prove it (a retry back to "
             "the worker that failed the request while an untried one had failed nothing): "
             "judged if seen, not required");
  }
  if (!(r->want & i1) || !(r->want & ~no_end & ~i16)) return;
  uint64_t own_ns = 0;
  if (run->o->has_mode) {
    pd_gw_config_t c;
    pd_scenario_gw_config(run->s, em, &c);
    own_ns = c.request_timeout_ns ? c.request_timeout_ns : c.total_timeout_ns;
  }
  double own_scaled = (double)own_ns * run->o->scale;
  if (own_ns && own_scaled <= (double)run->bound_ns) return; /* it ends the request in time */
  r->maybe |= r->want & ~no_end;
  char ids[96] = "";
  for (int i = 1, n = 0; i <= PD_INVARIANT_COUNT; i++)
    if (r->maybe >> (i - 1) & 1u)
      n += snprintf(ids + n, sizeof ids - (size_t)n, "%sI%d", n ? "," : "", i);
  if (own_ns)
    snprintf(r->observe_note, sizeof r->observe_note,
             "%.60s show only at the end of a request the gateway ends by its own %.0f ms "
             "timeout (%.40s, scaled), after the runner gives it up at %.0f ms: judged if seen, "
             "not required (raise --request-bound-ms past it to require them)", ids,
             own_scaled / 1e6, run->o->mode_label, (double)run->bound_ns / 1e6);
  else
    snprintf(r->observe_note, sizeof r->observe_note,
             "%.60s show only at the end of a request that does not end by the runner's bound "
             "(%.0f ms), and this gateway's own timeout is not known: judged if seen, not "
             "required", ids, (double)run->bound_ns / 1e6);
}

/* The row's verdict once the legs are judged: the skip of an untrustworthy crash run, I4
 * from /metrics, the match against the expectation. */
static void judge_row(pd_conform_runner_t *run, const pd_scenario_t *s, pd_mode_t em,
                      const char *metrics) {
  pd_conform_result_t *r = run->r;
  r->requests = run->n_reqs;
  r->clean = (uint32_t)run->stats.clean_success;
  r->client_errors = (uint32_t)run->stats.client_errors;
  r->gone = (uint32_t)run->stats.aborted;
  if (has_crash(s) && r->legs_by_timing) {
    /* A crashed mock refuses connections and logs nothing of them: an attempt may lack a
     * leg, so ties by arrival order cannot be trusted. With X-Request-Id forwarded (every leg
     * tied exactly) the row is judged; without, it is skipped. */
    r->status = PD_CONFORM_SKIPPED;
    r->matched = 1;
    snprintf(r->reason, sizeof r->reason,
             "a worker crashes (crash_at_ms) and %u of %u legs could only be tied by arrival "
             "order (no X-Request-Id on the legs): refused connections leave no log line",
             r->legs_by_timing, r->legs);
    return;
  }
  r->status = PD_CONFORM_RAN;
  r->got = run->violations & r->judged;
  char why[256] = "";
  /* I4 when the gateway exposes its outcomes and every request ended: a request given up
   * may have its outcomes recorded later than the run can see */
  int m = metrics && !r->cut_off ? pd_conform_judge_metrics(run, metrics, why, sizeof why) : -1;
  if (m >= 0) { /* I4 is judged for this row */
    r->judged |= PD_CONFORM_BIT(PD_INVARIANT_OUTCOME);
    r->want = s->expect[em].violated_mask & r->judged;
  }
  if (m == 1) {
    r->got |= PD_CONFORM_BIT(PD_INVARIANT_OUTCOME);
    snprintf(r->metrics_reason, sizeof r->metrics_reason, "%s", why);
    if (!run->stats.first_reason[0])
      snprintf(run->stats.first_reason, sizeof run->stats.first_reason, "%.199s", why);
  }
  r->matched = !r->want_set || r->got == r->want;
  snprintf(r->reason, sizeof r->reason, "%s", run->stats.first_reason);
  /* reported, not yet a verdict (docs/conformance.md "Quiescence") */
  int q = metrics && !r->cut_off && !leg_open_at_stop(run)
              ? pd_conform_judge_quiescence(run, metrics, r->quiet_reason, sizeof r->quiet_reason)
              : -1;
  r->quiescent = q < 0 ? -1 : !q;
#if PD_INVARIANT_COUNT >= PD_CONFORM_INV_QUIESCENCE
  if (q >= 0) { /* I17 is judged for this row (as I4: where the gateway exposes its loads) */
    r->judged |= PD_CONFORM_BIT(PD_CONFORM_INV_QUIESCENCE);
    r->want = s->expect[em].violated_mask & r->judged;
    r->got |= q == 1 ? PD_CONFORM_BIT(PD_CONFORM_INV_QUIESCENCE) : 0;
    r->matched = !r->want_set || r->got == r->want;
    if (q == 1 && !r->reason[0]) snprintf(r->reason, sizeof r->reason, "I17 %s", r->quiet_reason);
  }
#endif
  r->limit = s->expect[em].limit_mask & r->want;
  observe(run, em);
  r->matched = !r->want_set || (r->got & ~r->maybe) == (r->want & ~r->maybe);
  if (!r->matched || !r->exercised || r->nx_reason[0]) {
    if (!r->matched && r->cannot_drive[0])
      snprintf(r->nx_reason, sizeof r->nx_reason, "%.190s", r->cannot_drive);
  } else if (r->legs_ambiguous) {
    snprintf(r->nx_reason, sizeof r->nx_reason,
             "%u of %u legs were tied to requests by arrival order alone and could as well "
             "belong to another request: the verdict cannot rest on them", r->legs_ambiguous,
             r->legs);
  }
}

pd_conform_verdict_t pd_conform_verdict(const pd_conform_result_t *r) {
  if (r->status == PD_CONFORM_SKIPPED) return PD_CONFORM_SKIP;
  if (r->status != PD_CONFORM_RAN) return PD_CONFORM_ERR;
  if (r->cannot_drive[0] && !r->sent) return PD_CONFORM_NOT_EXERCISED; /* not run at all */
  if (!r->matched) return r->cannot_drive[0] ? PD_CONFORM_NOT_EXERCISED : PD_CONFORM_UNEXPECTED;
  if ((!r->exercised && !r->declared_nx) || r->legs_ambiguous) return PD_CONFORM_NOT_EXERCISED;
  return r->got && r->limit && !(r->got & ~r->limit) ? PD_CONFORM_LIMIT : PD_CONFORM_AS_EXPECTED;
}

int pd_conform_not_exercised(const pd_conform_result_t *r) {
  return pd_conform_verdict(r) == PD_CONFORM_NOT_EXERCISED;
}

/* From the first request sent to the last client end (ms), 0 when none ended. */
static double span_ms(const pd_conform_runner_t *run) {
  uint64_t first = 0, last = 0;
  for (uint32_t i = 0; i < run->n_reqs; i++) {
    const pd_client_request_t *c = &run->reqs[i].c;
    if (!c->t_arrival) continue;
    if (!first || c->t_arrival < first) first = c->t_arrival;
    if ((c->ended || c->gone) && c->t_end > last) last = c->t_end;
  }
  return last > first ? (double)(last - first) / 1e6 : 0;
}

/* One run of scenario s with this scenario's options eo (its scale decided); r's verdict
 * fields filled. 0, or -1 out of memory. */
static int run_once(const pd_scenario_t *s, const pd_conform_opts_t *o,
                    const pd_conform_opts_t *eo, pd_conform_result_t *r) {
  pd_mode_t em = o->has_mode ? o->mode : PD_MODE_REFERENCE;
  r->scale = eo->scale;
  pd_conform_runner_t *run = calloc(1, sizeof *run);
  if (!run) return -1;
  run->s = s;
  run->o = eo;
  run->r = r;
  raise_fd_limit();
  pd_proc_subreaper(); /* orphans of the gateway command come to us and are reaped */
  uint64_t t_start = pd_conform_now_abs();
  char err[512] = "";
  int rc = setup_and_drive(run, err, sizeof err);
  /* what the gateway says it recorded, read before it is stopped (I4, quiescence) */
  char *metrics = rc ? NULL : read_metrics(run);
  run->t_gw_stop = run->t0_abs ? pd_conform_now(run) : 1;
  pd_conform_stop_gateway(run); /* first: its shutdown aborts reach the mocks' logs */
  pd_conform_stop_mocks(run);
  if (!rc) rc = pd_conform_read_logs(run, err, sizeof err);
  if (!rc) rc = pd_conform_judge(run, err, sizeof err);
  if (!rc) {
    pd_conform_exercised(run);
    r->fwd_ms = pd_conform_forward_ms(run);
    r->span_ms = span_ms(run);
    judge_row(run, s, em, metrics);
  } else {
    r->status = PD_CONFORM_ERROR;
    r->matched = 0;
    snprintf(r->reason, sizeof r->reason, "%.250s", err);
  }
  r->seconds += (double)(pd_conform_now_abs() - t_start) / 1e9;
  if (!o->keep) {
    remove_dir(run);
    r->dir[0] = 0;
  }
  free(metrics);
  for (uint32_t i = 0; i < PD_CONFORM_MAX_HEADERS; i++) free(run->hdr[i]);
  pd_conform_reqs_free(run);
  pd_conform_legs_free(run);
  free(run->ss);
  free(run);
  return 0;
}

/* A request's client was gone before any leg of it reached a worker (a disconnect sooner than
 * this gateway forwards, on a loaded machine, a cold start or a sanitizer build): the row did
 * not run the scenario as written, whatever it found (a leg sent for a client already gone
 * is an orphan the simulator never sees). The scale that would have let it, from the row's
 * own forwarding delay or the warm-up's, at least twice this one (1 when neither measured a
 * delay: no leg reached a worker); 0 when a rerun would not help. */
static double rerun_scale(const pd_scenario_t *s, const pd_conform_opts_t *o,
                          const pd_conform_result_t *r, double scale) {
  uint64_t t = pd_conform_gateway_timing_ms(s);
  if (r->status != PD_CONFORM_RAN || scale >= 1.0) return 0;
  double fwd = r->fwd_ms > o->fwd_ms ? r->fwd_ms : o->fwd_ms;
  /* A row that found only I2/I3 while its own forwarding delay was over half the margin a
     reference gateway has past its prefill tail measured the machine's load, not the
     gateway: run again where the margin holds twice that delay. */
  uint32_t timing =
      PD_CONFORM_BIT(PD_INVARIANT_ORPHAN_LEG) | PD_CONFORM_BIT(PD_INVARIANT_STRANDED_SLOT);
  uint64_t m = pd_conform_tail_margin_ms(s, o);
  if (m && r->got && !(r->got & ~timing) && PD_CONFORM_FWD_FACTOR * r->fwd_ms > (double)m * scale)
    t = m;
  else if (!r->unserved_late || !t)
    return 0;
  if (fwd <= 0) return 1.0; /* no leg reached a worker: no delay to go by */
  double want = PD_CONFORM_FWD_FACTOR * fwd / (double)t;
  if (want < 2 * scale) want = 2 * scale;
  return want > 1.0 ? 1.0 : want;
}

static int has_fault_kind(const pd_scenario_t *s, pd_fault_kind_t k) {
  for (uint32_t i = 0; i < s->n_tfaults && i < PD_SCENARIO_MAX_TRAFFIC_FAULTS; i++)
    if (s->tfaults[i].f.kind == k) return 1;
  for (uint32_t w = 0; w < s->n_workers; w++)
    for (uint32_t i = 0; i < s->workers[w].n_faults; i++)
      if (s->workers[w].faults[i].kind == k) return 1;
  return 0;
}

/* What the mocks and this machine cannot drive (r->cannot_drive), and the scale a load row
 * needs (eo->scale raised, r->scale_note). Returns 1 when the row is not run at all: even at
 * scale 1 its arrivals outrun what the warm-up sustained (then it is not exercised). */
static int cannot_drive(const pd_scenario_t *s, const pd_conform_opts_t *o, pd_conform_opts_t *eo,
                        pd_conform_result_t *r) {
  if (has_fault_kind(s, PD_FAULT_CONNECT_REFUSED))
    snprintf(r->cannot_drive, sizeof r->cannot_drive,
             "a mock cannot refuse one request's connection (it resets before any byte, "
             "docs/mock.md): a verdict other than the expectation is not the gateway's fault");
  double need = pd_conform_row_rate(s, eo->scale);
  if (need <= 0 || o->rate_per_s <= 0 || need * PD_CONFORM_RATE_FACTOR <= o->rate_per_s) return 0;
  double want = eo->scale * need * PD_CONFORM_RATE_FACTOR / o->rate_per_s;
  if (want <= 1.0) {
    size_t n = strlen(r->scale_note); /* after the forwarding note, if any */
    snprintf(r->scale_note + n, sizeof r->scale_note - n,
             "%sscale raised from %.3g to %.3g: its arrivals, %.0f requests a second at %.3g, are "
             "over 1/%g of the %.0f a second this machine sustained with this gateway at warm-up",
             n ? "; then " : "", eo->scale, want, need, eo->scale, PD_CONFORM_RATE_FACTOR,
             o->rate_per_s);
    eo->scale = want;
    return 0;
  }
  r->status = PD_CONFORM_RAN;
  r->matched = 1;
  r->scale = eo->scale;
  snprintf(r->nx_reason, sizeof r->nx_reason,
           "this machine cannot drive it at this scale: %.0f requests a second at %g, %.0f even "
           "at scale 1, and the warm-up sustained %.0f a second with this gateway", need,
           eo->scale, need * eo->scale, o->rate_per_s);
  snprintf(r->cannot_drive, sizeof r->cannot_drive, "%s", r->nx_reason);
  return 1;
}

int pd_conform_run(const pd_scenario_t *s, const pd_conform_opts_t *o, pd_conform_result_t *r) {
  memset(r, 0, sizeof *r);
  r->quiescent = -1;
  r->judged = pd_conform_judged_mask(o);
  pd_mode_t em = o->has_mode ? o->mode : PD_MODE_REFERENCE;
  r->want_set = s->expect[em].is_set;
  r->want = s->expect[em].violated_mask & r->judged;
  if (!o->has_mode && !r->want_set) r->want_set = 1; /* another gateway: held to pass */
#if PD_INVARIANT_COUNT >= 17 /* scenarios declare modes whose faults cannot all fire */
  r->declared_nx = s->unexercised[em][0] ? s->unexercised[em] : NULL;
#endif
  const char *skip = pd_conform_skip_reason(s);
  if (skip) {
    r->status = PD_CONFORM_SKIPPED;
    r->matched = 1;
    snprintf(r->reason, sizeof r->reason, "%s", skip);
    return 0;
  }
  pd_conform_opts_t eo = *o; /* this scenario's options: the scale raised to its floor */
  if (s->config.socket_min_scale > eo.scale) eo.scale = s->config.socket_min_scale;
  eo.scale = pd_conform_scale_for_speed(s, o, eo.scale, &r->timing_too_short, r->scale_note,
                                   sizeof r->scale_note);
  if (cannot_drive(s, o, &eo, r)) return 0; /* not run: this machine cannot drive it */
  pd_conform_result_t first = *r; /* the fields set so far, for a rerun */
  if (run_once(s, o, &eo, r)) return -1;
  double again = rerun_scale(s, o, r, eo.scale);
  if (again <= 0) return 0;
  double fwd = r->fwd_ms > o->fwd_ms ? r->fwd_ms : o->fwd_ms, secs = r->seconds, was = eo.scale;
  int was_late = r->unserved_late;
  char had[64] = "nothing";
  for (int i = 1, n = 0; i <= PD_INVARIANT_COUNT && r->got; i++)
    if (r->got >> (i - 1) & 1u) n += snprintf(had + n, sizeof had - (size_t)n, "%sI%d", n ? "," : "", i);
  *r = first;
  r->seconds = secs;
  eo.scale = again;
  snprintf(r->scale_note, sizeof r->scale_note,
           was_late
               ? "run again at scale %.3g: at %g a request's client had gone before any leg of "
                 "it reached a worker (the gateway forwarded in up to %.1f ms; that run found %s)"
               : "run again at scale %.3g: at %g the gateway forwarded in up to %.1f ms, over "
                 "half its margin past the prefill tail (that run found %s)",
           again, was, fwd, had);
  return run_once(s, o, &eo, r);
}
