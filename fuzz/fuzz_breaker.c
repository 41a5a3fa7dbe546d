/* fuzz_breaker: the input bytes pick a config, then a script of (advance time, admit, record a
 * result, read) steps run on an smg breaker and a window breaker side by side. Every step
 * checks the invariants the dispatcher relies on and traps when one breaks. */
#include <stddef.h>
#include <stdint.h>

#include "pd_breaker.h"
#include "fuzz_reader.h"

#define FZ_MAX_STEPS 4096  /* bounds one run whatever the input length */
#define FZ_MAX_PENDING 64  /* admitted requests awaiting a result, per breaker */

typedef struct fz_side {
  pd_breaker_t b;
  uint32_t pending_probe[FZ_MAX_PENDING]; /* probe tags (0: not a probe) */
  uint32_t n_pending;
  uint64_t opened_at_ns; /* when we last saw it open, by our own clock */
  int saw_open;
  uint32_t prev_failures, prev_successes, prev_transitions;
} fz_side_t;

static void decode_config(fz_reader_t *in, pd_breaker_config_t *c) {
  uint8_t f = fz_u8(in);
  c->failure_threshold = f == 0xff ? UINT32_MAX : f % 16u;
  c->success_threshold = fz_u8(in) % 8u;
  c->open_ns = (uint64_t)fz_u8(in) * 16;
  c->window_ns = (uint64_t)fz_u8(in) * 16;
  c->failure_rate_pct = fz_u8(in) % 128u; /* some above 100 on purpose */
  c->half_open_max_probes = fz_u8(in) % 5u; /* 0 is normalised to 1 */
}

/* Pending probes of the breaker's current half-open period: only they hold its slots. */
static uint32_t pending_probes(const fz_side_t *s) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->n_pending; i++)
    n += s->pending_probe[i] != 0 && s->pending_probe[i] == s->b.half_open_period;
  return n;
}

/* A counter moves by at most one step per outcome, or resets; it never wraps. */
static int counter_step_ok(uint32_t prev, uint32_t now) {
  return now == 0 || now == prev || (prev < UINT32_MAX && now == prev + 1);
}

static void check_counters(fz_side_t *s) {
  const pd_breaker_t *b = &s->b;
  FZ_CHECK(counter_step_ok(s->prev_failures, b->consecutive_failures));
  FZ_CHECK(counter_step_ok(s->prev_successes, b->consecutive_successes));
  FZ_CHECK(!(b->consecutive_failures > 0 && b->consecutive_successes > 0));
  FZ_CHECK(b->transitions >= s->prev_transitions);
  s->prev_failures = b->consecutive_failures;
  s->prev_successes = b->consecutive_successes;
  s->prev_transitions = b->transitions;
  for (int i = 0; i < PD_BREAKER_BUCKETS; i++) FZ_CHECK(b->bucket_fail[i] <= b->bucket_total[i]);
}

static void check_probes(const fz_side_t *s) {
  const pd_breaker_t *b = &s->b;
  if (b->cfg.kind == PD_BREAKER_KIND_SMG) {
    FZ_CHECK(b->probes_in_flight == 0);
    return;
  }
  FZ_CHECK(b->cfg.half_open_max_probes >= 1);
  FZ_CHECK(b->probes_in_flight <= b->cfg.half_open_max_probes);
  FZ_CHECK(b->probes_in_flight <= pending_probes(s)); /* no phantom slots */
  if (b->state == PD_BREAKER_HALF_OPEN) /* every probe of this period holds its slot */
    FZ_CHECK(b->probes_in_flight == pending_probes(s));
}

static void check_thresholds(const pd_breaker_t *b) {
  const pd_breaker_config_t *c = &b->cfg;
  if (b->state == PD_BREAKER_CLOSED && c->kind == PD_BREAKER_KIND_SMG)
    FZ_CHECK(c->failure_threshold == UINT32_MAX || b->consecutive_failures == 0 ||
          b->consecutive_failures < c->failure_threshold);
  if (b->state == PD_BREAKER_HALF_OPEN)
    FZ_CHECK(b->consecutive_successes == 0 || b->consecutive_successes < c->success_threshold);
}

