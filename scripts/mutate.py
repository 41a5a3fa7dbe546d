#!/usr/bin/env python3
"""make mutate: seed one-line bugs (mutants) into pdref's own code and see whether the scenario
library and the CUnit suites notice (docs/mutation.md).

Mutants are enumerated from the source text (comments, strings, preprocessor lines, asserts and
logging skipped), sampled with a fixed seed, applied one at a time in a private copy of the tree
per job (build/mutate/jN: src/ + an -O1 build/ rebuilt incrementally), then judged:
  stage 1  pdref sim run scenarios --mode all --fail-fast     (the scenario library)
  stage 2  pdref_tests [SUITE...]                              (the unit tests, non-ASan)
A mutant that does not compile is invalid; one whose object file is byte-identical to the
original's is equivalent by construction; one that outlives a stage's timeout counts as killed
by timeout. Survivors are compared with the record (tests/mutants.json): each is equivalent
(with a reason), killed by a named scenario or test added later, or open.
Standard library only."""
import argparse
import concurrent.futures
import fnmatch
import glob
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The target sets (docs/mutation.md): which files each set's score is over.
TARGETS = {
    "reference": ["core/pd_mode_ref.c", "core/pd_mode_sfref.c", "core/pd_breaker.c",
                  "core/pd_retry.c", "core/pd_policy.c", "core/pd_rqstate.c",
                  "core/pd_feed.c", "core/pd_gw.c"],
    "checker": ["sim/pd_check.c", "sim/pd_check_sf.c"],
    "engine": ["mock_workers/pd_wengine*.c"],
    "driver": ["sim/pd_world*.c"],
}
DEFAULT_TARGETS = "reference,checker"
# Stage 2's default: the in-process suites (~30 s). The suites that start real processes and
# sockets take ~2.5 min more per surviving mutant; --suites all runs them too.
SOCKET_SUITES = re.compile(r"^(gateway|gateway_slow|mock|mock_more|mock_vllm|conform\w*|"
                           r"worker_parity|hostile_\w+|bench|cli|cli_out|proc)$")


def suite_names(root):
    text = open(os.path.join(root, "tests", "suites.h"), encoding="utf-8").read()
    return re.findall(r"X\(pdt_suite_(\w+)\)", text)
ENUM_HEADERS = ["core/*.h", "sim/*.h", "mock_workers/*.h"]
OPERATORS = ["rel", "bool", "not", "call", "enum", "const", "ret"]

# Lines never mutated: asserts (a mutant there tests the assert, not the code) and logging.
SKIP_LINE = re.compile(r"\b(assert|static_assert|_Static_assert|fprintf|printf|snprintf|"
                       r"vsnprintf|fputs|puts|perror|getenv)\s*\(")
KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof", "else", "do", "case",
            "goto", "break", "continue", "default", "typedef", "static", "struct", "enum",
            "union", "const", "unsigned", "signed", "int", "void", "char", "double", "float",
            "long", "short", "uint64_t", "uint32_t", "int64_t", "size_t", "_Alignof"}
REL_FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
OPS_RE = re.compile(r"<<=|>>=|<<|>>|->|<=|>=|==|!=|&&|\|\||!|<|>")
CONST_RE = re.compile(r"(?<![\w.])(\d+)([uUlL]*)(?![\w.])")
IDENT_RE = re.compile(r"\b[A-Z][A-Z0-9_]+\b")
CALL_RE = re.compile(r"^(\s*)([A-Za-z_]\w*(?:\s*(?:\.|->)\s*[A-Za-z_]\w*)*)\s*\(.*\)\s*;\s*$")
# dropping a free only leaks: that is the sanitizer build's finding, not a behaviour
FREE_RE = re.compile(r"^(free|cJSON_Delete)$|_(free|del)$")
RET_RE = re.compile(r"\breturn\s+([^;]+?)\s*;")


def mask_c(text):
    """text with comments, string and char literals blanked (same length, newlines kept), and
    the set of line numbers (1-based) that belong to preprocessor directives."""
    out = list(text)
    i, n = 0, len(text)
    pp_lines = set()
    line, at_line_start, in_pp = 1, True, False
    while i < n:
        c = text[i]
        if c == "\n":
            # a directive goes on while its line ends in a backslash
            in_pp = in_pp and i > 0 and text[i - 1] == "\\"
            line += 1
            at_line_start = True
            if in_pp:
                pp_lines.add(line)
            i += 1
            continue
        if at_line_start and c == "#":
            in_pp = True
            pp_lines.add(line)
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if text[k] != "\n":
                    out[k] = " "
                else:
                    line += 1
                    if in_pp:
                        pp_lines.add(line)
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
            continue
        i += 1
    return "".join(out), pp_lines


