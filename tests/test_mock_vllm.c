/* `pdref mock --protocol vllm` over real sockets: prefill and decode mocks are child processes
 * of the built pdref on 127.0.0.1 (ephemeral ports from their ready lines), driven by hand as
 * a source-first gateway would (libcurl); the KV side channel between them is real TCP
 * (mock_workers/server/pd_mock_kv.c, docs/mock.md "vLLM workers"). Each mock's event log is
 * a file the test reads. Every wait is bounded; every process is stopped and reaped. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pdt.h"
#include "pdt_mock.h"
#include "pdt_net.h"
#include "pdt_proc.h"

/* Room for a loaded 2-core machine under sanitizers. */
#define WAIT_MS 5000u

typedef struct vmock {
  pid_t pid;
  uint16_t port, kv_port;
  char log[96];
} vmock_t;

/* Start `pdref mock --protocol vllm --role ROLE --json --log FILE EXTRA...` (extra ends with
 * NULL, at most 8). 0 when its ready line came. */
static int vm_start(vmock_t *v, const char *role, const char *const *extra) {
  char bin[PATH_MAX + 16], ready[512];
  static unsigned serial;
  memset(v, 0, sizeof *v);
  v->pid = -1;
  snprintf(v->log, sizeof v->log, "/tmp/pdt-mock-vllm-%d-%u.jsonl", (int)getpid(), ++serial);
  if (pdt_pdref_path(bin, sizeof bin) != 0) return -1;
  char *argv[32] = {bin, "mock", "--protocol", "vllm", "--role", (char *)role, "--listen",
                    "127.0.0.1:0", "--json", "--log", v->log, "--speed", "0.1"};
  int n = 13;
  for (int i = 0; extra && extra[i] && i < 8; i++) argv[n++] = (char *)extra[i];
  argv[n] = NULL;
  v->pid = pdt_spawn(argv, ready, sizeof ready, WAIT_MS);
  if (v->pid < 0) return -1;
  v->port = (uint16_t)pdt_json_uint(ready, "\"port\":");
  v->kv_port = (uint16_t)pdt_json_uint(ready, "\"kv_port\":");
  PDT_TRUE(strstr(ready, "\"protocol\":\"vllm\"") != NULL);
  return v->port ? 0 : -1;
}

/* SIGTERM and reap; 1 when it exited cleanly. The log stays until vm_free. */
static int vm_stop(vmock_t *v) {
  if (v->pid <= 0) return 0;
  kill(v->pid, SIGTERM);
  int st = 0, is_gone = pdt_reap(v->pid, WAIT_MS, &st) == 0;
  v->pid = -1;
  return is_gone && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void vm_free(vmock_t *v) {
  if (v->pid > 0) vm_stop(v);
  unlink(v->log);
}

/* Stop v (it must exit cleanly) and free it. */
static void vm_end(vmock_t *v) {
  PDT_TRUE(vm_stop(v));
  vm_free(v);
}

/* The first line of the log with "ev":EV containing needle (NULL: any) into out; within
 * limit_ms. 1 when found. */
static int vm_wait_line(const vmock_t *v, const char *ev, const char *needle, char *out,
                        size_t cap, unsigned limit_ms) {
  char want[64], line[2048];
  snprintf(want, sizeof want, "\"ev\":\"%s\"", ev);
  uint64_t end = pdt_now_ms() + limit_ms;
  do {
    FILE *f = fopen(v->log, "r");
    while (f && fgets(line, sizeof line, f))
      if (strstr(line, want) && (!needle || strstr(line, needle))) {
        if (out) snprintf(out, cap, "%.*s", (int)(cap ? cap - 1 : 0), line);
        fclose(f);
        return 1;
      }
    if (f) fclose(f);
    pdt_sleep_ms(5);
  } while (pdt_now_ms() < end);
  return 0;
}

static int vm_has(const vmock_t *v, const char *ev, const char *needle) {
  return vm_wait_line(v, ev, needle, NULL, 0, WAIT_MS);
}

typedef struct resp {
  long status;
  char body[16384];
  size_t len;
} resp_t;

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
  resp_t *r = ud;
  size_t k = sz * n, room = sizeof r->body - 1 - r->len;
  memcpy(r->body + r->len, p, k < room ? k : room);
  r->len += k < room ? k : room;
  r->body[r->len] = 0;
  return k;
}

