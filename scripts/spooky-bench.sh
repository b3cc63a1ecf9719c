#!/bin/sh
# The engine headline of docs/spooky.md: `strata bench` on spooky-uniform and spooky-zipf with
# 5 GiB of user data loaded (46,281,965 entries of 16-byte keys and 100-byte values), then half as
# many updates; T = 5 and a 16 MiB buffer give the full-merge policies L = 4 levels. Three
# background jobs (one flush thread, two compaction threads), so Spooky's pieces run beside merges
# out of L0. Reports go to target/spooky-bench/<workload>/ (or .../<workload>/round<N>/ with
# several rounds). About 70 minutes on 2 cores in the page cache; run it with nothing else on the
# machine (throughput and p99 are measured).
#
# Usage: sh scripts/spooky-bench.sh [directory for the databases, default /tmp] [workload ...]
#   Environment, all optional:
#   ENTRIES [46281965]    entries loaded; the updates are half as many
#   POLICIES              the policies compared (default below)
#   ROUNDS [1]            runs of every cell, interleaved
#   FIRST_ROUND [1]       number of the first round (to add rounds to earlier ones)
#   MEMORY_LIMIT []       --memory-limit of every run (out of cache; needs root)
#   DIRECT_IO [0]         1 reads and writes tables with direct I/O
#   STRATA                a prebuilt binary instead of building ./target/release/strata
set -eu
DIR=${1:-/tmp}
[ $# -gt 0 ] && shift
WORKLOADS=${*:-spooky-uniform spooky-zipf}
ENTRIES=${ENTRIES:-46281965}
UPDATES=$((ENTRIES / 2))
POLICIES=${POLICIES:-spooky,leveled,leveled-full:dynamic_level_bytes=true,spooky-lazy,spooky-lazy-partial,spooky-tiered}
ROUNDS=${ROUNDS:-1}
REGIME=""
[ -n "${MEMORY_LIMIT:-}" ] && REGIME="$REGIME --memory-limit $MEMORY_LIMIT"
[ "${DIRECT_IO:-0}" = 1 ] && REGIME="$REGIME --direct-io"
if [ -z "${STRATA:-}" ]; then
  cargo build --release
  STRATA=./target/release/strata
fi
FIRST_ROUND=${FIRST_ROUND:-1}
ROUND=$FIRST_ROUND
while [ "$ROUND" -lt $((FIRST_ROUND + ROUNDS)) ]; do
  for WORKLOAD in $WORKLOADS; do
    REPORT="target/spooky-bench/$WORKLOAD"
    [ "$ROUNDS" -gt 1 ] || [ "$FIRST_ROUND" -gt 1 ] && REPORT="$REPORT/round$ROUND"
    # Zipfian updates (θ = 1) move their hot set five times, as the paper's 10 hours with a move
    # every 2 hours.
    # shellcheck disable=SC2086 # REGIME is a list of flags
    "$STRATA" bench --workload "$WORKLOAD" --policies "$POLICIES" --peers none \
      --entries "$ENTRIES" --ops "$UPDATES" --hot-period $((UPDATES / 5)) \
      --write-buffer-size 16MiB --target-file-size 16MiB --size-ratio 5 --jobs 3 $REGIME \
      --dir "$DIR" --report "$REPORT"
  done
  ROUND=$((ROUND + 1))
done
