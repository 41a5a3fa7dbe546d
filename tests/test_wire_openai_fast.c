/* mock_workers/pd_wire_openai.c writes its hot pieces by hand (no vsnprintf); every message
 * kind on both OpenAI routes, SGLang's and vLLM's, with and without usage, every token part
 * and short buffers, must be byte for byte what the vsnprintf form (tests/ref_wire_openai.inc)
 * wrote. */
#include <stdio.h>
#include <string.h>

#include "pd_worker_shared.h"
#include "pdt.h"

#include "ref_wire_openai.inc"

static void t_openai_messages_render_as_vsnprintf_did(void) {
  static const int kinds[] = {PD_WIRE_TOKEN,       PD_WIRE_DONE_EVENT,  PD_WIRE_ERROR_EVENT,
                              PD_WIRE_ERROR_BODY,  PD_WIRE_PREFILL_BODY, PD_WIRE_DECODE_BODY,
                              PD_WIRE_ABORT_EVENT, PD_WIRE_ABORT_BODY};
  static const char *const rids[] = {"pdref-0123456789abcdef", "", "leg-7"};
  static const char *const models[] = {"", "m", "a-much-longer-model-name/with.dots"};
  static const uint32_t ks[] = {0, 1, 6, 7, 8, 99, 12345};
  static const size_t caps[] = {8192, 300, 120, 1};
  unsigned compared = 0;
  for (int route = PD_ROUTE_COMPLETIONS; route <= PD_ROUTE_CHAT; route++)
    for (int usage = 0; usage < 2; usage++)
      for (size_t m = 0; m < sizeof models / sizeof *models; m++)
        for (size_t r = 0; r < sizeof rids / sizeof *rids; r++)
          for (int vllm = 0; vllm < 2; vllm++)
            for (int stream = 0; stream < 2; stream++)
              for (size_t kd = 0; kd < sizeof kinds / sizeof *kinds; kd++)
                for (size_t k = 0; k < sizeof ks / sizeof *ks; k++)
                  for (uint32_t part = 0; part < 4; part++)
                    for (size_t c = 0; c < sizeof caps / sizeof *caps; c++) {
                      pd_wire_api_t api = {route, usage, 17, ""};
                      snprintf(api.model, sizeof api.model, "%s", models[m]);
                      pd_wire_leg_t leg = {rids[r], stream, 0, 8, &api};
                      uint32_t arg = kinds[kd] == PD_WIRE_TOKEN ? ks[k] << 2 | part
                                     : kinds[kd] == PD_WIRE_ERROR_EVENT ||
                                             kinds[kd] == PD_WIRE_ERROR_BODY
                                         ? 500 + part
                                         : part & 1;
                      char a[8192], b[8192];
                      size_t na = pd_wire_openai_render(&leg, vllm, kinds[kd], arg, a, caps[c]);
                      size_t nb = ref_openai_render(&leg, vllm, kinds[kd], arg, b, caps[c]);
                      PDT_EQ_U64(na, nb);
                      if (na == nb && na && memcmp(a, b, na) != 0) PDT_TRUE(!"same bytes");
                      compared += na > 0;
                    }
  PDT_TRUE(compared > 10000);
}

static void t_vllm_prefill_renders_as_vsnprintf_did(void) {
  static const uint32_t args[] = {0, 1, 3, PD_WIRE_CUT | 2, PD_WIRE_NO_RID | 5, 2000};
  pd_wire_vllm_t v = {"p0", "host-a", 5600};
  for (int route = PD_ROUTE_GENERATE; route <= PD_ROUTE_CHAT; route++)
    for (int stream = 0; stream < 2; stream++)
      for (size_t i = 0; i < sizeof args / sizeof *args; i++) {
        pd_wire_api_t api = {route, 1, 3, "m"};
        pd_wire_leg_t leg = {"rid-1", stream, 0, 8, &api};
        char a[16384], b[16384];
        size_t na = pd_wire_openai_vllm_prefill(&leg, &v, args[i], a, sizeof a);
        size_t nb = ref_openai_vllm_prefill(&leg, &v, args[i], b, sizeof b);
        PDT_EQ_U64(na, nb);
        if (na == nb && na && memcmp(a, b, na) != 0) PDT_TRUE(!"same bytes");
      }
}

int pdt_suite_wire_openai_fast(void) {
  static const pdt_case_t cases[] = {
      {"OpenAI messages render as vsnprintf rendered them",
       t_openai_messages_render_as_vsnprintf_did},
      {"vLLM prefill answers render as vsnprintf rendered them",
       t_vllm_prefill_renders_as_vsnprintf_did},
  };
  return PDT_SUITE("wire_openai_fast", cases);
}
