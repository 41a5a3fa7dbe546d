/* Option values checked strictly, and the getopt_long loop the subcommands share. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "pd_err.h"

static int not_a_number(const char *cmd, const char *flag, const char *text) {
  fprintf(stderr, "%s: %s: '%s' is not a number\n", cmd, flag, text);
  return PD_ERR_INVAL;
}

int pd_cli_parse_u64(const char *cmd, const char *flag, const char *text, uint64_t min,
                     uint64_t max, uint64_t *out) {
  const char *digits = text[0] == '-' ? text + 1 : text;
  size_t n = strspn(digits, "0123456789");
  if (n == 0 || digits[n] != '\0') return not_a_number(cmd, flag, text);
  errno = 0;
  unsigned long long v = strtoull(digits, NULL, 10);
  int is_negative = digits != text && strspn(digits, "0") != n; /* "-0" is zero */
  if (errno == ERANGE || is_negative || v < min || v > max) {
    fprintf(stderr, "%s: %s: '%s' is out of range %llu..%llu\n", cmd, flag, text,
            (unsigned long long)min, (unsigned long long)max);
    return PD_ERR_INVAL;
  }
  *out = v;
  return 0;
}

int pd_cli_parse_u32(const char *cmd, const char *flag, const char *text, uint32_t min,
                     uint32_t max, uint32_t *out) {
  uint64_t v = 0;
  int rc = pd_cli_parse_u64(cmd, flag, text, min, max, &v);
  if (rc == 0) *out = (uint32_t)v;
  return rc;
}

/* strtod over the whole text: 0, or PD_ERR_INVAL for "", " 1", "1x", "nan", "inf", 1e999. */
static int parse_finite(const char *text, double *out) {
  char *end = NULL;
  if (!text[0] || isspace((unsigned char)text[0])) return PD_ERR_INVAL;
  errno = 0;
  double v = strtod(text, &end);
  if (*end || errno == ERANGE || !isfinite(v)) return PD_ERR_INVAL;
  *out = v;
  return 0;
}

int pd_cli_parse_double(const char *cmd, const char *flag, const char *text, double min, double max,
                        double *out) {
  double v = 0;
  if (parse_finite(text, &v)) return not_a_number(cmd, flag, text);
  if (v < min || v > max) {
    fprintf(stderr, "%s: %s: '%s' is out of range %g..%g\n", cmd, flag, text, min, max);
    return PD_ERR_INVAL;
  }
  *out = v;
  return 0;
}

int pd_cli_parse_positive(const char *cmd, const char *flag, const char *text, double max,
                          double *out) {
  double v = 0;
  if (parse_finite(text, &v)) return not_a_number(cmd, flag, text);
  if (!(v > 0) || v > max) {
    fprintf(stderr, "%s: %s: '%s' is out of range (0, %g]\n", cmd, flag, text, max);
    return PD_ERR_INVAL;
  }
  *out = v;
  return 0;
}

int pd_cli_parse_host_port(const char *cmd, const char *flag, const char *text, char *host,
                           size_t cap, uint16_t *port) {
  const char *colon = strrchr(text, ':'), *h = text;
  const char *p = colon ? colon + 1 : "";
  size_t n = colon ? (size_t)(colon - text) : 0, digits = strspn(p, "0123456789");
  unsigned long v = digits && !p[digits] && digits <= 5 ? strtoul(p, NULL, 10) : 65536;
  if (h[0] == '[' && n >= 2 && h[n - 1] == ']') { /* [v6]:port */
    h++;
    n -= 2;
  }
  if (n == 0 || n >= cap || v > 65535) {
    fprintf(stderr, "%s: %s: expected HOST:PORT with a port in 0..65535, got '%s'\n", cmd, flag,
            text);
    return PD_ERR_INVAL;
  }
  memcpy(host, h, n);
  host[n] = '\0';
  *port = (uint16_t)v;
  return 0;
}

/* The first IPv4 address of ai, else its first IPv6 one, as text into host. */
static int first_address(const struct addrinfo *ai, char *host, size_t cap) {
  const struct addrinfo *v6 = NULL;
  for (; ai; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET)
      return inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)ai->ai_addr)->sin_addr,
                       host, (socklen_t)cap) ? 0 : -1;
    if (ai->ai_family == AF_INET6 && !v6) v6 = ai;
  }
  if (!v6) return -1;
  return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)v6->ai_addr)->sin6_addr,
                   host, (socklen_t)cap) ? 0 : -1;
}