/* POST body to 127.0.0.1:port/v1/completions, given up after limit_ms; the curl code. */
static int post_for(uint16_t port, const char *body, resp_t *r, unsigned limit_ms) {
  char url[96];
  memset(r, 0, sizeof *r);
  snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/completions", port);
  CURL *e = curl_easy_init();
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)limit_ms);
  int rc = (int)curl_easy_perform(e);
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
  curl_slist_free_all(h);
  curl_easy_cleanup(e);
  return rc;
}

static int post(uint16_t port, const char *body, resp_t *r) {
  return post_for(port, body, r, WAIT_MS);
}

/* The prefill leg of a source-first exchange: its answer's kv_transfer_params printed into
 * kvp (empty when absent or null). */
static void prefill_leg(const vmock_t *p, char *kvp, size_t cap) {
  resp_t r;
  kvp[0] = 0;
  PDT_EQ_INT(post(p->port,
                  "{\"prompt\":\"one two three four\",\"max_tokens\":1,\"stream\":false,"
                  "\"kv_transfer_params\":{\"do_remote_decode\":true}}",
                  &r),
             CURLE_OK);
  PDT_EQ_INT(r.status, 200);
  cJSON *j = cJSON_Parse(r.body);
  cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kv_transfer_params");
  char *s = cJSON_IsObject(k) ? cJSON_PrintUnformatted(k) : NULL;
  if (s) snprintf(kvp, cap, "%s", s);
  cJSON_free(s);
  cJSON_Delete(j);
}

static void decode_body(char *out, size_t cap, const char *kvp, int stream, int tokens) {
  snprintf(out, cap,
           "{\"prompt\":\"one two three four\",\"max_tokens\":%d,\"stream\":%s"
           "%s%s}",
           tokens, stream ? "true" : "false", kvp[0] ? ",\"kv_transfer_params\":" : "", kvp);
}

/* A port nothing listens on (bound, then closed). */
static uint16_t dead_port(void) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  uint16_t port = 0;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* ---------- tests ---------- */

/* (a) Source first by hand: prefill answers one token with params naming its side channel
 * and pins the prompt's KV; params naming another engine id fail the read and leave the pin;
 * decode with the real params reads it over the channel, notifies, streams; prefill frees the
 * pin on decode's read notification. */
