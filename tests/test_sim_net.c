/* Network faults in the simulated world (sim/pd_world_worker.c, net_cut): the path between
 * gateway and worker is cut while the worker keeps the request. Each test runs a scenario
 * and reads the legs as the worker left them (pd_world_run_legs): the gateway's view (a
 * reset reached it, or nothing) and the worker's ground truth (it ran on; its slot was held
 * until an abort or its own end), and the verdict the checker gives from them. Also I12's
 * model of own failures for legs the gateway hears nothing from: a cut path, and a vLLM
 * decode that never reads. */
#include <stdlib.h>
#include <string.h>

#include "pd_world.h"
#include "pdt.h"
#include "pdt_scenario.h"

#define MS_NS 1000000ull
#define MAX_SEEN 32

typedef struct {
  pd_worker_leg_t leg[MAX_SEEN];
  char worker[MAX_SEEN][32];
  int n;
} seen_t;

static void on_leg(void *ud, const pd_worker_leg_t *leg, const char *worker) {
  seen_t *s = ud;
  if (s->n >= MAX_SEEN) return;
  s->leg[s->n] = *leg;
  s->leg[s->n].next_in_req = NULL;
  s->leg[s->n].rooms = NULL;
  snprintf(s->worker[s->n++], sizeof s->worker[0], "%s", worker);
}

/* The first leg of role on worker (NULL: none). */
static const pd_worker_leg_t *leg_on(const seen_t *s, const char *worker, pd_role_t role) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->worker[i], worker) && s->leg[i].role == role) return &s->leg[i];
  return NULL;
}

static uint32_t run(const char *src, pd_mode_t mode, seen_t *seen, pd_world_stats_t *st) {
  pd_scenario_t *s = malloc(sizeof *s);
  char err[PDT_SCENARIO_ERR_BYTES];
  uint32_t v = 0;
  memset(seen, 0, sizeof *seen);
  if (s && parse_q(s, src, err) == 0) {
    pd_world_opts_t o = {0};
    PDT_EQ_INT(pd_world_run_legs(s, mode, s->config.seed, &o, on_leg, seen, st, &v, NULL), 0);
  } else {
    PDT_TRUE(0);
  }
  free(s);
  return v;
}

#define BIT(i) (1u << ((i) - 1))

/* A non-stream prefill's path is reset at 50 ms while it waits in bootstrap (its decode is
 * queued behind a long request; the reference's admission is off, or it would hold the
 * request at the gateway while d0 is full, R-ADMIT-BOTH). The gateway sees a transport error; the worker, told
 * nothing, keeps its slot until its bootstrap timeout unless an /abort_request comes. */
static const char *bootstrap_doc =
    "{'name':'n','workers':[{'name':'p0','role':'prefill'},{'name':'p1','role':'prefill'},"
    "{'name':'d0','role':'decode','max_running_requests':1}],"
    "'faults':[{'role':'prefill','request':1,'leg':1,'kind':'net_reset','ms':50}],"
    "'config':{'bootstrap_timeout_ms':20000,'admission':false},"
    "'workload':{'requests':2,'interval_ms':1,'stream':false,'tokens':150},'expect':{}}";

/* The cut as the gateway and the worker saw it: the reset reached the gateway at 1 ms
 * arrival + 50 ms + two network hops, which recorded a failure. */
static const pd_worker_leg_t *expect_reset_p1(const seen_t *seen) {
  const pd_worker_leg_t *p1 = leg_on(seen, "p1", PD_ROLE_PREFILL);
  PDT_TRUE(p1 != NULL);
  if (!p1) return NULL;
  PDT_TRUE(p1->is_path_fault && p1->is_fault_fired && p1->is_reached);
  PDT_TRUE(p1->is_failed_at_close);
  PDT_EQ_U64(p1->t_gw_closed, 51 * MS_NS + 200000);
  return p1;
}

/* joined (smg) sends no /abort_request after a transport error: the slot stays until the
 * bootstrap timeout (20 s after arrival), whose 500 goes to nobody: I3. */
