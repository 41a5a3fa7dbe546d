/* Invariant sets with their names, in text and JSON (cli_rows.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli_rows.h"
#include "pd_scenario.h"

void pd_cli_inv_text(uint32_t mask, char *buf, size_t cap) {
  size_t off = 0;
  if (!cap) return;
  buf[0] = '\0';
  for (int i = 1; i <= PD_INVARIANT_COUNT; i++) {
    if (!(mask >> (i - 1) & 1u)) continue;
    const char *name = pd_invariant_name(i);
    if (off + strlen(name) + 8 >= cap) break;
    off += (size_t)snprintf(buf + off, cap - off, "%sI%d %s", off ? ", " : "", i, name);
  }
}

void pd_cli_inv_add(cJSON *j, const char *key, const char *names_key, uint32_t mask) {
  cJSON *codes = cJSON_AddArrayToObject(j, key);
  cJSON *names = names_key ? cJSON_AddArrayToObject(j, names_key) : NULL;
  for (int i = 1; i <= PD_INVARIANT_COUNT; i++) {
    if (!(mask >> (i - 1) & 1u)) continue;
    char id[8];
    snprintf(id, sizeof id, "I%d", i);
    cJSON_AddItemToArray(codes, cJSON_CreateString(id));
    if (names) cJSON_AddItemToArray(names, cJSON_CreateString(pd_invariant_name(i)));
  }
}

void pd_cli_reason_text(const char *reason, char *buf, size_t cap) {
  char id[8];
  size_t n = strcspn(reason, " ");
  int inv = 0;
  if (n < sizeof id && reason[n] == ' ') {
    memcpy(id, reason, n);
    id[n] = '\0';
    inv = pd_invariant_parse(id);
  }
  if (inv) snprintf(buf, cap, "I%d %s: %s", inv, pd_invariant_name(inv), reason + n + 1);
  else snprintf(buf, cap, "%s", reason);
}
