/* Request parsing, per-mode batch rules (R1.2, R1.3, M8.2) and bootstrap rendering
 * (R1.23-R1.26). Rendered bodies are checked by parsing them back. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "pd_alloc.h"
#include "pd_err.h"
#include "pd_request.h"
#include "pdt.h"

#define ERRLEN 256

typedef struct {
  int rc;
  pd_request_t r;
  char err[ERRLEN];
} parsed_t;

static void parse(parsed_t *p, const char *path, const char *body, pd_batch_rule_t rule) {
  p->rc = pd_request_parse(&p->r, NULL, path, body, strlen(body), rule, p->err, sizeof p->err);
}

/* rc of parsing body at path under rule; fills batch (or -1 on error). */
static int batch_of(const char *path, const char *body, pd_batch_rule_t rule) {
  parsed_t p;
  parse(&p, path, body, rule);
  int n = p.rc == 0 ? (int)p.r.batch_size : p.rc;
  pd_request_free(&p.r);
  return n;
}

static int has_substr(const char *hay, const char *needle) {
  return hay && strstr(hay, needle) != NULL;
}

static void t_routes_match_exactly(void) {
  pd_route_t r = PD_ROUTE_CHAT;
  PDT_EQ_INT(pd_request_route("/generate", &r), 0);
  PDT_EQ_INT(r, PD_ROUTE_GENERATE);
  PDT_EQ_INT(pd_request_route("/v1/completions?stream=1", &r), 0);
  PDT_EQ_INT(r, PD_ROUTE_COMPLETIONS);
  PDT_EQ_INT(pd_request_route("/v1/chat/completions", &r), 0);
  PDT_EQ_INT(r, PD_ROUTE_CHAT);
  const char *bad[] = {"/generate/", "/Generate", "/v1/completion", "", "/v1/rerank",
                       "/v1/chat/completions/x", "generate"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    PDT_EQ_INT(pd_request_route(bad[i], &r), PD_ERR_ROUTE);
  PDT_EQ_STR(pd_route_path(PD_ROUTE_CHAT), "/v1/chat/completions");
  PDT_EQ_STR(pd_route_path(PD_ROUTE_GENERATE), "/generate");
}

static void t_parse_errors_name_what_and_where(void) {
  parsed_t p;
  parse(&p, "/generate", "{\"a\":[1,2,}", PD_BATCH_RULE_REFERENCE);
  PDT_EQ_INT(p.rc, PD_ERR_JSON);
  PDT_EQ_STR(p.err, "body: malformed JSON at byte 10");
  parse(&p, "/generate", "{\"a\":1} x", PD_BATCH_RULE_REFERENCE);
  PDT_EQ_INT(p.rc, PD_ERR_JSON);
  PDT_EQ_STR(p.err, "body: malformed JSON at byte 8");
  parse(&p, "/generate", "", PD_BATCH_RULE_REFERENCE);
  PDT_EQ_INT(p.rc, PD_ERR_JSON);
  parse(&p, "/generate", "[1,2]", PD_BATCH_RULE_REFERENCE);
  PDT_EQ_INT(p.rc, PD_ERR_NOT_OBJECT);
  PDT_EQ_STR(p.err, "body: expected a JSON object");
  parse(&p, "/nope", "{}", PD_BATCH_RULE_REFERENCE);
  PDT_EQ_INT(p.rc, PD_ERR_ROUTE);
  PDT_TRUE(has_substr(p.err, "/nope"));
  PDT_TRUE(p.r.json == NULL); /* nothing to free after an error */
}

static void t_body_over_the_limit_is_too_large(void) {
  size_t len = PD_REQUEST_MAX_BODY_BYTES + 1;
  char *body = malloc(len);
  PDT_TRUE(body != NULL);
  if (!body) return;
  memset(body, ' ', len);
  body[0] = '{';
  body[len - 1] = '}';
  parsed_t p;
  p.rc = pd_request_parse(&p.r, NULL, "/generate", body, len, PD_BATCH_RULE_SMG, p.err, ERRLEN);
  PDT_EQ_INT(p.rc, PD_ERR_TOO_LARGE);
  p.rc = pd_request_parse(&p.r, NULL, "/generate", body + 1, len - 1, PD_BATCH_RULE_SMG, p.err,
                          ERRLEN); /* exactly at the limit: parsed (and malformed here) */
  PDT_EQ_INT(p.rc, PD_ERR_JSON);
  free(body);
}

static void t_stream_must_be_a_boolean(void) {
  parsed_t p;
  parse(&p, "/v1/chat/completions", "{\"stream\":\"yes\"}", PD_BATCH_RULE_SMG);
  PDT_EQ_INT(p.rc, PD_ERR_FIELD);
  PDT_EQ_STR(p.err, "stream: expected a boolean");
  parse(&p, "/generate", "{\"stream\":null}", PD_BATCH_RULE_SMG);
  PDT_EQ_INT(p.rc, PD_ERR_FIELD);
  parse(&p, "/generate", "{\"text\":\"a\",\"stream\":true}", PD_BATCH_RULE_SMG);
  PDT_EQ_INT(p.rc, 0);
  PDT_EQ_INT(p.r.is_stream, 1);
  pd_request_free(&p.r);
}

/* return_logprob of body at path, or the error. */
static int logprob_of(const char *path, const char *body) {
  parsed_t p;
  parse(&p, path, body, PD_BATCH_RULE_REFERENCE);
  int v = p.rc == 0 ? p.r.return_logprob : p.rc;
  pd_request_free(&p.r);
  return v;
}

static void t_logprob_flag_follows_each_route_r1_2(void) {
  PDT_EQ_INT(logprob_of("/generate", "{\"text\":\"a\",\"return_logprob\":true}"), 1);
  PDT_EQ_INT(logprob_of("/generate", "{\"text\":\"a\",\"return_logprob\":null}"), 0);
  PDT_EQ_INT(logprob_of("/generate", "{\"text\":\"a\",\"logprobs\":true}"), 0); /* not generate's field */
  PDT_EQ_INT(logprob_of("/generate", "{\"text\":\"a\",\"return_logprob\":1}"), PD_ERR_FIELD);
  PDT_EQ_INT(logprob_of("/v1/chat/completions", "{\"messages\":[{}],\"logprobs\":true}"), 1);
  PDT_EQ_INT(logprob_of("/v1/chat/completions", "{\"messages\":[{}],\"logprobs\":false}"), 0);
  PDT_EQ_INT(logprob_of("/v1/chat/completions", "{\"messages\":[{}],\"logprobs\":1}"), PD_ERR_FIELD);
  /* completions: any present, non-null logprobs count, even 0 */
  PDT_EQ_INT(logprob_of("/v1/completions", "{\"prompt\":\"a\",\"logprobs\":0}"), 1);
  PDT_EQ_INT(logprob_of("/v1/completions", "{\"prompt\":\"a\",\"logprobs\":null}"), 0);
  PDT_EQ_INT(logprob_of("/v1/completions", "{\"prompt\":\"a\"}"), 0);
  PDT_EQ_INT(logprob_of("/v1/completions", "{\"prompt\":\"a\",\"logprobs\":true}"), PD_ERR_FIELD);
}

static void t_text_array_is_a_batch_for_minilb_and_reference_not_smg_r1_3(void) {
  const char *b = "{\"text\":[\"a\",\"b\",\"c\"]}";
  PDT_EQ_INT(batch_of("/generate", b, PD_BATCH_RULE_SMG), 0);
  PDT_EQ_INT(batch_of("/generate", b, PD_BATCH_RULE_MINILB), 3);
  PDT_EQ_INT(batch_of("/generate", b, PD_BATCH_RULE_REFERENCE), 3);
  PDT_EQ_INT(batch_of("/generate", "{\"text\":\"a\"}", PD_BATCH_RULE_REFERENCE), 0);
}

static void t_input_ids_list_of_lists_is_a_batch_everywhere(void) {
  const char *b = "{\"input_ids\":[[1,2],[3]]}";
  for (int rule = 0; rule < 3; rule++)
    PDT_EQ_INT(batch_of("/generate", b, (pd_batch_rule_t)rule), 2);
  for (int rule = 0; rule < 3; rule++)
    PDT_EQ_INT(batch_of("/generate", "{\"input_ids\":[1,2,3]}", (pd_batch_rule_t)rule), 0);
  /* mixed: mini_lb looks only at input_ids[0]; the reference rejects it */
  PDT_EQ_INT(batch_of("/generate", "{\"input_ids\":[[1],2]}", PD_BATCH_RULE_MINILB), 2);
  PDT_EQ_INT(batch_of("/generate", "{\"input_ids\":[[1],2]}", PD_BATCH_RULE_SMG), 0);
  PDT_EQ_INT(batch_of("/generate", "{\"input_ids\":[[1],2]}", PD_BATCH_RULE_REFERENCE),
             PD_ERR_FIELD);
}

static void t_chat_n_is_a_batch_except_for_minilb(void) {
  const char *b = "{\"messages\":[{}],\"n\":3}";
  PDT_EQ_INT(batch_of("/v1/chat/completions", b, PD_BATCH_RULE_SMG), 3);
  PDT_EQ_INT(batch_of("/v1/chat/completions", b, PD_BATCH_RULE_MINILB), 0);
  PDT_EQ_INT(batch_of("/v1/chat/completions", b, PD_BATCH_RULE_REFERENCE), 3);
  PDT_EQ_INT(batch_of("/v1/chat/completions", "{\"messages\":[{}],\"n\":1}", PD_BATCH_RULE_REFERENCE), 0);
  PDT_EQ_INT(batch_of("/v1/chat/completions", "{\"messages\":[{}],\"n\":2.5}", PD_BATCH_RULE_REFERENCE),
             PD_ERR_FIELD);
}

static void t_completions_prompt_arrays_per_rule(void) {
  const char *strs = "{\"prompt\":[\"a\",\"b\"]}", *ids = "{\"prompt\":[1,2,3]}";
  const char *lists = "{\"prompt\":[[1],[2]]}";
  PDT_EQ_INT(batch_of("/v1/completions", strs, PD_BATCH_RULE_SMG), 2);
  PDT_EQ_INT(batch_of("/v1/completions", strs, PD_BATCH_RULE_MINILB), 0);
  PDT_EQ_INT(batch_of("/v1/completions", strs, PD_BATCH_RULE_REFERENCE), 2);
  /* smg counts one tokenized prompt as a batch of its tokens; the reference does not */
  PDT_EQ_INT(batch_of("/v1/completions", ids, PD_BATCH_RULE_SMG), 3);
  PDT_EQ_INT(batch_of("/v1/completions", ids, PD_BATCH_RULE_REFERENCE), 0);
  PDT_EQ_INT(batch_of("/v1/completions", lists, PD_BATCH_RULE_REFERENCE), 2);
  PDT_EQ_INT(batch_of("/v1/completions", "{\"prompt\":\"a\"}", PD_BATCH_RULE_SMG), 0);
}

static void t_batch_over_the_limit_is_rejected(void) {
  parsed_t p;
  parse(&p, "/v1/chat/completions", "{\"messages\":[{}],\"n\":1025}", PD_BATCH_RULE_REFERENCE);
  PDT_EQ_INT(p.rc, PD_ERR_LIMIT);
  PDT_EQ_STR(p.err, "n: batch of 1025 exceeds the limit of 1024");
  PDT_EQ_INT(batch_of("/v1/chat/completions", "{\"messages\":[{}],\"n\":1024}", PD_BATCH_RULE_REFERENCE), 1024);
  PDT_EQ_INT(batch_of("/v1/chat/completions", "{\"messages\":[{}],\"n\":1e300}", PD_BATCH_RULE_REFERENCE),
             PD_ERR_FIELD);
}

static uint32_t max_tokens_of(const char *path, const char *body, int *rc, char *err) {
  parsed_t p;
  parse(&p, path, body, PD_BATCH_RULE_REFERENCE);
  *rc = p.rc;
  if (err) memcpy(err, p.err, ERRLEN);
  uint32_t v = p.rc == 0 ? p.r.max_tokens : 0;
  pd_request_free(&p.r);
  return v;
}

static void t_max_tokens_come_from_each_routes_field(void) {
  int rc;
  char err[ERRLEN];
  PDT_EQ_U64(max_tokens_of("/generate", "{\"text\":\"a\",\"sampling_params\":{\"max_new_tokens\":16}}", &rc,
                           NULL), 16);
  PDT_EQ_U64(max_tokens_of("/generate", "{\"text\":\"a\",\"max_tokens\":16}", &rc, NULL), 0);
  PDT_EQ_U64(max_tokens_of("/v1/chat/completions", "{\"messages\":[{}],\"max_tokens\":7}", &rc, NULL), 7);
  PDT_EQ_U64(max_tokens_of("/v1/chat/completions",
                           "{\"messages\":[{}],\"max_tokens\":7,\"max_completion_tokens\":9}", &rc, NULL), 9);
  PDT_EQ_U64(max_tokens_of("/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":null}", &rc, NULL), 0);
  PDT_EQ_INT(rc, 0);
  max_tokens_of("/generate", "{\"text\":\"a\",\"sampling_params\":{\"max_new_tokens\":-1}}", &rc, err);
  PDT_EQ_INT(rc, PD_ERR_FIELD);
  PDT_EQ_STR(err, "sampling_params.max_new_tokens: expected a non-negative integer");
  max_tokens_of("/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":1.5}", &rc, err);
  PDT_EQ_STR(err, "max_tokens: expected a non-negative integer");
  max_tokens_of("/generate", "{\"text\":\"a\",\"sampling_params\":[]}", &rc, err);
  PDT_EQ_STR(err, "sampling_params: expected an object");
}

/* Parse exactly len bytes (bodies with NUL bytes in them). */
static void parse_n(parsed_t *p, const char *path, const char *body, size_t len) {
  p->rc = pd_request_parse(&p->r, NULL, path, body, len, PD_BATCH_RULE_REFERENCE, p->err,
                           sizeof p->err);
  if (p->rc == 0) pd_request_free(&p->r);
}

static void t_nul_in_a_string_is_refused_naming_the_field(void) {
  parsed_t p;
  parse_n(&p, "/generate", "{\"text\":\"a\\u0000b\"}", 19);
  PDT_EQ_INT(p.rc, PD_ERR_FIELD);
  PDT_EQ_STR(p.err, "text: \\u0000 (NUL) at byte 10 is not accepted: it would cut the string");
  const char *chat = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\\u0000\"}]}";
  parse_n(&p, "/v1/chat/completions", chat, strlen(chat));
  PDT_EQ_INT(p.rc, PD_ERR_FIELD);
  PDT_EQ_STR(p.err,
             "messages: \\u0000 (NUL) at byte 52 is not accepted: it would cut the string");
  /* a raw NUL byte is a control character */
  parse_n(&p, "/generate", "{\"text\":\"a\0b\"}", 14);
  PDT_EQ_INT(p.rc, PD_ERR_JSON);
  PDT_EQ_STR(p.err, "body: control character 0x00 at byte 10");
  /* an escaped backslash followed by u0000 is no NUL */
  const char *esc = "{\"text\":\"a\\\\u0000\"}";
  parse_n(&p, "/generate", esc, strlen(esc));
  PDT_EQ_INT(p.rc, 0);
  const char *one = "{\"text\":\"a\\u0001\"}";
  parse_n(&p, "/generate", one, strlen(one));
  PDT_EQ_INT(p.rc, 0);
}

static void t_bad_bytes_are_refused_at_their_offset(void) {
  static const struct {
    const char *body;
    size_t len;
    const char *err;
  } bad[] = {
      {"{\"text\":\"\xff\"}", 13, "body: invalid UTF-8 at byte 9"},
      {"{\"text\":\"\xc0\x80\"}", 14, "body: invalid UTF-8 at byte 9"},         /* overlong */
      {"{\"text\":\"\xed\xa0\x80\"}", 15, "body: invalid UTF-8 at byte 9"},     /* surrogate */
      {"{\"text\":\"\xf4\x90\x80\x80\"}", 16, "body: invalid UTF-8 at byte 9"}, /* > U+10FFFF */
      {"{\"text\":\"ab\xe2\x82\"}", 15, "body: invalid UTF-8 at byte 11"},      /* cut short */
      {"{\"text\":\"\xe2\x82", 11, "body: invalid UTF-8 at byte 9"},            /* split body */
      {"{\"text\":\"a\tb\"}", 14, "body: control character 0x09 at byte 10"},
      {"{\"text\":\"a\nb\"}", 14, "body: control character 0x0a at byte 10"},
      {"{\x01\"text\":\"a\"}", 13, "body: control character 0x01 at byte 1"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    parsed_t p;
    parse_n(&p, "/generate", bad[i].body, bad[i].len);
    PDT_EQ_INT(p.rc, PD_ERR_JSON);
    PDT_EQ_STR(p.err, bad[i].err);
  }
  parsed_t p; /* valid multi-byte UTF-8 and whitespace between tokens pass */
  const char *ok = "{\n\t\"text\" : \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"\r\n}";
  parse_n(&p, "/generate", ok, strlen(ok));
  PDT_EQ_INT(p.rc, 0);
}

/* rc and message of parsing body at path under every rule (they must agree). */
static int prompt_err(const char *path, const char *body, char *err) {
  int rc = 0;
  for (int rule = 0; rule < 3; rule++) {
    parsed_t p;
    parse(&p, path, body, (pd_batch_rule_t)rule);
    if (p.rc == 0) pd_request_free(&p.r);
    if (rule > 0) PDT_EQ_INT(p.rc, rc);
    rc = p.rc;
    memcpy(err, p.err, ERRLEN);
  }
  return rc;
}

static void t_a_prompt_is_required_per_route(void) {
  static const struct {
    const char *path, *body, *err;
  } bad[] = {
      {"/generate", "{\"stream\":true}",
       "text|input_ids: a prompt is required (text, input_ids or input_embeds)"},
      {"/generate", "{\"text\":null,\"input_ids\":null}",
       "text|input_ids: a prompt is required (text, input_ids or input_embeds)"},
      {"/generate", "{\"text\":5}", "text: expected a string or an array of strings"},
      {"/generate", "{\"text\":{\"a\":1}}", "text: expected a string or an array of strings"},
      {"/generate", "{\"input_ids\":\"1 2\"}", "input_ids: expected an array"},
      {"/v1/completions", "{\"model\":\"m\"}", "prompt: required"},
      {"/v1/completions", "{\"prompt\":true}", "prompt: expected a string or an array"},
      {"/v1/chat/completions", "{\"model\":\"m\"}", "messages: required"},
      {"/v1/chat/completions", "{\"messages\":[]}",
       "messages: expected a non-empty array of objects"},
      {"/v1/chat/completions", "{\"messages\":\"hi\"}",
       "messages: expected a non-empty array of objects"},
      {"/v1/chat/completions", "{\"messages\":[{},2]}",
       "messages: expected a non-empty array of objects"},
  };
  char err[ERRLEN];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    PDT_EQ_INT(prompt_err(bad[i].path, bad[i].body, err), PD_ERR_FIELD);
    PDT_EQ_STR(err, bad[i].err);
  }
  const char *good[][2] = {{"/generate", "{\"text\":\"\"}"},
                           {"/generate", "{\"input_ids\":[1,2]}"},
                           {"/generate", "{\"text\":null,\"input_embeds\":[[0.5]]}"},
                           {"/v1/completions", "{\"prompt\":[1,2]}"},
                           {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\"}]}"}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    PDT_EQ_INT(prompt_err(good[i][0], good[i][1], err), 0);
}

/* Parse body, render with b, parse the result back (NULL on any failure). */
static cJSON *render(const char *path, const char *body, pd_batch_rule_t rule,
                     const pd_bootstrap_t *b, char **text) {
  parsed_t p;
  char *out = NULL;
  size_t n = 0;
  parse(&p, path, body, rule);
  PDT_EQ_INT(p.rc, 0);
  if (p.rc != 0) return NULL;
  int rc = pd_request_render(&p.r, b, &out, &n);
  PDT_EQ_INT(rc, 0);
  pd_request_free(&p.r);
  if (rc != 0) return NULL;
  PDT_EQ_U64(n, strlen(out));
  cJSON *doc = cJSON_Parse(out);
  PDT_TRUE(doc != NULL);
  if (text)
    *text = out;
  else
    pd_free(NULL, out);
  return doc;
}

static const cJSON *get(const cJSON *doc, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(doc, key);
}

static void t_render_injects_scalar_bootstrap_fields(void) {
  uint64_t room = 42;
  pd_bootstrap_t b = {"10.0.0.7", 8998, &room, "pd-42", -1, 0};
  cJSON *doc = render("/generate", "{\"text\":\"hi\",\"stream\":true}", PD_BATCH_RULE_SMG, &b,
                      NULL);
  PDT_EQ_STR(cJSON_GetStringValue(get(doc, "bootstrap_host")), "10.0.0.7");
  PDT_EQ_INT(cJSON_GetNumberValue(get(doc, "bootstrap_port")), 8998);
  PDT_EQ_INT(cJSON_GetNumberValue(get(doc, "bootstrap_room")), 42);
  PDT_EQ_STR(cJSON_GetStringValue(get(doc, "rid")), "pd-42");
  PDT_TRUE(get(doc, "routed_dp_rank") == NULL);
  PDT_EQ_STR(cJSON_GetStringValue(get(doc, "text")), "hi"); /* client fields kept */
  PDT_TRUE(cJSON_IsTrue(get(doc, "stream")));
  cJSON_Delete(doc);
}

static void t_render_replaces_client_bootstrap_fields(void) {
  uint64_t room = 7;
  pd_bootstrap_t b = {"h", 1, &room, NULL, 3, 0};
  char *text = NULL;
  cJSON *doc = render("/generate",
                      "{\"text\":\"a\",\"bootstrap_room\":1,\"bootstrap_host\":\"evil\",\"bootstrap_room\":2,"
                      "\"rid\":\"client\",\"routed_dp_rank\":9}",
                      PD_BATCH_RULE_SMG, &b, &text);
  PDT_EQ_INT(cJSON_GetArraySize(doc), 6); /* duplicates gone: text, host, port, room, rid, rank */
  PDT_EQ_INT(cJSON_GetNumberValue(get(doc, "bootstrap_room")), 7);
  PDT_EQ_STR(cJSON_GetStringValue(get(doc, "bootstrap_host")), "h");
  PDT_EQ_STR(cJSON_GetStringValue(get(doc, "rid")), "client"); /* rid NULL: left alone */
  PDT_EQ_INT(cJSON_GetNumberValue(get(doc, "routed_dp_rank")), 3);
  PDT_TRUE(!has_substr(text, "evil"));
  cJSON_Delete(doc);
  pd_free(NULL, text);
}

static void t_render_port_without_bootstrap_port_is_null_r1_24(void) {
  uint64_t room = 1;
  pd_bootstrap_t b = {"h", -1, &room, NULL, -1, 0};
  cJSON *doc = render("/v1/completions", "{\"prompt\":\"x\"}", PD_BATCH_RULE_SMG, &b, NULL);
  PDT_TRUE(cJSON_IsNull(get(doc, "bootstrap_port")));
  cJSON_Delete(doc);
}

static void t_render_prints_large_rooms_exactly(void) {
  uint64_t rooms[] = {9007199254740991ull, 9223372036854775807ull};
  const char *lits[] = {"\"bootstrap_room\":9007199254740991",
                        "\"bootstrap_room\":9223372036854775807"};
  for (size_t i = 0; i < 2; i++) {
    pd_bootstrap_t b = {"h", 1, &rooms[i], NULL, -1, 0};
    char *text = NULL;
    cJSON *doc = render("/generate", "{\"text\":\"a\"}", PD_BATCH_RULE_SMG, &b, &text);
    PDT_TRUE(has_substr(text, lits[i]));
    cJSON_Delete(doc);
    pd_free(NULL, text);
  }
}

static void t_chat_n3_gets_three_distinct_rooms(void) {
  uint64_t rooms[] = {101, 202, 303};
  pd_bootstrap_t b = {"p0", 8998, rooms, "pd-101", 0, 0};
  cJSON *doc = render("/v1/chat/completions", "{\"messages\":[{}],\"n\":3}",
                      PD_BATCH_RULE_REFERENCE, &b, NULL);
  const cJSON *h = get(doc, "bootstrap_host"), *p = get(doc, "bootstrap_port");
  const cJSON *r = get(doc, "bootstrap_room"), *rid = get(doc, "rid");
  PDT_EQ_INT(cJSON_GetArraySize(h), 3);
  PDT_EQ_INT(cJSON_GetArraySize(p), 3);
  PDT_EQ_INT(cJSON_GetArraySize(r), 3);
  static const char *rids[] = {"pd-101-0000", "pd-101-0001", "pd-101-0002"};
  for (int i = 0; i < 3; i++) {
    PDT_EQ_STR(cJSON_GetStringValue(cJSON_GetArrayItem(h, i)), "p0");
    PDT_EQ_INT(cJSON_GetNumberValue(cJSON_GetArrayItem(p, i)), 8998);
    PDT_EQ_U64(cJSON_GetNumberValue(cJSON_GetArrayItem(r, i)), rooms[i]);
    PDT_EQ_STR(cJSON_GetStringValue(cJSON_GetArrayItem(rid, i)), rids[i]);
  }
  PDT_EQ_INT(cJSON_GetNumberValue(get(doc, "routed_dp_rank")), 0);
  cJSON_Delete(doc);
}

static void t_render_text_batch_depends_on_rule(void) {
  uint64_t rooms[] = {1, 2};
  pd_bootstrap_t b = {"h", 1, rooms, NULL, -1, 0};
  const char *body = "{\"text\":[\"a\",\"b\"]}";
  cJSON *smg = render("/generate", body, PD_BATCH_RULE_SMG, &b, NULL);
  cJSON *ref = render("/generate", body, PD_BATCH_RULE_REFERENCE, &b, NULL);
  PDT_TRUE(cJSON_IsNumber(get(smg, "bootstrap_room"))); /* G18: smg sends a scalar */
  PDT_EQ_INT(cJSON_GetArraySize(get(ref, "bootstrap_room")), 2);
  cJSON_Delete(smg);
  cJSON_Delete(ref);
}

static void t_render_without_rooms_is_invalid(void) {
  parsed_t p;
  parse(&p, "/generate", "{\"text\":\"a\"}", PD_BATCH_RULE_SMG);
  pd_bootstrap_t b = {"h", 1, NULL, NULL, -1, 0};
  char *out = NULL;
  PDT_EQ_INT(pd_request_render(&p.r, &b, &out, NULL), PD_ERR_INVAL);
  PDT_TRUE(out == NULL);
  pd_request_free(&p.r);
}


static void t_render_out_of_memory_is_nomem(void) {
  pd_alloc_t a = *pd_alloc_refusing();
  parsed_t p;
  const char *body = "{\"messages\":[{}],\"n\":2}";
  p.rc = pd_request_parse(&p.r, &a, "/v1/chat/completions", body, strlen(body),
                          PD_BATCH_RULE_REFERENCE, p.err, ERRLEN);
  PDT_EQ_INT(p.rc, 0);
  uint64_t rooms[] = {1, 2};
  pd_bootstrap_t b = {"h", 1, rooms, "rid", -1, 0}; /* rid array needs a scratch buffer */
  char *out = NULL;
  PDT_EQ_INT(pd_request_render(&p.r, &b, &out, NULL), PD_ERR_NOMEM);
  PDT_TRUE(out == NULL);
  pd_request_free(&p.r);
}

int pdt_suite_request(void) {
  static const pdt_case_t cases[] = {
      {"routes match exactly, query ignored", t_routes_match_exactly},
      {"parse errors name what and where", t_parse_errors_name_what_and_where},
      {"a body over 4 MiB is too large", t_body_over_the_limit_is_too_large},
      {"stream must be a boolean", t_stream_must_be_a_boolean},
      {"the logprob flag follows each route (R1.2)", t_logprob_flag_follows_each_route_r1_2},
      {"a text array is a batch for minilb and reference but not for smg (R1.3)",
       t_text_array_is_a_batch_for_minilb_and_reference_not_smg_r1_3},
      {"input_ids list of lists is a batch everywhere",
       t_input_ids_list_of_lists_is_a_batch_everywhere},
      {"chat n is a batch except for minilb (M8.2)", t_chat_n_is_a_batch_except_for_minilb},
      {"completions prompt arrays per rule", t_completions_prompt_arrays_per_rule},
      {"a batch over 1024 is rejected", t_batch_over_the_limit_is_rejected},
      {"max tokens come from each route's field", t_max_tokens_come_from_each_routes_field},
      {"a NUL in a string is refused naming the field",
       t_nul_in_a_string_is_refused_naming_the_field},
      {"invalid UTF-8 and control characters are refused at their offset",
       t_bad_bytes_are_refused_at_their_offset},
      {"a usable prompt is required per route", t_a_prompt_is_required_per_route},
      {"render injects scalar bootstrap fields (R1.23)", t_render_injects_scalar_bootstrap_fields},
      {"render replaces client bootstrap fields", t_render_replaces_client_bootstrap_fields},
      {"no bootstrap port renders null (R1.24)",
       t_render_port_without_bootstrap_port_is_null_r1_24},
      {"large rooms print exactly", t_render_prints_large_rooms_exactly},
      {"chat n=3 gets three distinct rooms (R1.25)", t_chat_n3_gets_three_distinct_rooms},
      {"a text batch renders arrays only where the rule says so",
       t_render_text_batch_depends_on_rule},
      {"render without rooms is invalid", t_render_without_rooms_is_invalid},
      {"render out of memory is NOMEM", t_render_out_of_memory_is_nomem},
  };
  return PDT_SUITE("request", cases);
}
