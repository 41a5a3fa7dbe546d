#include "pd_json.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* Numbers rendered by hand per print; the ones past it are printed by cJSON as before. */
#define PD_JSON_FAST_NUMBERS 64
/* "-999999999999999" and its NUL */
#define PD_JSON_INT_BYTES 24

typedef struct {
  cJSON *item[PD_JSON_FAST_NUMBERS];
  char text[PD_JSON_FAST_NUMBERS][PD_JSON_INT_BYTES];
  size_t n;
} fast_t;

/* What "%1.15g" prints for d when d is an integer below 1e15 in magnitude and not -0: its
 * decimal digits. 0 (nothing written) for every other number. */
static int int_text(double d, char *buf) {
  if (!(d > -1e15 && d < 1e15) || d != floor(d) || (d == 0 && signbit(d))) return 0;
  long long v = (long long)d;
  unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
  char rev[PD_JSON_INT_BYTES];
  size_t k = 0;
  do rev[k++] = (char)('0' + u % 10); while ((u /= 10) != 0);
  size_t n = 0;
  if (v < 0) buf[n++] = '-';
  while (k) buf[n++] = rev[--k];
  buf[n] = '\0';
  return 1;
}

/* Depth-first, in print order; bounded by the tree (cJSON's own print recurses as deep). */
static void mark(cJSON *it, fast_t *f) {
  for (; it && f->n < PD_JSON_FAST_NUMBERS; it = it->next) {
    if ((it->type & 0xff) == cJSON_Number && !it->valuestring && int_text(it->valuedouble,
                                                                          f->text[f->n])) {
      f->item[f->n] = it;
      it->valuestring = f->text[f->n];
      it->type = (it->type & ~0xff) | cJSON_Raw;
      f->n++;
    } else if (cJSON_IsArray(it) || cJSON_IsObject(it)) {
      mark(it->child, f);
    }
  }
}

char *pd_json_print(cJSON *root) {
  fast_t f;
  f.n = 0;
  if (root && (cJSON_IsArray(root) || cJSON_IsObject(root))) mark(root->child, &f);
  else if (root) { /* a lone value: one node, no siblings */
    cJSON *next = root->next;
    root->next = NULL;
    mark(root, &f);
    root->next = next;
  }
  char *s = cJSON_PrintUnformatted(root);
  for (size_t i = 0; i < f.n; i++) { /* back to numbers */
    f.item[i]->valuestring = NULL;
    f.item[i]->type = (f.item[i]->type & ~0xff) | cJSON_Number;
  }
  return s;
}
