/* Hostile input against the real programs (issue 10, items 3-5): `pdref gateway` with a
 * prefill and a decode `pdref mock` behind it, each a child process on 127.0.0.1. Bad bodies
 * get a 400 JSON error naming the field or byte offset within 1 s, no leg reaches a worker,
 * and a healthy stream running alongside is unharmed, in every mode (R-BADINPUT); idle
 * connections to the bootstrap port beyond its limits hold neither the mock's table nor its
 * descriptors (docs/mock.md); a non-loopback --listen prints what it exposes. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pd_mock.h"
#include "pdt.h"
#include "pdt_curl.h"
#include "pdt_net.h"
#include "pdt_proc.h"

/* A bad request answered at once (the alternative reaches a worker, or stalls for 30 s), with
 * room for a loaded 2-core machine under sanitizers. */
#define HI_ANSWER_MS 3000u

typedef struct proc {
  pid_t pid;
  int out, err; /* read ends of its stdout and stderr */
  uint16_t port, boot_port;
} proc_t;

/* Start `pdref ARGS...` (args NULL-terminated, with --json): its ready line gives the ports. */
static int proc_start(proc_t *p, const char *const *args) {
  char bin[PATH_MAX + 16];
  memset(p, 0, sizeof *p);
  p->pid = -1;
  if (pdt_pdref_path(bin, sizeof bin) != 0) return -1;
  int o[2], e[2];
  if (pipe(o) != 0) return -1;
  if (pipe(e) != 0) {
    close(o[0]), close(o[1]);
    return -1;
  }
  const char *argv[32] = {bin};
  for (int i = 0; args[i] && i < 30; i++) argv[i + 1] = args[i];
  p->pid = fork();
  if (p->pid == 0) {
    dup2(o[1], 1), dup2(e[1], 2);
    close(o[0]), close(e[0]), close(o[1]), close(e[1]);
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  close(o[1]), close(e[1]);
  p->out = o[0], p->err = e[0];
  char line[1024];
  if (p->pid < 0 || pdt_read_line(p->out, line, sizeof line, 10000) != 0) return -1;
  cJSON *j = cJSON_Parse(line);
  p->port = (uint16_t)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "port"));
  const cJSON *b = cJSON_GetObjectItem(j, "bootstrap_port");
  p->boot_port = cJSON_IsNumber(b) ? (uint16_t)b->valuedouble : 0;
  cJSON_Delete(j);
  return p->port ? 0 : -1;
}

/* SIGTERM; 1 when it exited within limit_ms (else it is killed and 0). stderr goes to err. */
static int proc_stop(proc_t *p, unsigned limit_ms, char *err, size_t cap) {
  if (err && cap) err[0] = 0;
  if (p->pid <= 0) return 0;
  kill(p->pid, SIGTERM);
  int st = 0, is_gone = pdt_reap(p->pid, limit_ms, &st) == 0;
  size_t n = 0;
  ssize_t r;
  while (err && n + 1 < cap && (r = read(p->err, err + n, cap - 1 - n)) > 0) n += (size_t)r;
  if (err && cap) err[n] = 0;
  close(p->out), close(p->err);
  p->pid = -1;
  return is_gone;
}

typedef struct rig {
  proc_t pf, dc, gw;
} rig_t;

static int rig_start_gateway(rig_t *r, const char *mode) {
  char pre[96], dec[96];
  snprintf(pre, sizeof pre, "http://127.0.0.1:%u@%u", r->pf.port, r->pf.boot_port);
  snprintf(dec, sizeof dec, "http://127.0.0.1:%u", r->dc.port);
  const char *ga[] = {"gateway", "--listen", "127.0.0.1:0", "--mode", mode, "--prefill", pre,
                      "--decode", dec, "--json", NULL};
  return proc_start(&r->gw, ga);
}

static int rig_start(rig_t *r, const char *mode) {
  const char *pa[] = {"mock", "--role", "prefill", "--bootstrap-port", "0", "--json", NULL};
  const char *da[] = {"mock", "--role", "decode", "--json", NULL};
  memset(r, 0, sizeof *r);
  r->pf.pid = r->dc.pid = r->gw.pid = -1;
  if (proc_start(&r->pf, pa) || proc_start(&r->dc, da)) return -1;
  return rig_start_gateway(r, mode);
}

static void rig_stop(rig_t *r) {
  PDT_TRUE(proc_stop(&r->gw, 5000, NULL, 0));
  PDT_TRUE(proc_stop(&r->pf, 5000, NULL, 0));
  PDT_TRUE(proc_stop(&r->dc, 5000, NULL, 0));
}

