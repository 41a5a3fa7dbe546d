#!/usr/bin/env bash
# every --json output against its docs/*.schema.json (tests/output_schema_test.py, which says what
# it checks), with a python3 that has jsonschema: the one on PATH, else Debian's
# (python3-jsonschema, installed by scripts/deps.sh).
#   tests/output_schema_test.sh [PDREF]     (default build/pdref)
set -euo pipefail
cd "$(dirname "$0")/.."
pdref=${1:-build/pdref}
. tests/jsonschema_py.sh
run_with_jsonschema output_schema_test tests/output_schema_test.py "$pdref"
