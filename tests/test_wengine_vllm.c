/* The worker engine's vLLM protocol (pd_wengine.h, "vLLM protocol"; V1.x in docs/upstream.md)
 * driven through its header only: one prefill engine and one decode engine on a virtual clock,
 * a tiny router that hands decode's reads, notifications and heartbeats to the prefill and
 * the read's answer back (what sim/pd_world_worker.c does), and a log of every action with
 * its engine and time. Also the body parser's kv_transfer_params, the vLLM prefill answer's
 * bytes and the scenario keys' round trip. Times are scenario ms (time_scale 1). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pd_err.h"
#include "pd_scenario.h"
#include "pd_scenario_write.h"
#include "pd_wengine.h"
#include "pd_world.h"
#include "pd_worker_body.h"
#include "pd_worker_shared.h"
#include "pdt.h"

#define MS 1000000ull
#define LOG_MAX 8192u
#define STEPS_MAX 200000u
#define KEY 0xabcdefull
#define P 0
#define D 1

typedef struct rec {
  pd_wact_t a;
  int eng;
  uint64_t at_ms;
} rec_t;

typedef struct vdrv {
  pd_scenario_worker_t spec[2];
  pd_wengine_config_t cfg[2];
  pd_prng_t rng;
  pd_wengine_t *e[2];
  rec_t *log;
  size_t n;
  int overflow, stuck;
  uint64_t now;
} vdrv_t;

/* The scenario's default prefill and decode, both vLLM, timeout mode (480 s). */
static void vd_init(vdrv_t *d) {
  memset(d, 0, sizeof *d);
  pd_scenario_t *s = calloc(1, sizeof *s);
  PDT_TRUE(s != NULL);
  if (s) {
    pd_scenario_defaults(s);
    d->spec[P] = s->workers[0];
    d->spec[D] = s->workers[1];
  }
  free(s);
  pd_prng_init(&d->rng, 5);
  for (int i = 0; i < 2; i++) {
    d->spec[i].protocol = PD_PROTOCOL_VLLM;
    d->cfg[i].spec = &d->spec[i];
    d->cfg[i].bootstrap_timeout_ms = 300000;
    d->cfg[i].waiting_timeout_ms = 300000;
    d->cfg[i].fault_rng = &d->rng;
    d->cfg[i].time_scale = 1.0;
    d->cfg[i].worker_index = (uint32_t)i;
  }
  d->log = calloc(LOG_MAX, sizeof *d->log);
}

static int vd_start(vdrv_t *d) {
  d->e[P] = pd_wengine_new(&d->cfg[P], NULL);
  d->e[D] = pd_wengine_new(&d->cfg[D], NULL);
  PDT_TRUE(d->e[P] && d->e[D] && d->log);
  return d->e[P] && d->e[D] && d->log ? 0 : -1;
}

static void vd_free(vdrv_t *d) {
  pd_wengine_del(d->e[P]);
  pd_wengine_del(d->e[D]);
  free(d->log);
}

/* Log an engine step's actions; carry the cross-engine ones over at once. */
static void vd_take(vdrv_t *d, int eng, int rc, pd_wact_buf_t *out) {
  PDT_EQ_INT(rc == PD_ERR_NOT_FOUND ? 0 : rc, 0);
  PDT_EQ_INT(out->err, 0);
  for (size_t i = 0; i < out->n; i++) {
    const pd_wact_t *a = &out->v[i];
    if (d->n < LOG_MAX) d->log[d->n++] = (rec_t){*a, eng, d->now / MS};
    else d->overflow = 1;
    pd_wact_buf_t sub;
    pd_wact_buf_init(&sub, NULL);
    int to = -1, r = 0;
    if (eng == D && a->kind == PD_WACT_PULL)
      to = P, r = pd_wengine_pull(d->e[P], d->now, a->id, a->b, &sub);
    else if (eng == D && a->kind == PD_WACT_NOTIFY)
      to = P, r = pd_wengine_notify(d->e[P], d->now, a->b, (int)a->a, &sub);
    else if (eng == D && a->kind == PD_WACT_HEARTBEAT)
      to = P, r = pd_wengine_heartbeat(d->e[P], d->now, a->b, &sub);
    else if (eng == P && a->kind == PD_WACT_PULLED)
      to = D, r = pd_wengine_pulled(d->e[D], d->now, a->b, (int)a->a, &sub);
    if (to >= 0) vd_take(d, to, r, &sub);
    pd_wact_buf_free(&sub);
  }
  pd_wact_buf_reset(out);
}

/* Fire both engines' deadlines up to t_ms in time order, then stand at t_ms. */
static void vd_to(vdrv_t *d, uint64_t t_ms) {
  uint64_t t = t_ms * MS;
  pd_wact_buf_t out;
  pd_wact_buf_init(&out, NULL);
  for (unsigned i = 0; i < STEPS_MAX; i++) {
    uint64_t np = pd_wengine_next_expiry(d->e[P]), nd = pd_wengine_next_expiry(d->e[D]);
    int eng = np <= nd ? P : D;
    uint64_t nx = np <= nd ? np : nd;
    if (nx == UINT64_MAX || nx > t) break;
    if (nx > d->now) d->now = nx;
    vd_take(d, eng, pd_wengine_expire(d->e[eng], d->now, &out), &out);
    if (i + 1 == STEPS_MAX) d->stuck = 1;
  }
  pd_wact_buf_free(&out);
  PDT_FALSE(d->stuck);
  if (t > d->now) d->now = t;
}

static pd_wengine_req_t vreq(int kv_mode, uint32_t prompt, uint32_t max_tokens) {
  pd_wengine_req_t r = {0};
  r.kv_mode = kv_mode;
  r.kv_key = KEY;
  r.prompt_tokens = prompt;
  r.max_tokens = max_tokens;
  r.tokens = 3;
  r.request = PD_TRAFFIC_FAULT_ANY;
  r.leg_no = 1;
  return r;
}

