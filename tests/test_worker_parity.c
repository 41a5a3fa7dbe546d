/* One scenario, one seed: the two drivers of the one worker engine (mock_workers/pd_wengine.h)
 * -- the simulator (sim/pd_world_worker.c: virtual clock, rooms in memory) and the real mock
 * (`pdref mock`, mock_workers/server/pd_mock_drive.c: sockets, the bootstrap protocol, run by
 * pdref conform against `pdref gateway`) -- must leave the same per-leg worker log: for every
 * leg (request, role, worker) whether it took a slot, whether the slot was freed, the truth it
 * was freed with, the aborts it saw, and (vLLM decode) where its prompt's KV came from. The sim's log comes from pd_world_run_legs, the
 * mock's from its event log (--log; conform keeps the run directory). Aborts count every
 * /abort_request that named the leg's rid, also one that came after the worker was done.
 * Scenarios where the drivers could differ: a status answer at open (no slot), an error event
 * under a 200 head, a client gone mid-stream (the gateway aborts both legs), and capacity (a
 * decode's running limit queues legs; a prompt larger than its KV pool is refused). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_conform.h"
#include "pd_err.h"
#include "pd_worker_body.h"
#include "pd_world.h"
#include "pdt.h"
#include "pdt_net.h"

/* Slow enough that a loaded 2-core machine under ASan keeps each scenario's order of events
 * (at 0.01 a per-attempt timeout could fire before a healthy retry finished). */
#define SCALE 0.2
#define MAX_LEGS 64
#define LINE_MAX_ 160

typedef struct leg_rec {
  long long mock_id; /* the mock's "req" (mock side only) */
  int file;
  unsigned request;
  char role[8], worker[32], truth[12], rid[64], kv_from[8]; /* kv_from: vLLM decode, else "-" */
  int slot, freed;
  unsigned aborts;
} leg_rec_t;

typedef struct leg_log {
  leg_rec_t r[MAX_LEGS];
  int n, overflow;
} leg_log_t;

static const char *truth_name(pd_truth_t t) {
  static const char *names[] = {"pending", "ok", "failed", "stalled", "cancelled", "never"};
  return (unsigned)t < sizeof names / sizeof *names ? names[t] : "?";
}

static void on_sim_leg(void *ud, const pd_worker_leg_t *leg, const char *worker) {
  leg_log_t *lg = ud;
  if (lg->n >= MAX_LEGS) { lg->overflow = 1; return; }
  leg_rec_t *r = &lg->r[lg->n++];
  memset(r, 0, sizeof *r);
  r->request = (unsigned)leg->req_id;
  snprintf(r->role, sizeof r->role, "%s", leg->role == PD_ROLE_PREFILL ? "prefill" : "decode");
  snprintf(r->worker, sizeof r->worker, "%s", worker);
  r->slot = leg->slot_taken;
  r->freed = leg->slot_taken && leg->is_slot_freed;
  snprintf(r->truth, sizeof r->truth, "%s", r->freed ? truth_name(leg->truth) : "-");
  r->aborts = leg->aborts;
  static const char *from[] = {"-", "read", "stale", "local"};
  snprintf(r->kv_from, sizeof r->kv_from, "%s",
           (unsigned)leg->kv_from < sizeof from / sizeof *from ? from[leg->kv_from] : "?");
}

static leg_rec_t *mock_leg(leg_log_t *lg, int file, const cJSON *j) {
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "req");
  if (!cJSON_IsNumber(id)) return NULL;
  for (int i = 0; i < lg->n; i++)
    if (lg->r[i].file == file && lg->r[i].mock_id == (long long)id->valuedouble) return &lg->r[i];
  return NULL;
}

static void mock_request(leg_log_t *lg, int file, const cJSON *j) {
  if (lg->n >= MAX_LEGS) { lg->overflow = 1; return; }
  leg_rec_t *r = &lg->r[lg->n++];
  memset(r, 0, sizeof *r);
  r->file = file;
  r->mock_id = (long long)cJSON_GetObjectItemCaseSensitive(j, "req")->valuedouble;
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, "x_request_id");
  const char *dash = cJSON_IsString(x) ? strrchr(x->valuestring, '-') : NULL;
  r->request = dash ? (unsigned)strtoul(dash + 1, NULL, 10) : 9999u;
  const cJSON *rid = cJSON_GetObjectItemCaseSensitive(j, "rid");
  snprintf(r->rid, sizeof r->rid, "%s", cJSON_IsString(rid) ? rid->valuestring : "");
  const cJSON *role = cJSON_GetObjectItemCaseSensitive(j, "role");
  const cJSON *worker = cJSON_GetObjectItemCaseSensitive(j, "worker");
  snprintf(r->role, sizeof r->role, "%s", cJSON_IsString(role) ? role->valuestring : "?");
  snprintf(r->worker, sizeof r->worker, "%s", cJSON_IsString(worker) ? worker->valuestring : "?");
  snprintf(r->truth, sizeof r->truth, "-");
  snprintf(r->kv_from, sizeof r->kv_from, "-");
}

