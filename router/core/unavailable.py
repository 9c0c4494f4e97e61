"""Why no replica could answer a query: the reasons and the one exception that carries them."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence


class UnavailableReason(enum.Enum):
    """Machine-readable reason of a refused query; gRPC carries it in a status's typed details
    (router/core/status_details.py), a scan in its PartitionStatus. Declaration order is priority
    order: when several replicas refused for different reasons, the first one here is reported,
    because it tells the caller most about what to do (a bound or a lag limit is the caller's
    choice; the others are the cluster's state)."""

    NOT_UP_TO_BOUND = "NOT_UP_TO_BOUND"
    NO_REPLICA_WITHIN_LAG = "NO_REPLICA_WITHIN_LAG"
    REBALANCING = "REBALANCING"
    NOT_ACTIVE = "NOT_ACTIVE"
    NOT_AVAILABLE = "NOT_AVAILABLE"

    @staticmethod
    def most_relevant(reasons: Iterable[UnavailableReason]) -> UnavailableReason:
        """The highest-priority reason of ``reasons``; NOT_AVAILABLE when there is none."""
        order = list(UnavailableReason)
        return min(reasons, key=order.index, default=UnavailableReason.NOT_AVAILABLE)

    @staticmethod
    def named(name: str) -> UnavailableReason:
        """The reason called ``name`` (a scan's PartitionStatus carries it in a field of its
        own); NOT_AVAILABLE for a name this version does not know."""
        return UnavailableReason.__members__.get(name, UnavailableReason.NOT_AVAILABLE)


#: what a refused strict read may do instead, when ``standby_holds``
STALE_HINT = ("a standby holds this partition: allow stale reads to be answered there, possibly behind "
              "(--allow-stale, allow_stale=true)")


class UnavailableError(Exception):
    """No replica can answer now. ``tried`` lists the instance ids that were asked, in order;
    ``standby_holds``: the read was strict and a standby holds the partition, so a stale read
    would be answered (the hint travels typed; :data:`STALE_HINT` says it to people)."""

    def __init__(self, reason: UnavailableReason, message: str, tried: Sequence[str] = (),
                 standby_holds: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.tried = tuple(tried)
        self.standby_holds = standby_holds
