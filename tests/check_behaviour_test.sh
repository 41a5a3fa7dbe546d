#!/usr/bin/env bash
# Shows that scripts/check-behaviour.sh can fail: on a copy of docs/pd-gateway-behaviour.md it
# passes as is, and fails, naming the problem, for each planted inconsistency: a row naming a
# scenario that does not exist, a row naming no invariant, an invariant no requirement names,
# a section without an index row, an index row without a section, a requirement in a level
# that does not exist, a level built on a missing one, a duplicated ID, a bad keyword, and a
# pending row whose section does not say so.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=docs/pd-gateway-behaviour.md
doc="$tmp/b.md"
chk=scripts/check-behaviour.sh
fail=0
expect() { # expect <0|1> <pattern> <what>
  local out rc=0
  out=$("$chk" "$doc" scenarios 2>&1) || rc=$?
  if [ "$rc" -ne "$1" ] || ! grep -qF -- "$2" <<<"$out"; then
    echo "check_behaviour_test: $3: want exit $1 and '$2', got exit $rc:"; echo "$out"; fail=1
  fi
}
plant() { cp "$src" "$doc"; sed -i "$1" "$doc"; }
cp "$src" "$doc"
expect 0 "check-behaviour: ok" "the document as it is"
plant 's/^| PDG-PAIR-1 | MUST | core | I8 | happy-path-stream,/| PDG-PAIR-1 | MUST | core | I8 | no-such-scenario-here,/'
expect 1 "PDG-PAIR-1: no scenario scenarios/no-such-scenario-here.json" "a missing scenario"
plant 's/^| PDG-LOGPROB-1 | MUST | core | I11 |/| PDG-LOGPROB-1 | MUST | core |  |/'
expect 1 "PDG-LOGPROB-1 names no invariant" "a row without an invariant"
expect 1 "invariant I11 is named by no requirement" "an invariant no requirement covers"
plant 's/^| PDG-REPRO-1 | MAY | - | I13 |/| PDG-REPRO-1 | MAY | - | I99 |/'
expect 1 "PDG-REPRO-1: 'I99' is not an invariant I1-I26" "an invariant that does not exist"
plant '/^| PDG-SEND-1 |/d'
expect 1 "PDG-SEND-1 has a section but no row in section 9.1" "a section without a row"
plant 's/^### PDG-SEND-1 /### PDG-SENT-1 /'
expect 1 "PDG-SEND-1 has an index row but no section" "a row without a section"
plant 's/^| PDG-TAIL-1 | SHOULD | cancel |/| PDG-TAIL-1 | SHOULD | cancellation |/'
expect 1 "PDG-TAIL-1: no level 'cancellation' in section 9.2" "a level that does not exist"
plant 's/^| admission | cancel |/| admission | overload |/'
expect 1 "level admission builds on 'overload', which is no level" "a level built on a missing one"
plant 's/^| core | - |/| core | admission |/'
expect 1 "'builds on' loops" "levels in a loop"
plant 's/^| PDG-FAIL-3 | SHOULD |/| PDG-FAIL-3 | OUGHT |/'
expect 1 "PDG-FAIL-3: keyword 'OUGHT' is not MUST, SHOULD or MAY" "a bad keyword"
plant 's/^| PDG-FAIL-3 | SHOULD | core | I4, I15 | .*/&\n| PDG-FAIL-3 | SHOULD | core | I4 | happy-path-stream |/'
expect 1 "PDG-FAIL-3 has two index rows" "a duplicated ID"
plant 's/^| PDG-SF-3 | SHOULD | core | I14, I18, I19 | .*/| PDG-SF-3 | SHOULD | core | I14, I18, I19 | pending issue 25 |/'
expect 1 "PDG-SF-3 is pending in the index but its section title does not say so" "a pending row"
[ $fail -eq 0 ] && echo "check_behaviour_test: ok (12 planted inconsistencies each caught)"
exit $fail
