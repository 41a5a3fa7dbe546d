/* The mocks' event logs (docs/mock.md "Event log"), read after a run into one record per
 * generation request a worker received (pd_conform_logged_leg_t): its request fields, fault, slot
 * times and truth, when its connection closed, its aborts, and room collisions. Times become
 * run-relative ns (the mocks' t_us is CLOCK_MONOTONIC, the runner's clock). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_conform_int.h"
#include "pd_wengine.h"
#include "pd_worker_body.h"
#include "pd_worker_shared.h"

#define MAX_LOG_LINES 20000000u

static uint64_t rel(const pd_conform_runner_t *run, double t_us) {
  uint64_t ns = t_us > 0 ? (uint64_t)t_us * 1000u : 0;
  return ns > run->t0_abs ? ns - run->t0_abs : 1;
}

static const char *str_of(const cJSON *j, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double num_of(const cJSON *j, const char *k, double dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
  return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static pd_truth_t truth_of(const char *s) {
  static const char *const names[] = {"pending", "ok", "failed", "stalled", "cancelled", "never"};
  for (int i = 0; s && i < 6; i++)
    if (!strcmp(s, names[i])) return (pd_truth_t)i;
  return PD_TRUTH_PENDING;
}

static int kv_from_of(const char *s) {
  static const char *const names[] = {"read", "stale", "local"}; /* PD_WENGINE_KV_FROM_* */
  for (int i = 0; s && i < 3; i++)
    if (!strcmp(s, names[i])) return PD_WENGINE_KV_FROM_READ + i;
  return 0;
}

static int fault_of(const char *s) {
  for (int k = 0; s && k < PD_FAULT_KIND_COUNT; k++)
    if (!strcmp(s, pd_fault_kind_name((pd_fault_kind_t)k))) return k;
  return -1;
}

static pd_conform_logged_leg_t *new_leg(pd_conform_runner_t *run) {
  if (run->n_legs == run->cap_legs) {
    size_t nc = run->cap_legs ? run->cap_legs * 2 : 64;
    pd_conform_logged_leg_t *nl = realloc(run->legs, nc * sizeof *nl);
    if (!nl) return NULL;
    run->legs = nl;
    run->cap_legs = nc;
  }
  pd_conform_logged_leg_t *l = &run->legs[run->n_legs++];
  memset(l, 0, sizeof *l);
  l->fault = -1;
  l->rid_given = -1;
  l->room_array = -1;
  l->client = l->unit = l->partner = l->resend_of = -1;
  return l;
}

static void on_request(pd_conform_runner_t *run, uint32_t wi, const cJSON *j,
                       pd_conform_logged_leg_t *l) {
  l->worker = wi;
  l->role = run->s->workers[wi].role;
  l->req = (uint64_t)num_of(j, "req", 0);
  l->t_arrive = rel(run, num_of(j, "t_us", 0));
  snprintf(l->rid, sizeof l->rid, "%s", str_of(j, "rid") ? str_of(j, "rid") : "");
  snprintf(l->xrid, sizeof l->xrid, "%s", str_of(j, "x_request_id") ? str_of(j, "x_request_id") : "");
  const char *room = str_of(j, "room");
  if (room) {
    l->has_room = 1;
    snprintf(l->room_s, sizeof l->room_s, "%s", room);
    l->room = strtoull(room, NULL, 10);
  }
  l->n_rooms = (int)num_of(j, "n_rooms", 0);
  l->is_stream = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "stream"));
  l->has_logprob = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "logprob"));
  snprintf(l->host, sizeof l->host, "%s", str_of(j, "bootstrap_host") ? str_of(j, "bootstrap_host") : "");
  l->boot_port = (int)num_of(j, "bootstrap_port", -1);
  l->routed_dp_rank = (int)num_of(j, "routed_dp_rank", -1); /* S2.14 (I22) */
  l->prefill_dp_rank = (int)num_of(j, "disagg_prefill_dp_rank", -1);
  const cJSON *rg = cJSON_GetObjectItemCaseSensitive(j, "rid_given"); /* newer mocks */
  if (cJSON_IsBool(rg)) l->rid_given = cJSON_IsTrue(rg);
  const cJSON *ra = cJSON_GetObjectItemCaseSensitive(j, "room_array");
  if (cJSON_IsBool(ra)) l->room_array = cJSON_IsTrue(ra);
  const cJSON *rooms = cJSON_GetObjectItemCaseSensitive(j, "rooms");
  int nr = cJSON_IsArray(rooms) ? cJSON_GetArraySize(rooms) : 0;
  if (nr > 1 && nr == l->n_rooms && (l->rooms = malloc((size_t)nr * sizeof *l->rooms))) {
    int i = 0;
    for (const cJSON *it = rooms->child; it && i < nr; it = it->next, i++)
      l->rooms[i] = cJSON_IsString(it) ? strtoull(it->valuestring, NULL, 10) : 0;
  }
  /* vLLM: the key pinned KV is read by; a decode names the prefill request it reads from */
  const char *rr = str_of(j, "remote_request_id");
  if (l->role == PD_ROLE_PREFILL || rr)
    snprintf(l->kv_key, sizeof l->kv_key, "%016llx",
             (unsigned long long)pd_worker_kv_key(l->role == PD_ROLE_PREFILL ? l->rid : rr));
  const char *rh = str_of(j, "rooms_hash");
  if (rh) {
    l->rooms_hash = strtoull(rh, NULL, 16);
    l->has_hash = 1;
  }
}

