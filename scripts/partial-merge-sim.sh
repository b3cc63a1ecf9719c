#!/bin/sh
# The partial-merge paper's steady-state experiment in the simulator (docs/partial-merge.md):
# fill to SIZE MiB of 4-byte keys and 100-byte payloads, run 2 × OPS unmeasured 50/50 operations,
# then OPS measured ones; Γ = 10, K_0 = 16 MiB, δ = 0.07, 4 KiB blocks, 4 MiB write buffer; tables
# sized in the engine's format (--engine-format) unless RAW is set, so the numbers compare with
# scripts/partial-merge-bench.sh. POLICIES defaults to all eight partial-merge policies.
#
# Usage: scripts/partial-merge-sim.sh OUT_DIR SIZE_MIB [WORKLOAD] [OPS] [PAYLOAD] [POLICIES]
#   WORKLOAD: partial-merge-uniform (default), partial-merge-normal or partial-merge-tpcc
#   RAW=1 sizes tables by key and value bytes only (several times faster; not comparable with
#   the engine's absolute counts). The report is OUT_DIR/<workload>-<size>-<payload>.json.
#   Then: python3 scripts/partial-merge-table.py OUT_DIR/*.json
set -eu
out=$1
size=$2
workload=${3:-partial-merge-uniform}
ops=${4:-10000000}
payload=${5:-100}
policies=${6:-partial-full,partial-full-p,partial-rr,partial-rr-p,partial-choosebest,partial-choosebest-p,partial-mixed,partial-mixed-p}
key=4
entries=$((size * 1048576 / (key + payload)))
mkdir -p "$out"
format=--engine-format
if [ -n "${RAW:-}" ]; then format=; fi
strata=${STRATA:-target/release/strata}
"$strata" sim --workload "$workload" --entries "$entries" --ops "$ops" \
    --key-size "$key" --value-size "$payload" --block-size 4KiB $format \
    --write-buffer-size 4MiB \
    --policies "$policies" \
    --policy-option level0_size=16MiB --policy-option merge_rate=0.07 \
    --policy-option target_file_size=256KiB \
    --json >"$out/$workload-$size-$payload.json"
