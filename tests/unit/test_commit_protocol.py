"""The commit, abort and fence paths of a stream thread's TaskManager, under at-least-once and
exactly_once_v2, with a fake producer (behind RecordCollector's producer seam) and a fake group
consumer: real tasks, real RocksDB stores and checkpoints. Every way a commit fails: refused by the
group, timed out, fenced, a record not written; what ends up committed or aborted, which tasks are
closed dirty, and that no checkpoint runs ahead of what was committed."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, TopicPartition

from instance.config import AT_LEAST_ONCE, EXACTLY_ONCE_V2, StreamsConfig
from instance.errors import StreamsException, TaskMigratedException
from instance.runtime.changelog_reader import StoreChangelogReader
from instance.runtime.collector import RecordCollector
from instance.runtime.internal_topics import TopicLayout, internal_name
from instance.runtime.task import StreamTask
from instance.runtime.task_committer import REBALANCE_ERRORS
from instance.runtime.task_manager import TaskManager
from instance.runtime.task_state import TaskState
from instance.runtime.thread_clients import producer_config
from instance.serde import LongSerde, StringSerde
from instance.state.checkpoint import read_checkpoint
from instance.topology import StreamsBuilder
from instance.topology.handlers import PRODUCTION, ErrorHandling
from instance.topology.topology import Topology
from kernel.task_id import TaskId
from tests.unit.kafka_fakes import FakeBroker, FakeConsumer, FakeGroupConsumer, FakeProducer, message

APP = "app"
INPUT, OUTPUT = "input", "output"
CHANGELOG = f"{APP}-counts-changelog"
BOTH = pytest.mark.parametrize("guarantee", [AT_LEAST_ONCE, EXACTLY_ONCE_V2])


def _topology() -> Topology:
    b = StreamsBuilder(StringSerde(), StringSerde())
    b.stream(INPUT).group_by_key().count("counts").to_stream().to(OUTPUT, value_serde=LongSerde())
    return b.build()


@dataclass
class Thread:
    """A TaskManager as a stream thread holds it, and what its clients did."""

    tm: TaskManager
    broker: FakeBroker
    state_dir: Path
    producers: list[FakeProducer] = field(default_factory=list)
    #: transactional ids of replaced producers (handed to the membership coordinator's fence)
    replaced: list[str] = field(default_factory=list)

    @property
    def producer(self) -> FakeProducer:
        return self.producers[-1]

    def feed(self, partition: int, keys: str, start: int = 0) -> None:
        self.tm.add_records([message(INPUT, partition, start + i, k, k) for i, k in enumerate(keys)])
        self.tm.process()

    def checkpoint(self, partition: int) -> dict[tuple[str, int], int]:
        return read_checkpoint(self.state_dir / APP / str(TaskId(0, partition)))


def _thread(tmp_path: Path, guarantee: str, partitions: tuple[int, ...] = (0, 1),
            production_handler: str = "fail", changelogs: FakeConsumer | None = None,
            abandon_when_brokers_down: bool = False) -> Thread:
    """``changelogs``: what the restore consumer reads (empty: nothing to restore);
    ``abandon_when_brokers_down``: as the stream thread sets it on the dev broker."""
    config = StreamsConfig(application_id=APP, bootstrap_servers="unused:9092", state_dir=str(tmp_path),
                           processing_guarantee=guarantee, task_timeout_ms=100)
    topology = _topology()
    thread = Thread(None, FakeBroker(), tmp_path)  # type: ignore[arg-type]
    errors = ErrorHandling({PRODUCTION: production_handler})
    ids = itertools.count()

    def new_producer(conf: dict[str, object]) -> FakeProducer:
        thread.producers.append(FakeProducer(dict(conf), thread.broker))
        return thread.producer

    def new_collector() -> RecordCollector:
        tid = f"{APP}-instance-0-{next(ids)}" if config.eos else None
        collector = RecordCollector(producer_config(config, "producer", transactional_id=tid), new_producer,
                                    abandon_when_brokers_down=abandon_when_brokers_down and tid is not None)
        collector.on_delivery_error = errors.delivery_failed
        if tid is not None:
            collector.producer.init_transactions()  # as the stream thread's factory does
        return collector

    layout = TopicLayout({}, {}, {"counts": CHANGELOG})
    reader = StoreChangelogReader({}, consumer=changelogs or FakeConsumer())
    consumer = FakeGroupConsumer(thread.broker)
    tm = TaskManager("thread-1", config, topology, layout, internal_name(APP, topology), new_collector, reader, errors,
                     consumer=lambda: consumer,  # type: ignore[arg-type,return-value]
                     on_producer_replaced=thread.replaced.append)
    tm.assign([TopicPartition(INPUT, p) for p in partitions])
    thread.tm = tm
    return thread


def _all_closed_dirty(thread: Thread, tasks: list[StreamTask]) -> None:
    assert not thread.tm.tasks
    assert all(t.lifecycle.state is TaskState.CLOSED for t in tasks)
    assert all(thread.checkpoint(t.partition) == {} for t in tasks)


def _commit_starts_over(thread: Thread) -> tuple[FakeProducer, list[StreamTask]]:
    """Commit, which must tell the thread to start over; returns the producer and tasks it had."""
    tasks, producer = list(thread.tm.tasks.values()), thread.producer
    with pytest.raises(TaskMigratedException) as migrated:
        thread.tm.commit()
    assert migrated.value.start_over
    assert thread.broker.group_offsets == {} and thread.broker.committed_to(CHANGELOG) == {}
    return producer, tasks


def _started_over(thread: Thread, tasks: list[StreamTask]) -> None:
    """What the stream thread does before it rejoins: every task closed dirty, a new producer."""
    n = len(thread.producers)
    thread.tm.handle_lost_all()
    _all_closed_dirty(thread, tasks)
    assert len(thread.producers) == n + 1


# -- committed -----------------------------------------------------------------------------------------
def test_at_least_once_commits_offsets_then_checkpoints_what_was_written(tmp_path: Path) -> None:
    t = _thread(tmp_path, AT_LEAST_ONCE)
    t.feed(0, "aba")
    t.tm.commit()
    assert t.broker.group_offsets == {(INPUT, 0): 3}
    assert t.broker.committed_to(CHANGELOG) == {0: 2} and t.broker.committed_to(OUTPUT) == {0: 2}
    assert t.checkpoint(0) == {(CHANGELOG, 0): 2}


def test_exactly_once_commits_the_transaction_with_the_offsets_and_no_checkpoint_while_running(
        tmp_path: Path) -> None:
    t = _thread(tmp_path, EXACTLY_ONCE_V2)
    t.feed(0, "aba")
    t.tm.commit()
    assert t.broker.group_offsets == {(INPUT, 0): 3}
    assert t.broker.committed_to(CHANGELOG) == {0: 2} and not t.broker.aborted
    assert t.producer.calls == ["init", "begin", "offsets", "commit"]
    assert t.checkpoint(0) == {}
    # the commit marker takes an offset: the next write lands after it
    assert t.tm.tasks[TaskId(0, 0)].state.changelog_offsets[(CHANGELOG, 0)] == 3


# -- refused by the group ------------------------------------------------------------------------------
@pytest.mark.parametrize("code", sorted(REBALANCE_ERRORS - {KafkaError._ASSIGNMENT_LOST}))
def test_at_least_once_offsets_refused_keep_the_tasks_and_go_with_the_next_commit(tmp_path: Path,
                                                                                    code: int) -> None:
    t = _thread(tmp_path, AT_LEAST_ONCE)
    t.feed(0, "ab")
    t.tm.commit()
    assert t.checkpoint(0) == {(CHANGELOG, 0): 2}
    t.feed(0, "ca", start=2)
    t.broker.refuse_offsets = KafkaError(code)
    with pytest.raises(TaskMigratedException) as refused:
        t.tm.commit()
    assert not refused.value.start_over
    assert t.broker.group_offsets == {(INPUT, 0): 2}
    assert t.checkpoint(0) == {}  # the stores hold writes no committed offset covers
    assert all(task.lifecycle.running for task in t.tm.tasks.values()) and len(t.producers) == 1

    t.broker.refuse_offsets = None
    t.tm.commit()
    assert t.broker.group_offsets == {(INPUT, 0): 4}
    assert t.checkpoint(0) == {(CHANGELOG, 0): 4}


@pytest.mark.parametrize("code", sorted(REBALANCE_ERRORS - {KafkaError._ASSIGNMENT_LOST}))
def test_exactly_once_offsets_refused_abort_the_transaction_and_start_over(tmp_path: Path, code: int) -> None:
    t = _thread(tmp_path, EXACTLY_ONCE_V2)
    t.feed(0, "aba")
    t.broker.refuse_offsets = KafkaError(code)
    old, tasks = _commit_starts_over(t)
    assert old.calls[-2:] == ["abort", "purge"]  # aborted, then nothing it holds is sent
    assert {topic for topic, _ in t.broker.aborted} == {CHANGELOG, OUTPUT}
    _started_over(t, tasks)
    assert t.replaced == [old.transactional_id] and t.producer.calls == ["init"]


# -- timed out -----------------------------------------------------------------------------------------
@BOTH
def test_a_commit_the_broker_does_not_answer_within_the_task_timeout_starts_over(tmp_path: Path,
                                                                                 guarantee: str) -> None:
    t = _thread(tmp_path, guarantee)
    t.feed(0, "aba")
    t.broker.away = True
    old, tasks = _commit_starts_over(t)
    assert "abort" not in old.calls  # the broker is away: the transaction is left to its timeout
    assert old.purged  # what it still holds must never reach the broker after the next owner's writes
    _started_over(t, tasks)


def test_exactly_once_a_transactional_call_that_timed_out_is_not_resumed(tmp_path: Path) -> None:
    # after a broker outage librdkafka's resumed send_offsets_to_transaction blocked for good on
    # Apache Kafka: the producer is given up at once instead
    t = _thread(tmp_path, EXACTLY_ONCE_V2)
    t.feed(0, "aba")
    t.broker.refuse_offsets = KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True)
    old, tasks = _commit_starts_over(t)
    assert old.calls.count("offsets") == 1 and "commit" not in old.calls
    assert old.purged
    t.broker.refuse_offsets = None
    _started_over(t, tasks)


def test_exactly_once_adding_offsets_that_never_returns_gives_the_producer_up(tmp_path: Path) -> None:
    t = _thread(tmp_path, EXACTLY_ONCE_V2)  # task.timeout.ms=100: given up after 1.2 s
    t.feed(0, "aba")
    t.broker.offsets_hang = threading.Event()
    try:
        old, tasks = _commit_starts_over(t)
    finally:
        t.broker.offsets_hang.set()  # the blocked call's thread ends with the test
    assert old.calls.count("offsets") == 1 and "commit" not in old.calls
    t.broker.offsets_hang = None
    _started_over(t, tasks)


# -- every broker went away (the dev broker forgets its transactions when it restarts) ----------------
ALL_DOWN = KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down")
REFUSED = KafkaError(KafkaError._TRANSPORT, "127.0.0.1:9092/1: Connect to ipv4#127.0.0.1:9092 failed")


@pytest.mark.parametrize("report", [ALL_DOWN, REFUSED])
def test_exactly_once_a_producer_that_saw_the_broker_go_away_sends_and_commits_nothing(
        tmp_path: Path, report: KafkaError) -> None:
    t = _thread(tmp_path, EXACTLY_ONCE_V2, abandon_when_brokers_down=True)
    t.feed(0, "aba")
    t.producer.conf["error_cb"](report)  # librdkafka's report, served at the next poll
    assert t.producer.purged and not t.producer.queued
    t.feed(1, "cd")  # processed meanwhile: dropped, never queued for a restarted broker
    assert not t.producer.queued
    old, tasks = _commit_starts_over(t)
    assert "commit" not in old.calls and not t.broker.logs
    _started_over(t, tasks)
    assert t.replaced == [old.transactional_id]  # fenced once the broker answers, if it kept the transaction


def test_exactly_once_a_commit_that_outlived_every_broker_going_away_counts_as_aborted(tmp_path: Path) -> None:
    # the broker stops during the commit and comes back restarted: it answers the commit of a
    # transaction it aborted when it started with success, so the runtime must not believe it
    t = _thread(tmp_path, EXACTLY_ONCE_V2, abandon_when_brokers_down=True)
    t.feed(0, "aba")
    producer, tasks = t.producer, list(t.tm.tasks.values())
    commit = producer.commit_transaction

    def restarted_during(timeout: float = -1) -> None:
        producer.conf["error_cb"](ALL_DOWN)
        commit(timeout)

    producer.commit_transaction = restarted_during  # type: ignore[method-assign]
    with pytest.raises(TaskMigratedException) as migrated:
        t.tm.commit()
    assert migrated.value.start_over
    _started_over(t, tasks)
    assert all(t.checkpoint(task.partition) == {} for task in tasks)


def test_where_brokers_keep_their_transactions_every_broker_down_changes_nothing(tmp_path: Path) -> None:
    t = _thread(tmp_path, EXACTLY_ONCE_V2)  # Apache Kafka: the assist is off
    t.feed(0, "aba")
    t.producer.conf["error_cb"](ALL_DOWN)
    t.tm.commit()
    assert t.broker.group_offsets == {(INPUT, 0): 3} and not t.producer.purged


# -- fenced --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("error", [KafkaError(KafkaError.PRODUCER_FENCED, fatal=True),
                                   KafkaError(KafkaError._FENCED, fatal=True),
                                   KafkaError(KafkaError.INVALID_PRODUCER_EPOCH)])
def test_exactly_once_a_fenced_producer_is_replaced_and_the_tasks_start_over(tmp_path: Path,
                                                                             error: KafkaError) -> None:
    t = _thread(tmp_path, EXACTLY_ONCE_V2)
    t.feed(0, "aba")
    t.broker.refuse_transaction = error
    old, tasks = _commit_starts_over(t)
    assert "abort" not in old.calls and old.purged  # another producer owns the transaction now
    _started_over(t, tasks)
    assert t.replaced == [old.transactional_id]


def test_at_least_once_a_producer_that_lost_its_state_is_replaced_and_the_tasks_start_over(
        tmp_path: Path) -> None:
    t = _thread(tmp_path, AT_LEAST_ONCE)
    t.feed(0, "aba")
    t.broker.delivery_error = KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER)
    old, tasks = _commit_starts_over(t)
    assert old.purged
    _started_over(t, tasks)
    assert t.replaced == []  # no transactional id to fence


@pytest.mark.parametrize("step", ["flush", "poll", "send"])
def test_at_least_once_a_producer_failed_for_good_is_replaced_and_the_tasks_start_over(
        tmp_path: Path, step: str) -> None:
    # confluent-kafka's flush raised a bare SystemError after librdkafka failed the idempotent
    # producer (an out-of-order sequence once the restarted dev broker forgot it): the thread died
    t = _thread(tmp_path, AT_LEAST_ONCE)
    t.feed(0, "ab")
    t.broker.producer_failure = SystemError("<method 'flush'> returned NULL without setting an exception")
    if step == "poll":
        t.tm.collector.poll()
    elif step == "send":
        t.feed(0, "c", start=2)  # the record is dropped with the producer, not handed to the handler
    old, tasks = _commit_starts_over(t)
    assert old.purged
    t.broker.producer_failure = None
    _started_over(t, tasks)


# -- a record not written ------------------------------------------------------------------------------
def test_at_least_once_a_changelog_record_not_written_fails_the_commit(tmp_path: Path) -> None:
    # the production handler would continue: never for a changelog record (its store would diverge)
    t = _thread(tmp_path, AT_LEAST_ONCE, production_handler="continue")
    t.feed(0, "aba")
    t.broker.delivery_error = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    with pytest.raises(StreamsException, match=CHANGELOG) as failed:
        t.tm.commit()
    assert not isinstance(failed.value, TaskMigratedException)  # the thread fails: not a migration
    assert t.broker.group_offsets == {} and t.checkpoint(0) == {}


def test_exactly_once_a_record_not_written_aborts_the_transaction(tmp_path: Path) -> None:
    t = _thread(tmp_path, EXACTLY_ONCE_V2)
    t.feed(0, "aba")
    t.broker.delivery_error = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    old, tasks = _commit_starts_over(t)
    assert old.calls[-2:] == ["abort", "purge"]
    _started_over(t, tasks)


@pytest.mark.parametrize("code", [KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION,
                                  KafkaError.NOT_ENOUGH_REPLICAS])
def test_at_least_once_a_record_the_broker_cannot_take_for_now_starts_over(tmp_path: Path, code: int) -> None:
    # e.g. the output topic unknown for a moment after a broker restart: not the production
    # handler's call (its default, fail, ended the thread), the tasks start over from the commit
    t = _thread(tmp_path, AT_LEAST_ONCE)
    t.feed(0, "aba")
    t.broker.delivery_error = KafkaError(code)
    old, tasks = _commit_starts_over(t)
    assert old.purged
    _started_over(t, tasks)


# -- on revocation and shutdown -----------------------------------------------------------------------
def test_at_least_once_revoked_after_a_commit_the_task_is_closed_with_a_checkpoint(tmp_path: Path) -> None:
    t = _thread(tmp_path, AT_LEAST_ONCE)
    t.feed(0, "aba")
    t.tm.revoke([TopicPartition(INPUT, 0)])
    assert list(t.tm.tasks) == [TaskId(0, 1)]
    assert t.broker.group_offsets == {(INPUT, 0): 3} and t.checkpoint(0) == {(CHANGELOG, 0): 2}


def test_at_least_once_revoked_with_the_commit_refused_only_the_revoked_task_closes_dirty(
        tmp_path: Path) -> None:
    t = _thread(tmp_path, AT_LEAST_ONCE)
    t.feed(0, "aba")
    t.feed(1, "cc")
    revoked = t.tm.tasks[TaskId(0, 0)]
    t.broker.refuse_offsets = KafkaError(KafkaError.REBALANCE_IN_PROGRESS)
    t.tm.revoke([TopicPartition(INPUT, 0)])  # nothing to start over: the rebalance goes on
    assert revoked.lifecycle.state is TaskState.CLOSED and t.checkpoint(0) == {}
    assert t.tm.tasks[TaskId(0, 1)].lifecycle.running and t.tm.tasks[TaskId(0, 1)].committable == {INPUT: 2}


def test_exactly_once_revoked_with_the_transaction_aborted_every_task_closes_and_the_thread_starts_over(
        tmp_path: Path) -> None:
    t = _thread(tmp_path, EXACTLY_ONCE_V2)
    t.feed(0, "aba")
    tasks = list(t.tm.tasks.values())
    t.broker.refuse_offsets = KafkaError(KafkaError.ILLEGAL_GENERATION)
    with pytest.raises(TaskMigratedException) as migrated:
        t.tm.revoke([TopicPartition(INPUT, 0)])
    assert migrated.value.start_over
    _all_closed_dirty(t, tasks)
    assert len(t.producers) == 2  # the tasks the next assignment creates write through a new one
    t.tm.handle_lost_all()  # the thread's handling after the callback: nothing left to do twice
    assert len(t.producers) == 2


@BOTH
def test_a_clean_shutdown_whose_commit_is_refused_leaves_no_checkpoint(tmp_path: Path, guarantee: str) -> None:
    t = _thread(tmp_path, guarantee)
    t.feed(0, "aba")
    tasks = list(t.tm.tasks.values())
    t.broker.refuse_offsets = KafkaError(KafkaError.UNKNOWN_MEMBER_ID)
    t.tm.shutdown(clean=True)
    _all_closed_dirty(t, tasks)
    assert t.broker.group_offsets == {}


@BOTH
def test_a_clean_shutdown_checkpoints_every_task(tmp_path: Path, guarantee: str) -> None:
    t = _thread(tmp_path, guarantee)
    t.feed(0, "aba")
    t.tm.shutdown(clean=True)
    assert not t.tm.tasks
    marker = 1 if guarantee == EXACTLY_ONCE_V2 else 0
    assert t.checkpoint(0) == {(CHANGELOG, 0): 2 + marker}


# -- restoring ---------------------------------------------------------------------------------------
def test_a_restoring_task_is_left_out_of_commits_until_it_runs(tmp_path: Path) -> None:
    changelogs = FakeConsumer()
    for i in range(3):
        changelogs.append((CHANGELOG, 0), f"k{i}", "1")
    t = _thread(tmp_path, AT_LEAST_ONCE, changelogs=changelogs)
    restoring, running = t.tm.tasks[TaskId(0, 0)], t.tm.tasks[TaskId(0, 1)]
    assert t.tm.restoring == {TaskId(0, 0)}
    assert restoring.lifecycle.restoring and running.lifecycle.running
    t.tm.commit()
    assert t.checkpoint(0) == {} and t.checkpoint(1) == {(CHANGELOG, 1): 0}  # only the running one

    assert t.tm.restore_step() == [restoring]
    assert restoring.lifecycle.running and t.tm.restoring == set()
    t.feed(0, "d", start=0)
    t.tm.commit()
    assert t.checkpoint(0) == {(CHANGELOG, 0): 4}  # after the three restored records
