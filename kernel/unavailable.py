"""Why no replica could answer a query: the one reason vocabulary (the runtime's query results,
routing, the gRPC details, scans, the clients and the gateway all speak it) and the one exception
that carries it."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence


class FailureReason(enum.StrEnum):
    """Why a replica, or the cluster, refused a query: Kafka Streams IQv2's ``FailureReason`` as
    routing needs it (a partition not held here and one held only as a standby are both
    NOT_ACTIVE: the query goes to the active elsewhere). A str whose value is its name: the REST
    API and the CLI print it as is; gRPC carries its proto mirror (``QueryRefusal.Reason``,
    kernel/wire_enums.py). Declaration order is priority order: when several replicas refused
    for different reasons, the first one here is reported, because it tells the caller most about
    what to do (a bound or a lag limit is the caller's choice; the others are the cluster's state)."""

    #: the replica's position is short of the request's position bound
    NOT_UP_TO_BOUND = "NOT_UP_TO_BOUND"
    #: the replica is further behind its changelog's end than the request's max_lag
    NO_REPLICA_WITHIN_LAG = "NO_REPLICA_WITHIN_LAG"
    #: the partition is moving or its active is restoring, and the request wants an up-to-date one
    REBALANCING = "REBALANCING"
    #: the active is not here (a standby only, no replica, or its store closed under the read:
    #: migrated) and the request wants the active
    NOT_ACTIVE = "NOT_ACTIVE"
    #: no replica can answer now (not started, a global store loading or closing, unreachable)
    NOT_AVAILABLE = "NOT_AVAILABLE"

    @staticmethod
    def most_relevant(reasons: Iterable[FailureReason]) -> FailureReason:
        """The highest-priority reason of ``reasons``; NOT_AVAILABLE when there is none."""
        return min(reasons, key=_PRIORITY.__getitem__, default=FailureReason.NOT_AVAILABLE)


_PRIORITY = {r: i for i, r in enumerate(FailureReason)}

#: what a refused strict read may do instead, when ``standby_holds``
STALE_HINT = ("a standby holds this partition: allow stale reads to be answered there, possibly behind "
              "(--allow-stale, allow_stale=true)")


class UnavailableError(Exception):
    """No replica can answer now. ``tried`` lists the instance ids that were asked, in order;
    ``standby_holds``: the read was strict and a standby holds the partition, so a stale read
    would be answered (the hint travels typed; :data:`STALE_HINT` says it to people)."""

    def __init__(self, reason: FailureReason, message: str, tried: Sequence[str] = (),
                 standby_holds: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.tried = tuple(tried)
        self.standby_holds = standby_holds
