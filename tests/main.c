/* Lists the suites and exits with the number of failed tests as the verdict.
 *   pdref_tests            every suite, verbose
 *   pdref_tests SUITE...   only the named suites (e.g. `pdref_tests gateway conform`) */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

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
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: pdref_tests [SUITE...]\nRuns every CUnit suite, or only the named ones.\n");
    return 0;
  }
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
#define PDT_REG(fn) \
  if (fn() != 0) {  \
    fprintf(stderr, "tests: cannot register %s\n", #fn); \
    CU_cleanup_registry(); \
    return 2; \
  }
  PDT_SUITES(PDT_REG)
#undef PDT_REG
  CU_basic_set_mode(CU_BRM_VERBOSE);
  unsigned failed = 0, ran = 0; /* CUnit's counts are per run: summed over the suites asked */
  if (argc == 1) {
    CU_basic_run_tests();
    failed = CU_get_number_of_tests_failed();
    ran = CU_get_number_of_tests_run();
  }
  for (int i = 1; i < argc; i++) {
    CU_pSuite s = CU_get_suite(argv[i]);
    if (!s) {
      fprintf(stderr, "pdref_tests: no suite '%s'\n", argv[i]);
      CU_cleanup_registry();
      return 2;
    }
    CU_basic_run_suite(s);
    failed += CU_get_number_of_tests_failed();
    ran += CU_get_number_of_tests_run();
  }
  CU_cleanup_registry();
  printf("tests: %u run, %u failed\n", ran, failed);
  return failed ? 1 : 0;
}
