#!/usr/bin/env bash
# `pdref report` in a real browser: a report from `sim run --json` over a subset of scenarios/
# (FAIL rows with swimlanes, a capacity scenario with timelines, vLLM rows, a row not as
# expected, a file that does not load) and a short exploration in two shards (their output
# directory, shrunk cases and all), opened in headless Chromium. Each chart kind is then shown
# alone at 1280 px, its layout measured and screenshotted (tests/report_chart_check.py). The rendered DOM must have exactly one
# matrix cell per JSON row, the counts per verdict of the JSON, the sections, a swimlane, the
# page's script run to its end, and no console error (the page's window.onerror writes one into
# the DOM; Chromium's own log is searched too). A screenshot is taken (REPORT_SCREENSHOT=path
# keeps it). Bounded: each Chromium run is killed after 120 s.
# Usage: tests/report_browser_test.sh [PDREF] (default build/pdref).
set -euo pipefail
cd "$(dirname "$0")/.."
pdref=$(realpath "${1:-build/pdref}")
fail() { echo "report_browser_test: $*"; exit 1; }
chrome=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chrome" ] || fail "chromium is missing (scripts/deps.sh --test installs it)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the command's own contract first: --help, and bad input exits 2 naming the file
"$pdref" report --help | grep -q '^usage: pdref report' || fail "report --help"
echo '{"rows": [1,' >"$tmp/bad.json"
echo '{"hello": 1}' >"$tmp/other.json"
for c in "$tmp/missing.json:no such file" "$tmp/bad.json:malformed JSON at byte" \
         "$tmp/other.json:unknown result kind"; do
  rc=0
  "$pdref" report --out "$tmp/never.html" "${c%%:*}" 2>"$tmp/err" >/dev/null || rc=$?
  [ "$rc" -eq 2 ] && grep -q "^pdref report: ${c%%:*}: .*${c#*:}" "$tmp/err" \
    || fail "report ${c%%:*}: exit $rc, $(cat "$tmp/err") (wanted 2 and '${c#*:}')"
done
[ ! -e "$tmp/never.html" ] || fail "a bad input still wrote a page"

rows=(scenarios/abort-overtakes-late-prefill-request.json
      scenarios/decode-503-while-prefill-detached.json
      scenarios/decode-kv-exhaustion-keeps-prefill-bootstrapping.json
      scenarios/happy-path-stream.json
      scenarios/breaker-half-open-unlimited-probes.json
      scenarios/stream-logprobs-merge.json)
rows+=($(ls scenarios/sf-*.json | head -2))
# a row that is not what its scenario expects (a FAIL cell, re-run for its swimlane)
sed -e 's/"name": "happy-path-stream"/"name": "happy-path-expects-i3"/' \
    -e 's/"joined": "pass"/"joined": ["I3"]/' scenarios/happy-path-stream.json >"$tmp/expects-i3.json"
rows+=(expects-i3.json)
# a file that does not load: an error row (its name holds markup, to be escaped)
echo '{"name": "broken",' >"$tmp/<i>broken.json"
rows+=("<i>broken.json")
rc=0
# everything runs in $tmp with relative paths (scenarios/ a link to the library), so the page
# names no scratch directory (it becomes docs/report.png)
ln -s "$PWD/scenarios" "$tmp/scenarios"
cd "$tmp"
"$pdref" sim run "${rows[@]}" --mode all --json >"$tmp/sim.json" 2>"$tmp/sim.err" || rc=$?
[ "$rc" -eq 2 ] || fail "sim run exited $rc (2 expected: one file does not load)"
# an exploration in two shards, as a batch engine runs it: one output directory with both
# shards' results and the shrunk cases beside them; the report takes the directory
for i in 1 2; do
  rc=0
  PARALLEL_SEQ=$i PDREF_SHARDS=2 "$pdref" sim explore --mode joined --seeds 40 --shard-from-env \
    --out explore >/dev/null || rc=$?
  [ "$rc" -le 1 ] || fail "sim explore shard $i exited $rc"
done
"$pdref" report --out "$tmp/report.html" --json sim.json explore >"$tmp/summary.json" \
  || fail "report exited $?"
cd - >/dev/null

run_chrome() { # run_chrome <log> <args...>: headless, its own profile, no network needed
  local log=$1; shift
  timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --hide-scrollbars \
    --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 "$@" 2>"$log"
}
run_chrome "$tmp/dom.log" --dump-dom "file://$tmp/report.html" >"$tmp/dom.html" \
  || fail "chromium --dump-dom failed: $(tail -3 "$tmp/dom.log")"
# a cell's link opens its row's details (and the list holding them)
run_chrome "$tmp/click.log" --dump-dom "file://$tmp/report.html#r0-1" >"$tmp/click.html" \
  || fail "chromium --dump-dom #r0-1 failed: $(tail -3 "$tmp/click.log")"
