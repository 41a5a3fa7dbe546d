/* pd_conform: the conformance runner (`pdref conform`). For one scenario it starts one
 * `pdref mock` process per scenario worker on free loopback ports, starts a gateway command
 * with the mocks' addresses filled in, drives the scenario's client workload over real HTTP
 * (libcurl multi, one loop), stops every process it started, reads the mocks' event logs and
 * judges each request with the simulator's own checker (sim/pd_check.c). Only the invariants a
 * black box shows are judged (PD_CONFORM_UNJUDGED lists the others). See docs/conformance.md. */
#ifndef PD_CONFORM_H
#define PD_CONFORM_H
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "pd_dispatch.h"
#include "pd_scenario.h"

/* Scenarios with more client requests are skipped: each request holds about 5 KB of the
 * runner's memory and its legs about 1.5 KB more, and the judge's arrival-order fallback is
 * quadratic in the requests (docs/conformance.md "Skipped scenarios"). */
#define PD_CONFORM_MAX_REQUESTS 50000u
/* Smallest grace (I2/I3) and the default extra time for a socket round trip. */
#define PD_CONFORM_DEFAULT_SLACK_MS 50u
#define PD_CONFORM_DEFAULT_START_MS 10000u /* mocks' ready lines, the gateway's listen */
#define PD_CONFORM_DEFAULT_STOP_MS 5000u   /* SIGTERM, then SIGKILL */

#define PD_CONFORM_BIT(inv) (1u << ((inv) - 1))
/* Not judged on sockets: recorded outcomes (I4), loads (I9, I10) and breaker states (I12)
 * live inside the gateway; determinism (I13) is a property of the simulator. I16 (retry onto
 * a failed worker) is judged from the worker logs alone (pd_conform_verdict.c: a retry back
 * to the worker that failed the request while an untried one had failed nothing); I17
 * (quiescence) from /metrics only where the gateway exposes its loads (as I4). I19 (a decode
 * served from freed blocks) is judged from the mocks' kv_from lines (pd_conform_log.c). I20 (decode
 * served without its prefill's KV) needs each decode's KV source, which the records do not
 * carry yet (pd_judge_t.is_kv_source_known). I23 (a load step's goodput against the cluster's
 * capacity) needs a capacity model of the deployment under test: simulator only. I24 (a
 * queue deadline) needs the gateway's declared deadline and the worker's arrival time on the
 * client's clock: simulator only for now; I25 (a retry budget) is the gateway's own setting;
 * I26 (recovery) needs goodput windows the scaled clock does not give. */
#define PD_CONFORM_INV_RETRY_FAILED 16
#define PD_CONFORM_INV_QUIESCENCE 17
#define PD_CONFORM_UNJUDGED                                                                        \
  (PD_CONFORM_BIT(PD_INVARIANT_OUTCOME) | PD_CONFORM_BIT(PD_INVARIANT_LOAD_BALANCE) |              \
   PD_CONFORM_BIT(PD_INVARIANT_LOAD_TRUTH) | PD_CONFORM_BIT(PD_INVARIANT_BREAKER) |                \
   PD_CONFORM_BIT(PD_INVARIANT_DETERMINISM) | PD_CONFORM_BIT(PD_CONFORM_INV_QUIESCENCE) |         \
   PD_CONFORM_BIT(PD_INVARIANT_DISAGGREGATED) | PD_CONFORM_BIT(PD_INVARIANT_GOODPUT_FLOOR) |          \
   PD_CONFORM_BIT(PD_INVARIANT_QUEUE_DEADLINE) | PD_CONFORM_BIT(PD_INVARIANT_RETRY_BUDGET) |    \
   PD_CONFORM_BIT(PD_INVARIANT_RECOVERY))

#define PD_CONFORM_MAX_HEADERS 4u /* --client-header */

typedef struct pd_conform_opts {
  const char *gateway_cmd; /* template, run with /bin/sh -c (placeholders: docs/conformance.md) */
  /* "Name: value" lines every client request carries, placeholders expanded as in the command
   * (llm-d's sidecar takes its prefill from a header its scheduler sets) */
  const char *client_header[PD_CONFORM_MAX_HEADERS];
  uint32_t n_client_headers;
  const char *pdref_bin;   /* the binary whose `mock` subcommand runs the workers */
  const char *mode_label;  /* the table's mode column; default "gateway" */
  int has_mode;            /* mode_label names a dispatch mode: expectations, I7 limit, */
  pd_mode_t mode;          /*  {pdref_gateway_args} with that mode's defaults */
  double scale;            /* --timeout-scale: every scenario duration is multiplied by it */
  uint32_t slack_ms;       /* minimum grace for I2/I3 */
  uint64_t bound_ms;       /* a request still open this long after it was sent is given up;
                              0 = deadline_ms x scale + 250 ms + grace */
  uint32_t start_ms, stop_ms;
  const char *tmp_root;    /* where the per-run directory goes; default $TMPDIR or /tmp */
  int keep;                /* keep the run directory (logs, gateway output) */
  double fwd_ms;           /* the gateway's forwarding latency from pd_conform_warm_up (ms);
                              0 = not measured: no scale is raised for it */
  double rate_per_s;       /* the request rate this machine's client, mocks and gateway
                              sustained in pd_conform_warm_up_rate; 0 = not measured */
  volatile sig_atomic_t *stop; /* optional: set (e.g. by a signal handler) to end early */
} pd_conform_opts_t;