static void test_source_first_exchange(void) {
  vmock_t p, d;
  const char *pe[] = {"--kv-port", "0", NULL};
  PDT_EQ_INT(vm_start(&p, "prefill", pe), 0);
  PDT_EQ_INT(vm_start(&d, "decode", NULL), 0);
  PDT_TRUE(p.kv_port != 0);
  char kvp[4096], body[8192], want[64];
  CURLM *mh = curl_multi_init();
  pdt_tx_t *info = pdt_tx_once(mh, p.port, "/get_server_info", NULL);
  snprintf(want, sizeof want, "\"kv_port\":%u", p.kv_port);
  PDT_TRUE(strstr(info->buf, "\"protocol\":\"vllm\"") && strstr(info->buf, want));
  pdt_tx_del(mh, info);
  curl_multi_cleanup(mh);
  prefill_leg(&p, kvp, sizeof kvp);
  PDT_TRUE(strstr(kvp, "\"do_remote_prefill\":true") != NULL);
  PDT_TRUE(strstr(kvp, "\"remote_engine_id\":\"p0\"") != NULL);
  PDT_TRUE(strstr(kvp, "\"remote_host\":\"127.0.0.1\"") != NULL);
  snprintf(want, sizeof want, "\"remote_port\":%u,", p.kv_port);
  PDT_TRUE(strstr(kvp, want) != NULL);
  char pin[1024] = "";
  PDT_TRUE(vm_wait_line(&p, "kv_pinned", "\"pages\":4", pin, sizeof pin, WAIT_MS));
  PDT_FALSE(vm_wait_line(&p, "kv_unpinned", NULL, NULL, 0, 0)); /* held until decode reads */
  /* params naming another engine on the same side channel: the read fails (500), the pin stays */
  char other[4096];
  snprintf(other, sizeof other, "%s", kvp);
  char *id = strstr(other, "\"remote_engine_id\":\"p0\"");
  if (id) id[strlen("\"remote_engine_id\":\"p")] = '9';
  decode_body(body, sizeof body, other, 0, 4);
  resp_t r;
  PDT_EQ_INT(post(d.port, body, &r), CURLE_OK);
  PDT_EQ_INT(r.status, 500);
  PDT_TRUE(vm_has(&p, "kv_wrong_engine", "\"engine_id\":\"p9\""));
  PDT_TRUE(vm_has(&d, "kv_read", "\"result\":\"failed\""));
  PDT_FALSE(vm_wait_line(&p, "kv_unpinned", NULL, NULL, 0, 0));
  decode_body(body, sizeof body, kvp, 1, 4);
  PDT_EQ_INT(post(d.port, body, &r), CURLE_OK);
  PDT_EQ_INT(r.status, 200);
  for (int i = 0; i < 4; i++) {
    snprintf(want, sizeof want, "\"text\":\"tok%d \"", i);
    PDT_TRUE(strstr(r.body, want) != NULL);
  }
  PDT_TRUE(r.len > 14 && strcmp(r.body + r.len - 14, "data: [DONE]\n\n") == 0);
  PDT_TRUE(vm_has(&d, "kv_read", "\"result\":\"ok\""));
  PDT_TRUE(vm_has(&d, "kv_notify", "\"kind\":\"read\""));
  PDT_TRUE(vm_has(&d, "kv_from", "\"from\":\"read\""));
  PDT_TRUE(vm_has(&d, "slot_freed", "\"kv_from\":\"read\""));
  PDT_TRUE(vm_has(&p, "kv_served", "\"result\":\"ok\""));
  PDT_TRUE(vm_has(&p, "kv_unpinned", "\"reason\":\"read\""));
  /* the same key on both sides */
  const char *k = strstr(pin, "\"key\":\"");
  char key[40] = "";
  if (k) snprintf(key, sizeof key, "%.24s", k);
  PDT_TRUE(key[0] && vm_has(&d, "kv_read", key) && vm_has(&p, "kv_unpinned", key));
  vm_end(&p);
  vm_end(&d);
}

/* (b) Params naming a dead side channel, then one that never answers: each read fails
 * (V1.22, kv_load_failure_policy fail, as in the simulator) and decode answers 500; the mock
 * still serves, and a request without params is computed locally. */
