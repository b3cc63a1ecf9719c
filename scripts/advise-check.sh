#!/usr/bin/env bash
# The check of docs/advise-and-switch.md, section 'Measured: the pick against every policy on the
# engine': on each workload, strata advise's first pick (its top three verified on the engine)
# against every built-in policy measured by strata bench in the same session, on the same
# workload and write buffer.
#
#   scripts/advise-check.sh [OUT_DIR]
#
# env: WORKLOADS (default: fillrandom ycsb-b ycsb-e updatezipf, then the held-back ycsb-f and
# ycsb-d), ENTRIES and OPS (default 500000), BUFFER (default 4MiB), VERIFY (default 3),
# VERIFY_ROUNDS (default 1: advise runs each verified configuration that often and ranks by the
# median),
# ROUNDS (default 3: every policy is benched that many times, in rounds, and compared by its
# median; one run's noise on this machine is ±10%, as large as the criterion),
# STRATA (default target/release/strata). scripts/advise-table.py prints the table from OUT_DIR.
#
# Out of cache: MEMORY_LIMIT (a size) with DEVICE_READ_US (the device's random-read time at queue
# depth 1, `strata bench --device-probe`) gives advise --max-memory and --device-read-us, and
# every bench run --memory-limit; DIRECT_IO=1 adds --direct-io to both; BLOCK_CACHE (default
# 32MiB) is the block cache of advise's model and of every run. CALIBRATION (a file from
# `strata calibrate`) gives advise --calibration. SETTLE=1 gives advise and every bench run
# --settle: each phase that wrote waits for its flushes and merges, so the measured phase runs on
# the tree the load settled into instead of beside the load's compaction debt.
set -euo pipefail
out=${1:-target/advise-check}
mkdir -p "$out"
strata=${STRATA:-target/release/strata}
entries=${ENTRIES:-500000}
ops=${OPS:-500000}
buffer=${BUFFER:-4MiB}
builtins=$("$strata" sim --list-policies | sed -n 's/^\([a-z0-9-]*\): .*/\1/p' | paste -sd, -)
for workload in ${WORKLOADS:-fillrandom ycsb-b ycsb-e updatezipf ycsb-f ycsb-d}; do
  common=(--workload "$workload" --entries "$entries" --ops "$ops" --write-buffer-size "$buffer"
    --block-cache "${BLOCK_CACHE:-32MiB}")
  advise_regime=() bench_regime=()
  if [ -n "${MEMORY_LIMIT:-}" ]; then
    advise_regime+=(--max-memory "$MEMORY_LIMIT" --device-read-us "${DEVICE_READ_US:?give DEVICE_READ_US with MEMORY_LIMIT}")
    bench_regime+=(--memory-limit "$MEMORY_LIMIT")
  fi
  if [ -n "${CALIBRATION:-}" ]; then
    advise_regime+=(--calibration "$CALIBRATION")
  fi
  if [ "${SETTLE:-0}" = 1 ]; then
    advise_regime+=(--settle) bench_regime+=(--settle)
  fi
  if [ "${DIRECT_IO:-0}" = 1 ]; then
    advise_regime+=(--direct-io) bench_regime+=(--direct-io)
  fi
  # The bench's tree settings of the figures in docs/advise-and-switch.md, for every policy whose
  # specification leaves them unset.
  shape=(--size-ratio 10 --target-file-size 8MiB --max-bytes-for-level-base 32MiB)
  if [ ! -s "$out/$workload-advise.json" ]; then
    echo "== $workload: advise" >&2
    "$strata" advise "${common[@]}" ${advise_regime[@]+"${advise_regime[@]}"} --verify "${VERIFY:-3}" \
      --verify-rounds "${VERIFY_ROUNDS:-1}" --json >"$out/$workload-advise.json.tmp"
    mv "$out/$workload-advise.json.tmp" "$out/$workload-advise.json"
  fi
  pick=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pick"]["spec"])' "$out/$workload-advise.json")
  for round in $(seq 1 "${ROUNDS:-3}"); do
    bench="$out/$workload-bench-$round.json"
    if [ ! -s "$bench" ]; then
      echo "== $workload: bench round $round, every policy and the pick" >&2
      "$strata" bench "${common[@]}" "${shape[@]}" ${bench_regime[@]+"${bench_regime[@]}"} --policies "$builtins,$pick" --peers none --json \
        --report "$out/$workload-report-$round" >"$bench.tmp"
      mv "$bench.tmp" "$bench"
    fi
  done
done
python3 "$(dirname "$0")/advise-table.py" "$out"
