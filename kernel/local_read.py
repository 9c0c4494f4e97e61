"""Which replica answered a query and how fresh it is: the vocabulary the instance's query path
(instance/runtime/query, which decides whether a replica may answer) and read metadata share."""

from __future__ import annotations

import enum
from typing import NamedTuple

from kernel.instance_state import State


class Role(enum.StrEnum):
    """What a replica is for its task (the strings InstanceInfo and read metadata carry)."""

    ACTIVE = "ACTIVE"
    RESTORING = "RESTORING"
    STANDBY = "STANDBY"
    #: this instance's copy of a global store (every instance holds it whole; partition 0)
    GLOBAL = "GLOBAL"


class LocalReplica(NamedTuple):
    """The local replica a read came from: enough to decide whether it may answer (a named
    tuple: one is built per query, and a frozen dataclass costs three times as much)."""

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
