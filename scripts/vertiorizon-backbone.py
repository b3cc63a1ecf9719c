#!/usr/bin/env python3
"""Lazy leveling with and without the Vertiorizon backbone (the paper's Fig. 10 b-c), in the
engine: `lazy-leveled` and `vertiorizon-lazy` at T = 4, 6, 8, 10 on `vertiorizon-balanced`
(50% uniform updates, 50% point lookups) after a bulk load; 1 KiB entries (128-byte keys,
896-byte values), 2 MiB buffers and tables, 5 Bloom bits per key. Prints the mean read and update
latency of the 50/50 phase side by side, with WA and throughput; reports are kept in
target/vertiorizon-backbone/T<t>/.

Usage: cargo build --release && python3 scripts/vertiorizon-backbone.py [db dir]
  ENTRIES and OPS in the environment override the sizes. Every T is run afresh; REUSE=1 reads the
  reports an earlier run left instead (whatever sizes it had, so only to re-print a table).
"""
import json
import os
import subprocess
import sys

BINARY = "./target/release/strata"
ENTRIES = int(os.environ.get("ENTRIES", "1000000"))
OPS = int(os.environ.get("OPS", "1000000"))
REUSE = os.environ.get("REUSE") == "1"


def bench(t, db_dir):
    report = f"target/vertiorizon-backbone/T{t}"
    path = os.path.join(report, "results.json")
    if REUSE and os.path.exists(path):
        print(f"reusing {path}", file=sys.stderr)
    else:
        cmd = [BINARY, "bench", "--workload", "vertiorizon-balanced",
               "--policies", "lazy-leveled,vertiorizon-lazy", "--peers", "none",
               "--entries", str(ENTRIES), "--ops", str(OPS), "--key-size", "128",
               "--value-size", "896", "--write-buffer-size", "2MiB", "--target-file-size", "2MiB",
               "--size-ratio", str(t), "--bloom-bits-per-key", "5", "--dir", db_dir,
               "--report", report, "--quiet"]
        print(" ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        runs = json.load(f)
    return runs["runs"] if isinstance(runs, dict) else runs


def main():
    db_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
    print("| T | policy | read µs (mean) | update µs (mean) | read + update µs | ops/s | WA | runs probed per lookup |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for t in (4, 6, 8, 10):
        for r in bench(t, db_dir):
            phase = r["phases"][-1]
            read = phase["latency"]["read"]["mean_us"]
            update = phase["latency"]["update"]["mean_us"]
            probed = r.get("runs_probed_per_lookup")
            probed = f"{probed:.2f}" if probed is not None else "-"
            print(f"| {t} | `{r['label']}` | {read:.2f} | {update:.2f} | {read + update:.2f} | "
                  f"{r['ops_per_sec']:,.0f} | {r['write_amp']:.2f} | {probed} |")


if __name__ == "__main__":
    main()
