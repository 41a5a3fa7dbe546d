/* cli_progress: the one-line progress bar of the long-running subcommands (sim bench, sim
 * explore, gateway bench). It draws on stderr only when stderr is a terminal and the output is
 * not --json, at most every PD_CLI_PROGRESS_EVERY_S; otherwise every call does nothing. */
#ifndef PD_CLI_PROGRESS_H
#define PD_CLI_PROGRESS_H

#define PD_CLI_PROGRESS_EVERY_S 0.1 /* redraw at most 10 times a second */
#define PD_CLI_PROGRESS_WIDTH 30    /* characters of the bar itself */
#define PD_CLI_PROGRESS_LINE 160    /* the text after the bar is cut to fit this line */

typedef struct pd_cli_progress {
  int is_on; /* stderr is a TTY and the output is not --json */
  double t0_s, drawn_s;
  int line_chars; /* characters now on the line (0: nothing to clear) */
} pd_cli_progress_t;

/* Monotonic wall-clock seconds (the CLI may read the clock; core/ and sim/ never do). */
double pd_cli_wall_s(void);
/* CPU seconds (user + system) of this process, or with children = 1 of it and the children it
 * has reaped: the figure a shared machine does not skew (sim bench, sim explore --jobs). */
double pd_cli_cpu_s(int children);
/* Start a bar (t0 = now); is_json: the output is --json, so no bar. */
void pd_cli_progress_init(pd_cli_progress_t *p, int is_json);
/* Seconds since pd_cli_progress_init. */
double pd_cli_progress_elapsed_s(const pd_cli_progress_t *p);
/* Draw "\r[####......] <text>" for frac (0..1, clamped) when on and due: the last draw was
 * PD_CLI_PROGRESS_EVERY_S ago, or frac >= 1 (the end is always shown). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void pd_cli_progress_draw(pd_cli_progress_t *p, double frac, const char *fmt, ...);
/* Blank the line when something is on it (before printing anything else, and at the end). */
void pd_cli_progress_clear(pd_cli_progress_t *p);

#endif
