/* pd_rqstate: the request and leg state machines of the dispatch core, seen from outside: their
 * state names and legal moves (read-only; docs/spec.md section 4 draws the same tables and
 * tests/test_rqstate.c checks the drawing against them), and an optional hook that observes
 * every transition with the source line that caused it (the simulator's Perfetto trace). */
#ifndef PD_RQSTATE_H
#define PD_RQSTATE_H
#include <stdint.h>

#include "pd_dispatch.h"

typedef enum { PD_MACHINE_REQUEST = 0, PD_MACHINE_LEG = 1 } pd_machine_t;

/* Number of states; names are the enum names without their prefix ("HEADS", "OPEN"), NULL
 * for an out-of-range state. legal(from, to) is 1 iff the core may move from -> to (a
 * self-move is legal only where the table says so), 0 otherwise or out of range. */
int pd_rq_state_count(void);
const char *pd_rq_state_name(int state);
int pd_rq_state_legal(int from, int to);
int pd_leg_state_count(void);
const char *pd_leg_state_name(int state);
int pd_leg_state_legal(int from, int to);

typedef struct pd_transition {
  pd_machine_t machine;
  uint64_t req_id;
  uint64_t leg_id;  /* PD_MACHINE_LEG only, else 0 */
  int from, to;     /* states of that machine (names above) */
  const char *file; /* core source file that made the move (basename), and its line */
  int line;
  uint64_t now_ns;  /* the feed call's time */
} pd_transition_t;

/* Called synchronously inside pd_gw_feed for every transition. It observes only: it must not
 * call into the gateway. t is valid during the call. */
typedef void (*pd_transition_fn)(void *ctx, const pd_transition_t *t);

/* Install (fn non-NULL) or remove (NULL) the transition observer. Without one, nothing is
 * reported and behaviour is the same either way. */
void pd_gw_set_transition_hook(pd_gw_t *gw, pd_transition_fn fn, void *ctx);

#endif