static int vd_open(vdrv_t *d, int eng, uint64_t t_ms, uint64_t id, pd_wengine_req_t r) {
  vd_to(d, t_ms);
  pd_wact_buf_t out;
  pd_wact_buf_init(&out, NULL);
  int rc = pd_wengine_open(d->e[eng], d->now, id, &r, &out);
  vd_take(d, eng, rc, &out);
  pd_wact_buf_free(&out);
  return rc;
}

/* close (is_abort 0) or /abort_request (1) */
static int vd_end(vdrv_t *d, int eng, uint64_t t_ms, uint64_t id, int is_abort) {
  vd_to(d, t_ms);
  pd_wact_buf_t out;
  pd_wact_buf_init(&out, NULL);
  int rc = is_abort ? pd_wengine_abort(d->e[eng], d->now, id, &out)
                    : pd_wengine_close(d->e[eng], d->now, id, &out);
  vd_take(d, eng, rc == PD_ERR_NOT_FOUND ? 0 : rc, &out);
  pd_wact_buf_free(&out);
  return rc;
}

/* Index of the first action of kind on engine eng (a < 0: any a), or -1. */
static long vfind(const vdrv_t *d, int eng, uint32_t kind, long a) {
  for (size_t i = 0; i < d->n; i++)
    if (d->log[i].eng == eng && d->log[i].a.kind == kind && (a < 0 || d->log[i].a.a == a))
      return (long)i;
  return -1;
}
static size_t vcount(const vdrv_t *d, int eng, uint32_t kind) {
  size_t c = 0;
  for (size_t i = 0; i < d->n; i++) c += d->log[i].eng == eng && d->log[i].a.kind == kind;
  return c;
}
static long vlast(const vdrv_t *d, int eng, uint32_t kind) {
  for (size_t i = d->n; i-- > 0;)
    if (d->log[i].eng == eng && d->log[i].a.kind == kind) return (long)i;
  return -1;
}
static uint64_t vat(const vdrv_t *d, long i) { return i < 0 ? UINT64_MAX : d->log[i].at_ms; }

static uint64_t kv_used(const vdrv_t *d, int eng) {
  pd_wengine_stats_t st;
  pd_wengine_stats(d->e[eng], &st);
  return st.kv_used_pages;
}
static uint32_t pinned(const vdrv_t *d) {
  pd_wengine_stats_t st;
  pd_wengine_stats(d->e[P], &st);
  return st.pinned;
}

/* A length-capped prefill (100 tokens, page 1) answers at 20 ms (forward_ms) and pins. */
static void pin_one(vdrv_t *d) {
  PDT_EQ_INT(vd_open(d, P, 0, 1, vreq(PD_KV_MODE_REMOTE_DECODE, 100, 1)), 0);
  vd_to(d, 20);
  long body = vfind(d, P, PD_WACT_SEND, PD_WIRE_VLLM_PREFILL_BODY);
  PDT_EQ_U64(vat(d, body), 20);
  if (body >= 0) PDT_EQ_U64(d->log[body].a.b, 100); /* 100 blocks listed */
  long pin = vfind(d, P, PD_WACT_PIN, PD_WENGINE_PIN_HELD);
  PDT_EQ_U64(vat(d, pin), 20);
  if (pin >= 0) {
    PDT_EQ_U64(d->log[pin].a.b, 100);
    PDT_EQ_U64(d->log[pin].a.c, KEY);
    PDT_EQ_U64(d->log[pin].a.id, 1);
  }
  long done = vfind(d, P, PD_WACT_DONE, PD_TRUTH_OK);
  PDT_EQ_U64(vat(d, done), 20); /* the exchange is over; the KV stays */
  PDT_EQ_U64(kv_used(d, P), 100);
  PDT_EQ_U64(pinned(d), 1);
}

/* ---------- prefill pins until decode reads ---------- */

static void test_prefill_pins_until_decode_reads(void) {
  vdrv_t d;
  vd_init(&d);
  if (vd_start(&d) == 0) {
    pin_one(&d);
    vd_to(&d, 1000);
    PDT_EQ_U64(kv_used(&d, P), 100); /* nobody read it yet */
    PDT_EQ_INT(vd_open(&d, D, 1000, 2, vreq(PD_KV_MODE_REMOTE_PREFILL, 100, 0)), 0);
    long pull = vfind(&d, D, PD_WACT_PULL, -1);
    PDT_EQ_U64(vat(&d, pull), 1000); /* reserved at once, then the read */
    if (pull >= 0) PDT_EQ_U64(d.log[pull].a.b, KEY);
    PDT_EQ_U64(vat(&d, vfind(&d, P, PD_WACT_PULLED, PD_WENGINE_READ_OK)), 1000);
    PDT_TRUE(vfind(&d, D, PD_WACT_KV, -1) < pull); /* destination KV reserved first (V1.9) */
    vd_to(&d, 1004);
    PDT_EQ_U64(kv_used(&d, P), 100); /* the read takes the decode's kv_ms (5) */
    vd_to(&d, 1005);
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_NOTIFY, PD_WENGINE_NOTIFY_READ)), 1005);
    PDT_EQ_U64(vat(&d, vfind(&d, P, PD_WACT_PIN, PD_WENGINE_PIN_READ)), 1005);
    PDT_EQ_U64(kv_used(&d, P), 0);
    PDT_EQ_U64(pinned(&d), 0);
    PDT_TRUE(vfind(&d, D, PD_WACT_KV_FROM, PD_WENGINE_KV_FROM_READ) >= 0);
    vd_to(&d, 2000);
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_DONE, PD_TRUTH_OK)), 1015 + 2 * 5);
    PDT_EQ_U64(vcount(&d, D, PD_WACT_HEARTBEAT), 0); /* timeout mode: none */
    PDT_EQ_U64(kv_used(&d, D), 0);
  }
  vd_free(&d);
}

