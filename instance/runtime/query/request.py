"""What a query asks: the query key and where it lives, the query types (one per store
operation) and the request around them.

A query is a value that runs against one partition's store through the typed reads every store
answers (:class:`~instance.state.queryable.QueryableStore`: Kafka Streams lets each store layer
answer a query; here the query picks the store's read). The request names the store, the
partitions, and the bounds a replica must meet.

Where a store's keys live is :class:`StorePlacement`, the one placement API:
``KafkaStreams.store_placement`` (Kafka Streams' ``queryMetadataForKey`` is built on it). Neither
the topology nor the task layout changes once an instance has started, so a store is looked up
once and the answer kept; a request then only parses, serializes and hashes its key (once, here).
A global store has no tasks: every instance holds it whole and answers it as partition 0.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from instance.errors import BadRequest
from instance.runtime.query.scan_page import read_page
from instance.state.queryable import QueryableStore, Window
from instance.state.spec import StoreSpec
from kernel.echo import clip, echo
from kernel.partitioner import default_partition
from kernel.scan_query import ScanQuery
from kernel.task_id import TaskId

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
E = TypeVar("E")

__all__ = ["KEYED_QUERIES", "NO_SUBTOPOLOGY", "UNBOUNDED", "KeyQuery", "Page", "PositionBound", "Query",
           "RangePageQuery", "RangeQuery", "StateQueryRequest", "StorePlacement", "Window", "WindowKeyQuery",
           "WindowRangeQuery", "check_store_kind", "parse_query_key"]


class Query(Protocol[R_co]):
    """One read of a store partition. ``store_kind``: the kind of store it applies to (None:
    whatever the store accepts; a store refuses what it cannot answer with ValueError)."""

    @property
    def store_kind(self) -> str | None: ...

    def run(self, store: QueryableStore, partition: int) -> R_co: ...


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

    def run(self, store: QueryableStore, partition: int) -> Any:
        return store.query_get(self.key)


class WindowKeyQuery(NamedTuple):
    """The windows of ``key`` that start in [time_from, time_to] (a window store; ``time_to``
    None: the one window starting at ``time_from``). Kafka Streams'
    ``WindowKeyQuery.withKeyAndWindowStartRange``."""

    key: Any
    time_from: int
    time_to: int | None = None

    @property
    def store_kind(self) -> str | None:
        return "window"

    def run(self, store: QueryableStore, partition: int) -> list[Window]:
        return store.query_windows(self.key, self.time_from, self.time_from if self.time_to is None else self.time_to)


class WindowRangeQuery(NamedTuple):
    """The sessions of ``key`` (a session store). Kafka Streams' ``WindowRangeQuery.withKey``,
    which its session stores answer."""

    key: Any

    @property
    def store_kind(self) -> str | None:
        return "session"

    def run(self, store: QueryableStore, partition: int) -> list[Window]:
        return store.query_sessions(self.key)


#: queries of one key: without named partitions they go to the key's partition only
KEYED_QUERIES = (KeyQuery, WindowKeyQuery, WindowRangeQuery)


class RangeQuery(NamedTuple):
    """Entries with keys in [lower, upper] (None: open), in key-byte order. Kafka Streams' ``RangeQuery``."""

    lower: Any = None
    upper: Any = None

    @property
    def store_kind(self) -> str | None:
        return None

    def run(self, store: QueryableStore, partition: int) -> list[tuple[Any, Any]]:
        return list(store.query_range(self.lower, self.upper))


@dataclass(frozen=True)
class Page(Generic[E]):
    """One partition's page of a scan: at most the limit's entries, ``more`` when it holds more."""

    entries: list[E]
    more: bool


@dataclass(frozen=True)
class RangePageQuery(Generic[E]):
    """One page of a scan bounded in serialized keys (:class:`kernel.scan_query.ScanQuery`): at
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

    def run(self, store: QueryableStore, partition: int) -> Page[E]:
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


#: ``StorePlacement.subtopology`` of a global store
NO_SUBTOPOLOGY = -1


def parse_query_key(spec: StoreSpec, text: str = "", raw: bytes = b"") -> tuple[Any, bytes]:
    """A query's key of a store with ``spec`` and its serialized bytes: from ``raw`` bytes
    (checked against the key serde), else parsed from ``text``. BadRequest for what is not a key
    of that serde."""
    serde = spec.key_serde
    if raw:
        try:
            return serde.deserialize(raw), raw
        except Exception as e:
            raise BadRequest(f"raw key {echo(raw)} is not a {serde.name} key: {e}") from None
    try:
        key = serde.parse(text)
    except Exception as e:
        raise BadRequest(f"key {echo(text)} is not a valid {serde.name} key: {clip(str(e), 200)}") from e
    kb = serde.serialize(key)
    if kb is None:
        raise BadRequest("key must not be None")
    return key, kb


@dataclass(frozen=True, slots=True)
class StorePlacement:
    """A store's spec and tasks: ``partitions`` tasks of sub-topology ``subtopology`` (a global
    store: none, :data:`NO_SUBTOPOLOGY` and 0)."""

    store: str
    spec: StoreSpec
    subtopology: int = NO_SUBTOPOLOGY
    partitions: int = 0

    @property
    def is_global(self) -> bool:
        return self.partitions == 0

    def key_of(self, text: str = "", raw: bytes = b"") -> tuple[Any, bytes]:
        """The request's key and its bytes (:func:`parse_query_key`)."""
        return parse_query_key(self.spec, text, raw)

    def partition_of(self, key_bytes: bytes) -> int:
        """The partition holding the key serialized as ``key_bytes`` (Kafka's default partitioner,
        as the producers that wrote the store's input)."""
        return default_partition(key_bytes, self.partitions)

    def task_of_key(self, key: Any) -> TaskId:
        """The task holding ``key`` (serialized with the store's key serde); ValueError for None."""
        key_bytes = self.spec.key_serde.serialize(key)
        if key_bytes is None:
            raise ValueError("key must not be None")
        return self.task_of(key_bytes)

    def locate(self, text: str = "", raw: bytes = b"") -> tuple[Any, TaskId]:
        """A request's key (:func:`parse_query_key`) and the task holding it, in one call: what a
        Get needs before it is routed."""
        key, key_bytes = parse_query_key(self.spec, text, raw)
        return key, TaskId(self.subtopology, default_partition(key_bytes, self.partitions))

    def task_of(self, key_bytes: bytes) -> TaskId:
        """The task holding the key serialized as ``key_bytes``."""
        return TaskId(self.subtopology, default_partition(key_bytes, self.partitions))
