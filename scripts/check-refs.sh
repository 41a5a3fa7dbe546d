#!/usr/bin/env bash
# Every upstream rule ID cited in the repository (smg R1.x-R4.x, SGLang S5.x/S2.x, wire W6.x,
# mini_lb M8.x, gaps G1-G20, vLLM V1.x, and C/D/I/O ids of the same dotted form) must be defined
# in docs/upstream.md by a heading "#### <ID> ...". Scans every tracked or new, non-ignored
# text file (every file outside .git and build* when not in a git checkout). Exit 1 naming
# each undefined ID and the first file:line citing it, or a duplicated definition.
# Usage: scripts/check-refs.sh [repo-root]
set -euo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root"
doc=docs/upstream.md
[ -f "$doc" ] || { echo "check-refs: no $doc"; exit 1; }
id='([RSWMVCDIO][0-9]+\.[0-9]+|G[0-9]+)'

list_files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard
  else
    find . -type f -not -path './.git/*' -not -path './build*' -print0
  fi
}

defined=$(grep -oE "^#{2,4} +$id\b" "$doc" | awk '{print $2}' | sort)
fail=0
dups=$(uniq -d <<<"$defined")
if [ -n "$dups" ]; then
  for d in $dups; do echo "check-refs: $d is defined more than once in $doc"; done
  fail=1
fi
# file:line:ID for every citation, in file order; keep the first per ID.
cited=$(list_files | xargs -0 -r grep -sHnoIE "\b$id\b" -- | awk -F: '!seen[$3]++ {print $3 " " $1 ":" $2}')
missing=$(awk 'NR == FNR { def[$1] = 1; next } $1 != "" && !($1 in def) {
  print "check-refs: " $1 " is cited at " $2 " but not defined in '"$doc"'" }' \
  <(printf '%s\n' "$defined") <(printf '%s\n' "$cited"))
if [ -n "$missing" ]; then echo "$missing"; fail=1; fi
[ $fail -eq 0 ] && echo "check-refs: ok ($(wc -l <<<"$cited") ids cited, $(wc -l <<<"$defined") defined)"
exit $fail
