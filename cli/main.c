/* pdref: one binary, subcommands. Exit codes: 0 ok, 1 a check failed, 2 bad usage or input. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: pdref <command> [options]\n"
          "       pdref --version [--json]\n"
          "\n"
          "commands:\n"
          "  sim run FILE|DIR... [--mode M|all] [--seed N] [--trace OUT.json] [--json]\n"
          "                      replay scenarios in the simulator, print the verdict table\n"
          "  sim new NAME [--out FILE|-] [--force]\n"
          "                      write a template scenario (NAME.json) to start from\n"
          "  sim bench [--requests N] [--fault-rate F] [--json]\n"
          "                      simulator throughput: events/s, requests/s, peak RSS\n"
          "  sim explore --mode M [--seeds N | --time S] [--seed-start K] [--shard i/n]\n"
          "              [--shard-from-env] [--result FILE] [--out DIR] [--json]\n"
          "                      random worlds from seeds; shrink and save each violation\n"
          "  sim explore merge [--json] RESULT|DIR...\n"
          "                      fold explore shards' results; gaps and overlaps are errors\n"
          "  gateway --prefill URL[@PORT]... --decode URL... [--listen HOST:PORT] [--mode M]\n"
          "                      the PD gateway on real sockets (pdref gateway --help)\n"
          "  gateway bench [--concurrency N,N,...] [--tokens K] [--json]\n"
          "                      gateway vs direct decode on loopback mocks: added TTFT/ITL,\n"
          "                      relayed events/s, RSS, CPU (pdref gateway bench --help)\n"
          "  mock --role prefill|decode [--listen HOST:PORT] [--bootstrap-port P]\n"
          "       [--scenario FILE --worker NAME] [--log FILE] [--speed X]\n"
          "                      an SGLang-like PD worker on real sockets (pdref mock --help)\n"
          "  conform --gateway-cmd CMD SCENARIO|DIR... [--mode-label M] [--timeout-scale X]\n"
          "                      run scenarios against any PD gateway (pdref conform --help)\n"
          "  report [--out report.html] [--json] RESULT...\n"
          "                      --json results of sim run, explore, conform and bench as one\n"
          "                      self-contained HTML page (pdref report --help)\n"
          "\n"
          PD_CLI_MODES_HELP
          "verdicts (sim run, conform, report): as expected, deployment limit, UNEXPECTED,\n"
          "       not exercised, skipped; beside each, the row's own: pass or the invariants\n"
          "every command takes --help (pdref sim run --help); docs: README.md, docs/guide.md\n"
          "exit: 0 every row as expected, a deployment limit or skipped (and one exercised),\n"
          "      1 a row UNEXPECTED or not exercised, or nothing exercised, 2 bad usage or input\n");
}

/* Each subcommand gets argv from its command word on (argv[0] = "run", "gateway", ...). */
int main(int argc, char **argv) {
  char prog[PD_CLI_PROG_BYTES];
  pd_cli_prog_name(argv[0], prog, sizeof prog);
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (pd_cli_is_version("pdref", argc, argv)) return 0;
  if (strcmp(argv[1], "sim") == 0) {
    if (argc < 3 || strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0) {
      usage(argc < 3 ? stderr : stdout);
      return argc < 3 ? 2 : 0;
    }
    if (strcmp(argv[2], "run") == 0 || strcmp(argv[2], "replay") == 0)
      return pd_cli_sim_run(prog, argc - 2, argv + 2);
    if (strcmp(argv[2], "bench") == 0) return pd_cli_sim_bench(prog, argc - 2, argv + 2);
    if (strcmp(argv[2], "new") == 0) return pd_cli_sim_new(prog, argc - 2, argv + 2);
    if (strcmp(argv[2], "explore") == 0) return pd_cli_sim_explore(prog, argc - 2, argv + 2);
    fprintf(stderr, "pdref sim: unknown subcommand '%s' (try --help)\n", argv[2]);
    return 2;
  }
  if (strcmp(argv[1], "gateway") == 0 && argc > 2 && strcmp(argv[2], "bench") == 0)
    return pd_cli_gateway_bench(argc - 2, argv + 2);
  if (strcmp(argv[1], "gateway") == 0) return pd_cli_gateway(argc - 1, argv + 1);
  if (strcmp(argv[1], "mock") == 0) return pd_cli_mock(argc - 1, argv + 1);
  if (strcmp(argv[1], "conform") == 0) return pd_cli_conform(prog, argc - 1, argv + 1);
  if (strcmp(argv[1], "report") == 0) return pd_cli_report(prog, argc - 1, argv + 1);
  fprintf(stderr, "pdref: unknown command '%s' (try --help)\n", argv[1]);
  return 2;
}
