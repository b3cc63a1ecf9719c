"""Strata from Python: the LSM-tree engine, its simulator and its compaction policies.

>>> import strata
>>> with strata.Db("/tmp/example-db", policy="leveled") as db:
...     db.put(b"key", b"value")
...     db.get(b"key")
b'value'

``strata.simulate(policy, workload)`` runs the simulator on a workload preset and returns its
report as a dict; ``strata.policies()`` and ``strata.workloads()`` list what it takes.
"""

from ._strata import (
    Db,
    Error,
    Iter,
    Snapshot,
    WriteBatch,
    __version__,
    policies,
    simulate,
    workloads,
)

__all__ = [
    "Db",
    "Error",
    "Iter",
    "Snapshot",
    "WriteBatch",
    "__version__",
    "policies",
    "simulate",
    "workloads",
]