typedef enum {
  PD_CONFORM_RAN = 0,
  PD_CONFORM_SKIPPED = 1, /* not run (reason says why): counted apart */
  PD_CONFORM_ERROR = 2,   /* setup failed: a mock or the gateway did not start, ... */
} pd_conform_status_t;

#define PD_CONFORM_MAX_PIDS (PD_SCENARIO_MAX_WORKERS + 1u)

typedef struct pd_conform_result {
  pd_conform_status_t status;
  uint32_t judged;      /* invariants judged (mask) */
  uint32_t got;         /* violated, within judged */
  uint32_t want;        /* expected, within judged */
  uint32_t limit;       /* of want, what the scenario declares a deployment limit (want when
                           its expectation is {"deployment_limit": ...}, else 0) */
  uint32_t maybe;       /* of want, what these sockets may not show (observe_note): matched
                           whether it shows or not */
  char observe_note[512]; /* why maybe is not observable here */
  int want_set, matched;  /* matched: got == want outside maybe */
  char reason[256];     /* first violation, or why skipped / what failed */
  char metrics_reason[256]; /* I4 from the gateway's /metrics, when violated */
  char dir[512];        /* the run directory (removed unless keep) */
  uint32_t requests, clean, client_errors, gone, cut_off;
  uint32_t legs, legs_unattributed;
  uint32_t legs_resent; /* a leg that reached its worker twice (same rid, room, worker) */
  uint32_t legs_by_timing; /* tied to a request by arrival order, not by X-Request-Id or rid */
  uint32_t legs_by_id;     /* tied by the runner's request id (header or prompt, as logged) */
  uint32_t legs_by_remote_id; /* of those, decode legs tied through the prefill leg their
                               kv_transfer_params.remote_request_id names (vLLM, V1.7) */
  /* exercised (docs/conformance.md "Exercised"): a row that tested nothing is not a pass */
  uint32_t faults_n, faults_fired; /* scripted fault entries that could fire / that fired */
  uint32_t sent, served;           /* requests sent / with at least one leg at a worker */
  uint32_t unserved_excused;       /* no leg, but after a failure or a worker crash */
  uint32_t unserved_late;          /* unserved, but legs came after the client's end, or its
                                      client disconnected before the gateway sent any */
  int exercised;                   /* every such fault fired, every request served or excused */
  char cannot_drive[224];          /* the mocks or this machine cannot drive the row as written
                                      (a fault no mock can inject, an arrival rate the warm-up
                                      showed this machine cannot sustain): a row whose own
                                      verdict then differs from its expectation is not
                                      exercised, never a fault of the gateway */
  uint32_t legs_ambiguous;         /* legs tied by arrival order that another request could
                                      have owned as well (docs/conformance.md "Tying legs"):
                                      the row's verdict cannot rest on them */
  char nx_reason[192];             /* why not exercised */
  const char *declared_nx;         /* the scenario declares this mode unexercised (its reason:
                                      "unexercised"), or NULL: such a row is judged as usual */
  double fwd_ms;       /* this row's forwarding latency: the largest delay from a request being
                          sent to its first leg at a mock (ms); -1 when no request had a leg */
  int timing_too_short; /* the scenario's timing is below what the gateway can show even at
                           scale 1 (scale_note); its served count decides */
  char scale_note[448]; /* the scale was raised for the gateway's speed or this machine's
                           request rate, or could not be */
  int quiescent;        /* from /metrics after the run: 1 nothing held, 0 something held
                           (quiet_reason), -1 not judged (not exposed, a request given up or a
                           leg open when the gateway was stopped) */
  char quiet_reason[192];
  double seconds;
  double span_ms; /* from the first request sent to the last client end */
  double scale; /* the timeout scale this scenario ran at (raised to socket_min_scale) */
  pid_t pids[PD_CONFORM_MAX_PIDS]; /* every process started: mocks, then the gateway (each
                                    * leads its own process group) */
  uint32_t n_pids;
} pd_conform_result_t;

void pd_conform_opts_default(pd_conform_opts_t *o);

/* Set mode_label (NULL: "gateway") and has_mode/mode from it. */
void pd_conform_set_label(pd_conform_opts_t *o, const char *label);

/* The mask of invariants judged on sockets for these options (I7 needs a mode's limit). */
uint32_t pd_conform_judged_mask(const pd_conform_opts_t *o);