static void test_timeout_mode_frees_at_480_s(void) {
  vdrv_t d;
  vd_init(&d);
  if (vd_start(&d) == 0) {
    pin_one(&d);
    vd_to(&d, 20 + 480000 - 1);
    PDT_EQ_U64(kv_used(&d, P), 100);
    PDT_EQ_INT(vfind(&d, P, PD_WACT_PIN, PD_WENGINE_PIN_EXPIRED), -1);
    vd_to(&d, 20 + 480000);
    PDT_EQ_U64(vat(&d, vfind(&d, P, PD_WACT_PIN, PD_WENGINE_PIN_EXPIRED)), 480020);
    PDT_EQ_U64(kv_used(&d, P), 0);
    PDT_EQ_U64(pinned(&d), 0);
  }
  vd_free(&d);
}

static void test_lease_expires_without_heartbeats(void) {
  vdrv_t d;
  vd_init(&d);
  d.spec[P].kv_expiry = d.spec[D].kv_expiry = PD_KV_EXPIRY_LEASE;
  if (vd_start(&d) == 0) {
    pin_one(&d);
    vd_to(&d, 20 + 30000 - 1);
    PDT_EQ_U64(kv_used(&d, P), 100);
    vd_to(&d, 20 + 30000);
    PDT_EQ_U64(vat(&d, vfind(&d, P, PD_WACT_PIN, PD_WENGINE_PIN_EXPIRED)), 30020);
    PDT_EQ_U64(kv_used(&d, P), 0);
  }
  vd_free(&d);
}

/* Decode holds one running slot with a long local request, so the vLLM one waits queued and
 * heartbeats (every 5 s) keep the prefill's lease alive past 30 s; its close while queued
 * sends an empty-read notification that frees the prefill at once (V1.17). */
static void test_heartbeats_keep_the_lease_and_an_early_close_frees(void) {
  vdrv_t d;
  vd_init(&d);
  d.spec[P].kv_expiry = d.spec[D].kv_expiry = PD_KV_EXPIRY_LEASE;
  d.spec[D].max_running = 1;
  d.spec[D].token_ms = 10000;
  if (vd_start(&d) == 0) {
    pd_wengine_req_t busy = vreq(PD_KV_MODE_NONE, 10, 0);
    busy.tokens = 20; /* 200 s of tokens */
    PDT_EQ_INT(vd_open(&d, D, 0, 9, busy), 0);
    pin_one(&d);
    PDT_EQ_INT(vd_open(&d, D, 1000, 2, vreq(PD_KV_MODE_REMOTE_PREFILL, 100, 0)), 0);
    PDT_EQ_INT(pd_wengine_leg_state(d.e[D], 2), PD_WORKER_LEG_QUEUED);
    vd_to(&d, 90000);
    PDT_EQ_U64(kv_used(&d, P), 100); /* three times the lease, still pinned */
    PDT_EQ_INT(vfind(&d, P, PD_WACT_PIN, PD_WENGINE_PIN_EXPIRED), -1);
    long hb = vfind(&d, D, PD_WACT_HEARTBEAT, -1);
    PDT_EQ_U64(vat(&d, hb), 6000); /* lease / 6 after its arrival */
    PDT_TRUE(vcount(&d, D, PD_WACT_HEARTBEAT) >= 17);
    PDT_EQ_INT(vfind(&d, D, PD_WACT_PULL, -1), -1); /* never admitted */
    PDT_EQ_INT(vd_end(&d, D, 90000, 2, 0), 0);
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_NOTIFY, PD_WENGINE_NOTIFY_EMPTY)), 90000);
    PDT_EQ_U64(vat(&d, vfind(&d, P, PD_WACT_PIN, PD_WENGINE_PIN_EMPTY)), 90000);
    PDT_EQ_U64(kv_used(&d, P), 0);
    size_t hbs = vcount(&d, D, PD_WACT_HEARTBEAT);
    vd_to(&d, 120000);
    PDT_EQ_U64(vcount(&d, D, PD_WACT_HEARTBEAT), hbs); /* tracking stopped */
  }
  vd_free(&d);
}

/* kv_heartbeat_ms sets decode's period; a prefill in timeout mode ignores heartbeats. */
static void test_heartbeat_period_and_timeout_mode_ignores_them(void) {
  vdrv_t d;
  vd_init(&d);
  d.spec[D].kv_expiry = PD_KV_EXPIRY_LEASE; /* the prefill stays in timeout mode */
  d.spec[D].kv_heartbeat_ms = 2000;
  d.spec[D].max_running = 1;
  d.spec[D].token_ms = 100000;
  if (vd_start(&d) == 0) {
    pd_wengine_req_t busy = vreq(PD_KV_MODE_NONE, 10, 0);
    busy.tokens = 10;
    PDT_EQ_INT(vd_open(&d, D, 0, 9, busy), 0);
    pin_one(&d);
    PDT_EQ_INT(vd_open(&d, D, 1000, 2, vreq(PD_KV_MODE_REMOTE_PREFILL, 100, 0)), 0);
    vd_to(&d, 10000);
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_HEARTBEAT, -1)), 3000);
    PDT_EQ_U64(vcount(&d, D, PD_WACT_HEARTBEAT), 4); /* 3, 5, 7, 9 s */
    vd_to(&d, 480019);
    PDT_EQ_U64(kv_used(&d, P), 100);
    vd_to(&d, 480020); /* the timeout, heartbeats or not */
    PDT_EQ_U64(kv_used(&d, P), 0);
  }
  vd_free(&d);
}

