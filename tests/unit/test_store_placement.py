"""A store's placement (runtime/query/request.py): a query key parsed, serialized and hashed
once, to the task the producers' partitioner chose; and the read metadata a reply copies, which
is shared between replies of the same replica state."""

from __future__ import annotations

from pathlib import Path

import pytest

from instance.errors import BadRequest, StreamsNotStartedException, UnknownStateStoreException
from instance.runtime.internal_topics import TopicLayout
from instance.runtime.kafka_streams import KafkaStreams
from instance.runtime.query.request import NO_SUBTOPOLOGY, StorePlacement
from instance.serde import LongSerde, StringSerde
from instance.server.replies import read_metadata
from instance.state.spec import StoreSpec
from instance.topology import StreamsBuilder
from kernel.instance_state import State
from kernel.local_read import LocalReplica, Role
from kernel.metadata import NOT_AVAILABLE
from kernel.partitioner import default_partition
from kernel.rpc import iqmesh_pb2 as pb
from kernel.task_id import TaskId

SPEC = StoreSpec("counts", StringSerde(), LongSerde())
PLACED = StorePlacement("counts", SPEC, subtopology=2, partitions=6)


def test_a_text_key_is_parsed_and_serialized_once_and_lands_on_the_producers_partition() -> None:
    key, kb = PLACED.key_of("user-7")
    assert (key, kb) == ("user-7", b"user-7")
    assert PLACED.task_of(kb) == TaskId(2, default_partition(b"user-7", 6))
    assert not PLACED.is_global


def test_a_raw_key_is_checked_against_the_key_serde() -> None:
    assert PLACED.key_of(raw=b"user-7") == ("user-7", b"user-7")
    longs = StorePlacement("totals", StoreSpec("totals", LongSerde(), LongSerde()), 0, 3)
    with pytest.raises(BadRequest, match="not a long key"):
        longs.key_of(raw=b"\x01\x02")
    with pytest.raises(BadRequest, match="not a valid long key"):
        longs.key_of("seven")


def test_a_global_store_has_no_tasks() -> None:
    placed = StorePlacement("countries", SPEC)
    assert placed.is_global and placed.subtopology == NO_SUBTOPOLOGY
    assert placed.key_of("fr") == ("fr", b"fr")


def test_read_metadata_is_shared_per_replica_state_and_a_reply_changes_only_its_copy() -> None:
    replica = LocalReplica(Role.ACTIVE, 3, 120, 120)
    meta = read_metadata("counts", replica, "i-0", "127.0.0.1:9000", State.RUNNING)
    assert read_metadata("counts", replica, "i-0", "127.0.0.1:9000", State.RUNNING) is meta
    reply = pb.GetReply(found=True, metadata=meta)
    reply.metadata.forwarded = True  # what router.forward does to a reply it passes on
    again = pb.GetReply(found=True, metadata=read_metadata("counts", replica, "i-0", "127.0.0.1:9000", State.RUNNING))
    assert not again.metadata.forwarded and not meta.forwarded
    moved = read_metadata("counts", replica._replace(position=121, end_offset=125), "i-0", "127.0.0.1:9000",
                          State.RUNNING)
    assert (moved.position, moved.lag, moved.stale) == (121, 4, True)
    assert moved.position_token != meta.position_token


def test_kafka_streams_places_a_store_once_and_refuses_an_unknown_or_unstarted_one(tmp_path: Path) -> None:
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=LongSerde())
    b.table("totals-in", "totals")
    b.global_table("countries-in", "countries")
    streams = KafkaStreams(b.build(), {"application.id": "placement", "bootstrap.servers": "127.0.0.1:1",
                                       "state.dir": str(tmp_path)})
    with pytest.raises(UnknownStateStoreException):
        streams.store_placement("nope")
    with pytest.raises(StreamsNotStartedException):
        streams.store_placement("totals")  # its tasks are known once started
    placed = streams.store_placement("countries")  # a global store needs no tasks
    assert placed.is_global and streams.store_placement("countries") is placed


def test_every_placement_of_a_started_instance_comes_from_store_placement(tmp_path: Path) -> None:
    """query_metadata_for_key and runtime/query/execute.py place a key as store_placement does."""
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=LongSerde())
    b.table("totals-in", "totals")
    b.global_table("countries-in", "countries")
    streams = KafkaStreams(b.build(), {"application.id": "placement", "bootstrap.servers": "127.0.0.1:1",
                                       "state.dir": str(tmp_path), "application.server": "127.0.0.1:9000"})
    with pytest.raises(StreamsNotStartedException):
        streams.query_metadata_for_key("totals", "k")
    sub = streams.topology.subtopology_of_store("totals").id
    streams.layout = TopicLayout({"totals-in": 4}, {sub: 4}, {})  # what start() finds
    placed = streams.store_placement("totals")
    assert (placed.subtopology, placed.partitions) == (sub, 4) and streams.store_placement("totals") is placed
    assert placed.partition_of(b"k") == default_partition(b"k", 4)
    assert placed.task_of_key("k") == TaskId(sub, placed.partition_of(b"k"))
    with pytest.raises(ValueError, match="None"):
        placed.task_of_key(None)
    streams._sm.set(State.REBALANCING)
    assert streams.query_metadata_for_key("totals", "k") is NOT_AVAILABLE  # nobody owns it yet
    here = streams.query_metadata_for_key("countries", "fr")
    assert here.partition == -1 and str(here.active_host) == "127.0.0.1:9000"
    with pytest.raises(UnknownStateStoreException):
        streams.query_metadata_for_key("nope", "k")
    with pytest.raises(ValueError, match="must not be None"):
        streams.query_metadata_for_key("totals", None)
