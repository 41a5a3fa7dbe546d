#!/usr/bin/env python3
"""docs/scenario.schema.json against the scenario loader, so the two cannot drift apart unseen.

  tests/schema_test.py PDREF     (tests/schema_test.sh picks a python3 with jsonschema)

1. The schema is a valid draft-07 schema, and every file of scenarios/ and bench/scenarios/
   passes it.
2. The loader's key tables (sim/pd_scenario.c, sim/pd_scenario_more.c) name the same keys, the
   same required keys and the same enum values as the schema's objects, and `expect` /
   `unexercised` take the mode names of core/pd_gw.c.
3. Mutations of a valid scenario: for every key of every object, a wrong type and values just
   outside its range, every enum value, an unknown key, each required key left out. The
   loader (`pdref sim run FILE`, exit 2 with the JSON path = rejected) and the schema must
   agree on each, and the known-bad ones must be rejected by both. The loader checks a few
   things a schema cannot state (READER_ONLY below); those are checked to be rejected by the
   loader and accepted by the schema, so that list stays true too.
4. Every file of the scenario fuzz corpus gets the same verdict from both.
5. Every "default" the schema states (for editors to offer) is the loader's: a file with the
   key set to it runs exactly as the file without the key (`sim run --mode all --json`, the
   rows' cost figures included).
6. `pdref sim new` writes a template that passes the schema and `pdref sim run --mode all`.
"""
import concurrent.futures
import copy
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PDREF = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build/pdref")
SCHEMA = json.load(open(os.path.join(ROOT, "docs/scenario.schema.json")))
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def schema_ok(doc):
    return VALIDATOR.is_valid(doc)


def definition(name):
    return SCHEMA if name == "root" else SCHEMA["definitions"][name]


# ---- 1. the library ----

def check_library():
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    files = sorted(glob.glob(os.path.join(ROOT, "scenarios/*.json")) +
                   glob.glob(os.path.join(ROOT, "bench/scenarios/*.json")))
    if len(files) < 100:
        fail(f"only {len(files)} library files found")
    for f in files:
        errs = sorted(VALIDATOR.iter_errors(json.load(open(f))), key=lambda e: list(e.path))
        if errs:
            fail(f"{os.path.relpath(f, ROOT)}: $.{'.'.join(map(str, errs[0].path))}: "
                 f"{errs[0].message[:200]}")
    return len(files)


# ---- 2. the loader's key tables ----

TABLES = {"top_keys": "root", "config_keys": "config", "worker_keys": "worker",
          "fault_keys": "worker_fault", "workload_keys": "workload",
          "tfault_keys": "traffic_fault", "burst_keys": "burst", "step_keys": "load_step"}


def split_top(text):
    """Split on commas outside (), {}, [] and string literals."""
    parts, depth, cur, in_str = [], 0, "", False
    for i, ch in enumerate(text):
        if in_str:
            in_str = not (ch == '"' and text[i - 1] != "\\")
        elif ch == '"':
            in_str = True
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def c_source():
    text = ""
    for f in ("sim/pd_scenario.c", "sim/pd_scenario_more.c"):
        text += open(os.path.join(ROOT, f)).read()
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def name_arrays(src):
    """static const char *const X[...] = {"a", "b"}; -> {X: [a, b]}"""
    out = {}
    for m in re.finditer(r"const char \*const (\w+)\[[^\]]*\] = \{(.*?)\};", src, re.S):
        out[m.group(1)] = re.findall(r'"([^"]*)"', m.group(2))
    return out


def table_entries(src, table):
    """(key, required, names array or None) for each entry of a scenario_key_t table."""
    m = re.search(r"scenario_key_t " + table + r"\[\] = \{(.*?)\n\};", src, re.S)
    out = []
    for e in split_top(m.group(1)):
        m2 = re.match(r"(K_\w*)\((.*)\)$", e, re.S)
        if m2:
            macro, args = m2.group(1), split_top(m2.group(2))
            if macro == "K_AS":
                out.append((args[0].strip('"'), False, None))
            elif macro == "K_MS":
                out.append((args[1], False, None))
            elif macro == "K_ENUM":
                out.append((args[1], args[4] == "1", args[2]))
            else:  # K_, K_STR: the field, required last
                out.append((args[1], args[-1] == "1", None))
        else:  # {"name", setter, offset, lo, hi, required, names, what}
            args = split_top(e.strip()[1:-1])
            names = args[6] if len(args) > 6 and args[6] != "NULL" else None
            out.append((args[0].strip('"'), args[5] == "1", names))
    return out


