/* The JSON output shared by the subcommands (cli_json.h). */
#include "cli_json.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void pd_cli_json_row_head(cJSON *j, const char *name, const char *path, const char *mode) {
  cJSON_AddStringToObject(j, "scenario", name);
  cJSON_AddStringToObject(j, "file", path);
  cJSON_AddStringToObject(j, "mode", mode);
}

void pd_cli_json_add_nums(cJSON *j, const pd_cli_json_num_t *nums, size_t n) {
  for (size_t i = 0; i < n; i++) cJSON_AddNumberToObject(j, nums[i].key, nums[i].v);
}

void pd_cli_json_add_summary(cJSON *root, cJSON *rows, const pd_cli_json_num_t *counts,
                             size_t n) {
  cJSON_AddItemToObject(root, "rows", rows);
  pd_cli_json_add_nums(root, counts, n);
}

void pd_cli_json_print(cJSON *root) {
  char *txt = cJSON_Print(root);
  if (txt) puts(txt);
  cJSON_free(txt);
  cJSON_Delete(root);
}

void pd_cli_listen_str(const char *host, unsigned port, char *buf, size_t cap) {
  int is_v6 = strchr(host, ':') != NULL;
  snprintf(buf, cap, "%s%s%s:%u", is_v6 ? "[" : "", host, is_v6 ? "]" : "", port);
}

cJSON *pd_cli_ready_json(const char *host, unsigned port) {
  cJSON *j = cJSON_CreateObject();
  char listen[96], url[112];
  pd_cli_listen_str(host, port, listen, sizeof listen);
  snprintf(url, sizeof url, "http://%s", listen);
  cJSON_AddTrueToObject(j, "ready");
  cJSON_AddNumberToObject(j, "pid", (double)getpid());
  cJSON_AddStringToObject(j, "host", host);
  cJSON_AddNumberToObject(j, "port", port);
  cJSON_AddStringToObject(j, "listen", listen);
  cJSON_AddStringToObject(j, "url", url);
  return j;
}

void pd_cli_json_print_line(cJSON *j) {
  char *txt = cJSON_PrintUnformatted(j);
  if (txt) printf("%s\n", txt);
  cJSON_free(txt);
  cJSON_Delete(j);
  fflush(stdout);
}
