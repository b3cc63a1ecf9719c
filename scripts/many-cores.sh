#!/usr/bin/env bash
# Strata (leveled) against RocksDB and fjall on a machine with many cores, in about five
# minutes, cached (no memory limit, buffered I/O, the bench-peers options): readrandom at 1, 4,
# 16 and 32 threads (each after an unmeasured one-thread fill), fillrandom on 1, 4 and 16
# writers over disjoint keys, YCSB A at 4 and 16 threads, readwhilewriting with 16 readers
# beside one writer, and fillrandom and YCSB A at 16 threads again with both engines' pipelined
# writes (--enable-pipelined-write). Builds nothing: it runs a prebuilt binary, so it also works on a machine
# that reaches no package registry.
#
#   scripts/many-cores.sh [STRATA] [OUT]
#
# STRATA (default ./target/release/strata) must be built with the peers:
#   cargo build --release --features peers && strip target/release/strata
# and, so that RocksDB's CRC32C uses SSE 4.2 (its build script leaves it out otherwise), with
# RUSTFLAGS="-C target-cpu=x86-64-v2 -C target-feature=+pclmulqdq" (BENCHMARKS.md, "Sixteen cores").
# OUT (default out/many-cores) gets each bench's table (*.txt) and summary.txt, one line per
# cell: workload, threads, then ops/s of Strata, RocksDB and fjall and Strata ÷ RocksDB.
# ENTRIES (default 1000000) and OPS (default 1000000) size the runs; $BENCH_DIR holds the
# databases (default the system's temporary directory; use a real disk, not tmpfs).
set -euo pipefail
strata=${1:-./target/release/strata}
out=${2:-out/many-cores}
entries=${ENTRIES:-1000000}
ops=${OPS:-1000000}
mkdir -p "$out"
if ! "$strata" bench --help | grep -q -- '--peers'; then
  echo "$strata has no --peers; build it with: cargo build --release --features peers" >&2
  exit 2
fi
common=(--entries "$entries" --ops "$ops" --policies leveled --peers rocksdb,fjall
        --write-buffer-size 64MiB --target-file-size 64MiB --level-base 256MiB
        --block-cache 32MiB --quiet --report "$out/report")
if [ -n "${BENCH_DIR:-}" ]; then
  common+=(--dir "$BENCH_DIR")
fi
nproc > "$out/cores.txt"

# One line per cell, from the first table's rows ("ENGINE OPS/S ..."): each bench measures one
# phase, or reports its run phase first (YCSB A's run, after its load). Rewritten after every
# cell, so a run stopped early still leaves the cells it finished.
summary="$out/summary.txt"
summarize() {
  {
    echo "# $(cat "$out/cores.txt") cores; entries $entries, ops $ops; $("$strata" --version 2>/dev/null || echo strata)"
    printf '%-20s %7s %12s %12s %12s %9s\n' workload threads strata rocksdb fjall 'S/RocksDB'
    for name in fillrandom readrandom ycsb-a readwhilewriting fillrandom-pipelined ycsb-a-pipelined; do
      for f in "$out/$name"-t*.txt; do
        [ -e "$f" ] || continue
        threads=${f##*-t}; threads=${threads%.txt}
        awk -v name="$name" -v threads="$threads" '
          $1 ~ /^(leveled|rocksdb|fjall)$/ && $2 ~ /^[0-9][0-9,]*$/ && !($1 in ops) {
            v = $2; gsub(",", "", v); ops[$1] = v
          }
          END {
            s = ops["leveled"]; r = ops["rocksdb"]
            printf "%-20s %7s %12s %12s %12s %9s\n", name, threads, s, r, ops["fjall"], (r > 0 ? sprintf("%.2f", s / r) : "-")
          }' "$f"
      done
    done | sort -k1,1 -k2,2n
  } > "$summary"
}
run() {
  local name=$1 threads=$2; shift 2
  echo "$(date +%T) $name, $threads threads" >&2
  "$strata" bench "${common[@]}" --threads "$threads" "$@" > "$out/$name-t$threads.txt"
  summarize
}
for t in 1 4 16; do
  run fillrandom "$t" --workload fillrandom
done
for t in 1 4 16 32; do
  run readrandom "$t" --workload readrandom
done
for t in 4 16; do
  run ycsb-a "$t" --workload ycsb-a
done
run readwhilewriting 16 --workload readwhilewriting
run fillrandom-pipelined 16 --workload fillrandom --enable-pipelined-write
run ycsb-a-pipelined 16 --workload ycsb-a --enable-pipelined-write
cat "$summary"
