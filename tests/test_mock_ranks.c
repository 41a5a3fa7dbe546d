/* `pdref mock --transfer-group`, `--dp-size`, `--capacity-per-rank` (docs/mock.md): real mock
 * processes on 127.0.0.1, started and stopped here, refuse what the engine refuses: a pair
 * across transfer groups fails both legs (S2.15), a decode that looks its room up on another
 * DP rank never pairs and both legs time out (S2.14, R-PAIR-RANK), and with per-rank capacity a
 * rank's requests wait only for that rank's share (R-CAP-RANK). Bad flag values exit 2 naming
 * the option. Every wait is bounded. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pdt.h"
#include "pdt_cli.h"
#include "pdt_curl.h"
#include "pdt_net.h"
#include "pdt_proc.h"

#define WAIT_MS 10000u

typedef struct rmock {
  pid_t pid;
  uint16_t port, boot_port;
} rmock_t;

/* Start `pdref mock --role ROLE --listen 127.0.0.1:0 --bootstrap-port 0 --json EXTRA...`
 * (extra ends with NULL, at most 12). 0 when its ready line came. */
static int rm_start(rmock_t *r, const char *role, const char *const *extra) {
  char bin[PATH_MAX + 16], ready[512];
  memset(r, 0, sizeof *r);
  r->pid = -1;
  if (pdt_pdref_path(bin, sizeof bin) != 0) return -1;
  char *argv[32] = {bin, "mock", "--role", (char *)role, "--listen", "127.0.0.1:0",
                    "--bootstrap-port", "0", "--json"};
  int n = 9;
  for (int i = 0; extra && extra[i] && i < 12; i++) argv[n++] = (char *)extra[i];
  argv[n] = NULL;
  r->pid = pdt_spawn(argv, ready, sizeof ready, WAIT_MS);
  if (r->pid < 0) return -1;
  r->port = (uint16_t)pdt_json_uint(ready, "\"port\":");
  r->boot_port = (uint16_t)pdt_json_uint(ready, "\"bootstrap_port\":");
  return r->port ? 0 : -1;
}

/* SIGTERM and reap; it must exit cleanly. */
static void rm_stop(rmock_t *r) {
  if (r->pid <= 0) return;
  kill(r->pid, SIGTERM);
  int st = 0;
  PDT_EQ_INT(pdt_reap(r->pid, WAIT_MS, &st), 0);
  PDT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  r->pid = -1;
}

/* A /generate body on room `room` naming the prefill's bootstrap port; rank fields when >= 0. */
static void body(char *out, size_t cap, uint16_t bport, uint64_t room, int routed, int looked) {
  char ranks[96] = "";
  if (routed >= 0) snprintf(ranks, sizeof ranks, ",\"routed_dp_rank\":%d", routed);
  if (looked >= 0)
    snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), ",\"disagg_prefill_dp_rank\":%d",
             looked);
  snprintf(out, cap,
           "{\"text\":\"hi\",\"stream\":false,\"bootstrap_host\":\"127.0.0.1\",\"bootstrap_port\":%u,"
           "\"bootstrap_room\":%llu,\"sampling_params\":{\"max_new_tokens\":4}%s}",
           bport, (unsigned long long)room, ranks);
}

/* Both legs of one pair, prefill's body pb and decode's db, run to their ends (bounded);
 * their statuses into *ps, *ds. */
static void run_pair(const rmock_t *p, const rmock_t *d, const char *pb, const char *db, long *ps,
                     long *ds) {
  CURLM *mh = curl_multi_init();
  pdt_tx_t *ts[] = {pdt_tx_new(mh, p->port, "/generate", pb), pdt_tx_new(mh, d->port, "/generate", db)};
  pdt_tx_run(mh, ts, 2, WAIT_MS);
  *ps = ts[0]->is_done ? ts[0]->status : -1;
  *ds = ts[1]->is_done ? ts[1]->status : -1;
  pdt_tx_del(mh, ts[0]);
  pdt_tx_del(mh, ts[1]);
  curl_multi_cleanup(mh);
}