grep -q '<details class="rows" open="">' "$tmp/click.html" && grep -q '<details class="row" id="r0-1" open="">' "$tmp/click.html" \
  || fail "opening report.html#r0-1 did not open row r0-1's details"
grep -q '<details class="row" id="r0-2" open' "$tmp/click.html" && fail "row r0-2 opened too"
run_chrome "$tmp/shot.log" --window-size=1280,2200 --screenshot="$tmp/report.png" "file://$tmp/report.html" \
  >/dev/null || fail "chromium --screenshot failed: $(tail -3 "$tmp/shot.log")"
[ "$(head -c 8 "$tmp/report.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] \
  || fail "the screenshot is not a PNG"
[ -z "${REPORT_SCREENSHOT:-}" ] || cp "$tmp/report.png" "$REPORT_SCREENSHOT"
if grep -E 'CONSOLE|Uncaught|Refused to' "$tmp/dom.log" "$tmp/click.log" "$tmp/shot.log"; then
  fail "console messages while rendering (above)"
fi

# every chart kind alone at 1280 px: its layout measured by the browser (legend entries apart
# and off the plot, tick labels apart, text inside the chart, lane labels clear of the bars)
# and a screenshot that shows it (REPORT_SHOTS=DIR keeps them as DIR/kind-<kind>.png)
mkdir -p "$tmp/kinds"
python3 tests/report_chart_check.py split "$tmp/dom.html" "$tmp/kinds" || fail "chart kinds missing"
for page in "$tmp"/kinds/kind-*.html; do
  run_chrome "$tmp/kind.log" --dump-dom "file://$page" >"${page%.html}.dom" || fail "chromium --dump-dom $page"
  run_chrome "$tmp/kind.log" --window-size=1280,480 --screenshot="${page%.html}.png" "file://$page" \
    >/dev/null || fail "chromium --screenshot $page"
done
python3 tests/report_chart_check.py check "$tmp/kinds" || fail "a chart kind looks wrong (above)"
[ -z "${REPORT_SHOTS:-}" ] || cp "$tmp"/kinds/kind-*.png "$REPORT_SHOTS/"
# ... and the check can fail: legend entries laid over each other
mkdir -p "$tmp/bad"
cp "$tmp"/kinds/kind-*.dom "$tmp"/kinds/kind-*.png "$tmp/bad/"
sed -E 's/(<g class="legend-item"><rect x=")[0-9.]+/\158.0/g; s/(<\/rect><text x=")[0-9.]+/\176.0/g' \
  "$tmp/kinds/kind-cdf.html" >"$tmp/bad/kind-cdf.html"
run_chrome "$tmp/kind.log" --dump-dom "file://$tmp/bad/kind-cdf.html" >"$tmp/bad/kind-cdf.dom" || fail "chromium bad"
python3 tests/report_chart_check.py check "$tmp/bad" >"$tmp/bad.out" || true
grep -q "cdf: legend entries overlap" "$tmp/bad.out" \
  || fail "the chart check missed legend entries laid over each other: $(cat "$tmp/bad.out")"

"$pdref" conform --list-levels --json >"$tmp/levels.json" || fail "conform --list-levels --json"
python3 - "$tmp/sim.json" "$tmp/summary.json" "$tmp/dom.html" "$tmp/levels.json" <<'PY'
import json, sys
from html.parser import HTMLParser
sim, summary = (json.load(open(p)) for p in sys.argv[1:3])
dom = open(sys.argv[3], encoding="utf-8").read()

KNOWN = {"html", "head", "meta", "title", "style", "body", "pre", "h1", "h2", "h3", "p", "code",
         "span", "table", "thead", "tbody", "tfoot", "tr", "th", "td", "a", "b", "br", "details",
         "summary", "div", "svg", "text", "line", "rect", "path", "g", "em", "script", "small"}

class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells, self.ready, self.errors_hidden, self.svgs = [], False, None, {}
        self.ids, self.in_err, self.err_text, self.unknown = set(), False, "", []
        self.in_req, self.req_cols, self.req_rows, self.req_cell = False, [], [], None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("class") == "requirements":
            self.in_req = True
        if self.in_req and tag == "th" and a.get("class") == "gw":
            self.req_cols.append("")
            self.req_cell = "col"
        if self.in_req and tag == "tr" and a.get("class") == "req":
            self.req_rows.append([])
        if self.in_req and tag == "td" and "title" in a and self.req_rows:
            self.req_rows[-1].append("")
            self.req_cell = "cell"
        if tag not in KNOWN:  # the page writes only these: another came from a result's text
            self.unknown.append(tag)
        if tag == "td" and "data-verdict" in a:
            self.cells.append(a["data-verdict"])
        if tag == "body":
            self.ready = a.get("data-ready") == "1"
        if a.get("id") == "js-errors":
            self.errors_hidden = "hidden" in a
            self.in_err = True
        if tag == "svg":
            c = a.get("class", "")
            self.svgs[c] = self.svgs.get(c, 0) + 1
        if "id" in a:
            self.ids.add(a["id"])
    def handle_endtag(self, tag):
        if tag == "pre":
            self.in_err = False
        if tag == "table":
            self.in_req = False
        if tag in ("th", "td"):
            self.req_cell = None
    def handle_data(self, d):
        if self.req_cell == "col":
            self.req_cols[-1] += d
        elif self.req_cell == "cell":
            self.req_rows[-1][-1] += d
        if self.in_err:
            self.err_text += d

