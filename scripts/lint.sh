#!/usr/bin/env bash
# Banned-function check (STYLE 13): no unbounded string functions anywhere in C sources, and
# no wall clock, libc randomness or environment-dependent time in the deterministic parts
# (core/, sim/, mock_workers/ models), and every upstream rule ID cited is defined in
# docs/upstream.md (scripts/check-refs.sh), and README.md and docs/*.md name only scenarios,
# modes, options and invariants that exist (scripts/check-doc-names.py). Exit 1 with file:line on a hit.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
hits=$(grep -nE '\b(sprintf|vsprintf|strcpy|strcat|gets)\s*\(' --include='*.c' --include='*.h' -r core sim mock_workers net cli tests fuzz 2>/dev/null | grep -vE 'snprintf|vsnprintf' || true)
if [ -n "$hits" ]; then echo "lint: unbounded string function:"; echo "$hits"; fail=1; fi
hits=$(grep -nE '\b(rand|srand|random|time|gettimeofday|clock_gettime|clock)\s*\(' --include='*.c' --include='*.h' -r core sim mock_workers/pd_worker_model.c 2>/dev/null | grep -vE ':[0-9]+:\s*(/\*|\*)' || true)
if [ -n "$hits" ]; then echo "lint: wall clock or libc randomness in a deterministic module:"; echo "$hits"; fail=1; fi
hits=$(grep -nE '^(static )?[a-z_]+[a-z_0-9 \*]* [a-z_][a-z_0-9]* *(=|;)' core/*.c sim/*.c 2>/dev/null | grep -vE '^\S+:[0-9]+:\s*(static )?const |:[0-9]+:(typedef|extern|return) ' | grep -vE '\(' || true)
if [ -n "$hits" ]; then echo "lint: file-scope mutable variable in core/ or sim/:"; echo "$hits"; fail=1; fi
./scripts/check-refs.sh || fail=1
# docs name only scenarios, modes, options and invariants that exist (scripts/check-doc-names.py)
python3 scripts/check-doc-names.py || { echo "lint: a doc names something that does not exist (above)"; fail=1; }
# the terse names issue 11 retired stay retired (scripts/rename-identifiers.map)
python3 scripts/rename-identifiers.py --check >/dev/null || { echo "lint: a retired name is back (python3 scripts/rename-identifiers.py --check)"; fail=1; }
[ $fail -eq 0 ] && echo "lint: ok"
exit $fail