static void mock_line(leg_log_t *lg, int file, const cJSON *j) {
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(j, "ev");
  if (!cJSON_IsString(ev)) return;
  if (!strcmp(ev->valuestring, "request")) { mock_request(lg, file, j); return; }
  leg_rec_t *r = mock_leg(lg, file, j);
  if (!r && !strcmp(ev->valuestring, "abort")) { /* the leg was gone: an abort by rid prefix */
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "prefix");
    for (int i = 0; cJSON_IsString(p) && p->valuestring[0] && i < lg->n; i++)
      if (lg->r[i].file == file && !strncmp(lg->r[i].rid, p->valuestring, strlen(p->valuestring)))
        lg->r[i].aborts++;
    return;
  }
  if (!r) return;
  if (!strcmp(ev->valuestring, "slot_taken")) r->slot = 1;
  if (!strcmp(ev->valuestring, "abort")) r->aborts++;
  const cJSON *from = cJSON_GetObjectItemCaseSensitive(j, "from");
  if (!strcmp(ev->valuestring, "kv_from") && cJSON_IsString(from))
    snprintf(r->kv_from, sizeof r->kv_from, "%s", from->valuestring);
  if (!strcmp(ev->valuestring, "slot_freed")) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "truth");
    r->freed = 1;
    snprintf(r->truth, sizeof r->truth, "%s", cJSON_IsString(t) ? t->valuestring : "?");
  }
}

/* Every w<i>.jsonl of a kept conform run directory. */
static int read_mock_logs(const char *dir, uint32_t n_workers, leg_log_t *lg) {
  char path[600], line[8192];
  for (uint32_t i = 0; i < n_workers; i++) {
    snprintf(path, sizeof path, "%s/w%u.jsonl", dir, i);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
      cJSON *j = cJSON_Parse(line);
      if (j) mock_line(lg, (int)i, j);
      cJSON_Delete(j);
    }
    fclose(f);
  }
  return 0;
}

static int cmp_line(const void *a, const void *b) {
  return strcmp((const char *)a, (const char *)b);
}

/* The log as sorted lines, one per leg, joined. */
static void render(const leg_log_t *lg, char *out, size_t cap) {
  static char lines[MAX_LEGS][LINE_MAX_];
  for (int i = 0; i < lg->n; i++) {
    const leg_rec_t *r = &lg->r[i];
    snprintf(lines[i], LINE_MAX_, "req %u %s %s: slot %d freed %d truth %s aborts %u kv %s\n",
             r->request, r->role, r->worker, r->slot, r->freed, r->truth, r->aborts, r->kv_from);
  }
  qsort(lines, (size_t)lg->n, LINE_MAX_, cmp_line);
  size_t off = 0;
  out[0] = 0;
  for (int i = 0; i < lg->n && off < cap; i++)
    off += (size_t)snprintf(out + off, cap - off, "%s", lines[i]);
}

/* The kept run directory of pd_conform_run (logs, gateway output): removed. */
static void remove_dir(const char *dir) {
  char cmd[700];
  if (dir[0] != '/' || !strstr(dir, "/pdref-conform-") || strchr(dir, '\'')) return;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  PDT_EQ_INT(system(cmd), 0);
}

static void check_parity_of(const pd_scenario_t *s, const char *name, pd_mode_t mode,
                            double scale) {
  char bin[PATH_MAX + 8], cmd[PATH_MAX + 256];
  if (pdt_pdref_path(bin, sizeof bin) != 0) {
    fprintf(stderr, "test_worker_parity: %s not built, skipped\n", bin);
    return;
  }
  signal(SIGPIPE, SIG_IGN);
  static leg_log_t sim, mock;
  static char a[MAX_LEGS * LINE_MAX_], b[MAX_LEGS * LINE_MAX_];
  memset(&sim, 0, sizeof sim);
  memset(&mock, 0, sizeof mock);
  pd_world_stats_t st;
  uint32_t viol = 0;
  pd_world_opts_t wo = {NULL, NULL, NULL, 0, 0, NULL};
  PDT_EQ_INT(pd_world_run_legs(s, mode, s->config.seed, &wo, on_sim_leg, &sim, &st, &viol, NULL),
             0);
  pd_conform_opts_t o;
  pdt_conform_opts(&o, bin, pd_mode_name(mode), cmd, sizeof cmd);
  o.scale = scale;
  o.keep = 1;
  pd_conform_result_t r;
  PDT_EQ_INT(pd_conform_run(s, &o, &r), 0);
  PDT_EQ_INT(r.status, PD_CONFORM_RAN);
  if (r.status == PD_CONFORM_RAN) PDT_EQ_INT(read_mock_logs(r.dir, s->n_workers, &mock), 0);
  PDT_FALSE(sim.overflow || mock.overflow);
  PDT_TRUE(sim.n > 0);
  render(&sim, a, sizeof a);
  render(&mock, b, sizeof b);
  char what[PDT_MSG_MAX];
  snprintf(what, sizeof what, "%s / %s: the sim's worker log\n%.400s== the mock's\n%.400s", name,
           pd_mode_name(mode), a, b);
  CU_assertImplementation(strcmp(a, b) == 0, __LINE__, what, __FILE__, "", CU_FALSE);
  if (getenv("PDT_PARITY_SHOW")) fprintf(stderr, "%s", a);
  if (r.dir[0] && strcmp(a, b) == 0) remove_dir(r.dir);
  else fprintf(stderr, "test_worker_parity: kept %s\n", r.dir);
}

