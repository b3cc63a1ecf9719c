#!/usr/bin/env bash
# Runs the Min-Max experiments of docs/minmax.md: nearly sorted ingest of ENTRIES keys at two
# disorder windows, then the paper's range queries Q1-Q5, for minmax, leveled and tiered; and
# minmax again without the interval index.
#
#   scripts/minmax-bench.sh [OUT] [ENTRIES]
#
# OUT (default out/minmax) gets one report directory per run; ENTRIES defaults to 10000000.
# The block cache is 64 KiB, so a query's data blocks read (cache misses) are the blocks it
# touches. The databases go to $BENCH_DIR when set, else the system's temporary directory.
# scripts/minmax-table.py OUT/* prints the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/minmax}
entries=${2:-10000000}
strata=${STRATA:-./target/release/strata}
mkdir -p "$out"
common=(--workload minmax-queries --entries "$entries" --peers none --write-buffer-size 16MiB
        --target-file-size 8MiB --max-bytes-for-level-base 32MiB --block-cache 64KiB --quiet)
if [ -n "${BENCH_DIR:-}" ]; then
  common+=(--dir "$BENCH_DIR")
fi
for disorder in 1000 100000; do
  "$strata" bench "${common[@]}" --disorder "$disorder" --policies minmax,leveled,tiered \
    --report "$out/disorder-$disorder"
done
"$strata" bench "${common[@]}" --disorder 1000 --policies minmax --no-interval-index \
  --report "$out/disorder-1000-no-index"