/* Before open_ns has passed since it opened, an open breaker stays open and refuses. */
static void check_open_time(fz_side_t *s, uint64_t now_ns) {
  pd_breaker_t *b = &s->b;
  if (b->state != PD_BREAKER_OPEN) return;
  FZ_CHECK(s->saw_open);
  if (now_ns - s->opened_at_ns < b->cfg.open_ns) {
    FZ_CHECK(!pd_breaker_can_execute(b, now_ns));
    FZ_CHECK(b->state == PD_BREAKER_OPEN);
  }
}

static void check_all(fz_side_t *s, uint64_t now_ns) {
  FZ_CHECK((unsigned)s->b.state <= PD_BREAKER_HALF_OPEN);
  check_counters(s);
  check_probes(s);
  check_thresholds(&s->b);
  check_open_time(s, now_ns);
}

static void note_state(fz_side_t *s, pd_breaker_state_t before, uint64_t now_ns) {
  if (s->b.state == PD_BREAKER_OPEN && before != PD_BREAKER_OPEN) {
    s->saw_open = 1;
    s->opened_at_ns = now_ns;
  }
}

static void step_admit(fz_side_t *s, uint64_t now_ns, int force) {
  int may = pd_breaker_can_execute(&s->b, now_ns);
  if (!may && !force) return;
  uint32_t probe = UINT32_MAX;
  pd_breaker_admit(&s->b, now_ns, &probe);
  FZ_CHECK(probe == 0 || probe == s->b.half_open_period);
  if (s->b.cfg.kind == PD_BREAKER_KIND_SMG) FZ_CHECK(probe == 0);
  if (s->n_pending < FZ_MAX_PENDING) s->pending_probe[s->n_pending++] = probe;
  else if (probe) pd_breaker_record(&s->b, now_ns, PD_BREAKER_NEUTRAL, probe);
}

static void step_record(fz_side_t *s, uint64_t now_ns, uint8_t sel) {
  pd_breaker_result_t r = (pd_breaker_result_t)((sel >> 6) % 3u);
  uint32_t was_probe = 0;
  if (s->n_pending > 0) {
    uint32_t i = sel % s->n_pending;
    was_probe = s->pending_probe[i];
    s->pending_probe[i] = s->pending_probe[--s->n_pending];
  }
  pd_breaker_state_t before = s->b.state;
  int changed = pd_breaker_record(&s->b, now_ns, r, was_probe);
  FZ_CHECK(changed == (s->b.state != before));
  if (r == PD_BREAKER_NEUTRAL) FZ_CHECK(!changed);
  note_state(s, before, now_ns);
}

static void step_read(fz_side_t *s, uint64_t now_ns) {
  pd_breaker_state_t got = pd_breaker_state(&s->b, now_ns);
  FZ_CHECK(got == s->b.state);
  int may = pd_breaker_can_execute(&s->b, now_ns);
  if (got == PD_BREAKER_CLOSED) FZ_CHECK(may);
  if (got == PD_BREAKER_OPEN) FZ_CHECK(!may);
  if (got == PD_BREAKER_HALF_OPEN && s->b.cfg.kind == PD_BREAKER_KIND_SMG) FZ_CHECK(may);
}

static void run_step(fz_side_t *s, uint64_t now_ns, uint8_t op, uint8_t arg) {
  switch (op % 4u) {
  case 1: step_admit(s, now_ns, (op & 0x40) != 0); break;
  case 2: step_record(s, now_ns, arg); break;
  case 3: step_read(s, now_ns); break;
  default: break; /* 0 advances time, done by the caller */
  }
  check_all(s, now_ns);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_reader_t in = fz_reader(data, size);
  pd_breaker_config_t c;
  decode_config(&in, &c);
  fz_side_t sides[2] = {0};
  c.kind = PD_BREAKER_KIND_SMG;
  pd_breaker_init(&sides[0].b, &c);
  c.kind = PD_BREAKER_KIND_WINDOW;
  pd_breaker_init(&sides[1].b, &c);
  uint64_t now_ns = 0;
  for (int step = 0; step < FZ_MAX_STEPS && in.n > 0; step++) {
    uint8_t op = fz_u8(&in), arg = fz_u8(&in);
    if (op % 4u == 0) now_ns += (op & 0x80) ? (uint64_t)arg << 8 : arg;
    for (int k = 0; k < 2; k++) run_step(&sides[k], now_ns, op, arg);
  }
  return 0;
}
