/* pdref-gateway: the production PD gateway alone. It links core/, net/httpd/ and net/gateway/
 * only (no simulator, no conformance runner); `pdref gateway` is the same program. */
#include "cli.h"

int main(int argc, char **argv) { return pd_cli_gateway(argc - 1, argv + 1); }
