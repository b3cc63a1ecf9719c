#!/bin/sh
# The engine comparison of docs/vertiorizon.md (the paper's Fig. 7): `strata bench` on the four
# Vertiorizon workloads after a bulk load of ENTRIES entries of 128-byte keys and 896-byte values
# (1 KiB each), then OPS uniform operations; T = 6, 2 MiB buffers and tables, 5 Bloom bits per key,
# a 32 MiB block cache, RocksDB's default level base (256 MiB), two background jobs. Reports go to
# target/vertiorizon-bench/<workload>/ (one round) or target/vertiorizon-bench/<workload>/round<N>/.
# Run it with nothing else on the machine (throughput and the worst window are measured).
#
# Usage: sh scripts/vertiorizon-bench.sh [directory for the databases] [workload ...]
#   ENTRIES and OPS override the sizes (defaults below); the workloads default to all four.
#   ROUNDS [1]          runs of every cell; with more than one, each round gets its own report
#   FIRST_ROUND [1]     the round to start at (to resume an interrupted series)
#   MEMORY_LIMIT []     --memory-limit of every run (the paper's regime: out of cache; needs root)
#   DIRECT_IO [0]       1 turns on direct reads and direct flush/compaction I/O (the paper's setup)
#   DROP_CACHES [0]     1 drops the page cache before each measured phase (--drop-caches)
#   POLICIES            the policies compared (default: the eight designs below)
#   ORDER [rotate]      rotate: round N runs the policies starting at the N-th, so that no policy
#                       always runs first (after the load of a fresh device) or last; fixed: the
#                       listed order every round
#   PEERS [none]        e.g. rocksdb (needs a binary built with --features peers), run with the
#                       same options
#   STRATA              a prebuilt binary to use instead of building ./target/release/strata
set -eu
DIR=${1:-/tmp}
[ $# -gt 0 ] && shift
WORKLOADS=${*:-balanced write-heavy read-heavy range}
ENTRIES=${ENTRIES:-1000000}
OPS=${OPS:-1000000}
ROUNDS=${ROUNDS:-1}
PEERS=${PEERS:-none}
# horizontal-tiered builds its schedule for the data it will hold.
DATA=$((ENTRIES * 1024))
DESIGNS="leveled,leveled-full,tiered,horizontal-leveled,horizontal-tiered:expected_data_size=$DATA"
DESIGNS="$DESIGNS,vertiorizon:horizontal_merge=leveling:horizontal_levels=2"
DESIGNS="$DESIGNS,vertiorizon:horizontal_merge=tiering:horizontal_levels=2,vertiorizon"
POLICIES=${POLICIES:-$DESIGNS}
# Ratios are against `leveled` when it runs, else against the first run (the bench's default).
BASELINE=""
case ",$POLICIES," in *,leveled,*) BASELINE="--baseline leveled" ;; esac
REGIME=""
[ -n "${MEMORY_LIMIT:-}" ] && REGIME="$REGIME --memory-limit $MEMORY_LIMIT"
[ "${DIRECT_IO:-0}" = 1 ] && REGIME="$REGIME --direct-io"
[ "${DROP_CACHES:-0}" = 1 ] && REGIME="$REGIME --drop-caches"
if [ -z "${STRATA:-}" ]; then
  if [ "$PEERS" = none ]; then cargo build --release; else cargo build --release --features peers; fi
  STRATA=./target/release/strata
fi
# The list rotated left by $2 places (specifications hold no commas: options use ':').
rotate() {
  LIST=$1
  I=0
  while [ "$I" -lt "$2" ] && [ "${LIST#*,}" != "$LIST" ]; do
    LIST="${LIST#*,},${LIST%%,*}"
    I=$((I + 1))
  done
  echo "$LIST"
}
ROUND=${FIRST_ROUND:-1}
while [ "$ROUND" -le "$ROUNDS" ]; do
  RUN_POLICIES=$POLICIES
  [ "${ORDER:-rotate}" = rotate ] && RUN_POLICIES=$(rotate "$POLICIES" $((ROUND - 1)))
  for W in $WORKLOADS; do
    REPORT="target/vertiorizon-bench/$W"
    [ "$ROUNDS" -gt 1 ] && REPORT="$REPORT/round$ROUND"
    # shellcheck disable=SC2086 # REGIME and BASELINE are lists of flags
    "$STRATA" bench --workload "vertiorizon-$W" --policies "$RUN_POLICIES" \
      --peers "$PEERS" $BASELINE --entries "$ENTRIES" --ops "$OPS" \
      --key-size 128 --value-size 896 --write-buffer-size 2MiB --target-file-size 2MiB \
      --size-ratio 6 --bloom-bits-per-key 5 --level-base 256MiB --block-cache 32MiB $REGIME \
      --dir "$DIR" --report "$REPORT"
  done
  ROUND=$((ROUND + 1))
done
