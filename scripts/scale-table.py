#!/usr/bin/env python3
"""Prints scale mode against the exact simulator from scripts/scale-check.sh's JSON files.

Usage: scale-table.py DIR  (DIR holds WORKLOAD-exact.json and WORKLOAD-scale.json)
"""
import json
import os
import sys

WORKLOADS = ["fillrandom", "updaterandom", "updatezipf", "deleterandom"]


def load(path):
    with open(path) as f:
        data = json.load(f)
    return {r["policy"]: r for r in (data if isinstance(data, list) else [data])}


def main():
    out = sys.argv[1]
    worst = {"wa": (0.0, ""), "sa": (0.0, "")}
    print("| workload | policy | WA exact | WA scale | Δ | peak SA exact | peak SA scale | Δ | one in | wall s exact / scale |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in WORKLOADS:
        exact_path = os.path.join(out, f"{w}-exact.json")
        scale_path = os.path.join(out, f"{w}-scale.json")
        if not (os.path.exists(exact_path) and os.path.exists(scale_path)):
            continue
        exact, scale = load(exact_path), load(scale_path)
        for policy, e in exact.items():
            s = scale.get(policy)
            if s is None:
                continue
            dwa = s["write_amp"] / e["write_amp"] - 1 if e["write_amp"] else 0.0
            dsa = s["peak_space_amp"] / e["peak_space_amp"] - 1 if e["peak_space_amp"] else 0.0
            for key, d in (("wa", dwa), ("sa", dsa)):
                if abs(d) > abs(worst[key][0]):
                    worst[key] = (d, f"{w} {policy}")
            print(
                f"| {w} | `{policy}` | {e['write_amp']:.3f} | {s['write_amp']:.3f} | {dwa:+.1%} "
                f"| {e['peak_space_amp']:.3f} | {s['peak_space_amp']:.3f} | {dsa:+.1%} "
                f"| {s.get('sample_one_in', 1)} | {e['wall_seconds']:.1f} / {s['wall_seconds']:.1f} |"
            )
    print()
    print(f"largest WA difference: {worst['wa'][0]:+.2%} ({worst['wa'][1]})")
    print(f"largest peak SA difference: {worst['sa'][0]:+.2%} ({worst['sa'][1]})")


if __name__ == "__main__":
    main()