int pd_cli_parse_listen(const char *cmd, const char *flag, const char *text, char *host,
                        size_t cap, uint16_t *port) {
  char name[256];
  int is_v6 = text[0] == '[';
  if (pd_cli_parse_host_port(cmd, flag, text, name, sizeof name, port)) return PD_ERR_INVAL;
  struct addrinfo hints = {.ai_family = is_v6 ? AF_INET6 : AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = is_v6 ? AI_NUMERICHOST : 0};
  struct addrinfo *ai = NULL;
  int rc = getaddrinfo(name, NULL, &hints, &ai);
  if (rc == 0 && first_address(ai, host, cap) == 0) {
    freeaddrinfo(ai);
    return 0;
  }
  if (ai) freeaddrinfo(ai);
  fprintf(stderr, "%s: %s: '%s': %s is not %s (%s)\n", cmd, flag, text, name,
          is_v6 ? "a numeric IPv6 address" : "an address or a host name that resolves",
          rc ? gai_strerror(rc) : "no IPv4 or IPv6 address");
  return PD_ERR_INVAL;
}

int pd_cli_parse_mode(const char *cmd, const char *flag, const char *text, pd_mode_t *out) {
  if (pd_mode_parse(text, out) == 0) return 0;
  fprintf(stderr,
          "%s: %s: unknown mode '%s' (joined, pr1150, minilb or reference; source-first: "
          "vllm-toy-proxy, mooncake-proxy, llmd-sidecar)\n",
          cmd, flag, text);
  return PD_ERR_INVAL;
}

void pd_cli_prog_name(const char *argv0, char *buf, size_t cap) {
  if (!cap) return;
  if (!argv0 || !argv0[0]) argv0 = "pdref";
  if (strspn(argv0, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._+-,:@%") ==
      strlen(argv0)) {
    snprintf(buf, cap, "%s", argv0);
    return;
  }
  buf[0] = '\0';
  pd_cli_shell_quote(buf, cap, argv0);
}

void pd_cli_shell_quote(char *buf, size_t cap, const char *text) {
  size_t n = strlen(buf);
  if (n + 1 >= cap) return;
  buf[n++] = '\'';
  for (; *text && n + 6 < cap; text++) {
    if (*text == '\'') {
      memcpy(buf + n, "'\\''", 4);
      n += 4;
    } else {
      buf[n++] = *text;
    }
  }
  if (n + 1 < cap) buf[n++] = '\'';
  buf[n] = '\0';
}

void pd_cli_getopt_begin(void) {
  optind = 0; /* glibc: 0 starts over, including the state of a half-read "-abc" */
  opterr = 0;
}

int pd_cli_getopt(int argc, char **argv, const struct option *opts, int *index) {
  /* "-": plain words come back in order as PD_CLI_OPT_ARG; ":": a missing value is ':' */
  return getopt_long(argc, argv, "-:h", opts, index);
}

int pd_cli_option_error(const char *cmd, int c, char **argv) {
  const char *word = optind > 0 ? argv[optind - 1] : "";
  int is_long = strncmp(word, "--", 2) == 0;
  if (c == ':')
    fprintf(stderr, "%s: option '%s' needs a value (try --help)\n", cmd, word);
  else if (is_long && optopt != 0) /* a known flag given "=VALUE" */
    fprintf(stderr, "%s: option '%.*s' takes no value (try --help)\n", cmd, (int)strcspn(word, "="),
            word);
  else if (is_long)
    fprintf(stderr, "%s: unknown option '%s' (try --help)\n", cmd, word);
  else
    fprintf(stderr, "%s: unknown option '-%c' (try --help)\n", cmd, optopt);
  return 2;
}

int pd_cli_unexpected_arg(const char *cmd, const char *word) {
  fprintf(stderr, "%s: unexpected argument '%s' (try --help)\n", cmd, word);
  return 2;
}

int pd_cli_parse(const pd_cli_parser_t *p, int argc, char **argv) {
  int c, index = 0;
  pd_cli_getopt_begin();
  while ((c = pd_cli_getopt(argc, argv, p->opts, &index)) != -1) {
    if (c == 'h') {
      p->usage(stdout);
      return 0;
    }
    if (c == '?' || c == ':') return pd_cli_option_error(p->cmd, c, argv);
    if (c != PD_CLI_OPT_ARG) {
      if (p->apply(p->ctx, c, index, optarg)) return 2;
    } else if (!p->words) {
      return pd_cli_unexpected_arg(p->cmd, optarg);
    } else if (*p->n_words < p->max_words) {
      p->words[(*p->n_words)++] = optarg;
    }
  }
  if (optind < argc && !p->words) return pd_cli_unexpected_arg(p->cmd, argv[optind]);
  for (; optind < argc && *p->n_words < p->max_words; optind++) /* the words after "--" */
    p->words[(*p->n_words)++] = argv[optind];
  return -1;
}
