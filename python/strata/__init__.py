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
    bench,
    policies,
    register_policy,
    workloads,
)
from . import _strata
from .policy import FlushPlan, Plan, PlanInput, PlanOutput, Policy, whole_runs
from .report import Report
from .sweep import Rows, sweep


def simulate(policy, workload="fillunique", **settings):
    """Simulates ``policy`` (a specification, as ``strata.policies()`` lists them) on the
    workload preset ``workload`` (``strata.workloads()``) and returns the simulator's
    :class:`Report`. Settings: ``entries``, ``ops``, ``key_size``, ``value_size``,
    ``write_buffer_size``, ``seed``. The same arguments give the same report (but for
    ``policy_seconds``, the time the policy took deciding)."""
    return Report(_strata.simulate(policy, workload, **settings))


__all__ = [
    "Context",
    "bench",
    "Db",
    "Error",
    "FlushPlan",
    "Iter",
    "Plan",
    "PlanInput",
    "PlanOutput",
    "Policy",
    "Report",
    "Rows",
    "Run",
    "Snapshot",
    "Table",
    "Version",
    "WriteBatch",
    "__version__",
    "policies",
    "register_policy",
    "simulate",
    "sweep",
    "whole_runs",
    "workloads",
]
