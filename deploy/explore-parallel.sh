#!/bin/bash
# pdref sim explore over machines with GNU parallel: SHARDS jobs spread over the logins in
# NODES (a --sshloginfile: one `[ncpus/]user@host` per line; `:` is this machine); job {#}
# explores shard {#}-1 (PARALLEL_SEQ, read by --shard-from-env; not the job slot {%}, which
# repeats). OUT must be a directory every node can write and this one can read (a shared
# filesystem); the results are also brought back with --return. Afterwards:
#   pdref sim explore merge "$OUT"          (docs/explore.md "Scale-out")
# Usage: NODES=nodes.txt SHARDS=64 MODE=pr1150 SEEDS=100000000 deploy/explore-parallel.sh
# tests/explore_parallel_test.sh runs it with NODES holding `:` (this machine, 2 shards).
set -euo pipefail
NODES=${NODES:?a --sshloginfile}
SHARDS=${SHARDS:-64}
MODE=${MODE:-pr1150}
SEED_START=${SEED_START:-1}
SEEDS=${SEEDS:-100000000}
OUT=${OUT:-explore-out}
PDREF=${PDREF:-pdref}
mkdir -p "$OUT"
seq "$SHARDS" | parallel --will-cite --sshloginfile "$NODES" --return "$OUT/r{#}.json" \
  "mkdir -p $OUT && $PDREF sim explore --mode $MODE --seed-start $SEED_START --seeds $SEEDS \
   --shard-from-env --shards $SHARDS --out $OUT --result $OUT/r{#}.json >/dev/null; test \$? -le 1"
