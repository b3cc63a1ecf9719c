#!/usr/bin/env bash
# Runs the BENCHMARKS.md comparison of Strata (leveled) with RocksDB and fjall: fillrandom,
# readrandom, YCSB A, C and E of 16-byte keys and 100-byte values, with options matched to
# RocksDB's defaults (64 MiB buffers and files, 256 MiB level base, 32 MiB cache).
#
#   scripts/bench-peers.sh [OUT] [ENTRIES] [THREADS]
#
# OUT (default out/bench-peers) gets one report directory and one text table per workload;
# ENTRIES (default 5000000) sets the data size, with YCSB A and C running ENTRIES operations and
# YCSB E ENTRIES/5; THREADS (default 1) the threads of the run phases (the loads use one).
# The databases go to $BENCH_DIR when set (use a real disk, not tmpfs), else the system's
# temporary directory. $STRATA picks the binary (default ./target/release/strata), which needs
# the peers: cargo build --release --features peers (and libclang-dev for RocksDB's bindings).
# scripts/peers-table.py OUT/* summarizes the runs phase by phase.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/bench-peers}
entries=${2:-5000000}
threads=${3:-1}
strata=${STRATA:-./target/release/strata}
mkdir -p "$out"
common=(--entries "$entries" --policies leveled --peers rocksdb,fjall --write-buffer-size 64MiB
        --target-file-size 64MiB --level-base 256MiB --block-cache 32MiB --quiet)
if [ -n "${BENCH_DIR:-}" ]; then
  common+=(--dir "$BENCH_DIR")
fi
if [ "$threads" != 1 ]; then
  common+=(--threads "$threads")
fi
run() {
  local name=$1; shift
  "$strata" bench "${common[@]}" --report "$out/$name" "$@" | tee "$out/$name.txt"
}
run fill-read --workload fillrandom,readrandom
run ycsb-a --workload ycsb-a --ops "$entries"
run ycsb-c --workload ycsb-c --ops "$entries"
run ycsb-e --workload ycsb-e --ops $((entries / 5))
