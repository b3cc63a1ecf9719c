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
    workloads,
)
from . import _strata
from .policy import FlushPlan, Plan, PlanInput, PlanOutput, Policy, whole_runs
from .report import Comparison, Report
from .sweep import Rows, sweep


def advise(**flags):
    """Which policy, with which options, for a workload and an objective: ``strata advise``,
    its flags as keyword arguments (``workload="ycsb-a", entries=200_000, objective="write-amp",
    max_space_amp=1.5``; an underscore stands for a dash, ``True`` for a bare flag, a list for
    a comma-separated value). Returns its JSON as a dict: ``candidates`` ranked and ``pick``
    (``None`` when no configuration meets the constraints)."""
    argv = []
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            argv += [flag, ",".join(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return _strata.advise_flags(argv)


def bench(policies, workload="mixed", **settings):
    """Runs the engine on the workload preset ``workload`` once per policy in ``policies``, as
    ``strata bench`` does (each in a fresh database under ``dir``, removed at the end), and
    returns its :class:`Comparison`. Settings: ``entries``, ``ops``, ``key_size``,
    ``value_size``, ``write_buffer_size``, ``dir``, ``seed``."""
    return Comparison(_strata.bench(policies, workload, **settings))


def simulate(policy, workload="fillunique", **settings):
    """Simulates ``policy`` (a specification, as ``strata.policies()`` lists them) on the
    workload preset ``workload`` (``strata.workloads()``) and returns the simulator's
    :class:`Report`. Settings: ``entries``, ``ops``, ``key_size``, ``value_size``,
    ``write_buffer_size``, ``block_size`` (tables cut into data blocks of that size, which
    policies see in ``Table.blocks``), ``seed``. The same arguments give the same report (but for
    ``policy_seconds``, the time the policy took deciding)."""
    return Report(_strata.simulate(policy, workload, **settings))


__all__ = [
    "advise",
    "Comparison",
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
