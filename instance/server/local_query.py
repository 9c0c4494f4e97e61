"""How the query server asks this instance's replica of one partition: ``KafkaStreams.query``
with the wire's options, a refusal turned into the UnavailableError routing passes on (to the
next candidate, or to the caller), and the read metadata of the replica that answered."""

from __future__ import annotations

from typing import TypeVar

from instance.runtime.kafka_streams import KafkaStreams
from instance.runtime.query import UNBOUNDED, FailureReason, PositionBound, Query, StateQueryRequest
from instance.runtime.query.result import QueryResult
from instance.server.replies import read_metadata
from router.core.options import QueryOptions
from router.core.unavailable import UnavailableError, UnavailableReason
from router.rpc import iqmesh_pb2 as pb

R = TypeVar("R")

#: the refusal routing sees for each failure (STORE_EXCEPTION: see :func:`_reason`)
_REASONS = {
    FailureReason.NOT_PRESENT: UnavailableReason.NOT_ACTIVE,
    FailureReason.NOT_ACTIVE: UnavailableReason.NOT_ACTIVE,
    FailureReason.RESTORING: UnavailableReason.REBALANCING,
    FailureReason.NOT_UP_TO_BOUND: UnavailableReason.NOT_UP_TO_BOUND,
    FailureReason.LAG_ABOVE_BOUND: UnavailableReason.NO_REPLICA_WITHIN_LAG,
}


def ask_local(streams: KafkaStreams, store: str, query: Query[R], partition: int,
              options: QueryOptions) -> tuple[R, pb.ReadMetadata]:
    """``query`` answered by this instance's replica of ``partition`` (a global store: its whole
    copy), with its read metadata; UnavailableError when that replica may not answer."""
    bound = UNBOUNDED if options.bound is None else PositionBound.at({options.bound.partition: options.bound.offset})
    result = streams.query(StateQueryRequest(store, query, (partition,), bound, options.allow_stale,
                                             options.max_lag)).only_partition_result()
    if result.failure is not None:
        raise UnavailableError(_reason(streams, store, result), result.message)
    assert result.replica is not None  # a success names its replica
    meta = read_metadata(store, result.replica, streams.instance_id, streams.config.application_server,
                         streams.state)
    return result.result, meta  # type: ignore[return-value]  # None is a result too (a key not found)


def _reason(streams: KafkaStreams, store: str, result: QueryResult[R]) -> UnavailableReason:
    """A store closed under the read: its partition migrated (NOT_ACTIVE), or a global store's
    instance is shutting down (NOT_AVAILABLE: no other replica is better placed)."""
    assert result.failure is not None
    if result.failure is FailureReason.STORE_EXCEPTION:
        return UnavailableReason.NOT_AVAILABLE if streams.is_global_store(store) else UnavailableReason.NOT_ACTIVE
    return _REASONS[result.failure]
