#include "pd_breaker.h"

#include <assert.h>
#include <string.h>

#define PD_NS_PER_S 1000000000ULL
#define PD_BREAKER_STATE_COUNT 3

static const char *const state_names[PD_BREAKER_STATE_COUNT] = {
    [PD_BREAKER_CLOSED] = "closed",
    [PD_BREAKER_OPEN] = "open",
    [PD_BREAKER_HALF_OPEN] = "half_open",
};

/* The only moves either kind makes (R3.5, R3.6); set_state asserts every change against it. */
static const unsigned char legal_moves[PD_BREAKER_STATE_COUNT][PD_BREAKER_STATE_COUNT] = {
    [PD_BREAKER_CLOSED] = {[PD_BREAKER_OPEN] = 1},
    [PD_BREAKER_OPEN] = {[PD_BREAKER_HALF_OPEN] = 1},
    [PD_BREAKER_HALF_OPEN] = {[PD_BREAKER_CLOSED] = 1, [PD_BREAKER_OPEN] = 1},
};

void pd_breaker_config_smg(pd_breaker_config_t *c) {
  c->kind = PD_BREAKER_KIND_SMG;
  c->failure_threshold = 10;
  c->success_threshold = 3;
  c->open_ns = 60 * PD_NS_PER_S;
  c->window_ns = 120 * PD_NS_PER_S; /* stored, never used: that is G12 */
  c->failure_rate_pct = 0;
  c->half_open_max_probes = 0;
}

void pd_breaker_config_window(pd_breaker_config_t *c) {
  c->kind = PD_BREAKER_KIND_WINDOW;
  c->failure_threshold = 10;
  c->success_threshold = 3;
  c->open_ns = 60 * PD_NS_PER_S;
  c->window_ns = 120 * PD_NS_PER_S;
  c->failure_rate_pct = 50;
  c->half_open_max_probes = 1;
}

static void sat_inc(uint32_t *x) {
  if (*x < UINT32_MAX) (*x)++;
}

static void window_clear(pd_breaker_t *b) {
  memset(b->bucket_start_ns, 0, sizeof b->bucket_start_ns);
  memset(b->bucket_fail, 0, sizeof b->bucket_fail);
  memset(b->bucket_total, 0, sizeof b->bucket_total);
}

/* Entry actions, one per state. Counter resets follow smg's transition_to(): entering Open
 * keeps the failure streak, Closed and HalfOpen start both counts afresh. */
static void enter_closed(pd_breaker_t *b) {
  b->consecutive_failures = 0;
  b->consecutive_successes = 0;
  window_clear(b);
}

static void enter_open(pd_breaker_t *b) { b->consecutive_successes = 0; }

static void enter_half_open(pd_breaker_t *b) {
  b->consecutive_failures = 0;
  b->consecutive_successes = 0;
  window_clear(b);
}

static void (*const on_enter[PD_BREAKER_STATE_COUNT])(pd_breaker_t *) = {
    [PD_BREAKER_CLOSED] = enter_closed,
    [PD_BREAKER_OPEN] = enter_open,
    [PD_BREAKER_HALF_OPEN] = enter_half_open,
};

/* The one place the state changes. Entering HalfOpen starts a new period with empty probe
 * slots; probes of an earlier period are tagged with it and free nothing in this one (see
 * pd_breaker_record). */
static void next_period(pd_breaker_t *b) {
  if (++b->half_open_period == 0) b->half_open_period = 1; /* 0 means "no probe" */
}

static int move_is_legal(pd_breaker_state_t from, pd_breaker_state_t to) {
  return (unsigned)from < PD_BREAKER_STATE_COUNT && (unsigned)to < PD_BREAKER_STATE_COUNT &&
         legal_moves[from][to];
}