def read_enums(root):
    """{member: next member of the same enum} from the headers' enum bodies."""
    nxt = {}
    for pat in ENUM_HEADERS:
        for path in sorted(glob.glob(os.path.join(root, pat))):
            masked, _ = mask_c(open(path, encoding="utf-8").read())
            for body in re.findall(r"\benum\b[^{;]*\{([^}]*)\}", masked):
                names = [m.group(1) for m in re.finditer(r"\b([A-Z][A-Z0-9_]+)\b\s*(?:=[^,]*)?(?:,|$)", body)]
                names = [x for x in names if not re.search(r"_(COUNT|MAX|N|LAST)$", x)]
                for a, b in zip(names, names[1:] + names[:1]):
                    if a != b:
                        nxt.setdefault(a, b)
    return nxt


def balanced(s):
    d = 0
    for ch in s:
        d += ch == "("
        d -= ch == ")"
        if d < 0:
            return False
    return d == 0


def enumerate_file(root, rel, enums):
    """Every mutant of one file: dicts with file, line, col (1-based), op, orig, repl, text."""
    text = open(os.path.join(root, rel), encoding="utf-8").read()
    masked, pp = mask_c(text)
    res = []
    lines, mlines = text.split("\n"), masked.split("\n")
    for ln, (src, m) in enumerate(zip(lines, mlines), 1):
        if ln in pp or not m.strip() or SKIP_LINE.search(m):
            continue
        is_case = re.match(r"\s*(case\b|default\s*:)", m) is not None

        def add(col0, op, orig, repl):
            res.append({"file": rel, "line": ln, "col": col0 + 1, "op": op, "orig": orig,
                        "repl": repl, "text": src.strip()})

        for mo in OPS_RE.finditer(m):
            tok = mo.group(0)
            if tok in REL_FLIP:
                add(mo.start(), "rel", tok, REL_FLIP[tok])
            elif tok in ("&&", "||"):
                add(mo.start(), "bool", tok, "||" if tok == "&&" else "&&")
            elif tok == "!" and not m.startswith("=", mo.end()):
                add(mo.start(), "not", "!", "")
        if not is_case and not re.search(r"\benum\b", m):
            for mo in IDENT_RE.finditer(m):
                if mo.group(0) in enums:
                    add(mo.start(), "enum", mo.group(0), enums[mo.group(0)])
            for mo in CONST_RE.finditer(m):
                pre = m[:mo.start()].rstrip()
                if pre.endswith("[") or (pre.endswith("-") and pre[:-1].rstrip().endswith("-")):
                    continue  # array sizes: a bound off by one is mostly not a behaviour
                v = int(mo.group(1))
                add(mo.start(), "const", mo.group(0), str(v + 1) + mo.group(2))
                if v > 0:
                    add(mo.start(), "const", mo.group(0), str(v - 1) + mo.group(2))
        for mo in RET_RE.finditer(m):
            e = mo.group(1).strip()
            col = mo.start(1)
            se = src[mo.start(1):mo.end(1)]  # the source's text (m has literals blanked)
            flips = {"0": "1", "1": "0", "true": "false", "false": "true"}
            if e in flips:
                add(col, "ret", e, flips[e])
            elif e == "NULL" or e.startswith('"'):
                continue  # a message's text is not a behaviour the checks promise
            elif re.search(r"[<>=!]=|[<>]|&&|\|\||^!", e.replace("->", ".")) and balanced(e) \
                    and "?" not in e:
                add(col, "ret", se, "!(" + se + ")")
            elif balanced(e):
                add(col, "ret", se, "0")
        mo = CALL_RE.match(m)
        if mo and mo.group(2).split()[0] not in KEYWORDS and balanced(m) and \
                not FREE_RE.search(mo.group(2)):
            stmt = src[len(mo.group(1)):].rstrip()
            add(len(mo.group(1)), "call", stmt, "(void)0;")
    return res


def mutant_id(mu):
    orig = mu["orig"]
    if mu["op"] == "call":
        orig = re.match(r"[^(]*", orig).group(0).strip() + "()"
    return "%s:%d:%d:%s:%s\u2192%s" % (mu["file"], mu["line"], mu["col"], mu["op"], orig,
                                      mu["repl"] or "\u2205")


