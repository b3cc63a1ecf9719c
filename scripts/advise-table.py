#!/usr/bin/env python3
"""The table of scripts/advise-check.sh: per workload, advise's pick, its throughput and write
amplification as strata bench measured them, the best policy's, and the pick's shortfall."""
import json
import sys
from pathlib import Path

out = Path(sys.argv[1] if len(sys.argv) > 1 else "target/advise-check")
print("| workload | advise's pick | pick ops/s | best policy | best ops/s | pick / best | pick WA | lowest WA (policy) |")
print("|---|---|---:|---|---:|---:|---:|---:|")
for advice_file in sorted(out.glob("*-advise.json")):
    workload = advice_file.name[: -len("-advise.json")]
    bench_file = out / f"{workload}-bench.json"
    if not bench_file.exists():
        continue
    advice = json.loads(advice_file.read_text())
    runs = json.loads(bench_file.read_text())
    pick = advice["pick"]["spec"]
    by_label = {r["label"]: r for r in runs}
    mine = by_label.get(pick)
    best = max(runs, key=lambda r: r["ops_per_sec"])
    low = min(runs, key=lambda r: r["write_amp"])
    short = pick.split(":")[0] + "".join(
        f" {k}={v}" for k, v in (o.split("=") for o in pick.split(":")[1].split(",") if ":" in pick)
        if k in ("size_ratio", "bloom_bits_per_key") and not (k == "bloom_bits_per_key" and v == "10")
    ) if ":" in pick else pick
    if mine is None:
        print(f"| {workload} | {short} | (not measured) | | | | | |")
        continue
    print(
        f"| {workload} | {short} | {mine['ops_per_sec']:.0f} | {best['label'].split(':')[0]} | "
        f"{best['ops_per_sec']:.0f} | {mine['ops_per_sec'] / best['ops_per_sec']:.3f} | "
        f"{mine['write_amp']:.2f} | {low['write_amp']:.2f} ({low['label'].split(':')[0]}) |"
    )
