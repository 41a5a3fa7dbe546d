#!/usr/bin/env bash
# Run every libFuzzer target BUILD_DIR/fuzz_* for SECONDS each, on a scratch copy of its
# checked-in corpus (fuzz/corpus/<name>/, so the corpus does not grow), with fuzz/<name>.dict
# when present. One line per target; a crash prints its reproducer and the command to rerun
# it. Exit 0 all OK, 1 some target failed, 2 bad usage.
set -euo pipefail

usage() {
  echo "usage: scripts/fuzz.sh BUILD_DIR SECONDS_PER_TARGET" >&2
  echo "  runs each BUILD_DIR/fuzz_* for SECONDS (positive integer) on a copy of fuzz/corpus/<name>/" >&2
}

if [ "$#" -eq 1 ] && { [ "$1" = "--help" ] || [ "$1" = "-h" ]; }; then
  usage
  exit 0
fi
if [ "$#" -ne 2 ] || ! [[ "$2" =~ ^[1-9][0-9]*$ ]]; then
  usage
  exit 2
fi
if [ ! -d "$1" ]; then
  echo "fuzz: build dir '$1' does not exist" >&2
  exit 2
fi

build=$(cd "$1" && pwd)
secs=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
crashes="$root/fuzz/crashes"

# Value of "stat::<key>: <n>" from a libFuzzer log, empty when absent.
stat_of() {
  sed -n "s/^stat::$1: *\\([0-9][0-9]*\\).*/\\1/p" "$2" | tail -n 1
}

# Path libFuzzer wrote the failing input to ("Test unit written to <path>"), empty if none.
artifact_of() {
  sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$1" | tail -n 1
}

targets=()
for bin in "$build"/fuzz_*; do
  [ -f "$bin" ] && [ -x "$bin" ] && targets+=("$bin")
done
if [ "${#targets[@]}" -eq 0 ]; then
  echo "fuzz: no fuzz_* targets in $build; nothing to run"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/pdref-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$crashes"

# Runs one target; prints its line and returns 1 on a crash, leak, timeout or other failure.
run_target() {
  local bin=$1 name corpus log rc=0 execs rate art
  name=$(basename "$bin")
  name=${name#fuzz_}
  corpus="$work/corpus-$name"
  log="$work/$name.log"
  mkdir -p "$corpus"
  if [ -d "$root/fuzz/corpus/$name" ]; then
    cp -R "$root/fuzz/corpus/$name/." "$corpus/"
  else
    echo "fuzz $name: note: no fuzz/corpus/$name/, starting from an empty corpus"
  fi
  local args=(-max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$crashes/$name-")
  [ -f "$root/fuzz/$name.dict" ] && args+=(-dict="$root/fuzz/$name.dict")

  local t0_ms t1_ms
  t0_ms=$(date +%s%3N)
  timeout -k 10 $((secs + 60)) "$bin" "${args[@]}" "$corpus" >"$log" 2>&1 || rc=$?
  t1_ms=$(date +%s%3N)

  execs=$(stat_of number_of_executed_units "$log")
  rate=$(stat_of average_exec_per_sec "$log")
  execs=${execs:-0}
  # libFuzzer's whole-second average reads 0 on a crash within the first second.
  if [ -z "$rate" ] || [ "$rate" -eq 0 ]; then
    rate=$((execs * 1000 / (t1_ms - t0_ms > 0 ? t1_ms - t0_ms : 1)))
  fi
  if [ "$rc" -eq 0 ]; then
    echo "fuzz $name: $execs execs, $rate exec/s, OK"
    return 0
  fi

  local why="exit $rc"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    why="killed by timeout after $((secs + 60)) s"
  fi
  echo "fuzz $name: $execs execs, $rate exec/s, FAILED ($why)"
  cp "$log" "$crashes/$name.log"
  grep -m 1 -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | sed 's/^/  /' || true
  echo "  log: $crashes/$name.log"
  art=$(artifact_of "$log")
  if [ -n "$art" ]; then
    echo "  reproducer: $art"
    echo "  rerun: $bin $art"
  else
    echo "  no reproducer written; rerun: $bin ${args[*]} <corpus copy of fuzz/corpus/$name>"
  fi
  return 1
}

failed=0
for bin in "${targets[@]}"; do
  run_target "$bin" || failed=1
done
exit "$failed"
