/* I4 on sockets, from what the gateway says it recorded: its Prometheus exposition
 * (`pdref_worker_outcomes_total{role,worker,outcome}`, net/gateway/pd_gateway_metrics.c) read once
 * the run has settled, against the truth of every leg in the mocks' logs.
 *
 * Outcomes are counted per worker, not per leg, so the judgement is a feasibility test: is
 * there any way to give each recorded outcome its own leg of that worker that agrees with it
 * (the simulator's outcome_agrees: success <- ok or cancelled-while-healthy; failure or
 * timeout <- failed, never served, stalled or pending)? If not, some leg was recorded
 * against its truth: I4, certainly. If so, the counts cannot tell (with one leg per worker,
 * the usual library scenario, the test is exact). "cancelled" claims nothing about a worker
 * (it agrees with every truth, and is recorded for legs closed before they reached it), so
 * it is not counted. The constraint set is Hall's condition for this small bipartite graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_conform_int.h"
#include "pd_conform_metrics.h"

char *pd_conform_scrape_metrics(uint16_t port, unsigned timeout_ms) {
  long code = 0;
  char *body = pd_conform_http(port, "/metrics", NULL, timeout_ms, &code);
  if (code == 200) return body;
  free(body);
  return NULL;
}

enum { OC_SUCCESS = 0, OC_FAILURE = 1, OC_N = 2 };
/* LT_OPEN: a leg still open when the gateway was stopped. The run's end cut it, not the
 * worker or the gateway, so its truth is not known (the simulator, which runs on, would see
 * it end one way or the other): it may bear any outcome. */
enum { LT_OK = 0, LT_FAIL = 1, LT_STALL = 2, LT_CANC = 3, LT_OPEN = 4, LT_N = 5 };

/* The value of label `key` in a {...} label set, unescaped enough for URLs. */
static int label(const char *set, const char *end, const char *key, char *out, size_t cap) {
  size_t kl = strlen(key);
  for (const char *p = set; p && p < end; p = strchr(p, ',')) {
    if (*p == ',') p++;
    if (!strncmp(p, key, kl) && p[kl] == '=' && p[kl + 1] == '"') {
      const char *v = p + kl + 2, *q = strchr(v, '"');
      if (!q || q > end || (size_t)(q - v) >= cap) return -1;
      memcpy(out, v, (size_t)(q - v));
      out[q - v] = 0;
      return 0;
    }
  }
  return -1;
}

/* The scenario worker a metrics `worker` label names (its URL ends in the mock's port). */
static int worker_of(const pd_conform_runner_t *run, const char *role, const char *url) {
  const char *colon = strrchr(url, ':');
  if (!colon) return -1;
  unsigned long port = strtoul(colon + 1, NULL, 10);
  pd_role_t want = !strcmp(role, "prefill") ? PD_ROLE_PREFILL : PD_ROLE_DECODE;
  for (uint32_t i = 0; i < run->s->n_workers; i++)
    if (run->wk[i].port == port && run->s->workers[i].role == want) return (int)i;
  return -1;
}

static int outcome_class(const char *o) {
  if (!strcmp(o, "success")) return OC_SUCCESS;
  if (!strcmp(o, "failure") || !strcmp(o, "timeout")) return OC_FAILURE;
  return -1; /* cancelled: neutral */
}

static int truth_class(pd_truth_t t) {
  switch (t) {
  case PD_TRUTH_OK: return LT_OK;
  case PD_TRUTH_FAILED:
  case PD_TRUTH_NEVER: return LT_FAIL;
  case PD_TRUTH_STALLED:
  case PD_TRUTH_PENDING: return LT_STALL;
  case PD_TRUTH_CANCELLED: return LT_CANC;
  }
  return LT_STALL;
}

/* Which leg classes each outcome class may be given to (bit per LT_*). */
static const unsigned fits[OC_N] = {
    [OC_SUCCESS] = 1u << LT_OK | 1u << LT_CANC | 1u << LT_OPEN,
    [OC_FAILURE] = 1u << LT_FAIL | 1u << LT_STALL | 1u << LT_OPEN,
};

