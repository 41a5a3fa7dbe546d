#!/usr/bin/env bash
# Parity of the two drivers (docs/conformance.md): for each mode, `pdref sim run --mode M` and
# `pdref conform` against `pdref gateway --mode M` over real sockets, compared on the
# invariants conform judges. One line per scenario x mode; exit 1 if any row differs. A row
# conform marks NOT EXERCISED (a scripted fault that never fired, a request that reached no
# worker) is compared all the same and says so after its parity word. A row that differs
# while conform gave a request up at its bound (a request the simulator ends only at the
# gateway's own, much later timeout is judged on I1 alone on sockets) is run once more with
# --request-bound-ms past that timeout (LONG_MS, default 4,000,000 x scale, at most 60 s)
# and compared again; the row says so. Each mode runs the scenarios whose workers' protocol it
# speaks (sim run and conform leave the others out): the SGLang scenarios under joined, pr1150,
# minilb and reference, the source-first ones (sf-*, vLLM workers) under vllm-toy-proxy,
# mooncake-proxy, llmd-sidecar and reference (`pdref gateway --protocol vllm`, from
# {pdref_gateway_args}).
#   scripts/conform-parity.sh [--scale X] [--modes "joined pr1150 minilb reference ..."] [FILE|DIR...]
#   (--modes takes a space- or comma-separated list; default all seven)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/pdref}
SCALE=0.01
MODES="joined pr1150 minilb reference vllm-toy-proxy mooncake-proxy llmd-sidecar"
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) SCALE=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "conform-parity: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- scenarios
MODES=${MODES//,/ }
LONG_MS=${LONG_MS:-$(awk -v s="$SCALE" 'BEGIN { v = int(4000000 * s); print (v > 60000 ? 60000 : v) }')}
command -v jq >/dev/null || { echo "conform-parity: needs jq" >&2; exit 2; }
bad=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
same=0
diff=0
notx=0
printf '%-46s %-9s %-14s %-14s %s\n' scenario mode sim conform parity
for m in $MODES; do
  # the results go through files: a whole library's JSON is too long for one argument
  "$BIN" sim run "$@" --mode "$m" --json >"$TMP/sim.json" || true
  "$BIN" conform --json --allow-unexercised --mode-label "$m" --timeout-scale "$SCALE" \
    --gateway-cmd "$BIN gateway --mode $m {prefill_args} {decode_args} --listen 127.0.0.1:{port} {pdref_gateway_args}" \
    "$@" >"$TMP/conform.json" || true
  out=$(jq -r -n --slurpfile sa "$TMP/sim.json" --slurpfile ca "$TMP/conform.json" '
    def set(x): if x == null or x == "" then [] elif (x | type) == "array" then x else (x | split(",")) end;
    $sa[0] as $s | $ca[0] as $c
    | ($s.rows | map(select(.scenario)) | map({(.scenario): .violated}) | add) as $sv
    | ($s.rows | map(select(.scenario)) | map({(.scenario): (.status == "not exercised")}) | add) as $sx
    | $c.rows[] | select(.scenario)
    | select(.status != "skipped" or ((.reason // "") | test("does not speak") | not)) # other protocol
    | (set(.judged)) as $j
    | (set(.violated) | join(",")) as $cv
    | (set(.judged_if_seen)) as $maybe
    | (set(.violated)) as $cset
    | ([set($sv[.scenario] // "")[] | select(. as $i | $j | index($i))
        | select(. as $i | ($maybe | index($i)) == null or ($cset | index($i)) != null)]
       | join(",")) as $simv
    | if .status == "skipped" then [.scenario, .mode, $simv, "SKIP", "skip: " + .reason]
      elif .status == "error" then [.scenario, .mode, $simv, "ERROR", "DIFF: " + .reason]
      elif $cv == $simv then [.scenario, .mode, $simv, $cv, "same"
        + (if .status == "not exercised" then " (not exercised: " + .not_exercised + ")" else "" end)
        + (if ($sx[.scenario] // false) != (.status == "not exercised")
           then " (sim " + (if $sx[.scenario] then "not " else "" end) + "exercised)" else "" end)]
      elif .cut_off > 0 then [.scenario, .mode, $simv, $cv, "CUT", .file, (set($sv[.scenario]) | join(","))]
      elif .status == "not exercised" then [.scenario, .mode, $simv, $cv, "DIFF (not exercised: " + .not_exercised + ")"]
      else [.scenario, .mode, $simv, $cv, "DIFF: " + .reason] end
    | map(if . == "" then "-" else . end) | @tsv')
  while IFS=$'\t' read -r sc mo sv cv why file simall; do
    [ -n "$sc" ] || continue # a mode without a row of these scenarios (another protocol)
    if [ "$why" = CUT ]; then
      again=$("$BIN" conform --json --allow-unexercised --no-warm-up --mode-label "$m" \
        --timeout-scale "$SCALE" --request-bound-ms "$LONG_MS" \
        --gateway-cmd "$BIN gateway --mode $m {prefill_args} {decode_args} --listen 127.0.0.1:{port} {pdref_gateway_args}" \
        "$file" || true)
      cv=$(jq -r '.rows[0].violated | join(",") | if . == "" then "-" else . end' <<<"$again" 2>/dev/null || echo "?")
      # the simulator's set on what this run judged (I4 is judged once nothing is cut)
      sv=$(jq -r --arg all "$simall" '.rows[0].judged as $j
        | [($all | if . == "" or . == "-" or . == "any" then [] else split(",") end)[]
           | select(. as $i | $j | index($i))] | join(",") | if . == "" then "-" else . end' \
        <<<"$again" 2>/dev/null || echo "?")
      if [ "$cv" = "$sv" ]; then
        why="same (judged past the gateway's own timeout: --request-bound-ms $LONG_MS)"
      else
        why="DIFF: $(jq -r '.rows[0].reason' <<<"$again" 2>/dev/null) (with --request-bound-ms $LONG_MS)"
      fi
    fi
    printf '%-46s %-9s %-14s %-14s %s\n' "$sc" "$mo" "$sv" "$cv" "$why"
    case "$why" in
      DIFF*) bad=1; diff=$((diff + 1)) ;;
      same*) same=$((same + 1)) ;;
    esac
    case "$why" in *"not exercised"*) notx=$((notx + 1)) ;; esac
  done <<<"$out"
done
echo "parity: $same same, $diff different ($notx of the rows not exercised)"
exit $bad