static void test_read_from_a_dead_port_fails(void) {
  vmock_t d;
  PDT_EQ_INT(vm_start(&d, "decode", NULL), 0);
  char kvp[512], body[1024];
  snprintf(kvp, sizeof kvp,
           "{\"do_remote_prefill\":true,\"remote_block_ids\":[0,1,2,3],\"remote_engine_id\":"
           "\"p0\",\"remote_request_id\":\"gone-1\",\"remote_host\":\"127.0.0.1\","
           "\"remote_port\":%u}",
           dead_port());
  decode_body(body, sizeof body, kvp, 0, 3);
  resp_t r;
  PDT_EQ_INT(post(d.port, body, &r), CURLE_OK);
  PDT_EQ_INT(r.status, 500);
  PDT_TRUE(vm_has(&d, "kv_read", "\"result\":\"failed\""));
  PDT_TRUE(vm_has(&d, "kv_read_error", "\"why\":\"refused\""));
  PDT_FALSE(vm_wait_line(&d, "kv_from", NULL, NULL, 0, 0));
  /* a side channel that accepts and never answers: the read times out (2 s, real time) */
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  int mute = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  PDT_TRUE(mute >= 0 && bind(mute, (struct sockaddr *)&a, sizeof a) == 0 && listen(mute, 4) == 0 &&
           getsockname(mute, (struct sockaddr *)&a, &alen) == 0);
  snprintf(kvp, sizeof kvp,
           "{\"do_remote_prefill\":true,\"remote_block_ids\":[0],\"remote_engine_id\":\"p0\","
           "\"remote_request_id\":\"mute-1\",\"remote_host\":\"127.0.0.1\",\"remote_port\":%u}",
           ntohs(a.sin_port));
  decode_body(body, sizeof body, kvp, 0, 3);
  uint64_t t = pdt_now_ms();
  PDT_EQ_INT(post(d.port, body, &r), CURLE_OK);
  PDT_EQ_INT(r.status, 500);
  PDT_TRUE(pdt_now_ms() - t >= PD_MOCK_KV_TIMEOUT_MS - 50);
  PDT_TRUE(vm_has(&d, "kv_read_error", "\"why\":\"timeout\""));
  if (mute >= 0) close(mute);
  decode_body(body, sizeof body, "", 0, 3); /* no params: computed here (V1.6) */
  PDT_EQ_INT(post(d.port, body, &r), CURLE_OK);
  PDT_EQ_INT(r.status, 200);
  PDT_TRUE(strstr(r.body, "tok2") != NULL);
  PDT_TRUE(vm_has(&d, "kv_from", "\"from\":\"local\""));
  vm_end(&d);
}

/* (c) Nobody reads: the pin expires after --kv-abort-timeout-ms (scaled by --speed 0.1:
 * 3000 ms -> 300 ms), not before. */
static void test_pin_expires_unread(void) {
  vmock_t p;
  const char *pe[] = {"--kv-port", "0", "--kv-abort-timeout-ms", "3000", NULL};
  PDT_EQ_INT(vm_start(&p, "prefill", pe), 0);
  char kvp[4096], rq[2048] = "", un[1024] = "";
  prefill_leg(&p, kvp, sizeof kvp);
  PDT_TRUE(kvp[0] != 0);
  PDT_TRUE(vm_wait_line(&p, "request", NULL, rq, sizeof rq, WAIT_MS));
  PDT_TRUE(vm_has(&p, "kv_pinned", NULL));
  PDT_TRUE(vm_wait_line(&p, "kv_unpinned", "\"reason\":\"expired\"", un, sizeof un, WAIT_MS));
  /* the expiry counts from the answer's deadline on the engine's clock, which a late engine
   * thread may have passed already: bound it from the request's arrival instead */
  long long t0 = rq[0] ? strtoll(strstr(rq, "\"t_us\":") + 7, NULL, 10) : 0;
  long long t1 = un[0] ? strtoll(strstr(un, "\"t_us\":") + 7, NULL, 10) : 0;
  PDT_TRUE(t0 > 0 && t1 - t0 >= 299000);
  PDT_TRUE(strstr(un, "\"pinned_pages\":0") != NULL);
  vm_end(&p);
}

/* (d) Garbage on the side channel is logged and dropped; the same connection still answers a
 * READ (of a key nobody pinned: stale, V1.15), too long a line only loses its connection,
 * and the mock still serves a source-first prefill. */