int pd_conform_outcomes_feasible(const uint64_t rec[2], const uint64_t legs[5], unsigned *bad_set) {
  for (unsigned set = 1; set < (1u << OC_N); set++) { /* Hall: every subset of outcomes */
    uint64_t need = 0;
    unsigned nb = 0;
    for (int o = 0; o < OC_N; o++)
      if (set & (1u << o)) {
        need += rec[o];
        nb |= fits[o];
      }
    uint64_t have = 0;
    for (int l = 0; l < LT_N; l++)
      if (nb & (1u << l)) have += legs[l];
    if (need > have) {
      if (bad_set) *bad_set = set;
      return 0;
    }
  }
  return 1;
}

int pd_conform_judge_metrics(const pd_conform_runner_t *run, const char *text, char *reason,
                             size_t cap) {
  static const char fam[] = "pdref_worker_outcomes_total{";
  uint64_t rec[PD_SCENARIO_MAX_WORKERS][OC_N];
  uint64_t legs[PD_SCENARIO_MAX_WORKERS][LT_N];
  memset(rec, 0, sizeof rec);
  memset(legs, 0, sizeof legs);
  int seen = 0;
  for (const char *line = text; line && *line;) {
    const char *eol = strchr(line, '\n');
    const char *end = eol ? eol : line + strlen(line);
    if (!strncmp(line, fam, sizeof fam - 1)) {
      const char *set = line + sizeof fam - 1, *close = memchr(set, '}', (size_t)(end - set));
      char role[16], url[256], oc[16];
      if (close && !label(set, close, "role", role, sizeof role) &&
          !label(set, close, "worker", url, sizeof url) &&
          !label(set, close, "outcome", oc, sizeof oc)) {
        int w = worker_of(run, role, url), c = outcome_class(oc);
        unsigned long long n = strtoull(close + 1, NULL, 10);
        if (w >= 0 && c >= 0) {
          rec[w][c] += n;
          seen = 1;
        }
      }
    }
    line = eol ? eol + 1 : NULL;
  }
  if (!seen) return -1; /* not exposed: I4 is not judged */
  uint64_t n_open = 0;
  for (size_t i = 0; i < run->n_legs; i++) {
    const pd_conform_logged_leg_t *l = &run->legs[i];
    if (l->resend_of >= 0 || l->worker >= PD_SCENARIO_MAX_WORKERS) continue; /* one gateway leg */
    uint64_t closed = l->t_peer_closed && (!l->t_end || l->t_peer_closed < l->t_end)
                          ? l->t_peer_closed : l->t_end;
    int is_cut = (l->truth == PD_TRUTH_PENDING || l->truth == PD_TRUTH_STALLED) &&
                 (!closed || closed >= run->t_gw_stop);
    /* a cut path (net_cut): the gateway saw a reset or silence, which it may record as a
       failure or timeout whatever the worker did; one that finished or was cancelled may
       also be recorded as it ended (the simulator's I4, sim/pd_check.c outcome_agrees), and
       one still running at the end may yet finish */
    int is_either = l->is_path_cut && (l->truth == PD_TRUTH_OK || l->truth == PD_TRUTH_CANCELLED ||
                                       l->truth == PD_TRUTH_PENDING);
    legs[l->worker][is_cut || is_either ? LT_OPEN : truth_class(l->truth)]++;
    n_open += (uint64_t)is_cut;
  }
  /* A crashed worker refuses connections without a log line: failures may be recorded for
   * legs the logs never saw, so only its successes are bounded. */
  for (uint32_t w = 0; w < run->s->n_workers && w < PD_SCENARIO_MAX_WORKERS; w++)
    if (run->s->workers[w].crash_at_ms) legs[w][LT_FAIL] += rec[w][OC_FAILURE];
  /* A leg the run's end cut: its outcome may be recorded after the run, as the simulator
   * (which runs on) would see; the counts so far prove nothing either way. */
  if (n_open) return -1;
  static const char *const oname[OC_N] = {"success", "failure/timeout"};
  for (uint32_t w = 0; w < run->s->n_workers; w++) {
    unsigned bad = 0;
    if (pd_conform_outcomes_feasible(rec[w], legs[w], &bad)) continue;
    char what[64] = "";
    for (int o = 0; o < OC_N; o++)
      if (bad & (1u << o))
        snprintf(what + strlen(what), sizeof what - strlen(what), "%s%llu %s",
                 what[0] ? " + " : "", (unsigned long long)rec[w][o], oname[o]);
    snprintf(reason, cap,
             "I4 %s: /metrics records %s, more than its legs can bear (mock truth: %llu ok, "
             "%llu failed, %llu stalled, %llu cancelled, %llu open at the end)",
             run->s->workers[w].name, what, (unsigned long long)legs[w][LT_OK],
             (unsigned long long)legs[w][LT_FAIL], (unsigned long long)legs[w][LT_STALL],
             (unsigned long long)legs[w][LT_CANC], (unsigned long long)legs[w][LT_OPEN]);
    return 1;
  }
  return 0;
}

