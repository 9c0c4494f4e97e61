"""Whether this instance's replica may answer a query: the checks every transport shares."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from router.instance_state import State
from router.options import QueryOptions
from router.unavailable import UnavailableError, UnavailableReason


class Role(enum.StrEnum):
    """What a replica is for its task (the strings InstanceInfo and read metadata carry)."""

    ACTIVE = "ACTIVE"
    RESTORING = "RESTORING"
    STANDBY = "STANDBY"
    #: this instance's copy of a global store (every instance holds it whole; partition 0)
    GLOBAL = "GLOBAL"


@dataclass(frozen=True)
class LocalReplica:
    """The local replica a read came from: enough to decide whether it may answer."""

    role: Role
    partition: int
    position: int  # changelog offset the replica reflects; -1: the store is not logged
    end_offset: int
    #: an active that took its task over and is processing input again that its previous owner
    #: had processed (what that owner answered may be newer than this replica)
    catching_up: bool = False

    @property
    def lag(self) -> int:
        return max(0, self.end_offset - self.position) if self.position >= 0 else 0

    def is_stale(self, instance_state: State) -> bool:
        """Anything but an up-to-date active of a RUNNING instance may miss recent writes; a global
        store only when its global thread is behind its topic's end (a rebalance does not touch it)."""
        if self.role is Role.GLOBAL:
            return self.lag > 0
        return self.role is not Role.ACTIVE or instance_state is not State.RUNNING or self.lag > 0 or self.catching_up


def check_local_read(store: str, replica: LocalReplica, options: QueryOptions) -> None:
    """Raise UnavailableError if ``options`` forbid answering from ``replica``: a standby or a
    restoring replica without ``allow_stale``, a lag beyond ``max_lag``, a position short of the
    bound. A global store's copy is every instance's own (Kafka Streams answers it anywhere): only
    ``max_lag`` and the bound apply."""
    p = replica.partition
    if not options.allow_stale:
        if replica.role is Role.STANDBY:
            raise UnavailableError(UnavailableReason.NOT_ACTIVE,
                                   f"only a standby of {store!r} partition {p} is here and the query "
                                   f"requires the active")
        if replica.role is Role.RESTORING:
            raise UnavailableError(UnavailableReason.REBALANCING,
                                   f"store {store!r} partition {p} is restoring (lag {replica.lag})")
    if options.max_lag is not None and replica.lag > options.max_lag:
        raise UnavailableError(UnavailableReason.NO_REPLICA_WITHIN_LAG,
                               f"lag {replica.lag} > max_lag {options.max_lag}")
    bound = options.bound
    if bound is not None and bound.partition == p and replica.position < bound.offset:
        raise UnavailableError(UnavailableReason.NOT_UP_TO_BOUND,
                               f"replica at {replica.position}, bound {bound.offset}")