d = Dom()
d.feed(dom)
status = {"as expected": "expected", "unexpected": "fail", "not exercised": "not-exercised",
          "error": "error", "deployment limit": "limit", "skipped": "skipped"}
want = {}
for r in sim["rows"]:
    v = status.get(r.get("status"), "fail")
    want[v] = want.get(v, 0) + 1
got = {}
for v in d.cells:
    got[v] = got.get(v, 0) + 1
problems = []
if len(d.cells) != len(sim["rows"]):
    problems.append(f"{len(d.cells)} matrix cells for {len(sim['rows'])} JSON rows")
if got != want:
    problems.append(f"cells per verdict {got}, the JSON says {want}")
if summary["cells"] != len(sim["rows"]):
    problems.append(f"--json summary says {summary['cells']} cells")
if not d.ready:
    problems.append("the page's script did not run to its end (no data-ready)")
if d.errors_hidden is not True or d.err_text.strip():
    problems.append(f"window.onerror fired: {d.err_text.strip()!r}")
for sec in ("matrix", "ttft", "capacity", "explore"):
    if sec not in d.ids:
        problems.append(f"no section #{sec}")
if want.get("fail") != 1 or want.get("error") != 1:
    problems.append(f"the JSON should have one FAIL and one error row: {want}")
if d.unknown:
    problems.append(f"elements the page does not write (from a result's text?): {sorted(set(d.unknown))}")
if d.svgs.get("swimlane", 0) < 1:
    problems.append("no swimlane drawn")
if d.svgs.get("chart", 0) < 5:
    problems.append(f"{d.svgs.get('chart', 0)} charts (a CDF and a capacity scenario's four expected)")
explore = [i for i in summary["inputs"] if i["kind"] == "sim explore"]
if len(explore) != 1 or "2 shards merged" not in explore[0]["path"]:
    problems.append(f"the explore directory's two shards were not merged into one: {explore}")
if summary.get("skipped_files", 0) < 1:
    problems.append("no shrunk case skipped in the explore directory")
if "totals per mode" not in dom:
    problems.append("no per-mode totals under the matrix")
# the requirement matrix: one row per requirement of the document, one column per mode of
# the sim run (its modelled gateways), each cell one of the matrix's words
levels = json.load(open(sys.argv[4]))
modes = sorted({r["mode"] for r in sim["rows"] if r.get("mode")})
if "requirements" not in d.ids:
    problems.append("no section #requirements")
if sorted(c.replace(" (sim)", "") for c in d.req_cols) != modes:
    problems.append(f"requirement matrix columns {d.req_cols}, the sim run's modes {modes}")
if len(d.req_rows) != len(levels["requirements"]):
    problems.append(f"{len(d.req_rows)} requirement rows, the document has {len(levels['requirements'])}")
words = {w for row in d.req_rows for w in row}
if any(len(row) != len(modes) for row in d.req_rows) or not words <= {"met", "NOT MET", "n/e", "-"}:
    problems.append(f"requirement cells: {sorted(words)}")
col = {c: [row[i] for row in d.req_rows] for i, c in enumerate(d.req_cols)}
# (this subset of the library exercises no requirement fully: no "met"; joined's bugs show)
if "NOT MET" not in col.get("joined (sim)", []):
    problems.append("the matrix should show joined's bugs (stream-logprobs-merge: I11) as NOT MET")
if "NOT MET" in col.get("reference (sim)", []):
    problems.append("the reference does not meet a requirement")
if summary.get("requirement_rows") != len(d.req_rows) or summary.get("requirement_columns") != len(d.req_cols):
    problems.append(f"--json summary's requirement matrix size differs from the page's")
if problems:
    print("report_browser_test: " + "; ".join(problems))
    sys.exit(1)
print(f"report_browser_test: {len(d.cells)} cells as the JSON's rows ({want}), "
      f"{d.svgs.get('swimlane', 0)} swimlanes, {d.svgs.get('chart', 0)} charts, a requirement "
      f"matrix of {len(d.req_rows)} x {len(d.req_cols)}, no console errors")
PY
