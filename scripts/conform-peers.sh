#!/usr/bin/env bash
# The scenario library against any gateway commands (docs/conformance.md "Against peers"): for
# each NAME 'CMD' pair, `pdref conform --mode-label NAME --gateway-cmd CMD` over the scenarios,
# one summary line per gateway in the verdict words (as expected / deployment limit /
# UNEXPECTED / not exercised / skipped), the rows that were not as expected, and the full JSON
# kept in OUT/NAME.json. Exit 0 when every row of every gateway was as expected, a deployment
# limit or skipped (and some row was exercised), 1 otherwise, 2 on bad usage or a run that
# could not be set up; with `-- --level L` (docs/pd-gateway-behaviour.md), 1 also when a gateway
# does not claim the level, and the requirements it does not meet are listed.
#   scripts/conform-peers.sh [--scale X] [--out DIR] NAME 'CMD' [NAME 'CMD' ...] [-- FILE|DIR...]
# NAME is the mode label: a mode name (reference, joined, pr1150, minilb) holds the gateway to
# that mode's expectations, anything else to the reference's (docs/conformance.md). Example:
#   scripts/conform-peers.sh --scale 0.1 \
#     mini_lb 'exec python -m sglang.srt.disaggregation.launch_lb --prefill {prefill_plain_urls} --prefill-bootstrap-ports {bootstrap_ports} --decode {decode_urls} --host 127.0.0.1 --port {port}' \
#     pdref 'exec build/pdref gateway --mode reference {prefill_args} {decode_args} --listen 127.0.0.1:{port} {pdref_gateway_args}'
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/pdref}
SCALE=0.1
OUT=${TMPDIR:-/tmp}/pdref-peers
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
names=()
cmds=()
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) [ $# -ge 2 ] || usage; SCALE=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    -*) echo "conform-peers: unknown option $1" >&2; usage ;;
    *) [ $# -ge 2 ] || usage; names+=("$1"); cmds+=("$2"); shift 2 ;;
  esac
done
[ ${#names[@]} -gt 0 ] || usage
[ $# -gt 0 ] || set -- scenarios
command -v jq >/dev/null || { echo "conform-peers: needs jq" >&2; exit 2; }
[ -x "$BIN" ] || { echo "conform-peers: no $BIN (make build, or BIN=...)" >&2; exit 2; }
mkdir -p "$OUT"
status=0
for i in "${!names[@]}"; do
  name=${names[$i]}
  json="$OUT/$name.json"
  rc=0
  "$BIN" conform --json --allow-unexercised --mode-label "$name" --timeout-scale "$SCALE" \
    --gateway-cmd "${cmds[$i]}" "$@" >"$json" 2>"$OUT/$name.err" || rc=$?
  if ! jq -e .rows "$json" >/dev/null 2>&1; then
    echo "$name: conform could not run (exit $rc): $(tail -n 3 "$OUT/$name.err" | tr '\n' ' ')"
    status=2
    continue
  fi
  jq -r --arg n "$name" '"\($n): \(.as_expected) as expected, \(.deployment_limit) deployment limit, \(.unexpected) UNEXPECTED, \(.not_exercised) not exercised, \(.skipped) skipped"
    + (if .warm_up_error then " (warm-up: not measured: " + .warm_up_error + ")"
       elif .forward_ms then " (warm-up: forwards in \(.forward_ms * 100 | round / 100) ms)" else "" end)' "$json"
  jq -r '.rows[]
    | select(.status == "not exercised" or .status == "error" or .status == "unexpected")
    | "    \(.scenario // .file): " + (if .status == "not exercised" then "not exercised: " + .not_exercised
        elif .status == "error" then "error: " + (.error // .reason)
        else "UNEXPECTED " + (if (.violated // []) == [] then "pass" else (.violated | join(",")) end) + " (expected " + (if (.expected // []) == [] then "pass" else (.expected | join(",")) end) + "): " + .reason end)' "$json"
  # with `-- --level L`: the level's claim and the requirements not met (pd-gateway-behaviour.md)
  jq -r --arg n "$name" 'select(.level) | "\($n): level \(.level.name) " + (if .level.claimed then "claimed" else "not claimed" end)
    + ": \(.level.must_met) MUST met, \(.level.must_not_met) not met, \(.level.must_not_exercised) not exercised",
    (.requirements[] | select(.verdict == "not met") | "    \(.id): not met: \(.why)")' "$json"
  if [ "$rc" -eq 2 ]; then status=2; fi
  if jq -e '.level and (.level.claimed | not)' "$json" >/dev/null && [ $status -eq 0 ]; then status=1; fi
  if jq -e '.unexpected > 0 or .not_exercised > 0 or (.as_expected + .deployment_limit) == 0' "$json" >/dev/null && [ $status -eq 0 ]; then status=1; fi
done
echo "conform-peers: JSON rows in $OUT/"
exit $status