/* Apply one log line; map: mock req id -> leg index + 1 for this worker. */
static void on_line(pd_conform_runner_t *run, uint32_t wi, const cJSON *j, int32_t **map,
                    size_t *cap) {
  const char *ev = str_of(j, "ev");
  if (!ev) return;
  if (!strcmp(ev, "crash")) {
    if (!run->t_crash[wi]) run->t_crash[wi] = rel(run, num_of(j, "t_us", 0));
    return;
  }
  if (!strcmp(ev, "room_collision")) {
    if (!run->collisions++)
      snprintf(run->collision_worker, sizeof run->collision_worker, "%s", run->s->workers[wi].name);
    return;
  }
  double rq = num_of(j, "req", -1);
  if (rq < 1 || rq > MAX_LOG_LINES) return;
  size_t id = (size_t)rq;
  if (!strcmp(ev, "request")) {
    if (id >= *cap) {
      size_t nc = *cap ? *cap : 64;
      while (nc <= id) nc *= 2;
      int32_t *nm = realloc(*map, nc * sizeof *nm);
      if (!nm) {
        run->n_nomem++;
        return;
      }
      memset(nm + *cap, 0, (nc - *cap) * sizeof *nm);
      *map = nm;
      *cap = nc;
    }
    pd_conform_logged_leg_t *l = new_leg(run);
    if (!l) {
      run->n_nomem++;
      return;
    }
    on_request(run, wi, j, l);
    l->nth = ++run->n_req_lines[wi];
    (*map)[id] = (int32_t)run->n_legs;
    return;
  }
  if (id >= *cap || !(*map)[id]) return;
  pd_conform_logged_leg_t *l = &run->legs[(*map)[id] - 1];
  uint64_t t = rel(run, num_of(j, "t_us", 0));
  const char *key = str_of(j, "key"); /* vLLM: kv_pinned, kv_read, kv_notify, ... */
  if (key && strlen(key) == 16 && (l->role == PD_ROLE_PREFILL || !l->kv_key[0]))
    snprintf(l->kv_key, sizeof l->kv_key, "%s", key); /* a prefill's own pin names it best */
  if (!strcmp(ev, "fault")) {
    int k = fault_of(str_of(j, "kind"));
    if (k >= 0 && k < 32) l->fired |= 1u << k;
    if (k >= 0 && k != PD_FAULT_PREFILL_LAG && k != PD_FAULT_SLOW_DRIP) l->fault = k;
  } else if (!strcmp(ev, "traffic_fault")) {
    double k = num_of(j, "index", -1);
    if (k >= 0 && k < PD_SCENARIO_MAX_TRAFFIC_FAULTS) run->tfault_fired[(size_t)k] = 1;
  } else if (!strcmp(ev, "slot_taken")) {
    l->slot_taken = 1;
    l->t_slot_taken = t;
  } else if (!strcmp(ev, "slot_freed")) {
    l->t_slot_freed = t;
    l->truth = truth_of(str_of(j, "truth"));
    if (kv_from_of(str_of(j, "kv_from"))) l->kv_from = kv_from_of(str_of(j, "kv_from"));
  } else if (!strcmp(ev, "kv_from")) {
    l->kv_from = kv_from_of(str_of(j, "from"));
  } else if (!strcmp(ev, "reject")) {
    l->reject_status = (int)num_of(j, "status", 400);
  } else if (!strcmp(ev, "kv_taken")) {
    l->kv_pages = (uint64_t)num_of(j, "pages", 0);
    if (l->kv_pages > l->kv_pages_max) l->kv_pages_max = l->kv_pages;
  } else if (!strcmp(ev, "kv_pinned")) { /* vLLM prefill: its pages stay held after its end */
    uint64_t pages = (uint64_t)num_of(j, "pages", 0);
    if (pages > l->kv_pages) l->kv_pages = pages;
    if (pages > l->kv_pages_max) l->kv_pages_max = pages;
  } else if (!strcmp(ev, "kv_unpinned")) { /* read, notified, rejected, expired, crashed */
    const char *why = str_of(j, "reason");
    if (why && !strcmp(why, "crash")) run->crash_pin[wi] = 1;
    if (l->kv_pages || !l->t_kv_freed) l->t_kv_freed = t;
    l->kv_pages = 0;
  } else if (!strcmp(ev, "kv_freed")) {
    uint64_t most = (uint64_t)num_of(j, "pages_max", 0);
    if (most > l->kv_pages_max) l->kv_pages_max = most;
    l->kv_pages = 0;
    l->t_kv_freed = t;
  } else if (!strcmp(ev, "net_cut")) {
    l->is_path_cut = 1;
  } else if (!strcmp(ev, "peer_closed")) {
    if (!l->t_peer_closed) l->t_peer_closed = t;
  } else if (!strcmp(ev, "abort")) {
    l->aborts++;
  } else if (!strcmp(ev, "response_end")) {
    if (!l->t_end) l->t_end = t;
    l->end_status = (int)num_of(j, "status", 0);
  }
}

