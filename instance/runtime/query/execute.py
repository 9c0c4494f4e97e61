"""Running a :class:`StateQueryRequest` on this instance: resolve the partitions (a key is
serialized and hashed once), read each partition's local replica, refuse what the request's
bounds exclude. The one place that decides whether a local replica may answer."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from instance.errors import InvalidStateStoreException, StreamsNotStartedException
from instance.runtime.global_thread import GlobalStreamThread
from instance.runtime.internal_topics import TopicLayout
from instance.runtime.query.replicas import hosted_partitions, read_global, read_partition
from instance.runtime.query.request import KEYED_QUERIES, StateQueryRequest, check_store_kind
from instance.runtime.query.result import FailureReason, QueryResult, StateQueryResult
from instance.runtime.states import State
from instance.runtime.task_manager import TaskManager
from instance.state.spec import StoreSpec
from instance.topology.topology import Topology
from router.core.local_read import LocalReplica, Role

R = TypeVar("R")


class QueryHost(Protocol):
    """What running a query needs of ``KafkaStreams``."""

    topology: Topology
    layout: TopicLayout | None
    global_thread: GlobalStreamThread | None

    @property
    def state(self) -> State: ...

    def task_managers(self) -> list[TaskManager]: ...

    def store_tasks(self, store: str) -> tuple[int, int]: ...

    def store_spec(self, store: str) -> StoreSpec: ...

    def store_partition(self, store: str, key: Any) -> tuple[int, int]: ...


def execute(host: QueryHost, request: StateQueryRequest[R]) -> StateQueryResult[R]:
    """The result per partition of ``request``. Raises for the request as a whole: unknown store
    (UnknownStateStoreException), not started or a global store still loading
    (StreamsNotStartedException), a query the store cannot answer (ValueError)."""
    store, query = request.store, request.query
    check_store_kind(store, host.store_spec(store), query.store_kind)  # raises for an unknown store
    if store in host.topology.global_stores:
        return StateQueryResult({0: _global_result(host, request)})
    partitions = request.partitions
    if partitions is None:
        if isinstance(query, KEYED_QUERIES):
            partitions = (host.store_partition(store, query.key)[1],)  # serialized and hashed once
        else:
            host.store_tasks(store)  # raises when not started
            partitions = tuple(hosted_partitions(host.task_managers(), store))
    elif host.layout is None:
        raise StreamsNotStartedException("KafkaStreams is not started; call start() first")
    if len(partitions) == 1:  # a key's partition (a Get): no comprehension to run
        return StateQueryResult({partitions[0]: partition_result(host, request, partitions[0])})
    return StateQueryResult({p: partition_result(host, request, p) for p in partitions})


def partition_result(host: QueryHost, request: StateQueryRequest[R], partition: int) -> QueryResult[R]:
    """``request`` answered by this instance's replica of ``partition``, or refused."""
    store = request.store
    if not host.state.is_running_or_rebalancing():
        return QueryResult(partition, failure=FailureReason.NOT_PRESENT,
                           message=f"cannot query: instance state is {host.state.name}")
    assert host.layout is not None  # started: execute checked
    try:
        read = read_partition(host.task_managers(), host.layout.changelogs.get(store), store, partition,
                              request.query, request.allow_stale)
    except InvalidStateStoreException as e:  # closed while we read (migrated)
        return QueryResult(partition, failure=FailureReason.STORE_EXCEPTION, message=str(e))
    if read is None:
        return QueryResult(partition, failure=FailureReason.NOT_PRESENT,
                           message=f"store {store!r} partition {partition} is not hosted on this instance (migrated?)")
    value, replica = read
    return _checked(store, value, replica, request)


def _global_result(host: QueryHost, request: StateQueryRequest[R]) -> QueryResult[R]:
    """A global store: this instance's whole copy, as partition 0 (every instance holds one and
    answers it, as in Kafka Streams; role GLOBAL)."""
    store = request.store
    if host.state is State.CREATED:
        raise StreamsNotStartedException("KafkaStreams is not started; call start() first")
    if not host.state.is_running_or_rebalancing():
        raise InvalidStateStoreException(f"cannot query: instance state is {host.state.name}")
    g = host.global_thread
    if g is None:
        raise StreamsNotStartedException(
            f"global store {store!r} is not queryable yet: the global thread is still loading it "
            f"(instance state {host.state.name}); retry once the instance is RUNNING")
    try:
        value, replica = read_global(g, host.topology.global_stores[store].topic, store, request.query)
    except InvalidStateStoreException as e:  # closed while we read (shutting down)
        return QueryResult(0, failure=FailureReason.STORE_EXCEPTION, message=str(e))
    return _checked(store, value, replica, request)


def _checked(store: str, value: R | None, replica: LocalReplica, request: StateQueryRequest[R]) -> QueryResult[R]:
    if replica.role is Role.ACTIVE and request.max_lag is None and request.position_bound.position is None:
        return QueryResult(replica.partition, value, replica)  # nothing to check: the commonest read
    bound = request.position_bound.bound_for(replica.partition)
    failure = replica_refusal(store, replica, request.allow_stale, request.max_lag, bound)
    if failure is not None:
        return QueryResult(replica.partition, replica=replica, failure=failure[0], message=failure[1])
    return QueryResult(replica.partition, value, replica)


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
            return FailureReason.RESTORING, f"store {store!r} partition {p} is restoring (lag {replica.lag})"
    if max_lag is not None and replica.lag > max_lag:
        return FailureReason.LAG_ABOVE_BOUND, f"lag {replica.lag} > max_lag {max_lag}"
    if bound is not None and replica.position < bound:
        return FailureReason.NOT_UP_TO_BOUND, f"replica at {replica.position}, bound {bound}"
    return None
