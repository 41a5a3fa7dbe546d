/* Pairing topology (docs/spec.md R-PAIR-GROUP, R-PAIR-RANK, I21, I22; O5.2): the checker judges
 * a cross-group pair and a DP-rank disagreement from the workers' records; the reference pairs
 * only within a transfer group, refuses when no group has both roles, and sends no DP rank of
 * the client's; the worker engine never pairs a decode that looks its room up on another rank
 * (simulator and, over sockets, the mocks behind `pdref gateway`). */
#include <cJSON.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "pd_check.h"
#include "pd_conform.h"
#include "pd_request.h"
#include "pd_world.h"
#include "pdt.h"
#include "pdt_judge.h"
#include "pdt_net.h"

#define BIT(i) (1u << ((i) - 1))
#define I15 BIT(PD_INVARIANT_SERVED)
#define I21 BIT(PD_INVARIANT_PAIR_GROUP)
#define I22 BIT(PD_INVARIANT_RANK_AGREEMENT)

/* A served 1P1D request (pdt_judge.h) whose legs reached their workers, decode's bootstrap
 * naming worker 0 (the prefill), both on room `room`. */
static pdt_judged_t *paired(uint64_t room) {
  pdt_judged_t *k = pdt_served(PD_MODE_REFERENCE, 1, 5000);
  if (!k) return NULL;
  for (int i = 0; i < 2; i++) {
    k->leg[i].is_reached = 1;
    k->leg[i].n_rooms = 1;
    k->leg[i].room = room;
    k->leg[i].boot_node = -1;
  }
  k->leg[1].boot_node = 0;
  return k;
}

/* I21: a decode paired with a prefill of another transfer group; a leg that never reached its
 * worker, or one whose bootstrap names no prefill, is not judged. */
static void test_cross_group_pair_is_i21(void) {
  char reason[256];
  for (int c = 0; c < 4; c++) {
    pdt_judged_t *k = paired(7);
    if (!k) return;
    k->s.workers[1].transfer_group = c == 0 ? 0 : 3; /* 0: same group as the prefill */
    if (c == 2) k->leg[1].is_reached = 0;
    if (c == 3) k->leg[1].boot_node = -1;
    reason[0] = '\0';
    uint32_t v = pdt_judge(k, reason, sizeof reason);
    PDT_EQ_U64(v & I21, c == 1 ? I21 : 0);
    if (c == 1) PDT_TRUE(strstr(reason, "I21 decode on d0 (transfer group 3) paired with prefill p0") != NULL);
    free(k);
  }
}

/* I22: prefill runs its room on routed_dp_rank, else room % dp_size; decode looks it up on
 * disagg_prefill_dp_rank, else room % dp_size. */
static void test_rank_disagreement_is_i22(void) {
  static const struct {
    uint32_t dp, room;
    int routed, looked; /* -1: absent */
    int is_i22;
  } cases[] = {
      {2, 7, -1, -1, 0}, /* both follow the room */
      {2, 6, 1, -1, 1},  /* prefill pinned on 1, decode follows the room to 0 */
      {2, 7, 1, -1, 0},  /* the pinned rank happens to agree */
      {2, 6, 1, 1, 0},   /* decode told the prefill's rank: agrees */
      {2, 7, -1, 0, 1},  /* decode told a rank the prefill did not run on */
      {1, 6, 1, 1, 1},   /* both say rank 1 of a prefill that has one rank */
      {1, 6, -1, -1, 0}, /* no DP */
  };
  char reason[256];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    pdt_judged_t *k = paired(cases[c].room);
    if (!k) return;
    k->s.workers[0].dp_size = cases[c].dp;
    k->leg[0].has_routed_rank = cases[c].routed >= 0;
    k->leg[0].routed_rank = cases[c].routed >= 0 ? (uint32_t)cases[c].routed : 0;
    k->leg[1].has_prefill_rank = cases[c].looked >= 0;
    k->leg[1].prefill_rank = cases[c].looked >= 0 ? (uint32_t)cases[c].looked : 0;
    reason[0] = '\0';
    uint32_t v = pdt_judge(k, reason, sizeof reason);
    CU_assertImplementation((v & I22) == (cases[c].is_i22 ? I22 : 0), __LINE__, "I22 case",
                            __FILE__, "", CU_FALSE);
    if (cases[c].is_i22) PDT_TRUE(strncmp(reason, "I22 prefill p0 ran room", 23) == 0);
    free(k);
  }
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_PAIR_GROUP), "pair-group");
  PDT_EQ_STR(pd_invariant_name(PD_INVARIANT_RANK_AGREEMENT), "rank-agreement");
  PDT_EQ_INT(pd_invariant_parse("I22"), PD_INVARIANT_RANK_AGREEMENT);
}

