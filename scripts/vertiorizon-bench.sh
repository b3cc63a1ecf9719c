#!/bin/sh
# The engine comparison of docs/vertiorizon.md (the paper's Fig. 7): `strata bench` on the four
# Vertiorizon workloads after a bulk load of ENTRIES entries of 128-byte keys and 896-byte values
# (1 KiB each), then OPS uniform operations; T = 6, 2 MiB buffers and tables, 5 Bloom bits per key,
# a 32 MiB block cache, RocksDB's default level base (256 MiB), two background jobs. Reports go to
# target/vertiorizon-bench/<workload>/. Run it with nothing else on the machine (throughput and
# the worst window are measured).
#
# Usage: sh scripts/vertiorizon-bench.sh [directory for the databases] [workload ...]
#   ENTRIES and OPS override the sizes (defaults below); the workloads default to all four.
set -eu
DIR=${1:-/tmp}
[ $# -gt 0 ] && shift
WORKLOADS=${*:-balanced write-heavy read-heavy range}
ENTRIES=${ENTRIES:-1000000}
OPS=${OPS:-1000000}
# horizontal-tiered builds its schedule for the data it will hold.
DATA=$((ENTRIES * 1024))
POLICIES="leveled,leveled-full,tiered,horizontal-leveled,horizontal-tiered:expected_data_size=$DATA"
POLICIES="$POLICIES,vertiorizon:horizontal_merge=leveling:horizontal_levels=2"
POLICIES="$POLICIES,vertiorizon:horizontal_merge=tiering:horizontal_levels=2,vertiorizon"
cargo build --release
for W in $WORKLOADS; do
  ./target/release/strata bench --workload "vertiorizon-$W" --policies "$POLICIES" \
    --peers none --baseline leveled --entries "$ENTRIES" --ops "$OPS" \
    --key-size 128 --value-size 896 --write-buffer-size 2MiB --target-file-size 2MiB \
    --size-ratio 6 --bloom-bits-per-key 5 --level-base 256MiB \
    --dir "$DIR" --report "target/vertiorizon-bench/$W"
done
