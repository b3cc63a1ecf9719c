#!/usr/bin/env python3
"""Prints the Min-Max tables of docs/minmax.md from scripts/minmax-bench.sh's report
directories: ingest per policy, then data blocks read per query Q1-Q5.

    scripts/minmax-table.py out/minmax/*
    scripts/minmax-table.py --rounds out/minmax      (ROUNDS > 1: OUT/round<N>/disorder-<D>)

With --rounds, one ingest table per disorder over the rounds: each figure the median, every
round shown, with the target of docs/minmax.md: `minmax`'s ingest rate against
(`leveled` WA / `minmax` WA) x `leveled`'s rate, and the same with device bytes written.
"""
import glob
import json
import os
import statistics
import sys


def ingest(run):
    return next(p for p in run["phases"] if p["name"] == "ingest")


def cell(values, spec):
    shown = ", ".join(format(v, spec) for v in values)
    return f"{statistics.median(values):{spec}} ({shown})"


if len(sys.argv) > 1 and sys.argv[1] == "--rounds":
    root = sys.argv[2]
    for disorder_dir in sorted(glob.glob(os.path.join(root, "round1", "disorder-*"))):
        name = os.path.basename(disorder_dir)
        rounds = sorted(glob.glob(os.path.join(root, "round*", name, "results.json")))
        per = {}
        for path in rounds:
            runs = {r["label"]: r for r in json.load(open(path))["runs"]}
            for label, r in runs.items():
                c = per.setdefault(label, {"ops": [], "wa": [], "dev": []})
                c["ops"].append(ingest(r)["ops_per_sec"])
                c["wa"].append(r.get("write_amp") or 0.0)
                c["dev"].append((r.get("device_bytes_written") or 0) / 1e6)
            if "minmax" in runs and "leveled" in runs:
                m, l = runs["minmax"], runs["leveled"]
                per.setdefault("_ratio", []).append(ingest(m)["ops_per_sec"] / ingest(l)["ops_per_sec"])
                per.setdefault("_wa_ratio", []).append(l["write_amp"] / m["write_amp"])
                dev_m, dev_l = m.get("device_bytes_written"), l.get("device_bytes_written")
                if dev_m and dev_l:
                    per.setdefault("_dev_ratio", []).append(dev_l / dev_m)
        print(f"## {name}, {len(rounds)} rounds")
        print("| policy | ingest ops/s | WA | device MB written (whole run) |")
        print("|---|---:|---:|---:|")
        for label, c in per.items():
            if label.startswith("_"):
                continue
            print(f"| `{label}` | {cell(c['ops'], ',.0f')} | {cell(c['wa'], '.2f')} "
                  f"| {cell(c['dev'], ',.0f')} |")
        if "_ratio" in per:
            print()
            print(f"- `minmax` ÷ `leveled` ingest: {cell(per['_ratio'], '.2f')}")
            print(f"- `leveled` WA ÷ `minmax` WA: {cell(per['_wa_ratio'], '.2f')}; target ≥ 0.9 × that")
            if "_dev_ratio" in per:
                print(f"- `leveled` ÷ `minmax` device bytes written: {cell(per['_dev_ratio'], '.2f')}")
        print()
    sys.exit(0)

for d in sys.argv[1:]:
    runs = json.load(open(f"{d}/results.json"))["runs"]
    print(f"## {d}")
    print("| policy | ingest ops/s | worst 100k-op window | WA | table MB written | stall s | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        ingest = next(p for p in r["phases"] if p["name"] == "ingest")
        written = (r.get("table_bytes_written") or 0) / 1e6
        print(f"| `{r['label']}` | {ingest['ops_per_sec']:,.0f} | {ingest['worst_window_ops_per_sec']:,.0f} "
              f"| {ingest.get('write_amp') or 0:.2f} | {written:,.0f} | {r.get('stall_seconds') or 0:.1f} "
              f"| {(r.get('peak_rss_bytes') or 0) / 2**20:.0f} |")
    print()
    print("| policy | " + " | ".join(f"Q{i} blocks/query" for i in range(1, 6)) + " | Q5 queries/s |")
    print("|---|" + "---:|" * 6)
    for r in runs:
        qs = [p for p in r["phases"] if p["name"].startswith("q")]
        cells = [f"{(p.get('blocks_read') or 0) / max(p['ops'], 1):,.1f}" for p in qs]
        print(f"| `{r['label']}` | " + " | ".join(cells) + f" | {qs[-1]['ops_per_sec']:,.1f} |")
    print()