/* One run's violation mask and stats. */
static uint32_t run(const pd_scenario_t *s, pd_mode_t m, pd_world_stats_t *st) {
  uint32_t v = 0;
  uint64_t h = 0;
  PDT_EQ_INT(pd_world_run(s, m, s->config.seed, NULL, st, &v, &h), 0);
  return v;
}

static void count_leg(void *ud, const pd_worker_leg_t *leg, const char *worker) {
  (void)leg;
  (void)worker;
  ++*(uint32_t *)ud;
}

/* The highest attempt number of any leg (ud: uint32_t). */
static void max_attempt(void *ud, const pd_worker_leg_t *leg, const char *worker) {
  (void)worker;
  if (leg->attempt > *(uint32_t *)ud) *(uint32_t *)ud = leg->attempt;
}

/* One reference run of s with fn over every worker leg, folding into a counter from 0. */
static uint32_t over_legs(const pd_scenario_t *s, pd_world_leg_fn fn, pd_world_stats_t *st) {
  uint32_t acc = 0, v = 0;
  uint64_t h = 0;
  pd_world_opts_t o;
  memset(&o, 0, sizeof o);
  PDT_EQ_INT(pd_world_run_legs(s, PD_MODE_REFERENCE, s->config.seed, &o, fn, &acc, st, &v, &h), 0);
  return acc;
}

/* R-PAIR-GROUP: the reference pairs within a group (the library's 2P2D world: every request
 * served, no I21); minilb pairs blind. With no group that has both roles the reference sends
 * nothing and answers 503 (I15: a healthy world left unserved, the deployment's fault) while
 * minilb still sends cross-group pairs. */
static void test_reference_pairs_within_a_group_and_refuses_without_one(void) {
  pd_scenario_t *s = pdt_load_scenario("pair-transfer-groups-40606");
  PDT_TRUE(s != NULL);
  if (!s) return;
  pd_world_stats_t st;
  PDT_EQ_U64(run(s, PD_MODE_REFERENCE, &st), 0);
  PDT_EQ_U64(st.clean_success, s->workload.requests);
  /* a group without a decode is not ready: p1 is never picked, so no attempt fails at the
     decode's selection and every leg is of attempt 1 */
  PDT_EQ_U64(over_legs(s, max_attempt, &st), 1);
  PDT_TRUE(run(s, PD_MODE_MINILB, &st) & I21);
  for (uint32_t i = 0; i < s->n_workers; i++) /* p0 1, p1 1, d0 0, d1 2: no complete pair */
    s->workers[i].transfer_group = i < 2 ? 1 : 2 * (i - 2);
  uint32_t v = run(s, PD_MODE_REFERENCE, &st);
  PDT_EQ_U64(v, I15);
  PDT_EQ_U64(st.clean_success, 0);
  PDT_EQ_U64(st.client_errors, s->workload.requests); /* each answered (503), none cut */
  PDT_EQ_U64(over_legs(s, count_leg, &st), 0); /* nothing sent to any worker: no cross-group pair, no decode alone */
  PDT_TRUE(run(s, PD_MODE_MINILB, &st) & I21);
  free(s);
}

/* R-PAIR-RANK: a reference render leaves the client's routed_dp_rank and
 * disagg_prefill_dp_rank out; a model's forwards them verbatim. */
