/* cli_json: the pieces of JSON output the subcommands share (sim run, conform, sim bench,
 * the servers' ready lines): a verdict row's head, runs of numeric fields, the summary
 * object, printing it; a ready line's common fields. */
#ifndef PD_CLI_JSON_H
#define PD_CLI_JSON_H
#include <stddef.h>

struct cJSON;

/* The "schema" key of each --json document: its name and version; docs/<name>.schema.json
 * documents it (tests/output_schema_test.py checks real output against each). The explore
 * ones are cli_shard.h's PD_EXPLORE_RESULT_SCHEMA and PD_EXPLORE_MERGE_SCHEMA. */
#define PD_CLI_SCHEMA_SIM_RUN "pdref-sim-run/1"
#define PD_CLI_SCHEMA_CONFORM "pdref-conform/1"
#define PD_CLI_SCHEMA_SIM_BENCH "pdref-sim-bench/1"
#define PD_CLI_SCHEMA_GATEWAY_BENCH "pdref-gateway-bench/1"

/* One numeric field of a row: key and value. */
typedef struct pd_cli_json_num {
  const char *key;
  double v;
} pd_cli_json_num_t;

/* Add "scenario" (the scenario's name), "file" (its path) and "mode" to row j, in order. */
void pd_cli_json_row_head(struct cJSON *j, const char *name, const char *path, const char *mode);
/* Add n numeric fields to j, in order. */
void pd_cli_json_add_nums(struct cJSON *j, const pd_cli_json_num_t *nums, size_t n);
/* Add "rows" (taking ownership of rows), then the n counts (the verdict words' totals,
 * cli_rows.h pd_cli_verdict_summary) to root, in order. */
void pd_cli_json_add_summary(struct cJSON *root, struct cJSON *rows,
                             const pd_cli_json_num_t *counts, size_t n);
/* Print root (cJSON_Print, tabs and newlines) and a newline on stdout, then delete it. */
void pd_cli_json_print(struct cJSON *root);

/* "HOST:PORT", or "[HOST]:PORT" when HOST is an IPv6 address. */
void pd_cli_listen_str(const char *host, unsigned port, char *buf, size_t cap);
/* The start of a server's JSON ready line (pdref mock, pdref gateway): "ready": true, "pid",
 * "host" (the bound address), "port", "listen" (pd_cli_listen_str) and "url"
 * ("http://" + listen); the caller adds its own fields. */
struct cJSON *pd_cli_ready_json(const char *host, unsigned port);
/* Print j on one line (cJSON_PrintUnformatted) and a newline on stdout, flush, delete it. */
void pd_cli_json_print_line(struct cJSON *j);

#endif
