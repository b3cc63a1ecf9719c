#!/usr/bin/env python3
"""The stable-workload table of docs/autopilot.md from the reports of scripts/autopilot-bench.sh.

Usage: python3 scripts/autopilot-table.py OUT

One row per workload: the autopilot's median throughput of the measured phase and every round,
its switches per round (to what, at which second), the fixed policy with the best median beside
it and its rounds, and autopilot / best; then, as a comment, every run's median throughput in
the first phase (the load, which the autopilot also decides on). Medians of the rounds that finished; a round's steal
share above 5% is flagged, since such a run measures the neighbours more than the engine.
"""
import json
import statistics
import sys
from pathlib import Path


def fmt(x):
    return f"{x:,.0f}"


def main():
    out = Path(sys.argv[1])
    print("| workload | autopilot ops/s, median (rounds) | its switches per round "
          "| best fixed policy beside it | its ops/s, median (rounds) | autopilot / best |")
    print("|---|---:|---|---|---:|---:|")
    for workload_dir in sorted(p for p in out.iterdir() if p.is_dir()):
        rates = {}
        loads = {}
        switches = []
        stolen = []
        for report in sorted(workload_dir.glob("round*/results.json")):
            comparison = json.loads(report.read_text())
            for run in comparison["runs"]:
                rates.setdefault(run["label"], []).append(run["ops_per_sec"])
                if len(run["phases"]) > 1:
                    loads.setdefault(run["label"], []).append(run["phases"][0]["ops_per_sec"])
                if (run.get("steal_share") or 0) > 0.05:
                    stolen.append(f"{run['label']} {report.parent.name}")
                if run["label"] == "autopilot":
                    made = [
                        f"`{d['action']['switch']['to'].split(':')[0]}` at {d['at_seconds']:.2f} s"
                        for d in run.get("autopilot", [])
                        if isinstance(d["action"], dict) and "switch" in d["action"]
                    ]
                    decisions = len(run.get("autopilot", []))
                    switches.append(
                        f"{len(made)}" + (f" ({', '.join(made)})" if made else "")
                        + f" of {decisions}"
                    )
        if "autopilot" not in rates:
            continue
        auto = rates.pop("autopilot")
        best_label, best = max(rates.items(), key=lambda kv: statistics.median(kv[1]))
        a, b = statistics.median(auto), statistics.median(best)
        print(f"| {workload_dir.name} | {fmt(a)} ({', '.join(fmt(x) for x in auto)}) "
              f"| {'; '.join(switches)} | `{best_label}` | {fmt(b)} "
              f"({', '.join(fmt(x) for x in best)}) | {a / b:.3f} |")
        if loads:
            medians = ", ".join(
                f"{label} {fmt(statistics.median(xs))}" for label, xs in loads.items()
            )
            print(f"<!-- first phase (the load), median ops/s: {medians} -->")
        if stolen:
            print(f"<!-- steal > 5%: {', '.join(stolen)} -->")


if __name__ == "__main__":
    main()
