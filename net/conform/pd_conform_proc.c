/* The runner's processes: `pdref mock` children (one per scenario worker, ready line read
 * from their stdout file), the gateway command (/bin/sh -c, its own process group), free
 * loopback ports, and stopping them (net/proc/pd_proc.c: SIGTERM, a bounded wait, SIGKILL,
 * reap). Every wait is bounded; nothing is left running or unreaped. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pd_conform_int.h"

#define MAX_ARGS 24

uint64_t pd_conform_now_abs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t pd_conform_now(const pd_conform_runner_t *run) {
  uint64_t a = pd_conform_now_abs();
  return a > run->t0_abs ? a - run->t0_abs : 1;
}

void pd_conform_sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int pd_conform_stopping(const pd_conform_runner_t *run) { return run->o->stop && *run->o->stop; }

int pd_conform_free_port(uint16_t *port) { return pd_proc_free_port(port); }

static int tcp_accepts(uint16_t port) { return pd_proc_port_accepts(port); }

static void note_pid(pd_conform_runner_t *run, pid_t pid) {
  if (run->r->n_pids < PD_CONFORM_MAX_PIDS) run->r->pids[run->r->n_pids++] = pid;
}

void pd_conform_tail(const char *path, char *out, size_t cap) {
  out[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  char buf[400];
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0, SEEK_SET);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
  for (size_t i = 0; i < n; i++)
    if (buf[i] == '\n' || buf[i] == '\r') buf[i] = ' ';
  snprintf(out, cap, "%s", buf);
}

/* The ready line, once the file holds a complete JSON line starting with {"ready". */
static int read_ready(pd_conform_worker_t *k) {
  FILE *f = fopen(k->out, "r");
  if (!f) return 0;
  char line[1024];
  int ok = 0;
  for (int i = 0; i < 64 && !ok && fgets(line, sizeof line, f); i++) {
    if (strncmp(line, "{\"ready\"", 8) != 0 || !strchr(line, '\n')) continue;
    cJSON *j = cJSON_Parse(line);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "port");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "bootstrap_port");
    if (cJSON_IsNumber(p) && p->valuedouble > 0 && p->valuedouble < 65536) {
      k->port = (uint16_t)p->valuedouble;
      k->boot_port = cJSON_IsNumber(b) && b->valuedouble > 0 && b->valuedouble < 65536
                         ? (uint16_t)b->valuedouble
                         : 0;
      ok = 1;
    }
    cJSON_Delete(j);
  }
  fclose(f);
  return ok;
}