static void test_garbage_on_the_side_channel(void) {
  vmock_t p;
  const char *pe[] = {"--kv-port", "0", NULL};
  PDT_EQ_INT(vm_start(&p, "prefill", pe), 0);
  int fd = pdt_dial(p.kv_port);
  PDT_TRUE(fd >= 0);
  static const char junk[] = "HELLO there\nREAD p0 nothex\n\x01\xff\x7f\nNOTIFY p0 "
                             "00000000000000aa sideways\nREAD p0 00000000000000aa\n";
  PDT_EQ_INT(send(fd, junk, sizeof junk - 1, MSG_NOSIGNAL), (long)sizeof junk - 1);
  char line[256] = "";
  PDT_EQ_INT(pdt_read_line(fd, line, sizeof line, WAIT_MS), 0);
  PDT_EQ_STR(line, "PULLED 00000000000000aa stale\n");
  PDT_TRUE(vm_has(&p, "kv_bad_line", "\"line\":\"HELLO there\""));
  PDT_TRUE(vm_has(&p, "kv_bad_line", "\"line\":\"READ p0 nothex\""));
  PDT_TRUE(vm_has(&p, "kv_bad_line", "\"line\":\"???\""));
  PDT_TRUE(vm_has(&p, "kv_bad_line", "sideways"));
  close(fd);
  fd = pdt_dial(p.kv_port); /* a line over the limit: dropped with its connection */
  char big[600];
  memset(big, 'x', sizeof big);
  PDT_TRUE(fd >= 0 && send(fd, big, sizeof big, MSG_NOSIGNAL) > 0);
  PDT_EQ_INT(pdt_read_line(fd, line, sizeof line, WAIT_MS), -1); /* closed by the mock */
  PDT_TRUE(vm_has(&p, "kv_bad_line", "\"why\":\"line too long\""));
  if (fd >= 0) close(fd);
  char kvp[4096];
  prefill_leg(&p, kvp, sizeof kvp);
  PDT_TRUE(strstr(kvp, "\"remote_engine_id\":\"p0\"") != NULL);
  vm_end(&p);
}

/* Take decode d's one running slot (--max-running 1) with a long request: 3000 tokens at 0.5 ms
 * keep it busy about 1.5 s. The caller runs it to its end and deletes it. */
static pdt_tx_t *occupy(CURLM *mh, const vmock_t *d) {
  pdt_tx_t *blocker = pdt_tx_new(mh, d->port, "/v1/completions",
                                 "{\"prompt\":\"x\",\"max_tokens\":3000,\"stream\":false}");
  pdt_tx_run(mh, &blocker, 1, 100);
  PDT_TRUE(vm_has(d, "slot_taken", NULL));
  return blocker;
}

/* (e) Lease mode: a decode queued behind a long request (--max-running 1) heartbeats from its
 * arrival (V1.13), each heartbeat moving prefill's lease to now + 2/3 of it, so the pin
 * outlives the lease (300 ms scaled) several times over and the read finds it (ok, not
 * stale); then decode's read notification frees it. */
static void test_heartbeats_keep_the_lease(void) {
  vmock_t p, d;
  const char *pe[] = {"--kv-port", "0", "--kv-expiry", "lease", "--kv-lease-ms", "3000", NULL};
  const char *de[] = {"--kv-expiry", "lease", "--kv-lease-ms", "3000", "--kv-heartbeat-ms", "500",
                      "--max-running", "1", NULL};
  PDT_EQ_INT(vm_start(&p, "prefill", pe), 0);
  PDT_EQ_INT(vm_start(&d, "decode", de), 0);
  CURLM *mh = curl_multi_init();
  pdt_tx_t *blocker = occupy(mh, &d);
  char kvp[4096], body[8192];
  prefill_leg(&p, kvp, sizeof kvp);
  decode_body(body, sizeof body, kvp, 1, 4);
  resp_t r;
  PDT_EQ_INT(post(d.port, body, &r), CURLE_OK);
  PDT_EQ_INT(r.status, 200);
  PDT_TRUE(strstr(r.body, "\"text\":\"tok3 \"") != NULL);
  pdt_tx_run(mh, &blocker, 1, WAIT_MS);
  PDT_TRUE(blocker->is_done && blocker->status == 200);
  PDT_TRUE(vm_has(&d, "kv_heartbeat", NULL));
  PDT_TRUE(vm_has(&d, "kv_read", "\"result\":\"ok\""));
  PDT_TRUE(vm_has(&p, "kv_unpinned", "\"reason\":\"read\""));
  PDT_FALSE(vm_wait_line(&p, "kv_unpinned", "\"reason\":\"expired\"", NULL, 0, 0));
  pdt_tx_del(mh, blocker);
  curl_multi_cleanup(mh);
  vm_end(&p);
  vm_end(&d);
}

/* A decode whose client leaves while it waits for admission (its one running slot busy)
 * notifies an empty read (V1.17): the prefill frees the pin at once, reason empty, long
 * before its timeout. */
