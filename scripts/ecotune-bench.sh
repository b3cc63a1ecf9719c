#!/bin/sh
# The engine comparison of docs/ecotune.md: `strata bench --workload ecotune` at long-scan
# shares R after a load of ENTRIES entries (16-byte keys, 100-byte values): a writer updating
# random keys at WRITE_RATE MiB/s beside an open-loop query stream that outruns every policy
# (queries queue; THREADS query threads). 4 MiB buffers and tables.
# Reports go to target/ecotune-bench/r<R>/round<N>/; scripts/ecotune-table.py prints the table.
# Run it with nothing else on the machine.
#
# Usage: sh scripts/ecotune-bench.sh [directory for the databases] [R ...]
#   R defaults to 0 0.3 1. Environment, all optional:
#   ENTRIES [2000000], OPS [2000000]   the load and the queries of the run phase
#   POLICIES [ecotune,leveled]         the policies compared
#   WRITE_RATE [16], THREADS [2]       the writer's MiB/s and the query threads
#   BLOCK_CACHE [32MiB]                the block cache (the paper: 8 MB, with direct I/O)
#   ROUNDS [1]                         runs of every cell, interleaved (round 1 of every R first)
#   FIRST_ROUND [1]                    number of the first round (to add rounds to earlier ones)
#   MEMORY_LIMIT []                    --memory-limit of every run (out of cache; needs root)
#   DIRECT_IO [0]                      1 reads and writes tables with direct I/O
#   DROP_CACHES [0]                    1 drops the page cache before each measured phase
#   STRATA                             a prebuilt binary instead of ./target/release/strata
set -eu
DIR=${1:-/tmp}
[ $# -gt 0 ] && shift
SHARES=${*:-0 0.3 1}
ENTRIES=${ENTRIES:-2000000}
OPS=${OPS:-2000000}
POLICIES=${POLICIES:-ecotune,leveled}
WRITE_RATE=${WRITE_RATE:-16}
THREADS=${THREADS:-2}
BLOCK_CACHE=${BLOCK_CACHE:-32MiB}
ROUNDS=${ROUNDS:-1}
REGIME=""
[ -n "${MEMORY_LIMIT:-}" ] && REGIME="$REGIME --memory-limit $MEMORY_LIMIT"
[ "${DIRECT_IO:-0}" = 1 ] && REGIME="$REGIME --direct-io"
[ "${DROP_CACHES:-0}" = 1 ] && REGIME="$REGIME --drop-caches"
if [ -z "${STRATA:-}" ]; then
  cargo build --release
  STRATA=./target/release/strata
fi
FIRST_ROUND=${FIRST_ROUND:-1}
ROUND=$FIRST_ROUND
while [ "$ROUND" -lt $((FIRST_ROUND + ROUNDS)) ]; do
  for R in $SHARES; do
    # shellcheck disable=SC2086 # REGIME is a list of flags
    "$STRATA" bench --workload ecotune --entries "$ENTRIES" --ops "$OPS" --policies "$POLICIES" \
      --peers none --baseline leveled --write-buffer-size 4MiB --target-file-size 4MiB \
      --block-cache "$BLOCK_CACHE" --write-rate "$WRITE_RATE" --query-rate 1000000 \
      --long-scan-share "$R" --threads "$THREADS" --quiet $REGIME --dir "$DIR" \
      --report "target/ecotune-bench/r$R/round$ROUND"
  done
  ROUND=$((ROUND + 1))
done
