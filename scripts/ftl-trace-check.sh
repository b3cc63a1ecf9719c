#!/usr/bin/env bash
# The engine's device trace against the simulator's (docs/scale.md, section 'The engine's trace
# against the simulator's, at 6 GiB'): the same workload written by the engine
# (`strata bench --file-trace`) and by the simulator in the engine's format, both replayed on the
# same simulated SSD; prints each one's host bytes, WA and GC WA.
#
#   scripts/ftl-trace-check.sh OUT_DIR [ENTRIES] [DEVICE]
#
# WORKLOAD (default fillrandom) picks the workload; run phases have ENTRIES operations.
# Defaults: 2,000,000 entries of 16 + 512 bytes (1.06 GB, about 6 GiB written with the WAL), a
# 1.6 GiB device with 7% spare, 16 MiB erase blocks, 64 KiB pages; `leveled`, 16 MiB buffers
# and tables, T = 10.
set -euo pipefail
out=${1:?out dir}
entries=${2:-2000000}
device=${3:-1.6GiB}
strata=${STRATA:-target/release/strata}
mkdir -p "$out"
workload=(--workload "${WORKLOAD:-fillrandom}" --entries "$entries" --ops "$entries" --key-size 16 --value-size 512
  --policies leveled --write-buffer-size 16MiB --target-file-size 16MiB --size-ratio 10)
ssd=(--ssd "$device" --over-provisioning 0.07 --erase-block 16MiB --ftl-page 64KiB)
if [ ! -s "$out/trace/leveled.trace" ]; then
  "$strata" bench "${workload[@]}" --peers none --dir "$out/db" --file-trace "$out/trace" \
    --json >"$out/bench.json"
  rm -rf "$out/db"
fi
"$strata" sim --replay-trace "$out/trace/leveled.trace" "${ssd[@]}" --json >"$out/engine-ssd.json"
"$strata" sim "${workload[@]}" --engine-format "${ssd[@]}" --json >"$out/sim-ssd.json"
"$strata" sim "${workload[@]}" --engine-format --timed "${ssd[@]}" --json >"$out/sim-timed-ssd.json"
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
def ssd(name):
    with open(os.path.join(out, name)) as f:
        r = json.load(f)
    r = r[0] if isinstance(r, list) else r
    return r.get("ssd", r), r.get("write_amp")
print("| source | host GiB | WA | GC WA | utilization at the end |")
print("|---|---:|---:|---:|---:|")
for label, name in [("engine trace", "engine-ssd.json"), ("simulator", "sim-ssd.json"),
                    ("simulator --timed", "sim-timed-ssd.json")]:
    s, wa = ssd(name)
    if name == "engine-ssd.json":
        with open(os.path.join(out, "bench.json")) as f:
            wa = json.load(f)[0]["write_amp"]
    wa_text = f"{wa:.2f}" if wa else "–"
    print(f"| {label} | {s['host_bytes'] / 2**30:.2f} | {wa_text} | {s['gc_write_amp']:.3f} | {s['utilization']:.0%} |")
PY
