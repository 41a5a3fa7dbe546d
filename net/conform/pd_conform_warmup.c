/* How fast the gateway forwards, and what a scenario's timing needs of it (docs/conformance.md
 * "The gateway's own speed"). The warm-up is a run of its own before the library: the gateway
 * command behind one healthy prefill and one healthy decode mock, WARM_REQUESTS streams one
 * after another at scale 1; the forwarding latency is the largest delay between a request
 * being sent and its first leg reaching a mock (in practice the first, cold request's: every
 * row starts its gateway afresh, so its first request is cold too). It runs in its own
 * processes, so no draw of the gateway's PRNG, no round-robin turn and no worker's request
 * count of a judged run is spent on it, and no line of it is in a judged log. A scenario whose shortest gateway-facing time
 * (the client's disconnect_at_ms, a timeout the scenario sets) is, scaled, under
 * PD_CONFORM_FWD_FACTOR x that latency runs at a scale raised until it is not, at most to 1;
 * whether the row then tested anything is its own evidence (pd_conform_exercised.c: a
 * request whose client was gone before any leg reached a worker is not served). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pd_conform_int.h"

#define WARM_REQUESTS 3u
#define WARM_INTERVAL_MS 30u
#define WARM_RATE_REQUESTS 200u /* the rate warm-up's burst, all sent at once */

/* The largest delay from sending a request to its first leg at a mock, in ms, over the
 * requests that had a leg; -1 when none had. */
double pd_conform_forward_ms(const pd_conform_runner_t *run) {
  uint64_t *first = calloc(run->n_reqs + 1, sizeof *first);
  double worst = -1;
  if (!first) return -1;
  for (size_t k = 0; k < run->n_legs; k++) {
    const pd_conform_logged_leg_t *l = &run->legs[k];
    if (l->client < 0 || (uint32_t)l->client >= run->n_reqs) continue;
    uint64_t *f = &first[l->client];
    if (!*f || l->t_arrive < *f) *f = l->t_arrive;
  }
  for (uint32_t i = 0; i < run->n_reqs; i++) {
    const pd_conform_req_t *q = &run->reqs[i];
    if (!first[i] || !q->c.t_arrival) continue;
    double ms = first[i] > q->c.t_arrival ? (double)(first[i] - q->c.t_arrival) / 1e6 : 0;
    if (ms > worst) worst = ms;
  }
  free(first);
  return worst;
}

/* The warm-up scenario, written to a file the mocks can read (--scenario) and loaded back:
 * SGLang workers on /generate, or vLLM workers on /v1/completions (vLLM's proxies serve only
 * the OpenAI routes). */
static int load_warm_up(const pd_conform_opts_t *o, pd_protocol_t proto, uint32_t requests,
                        uint32_t interval_ms, pd_scenario_t *s, char *why, size_t cap) {
  const char *root = o->tmp_root ? o->tmp_root : getenv("TMPDIR");
  char dir[PD_CONFORM_DIR_MAX], path[PD_CONFORM_PATH_MAX];
  snprintf(dir, sizeof dir, "%s/pdref-warm-up-XXXXXX", root && root[0] ? root : "/tmp");
  FILE *f = NULL;
  if (mkdtemp(dir)) {
    snprintf(path, sizeof path, "%s/warm-up.json", dir);
    f = fopen(path, "w");
  }
  if (!f) {
    snprintf(why, cap, "cannot write the warm-up scenario under %s", root ? root : "/tmp");
    return -1;
  }
  int v = proto == PD_PROTOCOL_VLLM;
  const char *w = v ? ", \"protocol\": \"vllm\"" : "";
  fprintf(f, "{\"name\": \"conform-warm-up\", \"workers\": [{\"name\": \"p0\", \"role\": "
             "\"prefill\"%s}, {\"name\": \"d0\", \"role\": \"decode\"%s}], \"workload\": "
             "{\"requests\": %u, \"interval_ms\": %u, \"tokens\": 2, \"stream\": true%s}, "
             "\"expect\": {\"reference\": \"pass\"}}\n", w, w, requests, interval_ms,
             v ? ", \"route\": \"/v1/completions\"" : "");
  fclose(f);
  char err[512];
  int rc = pd_scenario_load(s, path, err, sizeof err);
  if (rc) {
    snprintf(why, cap, "%.200s", err);
    unlink(path);
    rmdir(dir);
  }
  return rc ? -1 : 0;
}

/* Run the warm-up scenario of requests x interval_ms at scale 1 into r. 0; 1 when it did not
 * run (why); -1 out of memory. */
static int warm_run(const pd_conform_opts_t *o, pd_protocol_t proto, uint32_t requests,
                    uint32_t interval_ms, pd_conform_result_t *r, char *why, size_t cap) {
  pd_scenario_t *s = malloc(sizeof *s);
  if (!s) return -1;
  if (load_warm_up(o, proto, requests, interval_ms, s, why, cap)) {
    free(s);
    return 1;
  }
  pd_conform_opts_t eo = *o;
  eo.scale = 1.0;
  eo.fwd_ms = 0;
  eo.rate_per_s = 0;
  eo.keep = 0;
  int rc = pd_conform_run(s, &eo, r);
  if (!rc && r->status != PD_CONFORM_RAN) {
    snprintf(why, cap, "%s", r->reason);
    rc = 1;
  }
  unlink(s->path);
  char *slash = strrchr(s->path, '/');
  if (slash) *slash = 0;
  rmdir(s->path);
  free(s);
  return rc;
}

