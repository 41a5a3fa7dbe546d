/* abort_after_commit_ignored and R-ABORT-COMMITTED (ai-dynamo/dynamo PR #14507, TRT-LLM): an
 * SGLang prefill past its commit (forward pass over, KV moving to its decode) ignores a close
 * and /abort_request; with its receiver gone it holds slot and KV to kv_abort_timeout_ms after
 * the commit. Each test runs the scenario of scenarios/abort-after-commit-ignored.json and
 * reads the legs as the workers left them (ground truth) and the checker's verdict. */
#include <stdlib.h>
#include <string.h>

#include "pd_world.h"
#include "pdt.h"
#include "pdt_scenario.h"

#define MS_NS 1000000ull
#define MAX_SEEN 8
#define BIT(i) (1u << ((i) - 1))

typedef struct {
  pd_worker_leg_t leg[MAX_SEEN];
  int n;
} seen_t;

static void on_leg(void *ud, const pd_worker_leg_t *leg, const char *worker) {
  (void)worker;
  seen_t *s = ud;
  if (s->n >= MAX_SEEN) return;
  s->leg[s->n] = *leg;
  s->leg[s->n].next_in_req = NULL;
  s->leg[s->n].rooms = NULL;
  s->n++;
}

static const pd_worker_leg_t *leg_of(const seen_t *s, pd_role_t role) {
  for (int i = 0; i < s->n; i++)
    if (s->leg[i].role == role) return &s->leg[i];
  return NULL;
}

/* p0's forward pass ends at ~100 ms, the KV reaches d0 at ~500 ms; the client leaves at 300. */
#define DOC(IGNORED)                                                                        \
  "{'name':'n','workers':[{'name':'p0','role':'prefill','forward_ms':100,'kv_ms':400,"      \
  "'abort_after_commit_ignored':" IGNORED ",'kv_abort_timeout_ms':20000},"                  \
  "{'name':'d0','role':'decode','token_ms':50}],"                                           \
  "'workload':{'requests':1,'stream':true,'tokens':8,'disconnect_at_ms':300},'expect':{}}"

static uint32_t run(const char *src, pd_mode_t mode, seen_t *seen) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[PDT_SCENARIO_ERR_BYTES];
  uint32_t v = 0;
  memset(seen, 0, sizeof *seen);
  if (s && parse_q(s, src, err) == 0) {
    pd_world_opts_t o = {0};
    pd_world_stats_t st;
    PDT_EQ_INT(pd_world_run_legs(s, mode, s->config.seed, &o, on_leg, seen, &st, &v, NULL), 0);
  } else {
    PDT_TRUE(0);
  }
  free(s);
  return v;
}

/* joined cancels both legs when the client leaves: d0's receiver goes, p0 ignores its own
 * abort and holds its slot and KV until 20 s after the commit: I3 and I18. */
static void test_cancel_at_once_strands_the_sender(void) {
  seen_t seen;
  uint32_t v = run(DOC("true"), PD_MODE_JOINED, &seen);
  const pd_worker_leg_t *p = leg_of(&seen, PD_ROLE_PREFILL), *d = leg_of(&seen, PD_ROLE_DECODE);
  PDT_TRUE(p && d);
  if (!p || !d) return;
  PDT_TRUE(d->t_gw_closed < 400 * MS_NS);        /* the receiver was cut at once */
  PDT_TRUE(p->t_slot_freed > 20000 * MS_NS);     /* commit (~100 ms) + 20 s */
  PDT_TRUE(p->t_slot_freed < 20200 * MS_NS);
  PDT_TRUE(p->t_kv_freed > 20000 * MS_NS);
  PDT_EQ_U64(v, BIT(PD_INVARIANT_STRANDED_SLOT) | BIT(PD_INVARIANT_STRANDED_KV));
}

/* The same gateway on an engine whose abort works after commit: nothing is stranded, so the
 * key (not the timing) is what strands the sender above. */
