#!/usr/bin/env bash
# Shows that scripts/check-doc-names.py can fail: the docs pass as they are; a page naming a
# scenario, mode, option or invariant that does not exist fails with its file:line; and the
# real sets come from the project (a scenario file or an option removed from a copy of the
# sources makes the docs that name it fail).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chk=scripts/check-doc-names.py
fail=0
expect() { # expect <0|1> <text the output must hold, or ''> <what> <checker args...>
  local want=$1 pat=$2 what=$3 out rc=0
  shift 3
  out=$(python3 "$chk" "$@" 2>&1) || rc=$?
  if [ "$rc" -ne "$want" ] || { [ -n "$pat" ] && ! grep -qF -- "$pat" <<<"$out"; }; then
    echo "check_doc_names_test: $what: want exit $want and '$pat', got exit $rc:"; echo "$out"; fail=1
  fi
}
expect 0 "" "the docs as they are"

plant() { printf '%s\n' "$@" >"$tmp/page.md"; }
plant 'intro' 'Run `pdref sim run scenarios --mode vllm-proxy`.'
expect 1 "page.md:2: mode 'vllm-proxy' does not exist" "an unknown mode" "$tmp/page.md"
plant '```' 'build/pdref conform --timeout-scale 0.1 \' "  --gateway-cmd 'exec smg --port {port}' --no-such-flag \\" '  scenarios' '```'
expect 1 "page.md:3: \`pdref conform\` has no option --no-such-flag" "an unknown option on a continued line" "$tmp/page.md"
plant 'See `pdref gateway --listen x --tail-timeout`.'
expect 1 "\`pdref gateway\` has no option --tail-timeout" "an option missing its unit" "$tmp/page.md"
plant 'Only I99 catches it.'
expect 1 "page.md:1: invariant I99 does not exist" "an invariant past the last" "$tmp/page.md"
plant 'It violates I3 orphan-leg.'
expect 1 "orphan-leg is I2, I3 is stranded-slot" "an invariant with another's name" "$tmp/page.md"
plant 'Replay scenarios/decode-503-nowhere.json.'
expect 1 "scenarios/decode-503-nowhere.json does not exist" "a missing scenario file" "$tmp/page.md"
plant 'The scenario `decode-503-nowhere` shows it.'
expect 1 "\`decode-503-nowhere\` names no scenario" "a missing scenario name" "$tmp/page.md"
plant 'Every scenarios/zz-*.json file.'
expect 1 "no scenario matches scenarios/zz-*.json" "a glob matching nothing" "$tmp/page.md"
plant 'The scenario `decode-503-while-prefill-detached`, I2 orphan-leg, `pdref sim run --mode llmd-sidecar --seed 3`.'
expect 0 "" "real names" "$tmp/page.md"

# the sets are the project's: take a scenario file and an option out of a copy
mkdir -p "$tmp/root"
cp -r cli core sim docs scenarios bench README.md "$tmp/root/"
rm "$tmp/root/scenarios/decode-503-while-prefill-detached.json"
sed -i '/{"fail-fast", /d' "$tmp/root/cli/cmd_sim.c"
plant 'The scenario `decode-503-while-prefill-detached` and `pdref sim run --fail-fast`.'
expect 1 "\`decode-503-while-prefill-detached\` names no scenario" "a scenario removed from scenarios/" --root "$tmp/root" "$tmp/page.md"
expect 1 "\`pdref sim run\` has no option --fail-fast" "an option removed from the parser" --root "$tmp/root" "$tmp/page.md"
[ $fail -eq 0 ] && echo "check_doc_names_test: ok"
exit $fail
