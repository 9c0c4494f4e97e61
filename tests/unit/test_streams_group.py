"""The streams group member's pure parts (instance/runtime/streams_group): the topology as the
protocol declares it, the broker's answers as values, its error codes and statuses as types, and
``group.protocol=streams`` as a recognised setting. The member against real brokers is in
tests/conformance/test_streams_group.py."""

from __future__ import annotations

import pytest

from instance.config import StreamsConfig
from instance.errors import ConfigException
from instance.kafka_wire.error_codes import ErrorCode
from instance.kafka_wire.generated import streams_group_heartbeat_response as hbr
from instance.runtime.streams_group.assignment import PartitionsByEndpoint, task_entries, task_ids
from instance.runtime.streams_group.declaration import declare
from instance.runtime.streams_group.errors import (
    GroupMaxSizeError,
    InstanceIdInUseError,
    InvalidTopologyError,
    MemberFencedError,
    Reaction,
    StreamsGroupError,
    TopologyEpochError,
    error_for,
    reaction,
)
from instance.runtime.streams_group.status import GroupStatus
from instance.serde import StringSerde
from instance.topology import StreamsBuilder, Topology
from kernel.metadata import HostInfo
from kernel.task_id import TaskId


def _word_count() -> Topology:
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    b.stream("lines").group_by(lambda _k, w: w).count("counts").to_stream().to("out")
    return b.build()


def test_a_word_count_declares_its_repartition_and_changelog_topics() -> None:
    d = declare(_word_count(), "app", replication_factor=3)
    first, second = d.topology.subtopologies
    assert (first.subtopology_id, first.source_topics, first.repartition_sink_topics) == \
        ("0", ("lines",), ("app-counts-repartition",))
    assert first.state_changelog_topics == () and first.copartition_groups == ()
    assert second.source_topics == () and [t.name for t in second.repartition_source_topics] == \
        ["app-counts-repartition"]
    repartition, = second.repartition_source_topics
    changelog, = second.state_changelog_topics
    assert (repartition.partitions, repartition.replication_factor) == (0, 3)  # the broker derives the count
    assert {(kv.key, kv.value) for kv in repartition.topic_configs} == {("cleanup.policy", "delete")}
    assert (changelog.name, changelog.partitions) == ("app-counts-changelog", 0)
    assert {(kv.key, kv.value) for kv in changelog.topic_configs} == {("cleanup.policy", "compact")}
    assert d.partitions_of(TaskId(1, 2)) == {("app-counts-repartition", 2)}
    assert d.partitions_of(TaskId(0, 3)) == {("lines", 3)}
    assert declare(_word_count(), "app", replication_factor=-1).topology.subtopologies[1] \
        .repartition_source_topics[0].replication_factor == 0  # -1 (broker default) is 0 on the wire


def test_a_join_declares_its_co_partition_group_by_index() -> None:
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    b.stream("left").join(b.table("right", materialized="r"), lambda a, c: a + c).to("joined")
    sub, = declare(b.build(), "app").topology.subtopologies
    assert sub.source_topics == ("left", "right")
    assert [(g.source_topics, g.repartition_source_topics) for g in sub.copartition_groups] == [((0, 1), ())]
    assert [t.name for t in sub.state_changelog_topics] == ["app-r-changelog"]


def test_a_merge_of_two_topics_is_declared_co_partitioned_as_iqmesh_tasks_need() -> None:
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    b.stream("a").merge(b.stream("b")).to("out")
    sub, = declare(b.build(), "app").topology.subtopologies
    assert [g.source_topics for g in sub.copartition_groups] == [(0, 1)]


def test_task_ids_round_trip_through_the_protocols_lists() -> None:
    tasks = {TaskId(1, 3), TaskId(0, 2), TaskId(0, 0)}
    entries = task_entries(tasks)
    assert [(e.subtopology_id, e.partitions) for e in entries] == [("0", (0, 2)), ("1", (3,))]
    assert task_ids(entries) == tasks


