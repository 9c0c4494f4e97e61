"""StreamsGroupDescribe: a streams group's state, epochs and members with their tasks, as frozen
values (what ``kafka-streams-groups.sh --describe`` shows)."""

from __future__ import annotations

from dataclasses import dataclass

from instance.kafka_wire.apis import STREAMS_GROUP_DESCRIBE
from instance.kafka_wire.coordinator import connect_coordinator
from instance.kafka_wire.error_codes import ErrorCode, error_name
from instance.kafka_wire.generated import streams_group_describe_response as sgd
from instance.kafka_wire.generated.streams_group_describe_request import StreamsGroupDescribeRequest
from instance.kafka_wire.wire_auth import PLAINTEXT, BrokerAuth
from instance.runtime.streams_group.assignment import Assignment, task_ids
from instance.runtime.streams_group.errors import StreamsGroupError
from kernel.metadata import HostInfo


class GroupNotFoundError(StreamsGroupError):
    """No streams group of that id (GROUP_ID_NOT_FOUND; a classic or consumer group of that id too)."""


@dataclass(frozen=True)
class DescribedMember:
    """One member as the coordinator lists it: its current and target assignment."""

    member_id: str
    member_epoch: int
    instance_id: str | None
    process_id: str
    client_id: str
    client_host: str
    user_endpoint: HostInfo | None
    topology_epoch: int
    assignment: Assignment
    target_assignment: Assignment


@dataclass(frozen=True)
class StreamsGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    topology_epoch: int | None
    members: tuple[DescribedMember, ...]

    def member(self, member_id: str) -> DescribedMember | None:
        return next((m for m in self.members if m.member_id == member_id), None)


def _assignment(a: sgd.Assignment) -> Assignment:
    return Assignment(task_ids(a.active_tasks), task_ids(a.standby_tasks), task_ids(a.warmup_tasks))


def _member(m: sgd.Member) -> DescribedMember:
    endpoint = None if m.user_endpoint is None else HostInfo(m.user_endpoint.host, m.user_endpoint.port)
    return DescribedMember(m.member_id, m.member_epoch, m.instance_id, m.process_id, m.client_id, m.client_host,
                           endpoint, m.topology_epoch, _assignment(m.assignment), _assignment(m.target_assignment))


def describe_streams_group(bootstrap: str, group_id: str, *, auth: BrokerAuth = PLAINTEXT,
                           timeout: float = 10.0) -> StreamsGroupDescription:
    """The group as its coordinator describes it. Raises GroupNotFoundError, StreamsGroupError for
    other refusals, BrokerConnectionError (ApiNotOfferedError on a broker without the API)."""
    with connect_coordinator(bootstrap, group_id, auth=auth, timeout=timeout) as conn:
        answer = conn.call(STREAMS_GROUP_DESCRIBE, StreamsGroupDescribeRequest(group_ids=(group_id,)))
    if len(answer.groups) != 1:
        raise StreamsGroupError(f"describing streams group {group_id!r}: {len(answer.groups)} groups answered")
    g = answer.groups[0]
    if g.error_code:
        kind = GroupNotFoundError if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND else StreamsGroupError
        said = f": {g.error_message}" if g.error_message else ""
        raise kind(f"describing streams group {group_id!r}: {error_name(g.error_code)}{said}", g.error_code)
    return StreamsGroupDescription(g.group_id, g.group_state, g.group_epoch, g.assignment_epoch,
                                   None if g.topology is None else g.topology.epoch,
                                   tuple(_member(m) for m in g.members))
