#!/usr/bin/env python3
"""Horizontal leveling's write amplification three ways, for docs/vertiorizon.md.

For ℓ = 2 and 3 and every n from 2 to 60 flushes of unique keys:
- "lemma": Vertiorizon Lemma 5.2 times P (the optimum of the paper's cost model, App. 9.4);
- "alg1": Algorithm 1 as printed, priced with the same cost model (a flush into L1 costs L1's
  size after it; a merge of levels a..b into b+1 costs the merged size; a cascade within one
  flush is one merge, footnote 6), all sizes in buffers;
- "sim": `strata sim --policy horizontal-leveled:levels=ℓ` on n buffers of unique keys.

Usage: cargo build --release && python3 scripts/vertiorizon-alg1.py [--no-sim]
"""
import json
import math
import subprocess
import sys

BUFFER = 1 << 20
ENTRY = 116
BINARY = "./target/release/strata"


def lemma(n, levels):
    m = levels
    while math.comb(m + 1, levels) <= n:
        m += 1
    num = (levels * math.comb(m + 1, levels + 1) + (m + 1) * (n - math.comb(m, levels))
           - (levels - 1) * n)
    return num / n


def algorithm1(n, levels):
    counters = [0] * levels
    sizes = [0] * levels
    cost = 0
    for _ in range(n):
        counters[0] += 1
        sizes[0] += 1
        cost += sizes[0]
        i = 0
        first = None
        while i < levels - 1 and counters[i] > counters[i + 1]:
            if first is None:
                first = i
            counters[i + 1] += 1
            counters[i] = 0
            i += 1
        if first is not None:
            merged = sum(sizes[first:i + 1])
            sizes[first:i] = [0] * (i - first)
            sizes[i] = merged
            cost += merged
    return cost / n


def sim(n, levels):
    entries = n * BUFFER // ENTRY
    cmd = [BINARY, "sim", "--policy", f"horizontal-leveled:levels={levels}", "--entries",
           str(entries), "--buffer-size", "1MiB", "--target-file-size", "1MiB", "--json",
           "--timeline-points", "0"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    report = json.loads(out)
    return report["write_amp"], report["flushes"]


def main():
    with_sim = "--no-sim" not in sys.argv
    print("| ℓ | n | Lemma 5.2 | Algorithm 1 | sim | sim flushes |")
    print("|---:|---:|---:|---:|---:|---:|")
    for levels in (2, 3):
        for n in range(2, 61):
            a, b = lemma(n, levels), algorithm1(n, levels)
            s, f = sim(n, levels) if with_sim else (float("nan"), 0)
            print(f"| {levels} | {n} | {a:.3f} | {b:.3f} | {s:.3f} | {f} |")


if __name__ == "__main__":
    main()
