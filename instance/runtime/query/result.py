"""What a query answers: per partition, the result and the replica that gave it, or why not (a
:class:`FailureReason`: the one reason vocabulary, kernel/unavailable.py, which routing passes
on as it is)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, NamedTuple, TypeVar

from kernel.local_read import LocalReplica
from kernel.unavailable import FailureReason

R = TypeVar("R")


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
