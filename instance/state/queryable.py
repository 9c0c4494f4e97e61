"""What an interactive query reads of one partition's store: :class:`QueryableStore`, the
protocol the top layer of every store implements (Kafka Streams lets each store answer a query,
``StateStore.query``), so a query (instance/runtime/query/request.py) calls typed methods of a
typed store instead of attributes it hopes are there.

The layers answer in turn, as Kafka Streams' Metered -> Caching -> ChangeLogging -> RocksDB do:
the top layer checks the store is open and picks what to read (under exactly-once, the view of
the last commit), the typed layer reads its cache, then the bytes store; none fills the cache.
A store of another kind refuses a read it has no answer for with ValueError (INVALID_ARGUMENT at
the gRPC edge), as Kafka Streams answers UNKNOWN_QUERY_TYPE.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

#: one window or session of a key: (start ms, end ms, value)
Window = tuple[int, int, Any]

#: where a store's position comes from (its state manager's changelog offsets; see :func:`unbound`)
PositionSource = Callable[[], int]


def unbound() -> int:
    """The position of a store no state manager reports for (not logged, or not registered): unknown."""
    return -1


class QueryableStore(Protocol):
    """The reads a query makes of one partition's store, and the store's position."""

    @property
    def name(self) -> str: ...

    def query_get(self, key: Any) -> Any:
        """The value of ``key`` (None: absent)."""
        ...

    def query_range(self, start: Any, end: Any) -> Iterator[tuple[Any, Any]]:
        """Entries with ``start <= key <= end`` (None: open), in key-byte order."""
        ...

    def query_windows(self, key: Any, time_from: int, time_to: int) -> list[Window]:
        """The windows of ``key`` that start in ``[time_from, time_to]``, oldest first (a window store)."""
        ...

    def query_sessions(self, key: Any) -> list[Window]:
        """The sessions of ``key``, by end (a session store)."""
        ...

    def position(self) -> int:
        """The changelog offset that reflects what the store holds now (-1: not logged, unknown);
        taken after a read, it covers what was read."""
        ...