/* ---------- V1.6, V1.8, V1.15, V1.16, V1.18 ---------- */

static void test_not_length_capped_answers_null_and_frees(void) {
  vdrv_t d;
  vd_init(&d);
  if (vd_start(&d) == 0) {
    PDT_EQ_INT(vd_open(&d, P, 0, 1, vreq(PD_KV_MODE_REMOTE_DECODE, 100, 0)), 0);
    vd_to(&d, 20);
    long body = vfind(&d, P, PD_WACT_SEND, PD_WIRE_VLLM_PREFILL_BODY);
    PDT_EQ_U64(vat(&d, body), 20);
    if (body >= 0) PDT_EQ_U64(d.log[body].a.b, 0); /* null params */
    PDT_EQ_U64(vcount(&d, P, PD_WACT_PIN), 0);
    PDT_EQ_U64(kv_used(&d, P), 0);
    PDT_EQ_U64(vat(&d, vfind(&d, P, PD_WACT_KV, 0)), 20);
  }
  vd_free(&d);
}

/* kv_params: a prefill whose one token ends as a stop answers null and frees at once (V1.6);
 * an older one answers params without remote_request_id, pins, and decode finds them invalid
 * (V1.5, V1.8). */
static void test_kv_params_null_and_invalid(void) {
  for (int invalid = 0; invalid < 2; invalid++) {
    vdrv_t d;
    vd_init(&d);
    d.spec[P].kv_params = invalid ? PD_KV_PARAMS_INVALID : PD_KV_PARAMS_NULL;
    if (vd_start(&d) == 0) {
      PDT_EQ_INT(vd_open(&d, P, 0, 1, vreq(PD_KV_MODE_REMOTE_DECODE, 100, 1)), 0);
      vd_to(&d, 20);
      long body = vfind(&d, P, PD_WACT_SEND, PD_WIRE_VLLM_PREFILL_BODY);
      PDT_EQ_U64(vat(&d, body), 20);
      if (body >= 0) PDT_EQ_U64(d.log[body].a.b, invalid ? 100 | PD_WIRE_NO_RID : 0);
      PDT_EQ_U64(vcount(&d, P, PD_WACT_PIN), (uint64_t)invalid);
      PDT_EQ_U64(kv_used(&d, P), invalid ? 100 : 0);
    }
    vd_free(&d);
  }
  char buf[16384]; /* the invalid answer's bytes: decode reads them back as invalid */
  pd_wire_leg_t leg = {"r-1", 0, 0, 1, NULL};
  pd_wire_vllm_t v = {"p0", "p0", 5600};
  size_t n = pd_wire_render_vllm(&leg, &v, PD_WIRE_VLLM_PREFILL_BODY, 3 | PD_WIRE_NO_RID, buf,
                                 sizeof buf);
  PDT_TRUE(n > 0 && n < sizeof buf);
  buf[n < sizeof buf ? n : 0] = 0;
  PDT_TRUE(strstr(buf, "remote_request_id") == NULL);
  PDT_TRUE(strstr(buf, "\"finish_reason\":\"length\"") != NULL);
  cJSON *j = cJSON_Parse(buf);
  PDT_TRUE(j != NULL);
  pd_worker_body_t b;
  if (j && pd_worker_body_read(&b, j, buf, n, NULL, NULL, 0) == 0) {
    PDT_EQ_U64(b.kvp.n_block_ids, 3);
    PDT_EQ_INT(pd_worker_kvp_mode(&b.kvp, 1), PD_KV_MODE_INVALID);
  } else {
    PDT_TRUE(0);
  }
  cJSON_Delete(j);
}

/* kv_params unknown_engine: pinned as valid ones, the answer complete (valid to decode, V1.8)
 * but its remote_engine_id and remote_host naming no engine (a name longer than any worker's),
 * so no decode's read can find the prefill (V1.22: sf-prefill-params-name-unknown-engine). */
static void test_kv_params_unknown_engine(void) {
  vdrv_t d;
  vd_init(&d);
  d.spec[P].kv_params = PD_KV_PARAMS_UNKNOWN_ENGINE;
  if (vd_start(&d) == 0) {
    PDT_EQ_INT(vd_open(&d, P, 0, 1, vreq(PD_KV_MODE_REMOTE_DECODE, 100, 1)), 0);
    vd_to(&d, 20);
    long body = vfind(&d, P, PD_WACT_SEND, PD_WIRE_VLLM_PREFILL_BODY);
    if (body >= 0) PDT_EQ_U64(d.log[body].a.b, 100 | PD_WIRE_UNKNOWN_ENGINE);
    PDT_EQ_U64(vcount(&d, P, PD_WACT_PIN), 1);
    PDT_EQ_U64(kv_used(&d, P), 100);
  }
  vd_free(&d);
  char buf[16384];
  pd_wire_leg_t leg = {"r-1", 0, 0, 1, NULL};
  pd_wire_vllm_t v = {"p0", "p0", 5600};
  size_t n = pd_wire_render_vllm(&leg, &v, PD_WIRE_VLLM_PREFILL_BODY, 3 | PD_WIRE_UNKNOWN_ENGINE,
                                 buf, sizeof buf);
  PDT_TRUE(n > 0 && n < sizeof buf);
  buf[n < sizeof buf ? n : 0] = 0;
  PDT_TRUE(strlen(PD_WIRE_UNKNOWN_ENGINE_NAME) > 31); /* no worker's name (1..31 bytes) */
  cJSON *j = cJSON_Parse(buf);
  pd_worker_body_t b;
  if (j && pd_worker_body_read(&b, j, buf, n, NULL, NULL, 0) == 0) {
    PDT_EQ_U64(b.kvp.n_block_ids, 3);
    PDT_EQ_STR(b.kvp.engine_id, PD_WIRE_UNKNOWN_ENGINE_NAME);
    PDT_EQ_STR(b.kvp.host, PD_WIRE_UNKNOWN_ENGINE_NAME);
    PDT_EQ_STR(b.kvp.request_id, "r-1");
    PDT_EQ_INT(pd_worker_kvp_mode(&b.kvp, 1), PD_KV_MODE_REMOTE_PREFILL); /* valid: it reads */
  } else {
    PDT_TRUE(0);
  }
  cJSON_Delete(j);
  static const char doc[] = /* the scenario key reads and writes back */
      "{\"name\":\"t\",\"workers\":[{\"name\":\"p0\",\"role\":\"prefill\",\"protocol\":\"vllm\","
      "\"kv_params\":\"unknown_engine\"},{\"name\":\"d0\",\"role\":\"decode\"}],\"expect\":{}}";
  pd_scenario_t *s = malloc(sizeof *s);
  char err[1024] = "", *txt = NULL;
  size_t len = 0;
  if (s && pd_scenario_parse(s, "s.json", doc, strlen(doc), err, sizeof err) == 0 &&
      pd_scenario_write_json(s, &txt, &len) == 0) {
    PDT_EQ_INT(s->workers[0].kv_params, PD_KV_PARAMS_UNKNOWN_ENGINE);
    PDT_TRUE(strstr(txt, "\"unknown_engine\"") != NULL);
  } else {
    PDT_TRUE(0);
  }
  free(txt);
  free(s);
}

