/* pd_explore: swarm exploration (issue 5), after FoundationDB's simulator and TigerBeetle's
 * VOPR. One seed derives a whole random world as an ordinary pd_scenario_t: worker counts and
 * timings, per-worker fault mixes (each seed enables its own subset of fault kinds), workload
 * and gateway settings. A run that violates an invariant is shrunk to a small scenario that
 * still violates it, ready to save (pd_scenario_save) and replay with `pdref sim run`.
 * No clock, no globals: the same seed gives the same world, run and shrunk case. */
#ifndef PD_EXPLORE_H
#define PD_EXPLORE_H
#include <stddef.h>
#include <stdint.h>

#include "pd_scenario.h"
#include "pd_world.h"

#define PD_EXPLORE_MAX_ROLE_WORKERS 4u /* 1..4 prefill and 1..4 decode workers per world */
#define PD_EXPLORE_MAX_REQUESTS 20u    /* 1..20 client requests per world */
#define PD_EXPLORE_MAX_WORKER_FAULTS 3u /* scripted faults per worker */
/* World runs one shrink may spend (each is ~1 ms): bounds the time a finding costs. */
#define PD_EXPLORE_SHRINK_MAX_RUNS 3000u
/* Greedy passes over every simplification; a pass that changes nothing ends the shrink. */
#define PD_EXPLORE_SHRINK_MAX_PASSES 16u
#define PD_EXPLORE_REASON_BYTES 200

/* What exploring one seed found. */
typedef struct pd_explore_result {
  uint64_t seed;
  uint32_t found_mask;   /* invariants the generated world violated; 0 = clean */
  int inv;               /* the invariant shrunk for (1..14), 0 when nothing was shrunk */
  uint32_t shrunk_mask;  /* violated by the shrunk case under the mode (two runs, + I13 if
                            they differ); always contains inv when inv != 0 */
  uint32_t shrink_runs;  /* world runs the shrink spent */
  uint32_t requests_before, requests_after;
  uint32_t workers_before, workers_after;
  uint32_t faults_before, faults_after; /* scripted faults over all workers */
  char found_reason[PD_EXPLORE_REASON_BYTES]; /* first violation of the generated world */
  char reason[PD_EXPLORE_REASON_BYTES];       /* first violation of the shrunk case */
  uint64_t tie_seed;     /* the order of same-instant events that violated (0: insertion
                            order); also in the saved case's config.tie_seed */
} pd_explore_result_t;

/* Fill *s with the world and workload derived from `seed` (config.seed = seed). Every
 * generated scenario satisfies the loader's constraints (docs/scenarios.md); the reference's
 * total timeout is kept below the I1 deadline, prefill lag below the tail timeout. */
void pd_explore_generate(pd_scenario_t *s, uint64_t seed);
/* The same for a world of workers speaking `protocol`: SGLang's is pd_explore_generate's;
 * a vLLM world is that world adapted to vLLM's workers and routes, plus vLLM's own knobs
 * (docs/explore.md "vLLM worlds"). */
void pd_explore_generate_for(pd_scenario_t *s, uint64_t seed, pd_protocol_t protocol);

/* Run s under mode with s->config.seed. *mask gets the violated set; with `twice`, the run
 * is repeated and I13 added when the trace hash or the set differ. st may be NULL. Returns 0
 * or pd_world_run's error. */
int pd_explore_run(const pd_scenario_t *s, pd_mode_t mode, int twice, uint32_t *mask,
                   pd_world_stats_t *st);

/* Shrink s in place, greedily and to a fixpoint, while a run under mode still violates
 * invariant inv: fewer requests, fewer workers (at least one per role), fewer faults, no
 * crash or restart, simpler workload and settings, halved times. When the run of s reports
 * inv as its first violation (stats.first_reason, what a replay prints), that is kept too.
 * At most max_runs world runs (*runs gets the count). s must violate inv on entry. Returns
 * 0, PD_ERR_NOMEM, or a world error. */
int pd_explore_shrink(pd_scenario_t *s, pd_mode_t mode, int inv, uint32_t max_runs,
                      uint32_t *runs);

/* Turn a shrunk s into a scenario file's content: name "explore-<mode>-I<inv>-seed<N>", a
 * description of the finding, tags, and an expect entry for every mode holding the set a
 * replay of the written file violates (the scenario is rendered, parsed back and run twice,
 * so `pdref sim run` reproduces it as expected). Fills r->shrunk_mask and r->reason for
 * mode. Returns 0, PD_ERR_NOMEM, PD_ERR_FATAL when the rendering does not parse back, or a
 * world error. */
int pd_explore_finish(pd_scenario_t *s, pd_mode_t mode, pd_explore_result_t *r);

/* Explore one seed: generate into *s and run it under mode (twice with check_determinism),
 * in n_ties orders of same-instant events (tie seeds pd_explore_tie_seed(seed, 0..n_ties-1),
 * the first being insertion order) until one violates; 0 counts as 1. If it violates an invariant outside skip_mask, shrink for the lowest such invariant and
 * finish *s (pd_explore_finish); r->inv is then set. r is filled either way. Returns 0 or
 * an error from the steps above. */
int pd_explore_seed(pd_scenario_t *s, uint64_t seed, pd_mode_t mode, uint32_t skip_mask,
                    int check_determinism, uint32_t n_ties, pd_explore_result_t *r);

/* pd_explore_seed in worlds of `protocol` (pd_explore_seed uses the mode's own,
 * pd_mode_protocol: SGLang's for the reference), adding the cost of each seed's first run
 * (insertion order) to mx (pd_metrics.h; NULL: none): `pdref sim explore --json` pools them. */
int pd_explore_seed_mx(pd_scenario_t *s, uint64_t seed, pd_mode_t mode, pd_protocol_t protocol,
                       uint32_t skip_mask, int check_determinism, uint32_t n_ties,
                       pd_explore_result_t *r, pd_metrics_t *mx);

/* The i-th tie seed explore tries for a world seed (i = 0: 0, insertion order). */
uint64_t pd_explore_tie_seed(uint64_t seed, uint32_t i);

/* The invariant a reason line ("I3 decode slot on d0 held ...") is about, 1..14; 0 if none. */
int pd_explore_reason_inv(const char *reason);

/* "<mode>-I<inv>-seed<N>.json" into buf. Returns 0, or PD_ERR_LIMIT when cap is too small. */
int pd_explore_file_name(pd_mode_t mode, int inv, uint64_t seed, char *buf, size_t cap);

#endif
