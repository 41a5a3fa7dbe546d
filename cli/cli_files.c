/* Pieces shared by the subcommands: scenario arguments (FILE|DIR...: files as given,
 * directories expanded to their *.json files in name order), JSON rows, invariant lists,
 * signals, the descriptor limit and the loopback check. */
#include <arpa/inet.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "cli.h"

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int pd_cli_collect_json(const char *cmd, char **args, int n, char **out, int *n_out, int max) {
  for (int i = 0; i < n; i++) {
    struct stat st;
    if (stat(args[i], &st) != 0) {
      fprintf(stderr, "%s: %s: no such file or directory\n", cmd, args[i]);
      return 2;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (*n_out >= max) {
        fprintf(stderr, "%s: %s: more than %d files given (the limit)\n", cmd, args[i], max);
        return 2;
      }
      out[(*n_out)++] = strdup(args[i]);
      continue;
    }
    DIR *d = opendir(args[i]);
    if (!d) {
      fprintf(stderr, "%s: %s: cannot read directory\n", cmd, args[i]);
      return 2;
    }
    int first = *n_out;
    struct dirent *e;
    while ((e = readdir(d))) {
      size_t l = strlen(e->d_name);
      if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0) continue;
      if (*n_out >= max) { /* never a silent cut: a file left out is a row not run */
        fprintf(stderr, "%s: %s: more than %d .json files (the limit)\n", cmd, args[i], max);
        closedir(d);
        return 2;
      }
      char p[1024];
      snprintf(p, sizeof p, "%s/%s", args[i], e->d_name);
      out[(*n_out)++] = strdup(p);
    }
    closedir(d);
    qsort(out + first, (size_t)(*n_out - first), sizeof *out, cmp_str);
  }
  return 0;
}

void pd_cli_install_signals(void (*on_stop)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &sa, NULL);
}

int pd_cli_is_loopback(const char *host) {
  struct in_addr a4;
  struct in6_addr a6;
  if (!host) return 0;
  if (!strcmp(host, "localhost")) return 1;
  if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

int pd_cli_warn_exposed(const char *cmd, const char *host, const char *exposed) {
  if (pd_cli_is_loopback(host)) return 0;
  fprintf(stderr, "%s: warning: listening on %s, not a loopback address: %s\n", cmd,
          host ? host : "(null)", exposed);
  return 1;
}

void pd_cli_raise_fd_limit(uint64_t want) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want) return;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? (rlim_t)want : rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
}

void pd_cli_mask_str(uint32_t mask, int n_bits, const char *sep, char *buf, size_t cap) {
  size_t off = 0;
  buf[0] = '\0';
  for (int i = 1; i <= n_bits && off + strlen(sep) + 4 < cap; i++)
    if (mask >> (i - 1) & 1u)
      off += (size_t)snprintf(buf + off, cap - off, "%sI%d", off ? sep : "", i);
}

/* ---------- a load error's line ---------- */

/* After '[' at text[pos - 1]: the start of element k (0 from the first), or the end of the
 * array when it has fewer. Strings (with escapes) and nested brackets are skipped whole. */
static size_t skip_elements(const char *text, size_t pos, unsigned long k) {
  int depth = 0, in_str = 0;
  for (; text[pos] && k; pos++) {
    char c = text[pos];
    if (in_str) {
      if (c == '\\' && text[pos + 1]) pos++;
      else if (c == '"') in_str = 0;
    } else if (c == '"') {
      in_str = 1;
    } else if (c == '[' || c == '{') {
      depth++;
    } else if (c == ']' || c == '}') {
      if (depth-- == 0) return pos;
    } else if (c == ',' && depth == 0) {
      k--;
    }
  }
  return pos + strspn(text + pos, " \t\r\n");
}

/* Follow a JSON path ($.a[2].b) through the text: each key is its next "key" after the
 * previous step, each index the element past as many commas. The line of where it ends. */
static int path_line(const char *text, const char *jp) {
  size_t pos = 0;
  for (const char *p = jp + 1; *p;) {
    if (*p == '[') {
      const char *open = strchr(text + pos, '[');
      if (!open) break;
      pos = skip_elements(text, (size_t)(open - text) + 1 + strspn(open + 1, " \t\r\n"),
                          strtoul(p + 1, NULL, 10));
      p += strcspn(p, "]") + (p[strcspn(p, "]")] ? 1 : 0);
      continue;
    }
    if (*p != '.') break;
    size_t n = strcspn(++p, ".[:");
    char key[160];
    snprintf(key, sizeof key, "\"%.*s\"", (int)(n < 150 ? n : 150), p);
    const char *at = strstr(text + pos, key);
    if (!at) break;
    pos = (size_t)(at - text);
    p += n;
  }
  int line = 1;
  for (size_t i = 0; i < pos; i++) line += text[i] == '\n';
  return line;
}

static int error_line(const char *path, const char *rest) {
  const char *at = strstr(rest, "(line ");
  if (at) return atoi(at + 6) > 0 ? atoi(at + 6) : 1;
  if (rest[0] != '$') return 1;
  FILE *f = fopen(path, "rb");
  if (!f) return 1;
  char *text = malloc(PD_CLI_ERROR_SCAN_BYTES + 1);
  size_t n = text ? fread(text, 1, PD_CLI_ERROR_SCAN_BYTES, f) : 0;
  fclose(f);
  if (!text) return 1;
  text[n] = '\0';
  char jp[256];
  snprintf(jp, sizeof jp, "%.*s", (int)strcspn(rest, ": "), rest);
  int line = path_line(text, jp);
  free(text);
  return line;
}

void pd_cli_file_error(const char *path, const char *err, char *out, size_t cap) {
  size_t n = strlen(path);
  const char *rest = strncmp(err, path, n) == 0 && strncmp(err + n, ": ", 2) == 0 ? err + n + 2
                                                                                  : err;
  snprintf(out, cap, "%s:%d: %s", path, error_line(path, rest), rest);
}
