#!/usr/bin/env python3
"""The rank table of docs/vertiorizon.md in the form of the paper's Fig. 7(d), from the reports
`scripts/vertiorizon-bench.sh` leaves in target/vertiorizon-bench/<workload>/results.csv, or in
<workload>/round<N>/results.csv when it ran several rounds: each figure is then the median of the
rounds, and the ops/s column lists every round's.

Rows: average throughput and worst 100k-operation window of each workload, and peak space
(balanced workload, as the paper's); 1 = best, equal values share a rank; the last row is the
mean rank. Also prints each workload's measured values, and the targets listed under
"The targets." in docs/vertiorizon.md (balanced throughput >= 1.5x `leveled`, extra space
<= 1/4 of `horizontal-leveled`'s).

Usage: python3 scripts/vertiorizon-ranks.py [report directory]
"""
import csv
import glob
import os
import statistics
import sys

WORKLOADS = [("read-heavy", "RH"), ("balanced", "B"), ("write-heavy", "WH"), ("range", "RS")]
# Report labels (as the bench script names the runs) and the names the doc uses.
NAMES = [
    ("leveled", "`leveled`"),
    ("leveled-full", "`leveled-full`"),
    ("tiered", "`tiered`"),
    ("horizontal-leveled", "`horizontal-leveled`"),
    ("horizontal-tiered", "`horizontal-tiered`"),
    ("vertiorizon:horizontal_merge=leveling,horizontal_levels=2", "VRN-Level"),
    ("vertiorizon:horizontal_merge=tiering,horizontal_levels=2", "VRN-Tier"),
    ("vertiorizon", "`vertiorizon`"),
    ("rocksdb", "RocksDB 0.25"),
]


def short(label):
    for prefix, name in NAMES:
        if label == prefix or (prefix == "horizontal-tiered" and label.startswith(prefix + ":")):
            return name
    return None


def load_csv(path):
    runs = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            name = short(row["label"])
            if name is None or name in runs:
                continue
            runs[name] = {
                "ops": float(row["run_ops_per_sec"]),
                "worst": float(row["run_worst_window_ops_per_sec"]),
                "sa": float(row["peak_space_amp"]),
                "wa": float(row["write_amp"]),
                "p99": float(row["run_p99_us"]),
                "ra": float(row["read_amp"] or "nan"),
                "runs": float(row["runs_probed_per_lookup"] or "nan"),
                "stall": float(row["stall_seconds"]),
            }
    return runs


def load(root, workload):
    """Each run's figures, the median of the rounds where there are several (with every
    round's ops/s in "each")."""
    single = os.path.join(root, workload, "results.csv")
    rounds = sorted(glob.glob(os.path.join(root, workload, "round*", "results.csv")))
    paths = rounds or ([single] if os.path.exists(single) else [])
    if not paths:
        return None
    loaded = [load_csv(p) for p in paths]
    runs = {}
    for name in {n for r in loaded for n in r}:
        per_round = [r[name] for r in loaded if name in r]
        runs[name] = {k: statistics.median(x[k] for x in per_round) for k in per_round[0]}
        runs[name]["each"] = [x["ops"] for x in per_round]
    return runs


def ranks(values, higher_is_better):
    """Competition ranking (1, 2, 2, 4) of `values` (name -> number)."""
    order = sorted(values.values(), reverse=higher_is_better)
    return {name: 1 + order.index(v) for name, v in values.items()}


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "target/vertiorizon-bench"
    data = {w: load(root, w) for w, _ in WORKLOADS}
    names = [n for _, n in NAMES]
    for w, _ in WORKLOADS:
        runs = data[w]
        if runs is None:
            print(f"(no report for {w})\n")
            continue
        print(f"**`vertiorizon-{w}`**\n")
        print("| policy | ops/s | worst 100k window | p99 µs | WA | peak SA | blocks read per lookup "
              "| runs probed per lookup | stall s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in names:
            r = runs.get(n)
            if r:
                ra = "—" if r["ra"] != r["ra"] else f"{r['ra']:.2f}"  # NaN: no point lookups
                probed = "—" if r["runs"] != r["runs"] else f"{r['runs']:.2f}"
                each = "" if len(r["each"]) < 2 else " (" + ", ".join(f"{x:,.0f}" for x in r["each"]) + ")"
                print(f"| {n} | {r['ops']:,.0f}{each} | {r['worst']:,.0f} | {r['p99']:.1f} | {r['wa']:.2f} "
                      f"| {r['sa']:.2f} | {ra} | {probed} | {r['stall']:.1f} |")
        print()

    rows = []
    for metric, title in [("ops", "Average"), ("worst", "Worst")]:
        for w, tag in WORKLOADS:
            runs = data[w]
            if runs:
                rows.append((f"{title} {tag}",
                             ranks({n: r[metric] for n, r in runs.items()}, True)))
    if data["balanced"]:
        rows.append(("Space", ranks({n: r["sa"] for n, r in data["balanced"].items()}, False)))
    if not rows:
        print(f"no reports under {root}")
        return
    present = [n for n in names if all(n in r for _, r in rows)]
    print("| row | " + " | ".join(present) + " |")
    print("|---|" + "---:|" * len(present))
    for title, r in rows:
        print(f"| {title} | " + " | ".join(str(r[n]) for n in present) + " |")
    means = {n: sum(r[n] for _, r in rows) / len(rows) for n in present}
    best = min(means.values())
    print("| **Mean** | " + " | ".join(
        (f"**{means[n]:.1f}**" if means[n] == best else f"{means[n]:.1f}") for n in present) + " |")
    print()

    b = data["balanced"]
    if b and "`vertiorizon`" in b and "`leveled`" in b and "`horizontal-leveled`" in b:
        v, lv, hl = b["`vertiorizon`"], b["`leveled`"], b["`horizontal-leveled`"]
        print(f"balanced throughput vertiorizon / leveled: {v['ops'] / lv['ops']:.2f}x (target >= 1.5)")
        print(f"extra space vertiorizon / horizontal-leveled: {(v['sa'] - 1) / (hl['sa'] - 1):.2f} "
              f"({v['sa'] - 1:.2f} / {hl['sa'] - 1:.2f}; target <= 0.25)")
        order = sorted(means, key=means.get)
        print(f"mean-rank order: {', '.join(f'{n} {means[n]:.1f}' for n in order)}")


if __name__ == "__main__":
    main()
