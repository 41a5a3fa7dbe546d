#!/usr/bin/env bash
# Every subcommand's --help names every option its parser accepts (read from its getopt
# table by scripts/check-doc-names.py --options), shows one example, and, where the
# subcommand takes a mode, names every mode the core has; `pdref --help` names them all too.
# usage: tests/help_test.sh [BUILD/pdref]
set -euo pipefail
cd "$(dirname "$0")/.."
pdref=${1:-build/pdref}
fail=0
modes=$(python3 scripts/check-doc-names.py --list | sed -n 's/^modes: //p' | tr -d "[],'")
subs=("sim run" "sim new" "sim bench" "sim explore" "sim explore merge" "gateway"
      "gateway bench" "mock" "conform" "report")
[ "$(python3 scripts/check-doc-names.py --list | grep -c '^pdref ')" -eq "${#subs[@]}" ] ||
  { echo "help_test: the subcommand list here and cli/cmd_*.c differ"; fail=1; }
for sub in "${subs[@]}"; do
  # shellcheck disable=SC2086
  help=$("$pdref" $sub --help) || { echo "help_test: pdref $sub --help failed"; fail=1; continue; }
  opts=$(python3 scripts/check-doc-names.py --options "$sub")
  for opt in $opts; do
    [ "$opt" = help ] && continue # pdref --help: every command takes --help
    grep -qE -- "--$opt([^a-z0-9-]|$)" <<<"$help" ||
      { echo "help_test: pdref $sub --help does not name --$opt"; fail=1; }
  done
  grep -qE '^(example|examples):' <<<"$help" ||
    { echo "help_test: pdref $sub --help has no 'example:' line"; fail=1; }
  if grep -qx mode <<<"$opts"; then
    for m in $modes; do
      grep -qw -- "$m" <<<"$help" || { echo "help_test: pdref $sub --help does not name mode $m"; fail=1; }
    done
  fi
done
# pdref mock's pairing flags (R-PAIR-GROUP, R-PAIR-RANK, R-CAP-RANK): each states its default
# (its option text up to the next option), and an example line uses them
mock_help=$("$pdref" mock --help)
for opt in transfer-group dp-size capacity-per-rank; do
  awk -v o="  --$opt " 'index($0, o) == 1 { on = 1; print; next } on && /^  --/ { exit } on' \
    <<<"$mock_help" | grep -q 'default' ||
    { echo "help_test: pdref mock --help: --$opt states no default"; fail=1; }
done
grep -qE '^example: .*--transfer-group .*--dp-size' <<<"$mock_help" ||
  { echo "help_test: pdref mock --help has no example with --transfer-group and --dp-size"; fail=1; }
top=$("$pdref" --help)
for m in $modes; do
  grep -qw -- "$m" <<<"$top" || { echo "help_test: pdref --help does not name mode $m"; fail=1; }
done
[ $fail -eq 0 ] && echo "help_test: ok (${#subs[@]} subcommands)"
exit $fail