/* Exit 2, and stderr names the option. */
static void expect_refused(const char *flag, const char *value) {
  static run_t r;
  const char *args[] = {"mock", "--role", "prefill", flag, value, NULL};
  if (pdt_cli_run(&r, "pdref", args, 1) != 0) return; /* not built */
  PDT_EQ_INT(r.code, 2);
  char named[64]; /* "--flag: ", the value's own message, not getopt's unknown option */
  snprintf(named, sizeof named, "%s: ", flag);
  PDT_HAS(r.err, named);
}

static void test_bad_flag_values_exit_2_naming_the_option(void) {
  expect_refused("--transfer-group", "256");
  expect_refused("--transfer-group", "x");
  expect_refused("--transfer-group", "-1");
  expect_refused("--dp-size", "0");
  expect_refused("--dp-size", "65");
  expect_refused("--dp-size", "2x");
}

/* S2.15: prefill in group 1, decode in group 0: the transfer fails, both legs 500; a decode in
 * group 1 pairs with the same prefill and both answer 200. */
static void test_a_pair_across_transfer_groups_fails_both_legs(void) {
  signal(SIGPIPE, SIG_IGN);
  rmock_t p, d0, d1;
  const char *g1[] = {"--transfer-group", "1", NULL}, *g0[] = {"--transfer-group", "0", NULL};
  int ok = rm_start(&p, "prefill", g1) == 0 && rm_start(&d0, "decode", g0) == 0 &&
           rm_start(&d1, "decode", g1) == 0;
  PDT_TRUE(ok);
  if (ok) {
    char b1[512], b2[512];
    long ps = 0, ds = 0;
    body(b1, sizeof b1, p.boot_port, 11, -1, -1);
    run_pair(&p, &d0, b1, b1, &ps, &ds);
    PDT_EQ_INT(ps, 500);
    PDT_EQ_INT(ds, 500);
    body(b2, sizeof b2, p.boot_port, 12, -1, -1);
    run_pair(&p, &d1, b2, b2, &ps, &ds);
    PDT_EQ_INT(ps, 200);
    PDT_EQ_INT(ds, 200);
  }
  rm_stop(&p);
  rm_stop(&d0);
  rm_stop(&d1);
}

/* S2.14 with --dp-size 2: a prefill leg on routed_dp_rank 1 and a decode that looks room 2 up
 * on 2 % 2 = 0 never meet (both time out: 500); room 3 (3 % 2 = 1) agrees and both answer 200,
 * as does room 2 with disagg_prefill_dp_rank 1. Without --dp-size (one rank) room 3 with
 * routed_dp_rank 1 fails too: the flag is what makes it pair. */
static void test_a_decode_on_another_dp_rank_never_pairs(void) {
  signal(SIGPIPE, SIG_IGN);
  rmock_t p2, p1, d;
  const char *pa[] = {"--dp-size", "2", "--bootstrap-timeout-ms", "300", NULL};
  const char *pb[] = {"--bootstrap-timeout-ms", "300", NULL};
  const char *da[] = {"--waiting-timeout-ms", "300", NULL};
  int ok = rm_start(&p2, "prefill", pa) == 0 && rm_start(&p1, "prefill", pb) == 0 &&
           rm_start(&d, "decode", da) == 0;
  PDT_TRUE(ok);
  if (ok) {
    char pbody[512], dbody[512];
    long ps = 0, ds = 0;
    body(pbody, sizeof pbody, p2.boot_port, 2, 1, -1);
    body(dbody, sizeof dbody, p2.boot_port, 2, 1, -1); /* decode: room 2 -> rank 0 */
    run_pair(&p2, &d, pbody, dbody, &ps, &ds);
    PDT_EQ_INT(ps, 500);
    PDT_EQ_INT(ds, 500);
    body(pbody, sizeof pbody, p2.boot_port, 3, 1, -1);
    run_pair(&p2, &d, pbody, pbody, &ps, &ds);
    PDT_EQ_INT(ps, 200);
    PDT_EQ_INT(ds, 200);
    body(pbody, sizeof pbody, p2.boot_port, 4, 1, -1);
    body(dbody, sizeof dbody, p2.boot_port, 4, 1, 1); /* the rank, told to decode */
    run_pair(&p2, &d, pbody, dbody, &ps, &ds);
    PDT_EQ_INT(ps, 200);
    PDT_EQ_INT(ds, 200);
    body(pbody, sizeof pbody, p1.boot_port, 5, 1, -1); /* one rank: rank 1 does not exist */
    run_pair(&p1, &d, pbody, pbody, &ps, &ds);
    PDT_EQ_INT(ps, 500);
    PDT_EQ_INT(ds, 500);
  }
  rm_stop(&p2);
  rm_stop(&p1);
  rm_stop(&d);
}

