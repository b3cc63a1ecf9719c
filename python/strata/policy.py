"""Compaction policies written in Python.

A policy is a pure function of the version and the context: subclass :class:`Policy`, implement
``plan_flush`` (where a flushed buffer goes) and ``pick`` (the next compaction, or ``None``),
returning the plan classes below, and register it; the simulator and the engine then run it by
name like a built-in one, options included::

    class PyTiered(strata.Policy):
        name = "py-tiered"
        options = {"size_ratio": 4.0, "target_file_size": 64 << 20}

        def plan_flush(self, version, ctx):
            return strata.FlushPlan(strata.PlanOutput(level=1, target_file_size=self.target_file_size))

        def pick(self, version, ctx):
            ...

    strata.register_policy(PyTiered)
    strata.simulate("py-tiered:size_ratio=6", "fillunique")

The executor checks every plan (inputs exist and are not held by a running job, outputs keep
runs sorted, nothing older lands above newer data) and raises ``strata.Error`` naming the rule a
plan broke.
"""

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional


@dataclass
class PlanOutput:
    """Where a plan's output goes: ``level``, and ``run`` (``None`` for a new run, else the id of
    an existing run of that level); tables cut at ``target_file_size`` bytes (``None``: one
    table); ``bloom_bits_per_key`` bits of Bloom filter per key (0: none)."""

    level: int
    run: Optional[int] = None
    target_file_size: Optional[int] = None
    bloom_bits_per_key: float = 10.0


@dataclass
class PlanInput:
    """Tables ``tables`` (ids) of run ``run`` (id) in ``level``, taken as a plan's input."""

    level: int
    run: int
    tables: List[int]


@dataclass
class Plan:
    """A compaction: ``action`` is ``"merge"`` (merge the inputs into the output), ``"move"``
    (move the input tables unchanged), ``"drop"`` (delete them) or ``"update_state"`` (only
    install ``policy_state``, JSON text the policy reads back from ``Version.policy_state``).
    ``urgent`` plans may run on the workers reserved for them."""

    action: str
    inputs: List[PlanInput]
    output: Optional[PlanOutput] = None
    reason: str = ""
    policy_state: Optional[str] = None
    urgent: bool = False


@dataclass
class FlushPlan:
    """Where a buffer flush goes: ``output``, merged with the tables ``merge_with`` of the
    output's existing run (none for a new run)."""

    output: PlanOutput
    merge_with: List[int] = field(default_factory=list)
    reason: str = ""
    policy_state: Optional[str] = None


class Policy:
    """Base class of a policy written in Python.

    Class attributes: ``name`` (what specifications call it), ``summary`` (one line) and
    ``options`` (option name to default; the default's type, bool, int, float or str, is the
    option's). An instance is built with every option as a keyword argument and keeps each as
    an attribute of the same name.
    """

    name: ClassVar[str]
    summary: ClassVar[str] = "a compaction policy written in Python"
    options: ClassVar[Dict[str, Any]] = {}

    def __init__(self, **options: Any) -> None:
        for option, value in options.items():
            setattr(self, option, value)

    def plan_flush(self, version: Any, ctx: Any) -> FlushPlan:
        """Where the next buffer flush goes."""
        raise NotImplementedError

    def pick(self, version: Any, ctx: Any) -> Optional[Plan]:
        """The next compaction, or ``None`` when nothing needs doing now."""
        return None


def whole_runs(version: Any, level: int) -> List[PlanInput]:
    """Every run of ``level`` as plan inputs, newest first."""
    return [PlanInput(level, run.id, [t.id for t in run.tables]) for run in version.runs(level)]
