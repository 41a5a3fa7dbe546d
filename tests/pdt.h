/* pdt: assertion helpers over CUnit that print both values (CU_ASSERT_EQUAL prints only the
 * expression text). Tests never use *_FATAL after allocating, so cleanup always runs. */
#ifndef PDT_H
#define PDT_H
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define PDT_MSG_MAX 1024

#define PDT_EQ_U64(a, b)                                                                \
  do {                                                                                  \
    uint64_t pdt_a_ = (uint64_t)(a), pdt_b_ = (uint64_t)(b);                            \
    char pdt_m_[PDT_MSG_MAX];                                                           \
    snprintf(pdt_m_, sizeof pdt_m_, "%s == %s (%" PRIu64 " vs %" PRIu64 ")", #a, #b,     \
             pdt_a_, pdt_b_);                                                           \
    CU_assertImplementation(pdt_a_ == pdt_b_, __LINE__, pdt_m_, __FILE__, "", CU_FALSE); \
  } while (0)

#define PDT_EQ_INT(a, b)                                                                \
  do {                                                                                  \
    long long pdt_a_ = (long long)(a), pdt_b_ = (long long)(b);                         \
    char pdt_m_[PDT_MSG_MAX];                                                           \
    snprintf(pdt_m_, sizeof pdt_m_, "%s == %s (%lld vs %lld)", #a, #b, pdt_a_, pdt_b_); \
    CU_assertImplementation(pdt_a_ == pdt_b_, __LINE__, pdt_m_, __FILE__, "", CU_FALSE); \
  } while (0)

#define PDT_EQ_STR(a, b)                                                                \
  do {                                                                                  \
    const char *pdt_a_ = (a), *pdt_b_ = (b);                                            \
    char pdt_m_[PDT_MSG_MAX];                                                           \
    snprintf(pdt_m_, sizeof pdt_m_, "%s == %s (\"%.200s\" vs \"%.200s\")", #a, #b,       \
             pdt_a_ ? pdt_a_ : "(null)", pdt_b_ ? pdt_b_ : "(null)");                   \
    CU_assertImplementation(pdt_a_ && pdt_b_ && strcmp(pdt_a_, pdt_b_) == 0, __LINE__,   \
                            pdt_m_, __FILE__, "", CU_FALSE);                            \
  } while (0)

#define PDT_TRUE(c) CU_assertImplementation(!!(c), __LINE__, #c, __FILE__, "", CU_FALSE)
#define PDT_FALSE(c) CU_assertImplementation(!(c), __LINE__, "!(" #c ")", __FILE__, "", CU_FALSE)

/* Register a suite: PDT_SUITE("name", {"test name", fn}, ...). Returns 0 or -1. */
typedef struct pdt_case {
  const char *name;
  void (*fn)(void);
} pdt_case_t;

int pdt_add_suite(const char *name, const pdt_case_t *cases, size_t n);
#define PDT_SUITE(name, cases) pdt_add_suite(name, cases, sizeof(cases) / sizeof((cases)[0]))

#endif
