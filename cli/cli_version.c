/* The version pdref and pdref-gateway report. PD_VERSION comes from pd_version.h, which
 * cmake/version.cmake rewrites at build time when the version changes (`git describe --tags
 * --dirty` in a checkout, else the project version of CMakeLists.txt); only this file includes
 * it, so a new version recompiles one file. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "pd_version.h"

const char *pd_cli_version(void) {
  return PD_VERSION;
}

void pd_cli_print_version(const char *prog, int is_json) {
  if (!is_json) {
    printf("%s %s\n", prog, PD_VERSION);
    return;
  }
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "version", PD_VERSION);
  char *txt = cJSON_PrintUnformatted(j);
  if (txt) puts(txt);
  cJSON_free(txt);
  cJSON_Delete(j);
}

int pd_cli_is_version(const char *prog, int argc, char **argv) {
  int has_version = 0, has_json = 0;
  for (int i = 1; i < argc; i++) {
    has_version |= strcmp(argv[i], "--version") == 0;
    has_json |= strcmp(argv[i], "--json") == 0;
  }
  if (!has_version || argc - 1 != has_version + has_json) return 0;
  pd_cli_print_version(prog, has_json);
  return 1;
}