static void test_net_reset_strands_a_bootstrapping_prefill(void) {
  seen_t seen;
  pd_world_stats_t st;
  uint32_t v = run(bootstrap_doc, PD_MODE_JOINED, &seen, &st);
  const pd_worker_leg_t *p1 = expect_reset_p1(&seen);
  if (p1) {
    PDT_EQ_INT(p1->aborts, 0);
    PDT_EQ_U64(p1->t_slot_freed, 20001 * MS_NS + 100000);
    PDT_EQ_INT(p1->truth, PD_TRUTH_FAILED);
  }
  PDT_EQ_U64(v, BIT(PD_INVARIANT_STRANDED_SLOT));
  PDT_EQ_U64(st.faults_exercised, 1);
  PDT_EQ_U64(st.requests_served, 2);
}

/* The reference, with or without its abort after a transport error (issue 24, section 3):
 * the verdict follows the worker's truth. No abort: the slot is held to the bootstrap
 * timeout and I3 is flagged; an abort: freed at once (stalled), nothing flagged. */
static void test_net_reset_reference_judged_by_the_worker(void) {
  seen_t seen;
  pd_world_stats_t st;
  uint32_t v = run(bootstrap_doc, PD_MODE_REFERENCE, &seen, &st);
  const pd_worker_leg_t *p1 = expect_reset_p1(&seen);
  if (!p1) return;
  PDT_EQ_INT(p1->outcome, PD_OUTCOME_FAILURE);
  if (p1->aborts) {
    PDT_TRUE(p1->t_slot_freed < 60 * MS_NS);
    PDT_EQ_INT(p1->truth, PD_TRUTH_STALLED);
    PDT_EQ_U64(v, 0);
  } else {
    PDT_EQ_U64(p1->t_slot_freed, 20001 * MS_NS + 100000);
    PDT_EQ_U64(v, BIT(PD_INVARIANT_STRANDED_SLOT));
  }
}

/* A stream decode whose path goes silent at once (its 200 head lost): the reference's head
 * deadline (5 s) gives up on it with an /abort_request, which reaches the worker, still
 * generating, and frees it; the recorded timeout is not held against the worker (I4). */
static const char *lost_doc =
    "{'name':'n','workers':[{'name':'p0','role':'prefill'},{'name':'d0','role':'decode'},"
    "{'name':'d1','role':'decode','token_ms':1}],"
    "'faults':[{'role':'decode','request':0,'leg':1,'kind':'response_lost'}],"
    "'workload':{'requests':1,'stream':true,'tokens':2000},'expect':{}}";

static void test_response_lost_head_deadline_aborts_the_worker(void) {
  seen_t seen;
  pd_world_stats_t st;
  uint32_t v = run(lost_doc, PD_MODE_REFERENCE, &seen, &st);
  const pd_worker_leg_t *d0 = leg_on(&seen, "d0", PD_ROLE_DECODE);
  PDT_TRUE(d0 != NULL);
  if (d0) {
    PDT_TRUE(d0->is_path_fault && d0->is_fault_fired);
    PDT_FALSE(d0->is_failed_at_close);         /* nothing reached the gateway */
    PDT_EQ_INT(d0->outcome, PD_OUTCOME_TIMEOUT);
    PDT_TRUE(d0->aborts >= 1); /* the head deadline's abort */
    PDT_EQ_INT(d0->truth, PD_TRUTH_CANCELLED); /* aborted while it generated */
    PDT_TRUE(d0->t_slot_freed > 5000 * MS_NS && d0->t_slot_freed < 5100 * MS_NS);
  }
  PDT_EQ_U64(v, 0);
  PDT_EQ_U64(st.clean_success, 1);
}

/* The same silence under pr1150: no head deadline, smg's 30 min per-leg timeout ends it
 * long after the client's bound (I1). */
static void test_response_lost_unbounded_without_a_head_deadline(void) {
  seen_t seen;
  pd_world_stats_t st;
  uint32_t v = run(lost_doc, PD_MODE_PR1150, &seen, &st);
  PDT_TRUE(v & BIT(PD_INVARIANT_TERMINATION));
  const pd_worker_leg_t *d0 = leg_on(&seen, "d0", PD_ROLE_DECODE);
  PDT_TRUE(d0 != NULL && d0->is_path_fault && d0->truth == PD_TRUTH_OK); /* it finished */
}

/* d0's path is silent on every request (response_lost) and the breaker opens after two
 * failures (response-lost-decode-opens-breaker-justly, explore seed 496): the reference times
 * d0's legs out, retries on d1 and opens d0's breaker after the second. Those two legs are
 * failures as far as the gateway can know (nothing of them reached it), so I12's model counts
 * them and the open is just; after it d0 gets no more legs. */
