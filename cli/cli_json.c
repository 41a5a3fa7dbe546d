/* The JSON output shared by the subcommands (cli_json.h). */
#include "cli_json.h"

#include <cjson/cJSON.h>
#include <stdio.h>

void pd_cli_json_row_head(cJSON *j, const char *name, const char *path, const char *mode) {
  cJSON_AddStringToObject(j, "scenario", name);
  cJSON_AddStringToObject(j, "file", path);
  cJSON_AddStringToObject(j, "mode", mode);
}

void pd_cli_json_add_nums(cJSON *j, const pd_cli_json_num_t *nums, size_t n) {
  for (size_t i = 0; i < n; i++) cJSON_AddNumberToObject(j, nums[i].key, nums[i].v);
}

void pd_cli_json_add_summary(cJSON *root, cJSON *rows, int passed, int failed,
                             int not_exercised) {
  cJSON_AddItemToObject(root, "rows", rows);
  cJSON_AddNumberToObject(root, "passed", passed);
  cJSON_AddNumberToObject(root, "failed", failed);
  cJSON_AddNumberToObject(root, "not_exercised", not_exercised);
}

void pd_cli_json_print(cJSON *root) {
  char *txt = cJSON_Print(root);
  if (txt) puts(txt);
  cJSON_free(txt);
  cJSON_Delete(root);
}