/* Why the scenario cannot run on sockets, or NULL. */
const char *pd_conform_skip_reason(const pd_scenario_t *s);

/* The seed that makes `pdref gateway --seed` draw what the simulator's gateway draws for a
 * scenario seed (the simulator forks its gateway stream off the run's root PRNG). */
uint64_t pd_conform_gateway_seed(uint64_t scenario_seed);

/* Expand the gateway command template. ports: the mocks' HTTP ports and (prefill) bootstrap
 * ports, in scenario worker order. Returns 0, or -1 when out is too small or a placeholder is
 * unknown (err names it). */
int pd_conform_expand(const pd_scenario_t *s, const pd_conform_opts_t *o, const char *tmpl,
                      const uint16_t *ports, const uint16_t *boot_ports, uint16_t gw_port,
                      char *out, size_t cap, char *err, size_t errlen);

/* Scales are raised until a scenario's shortest gateway-facing time is this many times the
 * gateway's forwarding latency (docs/conformance.md "The gateway's own speed"). */
#define PD_CONFORM_FWD_FACTOR 2.0

/* Measure the gateway command's forwarding latency (ms) on a warm-up run of its own (one
 * healthy prefill and decode mock of protocol proto, a few requests at scale 1). 0 with
 * *fwd_ms set; 1 when it could not be measured (why says so; *fwd_ms 0); negative: out of
 * memory. */
int pd_conform_warm_up(const pd_conform_opts_t *o, pd_protocol_t proto, double *fwd_ms, char *why,
                       size_t cap);

/* A load row's arrival rate must stay under 1 / PD_CONFORM_RATE_FACTOR of what the warm-up
 * sustained (its 2-token streams behind two mocks are lighter than a load row's: at 1/2,
 * abort-storm-cascade-28651 with eight mocks and 1024-token prompts still overran pdref's
 * gateway, 489 ms to forward); a row with fewer requests than PD_CONFORM_RATE_MIN_REQUESTS
 * is not a load. */
#define PD_CONFORM_RATE_FACTOR 4.0
#define PD_CONFORM_RATE_MIN_REQUESTS 100u
/* The largest request rate this machine sustains with this gateway (requests a second): a
 * burst of requests sent at once behind one healthy prefill and decode mock, completed
 * requests over the time from the first sent to the last answered. 0 with *rate set; 1 when
 * it could not be measured (why); negative: out of memory. */
int pd_conform_warm_up_rate(const pd_conform_opts_t *o, pd_protocol_t proto, double *rate,
                            char *why, size_t cap);
/* The arrival rate (requests a second) scenario s asks of the sockets at scale; 0 when it is
 * not a load (fewer than PD_CONFORM_RATE_MIN_REQUESTS requests, or bursts). */
double pd_conform_row_rate(const pd_scenario_t *s, double scale);

/* The labelled mode does not speak the scenario's workers' protocol (pd_mode_speaks): the row
 * is not run, as `pdref sim run --mode M` leaves it out. */
int pd_conform_mode_skips(const pd_scenario_t *s, const pd_conform_opts_t *o);

/* The scenario's shortest time a gateway must act within (ms at scale 1): the client's
 * disconnect_at_ms, a gateway timeout the scenario sets; 0 if none. */
uint64_t pd_conform_gateway_timing_ms(const pd_scenario_t *s);

/* A row's word, in the order of the CLI's vocabulary (cli/cli_rows.h pd_cli_verdict_t). */
typedef enum pd_conform_verdict {
  PD_CONFORM_AS_EXPECTED = 0,
  PD_CONFORM_LIMIT,         /* as expected, and what it violates is a declared deployment limit */
  PD_CONFORM_UNEXPECTED,
  PD_CONFORM_NOT_EXERCISED,
  PD_CONFORM_SKIP,
  PD_CONFORM_ERR,
} pd_conform_verdict_t;

/* The row's word. A row whose own verdict (got) meets its expectation counts only when
 * produced by its cause: every scripted fault fired and every request reached a worker (or
 * was excused), and its legs were tied to requests without ambiguity; otherwise it is not
 * exercised, an expected violation as much as an expected pass. A row whose own verdict
 * differs is UNEXPECTED, unless the mocks or the machine could not drive it as written
 * (cannot_drive): then it is not exercised. */
pd_conform_verdict_t pd_conform_verdict(const pd_conform_result_t *r);
/* pd_conform_verdict(r) == PD_CONFORM_NOT_EXERCISED; nx_reason says why. */
int pd_conform_not_exercised(const pd_conform_result_t *r);

/* Run one scenario. Returns 0 (r filled; status says ran, skipped or error), or a negative
 * pd_err code on a local failure (out of memory). Every process started is stopped and reaped
 * before it returns, whatever happened. */
int pd_conform_run(const pd_scenario_t *s, const pd_conform_opts_t *o, pd_conform_result_t *r);

#endif
