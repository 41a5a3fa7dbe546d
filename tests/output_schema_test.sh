#!/usr/bin/env bash
# every --json output against its docs/*.schema.json (tests/output_schema_test.py, which says what
# it checks), with a python3 that has jsonschema: the one on PATH, else Debian's
# (python3-jsonschema, installed by scripts/deps.sh).
#   tests/output_schema_test.sh [PDREF]     (default build/pdref)
set -euo pipefail
cd "$(dirname "$0")/.."
pdref=${1:-build/pdref}
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import jsonschema' 2>/dev/null; then
    exec "$py" tests/output_schema_test.py "$pdref"
  fi
done
echo "output_schema_test: no python3 with jsonschema (scripts/deps.sh installs python3-jsonschema)" >&2
exit 1