static void test_an_engine_that_honours_aborts_frees_at_once(void) {
  seen_t seen;
  uint32_t v = run(DOC("false"), PD_MODE_JOINED, &seen);
  const pd_worker_leg_t *p = leg_of(&seen, PD_ROLE_PREFILL);
  PDT_TRUE(p != NULL);
  if (p) PDT_TRUE(p->t_slot_freed < 400 * MS_NS);
  PDT_EQ_U64(v, 0);
}

/* R-ABORT-COMMITTED: the reference keeps d0's leg open until the KV reached it, so p0 frees
 * at the transfer's end (~500 ms), and closes d0 after that; nothing flagged. */
static void test_reference_lets_decode_collect(void) {
  seen_t seen;
  uint32_t v = run(DOC("true"), PD_MODE_REFERENCE, &seen);
  const pd_worker_leg_t *p = leg_of(&seen, PD_ROLE_PREFILL), *d = leg_of(&seen, PD_ROLE_DECODE);
  PDT_TRUE(p && d);
  if (!p || !d) return;
  PDT_TRUE(p->t_kv_freed > 300 * MS_NS && p->t_kv_freed < 700 * MS_NS);
  PDT_TRUE(p->t_slot_freed < 1000 * MS_NS);
  PDT_TRUE(d->t_gw_closed >= p->t_kv_freed); /* the receiver outlived the transfer */
  PDT_TRUE(d->t_gw_closed < 1000 * MS_NS);   /* and no longer than the tail bound */
  PDT_EQ_U64(v, 0);
}

/* Without the key the reference cancels at once as before (R-DISCONNECT). */
static void test_reference_cancels_at_once_without_the_key(void) {
  seen_t seen;
  uint32_t v = run(DOC("false"), PD_MODE_REFERENCE, &seen);
  const pd_worker_leg_t *d = leg_of(&seen, PD_ROLE_DECODE);
  PDT_TRUE(d != NULL);
  if (d) PDT_TRUE(d->t_gw_closed < 310 * MS_NS);
  PDT_EQ_U64(v, 0);
}

/* The source-first half (scenarios/sf-abort-after-commit-ignored-queued-decode.json): p0
 * answered and pinned its blocks; request 2's decode waits in d0's queue, not reading, when
 * its client leaves. vLLM's toy proxy and llm-d close it and its empty read (V1.17) reaches
 * p0: ignored after the commit, the blocks stay pinned to the abort timeout (I18); honoured,
 * they free at once and nothing is flagged. */
#define SF_DOC(IGNORED)                                                                       \
  "{'name':'n','workers':[{'name':'p0','role':'prefill','protocol':'vllm',"                   \
  "'abort_after_commit_ignored':" IGNORED ",'kv_abort_timeout_ms':20000},"                    \
  "{'name':'d0','role':'decode','protocol':'vllm','max_running_requests':1,'token_ms':100}]," \
  "'workload':{'requests':2,'stream':true,'tokens':8,'route':'/v1/completions',"              \
  "'disconnect_at_ms':300,'disconnect_prob':0.5},'expect':{}}"

static void test_source_first_empty_read_ignored_after_commit(void) {
  static const pd_mode_t modes[] = {PD_MODE_VLLM_TOY_PROXY, PD_MODE_LLMD_SIDECAR};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    seen_t seen;
    PDT_EQ_U64(run(SF_DOC("true"), modes[i], &seen), BIT(PD_INVARIANT_STRANDED_KV));
    PDT_EQ_U64(run(SF_DOC("false"), modes[i], &seen), 0);
  }
}

int pdt_suite_abort_commit(void) {
  static const pdt_case_t cases[] = {
      {"abort ignored after commit: cancelling at once strands the sender (I3, I18)",
       test_cancel_at_once_strands_the_sender},
      {"abort honoured after commit: the same gateway strands nothing",
       test_an_engine_that_honours_aborts_frees_at_once},
      {"R-ABORT-COMMITTED: the reference lets decode collect, the sender frees at once",
       test_reference_lets_decode_collect},
      {"source-first: an empty read ignored after the commit pins the blocks (I18)",
       test_source_first_empty_read_ignored_after_commit},
      {"R-ABORT-COMMITTED: without the key the reference cancels at once",
       test_reference_cancels_at_once_without_the_key},
  };
  return PDT_SUITE("abort_commit", cases);
}
