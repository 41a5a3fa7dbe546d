#!/usr/bin/env bash
# Keeps docs/pd-gateway-behaviour.md's index (section 9) true, the tables `pdref conform
# --level` reads: every requirement section (### PDG-...) has an index row and every row a
# section; IDs are unique; a keyword is MUST, SHOULD or MAY; every row names at least one
# invariant among I1-I26 and, unless its rows say "pending issue N", at least one scenario,
# each of which exists in the scenario directory; every invariant I1-I26 is named by some
# requirement; every level a requirement or a level names exists, and "builds on" has no
# cycle. Exit 1 naming each problem.
#   scripts/check-behaviour.sh [DOC [SCENARIO_DIR]]   (defaults: the repository's)
set -euo pipefail
cd "$(dirname "$0")/.."
doc=${1:-docs/pd-gateway-behaviour.md}
dir=${2:-scenarios}
[ -f "$doc" ] || { echo "check-behaviour: no $doc"; exit 1; }
exec python3 - "$doc" "$dir" <<'PY'
import os, re, sys
doc, sdir = sys.argv[1], sys.argv[2]
lines = open(doc, encoding="utf-8").read().split("\n")
errs = []
def err(n, m): errs.append(f"check-behaviour: {doc}:{n}: {m}")
heads = {}
section = None
reqs, levels = {}, {}
for n, l in enumerate(lines, 1):
    m = re.match(r"^### (PDG-[A-Z0-9-]+)\b", l)
    if m:
        if m.group(1) in heads: err(n, f"{m.group(1)} has two sections")
        heads[m.group(1)] = n
    if l.startswith("### 9.1 "): section = "req"; continue
    if l.startswith("### 9.2 "): section = "lvl"; continue
    if l.startswith("## ") and section: section = None
    if not section or not l.startswith("|") or l.startswith("|---"): continue
    cells = [c.strip() for c in l.strip().strip("|").split("|")]
    if cells[0] in ("ID", "level"): continue
    if section == "req":
        if len(cells) != 5: err(n, f"a requirement row has {len(cells)} cells, not 5"); continue
        rid, kw, lvl, inv, rows = cells
        if not re.fullmatch(r"PDG-[A-Z0-9-]+", rid): err(n, f"'{rid}' is not a requirement ID"); continue
        if rid in reqs: err(n, f"{rid} has two index rows")
        if kw not in ("MUST", "SHOULD", "MAY"): err(n, f"{rid}: keyword '{kw}' is not MUST, SHOULD or MAY")
        reqs[rid] = (n, kw, lvl, inv, rows)
    else:
        if len(cells) != 3: err(n, f"a level row has {len(cells)} cells, not 3"); continue
        if cells[0] in levels: err(n, f"level {cells[0]} is defined twice")
        levels[cells[0]] = (n, cells[1])
if not reqs: err(0, "no requirement rows in section 9.1")
if not levels: err(0, "no level rows in section 9.2")
covered = set()
for rid, (n, kw, lvl, inv, rows) in reqs.items():
    if rid not in heads: err(n, f"{rid} has an index row but no section (### {rid})")
    ids = [x.strip() for x in inv.split(",") if x.strip()]
    if not ids: err(n, f"{rid} names no invariant")
    for i in ids:
        if not re.fullmatch(r"I([1-9]|1[0-9]|2[0-6])", i): err(n, f"{rid}: '{i}' is not an invariant I1-I26")
        else: covered.add(i)
    if re.fullmatch(r"pending issue [0-9]+", rows):
        if "pending issue" not in lines[heads.get(rid, n) - 1]:
            err(n, f"{rid} is pending in the index but its section title does not say so")
    else:
        names = [x.strip().strip("`") for x in rows.split(",") if x.strip()]
        if not names: err(n, f"{rid} names no scenario row (or 'pending issue N')")
        for s in names:
            if not os.path.isfile(os.path.join(sdir, s + ".json")):
                err(n, f"{rid}: no scenario {sdir}/{s}.json")
    if lvl != "-" and lvl not in levels: err(n, f"{rid}: no level '{lvl}' in section 9.2")
for rid, n in heads.items():
    if rid not in reqs: err(n, f"{rid} has a section but no row in section 9.1")
for k in range(1, 27):
    if f"I{k}" not in covered: err(0, f"invariant I{k} is named by no requirement")
for name, (n, base) in levels.items():
    seen, cur = {name}, base
    while cur != "-":
        if cur not in levels: err(n, f"level {name} builds on '{cur}', which is no level"); break
        if cur in seen: err(n, f"level {name}: 'builds on' loops through {cur}"); break
        seen.add(cur); cur = levels[cur][1]
if errs:
    print("\n".join(errs)); sys.exit(1)
print(f"check-behaviour: ok ({len(reqs)} requirements, {len(levels)} levels, invariants I1-I26 covered)")
PY
