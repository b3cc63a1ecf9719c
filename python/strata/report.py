"""The simulator's report (``strata.simulate``'s result) and the engine's comparison
(``strata.bench``'s)."""

from typing import Any


class Report(dict):
    """The simulator's report: a dict of ``strata sim --json``'s fields (``write_amp``,
    ``peak_space_amp``, ``flushes``, ``phases``, ``timeline``, ...), with pandas views of its
    per-flush timeline and its phases."""

    def to_pandas(self) -> Any:
        """The timeline, one row per flush (runs per level, space amplification, lookup cost,
        simulated seconds), as a pandas DataFrame (pandas must be installed)."""
        import pandas

        return pandas.DataFrame(self["timeline"])

    def phases_to_pandas(self) -> Any:
        """The workload's phases, one row each, as a pandas DataFrame."""
        import pandas

        return pandas.DataFrame(self["phases"])


class Comparison(dict):
    """``strata bench``'s comparison: a dict of its JSON (``workload``, ``baseline``, ``runs``,
    each run with throughput, latencies, amplifications and ``phases``), with a pandas view of
    its runs."""

    def to_pandas(self) -> Any:
        """One row per run, its numbers and names (lists and dicts, such as the phases, left
        out), as a pandas DataFrame (pandas must be installed)."""
        import pandas

        rows = [
            {k: v for k, v in run.items() if not isinstance(v, (list, dict))}
            for run in self["runs"]
        ]
        return pandas.DataFrame(rows)
