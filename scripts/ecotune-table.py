#!/usr/bin/env python3
"""Prints the EcoTune table of docs/ecotune.md from scripts/ecotune-bench.sh's reports: per
long-scan share r, each policy's query throughput in the run phase (median of the rounds, every
round shown), its ratio to `leveled` (median of the per-round ratios, every round shown), and its
whole-run WA.

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
    per_policy = {}
    for path in rounds:
        runs = json.load(open(path))["runs"]
        base = next((r for r in runs if r["label"] == "leveled"), None)
        for r in runs:
            cell = per_policy.setdefault(r["label"], {"ops": [], "ratio": [], "wa": []})
            ops = run_phase(r)["ops_per_sec"]
            cell["ops"].append(ops)
            cell["wa"].append(r.get("write_amp") or 0.0)
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
