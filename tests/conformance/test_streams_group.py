"""Broker conformance for the streams group protocol (KIP-1071): what each broker does with
StreamsGroupHeartbeat (API key 88) and StreamsGroupDescribe (89), through iqmesh's own member client
(instance/runtime/streams_group) and the codecs generated from Kafka's specs (instance/kafka_wire).

Recorded (Apache Kafka 4.4.0 and the dev broker noida-db, this suite's two brokers):
- ApiVersions: Kafka 4.4.0 offers 88 and 89 in versions 0-1; the dev broker offers neither (nor
  ConsumerGroupHeartbeat, 68), so ``group.protocol=streams`` is refused on it at start-up.
- Kafka creates the internal topics itself (status MISSING_INTERNAL_TOPICS on the first heartbeats,
  gone once they exist), holds the first assignment for its initial rebalance delay (status
  ASSIGNMENT_DELAYED), dictates a 5 s heartbeat interval, and answers a heartbeat with a wrong
  epoch FENCED_MEMBER_EPOCH, one from an unknown member UNKNOWN_MEMBER_ID, a topology without source
  topics STREAMS_INVALID_TOPOLOGY, and another topology in a running group INVALID_REQUEST ("Topology
  updates are not supported yet"), without disturbing the members in the group.
Real brokers only; every wait polls a condition with a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from instance.kafka_wire.apis import STREAMS_GROUP_HEARTBEAT
from instance.kafka_wire.connection import connect_any
from instance.kafka_wire.coordinator import connect_coordinator
from instance.kafka_wire.error_codes import ErrorCode
from instance.kafka_wire.errors import ApiNotOfferedError
from instance.kafka_wire.generated import streams_group_heartbeat_request as hb
from instance.runtime.streams_group.declaration import Declaration, declare
from instance.runtime.streams_group.describe import GroupNotFoundError, describe_streams_group
from instance.runtime.streams_group.errors import InvalidRequestError, InvalidTopologyError
from instance.runtime.streams_group.member import MemberIdentity, StreamsGroupMember
from instance.runtime.streams_group.status import GroupStatus
from instance.serde import StringSerde
from instance.topology import StreamsBuilder, Topology
from kernel.metadata import HostInfo
from kernel.task_id import TaskId
from tests.conformance.test_broker import NO_STREAMS_PROTOCOL, create_topics

pytestmark = pytest.mark.integration

TIMEOUT = 60.0
PARTITIONS = 4
kafka_only = pytest.mark.skipif(bool(NO_STREAMS_PROTOCOL), reason=NO_STREAMS_PROTOCOL)


def wait_for(cond: Callable[[], bool], members: Iterable[StreamsGroupMember], what: str,
             timeout: float = TIMEOUT) -> None:
    """Heartbeat ``members`` as they are due until ``cond()``; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    members = list(members)
    while not cond():
        if time.monotonic() > deadline:
            states = "; ".join(f"{m.member_id[:8]} epoch {m.epoch} {m.assignment} "
                               f"{[str(s) for s in m.statuses]}" for m in members)
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} ({states})")
        for m in members:
            m.poll()
        time.sleep(0.02)


def word_count(source: str, store: str = "counts") -> Topology:
    """Two sub-topologies: the source re-keyed into a repartition topic, counted into a logged store."""
    builder = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    builder.stream(source).group_by(lambda _key, word: word).count(store).to_stream().to(f"{source}-out")
    return builder.build()


def new_member(bootstrap: str, app: str, declaration: Declaration, port: int) -> StreamsGroupMember:
    return StreamsGroupMember(bootstrap, MemberIdentity(app, f"process-{port}", HostInfo("127.0.0.1", port)),
                              declaration)


def all_tasks(declaration: Declaration) -> set[TaskId]:
    return {TaskId(s.subtopology, p) for s in declaration.sources for p in range(PARTITIONS)}


def settled(members: list[StreamsGroupMember], declaration: Declaration) -> bool:
    """Every task active on exactly one member, no member waiting, each member's map up to date."""
    actives = [m.assignment.active for m in members]
    union = set().union(*actives)
    return (union == all_tasks(declaration) and sum(map(len, actives)) == len(union)
            and all(a for a in actives) and not any(m.has(GroupStatus.ASSIGNMENT_DELAYED) for m in members)
            and all(m.endpoints.endpoints == {m2.identity.user_endpoint for m2 in members} for m in members))


# --------------------------------------------------------------------------------------------------------


def test_api_versions_lists_the_streams_group_apis_on_kafka_only(bootstrap: str) -> None:
    with connect_any(bootstrap) as conn:
        heartbeat, describe = conn.offered(88), conn.offered(89)
    if NO_STREAMS_PROTOCOL:  # the dev broker, Apache Kafka before 4.2
        assert heartbeat is None and describe is None, f"the streams group APIs are offered ({NO_STREAMS_PROTOCOL})"
        with pytest.raises(ApiNotOfferedError, match="StreamsGroupDescribe"):
            describe_streams_group(bootstrap, "any-group", timeout=10)
    else:
        assert heartbeat is not None and describe is not None
        assert heartbeat[0] == 0 and heartbeat[1] >= 0 and describe[0] == 0, (heartbeat, describe)


