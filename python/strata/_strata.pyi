"""Types of the extension module ``strata._strata`` (re-exported by ``strata``)."""

from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

Bytes = Union[bytes, bytearray, str]
"""A key or value: bytes, bytearray, or str (stored as UTF-8)."""

__version__: str

class Error(Exception):
    """An error of the engine, the simulator or a policy, carrying its message."""

class Snapshot:
    """A consistent view of a database (``Db.snapshot``)."""

    @property
    def sequence(self) -> int:
        """The sequence number it reads at."""

class WriteBatch:
    """Writes applied together, all or none, by ``Db.write``."""

    def __init__(self) -> None: ...
    def put(self, key: Bytes, value: Bytes) -> None:
        """Adds a put of ``value`` under ``key``."""
    def delete(self, key: Bytes) -> None:
        """Adds a delete of ``key``."""
    def delete_range(self, start: Bytes, end: Bytes) -> None:
        """Adds a deletion of the keys from ``start`` (included) to ``end`` (excluded)."""
    def __len__(self) -> int: ...

class Iter(Iterator[Tuple[bytes, bytes]]):
    """``(key, value)`` pairs of ``Db.range`` or ``Db.range_rev``."""

    def __iter__(self) -> "Iter": ...
    def __next__(self) -> Tuple[bytes, bytes]: ...

class Db:
    """An open database; a context manager that closes it."""

    def __init__(
        self,
        path: str,
        policy: Optional[str] = None,
        *,
        write_buffer_size: Optional[int] = None,
        block_cache_capacity: Optional[int] = None,
        row_cache_capacity: Optional[int] = None,
        compression: Optional[str] = None,
    ) -> None:
        """Opens (creating if missing) the database at ``path`` with the policy specification
        ``policy`` (``"leveled"``, ``"tiered:size_ratio=4"``; see ``strata.policies()``)."""
    def put(self, key: Bytes, value: Bytes, *, sync: bool = False) -> None:
        """Stores ``value`` under ``key``; ``sync`` waits for the WAL to reach storage."""
    def delete(self, key: Bytes, *, sync: bool = False) -> None:
        """Deletes ``key``."""
    def delete_range(self, start: Bytes, end: Bytes, *, sync: bool = False) -> None:
        """Deletes every key from ``start`` (included) to ``end`` (excluded)."""
    def write(self, batch: WriteBatch, *, sync: bool = False) -> None:
        """Applies ``batch`` atomically; the batch stays as it was."""
    def get(self, key: Bytes, *, snapshot: Optional[Snapshot] = None) -> Optional[bytes]:
        """The value of ``key``, ``None`` if absent."""
    def multi_get(
        self, keys: List[Bytes], *, snapshot: Optional[Snapshot] = None
    ) -> List[Optional[bytes]]:
        """The values of ``keys`` in order, read as one batch."""
    def range(
        self,
        start: Optional[Bytes] = None,
        end: Optional[Bytes] = None,
        *,
        snapshot: Optional[Snapshot] = None,
    ) -> Iter:
        """Pairs from ``start`` (included) to ``end`` (excluded), ascending."""
    def range_rev(
        self,
        start: Optional[Bytes] = None,
        end: Optional[Bytes] = None,
        *,
        snapshot: Optional[Snapshot] = None,
    ) -> Iter:
        """Pairs from ``start`` (included) to ``end`` (excluded), descending."""
    def snapshot(self) -> Snapshot:
        """A view of the database as it is now."""
    def flush(self) -> None:
        """Writes the memtables to tables."""
    def compact_range(self, start: Optional[Bytes] = None, end: Optional[Bytes] = None) -> None:
        """Compacts the keys from ``start`` to ``end`` by hand."""
    def wait_for_compactions(self) -> None:
        """Waits until no flush or compaction is running or wanted."""
    def metrics(self) -> Dict[str, Any]:
        """Counters since open and the tree's shape."""
    def policy(self) -> str:
        """The specification of the policy the database runs, options filled in."""
    def version(self) -> str:
        """The current version in the text format."""
    def close(self) -> None:
        """Closes the database; later calls raise ``strata.Error``."""
    def __enter__(self) -> "Db": ...
    def __exit__(self, *exc: Any) -> bool: ...

def simulate(
    policy: str,
    workload: str = "fillunique",
    *,
    entries: int = 100_000,
    ops: Optional[int] = None,
    key_size: int = 16,
    value_size: int = 100,
    write_buffer_size: Optional[int] = None,
    block_size: Optional[int] = None,
    seed: int = 42,
) -> Dict[str, Any]:
    """Simulates ``policy`` on the workload preset ``workload``; the simulator's report
    (``strata.simulate`` wraps it in a ``strata.Report``)."""

class Table:
    """A table of a version: id, key range, size and counts."""

    @property
    def id(self) -> int: ...
    @property
    def smallest(self) -> bytes: ...
    @property
    def largest(self) -> bytes: ...
    @property
    def size(self) -> int: ...
    @property
    def entries(self) -> int: ...
    @property
    def tombstones(self) -> int: ...
    @property
    def seqnos(self) -> Tuple[int, int]: ...
    @property
    def blocks(self) -> Optional[List[Dict[str, Any]]]:
        """Its data blocks (smallest, largest, size, entries, file, offset), where recorded."""

class Run:
    """A sorted run of a version: tables of disjoint key ranges in key order."""

    @property
    def id(self) -> int: ...
    @property
    def tables(self) -> List[Table]: ...
    @property
    def bytes(self) -> int: ...

class Version:
    """The version a policy decides on, read-only."""

    @property
    def num_levels(self) -> int: ...
    def runs(self, level: int) -> List[Run]:
        """Level ``level``'s runs, newest first (none past the version's levels)."""
    def level_bytes(self, level: int) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def policy_state(self) -> str:
        """The policy's state as its last plan installed it (JSON text; empty if none)."""

class Context:
    """What a policy knows beside the version."""

    def is_leased(self, table: int) -> bool:
        """Whether a running job holds ``table``."""
    @property
    def buffer(self) -> Optional[Tuple[int, int]]:
        """The buffer being flushed, ``(entries, bytes)``, when a flush is being planned."""
    @property
    def now_nanos(self) -> int: ...

def register_policy(cls: Any) -> None:
    """Registers ``cls``, a subclass of ``strata.Policy``, by its ``name``."""

def bench(
    policies: List[str],
    workload: str = "mixed",
    *,
    entries: int = 100_000,
    ops: Optional[int] = None,
    key_size: int = 16,
    value_size: int = 100,
    write_buffer_size: Optional[int] = None,
    dir: Optional[str] = None,
    seed: int = 42,
) -> Dict[str, Any]:
    """Runs the engine on ``workload`` once per policy, as ``strata bench`` does; its
    comparison (``runs``: throughput, latencies, amplifications, phases)."""

def advise_flags(flags: List[str]) -> Dict[str, Any]:
    """``strata advise`` with ``flags`` (``strata.advise`` builds them from keywords)."""

def workloads() -> List[Tuple[str, str]]:
    """The workload presets: ``(name, what it does)``."""

def policies() -> List[Dict[str, Any]]:
    """Every registered policy: name, summary and options."""