/* The gateway's legs_opened_total for a role (-1 when missing). */
static long legs_opened(CURLM *mh, uint16_t port, const char *role) {
  pdt_tx_t *t = pdt_tx_once(mh, port, "/metrics", NULL);
  char key[96];
  snprintf(key, sizeof key, "pdref_legs_opened_total{role=\"%s\"} ", role);
  const char *at = strstr(t->buf, key);
  long v = at ? strtol(at + strlen(key), NULL, 10) : -1;
  pdt_tx_del(mh, t);
  return v;
}

static const char healthy_body[] =
    "{\"text\":\"hello\",\"stream\":true,\"sampling_params\":{\"max_new_tokens\":40}}";

typedef struct healthy {
  pdt_tx_t *t;
  uint16_t port;
  int started, ok, bad;
} healthy_t;

/* Judge the healthy stream that ended, and start the next one when asked. */
static void healthy_turn(CURLM *mh, healthy_t *h, int is_next) {
  if (h->t) {
    int is_ok = h->t->is_done && h->t->rc == 0 && h->t->status == 200 &&
                strstr(h->t->buf, "[DONE]") && !strstr(h->t->buf, "\"error\"");
    h->ok += is_ok, h->bad += !is_ok;
    pdt_tx_del(mh, h->t);
    h->t = NULL;
  }
  if (!is_next) return;
  h->t = pdt_tx_new(mh, h->port, "/generate", healthy_body);
  h->started++;
}

/* Run the multi handle until t is done or limit_ms passed; a healthy stream that ends
 * meanwhile is judged and replaced (t may be the healthy stream itself: then it is not). */
static void pump(CURLM *mh, healthy_t *h, pdt_tx_t *t, unsigned limit_ms) {
  uint64_t end = pdt_now_ms() + limit_ms;
  while (pdt_now_ms() < end && !t->is_done) { /* bounded by the deadline */
    pdt_tx_run(mh, &t, 1, 5); /* marks every transfer that ends, the healthy one too */
    if (t != h->t && h->t->is_done) healthy_turn(mh, h, 1);
  }
}

typedef struct bad {
  const char *path, *body;
  size_t len;    /* 0: strlen(body) */
  const char *want; /* in the JSON error's message */
} bad_t;

static const bad_t bad_inputs[] = {
    {"/generate", "{\"text\":\"a\\u0000b\"}", 0, "(NUL) at byte 10 is not accepted"},
    {"/generate", "{\"text\":\"a\0b\"}", 14, "body: control character 0x00 at byte 10"},
    {"/generate", "{\"text\":\"a\xff\"}", 0, "body: invalid UTF-8 at byte 10"},
    {"/generate", "{\"text\":\"a\xed\xa0\x80\"}", 0, "body: invalid UTF-8 at byte 10"},
    {"/generate", "{\"text\":\"a\tb\"}", 0, "body: control character 0x09 at byte 10"},
    {"/generate", "{\"stream\":true}", 0, "text|input_ids: a prompt is required"},
    {"/generate", "{\"text\":5,\"stream\":true}", 0,
     "text: expected a string or an array of strings"},
    {"/generate", "{\"input_ids\":\"1 2\"}", 0, "input_ids: expected an array"},
    {"/v1/completions", "{\"model\":\"m\",\"stream\":true}", 0, "prompt: required"},
    {"/v1/completions", "{\"prompt\":{}}", 0, "prompt: expected a string or an array"},
    {"/v1/chat/completions", "{\"model\":\"m\"}", 0, "messages: required"},
    {"/v1/chat/completions", "{\"messages\":\"hi\"}", 0,
     "messages: expected a non-empty array of objects"},
    {"/v1/chat/completions",
     "{\"messages\":[{\"role\":\"user\",\"content\":\"x\\u0000y\"}]}", 0,
     "messages: \\\\u0000 (NUL) at byte 40"},
};

static void send_bad(CURLM *mh, healthy_t *h, uint16_t port, const bad_t *b) {
  size_t len = b->len ? b->len : strlen(b->body);
  pdt_tx_t *t = pdt_tx_new(mh, port, b->path, "{}");
  memcpy(t->body, b->body, len); /* raw bytes, NUL included (set before the first perform) */
  curl_easy_setopt(t->e, CURLOPT_POSTFIELDSIZE, (long)len);
  pump(mh, h, t, HI_ANSWER_MS);
  char what[160];
  snprintf(what, sizeof what, "%s %s", b->path, b->want);
  CU_assertImplementation(t->is_done && t->t_done - t->t_start < HI_ANSWER_MS, __LINE__, what, __FILE__,
                          "", CU_FALSE);
  PDT_EQ_INT(t->status, 400);
  CU_assertImplementation(strstr(t->buf, "{\"error\":{") == t->buf && strstr(t->buf, b->want),
                          __LINE__, t->buf[0] ? t->buf : what, __FILE__, "", CU_FALSE);
  pdt_tx_del(mh, t);
}

