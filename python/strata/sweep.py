"""Parameter sweeps of the simulator, serially or on a Dask cluster.

A simulation is a pure function of its settings, so a sweep gives the same rows on one process
or on N workers; only the time differs.
"""

import itertools
from typing import Any, Dict, Iterable, List, Optional

from . import _strata
from .report import Report

#: Grid keys that are ``simulate``'s settings; every other key is a policy option.
SETTINGS = ("workload", "entries", "ops", "key_size", "value_size", "write_buffer_size", "seed")

#: Report fields a sweep's rows carry (each a number).
FIELDS = (
    "write_amp",
    "peak_space_amp",
    "final_space_amp",
    "flushes",
    "compactions",
    "max_sorted_runs",
    "final_sorted_runs",
    "lookup_cost",
    "avg_lookup_cost",
    "compaction_bytes_written",
    "trivial_moves",
)


class Rows(list):
    """A sweep's rows (dicts: the grid point, then the report's fields ``FIELDS``)."""

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (pandas must be installed)."""
        import pandas

        return pandas.DataFrame(list(self))


def points(grid: Dict[str, Iterable[Any]]) -> List[Dict[str, Any]]:
    """Every combination of the grid's values, in the order of its keys (the last varying
    fastest). ``policy`` must be among the keys."""
    if "policy" not in grid:
        raise ValueError("a sweep's grid needs a 'policy' key (a list of policy names)")
    keys = list(grid)
    values = [list(grid[k]) for k in keys]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def run_point(point: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    """Simulates one grid point: its settings over ``defaults``, its other keys as options of
    its policy. A row: the point, then the report's fields."""
    settings = dict(defaults)
    options = []
    for key, value in point.items():
        if key == "policy":
            continue
        if key in SETTINGS:
            settings[key] = value
        else:
            options.append("%s=%s" % (key, value))
    policy = str(point["policy"])
    if options:
        policy += (":" if ":" not in policy else ",") + ",".join(options)
    workload = settings.pop("workload", "fillunique")
    report = _strata.simulate(policy, workload, **settings)
    row = dict(point)
    row.update({field: report[field] for field in FIELDS})
    return row


def sweep(
    grid: Dict[str, Iterable[Any]],
    workload: str = "fillunique",
    *,
    scheduler: Optional[str] = None,
    workers: Optional[int] = None,
    serial: bool = False,
    **settings: Any,
) -> Rows:
    """Simulates every point of ``grid`` (``{"policy": [...], "size_ratio": [4, 8], ...}``: keys
    among ``SETTINGS`` set ``simulate``'s arguments, the others are options of the point's policy)
    on ``workload`` with ``settings`` for the rest, and returns the rows in the grid's order.

    The points run on a Dask cluster: the one at ``scheduler`` (an address such as
    ``"tcp://10.0.0.5:8786"``), or else a ``LocalCluster`` of ``workers`` processes (default:
    one per core) started and closed here; ``serial=True`` runs them in this process instead.
    Built-in policies only: a policy registered from Python exists in the process that
    registered it.
    """
    todo = points(grid)
    defaults = dict(settings, workload=workload)
    if serial:
        return Rows(run_point(p, defaults) for p in todo)
    from dask.distributed import Client, LocalCluster

    if scheduler is not None:
        with Client(scheduler) as client:
            return Rows(client.gather(client.map(run_point, todo, defaults=defaults, pure=False)))
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True) as cluster:
        with Client(cluster) as client:
            return Rows(client.gather(client.map(run_point, todo, defaults=defaults, pure=False)))
