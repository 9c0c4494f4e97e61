"""TaskCommitter: the commit protocol of one stream thread (Kafka Streams' TaskExecutor commit).

A commit flushes the running tasks' caches and stores, then either flushes the producer and
commits the input offsets (at-least-once) or commits the transaction with the offsets in it
(exactly_once_v2), then lets the tasks checkpoint. When the group has moved on it raises
:class:`TaskMigratedException` instead of returning a flag, and the stream thread handles it in one
place:

- at-least-once, offsets refused by the group (a rebalance under way): only the offsets are lost;
  the tasks keep their state, the rebalance moves them, and their offsets go with the next commit
  if they stay (``start_over`` False). At a revocation on the dev broker, which refuses what Apache
  Kafka accepts there, they are committed through a transaction first (runtime/txn_offset_commit.py);
- the transaction refused or needing an abort: it is aborted; the producer fenced or failed for
  good; a commit that the broker did not answer within ``task.timeout.ms`` (the member's session
  is over by then), or under exactly-once within ``transaction.timeout.ms`` (a transactional call
  that timed out is never resumed): the producer is discarded and ``start_over`` is True: every task is closed
  dirty (its stores may hold writes no commit covers), a new producer is made and the thread
  rejoins.

Any other failure (a record that could not be written, a fatal error) is raised as it is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from instance.config import StreamsConfig
from instance.errors import TaskMigratedException
from instance.runtime.collector import AUTHORIZATION_ERRORS, ProducerLostException, RecordCollector
from instance.runtime.metrics import ThreadMetrics
from instance.runtime.task import StreamTask
from instance.runtime.task_timeout import TaskTimeoutException, kafka_error, retrying
from instance.runtime.txn_offset_commit import TransactionalOffsetCommit

log = logging.getLogger(__name__)

#: the group moved on: the commit is refused, the records are processed again by the next owner
REBALANCE_ERRORS = frozenset({KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS,
                              KafkaError.UNKNOWN_MEMBER_ID, KafkaError._ASSIGNMENT_LOST,
                              # the consumer protocol's (KIP-848) ways of saying the same
                              KafkaError.STALE_MEMBER_EPOCH, KafkaError.FENCED_MEMBER_EPOCH})
#: another producer has our transactional id
FENCED_ERRORS = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
#: a transactional call that ran out of time: never resumed (see _commit_transaction)
_CALL_TIMED_OUT = frozenset({KafkaError._TIMED_OUT})


class GroupConsumer(Protocol):
    """The main consumer's calls the commit makes (confluent-kafka's ``Consumer``)."""

    def commit(self, *, offsets: list[TopicPartition], asynchronous: Literal[False]) -> list[TopicPartition]: ...

    def consumer_group_metadata(self) -> Any: ...

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...


def committable_offsets(tasks: Sequence[StreamTask], consumer: GroupConsumer | None) -> list[TopicPartition]:
    """The input offsets to commit: after each task's last processed record or, where the task has
    nothing of the partition left buffered, where the consumer stands if that is further: past the
    transaction markers that follow the last record of a partition written in transactions (a
    repartition topic under exactly-once). Kafka Streams commits ``position()`` there too; without
    it the group's lag stays at one for ever and a new owner takes its own answers for stale until
    new input arrives. (The consumer's position counts only what it gave the application, so a
    drained partition's position never skips a record.)"""
    offsets: list[TopicPartition] = []
    drained: list[TopicPartition] = []
    for task in tasks:
        queues = task.group.queues
        for topic, off in task.committable.items():
            tp = TopicPartition(topic, task.partition, off)
            offsets.append(tp)
            if not queues[topic]:
                drained.append(tp)
    if consumer is None or not drained:
        return offsets
    at = {(tp.topic, tp.partition): tp.offset for tp in consumer.position(drained)}
    for tp in drained:
        tp.offset = max(tp.offset, at.get((tp.topic, tp.partition), -1))
    return offsets


class TaskCommitter:
    """Commits the thread's tasks through its current producer, which it replaces once that one
    must not write again."""

    def __init__(self, name: str, config: StreamsConfig, new_collector: Callable[[], RecordCollector],
                 metrics: ThreadMetrics, on_producer_replaced: Callable[[str], None] | None = None,
                 refused_at_revocation: TransactionalOffsetCommit | None = None) -> None:
        self.name = name
        self.config = config
        self._new_collector = new_collector
        self.collector = new_collector()
        self.metrics = metrics
        self._in_txn = False
        #: told the transactional id of each producer replaced here (runtime/membership.py fences it
        #: on the dev broker, which never times out the transaction it may have left open)
        self.on_producer_replaced = on_producer_replaced
        #: commits offsets refused at a revocation (the dev broker's; None: not needed)
        self.refused_at_revocation = refused_at_revocation

    def begin_txn(self) -> None:
        if self.config.eos and not self._in_txn:
            self.collector.producer.begin_transaction()
            self._in_txn = True

    def commit(self, running: Sequence[StreamTask], tasks: Sequence[StreamTask],
               consumer: GroupConsumer | None, revoking: bool = False) -> None:
        """Flush ``running``, commit what ``tasks`` processed, checkpoint ``running``. Raises
        :class:`TaskMigratedException` when the group moved on (see the module doc). ``consumer``:
        the group member whose offsets these are (None only before it joined: nothing to commit);
        ``revoking``: the commit before its tasks are closed in a rebalance."""
        started = time.perf_counter_ns()
        if self.config.eos:
            self.begin_txn()
        for task in running:
            task.flush()
        offsets = committable_offsets(tasks, consumer)
        try:
            if self.config.eos:
                self._commit_transaction(offsets, tasks, consumer)
            else:
                self.collector.flush(self.config.task_timeout_ms, self.name)
                if offsets:
                    self._commit_offsets(offsets, consumer, revoking)
        except (ProducerLostException, TaskTimeoutException) as e:
            # the producer failed, or the broker did not take the records or the commit within
            # task.timeout.ms: start over from the last commit once it answers (at-least-once
            # processes those records again) instead of ending the thread on a broker outage
            self._in_txn = False
            self.collector.discard()
            raise TaskMigratedException(f"the producer cannot go on ({e})", start_over=True) from e
        for task in running:
            task.commit_requested = False
            task.committable.clear()
            task.state.checkpoint()  # not under exactly-once (the state manager's rule)
        self.metrics.commit.record((time.perf_counter_ns() - started) / 1e6, self.metrics.clock())

    def _commit_transaction(self, offsets: list[TopicPartition], tasks: Sequence[StreamTask],
                            consumer: GroupConsumer | None) -> None:
        """Commit the transaction with the input offsets in it; abort it if the group moved on
        or the transaction must abort."""
        producer = self.collector.producer
        self.collector.raise_if_abandoned()
        # waiting longer than the transaction's timeout is no use: the broker aborts it by then
        wait_ms = min(self.config.task_timeout_ms, self.collector.transaction_timeout_ms)
        try:
            if offsets:
                assert consumer is not None
                group = consumer.consumer_group_metadata()
                self._txn_call(lambda: producer.send_offsets_to_transaction(offsets, group, wait_ms / 1000),
                               "adding the offsets to the transaction", wait_ms)
            self._txn_call(lambda: producer.commit_transaction(wait_ms / 1000), "committing the transaction", wait_ms)
        except KafkaException as e:
            err = kafka_error(e)
            if err is not None and err.code() in _CALL_TIMED_OUT:
                # not called again on this producer: after a broker outage librdkafka's resumed
                # call can block for good (Apache Kafka, py-spy); the broker aborts the
                # transaction after its timeout unless the commit went through, and the tasks
                # start over from what the group has committed either way
                raise ProducerLostException(f"the transaction's broker did not answer within {wait_ms} ms") from e
            if err is not None and (err.code() in FENCED_ERRORS
                                    or (err.fatal() and err.code() not in AUTHORIZATION_ERRORS)):
                # another producer took our transactional id (a peer fenced us as dead, or a newer
                # run of this instance), or the producer cannot go on: our transaction is gone
                raise ProducerLostException(f"{err.name()}: {err.str()}") from e
            if err is None or err.fatal() or not (err.txn_requires_abort() or err.code() in REBALANCE_ERRORS):
                raise
            self.abort_txn()
            raise TaskMigratedException(f"transaction aborted ({err.name()})", start_over=True) from e
        self._in_txn = False
        # also raises for a producer abandoned during the commit: a restarted dev broker answers
        # the commit of a transaction it forgot with success (runtime/membership.py)
        self.collector.check()
        for task in tasks:
            task.state.transaction_committed()

    def _txn_call(self, call: Callable[[], None], what: str, timeout_ms: int) -> None:
        """A transactional call given ``timeout_ms``: tried again after a transient failure, never
        after it timed out, and bounded (:meth:`_bounded`)."""
        retrying(lambda: self._bounded(call, timeout_ms, what), what, timeout_ms, self.name, final=_CALL_TIMED_OUT)

    def _bounded(self, call: Callable[[], None], timeout_ms: int, what: str) -> None:
        """``call()`` (given ``timeout_ms``) on a thread of its own, given up when it outlives that
        timeout by far: librdkafka's send_offsets_to_transaction can block for good once the group
        coordinator it cached is gone (librdkafka issues 5456 and 5511; seen on Apache Kafka after
        the broker restarted). The producer is lost then; the daemon thread stays blocked with it
        and does not hold the process at exit."""
        outcome: list[BaseException | None] = []

        def run() -> None:
            try:
                call()
                outcome.append(None)
            except BaseException as e:  # raised for the caller below
                outcome.append(e)

        worker = threading.Thread(target=run, name=f"{self.name}-txn", daemon=True)
        worker.start()
        worker.join(2 * timeout_ms / 1000 + 1)
        if not outcome:
            raise ProducerLostException(f"{what} did not return within twice its timeout of {timeout_ms} ms; "
                                        "the producer is given up")
        if outcome[0] is not None:
            raise outcome[0]

    def _commit_offsets(self, offsets: list[TopicPartition], consumer: GroupConsumer | None,
                        revoking: bool) -> None:
        assert consumer is not None
        try:
            retrying(lambda: consumer.commit(offsets=offsets, asynchronous=False), "committing offsets",
                     self.config.task_timeout_ms, self.name, final=REBALANCE_ERRORS)
        except KafkaException as e:
            err = kafka_error(e)
            if err is None or err.code() not in REBALANCE_ERRORS:
                raise
            if revoking and self.refused_at_revocation is not None and self._committed_in_txn(offsets, consumer):
                return
            raise TaskMigratedException(f"offset commit refused during a rebalance ({err.name()})",
                                        start_over=False) from e

    def _committed_in_txn(self, offsets: list[TopicPartition], consumer: GroupConsumer) -> bool:
        assert self.refused_at_revocation is not None
        try:
            self.refused_at_revocation.commit(offsets, consumer.consumer_group_metadata(),
                                              self.config.task_timeout_ms / 1000)
        except KafkaException as e:
            log.warning("%s: the offsets refused at the revocation were refused in a transaction too: %s",
                        self.name, e)
            return False
        return True

    def abort_txn(self) -> None:
        """Abort an open transaction and discard the producer (one that aborted must not write
        again). An abort that fails (the broker is away, the producer failed fatally) leaves the
        transaction to the broker, which aborts it after ``transaction.timeout.ms``; the stores
        are rebuilt from committed changelog records either way."""
        if not (self.config.eos and self._in_txn):
            return
        self._in_txn = False
        producer = self.collector.producer
        try:
            retrying(lambda: producer.abort_transaction(30), "aborting the transaction",
                     min(self.config.task_timeout_ms, self.collector.transaction_timeout_ms), self.name)
        except (KafkaException, TaskTimeoutException) as e:
            log.warning("%s: the abort failed (%s); the broker aborts the transaction after its timeout",
                        self.name, e)
        self.collector.discard()

    def replace_discarded_producer(self) -> None:
        """Send through a new producer from now on if the current one was discarded; the tasks
        created next use it."""
        old = self.collector
        if not old.discarded:
            return
        self.collector = self._new_collector()
        if old.transactional_id is not None and self.on_producer_replaced is not None:
            self.on_producer_replaced(old.transactional_id)