static void test_reference_render_drops_client_rank_fields(void) {
  static const char body[] = "{\"text\":\"hi\",\"routed_dp_rank\":1,\"disagg_prefill_dp_rank\":0}";
  for (int strip = 0; strip < 2; strip++) {
    pd_request_t r;
    char err[128];
    PDT_EQ_INT(pd_request_parse(&r, NULL, "/generate", body, sizeof body - 1,
                                PD_BATCH_RULE_REFERENCE, err, sizeof err), 0);
    uint64_t room = 9;
    pd_bootstrap_t b = {"p0", 8998, &room, "pdref-1", -1, strip};
    char *out = NULL;
    size_t n = 0;
    PDT_EQ_INT(pd_request_render(&r, &b, &out, &n), 0);
    cJSON *doc = out ? cJSON_Parse(out) : NULL;
    PDT_TRUE(doc != NULL);
    int has_r = cJSON_GetObjectItemCaseSensitive(doc, "routed_dp_rank") != NULL;
    int has_p = cJSON_GetObjectItemCaseSensitive(doc, "disagg_prefill_dp_rank") != NULL;
    PDT_EQ_INT(has_r, !strip);
    PDT_EQ_INT(has_p, !strip);
    PDT_TRUE(cJSON_GetObjectItemCaseSensitive(doc, "bootstrap_room") != NULL);
    cJSON_Delete(doc);
    pd_free(NULL, out);
    pd_request_free(&r);
  }
}

/* Over sockets (`pdref conform` against `pdref gateway` and `pdref mock` workers that honour
 * dp_size, routed_dp_rank and disagg_prefill_dp_rank): the reference serves every request of
 * the rank incident; minilb forwards the client's rank and the mocks' records show I22. */
static void test_rank_incident_over_sockets(void) {
  signal(SIGPIPE, SIG_IGN);
  pdt_row_t x;
  if (pdt_row_open_run(&x, "pair-dp-rank-disagrees-with-room-24772", "reference", 0.02) != 0)
    return;
  PDT_TRUE(x.r.judged & I22);
  PDT_EQ_U64(x.r.got, 0);
  pdt_conform_opts(&x.o, x.bin, "minilb", x.cmd, sizeof x.cmd);
  x.o.scale = 0.02;
  if (pdt_row_run(&x) == 0) PDT_TRUE(x.r.got & I22);
  pdt_row_close(&x);
}

/* R-PAIR-GROUP over sockets: `pdref gateway` told the groups ({pdref_gateway_args} carries
 * --prefill-groups/--decode-groups) pairs p0-d0 only; minilb pairs blind, and the mocks'
 * logs (decode's bootstrap port names its prefill) show I21. */
static void test_groups_over_sockets(void) {
  signal(SIGPIPE, SIG_IGN);
  pdt_row_t x;
  if (pdt_row_open_run(&x, "pair-transfer-groups-40606", "reference", 0.02) != 0) return;
  PDT_TRUE(x.r.judged & I21);
  PDT_EQ_U64(x.r.got, 0);
  pdt_conform_opts(&x.o, x.bin, "minilb", x.cmd, sizeof x.cmd);
  x.o.scale = 0.02;
  if (pdt_row_run(&x) == 0) PDT_TRUE(x.r.got & I21);
  pdt_row_close(&x);
}

int pdt_suite_topology(void) {
  static const pdt_case_t cases[] = {
      {"I21: a decode paired with a prefill of another group", test_cross_group_pair_is_i21},
      {"I22: decode looks its room up on another DP rank", test_rank_disagreement_is_i22},
      {"R-PAIR-GROUP: pairs within a group, 503 without one",
       test_reference_pairs_within_a_group_and_refuses_without_one},
      {"R-PAIR-RANK: the reference drops the client's rank fields",
       test_reference_render_drops_client_rank_fields},
      {"R-PAIR-RANK over sockets: gateway + mocks", test_rank_incident_over_sockets},
      {"R-PAIR-GROUP over sockets: gateway told the groups", test_groups_over_sockets},
  };
  return PDT_SUITE("topology", cases);
}
