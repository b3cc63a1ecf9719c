"""The Python package's costs, for BENCHMARKS.md: ``python python/benchmarks/bench.py DIR``.

1. ``Db.put`` and ``Db.get`` per operation (the Rust side: the engine example
   ``put_get_cost``, the same operations).
2. A policy in Python against the same policy in Rust in the simulator: ``py-tiered`` of
   ``python/tests/test_policy.py`` against the built-in ``tiered``, 10^6 entries then 10^6
   operations of ``mixed``.
3. A sweep of 64 configurations (10^6 entries each) serially, and on 1 and 2 Dask workers.

Three rounds of each; every run is printed.
"""

import os
import random
import shutil
import sys
import time

import strata

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from test_policy import PyTiered  # noqa: E402  (registers py-tiered)


def put_get(directory, n, round_):
    path = os.path.join(directory, "put-get-cost")
    shutil.rmtree(path, ignore_errors=True)
    rng = random.Random(round_)
    keys = [b"%016x" % rng.getrandbits(64) for _ in range(n)]
    value = b"v" * 100
    with strata.Db(path) as db:
        started = time.perf_counter()
        for k in keys:
            db.put(k, value)
        put_ns = (time.perf_counter() - started) * 1e9 / n
        started = time.perf_counter()
        for k in reversed(keys):
            assert db.get(k) is not None
        get_ns = (time.perf_counter() - started) * 1e9 / n
        hot = keys[-1]
        started = time.perf_counter()
        for _ in range(n):
            db.get(hot)
        hot_ns = (time.perf_counter() - started) * 1e9 / n
    shutil.rmtree(path, ignore_errors=True)
    return put_ns, get_ns, hot_ns


def policy_time(policy):
    started = time.perf_counter()
    report = strata.simulate(policy, "mixed", entries=1_000_000, ops=1_000_000,
                             write_buffer_size=256 << 10)
    return time.perf_counter() - started, report["compactions"]


def sweep_time(workers):
    grid = {
        "policy": ["leveled", "tiered", "lazy-leveled", "spooky"],
        "size_ratio": [3, 4, 6, 8],
        "write_buffer_size": [64 << 10, 128 << 10, 256 << 10, 512 << 10],
    }
    started = time.perf_counter()
    if workers == 0:
        rows = strata.sweep(grid, entries=1_000_000, serial=True)
    else:
        rows = strata.sweep(grid, entries=1_000_000, workers=workers)
    assert len(rows) == 64
    return time.perf_counter() - started


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
    for r in range(1, 4):
        put_ns, get_ns, hot_ns = put_get(directory, 200_000, r)
        print("put/get round %d: put %.0f ns, get %.0f ns, hot get %.0f ns"
              % (r, put_ns, get_ns, hot_ns), flush=True)
    for r in range(1, 4):
        # Tables of 1 MiB, then of 64 KiB: the views a Python policy is handed grow with the
        # tables of the tree.
        for target in (1 << 20, 64 << 10):
            options = "size_ratio=3,target_file_size=%d,bloom_bits_per_key=10" % target
            rust, compactions = policy_time("tiered:" + options)
            python, same = policy_time("py-tiered:" + options)
            assert compactions == same
            print("policy round %d, %d-byte tables: tiered %.3f s, py-tiered %.3f s "
                  "(%d compactions)" % (r, target, rust, python, compactions), flush=True)
    for r in range(1, 4):
        for workers in (0, 1, 2):
            print("sweep round %d: %s %.2f s" % (
                r, "serial" if workers == 0 else "%d workers" % workers, sweep_time(workers)),
                flush=True)


if __name__ == "__main__":
    main()