static const char *lost_breaker_doc =
    "{'name':'n','config':{'breaker_failure_threshold':2,'max_attempts':2},"
    "'workers':[{'name':'p0','role':'prefill'},"
    "{'name':'d0','role':'decode','faults':[{'kind':'response_lost'}]},"
    "{'name':'d1','role':'decode'}],"
    "'workload':{'requests':6,'tokens':1,'users':1},'expect':{}}";

static void test_response_lost_legs_justify_the_breaker(void) {
  seen_t seen;
  pd_world_stats_t st;
  uint32_t v = run(lost_breaker_doc, PD_MODE_REFERENCE, &seen, &st);
  int on_d0 = 0;
  for (int i = 0; i < seen.n; i++) {
    const pd_worker_leg_t *l = &seen.leg[i];
    if (strcmp(seen.worker[i], "d0") != 0) continue;
    on_d0++;
    PDT_TRUE(l->is_path_fault && !l->is_failed_at_close); /* silent: nothing reached it */
    PDT_TRUE(l->outcome == PD_OUTCOME_TIMEOUT || l->outcome == PD_OUTCOME_FAILURE);
    PDT_TRUE(l->is_own_fail_noted); /* I12's model counted it */
  }
  PDT_EQ_INT(on_d0, 2); /* the breaker opened on the second: no third leg */
  PDT_EQ_U64(v, 0);
  PDT_EQ_U64(st.clean_success, 6);
}

/* A vLLM decode that never reads its KV (never_connect) says nothing; the reference times
 * its legs out and opens its breaker (sf-never-reading-decode-opens-breaker-justly, explore
 * seed 240): each such leg is its worker's own failure in I12's model, so the open is just. */
static const char *never_reading_doc =
    "{'name':'n','config':{'max_attempts':1,'total_timeout_ms':41774,'seed':240},"
    "'workers':[{'name':'p1','role':'prefill','protocol':'vllm','kv_expiry':'lease'},"
    "{'name':'d0','role':'decode','protocol':'vllm','kv_expiry':'lease',"
    "'faults':[{'kind':'never_connect'}]}],"
    "'workload':{'requests':10,'route':'/v1/completions','tokens':1,'users':7,'think_ms':127},"
    "'expect':{}}";

static void test_never_reading_decode_legs_justify_the_breaker(void) {
  seen_t seen;
  pd_world_stats_t st;
  uint32_t v = run(never_reading_doc, PD_MODE_REFERENCE, &seen, &st);
  int noted = 0, on_d0 = 0;
  for (int i = 0; i < seen.n; i++) {
    const pd_worker_leg_t *l = &seen.leg[i];
    if (strcmp(seen.worker[i], "d0") != 0) continue;
    on_d0++;
    PDT_TRUE(l->is_fault_fired && !l->is_failed_at_close); /* it never said a thing */
    noted += l->is_own_fail_noted;
  }
  PDT_TRUE(on_d0 >= 1);
  PDT_TRUE(noted >= 1);
  PDT_FALSE(v & BIT(PD_INVARIANT_BREAKER));
  PDT_EQ_U64(v, 0);
}

int pdt_suite_sim_net(void) {
  static const pdt_case_t cases[] = {
      {"net_reset on a bootstrapping prefill: joined sends no abort, its slot stays (I3)",
       test_net_reset_strands_a_bootstrapping_prefill},
      {"net_reset on a bootstrapping prefill: the reference judged by the worker's truth",
       test_net_reset_reference_judged_by_the_worker},
      {"response_lost: the reference's head deadline aborts the still-generating decode",
       test_response_lost_head_deadline_aborts_the_worker},
      {"response_lost under pr1150: no deadline but smg's 30 min, I1",
       test_response_lost_unbounded_without_a_head_deadline},
      {"response_lost legs the gateway timed out justify its breaker's open (I12)",
       test_response_lost_legs_justify_the_breaker},
      {"a vLLM decode that never reads: its timed-out legs justify its breaker's open (I12)",
       test_never_reading_decode_legs_justify_the_breaker},
  };
  return PDT_SUITE("sim_net", cases);
}