/* Every bad input in every mode: 400 naming the field or offset within 1 s; the only legs
 * the workers saw are the healthy streams'. Then each input straight to both mocks. */
static void test_bad_prompts_get_400_and_reach_no_worker(void) {
  static const char *modes[] = {"reference", "joined", "pr1150", "minilb"};
  rig_t r;
  CURLM *mh = curl_multi_init();
  int rc = rig_start(&r, modes[0]);
  PDT_EQ_INT(rc, 0);
  for (size_t m = 0; rc == 0 && m < sizeof modes / sizeof modes[0]; m++) {
    if (m > 0) {
      PDT_TRUE(proc_stop(&r.gw, 5000, NULL, 0));
      if ((rc = rig_start_gateway(&r, modes[m])) != 0) break;
    }
    healthy_t h = {NULL, r.gw.port, 0, 0, 0};
    healthy_turn(mh, &h, 1);
    for (size_t i = 0; i < sizeof bad_inputs / sizeof bad_inputs[0]; i++)
      send_bad(mh, &h, r.gw.port, &bad_inputs[i]);
    pump(mh, &h, h.t, 5000); /* the last healthy stream to its end */
    healthy_turn(mh, &h, 0);
    PDT_TRUE(h.started >= 1);
    PDT_EQ_INT(h.ok, h.started);
    /* every leg a worker got was a healthy stream's */
    long lp = legs_opened(mh, r.gw.port, "prefill"), ld = legs_opened(mh, r.gw.port, "decode");
    CU_assertImplementation(lp == h.started && ld == h.started, __LINE__, modes[m], __FILE__,
                            "", CU_FALSE);
  }
  PDT_EQ_INT(rc, 0);
  if (rc == 0) { /* the mocks share the parser: sent to them directly, the same answers */
    healthy_t h = {NULL, r.gw.port, 0, 0, 0};
    healthy_turn(mh, &h, 1);
    for (size_t i = 0; i < sizeof bad_inputs / sizeof bad_inputs[0]; i++) {
      send_bad(mh, &h, r.pf.port, &bad_inputs[i]);
      send_bad(mh, &h, r.dc.port, &bad_inputs[i]);
    }
    pump(mh, &h, h.t, 5000);
    healthy_turn(mh, &h, 0);
    PDT_EQ_INT(h.ok, h.started);
  }
  rig_stop(&r);
  curl_multi_cleanup(mh);
}

/* Connect n idle TCP clients to port; returns how many connected (fds in fds). */
static int flood(uint16_t port, int *fds, int n) {
  int k = 0;
  for (; k < n; k++) {
    if ((fds[k] = pdt_dial(port)) < 0) break;
  }
  return k;
}

/* More idle connections to the prefill's bootstrap port than its table holds: a request
 * through the gateway is still served at once, and the mock's descriptors return to their
 * baseline within the REG timeout while the flood is still connected. */
static void test_bootstrap_port_flood_does_not_stall_requests(void) {
  enum { N = PD_MOCK_MAX_BOOT_CONNS + 104 };
  static int fds[N];
  rig_t r;
  CURLM *mh = curl_multi_init();
  int rc = rig_start(&r, "reference");
  PDT_EQ_INT(rc, 0);
  if (rc == 0) {
    pdt_tx_t *w = pdt_tx_once(mh, r.gw.port, "/generate", healthy_body); /* pooled conns */
    PDT_EQ_INT(w->status, 200);
    pdt_tx_del(mh, w);
    int base = pdt_count_fds(r.pf.pid);
    int n = flood(r.pf.boot_port, fds, N);
    PDT_EQ_INT(n, N);
    pdt_sleep_ms(200); /* the mock accepts what the backlog holds */
    pdt_tx_t *t = pdt_tx_new(mh, r.gw.port, "/generate", healthy_body);
    pdt_tx_run(mh, &t, 1, 10000); /* 240 ms here under ASan; stalled until 30 s before */
    PDT_TRUE(t->is_done && t->status == 200 && strstr(t->buf, "[DONE]") != NULL);
    PDT_TRUE(t->t_done - t->t_start < HI_ANSWER_MS);
    pdt_tx_del(mh, t);
    int now = -1;
    for (uint64_t end = pdt_now_ms() + 10000; (now = pdt_count_fds(r.pf.pid)) > base && pdt_now_ms() < end;)
      pdt_sleep_ms(50);
    PDT_EQ_INT(now, base); /* within 10 s, the flood still connected */
    for (int i = 0; i < n; i++) close(fds[i]);
  }
  rig_stop(&r);
  curl_multi_cleanup(mh);
}

