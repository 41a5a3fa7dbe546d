/* `pdref sim explore --jobs N`: one exploration over N processes on this machine. Each child
 * is this program run again as shard i/N of the same seed range (`--shard i/N --result F`,
 * its own process: the simulator keeps no global state, but one process per core needs no
 * locks and survives a crash in one world); the parent waits for all of them and returns their
 * results, which cmd_explore.c folds into the document one process over the range prints, the
 * same findings and summary, byte for byte, whatever N (tests/test_explore_jobs.c holds --jobs
 * 1, 2 and 3 to that). docs/explore.md "On one machine". */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "cli_progress.h"

#define CMD "pdref sim explore"
#define JB_PATH_BYTES 1024

/* The options a child must not inherit: ours, and the parent's output choices. */
static int is_dropped(const char *a, int *skip_next) {
  *skip_next = 0;
  if (!strcmp(a, "--jobs")) return *skip_next = 1;
  if (!strncmp(a, "--jobs=", 7)) return 1;
  if (!strcmp(a, "--json")) return 1;
  return 0;
}

/* Runs child i of n (the program at exe); its stdout and stderr go to files in dir. Returns
 * its pid or -1. */
static pid_t spawn(const char *exe, const char *prog, int argc, char **argv, const char *dir,
                   unsigned i, unsigned n, int progress_w) {
  char shard[48], result[JB_PATH_BYTES], log[JB_PATH_BYTES];
  snprintf(shard, sizeof shard, "%u/%u", i, n);
  if (snprintf(result, sizeof result, "%s/shard-%u-of-%u.json", dir, i, n) >= (int)sizeof result ||
      snprintf(log, sizeof log, "%s/shard-%u-of-%u.log", dir, i, n) >= (int)sizeof log)
    return -1;
  char **cv = calloc((size_t)argc + 10, sizeof *cv);
  if (!cv) return -1;
  int k = 0;
  cv[k++] = (char *)prog;
  cv[k++] = "sim";
  cv[k++] = "explore";
  for (int a = 1; a < argc; a++) {
    int skip = 0;
    if (is_dropped(argv[a], &skip)) {
      a += skip;
      continue;
    }
    cv[k++] = argv[a];
  }
  cv[k++] = "--shard";
  cv[k++] = shard;
  cv[k++] = "--result";
  cv[k++] = result;
  cv[k++] = "--json"; /* no text, no progress bar: the parent draws one */
  cv[k] = NULL;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || nul < 0 || dup2(nul, 1) < 0 || dup2(fd, 2) < 0) _exit(2);
    int pw = progress_w >= 0 ? dup(progress_w) : -1; /* dup: not close-on-exec */
    char pv[16];
    snprintf(pv, sizeof pv, "%d", pw);
    if (pw >= 0 && setenv(PD_CLI_EXPLORE_PROGRESS_FD_ENV, pv, 1) != 0) _exit(2);
    execv(exe, cv);
    dprintf(2, CMD ": cannot run %s: %s\n", exe, strerror(errno));
    _exit(2);
  }
  free(cv);
  return pid;
}

/* Copies a child's log to stderr (its errors). */
static void show_log(const char *dir, unsigned i, unsigned n) {
  char log[JB_PATH_BYTES], line[1024];
  FILE *f = snprintf(log, sizeof log, "%s/shard-%u-of-%u.log", dir, i, n) < (int)sizeof log
                ? fopen(log, "r") : NULL;
  while (f && fgets(line, sizeof line, f)) fprintf(stderr, "  shard %u/%u: %s", i, n, line);
  if (f) fclose(f);
}

/* A finding a shard saved: its invariant, seed and case file. */
typedef struct jb_case {
  char inv[8];
  uint64_t seed;
  char *file;
} jb_case_t;

static int case_order(const void *a, const void *b) {
  const jb_case_t *x = a, *y = b;
  int c = strcmp(x->inv, y->inv);
  return c ? c : (x->seed > y->seed) - (x->seed < y->seed);
}

/* One process over the range saves, per invariant, the cases of its first per_inv violating
 * seeds (0: all); n shards each saved their own first ones. Unlink the cases past those, so the
 * directory holds what one process would have written. */
