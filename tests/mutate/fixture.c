/* scripts/mutate.py --self-test's fixture: each operator once or more, and what it must leave
 * alone: comments (x < 1 && !y), "strings < 2", preprocessor lines, asserts and printf. */
#include <assert.h>
#include <stdio.h>
#define FX_LIMIT 3 /* x < 1 */
typedef enum { FX_A, FX_B, FX_C } fx_t;
static int n;
void bump(void) { n += 1; }
static fx_t step(int x, int y) {
  assert(x < 10 && !y);
  if (x < 0) return FX_A;
  bump();
  if (x > FX_LIMIT && !y) return FX_C;
  return FX_B;
}
int main(void) {
  const char *s = "a < b && !c";
  int ok = step(1, 0) == FX_B && step(-1, 0) == FX_A && step(5, 0) == FX_C;
  printf("%s %d\n", ok ? "ok" : "bad", n);
  return s[0] != 'a';
}
