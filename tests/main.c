/* Lists the suites and exits with the number of failed tests as the verdict. */
#include <CUnit/Basic.h>
#include <stdio.h>

#include "pdt.h"
#include "suites.h"

#define PDT_DECL(fn) int fn(void);
PDT_SUITES(PDT_DECL)
#undef PDT_DECL

int pdt_add_suite(const char *name, const pdt_case_t *cases, size_t n) {
  CU_pSuite s = CU_add_suite(name, NULL, NULL);
  if (!s) return -1;
  for (size_t i = 0; i < n; i++)
    if (!CU_add_test(s, cases[i].name, cases[i].fn)) return -1;
  return 0;
}

int main(int argc, char **argv) {
  (void)argv;
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
#define PDT_REG(fn) \
  if (fn() != 0) {  \
    fprintf(stderr, "tests: cannot register %s\n", #fn); \
    CU_cleanup_registry(); \
    return 2; \
  }
  PDT_SUITES(PDT_REG)
#undef PDT_REG
  CU_basic_set_mode(argc > 1 ? CU_BRM_SILENT : CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_tests_failed();
  unsigned ran = CU_get_number_of_tests_run();
  CU_cleanup_registry();
  printf("tests: %u run, %u failed\n", ran, failed);
  return failed ? 1 : 0;
}
