"""Kafka's protocol error codes that the wire clients act on, by name.

Codes are Kafka's (its ``Errors`` enum); only those a caller here distinguishes are listed, every
other code keeps its number in :func:`error_name`.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Protocol error codes, named as Kafka names them."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    GROUP_ID_NOT_FOUND = 69
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    STALE_MEMBER_EPOCH = 113
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132


#: the coordinator moved or is loading: find it again and retry
COORDINATOR_MOVED = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                               ErrorCode.NOT_COORDINATOR})


def error_name(code: int) -> str:
    """Kafka's name of ``code`` when listed here, else ``ERROR_<code>``."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"
