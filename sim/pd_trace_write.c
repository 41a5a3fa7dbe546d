/* pd_trace_write: the kept events as Chrome/Perfetto trace-event JSON (an array). */
#include <inttypes.h>

#include "pd_trace.h"

/* A JSON string literal of s (names come from scenario files). */
static void write_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) { /* bounded by the NUL */
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

/* The separator before the next event: none before the first. */
static void sep(FILE *f, int *n) { fputs((*n)++ ? ",\n" : "\n", f); }

static void write_names(pd_trace_t *t, int *n_out) {
  for (size_t i = 0; i < t->n_names; i++) {
    const pd_trace_name_t *n = &t->names[i];
    if (n->group != UINT32_MAX) continue;
    sep(t->out, n_out);
    fprintf(t->out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRIu32
                    ",\"args\":{\"name\":", n->pid);
    write_str(t->out, n->name);
    fprintf(t->out, "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%" PRIu32
                    ",\"args\":{\"sort_index\":%d}}", n->pid, n->sort);
  }
}

/* Events on one track per key (lanes: the next commit). */
void pd_trace_write(pd_trace_t *t) {
  int n_out = 0;
  fputs("[", t->out);
  write_names(t, &n_out);
  for (size_t i = 0; i < t->n_recs; i++) {
    const pd_trace_rec_t *r = &t->recs[i];
    sep(t->out, &n_out);
    fputc('{', t->out);
    if (r->ph == 'C') fprintf(t->out, "\"pid\":%" PRIu32 ",", r->pid);
    else fprintf(t->out, "\"pid\":%" PRIu32 ",\"tid\":%" PRIu64 ",", r->pid, r->key);
    fwrite(t->text + r->off, 1, r->len, t->out);
  }
  fputs("\n]\n", t->out);
}