def expand_files(root, pats):
    out = []
    for pat in pats:
        hits = sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pat)))
        if not hits:
            raise ValueError("--files: %s matches no file" % pat)
        out += [h for h in hits if h not in out]
    return out


def target_of(rel):
    for name, pats in TARGETS.items():
        if any(fnmatch.fnmatch(rel, p) for p in pats):
            return name
    return "other"


def select_ids(root, ids):
    """Exactly the mutants named (ids as the tool prints them), from each file's full list."""
    enums = read_enums(root)
    out, by_file = [], {}
    for i in ids:
        by_file.setdefault(i.split(":", 1)[0], []).append(i)
    for rel, want in sorted(by_file.items()):
        if not os.path.isfile(os.path.join(root, rel)):
            raise ValueError("--only: %s: no such file" % rel)
        allm = {}
        for mu in enumerate_file(root, rel, enums):
            mu["id"] = mutant_id(mu)
            mu["target"] = target_of(rel)
            allm[mu["id"]] = mu
        for i in want:
            if i not in allm:
                raise ValueError("--only: no mutant %s in the source as it is now" % i)
            out.append(allm[i])
    out.sort(key=lambda mu: (mu["file"], mu["line"], mu["col"], mu["op"], mu["repl"]))
    return out


def select(root, sets, files, count, seed):
    """The sample: `count` mutants split evenly over the target sets (or over --files), drawn
    with random.Random(seed) from each set's sorted list: the same inputs, the same mutants."""
    enums = read_enums(root)
    groups = {}
    if files:
        for rel in expand_files(root, files):
            groups.setdefault(target_of(rel), []).append(rel)
    else:
        for s in sets:
            groups[s] = expand_files(root, TARGETS[s])
    out, names = [], sorted(groups)
    for k, name in enumerate(names):
        allm = []
        for rel in groups[name]:
            allm += enumerate_file(root, rel, enums)
        for mu in allm:
            mu["id"] = mutant_id(mu)
            mu["target"] = name
        quota = count // len(names) + (1 if k < count % len(names) else 0)
        rng = random.Random("%s:%s" % (seed, name))
        pick = allm if quota >= len(allm) else rng.sample(allm, quota)
        out += pick
    out.sort(key=lambda mu: (mu["file"], mu["line"], mu["col"], mu["op"], mu["repl"]))
    return out


def apply_text(text, mu):
    """text with the mutant applied, or None when the source no longer has it there."""
    lines = text.split("\n")
    if mu["line"] > len(lines):
        return None
    s = lines[mu["line"] - 1]
    c = mu["col"] - 1
    if s[c:c + len(mu["orig"])] != mu["orig"]:
        return None
    lines[mu["line"] - 1] = s[:c] + mu["repl"] + s[c + len(mu["orig"]):]
    return "\n".join(lines)


# ---------------------------------------------------------------- running


def run(cmd, cwd, timeout, env=None):
    """(exit code or 'timeout', stdout+stderr). A timeout kills the whole process group."""
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, env=env)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return "timeout", out.decode("utf-8", "replace")


def tree_files(root):
    r = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard", "-z"],
                       stdout=subprocess.PIPE, check=True)
    return [f for f in r.stdout.decode().split("\0") if f and os.path.isfile(os.path.join(root, f))]


def sync_tree(root, dst):
    """dst mirrors root's tracked and untracked (not ignored) files; unchanged files keep
    their mtime so the job's build stays incremental."""
    files = tree_files(root)
    keep = set(files)
    for f in files:
        a, b = os.path.join(root, f), os.path.join(dst, f)
        data = open(a, "rb").read()
        if os.path.exists(b) and open(b, "rb").read() == data:
            continue
        os.makedirs(os.path.dirname(b), exist_ok=True)
        with open(b, "wb") as fh:
            fh.write(data)
        shutil.copymode(a, b)
    for d, _, fs in os.walk(dst):
        for f in fs:
            rel = os.path.relpath(os.path.join(d, f), dst)
            if rel not in keep:
                os.remove(os.path.join(d, f))