static void set_state(pd_breaker_t *b, pd_breaker_state_t to, uint64_t now_ns) {
  int is_legal = move_is_legal(b->state, to);
  assert(is_legal);
  if (!is_legal) return; /* NDEBUG builds refuse the move rather than corrupt the machine */
  b->state = to;
  b->last_change_ns = now_ns;
  b->probes_in_flight = 0;
  if (to == PD_BREAKER_HALF_OPEN) next_period(b);
  sat_inc(&b->transitions);
  on_enter[to](b);
}

void pd_breaker_init(pd_breaker_t *b, const pd_breaker_config_t *cfg) {
  memset(b, 0, sizeof *b);
  b->cfg = *cfg;
  /* 0 probes would leave a half-open window breaker stuck there forever. */
  if (b->cfg.half_open_max_probes == 0) b->cfg.half_open_max_probes = 1;
  b->state = PD_BREAKER_CLOSED;
}

void pd_breaker_start_in(pd_breaker_t *b, pd_breaker_state_t st, uint64_t now_ns) {
  if ((unsigned)st >= PD_BREAKER_STATE_COUNT) return;
  b->state = st;
  b->last_change_ns = now_ns;
  b->probes_in_flight = 0;
  if (st == PD_BREAKER_HALF_OPEN) next_period(b);
  on_enter[st](b);
}

/* A clock that steps backwards never counts as time served. */
static int open_time_served(const pd_breaker_t *b, uint64_t now_ns) {
  return now_ns >= b->last_change_ns && now_ns - b->last_change_ns >= b->cfg.open_ns;
}

pd_breaker_state_t pd_breaker_state(pd_breaker_t *b, uint64_t now_ns) {
  if (b->state == PD_BREAKER_OPEN && open_time_served(b, now_ns))
    set_state(b, PD_BREAKER_HALF_OPEN, now_ns);
  return b->state;
}

static int is_window(const pd_breaker_t *b) { return b->cfg.kind == PD_BREAKER_KIND_WINDOW; }

static int probe_slot_free(const pd_breaker_t *b) {
  return b->probes_in_flight < b->cfg.half_open_max_probes;
}

int pd_breaker_can_execute(pd_breaker_t *b, uint64_t now_ns) {
  switch (pd_breaker_state(b, now_ns)) {
  case PD_BREAKER_CLOSED: return 1;
  case PD_BREAKER_HALF_OPEN: return is_window(b) ? probe_slot_free(b) : 1; /* smg: R3.6 */
  default: return 0;
  }
}

void pd_breaker_admit(pd_breaker_t *b, uint64_t now_ns, uint32_t *probe) {
  uint32_t tag = 0;
  if (pd_breaker_state(b, now_ns) == PD_BREAKER_HALF_OPEN && is_window(b) && probe_slot_free(b)) {
    b->probes_in_flight++;
    tag = b->half_open_period;
  }
  if (probe) *probe = tag;
}

/* --- sliding window (WINDOW kind) --- */

static uint64_t bucket_width_ns(const pd_breaker_t *b) {
  uint64_t w = b->cfg.window_ns / PD_BREAKER_BUCKETS;
  return w ? w : 1;
}

/* A bucket counts while its start is less than window_ns old, so no outcome older than the
 * window is ever counted (a few just inside it may already have dropped out). */
static int bucket_is_live(const pd_breaker_t *b, int i, uint64_t now_ns) {
  uint64_t start = b->bucket_start_ns[i];
  return b->bucket_total[i] > 0 && start <= now_ns && now_ns - start < b->cfg.window_ns;
}

static void window_add(pd_breaker_t *b, uint64_t now_ns, int is_failure) {
  uint64_t w = bucket_width_ns(b);
  uint64_t key = now_ns - now_ns % w;
  int i = (int)((key / w) % PD_BREAKER_BUCKETS);
  if (b->bucket_start_ns[i] != key) { /* slot held an expired bucket (or none): reuse it */
    b->bucket_start_ns[i] = key;
    b->bucket_fail[i] = 0;
    b->bucket_total[i] = 0;
  }
  sat_inc(&b->bucket_total[i]);
  if (is_failure) sat_inc(&b->bucket_fail[i]);
}

