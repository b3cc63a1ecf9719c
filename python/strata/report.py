"""The simulator's report (``strata.simulate``'s result)."""

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
