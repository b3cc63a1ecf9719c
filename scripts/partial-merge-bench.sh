#!/bin/sh
# The partial-merge paper's steady-state experiment on the engine (docs/partial-merge.md), with
# the simulator's settings (scripts/partial-merge-sim.sh): fill to SIZE MiB of 4-byte keys and
# 100-byte payloads, 2 × OPS unmeasured 50/50 operations, then OPS measured ones; Γ = 10,
# K_0 = 16 MiB, δ = 0.07, 4 KiB blocks, 4 MiB write buffer, 256 KiB tables; data blocks written
# per level counted (--count-blocks). The report goes to OUT_DIR/<workload>-<size>-<payload>/.
#
# Usage: scripts/partial-merge-bench.sh OUT_DIR SIZE_MIB [WORKLOAD] [OPS] [PAYLOAD] [POLICIES]
#   Then: python3 scripts/partial-merge-table.py OUT_DIR/*/results.json
#   DB_DIR sets where the databases go (default: the system's temporary directory).
set -eu
out=$1
size=$2
workload=${3:-partial-merge-uniform}
ops=${4:-10000000}
payload=${5:-100}
policies=${6:-partial-full,partial-full-p,partial-rr,partial-rr-p,partial-choosebest,partial-choosebest-p,partial-mixed,partial-mixed-p}
key=4
entries=$((size * 1048576 / (key + payload)))
strata=${STRATA:-target/release/strata}
"$strata" bench --workload "$workload" --entries "$entries" --ops "$ops" \
    --key-size "$key" --value-size "$payload" --write-buffer-size 4MiB \
    --policies "$policies" --peers none --count-blocks \
    --policy-option level0_size=16MiB --policy-option merge_rate=0.07 \
    --policy-option target_file_size=256KiB \
    ${DB_DIR:+--dir "$DB_DIR"} --report "$out/$workload-$size-$payload"
