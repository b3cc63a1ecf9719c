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
#
# The out-of-cache regime (the paper loaded onto a disk), all optional:
#   ROUNDS [1]              runs of every cell, each round in OUT/round<N>/ when more than one
#   POLICIES                the policies compared [minmax,leveled,tiered]
#   MEMORY_LIMIT []         --memory-limit of every run (needs root)
#   DIRECT_IO [0]           1 reads and writes tables with direct I/O
#   DEVICE_WRITE_LIMIT []   --device-write-limit in MiB/s: the device writes at a disk's rate
#   NO_INDEX [1]            0 leaves out the run without the interval index
#   DISABLE_WAL [0]         1 loads without the WAL (--disable-wal), as the paper's bulk load
#   SETTLE [0]              1 counts each phase's flushes and compactions in it (--settle)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/minmax}
entries=${2:-10000000}
strata=${STRATA:-./target/release/strata}
rounds=${ROUNDS:-1}
policies=${POLICIES:-minmax,leveled,tiered}
common=(--workload minmax-queries --entries "$entries" --peers none --write-buffer-size 16MiB
        --target-file-size 8MiB --max-bytes-for-level-base 32MiB --block-cache 64KiB --quiet)
if [ -n "${BENCH_DIR:-}" ]; then
  common+=(--dir "$BENCH_DIR")
fi
[ -n "${MEMORY_LIMIT:-}" ] && common+=(--memory-limit "$MEMORY_LIMIT")
[ "${DIRECT_IO:-0}" = 1 ] && common+=(--direct-io)
[ -n "${DEVICE_WRITE_LIMIT:-}" ] && common+=(--device-write-limit "$DEVICE_WRITE_LIMIT")
[ "${DISABLE_WAL:-0}" = 1 ] && common+=(--disable-wal)
[ "${SETTLE:-0}" = 1 ] && common+=(--settle)
for round in $(seq 1 "$rounds"); do
  dir=$out
  [ "$rounds" -gt 1 ] && dir="$out/round$round"
  mkdir -p "$dir"
  for disorder in 1000 100000; do
    "$strata" bench "${common[@]}" --disorder "$disorder" --policies "$policies" \
      --report "$dir/disorder-$disorder"
  done
  if [ "${NO_INDEX:-1}" = 1 ]; then
    "$strata" bench "${common[@]}" --disorder 1000 --policies minmax --no-interval-index \
      --report "$dir/disorder-1000-no-index"
  fi
done
