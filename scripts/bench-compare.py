#!/usr/bin/env python3
"""Before/after speed in one run on one machine: build a base revision next to this tree and
run the simulator's benchmarks on both, alternating, so both see the same machine load.

    scripts/bench-compare.py --base REV [--rounds K] [--requests N] [--seeds S] [--json]
    make bench-compare BASE=REV

Prints, per figure, the median over the rounds of each build and the change, with the
command that measured it. Figures are per CPU-second (the benchmark's own CPU time for
`sim bench`; the child's user+system time for `sim explore`), so a shared machine moves them
less than wall time. Exit 0, or 2 on bad usage / a build that fails (named on stderr).
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def die(msg):
    print("bench-compare: " + msg, file=sys.stderr)
    sys.exit(2)


def run(cmd, cwd=None, quiet=True):
    return subprocess.run(cmd, cwd=cwd, check=False, text=True,
                          stdout=subprocess.PIPE if quiet else None,
                          stderr=subprocess.PIPE if quiet else None)


def build_base(rev, workdir):
    """A detached worktree of rev under workdir, built with the same Makefile. Returns its
    pdref binary."""
    r = run(["git", "-C", ROOT, "rev-parse", "--verify", rev + "^{commit}"])
    if r.returncode != 0:
        die("--base %s: not a commit of %s" % (rev, ROOT))
    tree = os.path.join(workdir, "base")
    r = run(["git", "-C", ROOT, "worktree", "add", "--detach", tree, rev])
    if r.returncode != 0:
        die("git worktree add %s: %s" % (rev, r.stderr.strip()))
    progress("building base %s in %s (make build)" % (rev, tree))
    r = run(["make", "build"], cwd=tree)
    if r.returncode != 0:
        die("make build of %s failed:\n%s" % (rev, (r.stdout + r.stderr)[-2000:]))
    return tree, os.path.join(tree, "build", "pdref")


def progress(msg):
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + msg)
        sys.stderr.flush()


def cpu_of(cmd):
    """Run cmd; its stdout and the user+system CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode not in (0, 1):
        die("%s exited %d:\n%s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return r.stdout, cpu


def measure(binary, args, outdir):
    """One round of every figure for one build: {figure: value}."""
    out = {}
    cmd = [binary, "sim", "bench", "--requests", str(args.requests), "--json"]
    text, _ = cpu_of(cmd)
    d = json.loads(text)
    out["sim bench: requests per CPU-s"] = d["requests"] / d["cpu_s"]
    out["sim bench: events per CPU-s"] = d["events"] / d["cpu_s"]
    out["sim bench: peak RSS MiB"] = d["peak_rss_kib"] / 1024.0
    ex = os.path.join(outdir, "explore")
    shutil.rmtree(ex, ignore_errors=True)
    cmd = [binary, "sim", "explore", "--mode", "reference", "--seeds", str(args.seeds),
           "--jobs", "1", "--out", ex, "--json"]
    text, cpu = cpu_of(cmd)
    d = json.loads(text)
    out["sim explore: seeds per CPU-s"] = d["explored"] / cpu if cpu > 0 else 0.0
    return out


COMMANDS = {
    "sim bench: requests per CPU-s": "pdref sim bench --requests {requests}",
    "sim bench: events per CPU-s": "pdref sim bench --requests {requests}",
    "sim bench: peak RSS MiB": "pdref sim bench --requests {requests}",
    "sim explore: seeds per CPU-s": "pdref sim explore --mode reference --seeds {seeds} --jobs 1",
}


def main():
    ap = argparse.ArgumentParser(
        prog="bench-compare.py",
        description="Before/after speed of the simulator in one run: build --base next to "
                    "this tree and alternate the benchmarks between the two builds.")
    ap.add_argument("--base", required=True, help="the revision to compare against (git rev)")
    ap.add_argument("--head", default=os.path.join(ROOT, "build", "pdref"),
                    help="the pdref binary to compare (default: this tree's build/pdref, "
                         "built first)")
    ap.add_argument("--rounds", type=int, default=3, help="alternations (default 3)")
    ap.add_argument("--requests", type=int, default=200000,
                    help="sim bench requests per run (default 200000)")
    ap.add_argument("--seeds", type=int, default=3000,
                    help="sim explore seeds per run (default 3000)")
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = ap.parse_args()
    if args.rounds < 1 or args.requests < 1 or args.seeds < 1:
        die("--rounds, --requests and --seeds must be at least 1")
    if args.head == os.path.join(ROOT, "build", "pdref"):
        r = run(["make", "build"], cwd=ROOT)
        if r.returncode != 0:
            die("make build of this tree failed:\n" + (r.stdout + r.stderr)[-2000:])
    if not os.access(args.head, os.X_OK):
        die("--head %s: not an executable" % args.head)
    workdir = tempfile.mkdtemp(prefix="pdref-bench-compare-")
    tree = None
    try:
        tree, base = build_base(args.base, workdir)
        rows = {"base": [], "head": []}
        for k in range(args.rounds):
            order = [("base", base), ("head", args.head)]
            if k % 2:
                order.reverse()  # neither build always runs first
            for name, binary in order:
                progress("round %d/%d: %s" % (k + 1, args.rounds, name))
                rows[name].append(measure(binary, args, workdir))
        progress("")
    finally:
        if tree:
            run(["git", "-C", ROOT, "worktree", "remove", "--force", tree])
        shutil.rmtree(workdir, ignore_errors=True)
    figures = []
    for fig in rows["base"][0]:
        b = statistics.median(r[fig] for r in rows["base"])
        h = statistics.median(r[fig] for r in rows["head"])
        figures.append({"figure": fig, "base": b, "head": h,
                        "change": (h / b - 1.0) if b else None,
                        "base_runs": [r[fig] for r in rows["base"]],
                        "head_runs": [r[fig] for r in rows["head"]],
                        "command": COMMANDS[fig].format(requests=args.requests,
                                                        seeds=args.seeds)})
    if args.json:
        json.dump({"schema": "pdref-bench-compare/1", "base": args.base, "head": args.head,
                   "rounds": args.rounds, "figures": figures}, sys.stdout, indent=1)
        print()
        return 0
    print("before/after, one run on this machine: base %s vs %s, median of %d alternating "
          "rounds" % (args.base, args.head, args.rounds))
    print("%-32s %14s %14s %8s  %s" % ("figure", "base", "head", "change", "command"))
    for f in figures:
        ch = "-" if f["change"] is None else "%+.1f%%" % (100 * f["change"])
        print("%-32s %14.1f %14.1f %8s  %s" % (f["figure"], f["base"], f["head"], ch,
                                              f["command"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
