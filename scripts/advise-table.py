#!/usr/bin/env python3
"""The table of scripts/advise-check.sh: per workload, advise's pick, its throughput and write
amplification as strata bench measured them (median over the rounds, then every round in
order), the best policy's by median, and the pick's shortfall. A run the memory limit killed
leaves no result: it is counted as killed, and the best policy is the best of those that finished
every round. Runs during which the hypervisor took 5% or more of the machine's CPU (steal_share,
recorded by strata bench since it records it) are listed under the table: their throughput is
not comparable with the others'."""
import json
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1] if len(sys.argv) > 1 else "target/advise-check")
print("| workload | advise's pick | pick ops/s, median (rounds) | best policy | best ops/s, median (rounds) | pick / best | rounds | pick WA | lowest WA (policy) |")
print("|---|---|---:|---|---:|---:|---:|---:|---:|")
disturbed = []
for advice_file in sorted(out.glob("*-advise.json")):
    workload = advice_file.name[: -len("-advise.json")]
    advice = json.loads(advice_file.read_text())
    rounds = [json.loads(f.read_text()) for f in sorted(out.glob(f"{workload}-bench-*.json"))]
    if not rounds:
        continue
    by_label = {}
    for number, runs in enumerate(rounds, 1):
        for r in runs:
            by_label.setdefault(r["label"], []).append(r)
            if (r.get("steal_share") or 0) >= 0.05:
                disturbed.append(f"{workload} round {number}: {r['label']} ({100 * r['steal_share']:.0f}% steal)")
    ops = {label: statistics.median([r["ops_per_sec"] for r in rs]) for label, rs in by_label.items()}
    wa = {label: statistics.median([r["write_amp"] for r in rs]) for label, rs in by_label.items()}
    every = {label: [r["ops_per_sec"] for r in rs] for label, rs in by_label.items()}
    pick = advice["pick"]["spec"]
    name = lambda label: label.split(":")[0]
    short = name(pick) + "".join(
        f" {k}={v}"
        for k, v in (o.split("=") for o in pick.split(":")[1].split(","))
        if k == "size_ratio" or (k == "bloom_bits_per_key" and v != "10")
    ) if ":" in pick else pick
    if pick not in ops:
        print(f"| {workload} | {short} | (not measured) | | | | {len(rounds)} | | |")
        continue
    killed = {label: len(rounds) - len(rs) for label, rs in by_label.items()}
    finished = [label for label in ops if killed[label] == 0] or list(ops)
    best = max(finished, key=ops.get)
    low = min(wa, key=wa.get)
    rng = lambda label: ", ".join(f"{x:,.0f}" for x in every[label]) + (
        f"; killed in {killed[label]}" if killed[label] else ""
    )
    print(
        f"| {workload} | {short} | {ops[pick]:,.0f} ({rng(pick)}) | {name(best)} | "
        f"{ops[best]:,.0f} ({rng(best)}) | {ops[pick] / ops[best]:.3f} | {len(rounds)} | "
        f"{wa[pick]:.2f} | {wa[low]:.2f} ({name(low)}) |"
    )
if disturbed:
    print("\nRuns the hypervisor slowed (steal of 5% or more of the machine's CPU):")
    for line in disturbed:
        print(f"- {line}")
