/* pd_world_client_body writes by hand what vsnprintf wrote piece by piece (the form kept
 * below as the reference): every route, batch, tag, prompt length, flag and short buffer. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pd_world.h"
#include "pdt.h"

/* A body written piece by piece; one that does not fit (with its NUL) is 0, never cut. */
typedef struct body_out {
  char *buf;
  size_t cap, off;
  int is_short;
} body_out_t;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void out(body_out_t *o, const char *fmt, ...) {
  va_list ap;
  if (o->is_short) return;
  va_start(ap, fmt);
  int k = vsnprintf(o->buf + o->off, o->cap - o->off, fmt, ap);
  va_end(ap);
  if (k < 0 || o->off + (size_t)k >= o->cap) o->is_short = 1;
  else o->off += (size_t)k;
}

/* One prompt string: "<tag><sep>" then `pad` words "t " then its last word. */
static void out_prompt(body_out_t *o, const char *tag, const char *sep, uint32_t pad,
                       const char *last, uint32_t idx) {
  out(o, "\"%s%s", tag, sep);
  if (!o->is_short && o->off + 2ull * pad >= o->cap) o->is_short = 1;
  for (uint32_t i = 0; i < pad && !o->is_short; i++, o->off += 2) memcpy(o->buf + o->off, "t ", 2);
  if (last) out(o, "%s\"", last);
  else out(o, "p%u\"", idx);
}

/* `n` prompt strings "<tag> p<i>", comma-separated. */
static void out_prompts(body_out_t *o, uint32_t n, const char *tag, const char *sep,
                        uint32_t pad) {
  for (uint32_t i = 0; i < n && !o->is_short; i++) {
    if (i) out(o, ",");
    out_prompt(o, tag, sep, pad, NULL, i);
  }
}

static size_t ref_body_cap(const pd_scenario_workload_t *wl, uint32_t prompt_tokens,
                                size_t tag_len) {
  size_t n = wl->batch ? wl->batch : 1;
  return 512 + n * (16 + tag_len + 2 * (size_t)prompt_tokens); /* a batch of 1024 fits */
}

static size_t ref_client_body(const pd_client_request_t *rq, const pd_scenario_workload_t *wl,
                            const char *tag, char *buf, size_t cap) {
  const char *st = rq->is_stream ? "true" : "false", *lp = rq->wants_logprob ? "true" : "false";
  const char *sep = tag ? " " : "";
  uint32_t base = tag ? 2 : 1; /* words of the short prompt: the tag, then its last word */
  uint32_t pad = rq->prompt_tokens > base ? rq->prompt_tokens - base : 0;
  body_out_t o = {buf, cap, 0, cap == 0};
  if (!tag) tag = "";
  switch (wl->route) {
  case PD_ROUTE_COMPLETIONS: /* batch: a prompt array of `batch` strings */
    out(&o, "{\"model\":\"m\",\"prompt\":%s", wl->batch ? "[" : "");
    if (wl->batch) out_prompts(&o, wl->batch, tag, sep, pad);
    else out_prompt(&o, tag, sep, pad, "hello", 0);
    out(&o, "%s,\"max_tokens\":%u,\"stream\":%s%s}", wl->batch ? "]" : "", rq->tokens, st,
        rq->wants_logprob ? ",\"logprobs\":1" : "");
    break;
  case PD_ROUTE_CHAT:
    out(&o, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":");
    out_prompt(&o, tag, sep, pad, "hi", 0);
    out(&o, "}],\"max_tokens\":%u,\"stream\":%s,\"logprobs\":%s,\"n\":%u}", rq->tokens, st, lp,
        wl->batch ? wl->batch : 1);
    break;
  default:
    out(&o, "{\"text\":%s", wl->batch ? "[" : "");
    if (wl->batch) out_prompts(&o, wl->batch, tag, sep, pad);
    else out_prompt(&o, tag, sep, pad, "hello", 0);
    out(&o, "%s,\"stream\":%s,\"return_logprob\":%s,\"sampling_params\":{\"max_new_tokens\":%u}}",
        wl->batch ? "]" : "", st, lp, rq->tokens);
  }
  return o.is_short ? 0 : o.off;
}


static void t_client_bodies_render_as_vsnprintf_did(void) {
  static const char *const tags[] = {NULL, "t-1", "conform-req-00042"};
  static const uint32_t batches[] = {0, 1, 3};
  static const uint32_t prompts[] = {0, 1, 2, 5, 300};
  static const size_t caps[] = {0, 1, 20, 60, 100, 700, 4096};
  unsigned compared = 0;
  for (int route = PD_ROUTE_GENERATE; route <= PD_ROUTE_CHAT; route++)
    for (size_t bt = 0; bt < 3; bt++)
      for (size_t tg = 0; tg < 3; tg++)
        for (size_t pt = 0; pt < 5; pt++)
          for (int flags = 0; flags < 4; flags++)
            for (size_t c = 0; c < sizeof caps / sizeof *caps; c++) {
              pd_scenario_workload_t wl;
              memset(&wl, 0, sizeof wl);
              wl.route = route;
              wl.batch = batches[bt];
              pd_client_request_t rq;
              memset(&rq, 0, sizeof rq);
              rq.is_stream = flags & 1;
              rq.wants_logprob = flags >> 1;
              rq.tokens = 8 + (uint32_t)pt * 1000;
              rq.prompt_tokens = prompts[pt];
              char a[4096], b[4096];
              memset(a, 'x', sizeof a);
              memset(b, 'x', sizeof b);
              size_t na = pd_world_client_body(&rq, &wl, tags[tg], a, caps[c]);
              size_t nb = ref_client_body(&rq, &wl, tags[tg], b, caps[c]);
              PDT_EQ_U64(na, nb);
              if (na == nb && na && memcmp(a, b, na + 1) != 0) PDT_TRUE(!"same bytes");
              compared += na > 0;
              PDT_EQ_U64(pd_world_client_body_cap(&wl, prompts[pt], 3),
                         ref_body_cap(&wl, prompts[pt], 3));
            }
  PDT_TRUE(compared > 500);
}

int pdt_suite_client_body(void) {
  static const pdt_case_t cases[] = {
      {"client bodies render as vsnprintf rendered them", t_client_bodies_render_as_vsnprintf_did},
  };
  return PDT_SUITE("client_body", cases);
}