int pd_conform_warm_up_rate(const pd_conform_opts_t *o, pd_protocol_t proto, double *rate,
                            char *why, size_t cap) {
  *rate = 0;
  pd_conform_result_t *r = malloc(sizeof *r);
  if (!r) return -1;
  int rc = warm_run(o, proto, WARM_RATE_REQUESTS, 0, r, why, cap);
  if (!rc && (r->served < r->sent || r->span_ms <= 0 || r->clean < r->sent)) {
    snprintf(why, cap, "%u of %u requests of the rate warm-up were not answered cleanly",
             r->sent - (r->clean < r->sent ? r->clean : r->sent), r->sent);
    rc = 1;
  } else if (!rc) {
    *rate = (double)r->sent * 1000.0 / r->span_ms;
  }
  free(r);
  return rc;
}

double pd_conform_row_rate(const pd_scenario_t *s, double scale) {
  const pd_scenario_workload_t *w = &s->workload;
  if (w->requests < PD_CONFORM_RATE_MIN_REQUESTS || w->n_bursts || !w->interval_ms || scale <= 0)
    return 0;
  return 1000.0 / ((double)w->interval_ms * scale);
}

int pd_conform_warm_up(const pd_conform_opts_t *o, pd_protocol_t proto, double *fwd_ms, char *why,
                       size_t cap) {
  *fwd_ms = 0;
  pd_conform_result_t *r = malloc(sizeof *r);
  if (!r) return -1;
  int rc = warm_run(o, proto, WARM_REQUESTS, WARM_INTERVAL_MS, r, why, cap);
  if (!rc && (r->served < r->sent || r->fwd_ms < 0)) {
    snprintf(why, cap, "%u of %u warm-up requests reached no worker", r->sent - r->served, r->sent);
    rc = 1;
  } else if (!rc) {
    *fwd_ms = r->fwd_ms;
  }
  free(r);
  return rc;
}

uint64_t pd_conform_gateway_timing_ms(const pd_scenario_t *s) {
  const pd_scenario_config_t *c = &s->config;
  uint64_t t = 0;
  const uint64_t each[] = {s->workload.disconnect_prob > 0 ? s->workload.disconnect_at_ms : 0,
                           c->head_timeout_ms,   c->first_token_timeout_ms, c->idle_timeout_ms,
                           c->total_timeout_ms,  c->request_timeout_ms,     c->tail_timeout_ms};
  for (size_t i = 0; i < sizeof each / sizeof each[0]; i++)
    if (each[i] && (!t || each[i] < t)) t = each[i];
  return t;
}

/* The judge's own margin: a reference gateway supervises prefill for its tail after the
 * client's end (R-TAIL), and I2/I3 allow the grace; what is left between the two is all the
 * time the gateway has to act on its tail deadline. With the defaults that is 1000 - 500 ms,
 * 50 ms at scale 0.1: less than a busy machine's loop can be late. 0 when not applicable. */
uint64_t pd_conform_tail_margin_ms(const pd_scenario_t *s, const pd_conform_opts_t *o) {
  if (!o->has_mode || o->mode != PD_MODE_REFERENCE) return 0;
  pd_gw_config_t c;
  pd_scenario_gw_config(s, o->mode, &c);
  uint64_t tail = c.prefill_tail_timeout_ns / PD_CONFORM_MS;
  return tail && s->config.grace_ms > tail ? s->config.grace_ms - tail : 0;
}

double pd_conform_scale_for_speed(const pd_scenario_t *s, const pd_conform_opts_t *o, double scale,
                             int *too_short, char *note, size_t cap) {
  *too_short = 0;
  uint64_t t = pd_conform_gateway_timing_ms(s), m = pd_conform_tail_margin_ms(s, o);
  if (m && (!t || m < t)) t = m;
  double need = o->fwd_ms * PD_CONFORM_FWD_FACTOR;
  if (!t || o->fwd_ms <= 0 || (double)t * scale >= need) return scale;
  double want = need / (double)t;
  if (want > 1.0) {
    *too_short = 1;
    snprintf(note, cap,
             "ran at scale %g: the scenario's %llu ms (disconnect, timeout or grace past the tail) is under %gx this "
             "gateway's forwarding latency (%.1f ms) even at scale 1", scale > 1.0 ? scale : 1.0,
             (unsigned long long)t, PD_CONFORM_FWD_FACTOR, o->fwd_ms);
    return scale > 1.0 ? scale : 1.0;
  }
  snprintf(note, cap, "scale raised from %g to %.3g: the scenario's %llu ms (disconnect, timeout or grace past the tail) becomes %.2f ms, "
           "under %gx the gateway's forwarding latency (%.2f ms)", scale, want,
           (unsigned long long)t, (double)t * scale, PD_CONFORM_FWD_FACTOR, o->fwd_ms);
  return want;
}
