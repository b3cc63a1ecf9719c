#!/usr/bin/env bash
# Runs the BENCHMARKS.md comparison of Strata (leveled) with RocksDB and fjall: fillrandom,
# readrandom, YCSB A, C and E at 5·10^6 entries of 16-byte keys and 100-byte values, with options
# matched to RocksDB's defaults (64 MiB buffers and files, 256 MiB level base, 32 MiB cache).
# Needs a build with peers: cargo build --release --features peers (and libclang-dev for RocksDB).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/bench-peers}
mkdir -p "$out"
common=(--entries 5000000 --policies leveled --peers rocksdb,fjall --write-buffer-size 64MiB
        --target-file-size 64MiB --level-base 256MiB --block-cache 32MiB --quiet)
run() {
  local name=$1; shift
  ./target/release/strata bench "${common[@]}" --report "$out/$name" "$@" | tee "$out/$name.txt"
}
run fill-read --workload fillrandom,readrandom
run ycsb-a --workload ycsb-a --ops 5000000
run ycsb-c --workload ycsb-c --ops 5000000
run ycsb-e --workload ycsb-e --ops 1000000
