"""The group statuses a StreamsGroupHeartbeat answer may carry (Kafka's status codes)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class GroupStatus(Enum):
    """Why the group is not (yet) running as declared; codes as the broker sends them."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6
    #: a code this build does not know (a newer broker)
    UNKNOWN = -1

    @staticmethod
    def of(code: int) -> GroupStatus:
        try:
            return GroupStatus(code)
        except ValueError:
            return GroupStatus.UNKNOWN


@dataclass(frozen=True)
class StatusReport:
    """One status with the broker's detail (which topics are missing, ...)."""

    status: GroupStatus
    code: int
    detail: str

    def __str__(self) -> str:
        return f"{self.status.name}: {self.detail}" if self.detail else self.status.name
