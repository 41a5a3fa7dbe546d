#!/usr/bin/env bash
# The requirement matrix of docs/pd-gateway-behaviour.md section 10, re-run from scratch:
# requirement rows x gateway columns, the modelled gateways (joined, pr1150, minilb and the
# vLLM-family models, from `sim run` over scenarios/, which judges every invariant) and
# pdref-gateway on real sockets (`conform --level LEVEL`, default admission: every level's
# rows). Writes OUT/sim.json, OUT/pdref-gateway.json, OUT/requirements.txt (the text matrix,
# also printed), OUT/requirements.json and OUT/report.html (the page, with the matrix under
# "Requirements"). A real gateway's column: run conform on it as docs/conformance.md says and
# pass its result to `pdref report` too.
#   scripts/requirement-matrix.sh [--out DIR] [--level L] [--pdref PATH]   (default build/matrix)
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/matrix level=admission pdref=build/pdref
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --level) level=$2; shift 2 ;;
    --pdref) pdref=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "requirement-matrix: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
pdref=$(realpath "$pdref")
mkdir -p "$out"
rc=0
"$pdref" sim run scenarios --mode all --json-out "$out/sim.json" >/dev/null || rc=$?
[ "$rc" -le 1 ] || { echo "requirement-matrix: sim run exited $rc" >&2; exit 2; }
rc=0
"$pdref" conform --level "$level" --json --mode-label reference --timeout-scale 0.01 \
  --gateway-cmd "exec $pdref gateway --mode reference {prefill_args} {decode_args} --listen 127.0.0.1:{port} {pdref_gateway_args}" \
  >"$out/pdref-gateway.json" || rc=$?
[ "$rc" -le 1 ] || { echo "requirement-matrix: conform exited $rc" >&2; exit 2; }
"$pdref" report --requirements "$out/sim.json" "$out/pdref-gateway.json" | tee "$out/requirements.txt"
"$pdref" report --requirements --json "$out/sim.json" "$out/pdref-gateway.json" >"$out/requirements.json"
"$pdref" report --out "$out/report.html" "$out/sim.json" "$out/pdref-gateway.json" >/dev/null
echo "requirement-matrix: $out/report.html (section Requirements), $out/requirements.txt, $out/requirements.json"
