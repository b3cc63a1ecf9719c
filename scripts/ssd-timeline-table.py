#!/usr/bin/env python3
"""GC write amplification over a run, from `strata sim --ssd-report DIR`'s ssd-timeline.csv.

Usage: ssd-timeline-table.py CSV [PIECES]

For each policy: the host bytes written, the cumulative GC WA, and the GC WA of each of PIECES
(default 8) equal shares of the run's host writes (Δ programmed ÷ Δ host), with utilization.
"""
import csv
import sys
from collections import defaultdict


def main():
    path = sys.argv[1]
    pieces = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    series = defaultdict(list)
    with open(path) as f:
        for row in csv.DictReader(f):
            host = int(row["host_bytes"])
            nand = float(row["gc_write_amp"]) * host
            series[row["policy"]].append((host, nand, float(row["utilization"])))
    print("| policy | host TB written | GC WA so far | GC WA of this share | utilization |")
    print("|---|---:|---:|---:|---:|")
    for policy, points in series.items():
        end = points[-1][0]
        previous = (0, 0.0)
        j = 0
        for k in range(1, pieces + 1):
            target = end * k / pieces
            while j < len(points) - 1 and points[j][0] < target:
                j += 1
            host, nand, util = points[j]
            share = (nand - previous[1]) / (host - previous[0]) if host > previous[0] else 1.0
            print(f"| `{policy}` | {host / 1e12:.2f} | {nand / host:.3f} | {share:.3f} | {util:.0%} |")
            previous = (host, nand)


if __name__ == "__main__":
    main()
