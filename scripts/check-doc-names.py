#!/usr/bin/env python3
"""Docs name only what exists: every scenario, mode, pdref option and invariant that README.md
or docs/*.md names must be one the project has. The real sets come from the project itself,
never from a list kept here: scenarios from scenarios/ and bench/scenarios/, modes from the
core's name table (core/pd_gw.c), options from each subcommand's getopt table (cli/cmd_*.c),
invariants from docs/spec.md's table (section 6) and their names from the checker's table.

  scripts/check-doc-names.py [--root DIR] [FILE.md ...]   check (default README.md docs/*.md)
  scripts/check-doc-names.py --options SUBCOMMAND         print a subcommand's options
  scripts/check-doc-names.py --list                       print the real sets

Exit 0 clean, 1 with one `file:line: ...` per stale name."""
import glob
import os
import re
import sys

# Each cli/cmd_*.c and the subcommand whose getopt table it holds (a new file fails below).
CMD_FILES = {
    "cmd_sim.c": "sim run", "cmd_sim_new.c": "sim new", "cmd_bench.c": "sim bench",
    "cmd_explore.c": "sim explore", "cmd_explore_merge.c": "sim explore merge",
    "cmd_gateway.c": "gateway", "cmd_netbench.c": "gateway bench", "cmd_mock.c": "mock",
    "cmd_conform.c": "conform", "cmd_report.c": "report",
}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def subcommand_options(root):
    """{subcommand: [option names]} from the `struct option` tables of cli/cmd_*.c."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "cli", "cmd_*.c"))):
        text = read(path)
        tables = re.findall(r"struct option\s+\w+\[\]\s*=\s*\{(.*?)\{\s*NULL\s*,", text, re.S)
        if not tables:
            continue
        name = os.path.basename(path)
        if name not in CMD_FILES:
            sys.exit(f"check-doc-names: {path} has an option table but no subcommand in CMD_FILES")
        opts = []
        for t in tables:
            opts += re.findall(r'\{\s*"([a-z0-9][a-z0-9-]*)"\s*,', t)
        out[CMD_FILES[name]] = opts
    return out


def modes(root):
    text = read(os.path.join(root, "core", "pd_gw.c"))
    m = re.search(r"mode_names\[[A-Z_]*\]\s*=\s*\{(.*?)\};", text, re.S)
    return re.findall(r'"([a-z0-9-]+)"', m.group(1))


def invariants(root):
    """{ID: name} from docs/spec.md's invariant table; names checked against the code's."""
    spec = read(os.path.join(root, "docs", "spec.md"))
    table = dict(re.findall(r"^\| \*\*(I\d+)\*\* \| ([a-z-]+) \|", spec, re.M))
    code = read(os.path.join(root, "sim", "pd_scenario.c"))
    m = re.search(r"inv_names\[[A-Z_]*\]\s*=\s*\{(.*?)\};", code, re.S)
    names = re.findall(r'"([a-z-]+)"', m.group(1))
    coded = {f"I{i + 1}": n for i, n in enumerate(names)}
    if coded != table:
        sys.exit("check-doc-names: docs/spec.md's invariant table and sim/pd_scenario.c's "
                 f"inv_names differ: {sorted(set(table.items()) ^ set(coded.items()))}")
    return table


def scenarios(root):
    names = set()
    for d in ("scenarios", "bench/scenarios"):
        for p in glob.glob(os.path.join(root, d, "*.json")):
            names.add(os.path.basename(p)[:-5])
    return names


def real_sets(root):
    opts = subcommand_options(root)
    return {
        "options": opts,
        "all_options": {o for v in opts.values() for o in v} | {"help", "version"},
        "modes": modes(root),
        "invariants": invariants(root),
        "scenarios": scenarios(root),
    }


SUB_RE = None  # built in commands_in()


def command_segments(line, subs):
    """(subcommand, text after it) for each pdref command in line: the text runs to the end of
    the backtick span or line (or a ';', '|', '&&', '>' or the next pdref command), with
    single-quoted words taken out (they are checked as commands of their own)."""
    quoted = re.findall(r"'([^']*)'", line)
    outer = re.sub(r"'[^']*'", "''", line)
    out = []
    for text in [outer] + quoted:
        spans = re.findall(r"`([^`]*)`", text) if text.count("`") >= 2 else [text]
        for span in spans:
            alt = "|".join(re.escape(s) for s in sorted(subs, key=len, reverse=True))
            pat = re.compile(r"(?<![\w-])pdref(-gateway)?(?: (" + alt + r"))?(?![\w-])")
            ms = list(pat.finditer(span))
            for k, m in enumerate(ms):
                end = ms[k + 1].start() if k + 1 < len(ms) else len(span)
                rest = re.split(r";|\|| && |>|\)", span[m.end():end])[0]
                sub = "pdref-gateway" if m.group(1) else (m.group(2) or "")
                out.append((sub, rest))
    return out


def check_file(path, rel, sets):
    errs = []
    subs = sets["options"]
    inv = sets["invariants"]
    by_name = {v: k for k, v in inv.items()}
    modes_ok = set(sets["modes"]) | {"all"}
    scen = sets["scenarios"]
    pages = {"pdref-" + s.replace(" ", "-") for s in subs} | {"pdref", "pdref-gateway"}
    lines = read(path).split("\n")
    in_code = False
    pending = None  # a code block's command continued with a trailing backslash
    for n, line in enumerate(lines, 1):
        where = f"{rel}:{n}"
        if line.lstrip().startswith("```"):
            in_code = not in_code
            pending = None
            continue
        # invariants: an ID past the last one, or an ID beside another invariant's name
        for m in re.finditer(r"(?<![\w.])I(\d+)(?![\w.])", line):
            if f"I{m.group(1)}" not in inv:
                errs.append(f"{where}: invariant {m.group(0)} does not exist (I1-I{len(inv)})")
        for m in re.finditer(r"(?<![\w.])(I\d+)\W{1,3}([a-z]+(?:-[a-z]+)*)", line):
            if m.group(2) in by_name and by_name[m.group(2)] != m.group(1):
                errs.append(f"{where}: '{m.group(0)}': {m.group(2)} is "
                            f"{by_name[m.group(2)]}, {m.group(1)} is {inv.get(m.group(1), '?')}")
        # modes given to --mode, or as a row's "mode"
        for m in re.finditer(r'(?:--mode[ =]|"mode": ")([A-Za-z0-9_{}<>$-]+)', line):
            v = m.group(1)
            if re.search(r"[A-Z{}<>$]", v):
                continue  # a placeholder: M, {mode}, <mode>, $mode
            if v not in modes_ok:
                errs.append(f"{where}: mode '{v}' does not exist ({', '.join(sets['modes'])}, all)")
        # scenario files, and backticked scenario-like names
        for m in re.finditer(r"scenarios/([A-Za-z0-9._*<>{}-]+?)\.json", line):
            v = m.group(1)
            if re.search(r"[A-Z<>{}]", v) or v in ("bad", "my-scenario"):
                continue
            if "*" in v:
                if not any(re.fullmatch(v.replace("*", ".*"), s) for s in scen):
                    errs.append(f"{where}: no scenario matches scenarios/{v}.json")
            elif v not in scen:
                errs.append(f"{where}: scenario file scenarios/{v}.json does not exist")
        for m in re.finditer(r"`([a-z0-9]+(?:-[a-z0-9]+){2,})(?:\.json)?`", line):
            v = m.group(1)
            if v in scen or v in modes_ok or v in by_name or v in pages or v.startswith("x-"):
                continue
            errs.append(f"{where}: `{v}` names no scenario, mode, invariant or command")
        # options of a pdref command (the text after `pdref SUBCOMMAND`)
        segs = command_segments(line, subs)
        if pending is not None and in_code and not re.search(r"(?<![\w-])pdref", line.split("'")[0]):
            segs = [(pending, re.sub(r"'[^']*'", "''", line))] + segs
        pending = None
        for sub, rest in segs:
            if sub == "pdref-gateway":  # the gateway alone: its options and --version
                allowed = set(subs["gateway"]) | {"help", "version", "json"}
            elif sub:
                allowed = set(subs.get(sub, [])) | {"help"}
            else:
                allowed = {"version", "json", "help"}
            for m in re.finditer(r"(?<![\w-])--([a-z][a-z0-9-]*)", rest):
                if m.group(1) not in allowed:
                    errs.append(f"{where}: `pdref {sub}` has no option --{m.group(1)}".replace(
                        "pdref ` ", "pdref` "))
            if in_code and rest.rstrip().endswith("\\"):
                pending = sub
    return errs


def main(argv):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    args = argv[1:]
    if args[:1] == ["--root"]:
        root, args = args[1], args[2:]
    sets = real_sets(root)
    if args[:1] == ["--list"]:
        for k in ("modes", "invariants"):
            print(k + ":", sets[k] if k == "modes" else " ".join(f"{a} {b}" for a, b in sets[k].items()))
        print("scenarios:", len(sets["scenarios"]))
        for s, o in sets["options"].items():
            print(f"pdref {s}:", " ".join("--" + x for x in o))
        return 0
    if args[:1] == ["--options"]:
        print("\n".join(sets["options"].get(args[1], [])))
        return 0 if args[1] in sets["options"] else 2
    files = args or ["README.md"] + sorted(
        os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    errs = []
    for f in files:
        path = f if os.path.isabs(f) or os.path.exists(f) else os.path.join(root, f)
        errs += check_file(path, f, sets)
    for e in errs:
        print("check-doc-names: " + e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