static void check_parity(const char *name, pd_mode_t mode, double scale) {
  pd_scenario_t *s = pdt_load_scenario(name);
  PDT_TRUE(s != NULL);
  if (s) check_parity_of(s, name, mode, scale);
  free(s);
}

/* A scenario written for this test only (not a row of the library). */
static void check_parity_json(const char *json, pd_mode_t mode, double scale) {
  pd_scenario_t *s = pdt_scenario_from_json(json);
  PDT_TRUE(s != NULL);
  if (s) check_parity_of(s, s->name, mode, scale);
  pdt_drop_scenario(s);
}

static void test_status_at_open(void) {
  check_parity("decode-503-while-prefill-detached", PD_MODE_REFERENCE, SCALE);
}

static void test_error_event_under_200(void) {
  check_parity("prefill-sse-error-under-200-stream", PD_MODE_REFERENCE, SCALE);
}

static void test_kv_transfer_failure(void) {
  check_parity("kv-transfer-failure", PD_MODE_REFERENCE, SCALE);
}

static void test_decode_hangs_before_head(void) {
  check_parity("decode-hang-before-head-prefill-not-cancelled", PD_MODE_REFERENCE, SCALE);
}

/* Capacity: d0 runs one request at a time (each about 425 ms), so the burst's decode legs
 * wait in its prealloc queue without telling p0 their rooms. Request 1's prefill pairs at
 * about 425 ms, inside the 600 ms bootstrap timeout; request 2's times out at 600 ms (500)
 * while its decode leg still waits, and the gateway retries it on a fresh pair. A driver that
 * ignored the limit would pair all three at once and time none out. At scale 1: the margins
 * are 175 ms and more. */
/* Three requests 50 ms apart, each decoding for 400 ms on a decode that runs one at a time:
 * the second and third wait in its queue (admission off: pdref-gateway sets no worker limits
 * yet, so the simulator's reference must not either, R-ADMIT-LIMIT). (Not a burst at one instant: which of three
 * same-instant requests reaches the mocks first is the sockets' race, not the worker's.) */
static void test_decode_running_limit(void) {
  check_parity_json(
      "{\"name\": \"parity-decode-running-limit\", \"description\": \"test only\","
      " \"expect\": {\"reference\": \"pass\"},"
      " \"config\": {\"seed\": 3, \"bootstrap_timeout_ms\": 600, \"admission\": false},"
      " \"workers\": [{\"name\": \"p0\", \"role\": \"prefill\"},"
      " {\"name\": \"d0\", \"role\": \"decode\", \"max_running_requests\": 1,"
      " \"token_ms\": 10}],"
      " \"workload\": {\"stream\": true, \"tokens\": 40, \"prompt_tokens\": 32,"
      " \"requests\": 3, \"interval_ms\": 50}}",
      PD_MODE_REFERENCE, 1.0);
}

/* Capacity: a prompt larger than d0's KV pool is refused with 400 (S2.5) at once, every
 * time; its prefill leg waits in bootstrap until the gateway lets it go. */
static void test_prompt_larger_than_the_pool(void) {
  check_parity_json(
      "{\"name\": \"parity-prompt-larger-than-pool\", \"description\": \"test only\","
      " \"expect\": {\"reference\": \"pass\"}, \"config\": {\"seed\": 4},"
      " \"workers\": [{\"name\": \"p0\", \"role\": \"prefill\"},"
      " {\"name\": \"d0\", \"role\": \"decode\", \"max_total_tokens\": 64,"
      " \"num_reserved_decode_tokens\": 16}],"
      " \"workload\": {\"requests\": 1, \"stream\": false, \"prompt_tokens\": 100}}",
      PD_MODE_REFERENCE, SCALE);
}

