#!/usr/bin/env bash
# The scale-out recipes of docs/explore.md, run as far as this machine allows, each against one
# process over the same seed range (the same seeds explored, the same violating seeds, the same
# count and first seed per invariant after `pdref sim explore merge`):
#   - deploy/explore-parallel.sh: GNU parallel for real, 2 shards, NODES holding `:` (this
#     machine; each job finds its shard in PARALLEL_SEQ);
#   - deploy/explore-slurm.sh: the array script, run once per task with the variables Slurm
#     sets for `--array=0-1`;
#   - deploy/explore-indexed-job.yaml: its container's args line, run once per pod with the
#     variables an Indexed Job of 2 completions sets.
#   - `pdref sim explore --jobs N` (N = 2, 3): its merged summary as above, and its --out
#     directory byte for byte the single process's (the same cases, each the first violating
#     seed's of its invariant, as the summary names them).
# Then the merge's own errors: one shard missing is a gap, a shard twice an overlap (exit 2).
# Usage: tests/explore_parallel_test.sh [PDREF] (default build/pdref).
set -euo pipefail
cd "$(dirname "$0")/.."
pdref=$(realpath "${1:-build/pdref}")
command -v parallel >/dev/null || { echo "explore_parallel_test: GNU parallel is missing (scripts/deps.sh installs it)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mode=pr1150 seeds=400 start=1001
fail() { echo "explore_parallel_test: $*"; exit 1; }
rc=0
"$pdref" sim explore --mode $mode --seed-start $start --seeds $seeds --out "$tmp/one" --jobs 1 --json \
  >"$tmp/one.json" || rc=$?
[ "$rc" -le 1 ] || fail "the single-process run exited $rc"
export PATH="$(dirname "$pdref"):$PATH" MODE=$mode SEED_START=$start SEEDS=$seeds

compare() { # compare <recipe> <dir of results>
  local rc=0
  "$pdref" sim explore merge --json "$2" >"$tmp/merged.json" || rc=$?
  [ "$rc" -le 1 ] || fail "$1: merge exited $rc"
  python3 - "$tmp/one.json" "$tmp/merged.json" "$1" <<'PY'
import json, sys
one, merged = (json.load(open(p)) for p in sys.argv[1:3])
def inv(d):
    return {k: (v["seeds"], v["first_seed"]) for k, v in d["invariants"].items()}
def seeds(d):
    return sorted(int(x["seed"]) for x in d["violating"])
checks = [
    ("coverage", merged["coverage"], "ok"),
    ("results", merged["results"], 2),
    ("seed range", (merged["seed_start"], merged["seed_end"]),
     (one["seed_start"], one["seed_start"] + one["seeds"])),
    ("explored", merged["explored"], one["explored"]),
    ("violating seeds", merged["violating_seeds"], one["violating_seeds"]),
    ("per invariant", inv(merged), inv(one)),
    ("violating list", seeds(merged), seeds(one)),
]
bad = [f"{what}: merged {a!r}, single {b!r}" for what, a, b in checks if a != b]
if one["violating_seeds"] == 0:
    bad.append("the range found no violation: the comparison would be vacuous")
for b in bad:
    print(f"explore_parallel_test: {sys.argv[3]}: {b}")
sys.exit(1 if bad else 0)
PY
}

# GNU parallel, for real
echo ":" >"$tmp/nodes"
NODES="$tmp/nodes" SHARDS=2 OUT="$tmp/par" PDREF="$pdref" deploy/explore-parallel.sh 2>"$tmp/par.err" ||
  fail "deploy/explore-parallel.sh failed: $(tail -5 "$tmp/par.err")"
compare "GNU parallel" "$tmp/par"

# Slurm: the array script once per task of --array=0-1
for id in 0 1; do
  SLURM_ARRAY_TASK_ID=$id SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=1 SLURM_ARRAY_TASK_STEP=1 \
    SLURM_ARRAY_TASK_COUNT=2 OUT="$tmp/slurm" bash deploy/explore-slurm.sh >/dev/null ||
    fail "deploy/explore-slurm.sh failed as array task $id"
done
compare "Slurm array" "$tmp/slurm"

# Kubernetes: the container's args line once per completion index of a 2-completion Job
args=$(sed -n '/^ *args:/{n;s/^ *- //;p;q}' deploy/explore-indexed-job.yaml)
case "$args" in *--shard-from-env*) ;; *) fail "no args line in deploy/explore-indexed-job.yaml" ;; esac
for i in 0 1; do
  JOB_COMPLETION_INDEX=$i PDREF_SHARDS=2 OUT="$tmp/k8s" sh -c "$args" >/dev/null ||
    fail "the Indexed Job's args line failed for index $i: $args"
done
compare "Kubernetes Indexed Job" "$tmp/k8s"
cp -r "$tmp/k8s" "$tmp/shards"

# --jobs N on this machine: the same summary and the same saved cases for any N
for n in 2 3; do
  rc=0
  "$pdref" sim explore --mode $mode --seed-start $start --seeds $seeds --out "$tmp/jobs$n" \
    --jobs $n --json >"$tmp/merged.json" || rc=$?
  [ "$rc" -eq 1 ] || fail "--jobs $n exited $rc (want 1: the range has violations)"
  python3 - "$tmp/one.json" "$tmp/merged.json" "--jobs $n" "$tmp/one" "$tmp/jobs$n" <<'PY'
import json, os, sys
one, merged = (json.load(open(p)) for p in sys.argv[1:3])
what, d1, dn = sys.argv[3:6]
bad = []
inv = lambda d: {k: (v["seeds"], v["first_seed"]) for k, v in d["invariants"].items()}
if merged["explored"] != one["explored"]: bad.append("explored")
if inv(merged) != inv(one): bad.append(f"per invariant: {inv(merged)} vs {inv(one)}")
# --jobs prints what one process prints (tests/test_explore_jobs.c: byte for byte)
strip = lambda d, dr: json.dumps({k: v for k, v in d.items() if k not in ("timing", "metrics")}).replace(dr, "OUT")
if strip(merged, dn) != strip(one, d1): bad.append("the document differs from one process's")
f1, fn = sorted(os.listdir(d1)), sorted(os.listdir(dn))
if f1 != fn: bad.append(f"saved cases differ: {f1} vs {fn}")
for f in set(f1) & set(fn):
    if open(os.path.join(d1, f), "rb").read() != open(os.path.join(dn, f), "rb").read():
        bad.append(f"{f}: content differs")
if not f1: bad.append("no case saved: the comparison would be vacuous")
for b in bad: print(f"explore_parallel_test: {what}: {b}")
sys.exit(1 if bad else 0)
PY
done

rc=0
"$pdref" sim explore merge "$tmp/shards/shard-0-of-2.json" >/dev/null 2>"$tmp/gap.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "gap: seed 1001 " "$tmp/gap.err" || fail "one shard alone: want exit 2 and a gap at seed 1001, got $rc: $(cat "$tmp/gap.err")"
cp "$tmp/shards/shard-1-of-2.json" "$tmp/again.json"
rc=0
"$pdref" sim explore merge "$tmp/shards" "$tmp/again.json" >/dev/null 2>"$tmp/over.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "overlap: seed 1001 was explored by 2 shards" "$tmp/over.err" ||
  fail "a shard twice: want exit 2 and an overlap at seed 1001, got $rc: $(cat "$tmp/over.err")"
echo "explore_parallel_test: ok (GNU parallel, Slurm array and Indexed Job recipes, 2 shards each; --jobs 2 and 3; merged = one process over seeds $start..$((start + seeds - 1)))"
