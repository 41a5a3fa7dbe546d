#!/usr/bin/env bash
# Shows that scripts/check-refs.sh can fail: on a temporary copy of the repository it must
# pass as is, and fail, naming the ID and the first file:line citing it, when a file cites an
# ID docs/upstream.md does not define, when a definition is removed, and when one is
# duplicated. The fake IDs are built at run time so this file cites none itself.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -cf - --exclude='./.git' --exclude='./build*' . | tar -xf - -C "$tmp"
chk="$tmp/scripts/check-refs.sh"
fail=0
expect() { # expect <0|1> <pattern or ''> <what>
  local out rc=0
  out=$("$chk" "$tmp" 2>&1) || rc=$?
  if [ "$rc" -ne "$1" ] || { [ -n "$2" ] && ! grep -qF -- "$2" <<<"$out"; }; then
    echo "check_refs_test: $3: want exit $1 and '$2', got exit $rc:"; echo "$out"; fail=1
  fi
}
expect 0 "check-refs: ok" "clean copy"

fake_gap="G$((90 + 9))"
fake_rule="S5.$((90 + 9))"
printf 'line one\nline two\n/* see %s */\n' "$fake_gap" >"$tmp/core/zz_fake_ref.c"
expect 1 "$fake_gap is cited at ./core/zz_fake_ref.c:3" "undefined gap id in core/"
rm "$tmp/core/zz_fake_ref.c"

printf '{"description": "as %s says"}\n' "$fake_rule" >"$tmp/scenarios/zz-fake-ref.json"
expect 1 "$fake_rule is cited at ./scenarios/zz-fake-ref.json:1" "undefined rule id in scenarios/"
rm "$tmp/scenarios/zz-fake-ref.json"

doc="$tmp/docs/upstream.md"
cp "$doc" "$tmp/upstream.bak"
sed -i 's/^#### M8\.3 .*/#### Non-stream dispatch/' "$doc"
expect 1 "M8.3 is cited at" "removed definition"
cp "$tmp/upstream.bak" "$doc"

printf '\n#### G15 again\n' >>"$doc"
expect 1 "G15 is defined more than once" "duplicated definition"
cp "$tmp/upstream.bak" "$doc"

expect 0 "check-refs: ok" "restored copy"
[ $fail -eq 0 ] && echo "check_refs_test: ok"
exit $fail