static void prune_cases(const char *dir, unsigned n) {
  jb_case_t *cs = NULL;
  size_t nc = 0, cap = 0;
  double per_inv = 1;
  for (unsigned i = 0; i < n; i++) {
    char p[JB_PATH_BYTES];
    if (snprintf(p, sizeof p, "%s/shard-%u-of-%u.json", dir, i, n) >= (int)sizeof p) continue;
    size_t len = 0;
    char *txt = pd_cli_explore_read(p, &len);
    cJSON *doc = txt ? cJSON_ParseWithLength(txt, len) : NULL;
    free(txt);
    const cJSON *pi = cJSON_GetObjectItemCaseSensitive(doc, "per_invariant");
    if (cJSON_IsNumber(pi)) per_inv = pi->valuedouble;
    const cJSON *fd;
    cJSON_ArrayForEach(fd, cJSON_GetObjectItemCaseSensitive(doc, "findings")) {
      const char *inv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fd, "invariant"));
      const char *file = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fd, "file"));
      if (!inv || !file || strlen(inv) >= sizeof cs->inv) continue;
      if (nc == cap) {
        size_t nca = cap ? 2 * cap : 64;
        jb_case_t *g = realloc(cs, nca * sizeof *g);
        if (!g) break;
        cs = g;
        cap = nca;
      }
      snprintf(cs[nc].inv, sizeof cs[nc].inv, "%s", inv);
      cs[nc].seed = 0;
      pd_cli_explore_u64(fd, "seed", &cs[nc].seed);
      cs[nc].file = strdup(file);
      if (cs[nc].file) nc++;
    }
    cJSON_Delete(doc);
  }
  if (nc) qsort(cs, nc, sizeof *cs, case_order); /* cs is NULL when no shard saved a case */
  for (size_t i = 0, rank = 0; i < nc; i++) {
    rank = i && !strcmp(cs[i].inv, cs[i - 1].inv) ? rank + 1 : 0;
    if (per_inv > 0 && (double)rank >= per_inv) unlink(cs[i].file);
    free(cs[i].file);
  }
  free(cs);
}

static void remove_dir(const char *dir, unsigned n) {
  char p[JB_PATH_BYTES];
  for (unsigned i = 0; i < n; i++) {
    if (snprintf(p, sizeof p, "%s/shard-%u-of-%u.json", dir, i, n) < (int)sizeof p) unlink(p);
    if (snprintf(p, sizeof p, "%s/shard-%u-of-%u.log", dir, i, n) < (int)sizeof p) unlink(p);
  }
  rmdir(dir);
}

unsigned pd_cli_explore_default_jobs(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1u : n > PD_CLI_EXPLORE_MAX_JOBS ? PD_CLI_EXPLORE_MAX_JOBS : (unsigned)n;
}

/* The n shards' results, parsed into docs; 0, or 2 after the message. */
static int read_results(const char *dir, unsigned n, cJSON **docs) {
  for (unsigned i = 0; i < n; i++) {
    char p[JB_PATH_BYTES];
    size_t len = 0;
    char *txt = snprintf(p, sizeof p, "%s/shard-%u-of-%u.json", dir, i, n) < (int)sizeof p
                    ? pd_cli_explore_read(p, &len) : NULL;
    docs[i] = txt ? cJSON_ParseWithLength(txt, len) : NULL;
    free(txt);
    if (!cJSON_IsObject(docs[i])) {
      fprintf(stderr, CMD ": --jobs: shard %u/%u wrote no readable result\n", i, n);
      return 2;
    }
  }
  return 0;
}

/* ---------- the parent's progress bar ----------
 * Each shard writes "i explored total violating frac" lines to one pipe (cmd_explore.c,
 * progress); the parent keeps each shard's last line and draws their sum. */
typedef struct jb_shard_progress {
  unsigned long long explored, total, violating;
  double frac;
} jb_shard_progress_t;

typedef struct jb_progress {
  int fd; /* the pipe's read end, -1 once it reached its end */
  char buf[512];
  size_t len;
  jb_shard_progress_t *shard;
  unsigned n;
  pd_cli_progress_t bar;
} jb_progress_t;

static void jb_progress_line(jb_progress_t *p, const char *line) {
  unsigned long long i, e, t, v;
  double f;
  if (sscanf(line, "%llu %llu %llu %llu %lf", &i, &e, &t, &v, &f) != 5 || i >= p->n) return;
  p->shard[i] = (jb_shard_progress_t){e, t, v, f};
}

/* Read what the pipe holds now (non-blocking) and take its whole lines. */
static void jb_progress_read(jb_progress_t *p) {
  for (int guard = 0; p->fd >= 0 && guard < 1024; guard++) {
    ssize_t r = read(p->fd, p->buf + p->len, sizeof p->buf - 1 - p->len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) { /* every writer gone */
        close(p->fd);
        p->fd = -1;
      }
      return;
    }
    p->len += (size_t)r;
    p->buf[p->len] = '\0';
    char *start = p->buf, *nl;
    while ((nl = strchr(start, '\n')) != NULL) {
      *nl = '\0';
      jb_progress_line(p, start);
      start = nl + 1;
    }
    p->len = strlen(start); /* a partial line waits for its end; a full buffer is dropped */
    if (p->len >= sizeof p->buf - 1) p->len = 0;
    memmove(p->buf, start, p->len);
  }
}

