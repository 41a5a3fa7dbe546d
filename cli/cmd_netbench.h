/* cmd_netbench: what `pdref gateway bench` measures (cli/cmd_netbench.c runs it) and the
 * report it prints (cli/cmd_netbench_report.c). */
#ifndef PD_CMD_NETBENCH_H
#define PD_CMD_NETBENCH_H
#include <stdint.h>

#include "cli_progress.h"
#include "pd_netbench.h"

#define NB_MAX_LEVELS 8u
#define NB_PATHS 3

typedef struct nb_opts {
  uint32_t levels[NB_MAX_LEVELS], n_levels;
  uint32_t tokens, token_ms, first_token_ms, requests;
  uint32_t tp_streams, tp_tokens, tp_token_ms, timeout_s;
  int is_tp, is_pd, is_json;
  const char *mode;
} nb_opts_t;

typedef struct nb_pstats { /* one path at one level */
  uint32_t requests, ok, errors;
  uint64_t events, reads;
  double wall_s, events_per_s, gw_cpu_s;
  double ttft_us[2], itl_us[2]; /* p50, p99 */
  char err[192];
} nb_pstats_t;

typedef struct nb_level {
  uint32_t streams;
  nb_pstats_t p[NB_PATHS];
} nb_level_t;

typedef struct nb_bench {
  nb_opts_t o;
  char dir[64], scenario[96], errlog[96], exe[1024];
  pd_nb_child_t prefill, decode, gw;
  char p_url[64], d_url[64], g_url[64];
  uint16_t p_boot;
  uint64_t room;
  nb_level_t lv[NB_MAX_LEVELS];
  nb_pstats_t tp;
  long rss_kib[2]; /* latency gateway, throughput gateway */
  double cpu_s[2];
  uint64_t errors;
  pd_cli_progress_t bar;
} nb_bench_t;

extern const char *const pd_nb_path_names[NB_PATHS]; /* direct, pd, gateway */

/* The results and the targets, as one JSON document or as text, on stdout. */
void pd_cli_nb_report_json(const nb_bench_t *b);
void pd_cli_nb_report_text(const nb_bench_t *b);

#endif
