"""What a query asks: the query types (one per store operation) and the request around them.

A query is a value that knows how to run against one partition's store (Kafka Streams lets the
store interpret it; here the query calls the store's own read methods, so stores stay as they
are). The request names the store, the partitions, and the bounds a replica must meet.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from instance.errors import BadRequest
from instance.runtime.query.scan_page import read_page
from instance.state.spec import StoreSpec
from router.core.scan_query import ScanQuery

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
E = TypeVar("E")

#: one window or session of a key: (start, end, value)
Window = tuple[int, int, Any]


class Query(Protocol[R_co]):
    """One read of a store partition. ``store_kind``: the kind of store it applies to (None:
    whatever the store accepts; a store refuses what it cannot answer with ValueError)."""

    @property
    def store_kind(self) -> str | None: ...

    def run(self, store: Any, partition: int) -> R_co: ...


def check_store_kind(name: str, spec: StoreSpec, kind: str | None) -> None:
    """ValueError when a query for ``kind`` stores asks store ``name`` of another kind."""
    if kind is not None and spec.kind != kind:
        raise BadRequest(f"store {name!r} is a {spec.kind} store, not a {kind} store")


class KeyQuery(NamedTuple):
    """The value of ``key`` (None: absent). Kafka Streams' ``KeyQuery``."""

    key: Any

    @staticmethod
    def with_key(key: Any) -> KeyQuery:
        return KeyQuery(key)

    @property
    def store_kind(self) -> str | None:
        return None

    def run(self, store: Any, partition: int) -> Any:
        return store.query_get(self.key)


class WindowKeyQuery(NamedTuple):
    """The windows of ``key`` that start in [time_from, time_to] (a window store). Kafka Streams'
    ``WindowKeyQuery.withKeyAndWindowStartRange``."""

    key: Any
    time_from: int
    time_to: int | None = None

    @property
    def store_kind(self) -> str | None:
        return "window"

    def run(self, store: Any, partition: int) -> list[Window]:
        size = store.window_size_ms
        return [(s, s + size, v) for s, v in store.for_query().fetch(self.key, self.time_from, self.time_to)]


class WindowRangeQuery(NamedTuple):
    """The sessions of ``key`` (a session store). Kafka Streams' ``WindowRangeQuery.withKey``,
    which its session stores answer."""

    key: Any

    @property
    def store_kind(self) -> str | None:
        return "session"

    def run(self, store: Any, partition: int) -> list[Window]:
        return [(w.window.start, w.window.end, v) for w, v in store.for_query().fetch(self.key)]


#: queries of one key: without named partitions they go to the key's partition only
KEYED_QUERIES = (KeyQuery, WindowKeyQuery, WindowRangeQuery)


class RangeQuery(NamedTuple):
    """Entries with keys in [lower, upper] (None: open), in key-byte order. Kafka Streams' ``RangeQuery``."""

    lower: Any = None
    upper: Any = None

    @property
    def store_kind(self) -> str | None:
        return None

    def run(self, store: Any, partition: int) -> list[tuple[Any, Any]]:
        return list(store.query_range(self.lower, self.upper))


@dataclass(frozen=True)
class Page(Generic[E]):
    """One partition's page of a scan: at most the limit's entries, ``more`` when it holds more."""

    entries: list[E]
    more: bool


@dataclass(frozen=True)
class RangePageQuery(Generic[E]):
    """One page of a scan bounded in serialized keys (:class:`router.core.scan_query.ScanQuery`): at
    most ``limit`` entries after ``after``. ``entry(key_bytes, key, value, partition)`` builds
    each entry (the transport's own type); ``partition_of`` places a MULTI_GET's keys."""

    scan: ScanQuery
    after: bytes | None
    limit: int
    key_serde: Any
    entry: Callable[[bytes, Any, Any, int], E]
    partition_of: Callable[[bytes], int]

    @property
    def store_kind(self) -> str | None:
        return None

    def run(self, store: Any, partition: int) -> Page[E]:
        entries, more = read_page(store, self.key_serde, self.scan, self.after, partition, self.limit,
                                  self.partition_of, self.entry)
        return Page(entries, more)


@dataclass(frozen=True, slots=True)
class PositionBound:
    """Kafka Streams' ``PositionBound``: only a replica at or beyond ``position`` (partition ->
    changelog offset) may answer; None: any position."""

    position: Mapping[int, int] | None = None

    @staticmethod
    def unbounded() -> PositionBound:
        return UNBOUNDED

    @staticmethod
    def at(position: Mapping[int, int]) -> PositionBound:
        return PositionBound(dict(position))

    def bound_for(self, partition: int) -> int | None:
        """The lowest position a replica of ``partition`` must have (None: no bound)."""
        return None if self.position is None else self.position.get(partition)


UNBOUNDED = PositionBound()


class StateQueryRequest(NamedTuple, Generic[R]):
    """Kafka Streams' ``StateQueryRequest``: ``query`` against ``store``'s local replicas.

    ``partitions``: those to ask; None: a key query's own partition (its key serialized and
    hashed once), any other query every partition held here. ``allow_stale``: standbys and
    restoring replicas may answer (Kafka Streams' ``requireActive()``, inverted: strict is the
    default here, as on the wire). ``max_lag``: no replica further behind its changelog's end.
    A named tuple, not a dataclass: one is built per Get, three times faster.
    """

    store: str
    query: Query[R]
    partitions: tuple[int, ...] | None = None
    position_bound: PositionBound = UNBOUNDED
    allow_stale: bool = False
    max_lag: int | None = None

    @staticmethod
    def in_store(store: str) -> _InStore:
        return _InStore(store)

    def with_partitions(self, partitions: Collection[int]) -> StateQueryRequest[R]:
        return self._replace(partitions=tuple(sorted(partitions)))

    def with_all_partitions(self) -> StateQueryRequest[R]:
        return self._replace(partitions=None)

    def with_position_bound(self, bound: PositionBound) -> StateQueryRequest[R]:
        return self._replace(position_bound=bound)

    def with_stale_reads(self, max_lag: int | None = None) -> StateQueryRequest[R]:
        return self._replace(allow_stale=True, max_lag=max_lag)


@dataclass(frozen=True, slots=True)
class _InStore:
    store: str

    def with_query(self, query: Query[R]) -> StateQueryRequest[R]:
        return StateQueryRequest(self.store, query)
