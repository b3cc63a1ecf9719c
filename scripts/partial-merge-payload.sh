#!/bin/sh
# The partial-merge paper's payload sweep (its Fig. 9; docs/partial-merge.md) in the simulator:
# 300 MiB of 4-byte keys with payloads from 25 to 4092 bytes, uniform 50/50 steady state, every
# partial-merge policy. The measured phase is 1.5 × the entries loaded (3 × as many unmeasured
# requests before it), so every payload sees about 450 MiB of measured requests. Tables are sized
# in the engine's format: a 4 KiB block holds the records that reach 4096 bytes, so one record
# from a payload of about 4080 bytes on (two at 4000).
#
# Usage: scripts/partial-merge-payload.sh OUT_DIR [PAYLOADS]
#   Then: python3 scripts/partial-merge-table.py OUT_DIR/*.json
set -eu
out=$1
payloads=${2:-25 100 400 1000 2000 4000 4092}
here=$(dirname "$0")
for payload in $payloads; do
    entries=$((300 * 1048576 / (4 + payload)))
    "$here/partial-merge-sim.sh" "$out" 300 partial-merge-uniform $((entries * 3 / 2)) "$payload"
done