static void test_invalid_params_compute_locally(void) {
  vdrv_t d;
  vd_init(&d);
  if (vd_start(&d) == 0) {
    PDT_EQ_INT(vd_open(&d, D, 0, 2, vreq(PD_KV_MODE_INVALID, 100, 0)), 0);
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_KV_FROM, PD_WENGINE_KV_FROM_LOCAL)), 0);
    vd_to(&d, 1000);
    PDT_EQ_INT(vfind(&d, D, PD_WACT_PULL, -1), -1);
    PDT_EQ_INT(vfind(&d, D, PD_WACT_NOTIFY, -1), -1);
    /* forward_ms 20 here, first token 10 later, then 3 tokens 5 ms apart */
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_DONE, PD_TRUTH_OK)), 20 + 10 + 2 * 5);
  }
  vd_free(&d);
}

static void test_read_after_expiry_succeeds_and_is_marked(void) {
  vdrv_t d;
  vd_init(&d);
  d.spec[P].kv_abort_timeout_ms = 1000;
  if (vd_start(&d) == 0) {
    pin_one(&d);
    vd_to(&d, 1020);
    PDT_EQ_U64(kv_used(&d, P), 0); /* expired */
    PDT_EQ_INT(vd_open(&d, D, 5000, 2, vreq(PD_KV_MODE_REMOTE_PREFILL, 100, 0)), 0);
    PDT_EQ_U64(vat(&d, vfind(&d, P, PD_WACT_PULLED, PD_WENGINE_READ_STALE)), 5000);
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_KV_FROM, PD_WENGINE_KV_FROM_STALE)), 5000);
    vd_to(&d, 6000);
    PDT_EQ_INT(vfind(&d, D, PD_WACT_KV_FROM, PD_WENGINE_KV_FROM_READ), -1);
    PDT_EQ_INT(vfind(&d, D, PD_WACT_HEAD, 500), -1);
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_DONE, PD_TRUTH_OK)), 5000 + 5 + 10 + 2 * 5);
  }
  vd_free(&d);
}

static void test_rejection_notifies_and_frees_at_once(void) {
  vdrv_t d;
  vd_init(&d);
  d.spec[D].kv_tokens = 50; /* the 100-token prompt never fits: 400 (V1.29) */
  if (vd_start(&d) == 0) {
    pin_one(&d);
    PDT_EQ_INT(vd_open(&d, D, 500, 2, vreq(PD_KV_MODE_REMOTE_PREFILL, 100, 0)), 0);
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_REJECT, 400)), 500);
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_NOTIFY, PD_WENGINE_NOTIFY_REJECT)), 500);
    PDT_EQ_U64(vat(&d, vfind(&d, P, PD_WACT_PIN, PD_WENGINE_PIN_REJECTED)), 500);
    PDT_EQ_U64(kv_used(&d, P), 0);
  }
  vd_free(&d);
}

static void test_abort_does_not_free_pinned_kv(void) {
  vdrv_t d;
  vd_init(&d);
  if (vd_start(&d) == 0) {
    pin_one(&d);
    PDT_EQ_INT(vd_end(&d, P, 100, 1, 1), PD_ERR_NOT_FOUND); /* /abort_request: nothing */
    PDT_EQ_INT(vd_end(&d, P, 200, 1, 0), PD_ERR_NOT_FOUND); /* a late close: nothing */
    vd_to(&d, 300000);
    PDT_EQ_U64(kv_used(&d, P), 100);
    PDT_EQ_U64(vcount(&d, P, PD_WACT_PIN), 1); /* only the HELD */
  }
  vd_free(&d);
}

/* V1.22: a read that fails (the prefill died; a kv_fail fault) answers 500 on decode. A
 * crash frees the pins (the process is gone); a kv_fail pin stays until its timer. */
