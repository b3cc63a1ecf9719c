#!/usr/bin/env python3
"""Data blocks written per MiB of requests, from `strata sim --json` or `strata bench` reports of
the partial-merge workloads (docs/partial-merge.md).

Usage: partial-merge-table.py REPORT.json [REPORT.json ...]

The measured phase is the last one (`run`); requests are its puts and deletes, each counted at the
workload's key + value size, as the paper counts a request as one record. Level 0 is the
paper's in-memory buffer, so its writes are shown apart and left out of the metric.
"""
import json
import sys


def rows(path):
    data = json.load(open(path))
    reports = data if isinstance(data, list) else [data]
    for r in reports:
        phase = r["phases"][-1]
        blocks = phase.get("blocks_written_per_level") or []
        ops = phase.get("write_ops", 0)
        yield r, phase, blocks, ops


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    full = {}
    table = []
    for path in sys.argv[1:]:
        for r, phase, blocks, ops in rows(path):
            record = r["key_size"] + r["value_size"]
            mib = ops * record / 2**20
            if mib == 0 or not blocks:
                sys.exit(f"{path}: {r['policy']}: the last phase has no operations or block counts")
            per_mib = sum(blocks[1:]) / mib
            key = (path, r.get("workload"))
            if r["policy"].startswith("partial-full"):
                full.setdefault(key, per_mib)
            table.append((key, r["policy"], per_mib, blocks))
    print(f"{'policy':<24} {'blocks/MiB (L1+)':>16} {'× Full':>7}  blocks written per level (L0 apart)")
    for key, policy, per_mib, blocks in table:
        ratio = per_mib / full[key] if key in full else float("nan")
        print(f"{policy:<24} {per_mib:>16.1f} {ratio:>7.2f}  {blocks}")


if __name__ == "__main__":
    main()