static void jb_progress_draw(jb_progress_t *p, unsigned done) {
  unsigned long long e = 0, t = 0, v = 0;
  double f = 0;
  for (unsigned i = 0; i < p->n; i++) {
    e += p->shard[i].explored;
    t += p->shard[i].total;
    v += p->shard[i].violating;
    f += p->shard[i].frac / p->n;
  }
  double el = pd_cli_progress_elapsed_s(&p->bar);
  double frac = done == p->n ? 1.0 : t ? (double)e / (double)t : f;
  if (t)
    pd_cli_progress_draw(&p->bar, frac, "%llu/%llu seeds  %.0f seeds/s  %llu violating  %u jobs",
                         e, t, el > 0 ? (double)e / el : 0.0, v, p->n);
  else /* no shard has reported yet */
    pd_cli_progress_draw(&p->bar, frac, "starting %u jobs  %.1f s", p->n, el);
}

int pd_cli_explore_jobs(const char *prog, int argc, char **argv, unsigned n, int quiet,
                        cJSON **docs) {
  int json = quiet;
  const char *tmp = getenv("TMPDIR");
  char dir[JB_PATH_BYTES];
  snprintf(dir, sizeof dir, "%s/pdref-explore-jobs-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    fprintf(stderr, CMD ": --jobs: cannot make a directory for the shards' results (%s): %s\n",
            dir, strerror(errno));
    return 2;
  }
  /* this program's file, read once: exec of /proc/self/exe itself would run whatever loaded
   * us (a tool such as valgrind) rather than pdref */
  char exe[JB_PATH_BYTES];
  ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (el <= 0) {
    fprintf(stderr, CMD ": --jobs: cannot find this program's file (/proc/self/exe): %s\n",
            strerror(errno));
    rmdir(dir);
    return 2;
  }
  exe[el] = '\0';
  pid_t *pids = calloc(n, sizeof *pids);
  int *status = calloc(n, sizeof *status);
  jb_progress_t pg = {.fd = -1, .n = n, .shard = calloc(n, sizeof *pg.shard)};
  int pfd[2] = {-1, -1};
  if (pg.shard && pipe(pfd) == 0) { /* no bar without it; the exploration runs all the same */
    (void)fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
    (void)fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    pg.fd = pfd[0];
  }
  int rc = pids && status ? 0 : 2;
  unsigned started = 0;
  for (; rc == 0 && started < n; started++) {
    pids[started] = spawn(exe, prog, argc, argv, dir, started, n, pfd[1]);
    if (pids[started] < 0) {
      fprintf(stderr, CMD ": --jobs: cannot start shard %u: %s\n", started, strerror(errno));
      rc = 2;
      break;
    }
  }
  if (pfd[1] >= 0) close(pfd[1]); /* the children hold the only write ends now */
  pd_cli_progress_init(&pg.bar, json);
  pg.n = started;
  /* Each turn waits at most PD_CLI_PROGRESS_EVERY_S for a line, then reaps whoever ended:
   * bounded by the children, which the exploration's own seeds or --time bound. */
  for (unsigned done = 0; done < started;) {
    if (pg.fd >= 0) {
      struct pollfd pf = {pg.fd, POLLIN, 0};
      if (poll(&pf, 1, (int)(PD_CLI_PROGRESS_EVERY_S * 1000)) > 0) jb_progress_read(&pg);
    }
    int st = 0;
    pid_t p = waitpid(-1, &st, pg.fd >= 0 ? WNOHANG : 0);
    if (p < 0 && errno == EINTR) continue;
    if (p < 0) break; /* no child left */
    for (unsigned i = 0; p > 0 && i < started; i++)
      if (pids[i] == p) {
        status[i] = st;
        done++;
      }
    jb_progress_draw(&pg, done);
  }
  pd_cli_progress_clear(&pg.bar);
  if (pg.fd >= 0) close(pg.fd);
  free(pg.shard);
  for (unsigned i = 0; i < started; i++) {
    int code = WIFEXITED(status[i]) ? WEXITSTATUS(status[i]) : 2;
    char res[JB_PATH_BYTES];
    struct stat sb;
    if (code <= 1 && (snprintf(res, sizeof res, "%s/shard-%u-of-%u.json", dir, i, n) >=
                          (int)sizeof res || stat(res, &sb) != 0 || sb.st_size == 0)) {
      fprintf(stderr, CMD ": --jobs: shard %u/%u exited %d but wrote no result:\n", i, n, code);
      show_log(dir, i, n);
      rc = 2;
      continue;
    }
    if (code > 1) {
      fprintf(stderr, CMD ": --jobs: shard %u/%u failed (%s %d):\n", i, n,
              WIFEXITED(status[i]) ? "exit" : "signal",
              WIFEXITED(status[i]) ? code : WTERMSIG(status[i]));
      show_log(dir, i, n);
      rc = 2;
    }
  }
  if (rc == 0) prune_cases(dir, n);
  if (rc == 0) rc = read_results(dir, n, docs);
  remove_dir(dir, n);
  free(pids);
  free(status);
  return rc;
}
