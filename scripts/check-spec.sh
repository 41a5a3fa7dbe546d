#!/usr/bin/env bash
# Keeps docs/spec.md section 9 (traceability) true: every rule heading (### R-...) and every
# invariant has a row; every test a row names (`test_x.c: fn, fn`) exists in that file;
# every scenario-like name (word-word-word) a row names exists in scenarios/. Exit 1 with
# what is wrong.
set -euo pipefail
cd "$(dirname "$0")/.."
spec=docs/spec.md
fail=0
table=$(sed -n '/^## 9\. Traceability/,/^## 10\./p' "$spec")
for id in $(grep -oE '^### (R-[A-Z-]+)' "$spec" | awk '{print $2}'); do
  grep -qE "^\| $id \|" <<<"$table" || { echo "check-spec: rule $id has no row in section 9"; fail=1; }
done
for n in $(seq 1 22); do
  grep -qE "^\| I$n \|" <<<"$table" || { echo "check-spec: invariant I$n has no row in section 9"; fail=1; }
done
# tests: "test_file.c: a, b, c" up to the next ';' or '|'
while IFS= read -r ref; do
  file=${ref%%:*}
  [ -f "tests/$file" ] || { echo "check-spec: no tests/$file"; fail=1; continue; }
  for fn in $(sed 's/^[^:]*://; s/,/ /g' <<<"$ref"); do
    case "$fn" in test_*|t_*) ;; *) continue ;; esac
    grep -qE "\b$fn\(" "tests/$file" || { echo "check-spec: $file has no $fn"; fail=1; }
  done
done < <(grep -oE 'test_[a-z_]+\.c: [a-z0-9_, ]+' <<<"$table")
for sc in $(grep -oE '\b[a-z][a-z0-9]*(-[a-z0-9]+){2,}\b' <<<"$table" | sort -u); do
  [ -f "scenarios/$sc.json" ] || { echo "check-spec: no scenarios/$sc.json"; fail=1; }
done
# the behaviour document's index (requirements, levels) against scenarios/ and I1-I26
./scripts/check-behaviour.sh || fail=1
[ $fail -eq 0 ] && echo "check-spec: ok"
exit $fail