/* A direct decode with 2 running slots and 2 ranks: requests a and b pinned to rank 0, c to
 * rank 1, sent together, each 200 tokens (1 s). Per rank (1 slot each): b waits for a while c
 * runs at once, so c ends before b. Shared (2 slots): a and b run, c waits, so c ends last.
 * Returns 1 when c ended before b; -1 when something did not finish. */
static int c_before_b(int per_rank) {
  rmock_t d;
  const char *rank_args[] = {"--direct", "--dp-size", "2", "--max-running", "2",
                             "--capacity-per-rank", NULL};
  if (!per_rank) rank_args[5] = NULL;
  if (rm_start(&d, "decode", rank_args) != 0) return -1;
  static const char *const bodies[] = {
      "{\"text\":\"a\",\"stream\":false,\"routed_dp_rank\":0,\"sampling_params\":{\"max_new_tokens\":200}}",
      "{\"text\":\"b\",\"stream\":false,\"routed_dp_rank\":0,\"sampling_params\":{\"max_new_tokens\":200}}",
      "{\"text\":\"c\",\"stream\":false,\"routed_dp_rank\":1,\"sampling_params\":{\"max_new_tokens\":200}}"};
  CURLM *mh = curl_multi_init();
  pdt_tx_t *ts[3];
  for (int i = 0; i < 3; i++) ts[i] = pdt_tx_new(mh, d.port, "/generate", bodies[i]);
  pdt_tx_run(mh, ts, 3, WAIT_MS);
  int rc = -1;
  if (ts[0]->is_done && ts[1]->is_done && ts[2]->is_done && ts[0]->status == 200 &&
      ts[1]->status == 200 && ts[2]->status == 200)
    rc = ts[2]->t_done < ts[1]->t_done;
  for (int i = 0; i < 3; i++) pdt_tx_del(mh, ts[i]);
  curl_multi_cleanup(mh);
  rm_stop(&d);
  return rc;
}

/* R-CAP-RANK over sockets: the order the three requests end in shows whose slots they took. */
static void test_capacity_per_rank_over_sockets(void) {
  signal(SIGPIPE, SIG_IGN);
  PDT_EQ_INT(c_before_b(1), 1);
  PDT_EQ_INT(c_before_b(0), 0);
}

int pdt_suite_mock_ranks(void) {
  static const pdt_case_t cases[] = {
      {"--transfer-group/--dp-size: bad values exit 2 naming the option",
       test_bad_flag_values_exit_2_naming_the_option},
      {"--transfer-group: a pair across groups fails both legs",
       test_a_pair_across_transfer_groups_fails_both_legs},
      {"--dp-size: a decode on another DP rank never pairs", test_a_decode_on_another_dp_rank_never_pairs},
      {"--capacity-per-rank: a rank's requests wait only for its share",
       test_capacity_per_rank_over_sockets},
  };
  return PDT_SUITE("mock_ranks", cases);
}
