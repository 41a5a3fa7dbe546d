/* pdref-gateway: the production PD gateway alone. It links core/, net/httpd/ and net/gateway/
 * only (no simulator, no conformance runner); `pdref gateway` is the same program. */
#include "cli.h"
#include "cli_args.h"

int main(int argc, char **argv) {
  if (pd_cli_is_version("pdref-gateway", argc, argv)) return 0;
  return pd_cli_gateway(argc, argv); /* argv[0]: the command word */
}