@kafka_only
def test_two_members_share_the_tasks_then_one_leaves(bootstrap: str, admin: AdminClient, unique: str) -> None:
    app, source = f"sg-{unique}", f"sg-in-{unique}"
    create_topics(admin, {source: PARTITIONS})
    declaration = declare(word_count(source), app, replication_factor=1)
    members = [new_member(bootstrap, app, declaration, port) for port in (7101, 7102)]
    try:
        wait_for(lambda: settled(members, declaration), members, "both members to hold disjoint tasks")
        first, second = members
        # the broker made the internal topics, with the task count and iqmesh's settings
        topics = admin.list_topics(timeout=10).topics
        changelog, repartition = f"{app}-counts-changelog", f"{app}-counts-repartition"
        assert len(topics[changelog].partitions) == PARTITIONS and len(topics[repartition].partitions) == PARTITIONS
        configs = next(iter(admin.describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, changelog)]).values())).result(timeout=10)
        assert configs["cleanup.policy"].value == "compact"
        assert not any(m.has(GroupStatus.MISSING_INTERNAL_TOPICS) for m in members)
        # the endpoint map: each endpoint serves the partitions of its member's active tasks
        for m in members:
            owned = m.endpoints.of(m.identity.user_endpoint)  # type: ignore[arg-type]
            assert owned is not None
            assert owned.active == set().union(*(declaration.partitions_of(t) for t in m.assignment.active))
        assert first.endpoints.active_owner(source, 0) in {first.identity.user_endpoint, second.identity.user_endpoint}
        # describe lists both, with what they hold
        described = describe_streams_group(bootstrap, app)
        assert described.state == "Stable" and {m.member_id for m in described.members} == \
            {m.member_id for m in members}
        for m in members:
            d = described.member(m.member_id)
            assert d is not None and d.assignment == m.assignment and d.member_epoch == m.epoch
            assert d.process_id == m.identity.process_id and d.user_endpoint == m.identity.user_endpoint
        # one leaves: the other takes every task, and the map names it alone
        first.leave()
        assert first.assignment.empty
        wait_for(lambda: second.assignment.active == all_tasks(declaration)
                 and second.endpoints.endpoints == {second.identity.user_endpoint}, [second],
                 "the remaining member to take every task")
        assert [m.member_id for m in describe_streams_group(bootstrap, app).members] == [second.member_id]
    finally:
        for m in members:
            m.close()


@kafka_only
def test_error_answers_fence_and_refuse_without_disturbing_the_group(bootstrap: str, admin: AdminClient,
                                                                      unique: str) -> None:
    app, source = f"sg-{unique}", f"sg-in-{unique}"
    create_topics(admin, {source: PARTITIONS})
    declaration = declare(word_count(source), app, replication_factor=1)
    member = new_member(bootstrap, app, declaration, 7103)
    try:
        wait_for(lambda: member.assignment.active == all_tasks(declaration), [member], "the member to hold every task")
        with connect_coordinator(bootstrap, app) as conn:
            wrong_epoch = conn.call(STREAMS_GROUP_HEARTBEAT, hb.StreamsGroupHeartbeatRequest(
                group_id=app, member_id=member.member_id, member_epoch=member.epoch + 10))
            unknown = conn.call(STREAMS_GROUP_HEARTBEAT, hb.StreamsGroupHeartbeatRequest(
                group_id=app, member_id=f"nobody-{unique}", member_epoch=3))
        assert wrong_epoch.error_code == ErrorCode.FENCED_MEMBER_EPOCH, wrong_epoch
        assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID, unknown
        # another topology in this group: refused in one line, the running member untouched
        other = StreamsGroupMember(bootstrap, MemberIdentity(app, "other"), declare(word_count(source, "c2"), app))
        with pytest.raises(InvalidRequestError, match="INVALID_REQUEST"):
            other.heartbeat()
        epoch = member.epoch
        member.heartbeat()
        assert member.epoch == epoch and member.rejoins == 0 and member.assignment.active == all_tasks(declaration)
    finally:
        member.close()


@kafka_only
def test_a_topology_without_sources_is_refused_as_invalid(bootstrap: str, unique: str) -> None:
    empty = Declaration(hb.Topology(epoch=0, subtopologies=(hb.Subtopology(subtopology_id="0"),)), ())
    member = StreamsGroupMember(bootstrap, MemberIdentity(f"sg-bad-{unique}", "p"), empty)
    with pytest.raises(InvalidTopologyError, match="STREAMS_INVALID_TOPOLOGY") as refused:
        member.heartbeat()
    assert "\n" not in str(refused.value)


@kafka_only
def test_describe_of_an_unknown_group(bootstrap: str, unique: str) -> None:
    with pytest.raises(GroupNotFoundError, match="GROUP_ID_NOT_FOUND"):
        describe_streams_group(bootstrap, f"sg-none-{unique}")
