/* Scenario arguments shared by the subcommands that take FILE|DIR...: files as given,
 * directories expanded to their *.json files in name order. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int pd_cli_collect_json(const char *cmd, char **args, int n, char **out, int *n_out, int max) {
  for (int i = 0; i < n; i++) {
    struct stat st;
    if (stat(args[i], &st) != 0) {
      fprintf(stderr, "%s: %s: no such file or directory\n", cmd, args[i]);
      return 2;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (*n_out >= max) return 2;
      out[(*n_out)++] = strdup(args[i]);
      continue;
    }
    DIR *d = opendir(args[i]);
    if (!d) {
      fprintf(stderr, "%s: %s: cannot read directory\n", cmd, args[i]);
      return 2;
    }
    int first = *n_out;
    struct dirent *e;
    while ((e = readdir(d)) && *n_out < max) {
      size_t l = strlen(e->d_name);
      if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0) continue;
      char p[1024];
      snprintf(p, sizeof p, "%s/%s", args[i], e->d_name);
      out[(*n_out)++] = strdup(p);
    }
    closedir(d);
    qsort(out + first, (size_t)(*n_out - first), sizeof *out, cmp_str);
  }
  return 0;
}
