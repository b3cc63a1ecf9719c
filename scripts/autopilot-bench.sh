#!/bin/sh
# The stable-workload comparison of docs/autopilot.md: the autopilot (starting from `leveled`)
# beside fixed policies on one workload, one `strata bench` invocation per workload and round,
# rounds interleaved (round 1 of every workload first). 16-byte keys, 100-byte values, 4 MiB
# buffers, 8 MiB tables, T = 10, a 32 MiB block cache, the advisor priced with CALIBRATION.
# Reports go to OUT/<workload>/round<N>/ (results.json there); scripts/autopilot-table.py OUT
# prints the table. Run it with nothing else on the machine.
#
# Usage: sh scripts/autopilot-bench.sh OUT WORKLOAD[=POLICIES] ...
#   POLICIES after a workload replaces the default list for it (`ycsb-b=leveled,tiered`); the
#   autopilot always runs. Environment, all optional:
#   ENTRIES [3000000], OPS [3000000]   the load and the measured phase
#   POLICIES [leveled,tiered]          the fixed policies beside the autopilot
#   CALIBRATION                        a `strata calibrate` file (default: measured into OUT)
#   SETTLE [1]                         1 counts each phase's flushes and merges in it (--settle)
#   ROUNDS [3], FIRST_ROUND [1]        runs of every cell, and the number of the first
#   DIR [/tmp]                         where the databases go
#   STRATA                             a prebuilt binary instead of ./target/release/strata
set -eu
OUT=$1
shift
ENTRIES=${ENTRIES:-3000000}
OPS=${OPS:-3000000}
ROUNDS=${ROUNDS:-3}
FIRST_ROUND=${FIRST_ROUND:-1}
DIR=${DIR:-/tmp}
EXTRA=""
[ "${SETTLE:-1}" = 1 ] && EXTRA="--settle"
if [ -z "${STRATA:-}" ]; then
  cargo build --release
  STRATA=./target/release/strata
fi
mkdir -p "$OUT"
if [ -z "${CALIBRATION:-}" ]; then
  CALIBRATION=$OUT/CALIBRATION.json
  [ -f "$CALIBRATION" ] || "$STRATA" calibrate --dir "$DIR" --output "$CALIBRATION"
fi
ROUND=$FIRST_ROUND
while [ "$ROUND" -lt $((FIRST_ROUND + ROUNDS)) ]; do
  for CELL in "$@"; do
    WORKLOAD=${CELL%%=*}
    FIXED=${POLICIES:-leveled,tiered}
    [ "$CELL" != "$WORKLOAD" ] && FIXED=${CELL#*=}
    # shellcheck disable=SC2086 # EXTRA is a list of flags
    "$STRATA" bench --workload "$WORKLOAD" --entries "$ENTRIES" --ops "$OPS" \
      --policies "$FIXED,autopilot" --peers none --write-buffer-size 4MiB \
      --block-cache 32MiB --size-ratio 10 --target-file-size 8MiB \
      --max-bytes-for-level-base 32MiB --calibration "$CALIBRATION" --quiet $EXTRA \
      --dir "$DIR" --report "$OUT/$WORKLOAD/round$ROUND"
  done
  ROUND=$((ROUND + 1))
done
