/* cmd_netbench: what `pdref gateway bench` measures (cli/cmd_netbench.c runs it) and the
 * report it prints (cli/cmd_netbench_report.c). */
#ifndef PD_CMD_NETBENCH_H
#define PD_CMD_NETBENCH_H
#include <stdint.h>

#include "cli_progress.h"
#include "pd_netbench.h"

#define NETBENCH_MAX_LEVELS 8u
#define NETBENCH_PATHS 3
/* A percentile is printed only from enough samples to tell it from the maximum: p50 from 2,
 * p99 from 100 (fewer, and "p99" would be the slowest sample). Index 0 p50, 1 p99. */
#define NETBENCH_MIN_SAMPLES(k) ((k) ? 100u : 2u)

typedef struct netbench_opts {
  uint32_t levels[NETBENCH_MAX_LEVELS], n_levels;
  uint32_t tokens, token_ms, first_token_ms, requests;
  uint32_t tp_streams, tp_tokens, tp_token_ms, timeout_s;
  int is_tp, is_pd, is_json;
  const char *mode;
  const char *gateway_cmd; /* --gateway-cmd: any gateway, conform's placeholders; NULL: pdref's */
  char label[64];          /* the gateway's name in the report: "pdref gateway" or --label */
} netbench_opts_t;

typedef struct netbench_path_stats { /* one path at one level */
  uint32_t requests, ok, errors;
  uint64_t events, reads;
  double wall_s, events_per_s, gw_cpu_s;
  double ttft_us[2], itl_us[2]; /* p50, p99; NAN when too few samples (NETBENCH_MIN_SAMPLES) */
  uint64_t n_ttft, n_itl;       /* the samples they come from */
  char err[192];
} netbench_path_stats_t;

typedef struct netbench_level {
  uint32_t streams;
  netbench_path_stats_t p[NETBENCH_PATHS];
} netbench_level_t;

typedef struct netbench_session {
  netbench_opts_t o;
  char dir[64], scenario[96], errlog[96], gw_out[96], exe[1024], gw_cmd[8192];
  pd_netbench_child_t prefill, decode, gw;
  char p_url[64], d_url[64], g_url[64];
  uint16_t p_boot;
  uint64_t room;
  netbench_level_t lv[NETBENCH_MAX_LEVELS];
  netbench_path_stats_t tp;
  long rss_kib[2]; /* latency gateway, throughput gateway */
  double cpu_s[2];
  uint64_t errors;
  pd_cli_progress_t bar;
} netbench_session_t;

extern const char *const pd_netbench_path_names[NETBENCH_PATHS]; /* direct, pd, gateway */

/* The results and the targets, as one JSON document or as text, on stdout. */
void pd_cli_nb_report_json(const netbench_session_t *b);
void pd_cli_nb_report_text(const netbench_session_t *b);

#endif
