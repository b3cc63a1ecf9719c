#!/bin/sh
# The engine headline of docs/spooky.md: `strata bench` on spooky-uniform and spooky-zipf with
# 5 GiB of user data loaded (46,281,965 entries of 16-byte keys and 100-byte values), then half as
# many updates; T = 5 and a 16 MiB buffer give the full-merge policies L = 4 levels. Three
# background jobs (one flush thread, two compaction threads), so Spooky's pieces run beside merges
# out of L0. Reports go to target/spooky-bench/<workload>/. About 70 minutes on 2 cores; run it
# with nothing else on the machine (throughput and p99 are measured).
#
# Usage: sh scripts/spooky-bench.sh [directory for the databases, default /tmp]
set -eu
DIR=${1:-/tmp}
ENTRIES=46281965
UPDATES=23140982
POLICIES=spooky,leveled,leveled-full:dynamic_level_bytes=true,spooky-lazy,spooky-tiered
cargo build --release
for WORKLOAD in spooky-uniform spooky-zipf; do
  # Zipfian updates (θ = 1) move their hot set five times, as the paper's 10 hours with a move
  # every 2 hours.
  ./target/release/strata bench --workload "$WORKLOAD" --policies "$POLICIES" --peers none \
    --entries "$ENTRIES" --ops "$UPDATES" --hot-period $((UPDATES / 5)) \
    --write-buffer-size 16MiB --target-file-size 16MiB --size-ratio 5 --jobs 3 \
    --dir "$DIR" --report "target/spooky-bench/$WORKLOAD"
done
