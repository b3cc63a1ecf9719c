#!/usr/bin/env python3
"""Prints the Min-Max tables of docs/minmax.md from scripts/minmax-bench.sh's report
directories: ingest per policy, then data blocks read per query Q1-Q5.

    scripts/minmax-table.py out/minmax/*
"""
import json
import sys

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
