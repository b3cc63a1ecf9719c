#!/usr/bin/env python3
"""The simulated trade-off of docs/vertiorizon.md (the paper's Fig. 10a): write amplification
against the modelled point-lookup cost, per design.

Workload `vertiorizon-balanced` in the simulator: ENTRIES unique keys of 128-byte keys and
896-byte values loaded in random order, then OPS operations, half uniform updates and half point
lookups; 2 MiB buffers and tables, 5 Bloom bits per key. WA is the update phase's (the paper plots
per-update cost during the 50/50 phase); lookup cost is the simulator's modelled I/Os per
zero-result point lookup (1 + Σ over runs of the run's false-positive rate), averaged over the
whole run (the report's average, each interval weighted by the bytes ingested in it; the 10^7
updates outweigh the load five to one).

Designs: vertical T ∈ {4, 6, 8, 10} × {partial (`leveled`), full (`leveled-full`)} × leveling, and
full tiering (`tiered`); Strata has no partial-tiering policy. Horizontal ℓ ∈ {3, 4, 6} (and 8,
10 beyond the paper's grid) × {leveling, tiering}; `vertiorizon` and its fixed variants, with the Bloom layout
swapped for two of them. Reports are cached in target/vertiorizon-tradeoff/.

Usage: cargo build --release && python3 scripts/vertiorizon-tradeoff.py
"""
import json
import os
import subprocess
import sys

BINARY = "./target/release/strata"
OUT = "target/vertiorizon-tradeoff"
ENTRIES = 2_000_000
OPS = 20_000_000
DATA = ENTRIES * 1024

DESIGNS = []
for t in (4, 6, 8, 10):
    DESIGNS.append(("vertical partial leveling", f"T={t}", f"leveled:size_ratio={t}"))
    DESIGNS.append(("vertical full leveling", f"T={t}", f"leveled-full:size_ratio={t}"))
    DESIGNS.append(("vertical full tiering", f"T={t}", f"tiered:size_ratio={t}"))
for l in (3, 4, 6, 8, 10):
    # ℓ = 8 and 10 go beyond the paper's grid, to see where the tiering curve goes next.
    DESIGNS.append(("horizontal leveling", f"ℓ={l}", f"horizontal-leveled:levels={l}"))
    DESIGNS.append(("horizontal tiering", f"ℓ={l}",
                    f"horizontal-tiered:levels={l},expected_data_size={DATA}"))
DESIGNS += [
    ("vertiorizon", "self-tuned", "vertiorizon:size_ratio=6"),
    ("vertiorizon", "self-tuned, uniform Bloom", "vertiorizon:size_ratio=6,bloom_layout=uniform"),
    ("vertical partial leveling", "T=6, dynamic Bloom", "leveled:size_ratio=6,bloom_layout=dynamic"),
    ("VRN-Level", "ℓ=2", "vertiorizon:size_ratio=6,horizontal_merge=leveling,horizontal_levels=2"),
    ("VRN-Tier", "ℓ=2", "vertiorizon:size_ratio=6,horizontal_merge=tiering,horizontal_levels=2"),
]


def run(policy):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, policy.replace(":", "_").replace(",", "_").replace("=", "-") + ".json")
    if not os.path.exists(path):
        cmd = [BINARY, "sim", "--policy", policy, "--workload", "vertiorizon-balanced",
               "--entries", str(ENTRIES), "--ops", str(OPS), "--key-size", "128",
               "--value-size", "896", "--buffer-size", "2MiB", "--target-file-size", "2MiB",
               "--bloom-bits-per-key", "5", "--json", "--timeline-points", "0"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        with open(path, "w") as f:
            f.write(out)
    with open(path) as f:
        report = json.load(f)
    return report[0] if isinstance(report, list) else report


def main():
    rows = []
    for family, setting, policy in DESIGNS:
        r = run(policy)
        wa = r["phases"][-1]["write_amp"] if r.get("phases") else r["write_amp"]
        rows.append((family, setting, policy, wa, r["avg_lookup_cost"], r["lookup_cost"],
                     r["filter_bits_per_key"]))
        print(f"{policy}: WA {wa:.2f} lookup {r['avg_lookup_cost']:.3f}", file=sys.stderr)
    print("| design | setting | WA (update phase) | lookup cost (avg) | lookup cost (end) | filter bits/key (end) |")
    print("|---|---|---:|---:|---:|---:|")
    for family, setting, _, wa, avg, end, bits in rows:
        print(f"| {family} | {setting} | {wa:.2f} | {avg:.3f} | {end:.3f} | {bits:.2f} |")
    rows = [r[:6] for r in rows]
    # Does horizontal tiering envelop the vertical designs? A vertical point is dominated when
    # some horizontal-tiering point is no worse on both axes.
    paper = ("ℓ=3", "ℓ=4", "ℓ=6")
    grid = [(wa, avg) for f, s, _, wa, avg, _ in rows if f == "horizontal tiering" and s in paper]
    wide = [(wa, avg) for f, _, _, wa, avg, _ in rows if f == "horizontal tiering"]
    print()
    print("| vertical design | dominated by horizontal tiering ℓ ∈ {3, 4, 6} | ... ℓ ∈ {3..10} |")
    print("|---|---|---|")
    for family, setting, _, wa, avg, _ in rows:
        if family.startswith("vertical") and "Bloom" not in setting:
            a = any(w <= wa and c <= avg for w, c in grid)
            b = any(w <= wa and c <= avg for w, c in wide)
            print(f"| {family} {setting} | {'yes' if a else 'no'} | {'yes' if b else 'no'} |")


if __name__ == "__main__":
    main()