def check_tables():
    src = c_source()
    arrays = name_arrays(src)
    # name arrays the loader takes from core (pd_seeded_bug_names, core/pd_gw.c)
    arrays.update(name_arrays(open(os.path.join(ROOT, "core/pd_gw.c")).read()))
    found = set(re.findall(r"scenario_key_t (\w+)\[\] = \{", src))
    for t in sorted(found - set(TABLES)):
        fail(f"loader table {t} is not mapped to a schema object (TABLES in {__file__})")
    for table, obj in TABLES.items():
        d = definition(obj)
        entries = table_entries(src, table)
        keys = {k for k, _, _ in entries}
        props = set(d["properties"])
        for k in sorted(keys - props):
            fail(f"{obj}: the loader reads \"{k}\" ({table}); the schema lacks it")
        for k in sorted(props - keys):
            fail(f"{obj}: the schema has \"{k}\"; the loader ({table}) does not read it")
        req = {k for k, r, _ in entries if r}
        if req != set(d.get("required", [])):
            fail(f"{obj}: required {sorted(req)} in the loader, {d.get('required')} in the schema")
        if d.get("additionalProperties") is not False:
            fail(f"{obj}: the loader rejects unknown keys; additionalProperties must be false")
        for k, _, names in entries:
            if not names or k not in props:
                continue
            p = d["properties"][k]
            enum = p.get("enum") or definition(p["$ref"].split("/")[-1])["enum"]
            if enum != arrays.get(names):
                fail(f"{obj}.{k}: enum {enum} in the schema, {arrays.get(names)} in the loader")
    gw = open(os.path.join(ROOT, "core/pd_gw.c")).read()
    modes = re.findall(r'"([^"]+)"', re.search(r"mode_names\[PD_MODE_COUNT\] = \{(.*?)\};",
                                                 gw, re.S).group(1))
    for k in ("expect", "unexercised"):
        if sorted(SCHEMA["properties"][k]["properties"]) != sorted(modes):
            fail(f"{k}: modes {sorted(SCHEMA['properties'][k]['properties'])} in the schema, "
                 f"{modes} in core/pd_gw.c")
    return len(TABLES)


# ---- 3. mutations: the loader and the schema agree ----