class Job:
    """One private copy: src/ (the tree) and build/ (-O1, no debug info, asserts on)."""

    def __init__(self, workdir, k, make_jobs, suites):
        self.dir = os.path.join(workdir, "j%d" % k)
        self.src = os.path.join(self.dir, "src")
        self.build = os.path.join(self.dir, "build")
        self.make_jobs = make_jobs
        self.suites = suites
        self.t_scen = self.t_tests = None

    def prepare(self, root):
        os.makedirs(self.src, exist_ok=True)
        sync_tree(root, self.src)
        # Warnings stay warnings here: a mutant that only draws one (a || beside an &&, a
        # variable a dropped call left unused) is still a program to judge. The launcher
        # appends -Wno-error after the project's -Werror on every compile.
        launcher = os.path.join(self.dir, "cc-no-werror")
        if not os.path.exists(launcher):
            with open(launcher, "w") as fh:
                fh.write('#!/bin/sh\nexec "$@" -Wno-error\n')
            os.chmod(launcher, 0o755)
        cache = os.path.join(self.build, "CMakeCache.txt")
        if not os.path.exists(cache) or launcher not in open(cache, encoding="utf-8").read():
            gen = ["-G", "Ninja"] if shutil.which("ninja") and not os.path.exists(cache) else []
            rc, out = run(["cmake", "-S", self.src, "-B", self.build] + gen +
                          ["-DCMAKE_BUILD_TYPE=None", "-DCMAKE_C_FLAGS=-O1", "-DPD_MAN=OFF",
                           "-DCMAKE_C_COMPILER_LAUNCHER=" + launcher],
                          self.dir, 600)
            if rc != 0:
                raise RuntimeError("cmake configure failed in %s:\n%s" % (self.build, out[-3000:]))
        rc, out = self.compile()
        if rc != 0:
            raise RuntimeError("the unmutated tree does not build in %s:\n%s" % (self.build, out[-3000:]))

    def compile(self):
        return run(["cmake", "--build", self.build, "--target", "pdref", "pdref_tests",
                    "-j", str(self.make_jobs)], self.dir, 1800)

    def obj_hash(self, rel):
        hits = glob.glob(os.path.join(self.build, "CMakeFiles", "*.dir", rel + ".o"))
        if len(hits) != 1:
            return None
        return hashlib.sha256(open(hits[0], "rb").read()).hexdigest()

    def stage_scenarios(self, timeout):
        cmd = [os.path.join(self.build, "pdref"), "sim", "run", "scenarios", "--mode", "all",
               "--fail-fast", "--only-unexpected"]
        rc, out = run(cmd, self.src, timeout)
        by = ""
        for pat in (r"UNEXPECTED|NOT EXERCISED", r"Assertion|Sanitizer|runtime error", r"\berror\b"):
            line = next((l for l in out.splitlines() if re.search(pat, l)), "")
            if line:
                by = " ".join(line.split()[:3]) if pat.startswith("UNEXPECTED") else line.strip()[-160:]
                break
        if rc not in (0, "timeout") and not by:
            by = "exit %s" % rc
        return rc, by

    def stage_tests(self, timeout):
        cmd = [os.path.join(self.build, "pdref_tests")] + self.suites
        rc, out = run(cmd, self.build, timeout)
        by, suite, test = "", "", ""
        for line in out.splitlines():  # a test's own output may come between its name and FAILED
            ms = re.match(r"\s*Suite: (\S+)", line)
            if ms:
                suite = ms.group(1)
            mt = re.match(r"\s*Test: (.*?) \.\.\.", line)
            if mt:
                test = mt.group(1).strip()
            if "...FAILED" in line or line.startswith("FAILED"):
                by = "%s: %s" % (suite, test)
                break
        if rc not in (0, "timeout") and not by:
            by = "exit %s" % rc
        return rc, by

    def baseline(self, stages):
        self.t_scen = self.t_tests = 0.0
        t0 = time.monotonic()
        rc, by = self.stage_scenarios(3600) if "scenarios" in stages else (0, "")
        self.t_scen = time.monotonic() - t0
        if rc != 0:
            raise RuntimeError("the unmutated tree fails the scenario library (%s): fix that first" % by)
        t0 = time.monotonic()
        rc, by = self.stage_tests(3600) if "tests" in stages else (0, "")
        self.t_tests = time.monotonic() - t0
        if rc != 0:
            raise RuntimeError("the unmutated tree fails pdref_tests (%s): fix that first" % by)

    def judge(self, mu, timeouts, stages, base_obj):
        """Apply, build, judge, restore. Returns the result fields."""
        path = os.path.join(self.src, mu["file"])
        orig = open(path, encoding="utf-8").read()
        mutated = apply_text(orig, mu)
        if mutated is None:
            return {"status": "stale", "by": "source changed: mutant not found"}
        t0 = time.monotonic()
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(mutated)
            rc, out = self.compile()
            if rc != 0:
                err = next((l for l in out.splitlines() if re.search(r":\d+:\d+: error:", l)),
                           "build failed")
                return {"status": "invalid", "by": err.strip()[:160]}
            if base_obj.get(mu["file"]) and self.obj_hash(mu["file"]) == base_obj[mu["file"]]:
                return {"status": "equivalent-object", "by": "same object code as the original"}
            if "scenarios" in stages:
                rc, by = self.stage_scenarios(timeouts[0])
                if rc == "timeout":
                    return {"status": "timeout", "stage": "scenarios", "by": "timeout %ds" % timeouts[0]}
                if rc != 0:
                    return {"status": "killed-scenarios", "by": by}
            if "tests" in stages:
                rc, by = self.stage_tests(timeouts[1])
                if rc == "timeout":
                    return {"status": "timeout", "stage": "tests", "by": "timeout %ds" % timeouts[1]}
                if rc != 0:
                    return {"status": "killed-tests", "by": by}
            return {"status": "survived", "by": ""}
        finally:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(orig)
            mu["seconds"] = round(time.monotonic() - t0, 1)


