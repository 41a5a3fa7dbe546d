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

/* The invariant whose ID starts at p and is followed by a space ("I3 ..."), else 0. */
static int id_at(const char *p) {
  char id[8];
  size_t n = strcspn(p, " ");
  if (n >= sizeof id || p[n] != ' ') return 0;
  memcpy(id, p, n);
  id[n] = '\0';
  return pd_invariant_parse(id);
}

void pd_cli_reason_text(const char *reason, char *buf, size_t cap) {
  /* the first word that is an ID ("I3 prefill slot ...", "request 0: I3 prefill slot ...") */
  for (const char *p = reason; *p; p++) {
    int inv = (p == reason || p[-1] == ' ') && p[0] == 'I' ? id_at(p) : 0;
    if (!inv) continue;
    size_t n = strcspn(p, " ");
    snprintf(buf, cap, "%.*s%.*s %s: %s", (int)(p - reason), reason, (int)n, p,
             pd_invariant_name(inv), p + n + 1);
    return;
  }
  snprintf(buf, cap, "%s", reason);
}
