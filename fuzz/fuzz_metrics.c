/* fuzz_metrics: what `pdref conform` makes of a gateway's /metrics. The exposition comes from
 * the gateway under test, any gateway, so it is untrusted text. Input: byte 0 = worker count
 * and crash bits, then up to 32 legs (worker, truth) as byte pairs until a 0xff byte, then
 * the exposition. Checks: pd_conform_judge_metrics returns -1, 0 or 1, and a violation comes with
 * an "I4 " reason; pd_conform_outcomes_feasible agrees with a brute-force matching on small
 * counts drawn from the same bytes; pd_conform_judge_quiescence returns -1, 0 or 1 with a bounded
 * "not quiescent" reason, and only when pd_conform_metrics_busy agrees. Traps on any violation. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_conform_int.h"
#include "pd_conform_metrics.h"
#include "fuzz_reader.h"

#define FZ_MAX_LEGS 32u

/* Which leg classes each outcome class fits (pd_conform_metrics.c: success <- ok, cancelled,
 * open; failure <- failed, stalled, open). */
static int fits(int oc, int lt) {
  return oc == 0 ? (lt == 0 || lt == 3 || lt == 4) : (lt == 1 || lt == 2 || lt == 4);
}

/* Is there a way to give every outcome its own leg it fits? Outcomes are placed one by one. */
static int brute(uint64_t rec[2], uint64_t legs[5]) {
  int oc = rec[0] ? 0 : rec[1] ? 1 : -1;
  if (oc < 0) return 1;
  rec[oc]--;
  int ok = 0;
  for (int lt = 0; lt < 5 && !ok; lt++) {
    if (!legs[lt] || !fits(oc, lt)) continue;
    legs[lt]--;
    ok = brute(rec, legs);
    legs[lt]++;
  }
  rec[oc]++;
  return ok;
}

static void check_feasible(const uint8_t *d, size_t n) {
  uint64_t rec[2] = {0}, legs[5] = {0};
  for (size_t i = 0; i < 7 && i < n; i++) {
    if (i < 2)
      rec[i] = d[i] % 4u;
    else
      legs[i - 2] = d[i] % 3u;
  }
  uint64_t r2[2] = {rec[0], rec[1]}, l2[5];
  memcpy(l2, legs, sizeof l2);
  unsigned bad = 0;
  int got = pd_conform_outcomes_feasible(rec, legs, &bad);
  FZ_CHECK(got == brute(r2, l2));
  FZ_CHECK(got || (bad && bad < 4u));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  check_feasible(data + 1, size - 1);
  pd_scenario_t *s = calloc(1, sizeof *s);
  pd_conform_runner_t *run = calloc(1, sizeof *run);
  pd_conform_logged_leg_t *legs = calloc(FZ_MAX_LEGS, sizeof *legs);
  if (!s || !run || !legs) {
    free(s);
    free(run);
    free(legs);
    return 0;
  }
  s->n_workers = 1u + data[0] % 8u;
  for (uint32_t i = 0; i < s->n_workers; i++) {
    snprintf(s->workers[i].name, sizeof s->workers[i].name, "w%u", i);
    s->workers[i].role = i % 2 ? PD_ROLE_DECODE : PD_ROLE_PREFILL;
    s->workers[i].crash_at_ms = (data[0] >> 3) & (1u << (i % 5)) ? 100 : 0;
    run->wk[i].port = (uint16_t)(1000 + i);
  }
  size_t pos = 1, nl = 0;
  while (pos + 1 < size && data[pos] != 0xff && nl < FZ_MAX_LEGS) {
    pd_conform_logged_leg_t *l = &legs[nl++];
    l->worker = data[pos] % s->n_workers;
    l->role = s->workers[l->worker].role;
    l->truth = (pd_truth_t)(data[pos + 1] % 6u);
    l->t_end = data[pos + 1] & 0x80 ? 0 : 5;
    l->resend_of = data[pos + 1] & 0x40 ? 0 : -1;
    pos += 2;
  }
  if (pos < size && data[pos] == 0xff) pos++;
  run->s = s;
  run->legs = legs;
  run->n_legs = nl;
  run->t_gw_stop = 10;
  size_t tl = size - pos;
  char *text = malloc(tl + 1);
  if (text) {
    memcpy(text, data + pos, tl);
    text[tl] = 0;
    char reason[256];
    memset(reason, 'x', sizeof reason);
    int rc = pd_conform_judge_metrics(run, text, reason, sizeof reason);
    FZ_CHECK(rc == -1 || rc == 0 || rc == 1);
    if (rc == 1) FZ_CHECK(memchr(reason, 0, sizeof reason) && !strncmp(reason, "I4 ", 3));
    /* quiescence: -1/0/1, a bounded reason on 1, and "held" only when something is */
    char quiet[192];
    memset(quiet, 'x', sizeof quiet);
    int q = pd_conform_judge_quiescence(run, text, quiet, sizeof quiet);
    FZ_CHECK(q == -1 || q == 0 || q == 1);
    if (q == 1) FZ_CHECK(memchr(quiet, 0, sizeof quiet) && !strncmp(quiet, "not quiescent", 13));
    if (q == 1) FZ_CHECK(pd_conform_metrics_busy(text));
    free(text);
  }
  free(legs);
  free(run);
  free(s);
  return 0;
}
