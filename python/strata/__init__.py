"""Strata from Python: the LSM-tree engine, its simulator and its compaction policies.

>>> import strata
>>> with strata.Db("/tmp/example-db", policy="leveled") as db:
...     db.put(b"key", b"value")
...     db.get(b"key")
b'value'

``strata.simulate(policy, workload)`` runs the simulator on a workload preset and returns its
report as a dict; ``strata.policies()`` and ``strata.workloads()`` list what it takes. A policy
written in Python (``strata.Policy``, ``strata.register_policy``) runs there and in the engine
by name, like a built-in one.
"""

from ._strata import (
    Context,
    Db,
    Error,
    Iter,
    Run,
    Snapshot,
    Table,
    Version,
    WriteBatch,
    __version__,
    policies,
    register_policy,
    simulate,
    workloads,
)
from .policy import FlushPlan, Plan, PlanInput, PlanOutput, Policy, whole_runs

__all__ = [
    "Context",
    "Db",
    "Error",
    "FlushPlan",
    "Iter",
    "Plan",
    "PlanInput",
    "PlanOutput",
    "Policy",
    "Run",
    "Snapshot",
    "Table",
    "Version",
    "WriteBatch",
    "__version__",
    "policies",
    "register_policy",
    "simulate",
    "whole_runs",
    "workloads",
]
