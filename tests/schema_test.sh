#!/usr/bin/env bash
# docs/scenario.schema.json against the scenario loader (tests/schema_test.py, which says what
# it checks), with a python3 that has jsonschema: the one on PATH, else Debian's
# (python3-jsonschema, installed by scripts/deps.sh).
#   tests/schema_test.sh [PDREF]     (default build/pdref)
set -euo pipefail
cd "$(dirname "$0")/.."
pdref=${1:-build/pdref}
. tests/jsonschema_py.sh
run_with_jsonschema schema_test tests/schema_test.py "$pdref"