def test_the_endpoint_map_unions_the_entries_of_one_endpoint() -> None:
    ep = hbr.Endpoint("h1", 1)
    entries = (hbr.EndpointToPartitions(ep, (hbr.TopicPartition("t", (0,)),), ()),
               hbr.EndpointToPartitions(ep, (hbr.TopicPartition("t", (2,)),), (hbr.TopicPartition("t", (1,)),)),
               hbr.EndpointToPartitions(hbr.Endpoint("h2", 2), (hbr.TopicPartition("t", (1,)),), ()))
    m = PartitionsByEndpoint.from_response(7, entries)
    assert m.epoch == 7 and m.endpoints == {HostInfo("h1", 1), HostInfo("h2", 2)}
    h1 = m.of(HostInfo("h1", 1))
    assert h1 is not None and h1.active == {("t", 0), ("t", 2)} and h1.standby == {("t", 1)}
    assert m.active_owner("t", 1) == HostInfo("h2", 2) and m.active_owner("t", 9) is None


@pytest.mark.parametrize(("code", "expected"), [
    (ErrorCode.FENCED_MEMBER_EPOCH, Reaction.REJOIN), (ErrorCode.UNKNOWN_MEMBER_ID, Reaction.REJOIN),
    (ErrorCode.NOT_COORDINATOR, Reaction.FIND_COORDINATOR), (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                                             Reaction.FIND_COORDINATOR),
    (ErrorCode.UNKNOWN_SERVER_ERROR, Reaction.RETRY), (ErrorCode.STREAMS_INVALID_TOPOLOGY, Reaction.FAIL),
    (ErrorCode.GROUP_MAX_SIZE_REACHED, Reaction.FAIL), (999, Reaction.FAIL),
    (ErrorCode.UNRELEASED_INSTANCE_ID, Reaction.WAIT_FOR_RELEASE), (ErrorCode.FENCED_INSTANCE_ID, Reaction.FAIL),
])
def test_what_a_member_does_about_each_error(code: int, expected: Reaction) -> None:
    assert reaction(code) is expected


@pytest.mark.parametrize(("code", "kind"), [
    (ErrorCode.STREAMS_INVALID_TOPOLOGY, InvalidTopologyError),
    (ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH, TopologyEpochError),
    (ErrorCode.STREAMS_TOPOLOGY_FENCED, TopologyEpochError),
    (ErrorCode.GROUP_MAX_SIZE_REACHED, GroupMaxSizeError),
    (ErrorCode.UNRELEASED_INSTANCE_ID, InstanceIdInUseError),
    (ErrorCode.FENCED_MEMBER_EPOCH, MemberFencedError),
    (12345, StreamsGroupError),
])
def test_errors_are_typed_and_one_line(code: int, kind: type[StreamsGroupError]) -> None:
    e = error_for(code, "the broker's\nmessage" if code == 12345 else "detail", "app")
    assert type(e) is kind and e.code == code and str(e).startswith("streams group 'app': ")
    if code != 12345:
        assert "\n" not in str(e) and ErrorCode(code).name in str(e)
    else:
        assert "ERROR_12345" in str(e)


def test_status_codes_and_an_unknown_one() -> None:
    assert GroupStatus.of(3) is GroupStatus.MISSING_INTERNAL_TOPICS
    assert GroupStatus.of(6) is GroupStatus.MISSING_CLIENT_TAGS and GroupStatus.of(42) is GroupStatus.UNKNOWN


def test_group_protocol_streams_is_a_recognised_setting() -> None:
    base = {"application.id": "a", "bootstrap.servers": "h:1"}
    assert StreamsConfig.from_properties({**base, "group.protocol": "Streams"}).group_protocol == "streams"
    with pytest.raises(ConfigException, match="classic, consumer or streams, got 'bogus'"):
        StreamsConfig.from_properties({**base, "group.protocol": "bogus"})
