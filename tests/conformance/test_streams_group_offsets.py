"""Offsets of a streams group (KIP-1071) on Apache Kafka 4.4: who may commit and fetch them.

Recorded on Apache Kafka 4.4.0 (the group coordinator's ``StreamsGroup.validateOffsetCommit`` and
``validateOffsetFetch``):
- librdkafka's commit from a consumer in ``assign()`` mode (no member id, generation -1) is refused
  with UNKNOWN_MEMBER_ID once the group has a member: a streams member cannot commit through it.
- OffsetCommit v9 with the member's id and current epoch (runtime/streams_group/offset_commit.py)
  is taken; with another epoch it is refused with STALE_MEMBER_EPOCH, from an unknown member with
  UNKNOWN_MEMBER_ID.
- librdkafka's ``committed()`` (OffsetFetch without a member) reads the group's offsets.
- A transactional commit (``send_offsets_to_transaction``) with the group metadata of a consumer in
  ``assign()`` mode (no member, generation -1) is accepted: TxnOffsetCommit need not name a member.
  With the member's id and epoch written into that metadata (runtime/streams_group/txn_metadata.py)
  it is taken at the member's epoch and refused at another one, an abortable error: exactly_once_v2
  keeps its zombie fencing under the streams protocol.
Real broker only; waits poll a condition with a deadline.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from instance.runtime.streams_group.declaration import declare
from instance.runtime.streams_group.offset_commit import MemberOffsetCommitter
from instance.runtime.streams_group.txn_metadata import group_metadata
from tests.conformance.test_broker import NO_STREAMS_PROTOCOL, create_topics
from tests.conformance.test_streams_group import PARTITIONS, all_tasks, new_member, wait_for, word_count

pytestmark = [pytest.mark.integration, pytest.mark.skipif(bool(NO_STREAMS_PROTOCOL), reason=NO_STREAMS_PROTOCOL)]


def test_only_the_member_with_its_epoch_commits_and_anyone_fetches(bootstrap: str, admin: AdminClient,
                                                                   unique: str) -> None:
    app, source = f"sgo-{unique}", f"sgo-in-{unique}"
    create_topics(admin, {source: PARTITIONS})
    declaration = declare(word_count(source), app, replication_factor=1)
    member = new_member(bootstrap, app, declaration, 7201)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": app, "enable.auto.commit": False})
    try:
        wait_for(lambda: member.assignment.active == all_tasks(declaration), [member], "the member to hold every task")
        consumer.assign([TopicPartition(source, 0, 0)])
        # librdkafka's commit in assign() mode: no member, so refused by a group with members
        with pytest.raises(KafkaException) as refused:
            consumer.commit(offsets=[TopicPartition(source, 0, 1)], asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID, refused.value
        # the member's own commit, with its id and epoch
        own = MemberOffsetCommitter(bootstrap, app, lambda: (member.member_id, member.epoch, None))
        own.commit([TopicPartition(source, 0, 5), TopicPartition(source, 1, 7)])
        stale = MemberOffsetCommitter(bootstrap, app, lambda: (member.member_id, member.epoch - 1, None))
        with pytest.raises(KafkaException) as old_epoch:
            stale.commit([TopicPartition(source, 0, 6)])
        assert old_epoch.value.args[0].code() == KafkaError.STALE_MEMBER_EPOCH, old_epoch.value
        stranger = MemberOffsetCommitter(bootstrap, app, lambda: (f"nobody-{unique}", member.epoch, None))
        with pytest.raises(KafkaException) as unknown:
            stranger.commit([TopicPartition(source, 0, 6)])
        assert unknown.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID, unknown.value
        for c in (own, stale, stranger):
            c.close()
        # librdkafka's fetch of the committed offsets works without a member
        got = consumer.committed([TopicPartition(source, 0), TopicPartition(source, 1)], timeout=10)
        assert [(tp.partition, tp.offset, tp.error) for tp in got] == [(0, 5, None), (1, 7, None)]
    finally:
        consumer.close()
        member.close()


def test_a_transaction_takes_offsets_without_a_member(bootstrap: str, admin: AdminClient, unique: str) -> None:
    app, source = f"sgt-{unique}", f"sgt-in-{unique}"
    create_topics(admin, {source: PARTITIONS})
    declaration = declare(word_count(source), app, replication_factor=1)
    member = new_member(bootstrap, app, declaration, 7202)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": app, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"sgt-{unique}"})
    try:
        wait_for(lambda: member.assignment.active == all_tasks(declaration), [member], "the member to hold every task")
        consumer.assign([TopicPartition(source, 2, 0)])
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(source, 2, 11)], consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        got = consumer.committed([TopicPartition(source, 2)], timeout=10)
        assert got[0].offset == 11, got
    finally:
        consumer.close()
        member.close()


def test_a_transaction_with_the_members_id_and_epoch_is_checked(bootstrap: str, admin: AdminClient,
                                                                unique: str) -> None:
    """The group metadata of runtime/streams_group/txn_metadata.py: the broker takes the offsets at
    the member's epoch and refuses them at another one (a zombie's transaction must abort)."""
    app, source = f"sgm-{unique}", f"sgm-in-{unique}"
    create_topics(admin, {source: PARTITIONS})
    declaration = declare(word_count(source), app, replication_factor=1)
    member = new_member(bootstrap, app, declaration, 7203)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": app, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"sgm-{unique}"})
    try:
        wait_for(lambda: member.assignment.active == all_tasks(declaration), [member], "the member to hold every task")
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(source, 3, 13)],
                                             group_metadata(app, member.member_id, member.epoch), 30)
        producer.commit_transaction(30)
        consumer.assign([TopicPartition(source, 3, 0)])
        assert consumer.committed([TopicPartition(source, 3)], timeout=10)[0].offset == 13
        producer.begin_transaction()
        with pytest.raises(KafkaException) as stale:
            producer.send_offsets_to_transaction([TopicPartition(source, 3, 14)],
                                                 group_metadata(app, member.member_id, member.epoch - 1), 30)
        err = stale.value.args[0]
        assert err.code() in (KafkaError.STALE_MEMBER_EPOCH, KafkaError.ILLEGAL_GENERATION,
                              KafkaError.FENCED_MEMBER_EPOCH), err
        assert err.txn_requires_abort(), err
        producer.abort_transaction(30)
        assert consumer.committed([TopicPartition(source, 3)], timeout=10)[0].offset == 13
    finally:
        consumer.close()
        member.close()
