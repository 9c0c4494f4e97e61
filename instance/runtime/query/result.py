"""What a query answers: per partition, the result and the replica that gave it, or why not."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Generic, NamedTuple, TypeVar

from router.core.local_read import LocalReplica

R = TypeVar("R")


class FailureReason(enum.Enum):
    """Why a partition did not answer (Kafka Streams' ``FailureReason``, with the refusals its
    IQv2 has no bound for: a restoring replica and a lag limit)."""

    #: no replica of the partition on this instance (or the instance is not running)
    NOT_PRESENT = "NOT_PRESENT"
    #: only a standby is here, and the request wants the active
    NOT_ACTIVE = "NOT_ACTIVE"
    #: the active here is restoring, and the request wants an up-to-date one
    RESTORING = "RESTORING"
    #: the replica's position is short of the request's position bound
    NOT_UP_TO_BOUND = "NOT_UP_TO_BOUND"
    #: the replica is further behind its changelog's end than the request's max_lag
    LAG_ABOVE_BOUND = "LAG_ABOVE_BOUND"
    #: the store failed while read (closed under the query: migrated, or shutting down)
    STORE_EXCEPTION = "STORE_EXCEPTION"


class QueryResult(NamedTuple, Generic[R]):
    """One partition's outcome: ``result`` on success, else ``failure`` and ``message``.
    ``replica`` is the local replica that answered or refused (None when there is none). A
    named tuple, as the request: one per Get."""

    partition: int
    result: R | None = None
    replica: LocalReplica | None = None
    failure: FailureReason | None = None
    message: str = ""

    @property
    def is_success(self) -> bool:
        return self.failure is None

    @property
    def position(self) -> int:
        """The changelog offset the answering replica reflects (-1: not logged, or no replica)."""
        return -1 if self.replica is None else self.replica.position


class StateQueryResult(NamedTuple, Generic[R]):
    """Kafka Streams' ``StateQueryResult``: a result per partition asked (a global store: one,
    partition 0)."""

    partition_results: Mapping[int, QueryResult[R]]

    def only_partition_result(self) -> QueryResult[R]:
        """The result of a request that asked one partition (ValueError otherwise)."""
        if len(self.partition_results) != 1:
            raise ValueError(f"{len(self.partition_results)} partition results, not one")
        return next(iter(self.partition_results.values()))

    @property
    def position(self) -> dict[int, int]:
        """Partition -> position of every partition that answered (Kafka Streams merges the
        partitions' positions the same way)."""
        return {p: r.position for p, r in self.partition_results.items() if r.is_success}
