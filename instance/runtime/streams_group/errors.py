"""The error answers of StreamsGroupHeartbeat as types, and what a member does about each.

Fenced epoch and unknown member id make the member drop its tasks and join again with epoch 0;
a moved coordinator is looked up again; UNKNOWN_SERVER_ERROR is retried for a while (Kafka 4.4.0
answers it to a member that joins while a source topic created a moment before is not yet in the
coordinator's metadata: a NoSuchElementException in its EndpointToPartitionsManager, measured in
tests/conformance); a static id still held (UNRELEASED_INSTANCE_ID: the killed previous run of a
restarted static member, until the group's session timeout) is asked for again every second for up
to five minutes; everything else stops the member with a one-line error (an invalid topology,
another application's topology in the group, a full group, a static id taken by another member,
missing rights).
"""

from __future__ import annotations

from enum import Enum

from instance.errors import StreamsException
from instance.kafka_wire.error_codes import COORDINATOR_MOVED, ErrorCode, error_name


class Reaction(Enum):
    """What a member does about an error answer."""

    REJOIN = "rejoin"          # drop every task, join again with epoch 0 (same member id)
    FIND_COORDINATOR = "find"  # reconnect to the (new) coordinator and send again
    RETRY = "retry"            # send again after a pause, up to the member's timeout
    #: join again after a pause until the broker lets go of the group.instance.id (a restarted
    #: static member whose previous run was killed holds it until the group's session timeout)
    WAIT_FOR_RELEASE = "wait"
    FAIL = "fail"              # stop: raise the typed error


class StreamsGroupError(StreamsException):
    """The broker refused this member; ``code`` is Kafka's error code."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class InvalidTopologyError(StreamsGroupError):
    """The broker found the declared topology invalid (STREAMS_INVALID_TOPOLOGY)."""


class TopologyEpochError(StreamsGroupError):
    """The declared topology epoch is invalid, or older than the group's (STREAMS_INVALID_TOPOLOGY_EPOCH,
    STREAMS_TOPOLOGY_FENCED): another version of the application runs in this group."""


class GroupMaxSizeError(StreamsGroupError):
    """The group has as many members as the broker allows (GROUP_MAX_SIZE_REACHED)."""


class InstanceIdInUseError(StreamsGroupError):
    """Another member holds this group.instance.id (UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID)."""


class GroupAuthorizationError(StreamsGroupError):
    """The principal may not join the group or read its topics (GROUP_/TOPIC_/CLUSTER_AUTHORIZATION_FAILED)."""


class InvalidRequestError(StreamsGroupError):
    """The broker found the request invalid (INVALID_REQUEST): Kafka 4.4 answers so to a member that
    declares another topology than the group's ("Topology updates are not supported yet")."""


class MemberFencedError(StreamsGroupError):
    """This member's epoch or id is no longer the group's (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
    its tasks are gone; raised only where a caller asked not to rejoin."""


_FAILURES: dict[int, tuple[type[StreamsGroupError], str]] = {
    ErrorCode.STREAMS_INVALID_TOPOLOGY: (InvalidTopologyError, "the broker refused the topology"),
    ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH: (TopologyEpochError, "the broker refused the topology epoch"),
    ErrorCode.STREAMS_TOPOLOGY_FENCED: (TopologyEpochError, "the group runs a newer topology of this application"),
    ErrorCode.INVALID_REQUEST: (InvalidRequestError, "the broker refused the request"),
    ErrorCode.GROUP_MAX_SIZE_REACHED: (GroupMaxSizeError, "the group is full (the broker's group.streams.max.size)"),
    ErrorCode.UNRELEASED_INSTANCE_ID: (InstanceIdInUseError, "another member still holds this group.instance.id"),
    ErrorCode.FENCED_INSTANCE_ID: (InstanceIdInUseError, "another member took this group.instance.id"),
    ErrorCode.GROUP_AUTHORIZATION_FAILED: (GroupAuthorizationError, "not authorized to join the group"),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: (GroupAuthorizationError, "not authorized for the topology's topics"),
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: (GroupAuthorizationError,
                                             "not authorized to create the internal topics"),
}
_REJOIN = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})


def reaction(code: int) -> Reaction:
    if code in _REJOIN:
        return Reaction.REJOIN
    if code in COORDINATOR_MOVED:
        return Reaction.FIND_COORDINATOR
    if code == ErrorCode.UNKNOWN_SERVER_ERROR:
        return Reaction.RETRY
    if code == ErrorCode.UNRELEASED_INSTANCE_ID:
        return Reaction.WAIT_FOR_RELEASE
    return Reaction.FAIL


def error_for(code: int, message: str | None, group_id: str) -> StreamsGroupError:
    """The typed error of an answer, in one line: what happened, Kafka's error name, its message."""
    kind, what = _FAILURES.get(code, (StreamsGroupError, "the broker refused the member"))
    if code in _REJOIN:
        kind, what = MemberFencedError, "this member was fenced out of the group"
    said = f": {message}" if message else ""
    return kind(f"streams group {group_id!r}: {what} ({error_name(code)}{said})", code)