/* vLLM (source first): decode reads prefill's pinned KV over the side channel on sockets,
 * in memory in the simulator; both say where its KV came from. */
static void test_vllm_read(void) {
  check_parity("sf-happy-path-stream", PD_MODE_REFERENCE, SCALE);
}

/* vLLM: the pin expires before decode reads; the read "succeeds" from freed blocks (V1.15). */
static void test_vllm_stale_read(void) {
  check_parity("sf-prefill-kv-expires-before-decode-reads", PD_MODE_REFERENCE, SCALE);
}

/* Every /abort_request the gateway sends reaches the simulated worker, even when the close
 * of the same leg at the same instant let the request retire: the client leaves mid-stream,
 * the reference closes decode and aborts it, and d0's log has the abort (the socket mock's
 * log always had it; before, the simulator dropped it with the retired request). */
static void test_sim_worker_sees_every_abort(void) {
  pd_scenario_t *s = pdt_load_scenario("client-disconnect-during-decode-stream");
  PDT_TRUE(s != NULL);
  if (!s) return;
  static leg_log_t sim;
  memset(&sim, 0, sizeof sim);
  pd_world_stats_t st;
  uint32_t viol = 0;
  pd_world_opts_t wo = {NULL, NULL, NULL, 0, 0, NULL};
  PDT_EQ_INT(pd_world_run_legs(s, PD_MODE_REFERENCE, s->config.seed, &wo, on_sim_leg, &sim, &st,
                               &viol, NULL),
             0);
  int decodes = 0;
  for (int i = 0; i < sim.n; i++)
    if (!strcmp(sim.r[i].role, "decode")) {
      decodes++;
      PDT_EQ_INT(sim.r[i].aborts, 1);
      PDT_EQ_STR(sim.r[i].truth, "cancelled");
    }
  PDT_EQ_INT(decodes, 1);
  free(s);
}

/* The one body parser: a room above 2^53 is read exactly (cJSON's double would round it),
 * a batch keeps every room, a wrong field is named while the rest is still read. */
static void test_body_parser_reads_rooms_exactly(void) {
  static const char body[] = "{\"stream\":true,\"bootstrap_room\":9007199254740993,"
                             "\"bootstrap_host\":\"10.0.0.1\",\"bootstrap_port\":8998,"
                             "\"rid\":\"r-1\"}";
  cJSON *j = cJSON_Parse(body);
  pd_worker_body_t b;
  char err[128] = "";
  PDT_EQ_INT(pd_worker_body_read(&b, j, body, sizeof body - 1, NULL, err, sizeof err), 0);
  PDT_EQ_U64(b.room, 9007199254740993ull);
  PDT_TRUE(b.has_room && !b.is_room_array && b.n_rooms == 1 && b.is_stream && b.has_rid);
  PDT_EQ_STR(b.boot_host, "10.0.0.1");
  PDT_EQ_INT(b.boot_port, 8998);
  cJSON_Delete(j);
  static const char batch[] = "{\"bootstrap_room\":[7,8,\"x\"],\"bootstrap_port\":70000}";
  j = cJSON_Parse(batch);
  PDT_EQ_INT(pd_worker_body_read(&b, j, batch, sizeof batch - 1, NULL, err, sizeof err),
             PD_ERR_FIELD);
  PDT_EQ_STR(err, "bootstrap_port: expected an integer in 0..65535"); /* the first wrong one */
  PDT_TRUE(b.is_room_array && b.n_rooms == 3 && b.rooms && b.boot_port < 0);
  if (b.rooms) PDT_TRUE(b.rooms[0] == 7 && b.rooms[1] == 8 && b.rooms[2] == 0);
  free(b.rooms);
  cJSON_Delete(j);
}

int pdt_suite_worker_parity(void) {
  static const pdt_case_t cases[] = {
      {"the body parser reads rooms above 2^53 exactly", test_body_parser_reads_rooms_exactly},
      {"parity: a status answer at open (no slot)", test_status_at_open},
      {"parity: an error event under a 200 head", test_error_event_under_200},
      {"parity: a failed KV transfer", test_kv_transfer_failure},
      {"parity: a decode hung before its head (aborts)", test_decode_hangs_before_head},
      {"parity: a decode's running limit queues the next requests", test_decode_running_limit},
      {"parity: a prompt larger than the decode's KV pool (400)", test_prompt_larger_than_the_pool},
      {"parity: vLLM decode reads prefill's pinned KV", test_vllm_read},
      {"parity: vLLM decode reads after the pin expired (stale)", test_vllm_stale_read},
      {"the simulated worker sees every abort the gateway sends", test_sim_worker_sees_every_abort},
  };
  return PDT_SUITE("worker_parity", cases);
}
