/* pd_request_render prints the client's members once and writes the bootstrap members by
 * hand; its bytes must be those cJSON prints for the document with the members set on a
 * tree (every member of those names removed, the new ones appended), as it rendered before.
 * Bodies with and without the members, duplicates, batches, odd hosts and rids. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_request.h"
#include "pdt.h"

/* ---- the tree form, as pd_request.c rendered before ---- */

static void set(cJSON *doc, const char *key, cJSON *item) {
  while (cJSON_GetObjectItemCaseSensitive(doc, key)) cJSON_DeleteItemFromObjectCaseSensitive(doc, key);
  cJSON_AddItemToObject(doc, key, item);
}

static cJSON *item(const pd_bootstrap_t *b, uint32_t i, int kind, int is_batch) {
  char lit[128];
  switch (kind) {
  case 0: return cJSON_CreateString(b->host);
  case 1: return b->port < 0 ? cJSON_CreateNull() : cJSON_CreateNumber((double)b->port);
  case 2:
    snprintf(lit, sizeof lit, "%" PRIu64, b->rooms[i]);
    return cJSON_CreateRaw(lit);
  default:
    if (!is_batch) return cJSON_CreateString(b->rid);
    snprintf(lit, sizeof lit, "%s-%04x", b->rid, (unsigned)i);
    return cJSON_CreateString(lit);
  }
}

static cJSON *field(const pd_bootstrap_t *b, uint32_t n, int kind) {
  if (!n) return item(b, 0, kind, 0);
  cJSON *a = cJSON_CreateArray();
  for (uint32_t i = 0; i < n; i++) cJSON_AddItemToArray(a, item(b, i, kind, 1));
  return a;
}

static char *tree_render(const pd_request_t *r, const pd_bootstrap_t *b) {
  cJSON *doc = cJSON_Duplicate(r->json, 1);
  set(doc, "bootstrap_host", field(b, r->batch_size, 0));
  set(doc, "bootstrap_port", field(b, r->batch_size, 1));
  set(doc, "bootstrap_room", field(b, r->batch_size, 2));
  if (b->rid) set(doc, "rid", field(b, r->batch_size, 3));
  if (b->dp_rank >= 0) set(doc, "routed_dp_rank", cJSON_CreateNumber((double)b->dp_rank));
  char *s = cJSON_PrintUnformatted(doc);
  cJSON_Delete(doc);
  return s;
}

static void t_render_prints_what_the_tree_printed(void) {
  static const struct {
    const char *path, *body;
  } bodies[] = {
      {"/generate", "{\"text\":\"hello\",\"stream\":true}"},
      {"/generate", ("{\"text\":\"h\\u00e9\\n\\\"q\\\"\",\"sampling_params\":{\"max_new_tokens\":8},"
                     "\"bootstrap_room\":5,\"rid\":\"mine\",\"bootstrap_room\":[1,2]}")},
      {"/generate", "{\"text\":[\"a\",\"b\",\"c\"],\"bootstrap_host\":\"x\",\"routed_dp_rank\":3}"},
      {"/generate", "{\"input_ids\":[[1,2],[3]],\"return_logprob\":true,\"x\":1.5e300}"},
      {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":3}"},
      {"/v1/completions", "{\"prompt\":[\"p0\",\"p1\"],\"logprobs\":1,\"bootstrap_port\":null}"},
      {"/v1/completions", "{\"prompt\":\"x\",\"rid\":[\"a\"],\"rid\":\"b\"}"},
  };
  static const char *const hosts[] = {"p0", "", "h\"o\\st", "tab\there\x01\x1f", "caf\xc3\xa9"};
  static const char *const rids[] = {NULL, "pdref-00ff00ff00ff00ff", "r\"\\\n\x02"};
  static const int ports[] = {8998, -1, 0, 65535};
  static const int dps[] = {-1, 0, 7};
  uint64_t rooms[8];
  for (int i = 0; i < 8; i++) rooms[i] = (i * 0x9e3779b97f4a7c15ull) >> (i % 3);
  unsigned compared = 0;
  for (size_t bi = 0; bi < sizeof bodies / sizeof *bodies; bi++) {
    pd_request_t r;
    char err[128];
    const char *body = bodies[bi].body;
    PDT_EQ_INT(pd_request_parse(&r, NULL, bodies[bi].path, body, strlen(body),
                                PD_BATCH_RULE_REFERENCE, err, sizeof err), 0);
    for (size_t h = 0; h < sizeof hosts / sizeof *hosts; h++)
      for (size_t k = 0; k < sizeof rids / sizeof *rids; k++)
        for (size_t p = 0; p < sizeof ports / sizeof *ports; p++)
          for (size_t d = 0; d < sizeof dps / sizeof *dps; d++) {
            pd_bootstrap_t b = {hosts[h], ports[p], rooms, rids[k], dps[d], 0};
            char *out = NULL;
            size_t n = 0;
            PDT_EQ_INT(pd_request_render(&r, &b, &out, &n), 0);
            char *want = tree_render(&r, &b);
            PDT_EQ_U64(n, strlen(want));
            PDT_EQ_STR(out, want);
            compared++;
            free(out);
            cJSON_free(want);
          }
    pd_request_free(&r);
  }
  PDT_EQ_U64(compared, 7 * 5 * 3 * 4 * 3);
}

/* An empty object: the first injected member has no comma before it. */
static void t_render_of_an_empty_object(void) {
  pd_request_t r;
  memset(&r, 0, sizeof r);
  r.json = cJSON_CreateObject();
  uint64_t room = 42;
  pd_bootstrap_t b = {"p", 1, &room, NULL, -1, 0};
  char *out = NULL;
  PDT_EQ_INT(pd_request_render(&r, &b, &out, NULL), 0);
  PDT_EQ_STR(out, "{\"bootstrap_host\":\"p\",\"bootstrap_port\":1,\"bootstrap_room\":42}");
  free(out);
  pd_request_free(&r);
}

int pdt_suite_render_bytes(void) {
  static const pdt_case_t cases[] = {
      {"render prints what the cJSON tree printed", t_render_prints_what_the_tree_printed},
      {"render of an empty object", t_render_of_an_empty_object},
  };
  return PDT_SUITE("render_bytes", cases);
}
