#!/usr/bin/env bash
# Before/after at one size, interleaved: `bench/compare_trees.sh BEFORE_TREE [SIZE] [ROUNDS]`.
# Seeds a full snapshot with each tree's own `python -m bench.stage seed` (a source fingerprint
# names the compiled SQL, so a snapshot seeded by one tree is all "changed" to the other), then
# alternates `bench.stage diff` (the nightly plan: map with fingerprints + diff) and
# `bench.stage map` (a first run's extract + map + validate) between BEFORE_TREE (e.g. a
# `git worktree add /tmp/before <rev>`) and this tree. The export is `make bench-1m`'s (or any
# size `python -m bench` generated). One JSON line per stage, with the load average.
set -euo pipefail
AFTER=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=$(cd "${1:?usage: bench/compare_trees.sh BEFORE_TREE [SIZE] [ROUNDS]}" && pwd)
SIZE=${2:-1000000}
ROUNDS=${3:-3}
PY="$AFTER/.venv/bin/python"
MAPPING="${BENCH_DATA:-$AFTER/bench/data}/hotel-$SIZE/base/mapping.yaml"
WORK=$(mktemp -d -t pms-compare-XXXX)
trap 'rm -rf "$WORK"' EXIT

stage() {  # tree name json
  (cd "$1" && PYTHONPATH="$1" "$PY" -m bench.stage "$2" "$3" | tail -1)
}
for side in before after; do
  tree=$([ "$side" = before ] && echo "$BEFORE" || echo "$AFTER")
  stage "$tree" seed "{\"mapping\": \"$MAPPING\", \"snapshot\": \"$WORK/$side-full.duckdb\"}" >/dev/null
done
for round in $(seq 1 "$ROUNDS"); do
  for side in before after; do
    tree=$([ "$side" = before ] && echo "$BEFORE" || echo "$AFTER")
    cp "$WORK/$side-full.duckdb" "$WORK/run.duckdb"
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "$round $side diff load=$load $(stage "$tree" diff "{\"mapping\": \"$MAPPING\", \"snapshot\": \"$WORK/run.duckdb\"}")"
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "$round $side map load=$load $(stage "$tree" map "{\"mapping\": \"$MAPPING\"}")"
  done
done
