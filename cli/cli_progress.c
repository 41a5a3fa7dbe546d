/* The progress bar shared by sim bench, sim explore and gateway bench. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli_progress.h"

double pd_cli_wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double rusage_s(int who) {
  struct rusage ru;
  if (getrusage(who, &ru) != 0) return 0;
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double pd_cli_cpu_s(int children) {
  return rusage_s(RUSAGE_SELF) + (children ? rusage_s(RUSAGE_CHILDREN) : 0);
}

void pd_cli_progress_init(pd_cli_progress_t *p, int is_json) {
  memset(p, 0, sizeof *p);
  p->is_on = !is_json && isatty(STDERR_FILENO);
  p->t0_s = pd_cli_wall_s();
}

double pd_cli_progress_elapsed_s(const pd_cli_progress_t *p) {
  return pd_cli_wall_s() - p->t0_s;
}

void pd_cli_progress_draw(pd_cli_progress_t *p, double frac, const char *fmt, ...) {
  if (!p->is_on) return;
  double now = pd_cli_wall_s();
  if (now - p->drawn_s < PD_CLI_PROGRESS_EVERY_S && frac < 1) return;
  p->drawn_s = now;
  frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
  char line[PD_CLI_PROGRESS_LINE];
  int fill = (int)(frac * PD_CLI_PROGRESS_WIDTH), n = 0;
  line[n++] = '[';
  for (int i = 0; i < PD_CLI_PROGRESS_WIDTH; i++)
    line[n++] = i < fill ? '#' : '.';
  line[n++] = ']';
  line[n++] = ' ';
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  va_end(ap);
  n = k < 0 ? n : n + k >= (int)sizeof line ? (int)sizeof line - 1 : n + k;
  /* pad over a longer previous line */
  fprintf(stderr, "\r%s%*s", line, p->line_chars > n ? p->line_chars - n : 0, "");
  fflush(stderr);
  if (n > p->line_chars) p->line_chars = n;
}

void pd_cli_progress_clear(pd_cli_progress_t *p) {
  if (!p->line_chars) return;
  fprintf(stderr, "\r%*s\r", p->line_chars, "");
  fflush(stderr);
  p->line_chars = 0;
}
