#!/usr/bin/env python3
"""Data blocks written per MiB of requests, from `strata sim --json` or `strata bench` reports
(results.json, run with --count-blocks) of the partial-merge workloads (docs/partial-merge.md).

Usage: partial-merge-table.py [--record-bytes N] [--phases N] REPORT.json [REPORT.json ...]

The measured phase is the last one (`run`); requests are its puts and deletes (the simulator's
`write_ops`; a bench phase's `ops`, all writes in these workloads), each counted at the
workload's key + value size, as the paper counts a request as one record. Bench reports do not
carry the sizes: --record-bytes gives them (default 104, the paper's 4 + 100). Level 0 is the
paper's in-memory buffer, so its writes are shown apart and left out of the metric.

--phases N sums the last N phases instead (2: the settle and measured phases, a window three
times as long, over which the engine and the simulator meet the same number of whole merges
more nearly; bench reports need `phase_blocks`, recorded since the bench kept every phase's
block counts).
"""
import json
import sys


def add(a, b):
    return [x + y for x, y in zip(a + [0] * (len(b) - len(a)), b + [0] * (len(a) - len(b)))]


def window(r, phases):
    """(blocks written per level, blocks kept per level, requests) over the last `phases`."""
    if phases > 1 and "phase_blocks" in r:
        chosen = r["phase_blocks"][-phases:]
        written = [p["written"] for p in chosen]
        kept = [p["preserved"] for p in chosen]
        ops = [p["ops"] for p in chosen]
    else:
        chosen = r["phases"][-phases:]
        written = [p.get("blocks_written_per_level") or [] for p in chosen]
        kept = [p.get("blocks_preserved_per_level") or [] for p in chosen]
        ops = [p.get("write_ops", p.get("ops", 0)) for p in chosen]
    total_written, total_kept = [], []
    for w, k in zip(written, kept):
        total_written, total_kept = add(total_written, w), add(total_kept, k)
    return total_written, total_kept, sum(ops)


def rows(path, record_bytes, phases):
    data = json.load(open(path))
    if isinstance(data, dict) and "runs" in data:
        reports = data["runs"]
    else:
        reports = data if isinstance(data, list) else [data]
    for r in reports:
        phase = r["phases"][-1]
        blocks, kept, ops = window(r, phases)
        record = r["key_size"] + r["value_size"] if "key_size" in r else record_bytes
        # Bench reports name a run by its specification; the policy is before the colon.
        r["policy"] = r["policy"].split(":")[0]
        yield r, phase, blocks, kept, ops, record


def main():
    args = sys.argv[1:]
    record_bytes = 104
    phases = 1
    while args[:1] in (["--record-bytes"], ["--phases"]):
        if args[0] == "--record-bytes":
            record_bytes = int(args[1])
        else:
            phases = int(args[1])
        args = args[2:]
    if not args:
        sys.exit(__doc__)
    full = {}
    table = []
    learned = []
    for path in args:
        for r, phase, blocks, kept, ops, record in rows(path, record_bytes, phases):
            mib = ops * record / 2**20
            if mib == 0 or not blocks:
                sys.exit(f"{path}: {r['policy']}: the last phase has no operations or block counts")
            per_mib = sum(blocks[1:]) / mib
            kept_per_mib = sum(kept[1:]) / mib
            key = path
            if r["policy"] in ("partial-full", "partial-full-p"):
                full[(key, r["policy"])] = per_mib
            # The share of the run's time the policy spent deciding (ChooseBest's scan included):
            # of the simulator's wall time, of the engine process's CPU time.
            total = r.get("cpu_seconds") or r.get("wall_seconds") or 0
            share = (r.get("policy_seconds") or 0) / total if total else float("nan")
            space = r.get("peak_space_amp") or float("nan")
            table.append((key, r["policy"], per_mib, kept_per_mib, blocks, share, space))
            state = r.get("policy_state") or ""
            if '"mixed"' in state:
                learned.append((key, r["policy"], json.loads(state)["mixed"], phase))
    print(
        f"{'report':<40} {'policy':<22} {'blocks/MiB (L1+)':>16} {'× Full':>7} {'× Full-P':>8}"
        f" {'kept/MiB':>8} {'peak SA':>7} {'decide':>7}  blocks per level (L0 apart)"
    )
    nan = float("nan")
    for key, policy, per_mib, kept, blocks, share, space in table:
        ratio = per_mib / full[(key, "partial-full")] if (key, "partial-full") in full else nan
        ratio_p = per_mib / full[(key, "partial-full-p")] if (key, "partial-full-p") in full else nan
        name = key if len(key) <= 40 else "…" + key[-39:]
        print(
            f"{name:<40} {policy:<22} {per_mib:>16.1f} {ratio:>7.2f} {ratio_p:>8.2f}"
            f" {kept:>8.1f} {space:>7.2f} {share:>7.1%}  {blocks}"
        )
    for key, policy, m, phase in learned:
        stage = m["stage"] if isinstance(m["stage"], str) else next(iter(m["stage"]))
        tried = ", ".join(
            f"{x['parameter']}={x['value']:g}: {x['cost']:.2f}" for x in m["measurements"]
        )
        if m["finished_at_flush"] is None:
            took = "not finished"
        else:
            mib = (m["finished_at_inflow"] - m["started_at_inflow"]) / 2**20
            took = f"flushes {m['started_at_flush']} to {m['finished_at_flush']}, {mib:.0f} MiB into L1"
            # The simulator says at which flush the measured phase began.
            if "flushes_before" in phase:
                before = m["finished_at_flush"] <= phase["flushes_before"]
                took += " (before the measured phase)" if before else " (DURING the measured phase)"
        print(
            f"{key}: {policy}: {stage}; τ = {m['thresholds']}, β = {m['bottom_full']}; "
            f"learning: {took}; estimated cost per byte into L1: {tried}"
        )


if __name__ == "__main__":
    main()