# ---------------------------------------------------------------- record and score


def load_record(path):
    if not os.path.exists(path):
        return {"survivors": []}
    try:
        rec = json.load(open(path, encoding="utf-8"))
    except ValueError as e:
        raise ValueError("%s: %s" % (path, e))
    for i, e in enumerate(rec.get("survivors", [])):
        if "id" not in e or e.get("status") not in ("equivalent", "killed", "sanitizer", "open"):
            raise ValueError("%s: survivors[%d]: needs an id and a status of equivalent, "
                             "killed, sanitizer or open" % (path, i))
        if e["status"] == "sanitizer" and not e.get("by"):
            raise ValueError("%s: survivors[%d] (%s): a mutant only the sanitizer build kills "
                             "needs its `by` (the report it gives)" % (path, i, e["id"]))
        if e["status"] == "equivalent" and not e.get("reason"):
            raise ValueError("%s: survivors[%d] (%s): an equivalent mutant needs its reason"
                             % (path, i, e["id"]))
    return rec


def fingerprint(file, op, orig, repl, text):
    return (file, op, orig, repl, text)


def find_in_record(rec, mu):
    """The record entry for a mutant: same id, or (the line moved) same file, operator,
    change and line text."""
    fp = (mu["file"], mu["op"], mu["id"].split(":", 4)[4], mu["text"])
    for e in rec.get("survivors", []):
        if e["id"] == mu["id"]:
            return e
    for e in rec.get("survivors", []):
        f = e["id"].split(":")
        if len(f) >= 5 and (f[0], f[3], e["id"].split(":", 4)[4], e.get("text", "")) == fp:
            return e
    return None


KILLED_SCEN = ("killed-scenarios",)
KILLED_ANY = ("killed-scenarios", "killed-tests", "timeout")


def score(results, rec):
    """Per target set and in total: counts and both scores over the non-equivalent mutants."""
    sets = {}
    for mu in results:
        for key in (mu["target"], "total"):
            s = sets.setdefault(key, {"mutants": 0, "invalid": 0, "equivalent": 0,
                                      "killed_scenarios": 0, "killed_tests": 0, "timeout": 0,
                                      "survived": 0, "stale": 0})
            s["mutants"] += 1
            st = mu["status"]
            if st == "invalid":
                s["invalid"] += 1
            elif st == "stale":
                s["stale"] += 1
            elif st == "equivalent-object" or (st == "survived" and mu.get("record") == "equivalent"):
                s["equivalent"] += 1
            elif st == "killed-scenarios":
                s["killed_scenarios"] += 1
            elif st == "killed-tests" or (st == "survived" and mu.get("record") == "sanitizer"):
                s["killed_tests"] += 1  # the sanitizer build of make test kills it: a test kill
            elif st == "timeout":
                s["timeout"] += 1
                if mu.get("stage") == "scenarios":
                    s["killed_scenarios_timeout"] = s.get("killed_scenarios_timeout", 0) + 1
            else:
                s["survived"] += 1
    for s in sets.values():
        n = s["killed_scenarios"] + s["killed_tests"] + s["timeout"] + s["survived"]
        scen = s["killed_scenarios"] + s.get("killed_scenarios_timeout", 0)
        s["non_equivalent"] = n
        s["score_scenarios"] = round(100.0 * scen / n, 1) if n else None
        s["score_with_tests"] = round(100.0 * (n - s["survived"]) / n, 1) if n else None
    return sets


