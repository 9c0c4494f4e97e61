"""Running a query on this instance: resolve the partitions (a key is serialized and hashed once),
read each partition's local replica, refuse what the request's bounds exclude. The one place that
decides whether a local replica may answer, and which one: the active task (running or restoring)
first, then a standby, across the stream threads' task registries (runtime/tasks.py works out each
replica's role and position, for queries and published metadata alike); a global store's copy
from the global thread.

Two entries: :func:`execute` (Kafka Streams' IQv2 ``KafkaStreams.query``: a result per partition)
and :func:`ask` (the query server's read of one placed partition: the answer, or the refusal
raised as the UnavailableError routing passes on).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from instance.errors import InvalidStateStoreException, StreamsNotStartedException
from instance.runtime.global_thread import GlobalStreamThread
from instance.runtime.query.request import KEYED_QUERIES, Query, StateQueryRequest, StorePlacement, check_store_kind
from instance.runtime.query.result import QueryResult, StateQueryResult
from instance.runtime.states import State
from instance.runtime.task_manager import TaskManager
from instance.state.spec import StoreSpec
from instance.topology.topology import Topology
from kernel.instance_state import RUNNING_OR_REBALANCING
from kernel.local_read import LocalReplica, Role
from kernel.options import QueryOptions
from kernel.unavailable import FailureReason, UnavailableError

R = TypeVar("R")


class QueryHost(Protocol):
    """What running a query needs of ``KafkaStreams``."""

    topology: Topology
    global_thread: GlobalStreamThread | None

    @property
    def state(self) -> State: ...

    def task_managers(self) -> list[TaskManager]: ...

    def store_spec(self, store: str) -> StoreSpec: ...

    def store_placement(self, store: str) -> StorePlacement: ...


def execute(host: QueryHost, request: StateQueryRequest[R]) -> StateQueryResult[R]:
    """The result per partition of ``request``. Raises for the request as a whole: unknown store
    (UnknownStateStoreException), not started or a global store still loading
    (StreamsNotStartedException), a query the store cannot answer (ValueError)."""
    store, query = request.store, request.query
    check_store_kind(store, host.store_spec(store), query.store_kind)  # raises for an unknown store
    placement = host.store_placement(store)  # raises when not started (a store with tasks)
    if placement.is_global:
        return StateQueryResult({0: _answer(host, placement, request.query, 0, request.allow_stale,
                                            request.max_lag, request.position_bound.bound_for(0))})
    partitions = request.partitions
    if partitions is None:
        if isinstance(query, KEYED_QUERIES):
            partitions = (placement.task_of_key(query.key).partition,)  # serialized and hashed once
        else:
            partitions = tuple(hosted_partitions(host.task_managers(), store))
    return StateQueryResult({p: _answer(host, placement, query, p, request.allow_stale, request.max_lag,
                                        request.position_bound.bound_for(p)) for p in partitions})


def ask(host: QueryHost, placement: StorePlacement, query: Query[R], partition: int,
        options: QueryOptions) -> tuple[R, LocalReplica]:
    """``query`` answered by this instance's replica of ``partition`` (a global store: its whole
    copy, partition 0) with that replica, within the wire's ``options``; UnavailableError when
    that replica may not answer (its reason is the result's: routing passes it on, to the next
    candidate or to the caller). The caller placed the query (a key of ``placement``'s store,
    or a query whose store kind it checked)."""
    b = options.bound
    r = _answer(host, placement, query, partition, options.allow_stale, options.max_lag,
                b.offset if b is not None and b.partition == partition else None)
    if r.failure is not None:
        raise UnavailableError(r.failure, r.message)
    assert r.replica is not None  # a success names its replica
    return r.result, r.replica  # type: ignore[return-value]  # None is a result too (a key not found)


def _answer(host: QueryHost, placement: StorePlacement, query: Query[R], partition: int, allow_stale: bool,
            max_lag: int | None, bound: int | None) -> QueryResult[R]:
    """``query`` answered by this instance's replica of ``partition``, or refused; ``bound``: the
    position the replica must have reached (None: any)."""
    store = placement.store
    read: tuple[R | None, LocalReplica] | QueryResult[R] | None
    if placement.is_global:
        read = _read_global(host, store, query)
    else:
        state = host.state
        if state not in RUNNING_OR_REBALANCING:
            return QueryResult(partition, failure=FailureReason.NOT_ACTIVE,
                               message=f"cannot query: instance state is {state.name}")
        read = None
        try:  # ``Tasks.read`` of each thread's registry in turn (under its lock, the read before the position)
            for tm in host.task_managers():
                read = tm.tasks.read(store, partition, query, allow_stale)
                if read is not None:
                    break
        except InvalidStateStoreException as e:  # closed while we read: migrated, the active is elsewhere
            return QueryResult(partition, failure=FailureReason.NOT_ACTIVE, message=str(e))
        if read is None:
            return QueryResult(partition, failure=FailureReason.NOT_ACTIVE,
                               message=f"store {store!r} partition {partition} is not hosted on this instance "
                                       "(migrated?)")
    if isinstance(read, QueryResult):  # a global store closed while read
        return read
    value, replica = read
    if replica.role is Role.ACTIVE and max_lag is None and bound is None:
        return QueryResult(replica.partition, value, replica)  # nothing to check: the commonest read
    failure = replica_refusal(store, replica, allow_stale, max_lag, bound)
    if failure is not None:
        return QueryResult(replica.partition, replica=replica, failure=failure[0], message=failure[1])
    return QueryResult(replica.partition, value, replica)


def hosted_partitions(managers: Iterable[TaskManager], store: str) -> list[int]:
    """The partitions of ``store`` this instance holds a replica of (active or standby)."""
    found: set[int] = set()
    for tm in managers:
        found |= tm.tasks.hosted_partitions(store)
    return sorted(found)


def _read_global(host: QueryHost, store: str, query: Query[R]) -> tuple[R, LocalReplica] | QueryResult[R]:
    """A global store: ``query`` run on this instance's whole copy, as partition 0 (every instance
    holds one and answers it, as in Kafka Streams; role GLOBAL), read after the position is taken
    (so the answer reflects at least that position), or the refusal when it closed meanwhile.
    The position is the sum over the store's topic partitions of the next offset applied; the end
    offset the sum of the ends the global thread last saw (refreshed as it polls). Raises while
    the instance is not started, not running, or still loading the store."""
    state = host.state
    if state is State.CREATED:
        raise StreamsNotStartedException("KafkaStreams is not started; call start() first")
    if state not in RUNNING_OR_REBALANCING:
        raise InvalidStateStoreException(f"cannot query: instance state is {state.name}")
    g = host.global_thread
    if g is None:
        raise StreamsNotStartedException(
            f"global store {store!r} is not queryable yet: the global thread is still loading it "
            f"(instance state {state.name}); retry once the instance is RUNNING")
    topic = host.topology.global_stores[store].topic
    offsets = dict(g.state.changelog_offsets)  # written by the global thread: one C-level copy
    ends = g.progress()
    position = end = 0
    for tp, pos in offsets.items():
        if tp[0] == topic:
            position += pos
            end += max(pos, ends.get(tp, (pos, pos))[1])
    try:
        value = query.run(g.stores[store], 0)
    except InvalidStateStoreException as e:  # closed while we read (shutting down): no copy is better placed
        return QueryResult(0, failure=FailureReason.NOT_AVAILABLE, message=str(e))
    return value, LocalReplica(Role.GLOBAL, 0, position, end)


def replica_refusal(store: str, replica: LocalReplica, allow_stale: bool, max_lag: int | None,
                    bound: int | None) -> tuple[FailureReason, str] | None:
    """Why ``replica`` may not answer (None: it may): a standby or a restoring replica without
    ``allow_stale``, a lag beyond ``max_lag``, a position short of ``bound``. A global store's
    copy is every instance's own (Kafka Streams answers it anywhere): only the lag and the bound
    apply."""
    p = replica.partition
    if not allow_stale:
        if replica.role is Role.STANDBY:
            return FailureReason.NOT_ACTIVE, (f"only a standby of {store!r} partition {p} is here and the query "
                                              f"requires the active")
        if replica.role is Role.RESTORING:
            return FailureReason.REBALANCING, f"store {store!r} partition {p} is restoring (lag {replica.lag})"
    if max_lag is not None and replica.lag > max_lag:
        return FailureReason.NO_REPLICA_WITHIN_LAG, f"lag {replica.lag} > max_lag {max_lag}"
    if bound is not None and replica.position < bound:
        return FailureReason.NOT_UP_TO_BOUND, f"replica at {replica.position}, bound {bound}"
    return None
