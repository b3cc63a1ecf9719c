#!/usr/bin/env bash
# Runs the out-of-cache comparison: Strata (leveled) against RocksDB and fjall with each run's
# process in a memory cgroup of 256 MiB, page cache included, so the data (about 1 GB per
# dataset) is read from the device. Two datasets, both I/O modes, ROUNDS rounds per cell:
#
#   small  10^7 entries of 16-byte keys and 100-byte values
#   large  10^6 entries of 128-byte keys and 896-byte values
#   buffered, and --direct-io (fjall has none: its runs stay buffered and say so)
#
# Per dataset, I/O mode and round:
#   fillrandom, kept with --keep; then on the kept database (--use-existing-db, its load
#   skipped) readrandom on 1 thread, readrandom on 4 threads, multireadrandom in batches of 32;
#   YCSB loads a database of its own (its load phase, fillunique, kept) and runs A, C and E on
#   it in that order, as YCSB does: on a fillrandom database a third of the keys YCSB reads
#   would not exist, and its inserts would mostly overwrite.
# Every cell drops the page cache before each measured phase (--drop-caches): pages an earlier
# process read stay cached outside the new run's cgroup, and would flatter its reads. The
# device is probed once (--device-probe, on the first fill), so reads per second can be set
# against the device's random-read rate. Memory cgroups and dropping caches need root.
#
#   scripts/out-of-cache.sh [OUT]
#
# OUT (default out/out-of-cache) gets OUT/<dataset>-<mode>/round<N>/<workload>/ report
# directories, each with a text table beside it; scripts/out-of-cache-table.py OUT summarizes
# them. Environment (defaults in brackets):
#   ROUNDS [3]             rounds per cell
#   MEMORY [256MiB]        --memory-limit of every run
#   BLOCK_CACHE [32MiB]    --block-cache of every engine (recorded in each result)
#   ENTRIES_SMALL [10000000], ENTRIES_LARGE [1000000]   the datasets' entries
#   READ_OPS [200000]      operations of readrandom and multireadrandom
#   YCSB_OPS [200000]      operations of YCSB A and C
#   YCSB_E_OPS [40000]     operations of YCSB E (scans of up to 100 entries)
#   DATASETS [small large], MODES [buffered direct]   the cells to run
#   WORKLOADS [readrandom readrandom-4t multireadrandom ycsb-a ycsb-c ycsb-e]   the phases
#                          to measure (the fill and the YCSB load run when one needs them)
#   PEERS [rocksdb,fjall]  the peers (fjall in benches of its own: OUT/.../<workload>.fjall)
#   DROP_CACHES [1]        0 leaves the page cache alone
#   TABLE_CHARGE [0]       1 charges Strata's open tables to its block cache (its default);
#                          0 (--no-table-charge) keeps them outside it, as RocksDB's default
#                          table keeps its indexes and filters: both caches then hold
#                          BLOCK_CACHE bytes of data blocks
#   PROBE_SIZE [1GiB]      --device-probe-size
#   BENCH_DIR              where the databases go (a real disk, not tmpfs; default: the
#                          system's temporary directory); kept databases are removed after
#                          each round
#   EXTRA_FLAGS []         more flags for every bench (e.g. --block-align, which only
#                          Strata takes)
#   STRATA [./target/release/strata]   the binary, built with the peers:
#                          cargo build --release --features peers
# The read counts are meant to keep each read phase out of cache in the tens of seconds on a
# device doing some thousands of random reads a second; scale them to the device.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/out-of-cache}
rounds=${ROUNDS:-3}
memory=${MEMORY:-256MiB}
block_cache=${BLOCK_CACHE:-32MiB}
read_ops=${READ_OPS:-200000}
ycsb_ops=${YCSB_OPS:-200000}
ycsb_e_ops=${YCSB_E_OPS:-40000}
datasets=${DATASETS:-small large}
modes=${MODES:-buffered direct}
workloads=" ${WORKLOADS:-readrandom readrandom-4t multireadrandom ycsb-a ycsb-c ycsb-e} "
wants() { [[ $workloads == *" $1 "* ]]; }
peers=${PEERS:-rocksdb,fjall}
# fjall runs in benches of its own (see run below); the others beside Strata.
others=$(echo ",$peers," | sed 's/,fjall,/,/g; s/^,//; s/,$//')
others=${others:-none}
fjall=
if [[ ,$peers, == *,fjall,* ]]; then
  fjall=yes