SELF_FIXTURE = "tests/mutate/fixture.c"


def self_test():
    """Checks the tool on tests/mutate/fixture.c (no build of pdref): what is and is not
    mutated, stable ids, a seeded sample, apply and restore, each mutant compiles or is
    reported, and the record's matching. Exit 0 or 1 with what failed."""
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    src = os.path.join(ROOT, SELF_FIXTURE)
    text = open(src, encoding="utf-8").read()
    enums = {"FX_A": "FX_B", "FX_B": "FX_C", "FX_C": "FX_A"}
    ms = enumerate_file(ROOT, SELF_FIXTURE, enums)
    for mu in ms:
        mu["id"] = mutant_id(mu)
    lines = text.split("\n")
    for mu in ms:
        s = lines[mu["line"] - 1]
        check("/*" not in s[:mu["col"]] and "//" not in s[:mu["col"]], "mutant in a comment: " + mu["id"])
        check(not s.lstrip().startswith("#"), "mutant on a preprocessor line: " + mu["id"])
        check("assert" not in s and "printf" not in s, "mutant on an assert/logging line: " + mu["id"])
        check('"' not in s[:mu["col"]] or s[:mu["col"]].count('"') % 2 == 0, "mutant in a string: " + mu["id"])
    ops = {mu["op"] for mu in ms}
    check(ops == set(OPERATORS), "operators seen %s, want %s" % (sorted(ops), OPERATORS))
    fx = "tests/mutate/fixture.c:"
    want = {fx + "11:9:rel:<\u2192<=", fx + "11:11:const:0\u21921", fx + "14:10:ret:FX_B\u21920",
            fx + "12:3:call:bump()\u2192(void)0;", fx + "13:20:bool:&&\u2192||",
            fx + "13:23:not:!\u2192\u2205", fx + "14:10:enum:FX_B\u2192FX_C",
            fx + "20:10:ret:s[0] != 'a'\u2192!(s[0] != 'a')"}
    check(not [m for m in ms if m["line"] in (1, 2, 3, 5, 6, 10, 17, 19)],
          "mutants on comment, preprocessor, enum definition, assert, string or printf lines")
    ids = {mu["id"] for mu in ms}
    check(want <= ids, "missing ids: %s" % sorted(want - ids))
    check(len(ids) == len(ms), "ids not unique")
    again = [mutant_id(m) for m in enumerate_file(ROOT, SELF_FIXTURE, enums)]
    check(again == [mu["id"] for mu in ms], "enumeration not stable")
    r1 = random.Random("7:x").sample(sorted(ids), 5)
    r2 = random.Random("7:x").sample(sorted(ids), 5)
    r3 = random.Random("8:x").sample(sorted(ids), 5)
    check(r1 == r2 and r1 != r3, "sampling not deterministic per seed")
    cc = shutil.which("cc") or shutil.which("gcc")
    base = None
    import tempfile
    with tempfile.TemporaryDirectory() as td:
        exe = os.path.join(td, "fx")
        f = os.path.join(td, "fx.c")

        def build_run(t):
            open(f, "w").write(t)
            r = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O0", "-o", exe, f],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if r.returncode:
                return "invalid"
            return subprocess.run([exe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
        base = build_run(text)
        check(base.strip() == "ok 2", "fixture prints %r, want 'ok 2'" % base)
        outcomes = {}
        for mu in ms:
            t = apply_text(text, mu)
            check(t is not None and t != text, "mutant not applied: " + mu["id"])
            if t is None:
                continue
            r = build_run(t)
            outcomes[mu["id"]] = "invalid" if r == "invalid" else ("survived" if r == base else "killed")
        check(outcomes.get(fx + "12:3:call:bump()\u2192(void)0;") == "killed",
              "dropping bump() not killed by the fixture's own check")
        check(list(outcomes.values()).count("killed") >= len(ms) // 2,
              "fewer than half the fixture mutants change its output: %s" % outcomes)
    moved = dict(ms[0])
    moved["line"] += 3
    moved["id"] = mutant_id(moved)
    rec = {"survivors": [{"id": ms[0]["id"], "status": "equivalent", "reason": "x", "text": ms[0]["text"]}]}
    check(find_in_record(rec, moved) is not None, "record entry not found after the line moved")
    other = dict(ms[0], text="something else")
    other["id"] = mutant_id(dict(other, line=other["line"] + 1))
    check(find_in_record(rec, other) is None, "record entry matched a different line")
    check(apply_text(text.replace("  bump();", "  bumq();", 1), [m for m in ms if m["op"] == "call"][0]) is None,
          "a mutant applied to a changed line")
    for f_ in fails:
        print("mutate self-test: FAIL " + f_)
    print("mutate self-test: %d mutants of %s, %s" % (len(ms), SELF_FIXTURE, "ok" if not fails else "%d failed" % len(fails)))
    return 1 if fails else 0


def main(argv):
    ap = argparse.ArgumentParser(
        prog="scripts/mutate.py",
        description="Mutation testing of pdref (docs/mutation.md): seeds sampled one-line bugs "
                    "into the target sets and reports which the scenario library and the CUnit "
                    "suites kill.",
        epilog="exit: 0 run done and every survivor is in the record; 1 a survivor the record "
               "does not know (or one it says a test now kills); 2 bad usage, a bad record, or "
               "the unmutated tree fails its own checks")
    ap.add_argument("--targets", default=DEFAULT_TARGETS,
                    help="comma-separated target sets: %s (default %s)" % (",".join(TARGETS), DEFAULT_TARGETS))
    ap.add_argument("--files", action="append", metavar="GLOB",
                    help="mutate these files instead (repeatable; relative to the tree)")
    ap.add_argument("--count", type=int, default=70, metavar="N", help="mutants in the sample (default 70)")
    ap.add_argument("--seed", default="1", metavar="S", help="sampling seed (default 1)")
    ap.add_argument("--only", action="append", metavar="ID",
                    help="judge exactly this mutant (repeatable; an id as printed), e.g. to "
                         "show that a new test kills a recorded survivor")
    ap.add_argument("--jobs", type=int, default=1, metavar="J", help="private trees run at once (default 1)")
    ap.add_argument("--suites", default="", metavar="LIST",
                    help="comma-separated CUnit suites for stage 2, or all (default: every "
                         "suite that starts no process or socket)")
    ap.add_argument("--stages", default="scenarios,tests", help="scenarios,tests (default both)")
    ap.add_argument("--timeout", type=int, default=0, metavar="SEC",
                    help="per-stage timeout (default: 2x the unmutated run's time, at least 60 s)")
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "mutate"), metavar="DIR")
    ap.add_argument("--record", default=os.path.join(ROOT, "tests", "mutants.json"), metavar="FILE",
                    help="the kept survivors (default tests/mutants.json)")
    ap.add_argument("--update-record", action="store_true",
                    help="add each new survivor to the record as open")
    ap.add_argument("--out", metavar="FILE", help="also write the JSON result to FILE")
    ap.add_argument("--list", action="store_true", help="print the sample's ids and stop")
    ap.add_argument("--json", action="store_true", help="JSON on stdout (progress on stderr)")
    ap.add_argument("--self-test", action="store_true", help="check the tool on %s and stop" % SELF_FIXTURE)
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    if a.self_test:
        return self_test()
    sets = [s for s in a.targets.split(",") if s]
    bad = [s for s in sets if s not in TARGETS]
    stages = [s for s in a.stages.split(",") if s]
    if bad or not sets:
        print("mutate: --targets: unknown set %s (known: %s)" % (",".join(bad), ",".join(TARGETS)), file=sys.stderr)
        return 2
    if a.count < 1 or a.jobs < 1 or a.timeout < 0 or not set(stages) <= {"scenarios", "tests"} or not stages:
        print("mutate: --count and --jobs need a positive number, --stages scenarios and/or tests", file=sys.stderr)
        return 2
    try:
        rec = load_record(a.record)
        sample = select_ids(ROOT, a.only) if a.only else select(ROOT, sets, a.files, a.count, a.seed)
    except ValueError as e:
        print("mutate: %s" % e, file=sys.stderr)
        return 2
    log = sys.stderr if a.json else sys.stdout
    if a.list:
        for mu in sample:
            print("%-10s %s" % (mu["target"], mu["id"]))
        return 0
    if a.suites == "all":
        suites = []
    elif a.suites:
        suites = [s for s in a.suites.split(",") if s]
        unknown = [s for s in suites if s not in suite_names(ROOT)]
        if unknown:
            print("mutate: --suites: no suite %s in tests/suites.h" % ",".join(unknown), file=sys.stderr)
            return 2
    else:
        suites = [s for s in suite_names(ROOT) if not SOCKET_SUITES.match(s)]
    cpus = os.cpu_count() or 1
    jobs = [Job(a.workdir, k, max(1, cpus // a.jobs), suites) for k in range(min(a.jobs, len(sample)))]
    t_start = time.monotonic()
    try:
        print("mutate: preparing %d private tree(s) under %s" % (len(jobs), a.workdir), file=log, flush=True)
        for j in jobs:
            j.prepare(ROOT)
        jobs[0].baseline(stages)
    except RuntimeError as e:
        print("mutate: %s" % e, file=sys.stderr)
        return 2
    # per job: an object holds its tree's path (assert's __FILE__), so trees differ
    base_obj = {id(j): {rel: j.obj_hash(rel) for rel in {mu["file"] for mu in sample}} for j in jobs}
    t_scen = a.timeout or max(60, int(2 * jobs[0].t_scen))
    t_tests = a.timeout or max(60, int(2 * jobs[0].t_tests))
    print("mutate: %d mutants (seed %s, %s); unmutated: scenarios %.0f s, tests %.0f s; timeouts %d s, %d s"
          % (len(sample), a.seed, "--only" if a.only else ",".join(sets) if not a.files else " ".join(a.files),
             jobs[0].t_scen, jobs[0].t_tests, t_scen, t_tests), file=log, flush=True)
    # each job takes whole files in turn, so a file's mutants rebuild one object each
    queue = {}
    for mu in sample:
        queue.setdefault(mu["file"], []).append(mu)
    files = sorted(queue)
    lock = threading.Lock()
    done = [0]

    def worker(j):
        while True:
            with lock:
                if not files:
                    return
                f = files.pop(0)
            for mu in queue[f]:
                mu.update(j.judge(mu, (t_scen, t_tests), stages, base_obj[id(j)]))
                with lock:
                    done[0] += 1
                    print("[%d/%d] %-18s %s%s" % (done[0], len(sample), mu["status"], mu["id"],
                                                 ("  " + mu["by"]) if mu.get("by") and mu["status"] != "survived" else ""),
                          file=log, flush=True)

    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
        for fut in [ex.submit(worker, j) for j in jobs]:
            fut.result()
    new, regressed = [], []
    for mu in sample:
        if mu["status"] != "survived":
            continue
        e = find_in_record(rec, mu)
        mu["record"] = e["status"] if e else "new"
        if e:
            mu["record_note"] = e.get("reason") or e.get("by") or ""
        if not e:
            new.append(mu)
        elif e["status"] == "killed":
            regressed.append(mu)
    sc = score(sample, rec)
    doc = {"seed": a.seed, "count": a.count, "targets": sets, "files": a.files or [],
           "stages": stages, "minutes": round((time.monotonic() - t_start) / 60, 1),
           "command": "scripts/mutate.py " + " ".join(argv), "scores": sc, "mutants": sample,
           "new_survivors": [m["id"] for m in new], "regressed": [m["id"] for m in regressed]}
    if a.update_record and new:
        rec.setdefault("survivors", [])
        for mu in new:
            rec["survivors"].append({"id": mu["id"], "text": mu["text"], "status": "open",
                                     "reason": ""})
        with open(a.record, "w", encoding="utf-8") as fh:
            json.dump(rec, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, ensure_ascii=False)
    if a.json:
        json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
        print()
    else:
        print("\nsurvivors:")
        for mu in sample:
            if mu["status"] == "survived":
                print("  %-10s %s  [%s%s]" % (mu["target"], mu["id"], mu["record"],
                                             (": " + mu["record_note"]) if mu.get("record_note") else ""))
        print("\n%-10s %7s %7s %6s %6s %7s %6s %6s %8s %10s %10s" % (
            "set", "mutants", "invalid", "equiv", "k-scen", "k-tests", "t/out", "surv", "non-eq",
            "scen %", "+tests %"))
        for name in sorted(sc, key=lambda k: (k == "total", k)):
            s = sc[name]
            print("%-10s %7d %7d %6d %6d %7d %6d %6d %8d %10s %10s" % (
                name, s["mutants"], s["invalid"], s["equivalent"], s["killed_scenarios"],
                s["killed_tests"], s["timeout"], s["survived"], s["non_equivalent"],
                s["score_scenarios"], s["score_with_tests"]))
        print("mutate: %d new survivor(s), %d recorded as killed but surviving; %.1f min"
              % (len(new), len(regressed), doc["minutes"]))
        for mu in new:
            print("  new: " + mu["id"])
        for mu in regressed:
            print("  regressed: " + mu["id"])
    return 1 if new or regressed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