static void test_failed_reads_answer_500(void) {
  vdrv_t d;
  vd_init(&d);
  pd_fault_t kvf = {PD_FAULT_KV_FAIL, 0, 0, 0, 2, 2, 1.0}; /* the prefill's 2nd request */
  d.spec[P].faults[0] = kvf;
  d.spec[P].n_faults = 1;
  if (vd_start(&d) == 0) {
    pin_one(&d);
    pd_wact_buf_t out;
    pd_wact_buf_init(&out, NULL);
    vd_to(&d, 100);
    vd_take(&d, P, pd_wengine_crash(d.e[P], d.now, &out), &out);
    PDT_EQ_U64(vat(&d, vfind(&d, P, PD_WACT_PIN, PD_WENGINE_PIN_CRASH)), 100);
    PDT_EQ_U64(kv_used(&d, P), 0);
    PDT_EQ_INT(vd_open(&d, D, 200, 2, vreq(PD_KV_MODE_REMOTE_PREFILL, 100, 1)), 0);
    PDT_EQ_U64(vat(&d, vfind(&d, P, PD_WACT_PULLED, PD_WENGINE_READ_FAILED)), 200);
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_HEAD, 500)), 200);
    PDT_EQ_U64(vat(&d, vfind(&d, D, PD_WACT_DONE, PD_TRUTH_FAILED)), 200);
    PDT_EQ_INT(vfind(&d, D, PD_WACT_NOTIFY, -1), -1); /* nothing to tell */
    vd_take(&d, P, pd_wengine_restart(d.e[P], d.now, &out), &out);
    PDT_EQ_INT(vd_open(&d, P, 300, 3, vreq(PD_KV_MODE_REMOTE_DECODE, 100, 1)), 0);
    vd_to(&d, 320);
    PDT_EQ_U64(kv_used(&d, P), 100); /* pinned, with its kv_fail fault */
    PDT_EQ_INT(vd_open(&d, D, 400, 4, vreq(PD_KV_MODE_REMOTE_PREFILL, 100, 1)), 0);
    long h = vlast(&d, D, PD_WACT_HEAD), done = vlast(&d, D, PD_WACT_DONE);
    PDT_EQ_U64(vat(&d, h), 400);
    PDT_EQ_U64(vat(&d, done), 400);
    if (h >= 0 && done >= 0) {
      PDT_EQ_U64(d.log[h].a.id, 4);
      PDT_EQ_INT(d.log[h].a.a, 500);
      PDT_EQ_INT(d.log[done].a.a, PD_TRUTH_FAILED);
    }
    PDT_TRUE(vfind(&d, P, PD_WACT_FIRED, -1) >= 0); /* the prefill's kv_fail took effect */
    PDT_EQ_U64(kv_used(&d, P), 100); /* no notification after a failed read */
    vd_to(&d, 320 + 480000);
    PDT_EQ_U64(kv_used(&d, P), 0);
    pd_wact_buf_free(&out);
  }
  vd_free(&d);
}

/* ---------- the body, the bytes, the scenario keys ---------- */

static int read_body(pd_worker_body_t *b, const char *txt) {
  cJSON *j = cJSON_Parse(txt);
  PDT_TRUE(j != NULL);
  if (!j) return -1;
  char err[128] = "";
  int rc = pd_worker_body_read(b, j, txt, strlen(txt), NULL, err, sizeof err);
  cJSON_Delete(j);
  free(b->rooms);
  return rc;
}

static void test_body_reads_kv_transfer_params(void) {
  pd_worker_body_t b;
  PDT_EQ_INT(read_body(&b, "{\"prompt\":\"a b c\",\"max_tokens\":1,\"kv_transfer_params\":"
                           "{\"do_remote_decode\":true,\"do_remote_prefill\":false,"
                           "\"remote_engine_id\":null,\"remote_block_ids\":null,"
                           "\"remote_host\":null,\"remote_port\":null}}"), 0);
  PDT_EQ_U64(b.max_tokens, 1);
  PDT_EQ_INT(b.has_max_tokens, 1);
  PDT_EQ_INT(pd_worker_kvp_mode(&b.kvp, 0), PD_KV_MODE_REMOTE_DECODE);
  PDT_EQ_INT(pd_worker_kvp_mode(&b.kvp, 1), PD_KV_MODE_NONE);
  const char *full = "{\"prompt\":\"a\",\"max_completion_tokens\":7,\"kv_transfer_params\":"
                     "{\"do_remote_prefill\":true,\"do_remote_decode\":false,"
                     "\"remote_engine_id\":\"p0\",\"remote_block_ids\":[[1,2],[3]],"
                     "\"remote_request_id\":\"req-9\",\"remote_host\":\"h\","
                     "\"remote_port\":5601}}";
  PDT_EQ_INT(read_body(&b, full), 0);
  PDT_EQ_U64(b.max_tokens, 7);
  PDT_EQ_STR(b.kvp.engine_id, "p0");
  PDT_EQ_STR(b.kvp.request_id, "req-9");
  PDT_EQ_STR(b.kvp.host, "h");
  PDT_EQ_INT(b.kvp.port, 5601);
  PDT_EQ_U64(b.kvp.n_block_ids, 3);
  PDT_EQ_INT(pd_worker_kvp_mode(&b.kvp, 1), PD_KV_MODE_REMOTE_PREFILL);
  PDT_EQ_U64(pd_worker_kv_key(b.kvp.request_id), pd_worker_kv_key("req-9"));
  PDT_TRUE(pd_worker_kv_key("req-9") != pd_worker_kv_key("req-8"));
  /* V1.8: remote_port missing -> invalid (local compute) */
  PDT_EQ_INT(read_body(&b, "{\"kv_transfer_params\":{\"do_remote_prefill\":true,"
                           "\"remote_engine_id\":\"p0\",\"remote_block_ids\":[1],"
                           "\"remote_request_id\":\"r\",\"remote_host\":\"h\"}}"), 0);
  PDT_EQ_INT(pd_worker_kvp_mode(&b.kvp, 1), PD_KV_MODE_INVALID);
  PDT_EQ_INT(read_body(&b, "{\"kv_transfer_params\":{\"do_remote_prefill\":true,"
                           "\"remote_engine_id\":\"p0\",\"remote_block_ids\":[1],"
                           "\"remote_request_id\":\"r\",\"remote_host\":\"h\","
                           "\"remote_port\":\"5600\"}}"), 0); /* a string port: missing */
  PDT_EQ_INT(pd_worker_kvp_mode(&b.kvp, 1), PD_KV_MODE_INVALID);
  PDT_EQ_INT(read_body(&b, "{\"kv_transfer_params\":null}"), 0);
  PDT_EQ_INT(b.kvp.is_present, 0);
  PDT_EQ_INT(b.has_max_tokens, 0);
  PDT_EQ_INT(read_body(&b, "{\"kv_transfer_params\":3}"), PD_ERR_FIELD);
}

