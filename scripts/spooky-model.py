#!/usr/bin/env python3
"""Regenerates the model check of docs/spooky.md: Spooky's eqs. 4, 5, 10 and 11 against the
simulator.

Runs `strata sim` (release build) on a fill of unique random keys (`fillunique`) with exactly
N/B = T^5 flushes of a 1 MiB buffer, 1 MiB tables (16-byte keys, 100-byte values), T = 5, so that the full-merge
policies end with L = 5 levels, and prints two Markdown tables: write amplification against the
models, and Spooky's write and space amplification for X = L-1, L-2, L-3 against eq. 11.

Usage: cargo build --release && python3 scripts/spooky-model.py   (about 2 minutes on 2 cores)
"""
import json
import subprocess
import sys

BUFFER = 1 << 20
ENTRY = 116
T = 5
L = 5
BINARY = "./target/release/strata"


def run(policy):
    entries = T ** L * BUFFER // ENTRY
    cmd = [BINARY, "sim", "--policy", policy, "--entries", str(entries), "--buffer-size", "1MiB",
           "--target-file-size", "1MiB", "--size-ratio", str(T), "--json", "--timeline-points", "0"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    report = json.loads(out)
    report = report[0] if isinstance(report, list) else report
    print(f"{policy}: WA {report['write_amp']:.3f}", file=sys.stderr)
    return report


def command(policy):
    entries = T ** L * BUFFER // ENTRY
    return (f"strata sim --policy {policy} --entries {entries} --buffer-size 1MiB "
            f"--target-file-size 1MiB --size-ratio {T}")


def main():
    eq4 = (T - 1) / 2 * L + 1
    eq5 = (T + 1) / 2 * L + 1
    eq10 = L * (T - 1) / 2 + 1 + 1
    cases = [
        ("spooky:dynamic_level_bytes=false", "eq. 10 + 1", eq10),
        ("spooky", "eq. 10 + 1", eq10),
        ("leveled-full", "eq. 4 + 1", eq4),
        ("leveled-full:dynamic_level_bytes=true", "eq. 4 + 1", eq4),
        ("leveled:level0_trigger=1", "eq. 5 + 1", eq5),
        ("leveled", "eq. 5 + 1", eq5),
    ]
    print("| policy (options) | model | model WA | simulated WA | deviation | peak bytes ÷ live |")
    print("|---|---|---:|---:|---:|---:|")
    for policy, source, model in cases:
        r = run(policy)
        dev = (r["write_amp"] - model) / model * 100
        print(f"| `{policy}` | {source} | {model:.2f} | {r['write_amp']:.2f} | {dev:+.1f}% | "
              f"{r['peak_space_over_final_live']:.3f} |")
    print()
    print("| X | policy (options) | model WA (eq. 10 + 1) | simulated WA | eq. 11 transient "
          "1/T^(L−X) | simulated peak bytes ÷ live − 1 | max tables | command |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for offset in (1, 2, 3):
        for dynamic in ("false", "true"):
            policy = f"spooky:dividing_level_offset={offset}:dynamic_level_bytes={dynamic}"
            r = run(policy)
            transient = 1 / T ** offset
            print(f"| L−{offset} | `{policy}` | {eq10:.2f} | {r['write_amp']:.2f} | "
                  f"{transient:.3f} | {r['peak_space_over_final_live'] - 1:.3f} | "
                  f"{r['max_tables']} | `{command(policy)}` |")


if __name__ == "__main__":
    main()
