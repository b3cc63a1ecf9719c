#!/usr/bin/env python3
"""Regenerates the model-versus-simulation table of docs/write-amplification.md.

Runs `strata sim` (release build) on fills of unique random keys (`--workload fillunique`, the
default) with N/B = T^3 flushes of a 1 MiB
buffer, 1 MiB tables, 16-byte keys and 100-byte values, for T = 4, 6, 10, and prints a Markdown table.
Usage: cargo build --release && python3 scripts/wa-table.py
"""
import json
import math
import subprocess
import sys

BUFFER = 1 << 20
ENTRY = 116
BINARY = "./target/release/strata"


def comb(n, k):
    return math.comb(n, k) if 0 <= k <= n else 0


def horizontal_leveling_wa(n, levels):
    """Vertiorizon Lemma 5.2 times P: writes per entry, including the flush into L1."""
    m = levels
    while comb(m + 1, levels) <= n:
        m += 1
    num = levels * comb(m + 1, levels + 1) + (m + 1) * (n - comb(m, levels)) - (levels - 1) * n
    return num / n


def run(policy, t):
    flushes = round(t ** 3)
    entries = flushes * BUFFER // ENTRY
    cmd = [BINARY, "sim", "--policy", policy, "--entries", str(entries), "--buffer-size", "1MiB",
           "--target-file-size", "1MiB", "--size-ratio", str(t), "--json", "--timeline-points", "0"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    rows = []
    for t in (4, 6, 10):
        n = round(t ** 3)
        cases = [
            ("leveled-full", (t - 1) / 2 * 3 + 1, "Spooky eq. 4 + 1"),
            ("leveled-full:dynamic_level_bytes=true", (t - 1) / 2 * 3 + 1, "Spooky eq. 4 + 1"),
            ("leveled:level_target_floor=false", (t + 1) / 2 * 3 + 1, "Spooky eq. 5 + 1"),
            ("leveled:level0_trigger=1,level_target_floor=false", (t + 1) / 2 * 3 + 1, "Spooky eq. 5 + 1"),
            ("leveled", (t + 1) / 2 * 3 + 1, "Spooky eq. 5 + 1"),
            ("tiered", 3 + 1, "L + 1"),
            ("lazy-leveled", 2 + (t + 1) / 2, "1 + (L−2) + (T+1)/2"),
            ("horizontal-leveled:levels=3", horizontal_leveling_wa(n, 3), "Vertiorizon Lemma 5.2, ℓ = 3"),
            ("horizontal-tiered:levels=3", 3, "ℓ (one write per level)"),
        ]
        for policy, model, source in cases:
            r = run(policy, t)
            dev = (r["write_amp"] - model) / model * 100
            label = policy
            rows.append((t, label, source, model, r["write_amp"], dev, r["flushes"]))
            print(f"T={t} {label}: model {model:.2f} sim {r['write_amp']:.2f} ({dev:+.1f}%)", file=sys.stderr)
    print("| T | policy (options) | model | model WA | simulated WA | deviation | flushes |")
    print("|---|---|---|---:|---:|---:|---:|")
    for t, label, source, model, wa, dev, flushes in rows:
        print(f"| {t} | `{label}` | {source} | {model:.2f} | {wa:.2f} | {dev:+.1f}% | {flushes} |")


if __name__ == "__main__":
    main()