int pd_conform_start_mocks(pd_conform_runner_t *run, char *err, size_t cap) {
  const pd_scenario_t *s = run->s;
  char speed[32];
  snprintf(speed, sizeof speed, "%.6g", run->o->scale);
  char ledger[PD_CONFORM_PATH_MAX + 16]; /* traffic faults: one fault ledger per row, fresh */
  snprintf(ledger, sizeof ledger, "%s/faults.ledger", run->dir);
  unlink(ledger);
  for (uint32_t i = 0; i < s->n_workers; i++) {
    pd_conform_worker_t *k = &run->wk[i];
    const pd_scenario_worker_t *sw = &s->workers[i];
    char errp[PD_CONFORM_PATH_MAX + 8];
    snprintf(k->log, sizeof k->log, "%s/w%u.jsonl", run->dir, i);
    snprintf(k->out, sizeof k->out, "%s/w%u.out", run->dir, i);
    snprintf(errp, sizeof errp, "%s/w%u.err", run->dir, i);
    char *argv[MAX_ARGS];
    int n = 0;
    argv[n++] = (char *)run->o->pdref_bin;
    argv[n++] = "mock";
    argv[n++] = "--scenario";
    argv[n++] = (char *)s->path;
    argv[n++] = "--worker";
    argv[n++] = (char *)sw->name;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    if (sw->role == PD_ROLE_PREFILL) { /* SGLang's bootstrap server or vLLM's KV side channel */
      argv[n++] = "--bootstrap-port";
      argv[n++] = "0";
    }
    if (sw->protocol == PD_PROTOCOL_VLLM) { /* the kv_* settings come with --scenario/--worker */
      argv[n++] = "--protocol";
      argv[n++] = "vllm";
    }
    argv[n++] = "--log";
    argv[n++] = k->log;
    argv[n++] = "--json";
    argv[n++] = "--speed";
    argv[n++] = speed;
    if (sw->crash_at_ms) argv[n++] = "--clock-on-start"; /* crash at workload time, not start-up */
    if (s->n_tfaults) {
      argv[n++] = "--fault-ledger";
      argv[n++] = ledger;
    }
    argv[n] = NULL;
    pd_proc_opts_t po = {.out_path = k->out, .err_path = errp, .is_group = 1};
    if (pd_proc_spawn(&k->proc, argv[0], argv, &po) != 0) {
      snprintf(err, cap, "cannot start the mock for worker %s: %s", sw->name, strerror(errno));
      return -1;
    }
    note_pid(run, k->proc.pid);
    run->n_wk = i + 1;
  }
  uint64_t end = pd_conform_now_abs() + run->o->start_ms * PD_CONFORM_MS;
  for (uint32_t guard = 0; guard < 1000000; guard++) { /* bounded by `end` */
    uint32_t ready = 0;
    for (uint32_t i = 0; i < run->n_wk; i++) {
      pd_conform_worker_t *k = &run->wk[i];
      if (k->port || read_ready(k)) {
        ready++;
        continue;
      }
      if (pd_proc_is_gone(&k->proc)) {
        char t[320], errp[PD_CONFORM_PATH_MAX + 8];
        snprintf(errp, sizeof errp, "%s/w%u.err", run->dir, i);
        pd_conform_tail(errp, t, sizeof t);
        snprintf(err, cap, "mock %s exited before its ready line: %s", s->workers[i].name, t);
        return -1;
      }
    }
    if (ready == run->n_wk) return 0;
    if (pd_conform_now_abs() > end || pd_conform_stopping(run)) break;
    pd_conform_sleep_ms(5);
  }
  snprintf(err, cap, "mocks not ready within %u ms", run->o->start_ms);
  return -1;
}

int pd_conform_start_gateway(pd_conform_runner_t *run, const char *cmd, char *err, size_t cap) {
  snprintf(run->gw_out, sizeof run->gw_out, "%s/gateway.out", run->dir);
  char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
  pd_proc_opts_t po = {.out_path = run->gw_out, .is_err_to_out = 1, .is_group = 1};
  if (pd_proc_spawn(&run->gw, argv[0], argv, &po) != 0) {
    snprintf(err, cap, "cannot start the gateway command: %s", strerror(errno));
    return -1;
  }
  note_pid(run, run->gw.pid);
  uint64_t end = pd_conform_now_abs() + run->o->start_ms * PD_CONFORM_MS;
  for (uint32_t guard = 0; guard < 1000000; guard++) { /* bounded by `end` */
    if (tcp_accepts(run->gw_port)) return 0;
    if (pd_proc_is_gone(&run->gw)) {
      char t[320];
      pd_conform_tail(run->gw_out, t, sizeof t);
      snprintf(err, cap, "the gateway command exited (status %d) before listening on port %u: %s",
               WIFEXITED(run->gw.status) ? WEXITSTATUS(run->gw.status) : -1, run->gw_port, t);
      return -1;
    }
    if (pd_conform_now_abs() > end || pd_conform_stopping(run)) break;
    pd_conform_sleep_ms(5);
  }
  char t[320];
  pd_conform_tail(run->gw_out, t, sizeof t);
  snprintf(err, cap, "the gateway did not accept on 127.0.0.1:%u within %u ms%s%s", run->gw_port,
           run->o->start_ms, t[0] ? ": " : "", t);
  return -1;
}

/* The runner is a child subreaper (pd_conform.c), so the orphans a stopped group leaves
 * are its own children and pd_proc_stop_all reaps them. */
void pd_conform_stop_gateway(pd_conform_runner_t *run) { pd_proc_stop(&run->gw, run->o->stop_ms); }

void pd_conform_stop_mocks(pd_conform_runner_t *run) {
  pd_proc_t *ps[PD_SCENARIO_MAX_WORKERS];
  for (uint32_t i = 0; i < run->n_wk; i++) ps[i] = &run->wk[i].proc;
  pd_proc_stop_all(ps, run->n_wk, run->o->stop_ms);
}