int pd_conform_read_logs(pd_conform_runner_t *run, char *err, size_t cap) {
  for (uint32_t wi = 0; wi < run->n_wk; wi++) {
    FILE *f = fopen(run->wk[wi].log, "r");
    if (!f) {
      snprintf(err, cap, "cannot read the event log of mock %s", run->s->workers[wi].name);
      return -1;
    }
    char *line = NULL;
    size_t lcap = 0;
    int32_t *map = NULL;
    size_t mcap = 0;
    for (uint32_t n = 0; n < MAX_LOG_LINES && getline(&line, &lcap, f) > 0; n++) {
      cJSON *j = cJSON_Parse(line);
      if (j) on_line(run, wi, j, &map, &mcap);
      cJSON_Delete(j);
    }
    free(line);
    free(map);
    fclose(f);
  }
  if (run->n_nomem) {
    snprintf(err, cap, "out of memory reading the mocks' logs (%u allocations failed)", run->n_nomem);
    return -1;
  }
  for (size_t i = 0; i < run->n_legs; i++) { /* legs that never took a slot: truth by fault */
    pd_conform_logged_leg_t *l = &run->legs[i];
    if (l->truth != PD_TRUTH_PENDING || l->slot_taken) continue;
    if (l->fault == PD_FAULT_STATUS && l->end_status && pd_worker_status_is_healthy(l->end_status))
      l->truth = PD_TRUTH_OK; /* a 4xx refusal: the worker is healthy (R3.2), as in the sim */
    else if (l->fault == PD_FAULT_STATUS || l->fault == PD_FAULT_RESET_BEFORE_HEAD)
      l->truth = PD_TRUTH_FAILED;
    else if (l->fault == PD_FAULT_CONNECT_REFUSED) l->truth = PD_TRUTH_NEVER;
    else if (l->reject_status) /* too large for its pool (S2.5): a refusal, as a status fault's */
      l->truth = pd_worker_status_is_healthy(l->reject_status) ? PD_TRUTH_OK : PD_TRUTH_FAILED;
  }
  return 0;
}


void pd_conform_legs_free(pd_conform_runner_t *run) {
  for (size_t i = 0; i < run->n_legs; i++) free(run->legs[i].rooms);
  free(run->legs);
  run->legs = NULL;
  run->n_legs = run->cap_legs = 0;
}