def base_doc():
    out = subprocess.run([PDREF, "sim", "new", "schema-base", "--out", "-"],
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    doc["workers"][2]["faults"] = [{"kind": "slow_drip", "ms": 1}]
    return doc


def burst_doc():
    doc = base_doc()
    doc["workload"] = {"bursts": [{"at_ms": 0, "requests": 2}, {"at_ms": 5, "requests": 2}]}
    return doc


def steps_doc():
    doc = base_doc()
    doc["workload"]["steps"] = [{"at_ms": 0, "factor": 1}, {"at_ms": 50, "factor": 2}]
    return doc


# where each schema object sits in a document: (document maker, path to it)
WHERE = {"root": (base_doc, []), "config": (base_doc, ["config"]),
         "worker": (base_doc, ["workers", 2]),
         "worker_fault": (base_doc, ["workers", 2, "faults", 0]),
         "traffic_fault": (base_doc, ["faults", 0]), "workload": (base_doc, ["workload"]),
         "burst": (burst_doc, ["workload", "bursts", 1]),
         "load_step": (steps_doc, ["workload", "steps", 1])}

# Values the schema accepts and the loader rejects, because the check spans keys (the schema's
# description lists them): (object, key, value, why).
READER_ONLY = [
    ("workload", "interval_ms", 1000000000, "requests * interval_ms over 1e9 ms"),
    ("workload", "prompt_tokens_max", 1000000, "prompt_tokens_max needs prompt_tokens >= 1"),
    ("workload", "requests", 1, "no request 1 for the traffic fault's request 1 (below)"),
    ("workload", "batch", 1024, "batch * prompt_tokens over 1e6 words (prompt_tokens set below)"),
    ("worker", "page_size", 65536, "max_total_tokens below page_size (max_total_tokens set)"),
    ("worker", "restart_at_ms", 1, "restart_at_ms not after crash_at_ms (crash_at_ms set)"),
    ("burst", "at_ms", 0, "a burst's at_ms not after the previous one's"),
    ("workload", "users", 100000, "a closed loop with the template's interval_ms"),
    ("load_step", "at_ms", 0, "a step's at_ms not after the previous one's"),
    ("load_step", "ramp_ms", 1000000000, "at_ms + ramp_ms over 1e9 ms"),
    ("worker_fault", "nth", [3, 2], "from > to"),
    ("traffic_fault", "request", 9999999, "the workload has no request 9999999"),
    ("config", "seed", "18446744073709551616", "a seed string above 2^64 - 1"),
]
# keys whose largest value is too slow to run: the loader reads such a file with an unknown
# key after everything else (SENTINEL) and must get as far as that key: (object, key)
TOO_SLOW = {("workload", "requests"), ("workload", "tokens"), ("burst", "requests"),
            ("workload", "prompt_tokens"), ("workload", "batch")}


SENTINEL = "zz_sentinel"


def at(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def wrong_types(p):
    """Values of the wrong JSON type for property schema p."""
    if "$ref" in p:
        p = definition(p["$ref"].split("/")[-1])
    kinds = set()
    for alt in p.get("oneOf", [p]):
        kinds.add(alt.get("type", "string" if "const" in alt else None))
    out = []
    numeric = kinds & {"integer", "number"}
    if numeric and not kinds & {"string", None}:
        out.append(str(p.get("minimum", 1)))  # "8" is not 8
    if "integer" in kinds and "number" not in kinds:
        out.append(1.5)
    if "boolean" not in kinds:
        out.append(True)
    if kinds & {"string", None} and not numeric:
        out.append(7)
    if "array" not in kinds:
        out.append([])
    if "object" not in kinds:
        out.append({})
    if kinds == {"boolean"}:
        out.append(1)  # 1 is not true
    return out


def valid_values(p):
    if "$ref" in p:
        p = definition(p["$ref"].split("/")[-1])
    if "enum" in p:
        return list(p["enum"])
    t = p.get("type")
    if t in ("integer", "number"):
        return [p["minimum"], p["maximum"]]
    if t == "boolean":
        return [False, True]
    if t == "string":
        return ["x" * max(1, p.get("minLength", 0)), "y" * p["maxLength"]]
    return []


def out_of_range(p):
    if "$ref" in p:
        p = definition(p["$ref"].split("/")[-1])
    out = []
    if p.get("type") in ("integer", "number"):
        out += [p["minimum"] - 1, p["maximum"] + 1] if p["type"] == "integer" else \
               [p["minimum"] - 0.5, p["maximum"] + 0.5]
    if p.get("type") == "string" and "maxLength" in p:
        out.append("z" * (p["maxLength"] + 1))
        if p.get("minLength"):
            out.append("")
    if "enum" in p:
        out.append(p["enum"][0] + "x")
    return out


def cases():
    """(label, document, expected verdict: True ok, False rejected, None either: must agree)"""
    out = []
    reader_only = {(o, k, json.dumps(v)) for o, k, v, _ in READER_ONLY}
    for obj, (make, path) in WHERE.items():
        d = definition(obj)
        doc = make()
        x = copy.deepcopy(doc)
        at(x, path)["colour"] = "red"
        out.append((f"{obj}: unknown key", x, False))
        for k in d.get("required", []):
            x = copy.deepcopy(doc)
            at(x, path).pop(k, None)
            out.append((f"{obj}: without required {k}", x, False))
        for k, p in d["properties"].items():
            for v in wrong_types(p):
                x = copy.deepcopy(doc)
                at(x, path)[k] = v
                out.append((f"{obj}.{k} = {json.dumps(v)}", x, False))
            for v in out_of_range(p):
                x = copy.deepcopy(doc)
                at(x, path)[k] = v
                out.append((f"{obj}.{k} = {json.dumps(v)[:30]}", x, False))
            for v in valid_values(p):
                if (obj, k, json.dumps(v)) in reader_only:
                    continue
                x = copy.deepcopy(doc)
                at(x, path)[k] = v
                slow = (obj, k) in TOO_SLOW and v != valid_values(p)[0]
                out.append((f"{obj}.{k} = {json.dumps(v)[:30]}", x, "unrun" if slow else None))
    out += special_cases()
    return out


def special_cases():
    out = []
    doc = base_doc()

    def mut(label, fn, want):
        x = copy.deepcopy(doc)
        fn(x)
        out.append((label, x, want))
    mut("no decode worker", lambda x: x.__setitem__("workers", x["workers"][:2]), False)
    mut("one worker", lambda x: x.__setitem__("workers", x["workers"][2:3]), False)
    mut("kind status without status", lambda x: x["faults"][0].pop("status"), False)
    mut("worker fault kind status without status",
        lambda x: x["workers"][2]["faults"][0].update(kind="status"), False)
    mut("expect: unknown mode", lambda x: x["expect"].update(smg="pass"), False)
    mut("expect: I99", lambda x: x["expect"].update(joined=["I99"]), False)
    mut("expect: I0", lambda x: x["expect"].update(joined=["I0"]), False)
    mut("expect: I3 twice", lambda x: x["expect"].update(joined=["I3", "I3"]), False)
    mut("expect: \"fail\"", lambda x: x["expect"].update(joined="fail"), False)
    mut("expect: every invariant", lambda x: x["expect"].update(
        joined=[f"I{i}" for i in range(1, 21)]), None)
    mut("expect: empty list", lambda x: x["expect"].update(joined=[]), None)
    mut("expect: a deployment limit", lambda x: x["expect"].update(
        joined={"deployment_limit": ["I19"], "why": "KV expired before decode read it"}), True)
    mut("expect: a deployment limit without why", lambda x: x["expect"].update(
        joined={"deployment_limit": ["I19"]}), False)
    mut("expect: a deployment limit of nothing", lambda x: x["expect"].update(
        joined={"deployment_limit": [], "why": "w"}), False)
    mut("expect: a deployment limit, empty why", lambda x: x["expect"].update(
        joined={"deployment_limit": ["I18"], "why": ""}), False)
    mut("expect: a deployment limit, why too long", lambda x: x["expect"].update(
        joined={"deployment_limit": ["I18"], "why": "w" * 240}), False)
    mut("expect: a deployment limit, unknown key", lambda x: x["expect"].update(
        joined={"deployment_limit": ["I18"], "why": "w", "note": "n"}), False)
    mut("expect: a deployment limit, I3 twice", lambda x: x["expect"].update(
        joined={"deployment_limit": ["I3", "I3"], "why": "w"}), False)
    mut("unexercised: empty reason", lambda x: x["unexercised"].update(minilb=""), False)
    mut("unexercised: unknown mode", lambda x: x["unexercised"].update(smg="why"), False)
    mut("nth [2, 5]", lambda x: x["workers"][2]["faults"][0].update(nth=[2, 5]), None)
    mut("nth [0, 5]", lambda x: x["workers"][2]["faults"][0].update(nth=[0, 5]), False)
    mut("nth [1, 2, 3]", lambda x: x["workers"][2]["faults"][0].update(nth=[1, 2, 3]), False)
    mut("leg [1, 2]", lambda x: x["faults"][0].update(leg=[1, 2]), None)
    mut("network fault: net_reset after 50 ms", lambda x: x["workers"][2]["faults"][0].update(
        kind="net_reset", ms=50), None)
    mut("network fault: response_lost after 3 events", lambda x: x["faults"][0].update(
        kind="response_lost", after_tokens=3), None)
    mut("network fault: net_reset kind misspelt", lambda x: x["faults"][0].update(
        kind="net-reset"), False)
    mut("seed as a string", lambda x: x["config"].update(seed="18446744073709551615"), None)
    mut("seed string with a sign", lambda x: x["config"].update(seed="-1"), False)
    mut("seed 2^53 + 2", lambda x: x["config"].update(seed=9007199254740994), False)
    mut("stream 0.5", lambda x: x["workload"].update(stream=0.5), None)
    mut("stream 1.5", lambda x: x["workload"].update(stream=1.5), False)
    mut("poisson 1", lambda x: x["workload"].update(poisson=1), False)
    mut("17 faults on a worker", lambda x: x["workers"][2].update(
        faults=[{"kind": "slow_drip", "ms": 1}] * 17), False)
    mut("9 tags", lambda x: x.update(tags=["t"] * 9), False)
    mut("empty object", lambda x: x.clear(), False)
    mut("closed loop with interval_ms", lambda x: x["workload"].update(users=4), "reader-only")
    mut("closed loop", lambda x: x["workload"].update(users=4, interval_ms=0, think_ms=5,
                                                     client_timeout_ms=50, client_retries=2),
        None)
    mut("steps empty", lambda x: x["workload"].update(steps=[]), False)
    mut("a spike", lambda x: x["workload"].update(steps=[{"at_ms": 100, "factor": 3},
                                                         {"at_ms": 200, "factor": 1}]), None)
    bd = burst_doc()
    for label, fn, want in [
            ("bursts with interval_ms", lambda w: w.update(interval_ms=5), False),
            ("bursts with interval_ms 0", lambda w: w.update(interval_ms=0), None),
            ("bursts with poisson", lambda w: w.update(poisson=True), False),
            ("bursts empty", lambda w: w.update(bursts=[]), False),
            ("bursts with steps", lambda w: w.update(steps=[{"at_ms": 1, "factor": 2}]),
             "reader-only"),
            ("bursts with users", lambda w: w.update(users=2), "reader-only")]:
        x = copy.deepcopy(bd)
        fn(x["workload"])
        out.append((label, x, want))
    # the READER_ONLY values, each with what makes it bad
    prep = {"batch": lambda x: x["workload"].update(prompt_tokens=1000),
            "page_size": lambda x: x["workers"][2].update(max_total_tokens=2),
            "restart_at_ms": lambda x: x["workers"][2].update(crash_at_ms=1),
            "requests": lambda x: x["faults"][0].update(request=1)}
    for obj, k, v, why in READER_ONLY:
        make, path = WHERE[obj]
        x = make()
        if k in prep and obj in ("workload", "worker"):
            prep[k](x)
        at(x, path)[k] = v
        out.append((f"reader only: {obj}.{k} = {json.dumps(v)} ({why})", x, "reader-only"))
    return out


def reader_verdict(path):
    """True: the loader accepts (exit 0 or 1: it ran), False: rejected (exit 2 naming the file);
    a file with the SENTINEL key is accepted when that key is the one the loader rejects."""
    r = subprocess.run([PDREF, "sim", "run", path, "--mode", "reference"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode == 2 and path in r.stderr:
        return f"$.{SENTINEL}: unknown key" in r.stderr
    if r.returncode in (0, 1):
        return True
    raise RuntimeError(f"{path}: exit {r.returncode}: {r.stderr.strip()[:200]}")


def check_mutations(tmp):
    all_cases = cases()
    paths = []
    for i, (_, doc, want) in enumerate(all_cases):
        p = os.path.join(tmp, f"case-{i:04d}.json")
        with open(p, "w") as f:
            json.dump(dict(doc, **{SENTINEL: 1}) if want == "unrun" else doc, f)
        paths.append(p)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        verdicts = list(ex.map(reader_verdict, paths))
    n_bad = 0
    for (label, doc, want), reader, p in zip(all_cases, verdicts, paths):
        schema = schema_ok(doc)
        if want == "reader-only":
            if reader or not schema:
                fail(f"{label}: loader {'accepts' if reader else 'rejects'}, schema "
                     f"{'accepts' if schema else 'rejects'} (expected: loader rejects, "
                     f"schema accepts)")
            continue
        n_bad += want is False
        want = None if want == "unrun" else want
        if reader != schema:
            fail(f"{label}: loader {'accepts' if reader else 'rejects'}, schema "
                 f"{'accepts' if schema else 'rejects'} ({os.path.basename(p)})")
        elif want is not None and reader != want:
            fail(f"{label}: both {'accept' if reader else 'reject'}; expected the opposite")
    return len(all_cases), n_bad


# ---- 4. the fuzz corpus ----

def check_corpus():
    files = sorted(glob.glob(os.path.join(ROOT, "fuzz/corpus/scenario/*.json")))
    for f in files:
        try:
            schema = schema_ok(json.load(open(f)))
        except ValueError:
            schema = False
        reader = reader_verdict(f)
        if reader != schema:
            fail(f"{os.path.relpath(f, ROOT)}: loader {'accepts' if reader else 'rejects'}, "
                 f"schema {'accepts' if schema else 'rejects'}")
    return len(files)


# ---- 5. the defaults ----

def run_json(path):
    r = subprocess.run([PDREF, "sim", "run", path, "--mode", "all", "--json"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode == 2:
        return f"exit 2: {r.stderr.strip()}"
    rows = json.loads(r.stdout)["rows"]
    for row in rows:
        row.pop("file", None)
        row.pop("replay", None)  # names the file too
    return rows


def check_defaults(tmp):
    pairs = []
    for obj, (make, path) in WHERE.items():
        for k, p in definition(obj)["properties"].items():
            if "default" not in p:
                continue
            doc = make()
            with_key, without = copy.deepcopy(doc), copy.deepcopy(doc)
            # a worker's key on every worker: prefill-only and decode-only keys both count
            paths = [["workers", i] for i in range(len(doc["workers"]))] if obj == "worker" \
                else [path]
            for q in paths:
                at(with_key, q)[k] = p["default"]
                at(without, q).pop(k, None)
            files = []
            for tag, d in (("with", with_key), ("without", without)):
                f = os.path.join(tmp, f"default-{obj}-{k}-{tag}.json")
                with open(f, "w") as out:
                    json.dump(d, out)
                files.append(f)
            pairs.append((f"{obj}.{k}", files))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(lambda fs: [run_json(f) for f in fs], [f for _, f in pairs]))
    for (label, _), (a, b) in zip(pairs, results):
        if a != b:
            fail(f"{label}: the schema's default {json.dumps(definition_default(label))} "
                 f"runs differently from leaving the key out")
    return len(pairs)


def definition_default(label):
    obj, k = label.split(".")
    return definition(obj)["properties"][k]["default"]


# ---- 6. the template ----

def check_template(tmp):
    path = os.path.join(tmp, "my-scenario.json")
    r = subprocess.run([PDREF, "sim", "new", "my-scenario"], cwd=tmp, capture_output=True,
                       text=True)
    if r.returncode != 0 or not os.path.exists(path):
        fail(f"pdref sim new my-scenario: exit {r.returncode}: {r.stderr.strip()}")
        return
    doc = json.load(open(path))
    if not schema_ok(doc) or doc["name"] != "my-scenario":
        fail("the template fails the schema or is misnamed")
    r = subprocess.run([PDREF, "sim", "run", path, "--mode", "all"], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0 or "0 UNEXPECTED, 0 not exercised" not in r.stdout:
        fail(f"the template does not pass sim run --mode all (exit {r.returncode}):\n{r.stdout}")
    r = subprocess.run([PDREF, "sim", "new", "my-scenario"], cwd=tmp, capture_output=True,
                       text=True)
    if r.returncode != 2 or "--force" not in r.stderr:
        fail(f"sim new over an existing file: exit {r.returncode} (expected 2, naming --force)")
    r = subprocess.run([PDREF, "sim", "new", "my-scenario", "--out", "-"], capture_output=True,
                       text=True)
    if r.returncode != 0 or r.stdout != open(path).read():
        fail("sim new --out - does not print the file sim new writes")
    for bad in ("a b", "../x", ".hidden", "x" * 96, '"q"'):
        r = subprocess.run([PDREF, "sim", "new", bad], cwd=tmp, capture_output=True, text=True)
        if r.returncode != 2:
            fail(f"sim new '{bad}': exit {r.returncode}, expected 2 (a bad NAME)")


def main():
    n_files = check_library()
    check_tables()
    with tempfile.TemporaryDirectory(prefix="pdref-schema-") as tmp:
        n_cases, n_bad = check_mutations(tmp)
        n_corpus = check_corpus()
        n_defaults = check_defaults(tmp)
        check_template(tmp)
    if failures:
        print(f"schema_test: {len(failures)} failures")
        return 1
    print(f"schema_test: {n_files} library files valid; key tables match; loader and schema "
          f"agree on {n_cases} mutations ({n_bad} known-bad) and {n_corpus} corpus files; "
          f"{n_defaults} stated defaults are the loader's; the sim new template passes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