static void test_prefill_answer_bytes(void) {
  char buf[16384];
  pd_wire_leg_t leg = {"r-1", 0, 0, 1, NULL};
  pd_wire_vllm_t v = {"p0", "p0", 5600};
  size_t n = pd_wire_render_vllm(&leg, &v, PD_WIRE_VLLM_PREFILL_BODY, 3, buf, sizeof buf);
  PDT_TRUE(n > 0 && n < sizeof buf);
  buf[n < sizeof buf ? n : 0] = 0;
  cJSON *j = cJSON_Parse(buf);
  PDT_TRUE(j != NULL);
  pd_worker_body_t b; /* decode reads what prefill wrote (V1.7: copied verbatim) */
  if (j) {
    PDT_EQ_INT(pd_worker_body_read(&b, j, buf, n, NULL, NULL, 0), 0);
    PDT_EQ_INT(pd_worker_kvp_mode(&b.kvp, 1), PD_KV_MODE_REMOTE_PREFILL);
    PDT_EQ_STR(b.kvp.request_id, "r-1");
    PDT_EQ_U64(b.kvp.n_block_ids, 3);
    PDT_EQ_INT(b.kvp.port, 5600);
    cJSON_Delete(j);
  }
  PDT_TRUE(strstr(buf, "\"finish_reason\":\"length\"") != NULL);
  n = pd_wire_render_vllm(&leg, &v, PD_WIRE_VLLM_PREFILL_BODY, 0, buf, sizeof buf);
  buf[n < sizeof buf ? n : 0] = 0;
  PDT_TRUE(strstr(buf, "\"kv_transfer_params\":null}") != NULL);
  PDT_TRUE(strstr(buf, "\"finish_reason\":\"stop\"") != NULL);
  n = pd_wire_render_vllm(&leg, &v, PD_WIRE_ERROR_BODY, 400, buf, sizeof buf);
  buf[n < sizeof buf ? n : 0] = 0;
  PDT_EQ_STR(buf, "{\"error\":{\"message\":\"worker returned 400\",\"type\":\"BadRequestError\","
                  "\"param\":null,\"code\":400}}");
  PDT_TRUE(pd_wire_render_cap(&leg, PD_WIRE_VLLM_PREFILL_BODY) >
           pd_wire_render_vllm(&leg, &v, PD_WIRE_VLLM_PREFILL_BODY, PD_WIRE_MAX_BLOCKS + 5, buf,
                               sizeof buf));
}

static void test_scenario_protocol_keys_round_trip(void) {
  static const char doc[] =
      "{\"name\":\"t\",\"workers\":[{\"name\":\"p0\",\"role\":\"prefill\",\"protocol\":\"vllm\","
      "\"kv_expiry\":\"lease\",\"kv_lease_ms\":60000,\"kv_heartbeat_ms\":2000,"
      "\"kv_params\":\"invalid\"},"
      "{\"name\":\"d0\",\"role\":\"decode\",\"protocol\":\"vllm\",\"kv_abort_timeout_ms\":"
      "120000}],\"expect\":{}}";
  pd_scenario_t *s = malloc(sizeof *s), *t = malloc(sizeof *t);
  char err[1024] = "", *txt = NULL, *txt2 = NULL;
  size_t len = 0, len2 = 0;
  if (s && t && pd_scenario_parse(s, "s.json", doc, strlen(doc), err, sizeof err) == 0 &&
      pd_scenario_write_json(s, &txt, &len) == 0) {
    PDT_EQ_INT(s->workers[0].protocol, PD_PROTOCOL_VLLM);
    PDT_EQ_INT(s->workers[0].kv_expiry, PD_KV_EXPIRY_LEASE);
    PDT_EQ_INT(s->workers[0].kv_params, PD_KV_PARAMS_INVALID);
    PDT_EQ_INT(s->workers[1].kv_params, PD_KV_PARAMS_VALID); /* default */
    PDT_EQ_U64(s->workers[0].kv_lease_ms, 60000);
    PDT_EQ_U64(s->workers[0].kv_abort_timeout_ms, 480000); /* default */
    PDT_EQ_U64(s->workers[1].kv_abort_timeout_ms, 120000);
    PDT_EQ_U64(s->workers[1].kv_lease_ms, 30000); /* default */
    PDT_EQ_INT(pd_scenario_parse(t, "b.json", txt, len, err, sizeof err), 0);
    PDT_EQ_INT(pd_scenario_write_json(t, &txt2, &len2), 0);
    PDT_EQ_STR(txt2, txt);
    PDT_TRUE(memcmp(&s->workers[0], &t->workers[0], sizeof s->workers[0]) == 0);
    PDT_TRUE(memcmp(&s->workers[1], &t->workers[1], sizeof s->workers[1]) == 0);
    PDT_TRUE(strstr(txt, "\"protocol\": \"vllm\"") != NULL);
    const char *ab = strstr(txt, "\"kv_abort_timeout_ms\": 120000"); /* d0 only: p0's default */
    PDT_TRUE(ab != NULL && ab == strstr(txt, "kv_abort_timeout_ms") - 1);
  } else {
    PDT_EQ_STR(err, "");
    PDT_TRUE(0);
  }
  static const char bad[] = "{\"name\":\"t\",\"workers\":[{\"name\":\"p0\",\"role\":\"prefill\","
                            "\"protocol\":\"nixl\"},{\"name\":\"d0\",\"role\":\"decode\"}],"
                            "\"expect\":{}}";
  if (t) {
    PDT_EQ_INT(pd_scenario_parse(t, "s.json", bad, strlen(bad), err, sizeof err), PD_ERR_FIELD);
    PDT_TRUE(strstr(err, "$.workers[0].protocol") != NULL);
  }
  free(txt);
  free(txt2);
  free(s);
  free(t);
}

