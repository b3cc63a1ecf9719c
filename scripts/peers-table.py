#!/usr/bin/env python3
"""Summarizes `strata bench` comparisons of Strata with its peers, phase by phase.

Usage: scripts/peers-table.py [--baseline LABEL] REPORT_DIR...

Each REPORT_DIR is a `--report` directory (it holds results.json). For every measured phase of
every run it prints ops/s, worst 100k-operation window, and each peer's ratio (baseline ÷ peer),
then the run-level figures: write amplification, peak RSS, CPU µs per operation and device
MB/s. With several directories of the same workload (repeated runs) it prints each run's
figures and the median of the ratios per workload, so noise shows; paths that are not
directories are skipped, so OUT/* works.
"""
import json
import os
import statistics
import sys


def load(path):
    with open(f"{path}/results.json") as f:
        return json.load(f)


def fmt(v, digits=0):
    if v is None:
        return "-"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def main(argv):
    baseline = None
    if argv[:1] == ["--baseline"]:
        baseline, argv = argv[1], argv[2:]
    if not argv:
        sys.exit(__doc__)
    # Report directories only (a shell glob also matches the text tables beside them).
    argv = [p for p in argv if os.path.isdir(p)]
    comparisons = [load(p) for p in argv]
    base_label = baseline or comparisons[0]["runs"][0]["label"]
    ratios = {}  # (workload, phase, peer, metric) -> [ratio per comparison]
    for path, c in zip(argv, comparisons):
        runs = {r["label"]: r for r in c["runs"]}
        if base_label not in runs:
            sys.exit(f"{path}: no run labelled {base_label}")
        bw = c.get("device_write_bandwidth")
        print(f"## {path} ({c['workload']})" + (f", device {bw / 1e6:.0f} MB/s" if bw else ""))
        print("| run | phase | ops/s | worst ops/s | WA | peak RSS MiB | CPU µs/op | device MB/s |")
        print("|---|---|---|---|---|---|---|---|")
        for r in c["runs"]:
            rss = r.get("peak_rss_bytes")
            dev = r.get("device_bytes_written")
            ops = r.get("total_ops") or 0
            for p in r["phases"]:
                wa = p.get("write_amp")
                print(
                    f"| {r['label']} | {p['name']} | {fmt(p['ops_per_sec'])} "
                    f"| {fmt(p['worst_window_ops_per_sec'])} | {fmt(wa, 2)} "
                    f"| {fmt(rss / 2**20 if rss else None)} "
                    f"| {fmt(r['cpu_seconds'] / ops * 1e6 if ops else None, 2)} "
                    f"| {fmt(dev / r['wall_seconds'] / 1e6 if dev else None, 1)} |"
                )
        base = runs[base_label]
        for label, r in runs.items():
            if label == base_label:
                continue
            for bp, pp in zip(base["phases"], r["phases"]):
                for metric in ("ops_per_sec", "worst_window_ops_per_sec"):
                    if pp[metric] > 0:
                        ratios.setdefault((c["workload"], bp["name"], label, metric), []).append(
                            bp[metric] / pp[metric]
                        )
            if base.get("peak_rss_bytes") and r.get("peak_rss_bytes"):
                ratios.setdefault((c["workload"], "whole run", label, "peak RSS"), []).append(
                    base["peak_rss_bytes"] / r["peak_rss_bytes"]
                )
            if base.get("write_amp") and r.get("write_amp"):
                ratios.setdefault((c["workload"], "whole run", label, "WA"), []).append(
                    base["write_amp"] / r["write_amp"]
                )
        print()
    print(f"## {base_label} ÷ peer (median over the comparisons of each workload; each listed)")
    print("| workload | phase | peer | metric | median | each |")
    print("|---|---|---|---|---|---|")
    for (workload, phase, peer, metric), values in ratios.items():
        each = ", ".join(f"{v:.2f}" for v in values)
        print(
            f"| {workload} | {phase} | {peer} | {metric} "
            f"| {statistics.median(values):.2f} | {each} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
