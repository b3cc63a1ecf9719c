#!/usr/bin/env python3
"""Prints the EcoTune table of docs/ecotune.md from scripts/ecotune-bench.sh's reports: per
long-scan share r, each policy's query throughput in the run phase (median of the rounds, every
round shown), its ratio to `leveled` (median of the per-round ratios, every round shown), and its
whole-run WA; then per policy the device reads and blocks read per query, the run phase's WA,
peak space amplification and the bytes written to the device.

    scripts/ecotune-table.py [target/ecotune-bench]
"""
import glob
import json
import os
import statistics
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "target/ecotune-bench"


def run_phase(run):
    return next(p for p in run["phases"] if p["name"] == "run")


def fmt(values, spec):
    return f"{statistics.median(values):{spec}} ({', '.join(format(v, spec) for v in values)})"


shares = sorted(glob.glob(os.path.join(root, "r*")), key=lambda d: float(os.path.basename(d)[1:]))
if not shares:
    sys.exit(f"no reports under {root}/r*/")
policies = None
rows = []
for share in shares:
    rounds = sorted(glob.glob(os.path.join(share, "round*", "results.json")))
    if not rounds:
        continue  # a share whose first round is still running
    per_policy = {}
    for path in rounds:
        runs = json.load(open(path))["runs"]
        base = next((r for r in runs if r["label"] == "leveled"), None)
        for r in runs:
            cell = per_policy.setdefault(
                r["label"], {"ops": [], "ratio": [], "wa": [], "reads": [], "blocks": [],
                             "run_wa": [], "sa": [], "written": []})
            phase = run_phase(r)
            ops = phase["ops_per_sec"]
            cell["ops"].append(ops)
            cell["wa"].append(r.get("write_amp") or 0.0)
            cell["reads"].append(phase["device_reads"] / max(phase["ops"], 1))
            cell["blocks"].append(phase["blocks_read"] / max(phase["ops"], 1))
            cell["run_wa"].append(phase.get("write_amp") or 0.0)
            cell["sa"].append(r.get("peak_space_amp") or 0.0)
            cell["written"].append((r.get("device_bytes_written") or 0) / 1e9)
            if base:
                cell["ratio"].append(ops / run_phase(base)["ops_per_sec"])
    policies = policies or list(per_policy)
    rows.append((os.path.basename(share)[1:], len(rounds), per_policy))

print("| r | rounds | " + " | ".join(f"`{p}` ops/s" for p in policies) + " | "
      + " | ".join(f"`{p}` ÷ `leveled`" for p in policies if p != "leveled") + " | WA "
      + " / ".join(policies) + " |")
print("|---|---:|" + "---:|" * len(policies) + "---|" * (len(policies) - 1) + "---|")
for share, n, cells in rows:
    ops = [fmt(cells[p]["ops"], ",.0f") for p in policies]
    ratios = [fmt(cells[p]["ratio"], ".2f") for p in policies if p != "leveled"]
    was = " / ".join(f"{statistics.median(cells[p]['wa']):.2f}" for p in policies)
    print(f"| {share} | {n} | " + " | ".join(ops) + " | " + " | ".join(ratios) + f" | {was} |")

print("\nWhere the time goes (medians over the rounds), in the run phase: read requests the "
      "device completed per query (compactions' reads included), data blocks read from the "
      "device for queries per query (block-cache misses), the phase's WA; over the whole run: "
      "peak space amplification and GB written to the device.\n")
print("| r | policy | device reads / query | data blocks read / query | run-phase WA | peak SA "
      "| device GB written |")
print("|---|---|---:|---:|---:|---:|---:|")
for share, n, cells in rows:
    for p in policies:
        c = cells[p]
        med = {k: statistics.median(v) for k, v in c.items() if v}
        print(f"| {share} | `{p}` | {med['reads']:.2f} | {med['blocks']:.2f} | "
              f"{med['run_wa']:.2f} | {med['sa']:.2f} | {med['written']:.1f} |")