static void test_decode_closed_before_admission_frees_the_pin(void) {
  vmock_t p, d;
  const char *pe[] = {"--kv-port", "0", NULL};
  const char *de[] = {"--max-running", "1", NULL};
  PDT_EQ_INT(vm_start(&p, "prefill", pe), 0);
  PDT_EQ_INT(vm_start(&d, "decode", de), 0);
  CURLM *mh = curl_multi_init();
  pdt_tx_t *blocker = occupy(mh, &d);
  char kvp[4096], body[8192];
  prefill_leg(&p, kvp, sizeof kvp);
  decode_body(body, sizeof body, kvp, 1, 4);
  resp_t r;
  PDT_EQ_INT(post_for(d.port, body, &r, 200), CURLE_OPERATION_TIMEDOUT); /* the client leaves */
  PDT_TRUE(vm_has(&d, "kv_notify", "\"kind\":\"empty\""));
  PDT_TRUE(vm_has(&p, "kv_unpinned", "\"reason\":\"empty\""));
  PDT_FALSE(vm_wait_line(&d, "kv_read", NULL, NULL, 0, 0));
  pdt_tx_run(mh, &blocker, 1, WAIT_MS);
  pdt_tx_del(mh, blocker);
  curl_multi_cleanup(mh);
  vm_end(&p);
  vm_end(&d);
}

/* `pdref mock ARGS` that must refuse to start: its exit code (timeout(1) bounds a mock that
 * started anyway), its output in out. */
static int run_refused(const char *args, char *out, size_t cap) {
  char bin[PATH_MAX + 16], cmd[PATH_MAX + 512], path[64];
  out[0] = 0;
  if (pdt_pdref_path(bin, sizeof bin) != 0) return -1;
  snprintf(path, sizeof path, "/tmp/pdt-mock-vllm-cli-%d.txt", (int)getpid());
  snprintf(cmd, sizeof cmd, "timeout 10 '%s' mock %s >'%s' 2>&1", bin, args, path);
  int st = system(cmd);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(out, 1, cap - 1, f) : 0;
  out[n] = 0;
  if (f) fclose(f);
  unlink(path);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Bad values of the vLLM flags exit 2 naming the flag; --help lists them. */
static void test_cli_flags(void) {
  char out[8192];
  PDT_EQ_INT(run_refused("--role prefill --protocol nope", out, sizeof out), 2);
  PDT_TRUE(strstr(out, "--protocol: expected sglang or vllm, got 'nope'") != NULL);
  PDT_EQ_INT(run_refused("--role prefill --protocol vllm --kv-expiry soon", out, sizeof out), 2);
  PDT_TRUE(strstr(out, "--kv-expiry: expected timeout or lease, got 'soon'") != NULL);
  PDT_EQ_INT(run_refused("--role prefill --kv-port 70000", out, sizeof out), 2);
  PDT_TRUE(strstr(out, "--kv-port") != NULL);
  PDT_EQ_INT(run_refused("--help", out, sizeof out), 0);
  PDT_TRUE(strstr(out, "--protocol P") && strstr(out, "--kv-heartbeat-ms N"));
}

int pdt_suite_mock_vllm(void) {
  static const pdt_case_t cases[] = {
      {"vllm: a source-first exchange over the KV side channel", test_source_first_exchange},
      {"vllm: a read from a dead side channel fails (500)", test_read_from_a_dead_port_fails},
      {"vllm: an unread pin expires after the abort timeout", test_pin_expires_unread},
      {"vllm: garbage on the side channel is logged and dropped", test_garbage_on_the_side_channel},
      {"vllm: a queued decode's heartbeats keep the lease", test_heartbeats_keep_the_lease},
      {"vllm: a decode closed before admission frees the pin (empty)",
       test_decode_closed_before_admission_frees_the_pin},
      {"vllm: the CLI refuses bad vLLM flags and lists them", test_cli_flags},
  };
  return PDT_SUITE("mock_vllm", cases);
}