/* failures >= threshold and failures / total >= rate. A rate above 100 % can never hold, and
 * refusing it early keeps rate * total inside 64 bits. */
static int window_should_open(const pd_breaker_t *b, uint64_t now_ns) {
  uint64_t fails = 0, total = 0;
  if (b->cfg.failure_threshold == UINT32_MAX || b->cfg.failure_rate_pct > 100) return 0;
  for (int i = 0; i < PD_BREAKER_BUCKETS; i++) {
    if (!bucket_is_live(b, i, now_ns)) continue;
    fails += b->bucket_fail[i];
    total += b->bucket_total[i];
  }
  return fails >= b->cfg.failure_threshold && fails * 100 >= b->cfg.failure_rate_pct * total;
}

/* --- outcome handling --- */

static void count_consecutive(pd_breaker_t *b, pd_breaker_result_t r) {
  if (r == PD_BREAKER_SUCCESS) {
    b->consecutive_failures = 0;
    sat_inc(&b->consecutive_successes);
  } else {
    b->consecutive_successes = 0;
    sat_inc(&b->consecutive_failures);
  }
}

/* Both kinds: success_threshold successes close, any failure re-opens (R3.5). */
static void half_open_on_result(pd_breaker_t *b, uint64_t now_ns, pd_breaker_result_t r) {
  if (r == PD_BREAKER_FAILURE)
    set_state(b, PD_BREAKER_OPEN, now_ns);
  else if (b->consecutive_successes >= b->cfg.success_threshold)
    set_state(b, PD_BREAKER_CLOSED, now_ns);
}

static void smg_closed_on_result(pd_breaker_t *b, uint64_t now_ns, pd_breaker_result_t r) {
  if (r == PD_BREAKER_FAILURE && b->cfg.failure_threshold != UINT32_MAX &&
      b->consecutive_failures >= b->cfg.failure_threshold)
    set_state(b, PD_BREAKER_OPEN, now_ns);
}

static void window_closed_on_result(pd_breaker_t *b, uint64_t now_ns, pd_breaker_result_t r,
                                    int may_open) {
  window_add(b, now_ns, r == PD_BREAKER_FAILURE);
  if (r == PD_BREAKER_FAILURE && may_open && window_should_open(b, now_ns))
    set_state(b, PD_BREAKER_OPEN, now_ns);
}

/* Records use the stored state, not the lazily advanced one, as smg's record_outcome does: a
 * late result arriving while Open changes counters only. */
int pd_breaker_record_bounded(pd_breaker_t *b, uint64_t now_ns, pd_breaker_result_t r,
                              uint32_t probe, int may_open) {
  if (probe && probe == b->half_open_period && b->state == PD_BREAKER_HALF_OPEN &&
      b->probes_in_flight > 0)
    b->probes_in_flight--; /* a probe of an earlier period holds no slot of this one */
  if (r != PD_BREAKER_SUCCESS && r != PD_BREAKER_FAILURE) return 0;
  pd_breaker_state_t before = b->state;
  count_consecutive(b, r);
  if (before == PD_BREAKER_HALF_OPEN)
    half_open_on_result(b, now_ns, r);
  else if (before == PD_BREAKER_CLOSED && is_window(b))
    window_closed_on_result(b, now_ns, r, may_open);
  else if (before == PD_BREAKER_CLOSED && may_open)
    smg_closed_on_result(b, now_ns, r);
  return b->state != before;
}

int pd_breaker_record(pd_breaker_t *b, uint64_t now_ns, pd_breaker_result_t r, uint32_t probe) {
  return pd_breaker_record_bounded(b, now_ns, r, probe, 1);
}

const char *pd_breaker_state_name(pd_breaker_state_t s) {
  if ((unsigned)s >= PD_BREAKER_STATE_COUNT) return "unknown";
  return state_names[s];
}
