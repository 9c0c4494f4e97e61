"""The APIs spoken here: for each, its key and the generated request writer and response reader.

An :class:`Api` ties a request type to its response type, so ``Connection.call`` is typed end to
end; versions are the ones our codecs know (the broker's are negotiated in ``connection``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from instance.kafka_wire.generated import (
    api_versions_request,
    api_versions_response,
    find_coordinator_request,
    find_coordinator_response,
    offset_commit_request,
    offset_commit_response,
    streams_group_describe_request,
    streams_group_describe_response,
    streams_group_heartbeat_request,
    streams_group_heartbeat_response,
)
from instance.kafka_wire.primitives import Reader, Writer

Req = TypeVar("Req")
Resp = TypeVar("Resp")


@dataclass(frozen=True)
class Api(Generic[Req, Resp]):
    """One request/response pair: API key, the versions our codecs speak, flexible from which."""

    key: int
    name: str
    versions: tuple[int, int]
    flexible_from: int | None
    write_request: Callable[[Writer, Req, int], None]
    read_response: Callable[[Reader, int], Resp]

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


def _first_flexible(flexible: tuple[int, int] | None) -> int | None:
    return None if flexible is None else flexible[0]


API_VERSIONS: Api[api_versions_request.ApiVersionsRequest, api_versions_response.ApiVersionsResponse] = Api(
    18, "ApiVersions", api_versions_request.VALID_VERSIONS,
    _first_flexible(api_versions_request.FLEXIBLE_VERSIONS), api_versions_request.write, api_versions_response.read)
FIND_COORDINATOR: Api[find_coordinator_request.FindCoordinatorRequest,
                      find_coordinator_response.FindCoordinatorResponse] = Api(
    10, "FindCoordinator", find_coordinator_request.VALID_VERSIONS,
    _first_flexible(find_coordinator_request.FLEXIBLE_VERSIONS), find_coordinator_request.write,
    find_coordinator_response.read)
STREAMS_GROUP_HEARTBEAT: Api[streams_group_heartbeat_request.StreamsGroupHeartbeatRequest,
                             streams_group_heartbeat_response.StreamsGroupHeartbeatResponse] = Api(
    88, "StreamsGroupHeartbeat", streams_group_heartbeat_request.VALID_VERSIONS,
    _first_flexible(streams_group_heartbeat_request.FLEXIBLE_VERSIONS), streams_group_heartbeat_request.write,
    streams_group_heartbeat_response.read)
STREAMS_GROUP_DESCRIBE: Api[streams_group_describe_request.StreamsGroupDescribeRequest,
                            streams_group_describe_response.StreamsGroupDescribeResponse] = Api(
    89, "StreamsGroupDescribe", streams_group_describe_request.VALID_VERSIONS,
    _first_flexible(streams_group_describe_request.FLEXIBLE_VERSIONS), streams_group_describe_request.write,
    streams_group_describe_response.read)
#: version 9 only: the first a streams group member may commit with (its member id and epoch), and
#: the last naming topics (10 names them by topic id)
OFFSET_COMMIT: Api[offset_commit_request.OffsetCommitRequest, offset_commit_response.OffsetCommitResponse] = Api(
    8, "OffsetCommit", (9, 9), _first_flexible(offset_commit_request.FLEXIBLE_VERSIONS), offset_commit_request.write,
    offset_commit_response.read)