/* A non-loopback --listen prints what is exposed; a loopback one prints no warning. */
/* Issue 26 item 5: a stated max_new_tokens / max_tokens of 0 is answered as the protocol the
 * mock speaks does (docs/mock.md, "Max tokens 0"): SGLang ends the request with no output
 * token, vLLM refuses it with 400. Before: both mocks streamed their 8 default tokens. */
static void test_max_tokens_zero_follows_the_protocol(void) {
  const char *sa[] = {"mock", "--role", "decode", "--direct", "--json", NULL};
  const char *va[] = {"mock", "--role", "decode", "--direct", "--protocol", "vllm", "--json", NULL};
  proc_t sg, vl;
  int rs = proc_start(&sg, sa), rv = proc_start(&vl, va);
  PDT_EQ_INT(rs, 0);
  PDT_EQ_INT(rv, 0);
  CURLM *mh = curl_multi_init();
  if (!rs && !rv && mh) {
    pdt_tx_t *t = pdt_tx_once(mh, sg.port, "/generate",
                              "{\"text\":\"x\",\"sampling_params\":{\"max_new_tokens\":0}}");
    PDT_EQ_INT(t->status, 200);
    PDT_TRUE(strstr(t->buf, "\"completion_tokens\":0") != NULL);
    pdt_tx_del(mh, t);
    t = pdt_tx_once(mh, sg.port, "/generate", /* the control: a stated 3 is 3 */
                    "{\"text\":\"x\",\"sampling_params\":{\"max_new_tokens\":3}}");
    PDT_TRUE(t->status == 200 && strstr(t->buf, "\"completion_tokens\":3"));
    pdt_tx_del(mh, t);
    t = pdt_tx_once(mh, vl.port, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":0}");
    PDT_EQ_INT(t->status, 400);
    PDT_TRUE(strstr(t->buf, "max_tokens must be at least 1") != NULL);
    pdt_tx_del(mh, t);
    t = pdt_tx_once(mh, vl.port, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2}");
    PDT_EQ_INT(t->status, 200);
    pdt_tx_del(mh, t);
  }
  if (mh) curl_multi_cleanup(mh);
  PDT_TRUE(proc_stop(&sg, 5000, NULL, 0));
  PDT_TRUE(proc_stop(&vl, 5000, NULL, 0));
}

static void test_non_loopback_listen_warns(void) {
  static char err[4096];
  proc_t p;
  const char *mock_any[] = {"mock", "--role", "decode", "--listen", "0.0.0.0:0", "--json", NULL};
  PDT_EQ_INT(proc_start(&p, mock_any), 0);
  PDT_TRUE(proc_stop(&p, 5000, err, sizeof err));
  PDT_TRUE(strstr(err, "pdref mock: warning: listening on 0.0.0.0, not a loopback address") &&
           strstr(err, "abort_all"));
  const char *mock_lo[] = {"mock", "--role", "decode", "--listen", "127.0.0.1:0", "--json", NULL};
  PDT_EQ_INT(proc_start(&p, mock_lo), 0);
  PDT_TRUE(proc_stop(&p, 5000, err, sizeof err));
  PDT_TRUE(strstr(err, "warning") == NULL);
  const char *gw_any[] = {"gateway", "--listen", "0.0.0.0:0", "--prefill", "http://127.0.0.1:9",
                          "--decode", "http://127.0.0.1:9", "--json", NULL};
  PDT_EQ_INT(proc_start(&p, gw_any), 0);
  PDT_TRUE(proc_stop(&p, 5000, err, sizeof err));
  PDT_TRUE(strstr(err, "pdref gateway: warning: listening on 0.0.0.0, not a loopback address") &&
           strstr(err, "/metrics") && strstr(err, "Authorization"));
}

int pdt_suite_hostile_input(void) {
  static const pdt_case_t cases[] = {
      {"bad prompts get 400 naming the field and reach no worker, every mode",
       test_bad_prompts_get_400_and_reach_no_worker},
      {"a bootstrap port flood does not stall requests; fds back to baseline",
       test_bootstrap_port_flood_does_not_stall_requests},
      {"a non-loopback --listen warns what is exposed", test_non_loopback_listen_warns},
      {"max tokens 0: SGLang mock answers no token, vLLM mock 400",
       test_max_tokens_zero_follows_the_protocol},
  };
  return PDT_SUITE("hostile_input", cases);
}