/* ---------- the simulator's driver ---------- */

typedef struct seen {
  int n, decode_from, prefill_mode, decode_mode, decode_node;
  pd_truth_t truth[2];
} seen_t;

static void on_leg(void *ud, const pd_worker_leg_t *leg, const char *worker) {
  seen_t *s = ud;
  (void)worker;
  s->n++;
  s->truth[leg->role == PD_ROLE_DECODE] = leg->truth;
  if (leg->role == PD_ROLE_DECODE) {
    s->decode_from = leg->kv_from;
    s->decode_mode = leg->kv_mode;
    s->decode_node = leg->kv_node;
  } else {
    s->prefill_mode = leg->kv_mode;
  }
}

/* vLLM workers behind an SGLang gateway mode (joined: it speaks only SGLang's protocol; the
 * reference speaks a vLLM scenario's, R-SF-*) get no kv_transfer_params: the sim's driver
 * gives them kv_mode none, and decode computes locally (the KV_FROM mark reaches the leg). */
static void test_sim_driver_marks_local_compute(void) {
  static const char doc[] =
      "{\"name\":\"t\",\"workers\":[{\"name\":\"p0\",\"role\":\"prefill\",\"protocol\":\"vllm\"},"
      "{\"name\":\"d0\",\"role\":\"decode\",\"protocol\":\"vllm\"}],"
      "\"workload\":{\"requests\":1,\"stream\":true},\"expect\":{}}";
  pd_scenario_t *sc = malloc(sizeof *sc);
  char err[1024] = "";
  seen_t seen = {0};
  pd_world_stats_t st;
  uint32_t viol = 0;
  uint64_t hash = 0;
  if (sc && pd_scenario_parse(sc, "s.json", doc, strlen(doc), err, sizeof err) == 0) {
    pd_world_opts_t o = {0};
    PDT_EQ_INT(pd_world_run_legs(sc, PD_MODE_JOINED, sc->config.seed, &o, on_leg, &seen, &st,
                                 &viol, &hash), 0);
    PDT_EQ_U64(viol, 0);
    PDT_EQ_INT(seen.n, 2);
    PDT_EQ_INT(seen.truth[0], PD_TRUTH_OK);
    PDT_EQ_INT(seen.truth[1], PD_TRUTH_OK);
    PDT_EQ_INT(seen.prefill_mode, PD_KV_MODE_NONE);
    PDT_EQ_INT(seen.decode_mode, PD_KV_MODE_NONE);
    PDT_EQ_INT(seen.decode_node, -1);
    PDT_EQ_INT(seen.decode_from, PD_WENGINE_KV_FROM_LOCAL);
  } else {
    PDT_EQ_STR(err, "");
  }
  free(sc);
}

int pdt_suite_wengine_vllm(void) {
  static const pdt_case_t cases[] = {
      {"vLLM prefill pins its KV after answering until decode's read is done (V1.5, V1.11)",
       test_prefill_pins_until_decode_reads},
      {"timeout mode: unread pinned KV is freed at 480 s (V1.12)", test_timeout_mode_frees_at_480_s},
      {"lease mode: freed 30 s after pinning without heartbeats (V1.13)",
       test_lease_expires_without_heartbeats},
      {"lease mode: a queued decode's heartbeats keep it; its close frees at once (V1.13, V1.17)",
       test_heartbeats_keep_the_lease_and_an_early_close_frees},
      {"kv_heartbeat_ms sets the period; a prefill in timeout mode ignores heartbeats",
       test_heartbeat_period_and_timeout_mode_ignores_them},
      {"not capped by length: null params, KV freed at once (V1.6)",
       test_not_length_capped_answers_null_and_frees},
      {"decode with invalid params computes the prompt itself (V1.8)",
       test_invalid_params_compute_locally},
      {"kv_params null: null and freed (V1.6); invalid: pinned, no remote_request_id (V1.8)",
       test_kv_params_null_and_invalid},
      {"kv_params unknown_engine: pinned, complete, naming no engine (V1.22)",
       test_kv_params_unknown_engine},
      {"a read after expiry still succeeds and is marked stale (V1.15)",
       test_read_after_expiry_succeeds_and_is_marked},
      {"decode's rejection before admission frees the prefill at once (V1.18)",
       test_rejection_notifies_and_frees_at_once},
      {"no abort frees pinned KV (V1.16)", test_abort_does_not_free_pinned_kv},
      {"a failed read (prefill crashed, kv_fail) answers 500 on decode (V1.22)",
       test_failed_reads_answer_500},
      {"body parser: kv_transfer_params and max_tokens (V1.1, V1.7, V1.8)",
       test_body_reads_kv_transfer_params},
      {"prefill answer bytes: params decode can read back, null, vLLM error body (V1.5, V1.28)",
       test_prefill_answer_bytes},
      {"scenario keys protocol / kv_expiry / kv_params / kv_* round trip",
       test_scenario_protocol_keys_round_trip},
      {"simulator: vLLM workers without params compute locally, marked on the leg",
       test_sim_driver_marks_local_compute},
  };
  return PDT_SUITE("wengine_vllm", cases);
}