fi
probe_size=${PROBE_SIZE:-1GiB}
strata=${STRATA:-./target/release/strata}
work=${BENCH_DIR:-${TMPDIR:-/tmp}}
mkdir -p "$out" "$work"
probe=(--device-probe --device-probe-size "$probe_size")

for dataset in $datasets; do
  case $dataset in
    small) sizes=(--entries "${ENTRIES_SMALL:-10000000}" --key-size 16 --value-size 100) ;;
    large) sizes=(--entries "${ENTRIES_LARGE:-1000000}" --key-size 128 --value-size 896) ;;
    *) echo "unknown dataset $dataset (small, large)" >&2; exit 1 ;;
  esac
  for mode in $modes; do
    common=(--memory-limit "$memory" --block-cache "$block_cache" --write-buffer-size 64MiB --target-file-size 64MiB --level-base 256MiB
            --bandwidth-probe 0 --quiet "${sizes[@]}")
    case $mode in
      buffered) ;;
      direct) common+=(--direct-io) ;;
      *) echo "unknown mode $mode (buffered, direct)" >&2; exit 1 ;;
    esac
    if [ "${DROP_CACHES:-1}" != 0 ]; then
      common+=(--drop-caches)
    fi
    if [ "${TABLE_CHARGE:-0}" = 0 ]; then
      common+=(--no-table-charge)
    fi
    # shellcheck disable=SC2206 # a list of flags
    common+=(${EXTRA_FLAGS:-})
    for round in $(seq 1 "$rounds"); do
      cell=$out/$dataset-$mode/round$round
      mkdir -p "$cell"
      fill=$work/strata-out-of-cache-$dataset-$mode-$round-fill
      ycsb=$work/strata-out-of-cache-$dataset-$mode-$round-ycsb
      rm -rf "$fill" "$ycsb" "$fill-fjall" "$ycsb-fjall"
      # run NAME keep|use-existing-db DB ARGS...: Strata and RocksDB in one bench, then fjall in
      # one of its own (its database at DB-fjall), so that a fjall run the memory limit kills
      # (fjall uses the most memory) fails alone; its later phases then fail too, and the
      # table shows "-". The device probe goes with the first bench only.
      run() {
        local name=$1 how=$2 db=$3; shift 3
        "$strata" bench "${common[@]}" --policies leveled --peers "$others" "${probe[@]}" \
          --"$how" "$db" --report "$cell/$name" "$@" | tee "$cell/$name.txt"
        probe=()
        if [ -n "$fjall" ]; then
          "$strata" bench "${common[@]}" --policies none --peers fjall --"$how" "$db-fjall" \
            --report "$cell/$name.fjall" "$@" | tee "$cell/$name.fjall.txt" ||
            echo "fjall: $name failed, see $cell/$name.fjall.txt" | tee -a "$cell/failures.txt"
        fi
      }
      if wants readrandom || wants readrandom-4t || wants multireadrandom; then
        run fillrandom keep "$fill" --workload fillrandom
      fi
      if wants readrandom; then
        run readrandom use-existing-db "$fill" --workload readrandom --ops "$read_ops"
      fi
      if wants readrandom-4t; then
        run readrandom-4t use-existing-db "$fill" --workload readrandom --ops "$read_ops" \
          --threads 4
      fi
      if wants multireadrandom; then
        run multireadrandom use-existing-db "$fill" --workload multireadrandom \
          --ops "$read_ops" --batch-size 32
      fi
      if wants ycsb-a || wants ycsb-c || wants ycsb-e; then
        run ycsb-load keep "$ycsb" --workload fillunique
      fi
      for workload in ycsb-a ycsb-c; do
        if wants $workload; then
          run $workload use-existing-db "$ycsb" --workload $workload --ops "$ycsb_ops"
        fi
      done
      if wants ycsb-e; then
        run ycsb-e use-existing-db "$ycsb" --workload ycsb-e --ops "$ycsb_e_ops"
      fi
      rm -rf "$fill" "$ycsb" "$fill-fjall" "$ycsb-fjall"
    done
  done
done
