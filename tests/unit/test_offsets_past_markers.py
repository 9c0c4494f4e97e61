"""Transaction markers take offsets no record has (a repartition topic written under exactly-once
ends in one): a partition the task has drained commits where the consumer stands, past the
markers after its last record, as Kafka Streams commits ``position()``; and a task that took
over a partition whose end at assignment was only a marker away from the commit answers as
fresh once the consumer has passed it, without waiting for new input. Real tasks and stores, the
fake group consumer's logs with gaps where the markers are."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import TopicPartition

from instance.runtime.task_committer import committable_offsets
from tests.unit.kafka_fakes import FakeGroupConsumer
from tests.unit.test_commit_protocol import BOTH, INPUT, _thread


def _log(consumer: FakeGroupConsumer, keys: str) -> None:
    """``keys`` in one transaction: a marker after the last."""
    for i, k in enumerate(keys):
        consumer.append((INPUT, 0), k, k, gap=1 if i == len(keys) - 1 else 0)


@BOTH
def test_a_drained_partition_is_committed_past_the_marker_after_its_last_record(tmp_path: Path,
                                                                               guarantee: str) -> None:
    t = _thread(tmp_path, guarantee, partitions=(0,))
    consumer = t.tm.consumer
    assert isinstance(consumer, FakeGroupConsumer)
    _log(consumer, "abc")  # records at 0-2, the marker at 3
    consumer.assign([TopicPartition(INPUT, 0, 0)])
    msgs = consumer.consume(2)  # a and b only: c is still to come
    t.tm.add_records(msgs)
    t.tm.process()
    task = t.tm.tasks[next(iter(t.tm.tasks))]
    assert [(tp.topic, tp.offset) for tp in committable_offsets([task], consumer)] == [(INPUT, 2)]
    t.tm.add_records(consumer.consume(10))  # c, and the consumer passes the marker
    assert [tp.offset for tp in committable_offsets([task], consumer)] == [2]  # c buffered: not past it
    t.tm.process()
    t.tm.commit()
    assert t.broker.group_offsets[(INPUT, 0)] == 4  # after the marker, not 3: no lag of one for ever


@BOTH
def test_a_new_owner_is_fresh_once_only_a_marker_was_left_between_commit_and_end(tmp_path: Path,
                                                                                 guarantee: str) -> None:
    t = _thread(tmp_path, guarantee, partitions=())
    consumer = t.tm.consumer
    assert isinstance(consumer, FakeGroupConsumer)
    _log(consumer, "abc")
    t.broker.group_offsets[(INPUT, 0)] = 3  # the previous owner processed a-c and committed 3
    t.tm.assign([TopicPartition(INPUT, 0)])
    task = t.tm.tasks[next(iter(t.tm.tasks))]
    assert task.catch_up_to == {INPUT: 4}  # the end counts the marker: stale until the consumer passes it
    consumer.assign([TopicPartition(INPUT, 0, 3)])
    assert consumer.consume(10) == []  # nothing but the marker
    t.tm.commit()
    assert task.catch_up_to == {}
