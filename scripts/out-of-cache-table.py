#!/usr/bin/env python3
"""Summarizes scripts/out-of-cache.sh's runs as a Markdown table.

Usage: scripts/out-of-cache-table.py OUT

OUT holds OUT/<dataset>-<mode>/round<N>/<workload>/results.json, and fjall's runs in
<workload>.fjall/results.json (what out-of-cache.sh writes). For every dataset × I/O mode × workload it prints each engine's median ops/s of the
main (last measured) phase with every round's figure after it, Strata ÷ RocksDB (of the
medians), and each engine's device reads per second as a share of the device's random-read
rate at the queue depth nearest the phase's (threads × batch), from the --device-probe the
script ran once (median over the rounds). A run whose I/O mode differs from its cell's (fjall
has no direct I/O) is marked "(buffered)". The settings every run shared (memory limit, block
cache) head the output.

A second table says where each engine's time went in the main phase (medians over the
rounds): device reads per operation and KiB per device read (the block device's counters),
the blocks the engine itself read per operation by kind (data, index, filter; fjall reports
none), and CPU microseconds per operation (the process's user + system time).
"""
import json
import math
import os
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt(v, digits=0):
    if v is None:
        return "-"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def size(n):
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n and n % unit == 0:
            return f"{n // unit}{name}"
    return f"{n} bytes"


def iops_near(probe, depth):
    """The probe's random-read rate at the queue depth nearest `depth` (log scale)."""
    depth = max(depth, 1)
    if abs(math.log(depth)) <= abs(math.log(depth) - math.log(32)):
        return probe["random_read_iops_qd1"]
    return probe["random_read_iops_qd32"]


# The workloads in the order out-of-cache.sh runs them; others follow by name.
ORDER = ["fillrandom", "readrandom", "readrandom-4t", "multireadrandom", "ycsb-load", "ycsb-a",
         "ycsb-c", "ycsb-e"]


def results(out):
    """(dataset, mode, workload, comparison) for every results.json under OUT."""
    for cell in sorted(os.listdir(out)):
        if "-" not in cell or not os.path.isdir(os.path.join(out, cell)):
            continue
        dataset, mode = cell.rsplit("-", 1)
        for round_dir in sorted(os.listdir(os.path.join(out, cell))):
            base = os.path.join(out, cell, round_dir)
            if not os.path.isdir(base):
                continue
            for workload in sorted(os.listdir(base)):
                path = os.path.join(base, workload, "results.json")
                if os.path.isfile(path):
                    # fjall's own bench of a workload reports into <workload>.fjall.
                    yield dataset, mode, workload.split(".")[0], load(path)


COSTS = ["reads/op", "KiB/read", "data/op", "index/op", "filter/op", "CPU µs/op"]


def costs(run, phase):
    """One run's main phase: the COSTS figures (None where not reported)."""
    ops = phase["ops"]
    reads = phase.get("device_reads")
    read_bytes = phase.get("device_bytes_read")
    engine_reads = run["engine"] != "fjall"
    data = phase.get("blocks_read")
    if data is not None:
        # blocks_read counts every block; index and filter blocks are also counted apart.
        data -= phase.get("index_blocks_read", 0) + phase.get("filter_blocks_read", 0)
    return [
        reads / ops if reads is not None else None,
        read_bytes / reads / 1024 if reads else None,
        data / ops if engine_reads and data is not None else None,
        phase.get("index_blocks_read", 0) / ops if engine_reads else None,
        phase.get("filter_blocks_read", 0) / ops if engine_reads else None,
        # The kept database's load is skipped, so the run's CPU time is its main phase's.
        run["cpu_seconds"] * 1e6 / ops if len(run["phases"]) == 1 else None,
    ]


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        sys.exit(__doc__)
    out = argv[0]
    found = list(results(out))
    # The script probes the device once; every cell is set against that probe.
    probe = next((c["device_probe"] for *_, c in found if c.get("device_probe")), None)
    # (dataset, mode, workload) -> label -> {"ops": [...], "share": [...], "buffered": bool}
    cells = {}
    labels = []
    settings = set()
    for dataset, mode, workload, c in found:
        for r in c["runs"]:
            if r["label"] not in labels:
                labels.append(r["label"])
            settings.add((r.get("memory_limit"), r.get("block_cache_bytes")))
            entry = cells.setdefault((dataset, mode, workload), {}).setdefault(
                r["label"], {"ops": [], "share": [], "buffered": False, "costs": []}
            )
            entry["ops"].append(r["ops_per_sec"])
            if mode == "direct" and not r.get("direct_io"):
                entry["buffered"] = True
            main = r["phases"][-1] if r["phases"] else None
            if probe and main and main.get("device_reads") is not None and main["seconds"] > 0:
                depth = main.get("threads", 1) * main.get("read_batch", 1)
                reads = main["device_reads"] / main["seconds"]
                entry["share"].append(100 * reads / iops_near(probe, depth))
            if main and main.get("ops"):
                entry["costs"].append(costs(r, main))
    if not cells:
        sys.exit(f"no results.json under {out}/<dataset>-<mode>/round<N>/<workload>/")
    for limit, cache in sorted(settings, key=str):
        print(
            f"Memory limit {size(limit) if limit else 'none'}, block cache "
            f"{size(cache) if cache else 'engine default'}."
        )
    if probe:
        print(
            f"Device: random 4 KiB reads {fmt(probe['random_read_iops_qd1'])}/s at queue depth 1, "
            f"{fmt(probe['random_read_iops_qd32'])}/s at 32; sequential reads "
            f"{probe['sequential_read_bytes_per_sec'] / 1e6:.0f} MB/s."
        )
    print()
    strata = next((l for l in labels if l not in ("rocksdb", "fjall")), None)
    header = ["dataset", "I/O", "workload"]
    header += [f"{l} ops/s (each round)" for l in labels]
    if strata and "rocksdb" in labels:
        header.append(f"{strata} ÷ rocksdb")
    header.append("reads/s % of IOPS (" + " / ".join(labels) + ")")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    def order(key):
        dataset, mode, workload = key
        rank = ORDER.index(workload) if workload in ORDER else len(ORDER)
        return (dataset, mode, rank, workload)

    for (dataset, mode, workload), runs in sorted(cells.items(), key=lambda kv: order(kv[0])):
        row = [dataset, mode, workload]
        medians = {}
        for label in labels:
            e = runs.get(label)
            if not e or not e["ops"]:
                row.append("-")
                continue
            medians[label] = statistics.median(e["ops"])
            each = ", ".join(fmt(v) for v in e["ops"])
            mark = " (buffered)" if e["buffered"] else ""
            row.append(f"{fmt(medians[label])}{mark} ({each})")
        if strata and "rocksdb" in labels:
            a, b = medians.get(strata), medians.get("rocksdb")
            row.append(fmt(a / b, 2) if a and b else "-")
        shares = []
        for label in labels:
            e = runs.get(label)
            shares.append(fmt(statistics.median(e["share"]), 1) if e and e["share"] else "-")
        row.append(" / ".join(shares))
        print("| " + " | ".join(row) + " |")
    print()
    header = ["dataset", "I/O", "workload", "engine"] + COSTS
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for (dataset, mode, workload), runs in sorted(cells.items(), key=lambda kv: order(kv[0])):
        for label in labels:
            e = runs.get(label)
            if not e or not e["costs"]:
                continue
            row = [dataset, mode, workload, label]
            for i in range(len(COSTS)):
                values = [c[i] for c in e["costs"] if c[i] is not None]
                row.append(fmt(statistics.median(values), 2) if values else "-")
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
