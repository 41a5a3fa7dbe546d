#!/bin/bash
# pdref sim explore as a Slurm job array: `sbatch deploy/explore-slurm.sh`; each array task
# explores its shard, read by --shard-from-env from SLURM_ARRAY_TASK_ID, _MIN, _STEP and
# _COUNT, and writes $OUT/shard-<i>-of-<n>.json (OUT on a shared filesystem). Afterwards:
#   pdref sim explore merge "$OUT"          (docs/explore.md "Scale-out")
# Exit 1 from explore means violations were found: a result, so the task succeeds.
# tests/explore_parallel_test.sh runs this script with the variables Slurm would set.
#SBATCH --job-name=pdref-explore
#SBATCH --array=0-7
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --output=pdref-explore-%A_%a.log
MODE=${MODE:-pr1150}
SEED_START=${SEED_START:-1}
SEEDS=${SEEDS:-100000000}
OUT=${OUT:-explore-out}
pdref sim explore --mode "$MODE" --seed-start "$SEED_START" --seeds "$SEEDS" --shard-from-env \
  --out "$OUT"
rc=$?
[ "$rc" -le 1 ]
