#!/usr/bin/env python3
"""Regenerates the simulated headline of docs/spooky.md: Spooky against Partial Merge (`leveled`)
and Full Merge (`leveled-full` with DCA) at 10^8 entries.

Workloads: `spooky-uniform` (10^8 unique keys loaded in random order, then 10^8 uniform updates)
and `spooky-zipf` (the same load, then 10^8 zipfian updates, θ = 1, whose hot set moves every
2·10^7 updates: five hot periods, as the paper's 10 hours with a move every 2 hours).
16-byte keys, 100-byte values, T = 5, 64 MiB buffer (the paper's), 64 MiB tables for `leveled`.
Each run writes its JSON report to target/spooky-headline/ and the script prints a Markdown table.

Usage: cargo build --release && python3 scripts/spooky-headline.py   (about 20 minutes, one core)
"""
import json
import os
import subprocess
import sys

BINARY = "./target/release/strata"
OUT = "target/spooky-headline"
POLICIES = [
    "spooky",
    "spooky-lazy",
    "spooky-lazy-partial",
    "spooky:partial_last_level=true",
    "spooky-tiered",
    "leveled",
    "leveled-full:dynamic_level_bytes=true",
]
WORKLOADS = {
    "spooky-uniform": [],
    "spooky-zipf": ["--zipf-theta", "1", "--hot-period", "20000000"],
}


def args(policy, workload):
    return ["sim", "--policy", policy, "--workload", workload, "--entries", "100000000",
            "--ops", "100000000", "--buffer-size", "64MiB", "--target-file-size", "64MiB",
            "--size-ratio", "5"] + WORKLOADS[workload]


def run(policy, workload):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"{workload}-{policy.replace(':', '_')}.json")
    if not os.path.exists(path):
        out = subprocess.run([BINARY] + args(policy, workload) + ["--json", "--timeline-points",
                             "0"], check=True, capture_output=True, text=True).stdout
        with open(path, "w") as f:
            f.write(out)
    with open(path) as f:
        report = json.load(f)
    report = report[0] if isinstance(report, list) else report
    print(f"{workload} {policy}: WA {report['write_amp']:.3f}", file=sys.stderr)
    return report


def update_wa(report):
    """Write amplification of the update phase (the workload's last)."""
    return report["phases"][-1]["write_amp"]


def main():
    for workload in WORKLOADS:
        results = {p: run(p, workload) for p in POLICIES}
        print(f"\n#### `{workload}`\n")
        print("| policy | WA, whole run | WA, update phase | compaction WA of the updates "
              "(WA − 1) | peak bytes ÷ live − 1 | final space amp | levels | max tables | "
              "wall s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for p, r in results.items():
            up = update_wa(r)
            print(f"| `{p}` | {r['write_amp']:.2f} | {up:.2f} | {up - 1:.2f} | "
                  f"{r['peak_space_over_final_live'] - 1:.3f} | {r['final_space_amp']:.3f} | "
                  f"{len([l for l in r['levels'] if l['bytes'] > 0])} | {r['max_tables']} | "
                  f"{r['wall_seconds']:.0f} |")
        s, lv, fm = (results["spooky"], results["leveled"],
                     results["leveled-full:dynamic_level_bytes=true"])
        extra = (s["peak_space_over_final_live"] - 1) / (fm["peak_space_over_final_live"] - 1)
        cwa = (update_wa(s) - 1) / (update_wa(lv) - 1)
        print(f"\nspooky ÷ leveled-full peak extra space: {extra:.3f} (target ≤ 0.5); "
              f"spooky ÷ leveled compaction WA: {cwa:.3f} (target ≤ 0.8, update phase)")
        print("\nBytes written into each level per updated byte (update phase):\n")
        width = max(len(r["phases"][-1]["bytes_written_per_level"]) for r in results.values())
        print("| policy | flush (L0) | " + " | ".join(f"L{i}" for i in range(1, width))
              + " | total |")
        print("|---|" + "---:|" * (width + 1))
        for p, r in results.items():
            phase = r["phases"][-1]
            cells = [b / phase["user_bytes"] for b in phase["bytes_written_per_level"]]
            cells += [0.0] * (width - len(cells))
            print(f"| `{p}` | " + " | ".join(f"{c:.2f}" if c else "–" for c in cells)
                  + f" | {sum(cells):.2f} |")
        print("\nCommands: " + "; ".join(
            f"`strata {' '.join(args(p, workload))}`" for p in POLICIES))


if __name__ == "__main__":
    main()