/* ---------- quiescence (the liveness phase, I17) ---------- */

/* Sum of a gauge family's values, per scenario worker when labelled by worker (loads[w]), or
 * whole (*total, unlabelled); 1 when the family has a line for the run (or run is NULL). */
static int gauge(const pd_conform_runner_t *run, const char *text, const char *fam, uint64_t *loads,
                 uint64_t *total) {
  size_t fl = strlen(fam);
  int seen = 0;
  for (const char *line = text; line && *line;) {
    const char *eol = strchr(line, '\n');
    const char *end = eol ? eol : line + strlen(line);
    if (!strncmp(line, fam, fl) && (line[fl] == '{' || line[fl] == ' ')) {
      const char *close = line[fl] == '{' ? memchr(line, '}', (size_t)(end - line)) : line + fl;
      char role[16], url[256];
      double v = close ? strtod(close + 1, NULL) : 0;
      uint64_t n = !(v > 0) ? 0 : v > 1e15 ? (uint64_t)1e15 : (uint64_t)(v + 0.5);
      if (close && line[fl] == ' ') {
        *total += n;
        seen = 1;
      } else if (close && !label(line + fl + 1, close, "role", role, sizeof role) &&
                 !label(line + fl + 1, close, "worker", url, sizeof url)) {
        int w = run ? worker_of(run, role, url) : 0;
        if (w >= 0 && loads) loads[w] += n;
        if (w >= 0) *total += n;
        seen |= w >= 0;
      }
    }
    line = eol ? eol + 1 : NULL;
  }
  return seen;
}

int pd_conform_metrics_busy(const char *text) {
  uint64_t load = 0, live = 0;
  gauge(NULL, text, "pdref_worker_load", NULL, &load);
  gauge(NULL, text, "pdref_requests_in_flight", NULL, &live);
  return load || live;
}

int pd_conform_judge_quiescence(const pd_conform_runner_t *run, const char *text, char *reason,
                                size_t cap) {
  uint64_t loads[PD_SCENARIO_MAX_WORKERS] = {0}, load = 0, live = 0;
  if (!gauge(run, text, "pdref_worker_load", loads, &load)) return -1; /* not exposed */
  gauge(run, text, "pdref_requests_in_flight", NULL, &live);
  if (!load && !live) return 0;
  int n = snprintf(reason, cap, "not quiescent after the run: %llu request(s) in flight",
                   (unsigned long long)live);
  for (uint32_t w = 0; w < run->s->n_workers && w < PD_SCENARIO_MAX_WORKERS && n > 0 &&
                       (size_t)n < cap; w++)
    if (loads[w])
      n += snprintf(reason + n, cap - (size_t)n, ", %s load %llu", run->s->workers[w].name,
                    (unsigned long long)loads[w]);
  return 1;
}
