"""In-process doubles of the Kafka clients at the runtime's seams: messages, a consumer (partition
logs, positions, pauses; a group member's commits), and a producer behind RecordCollector's
``new_producer`` seam (a broker's logs, transactions, and the failures a test asks for)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from instance.state.source_offsets import HEADER
from instance.testing.driver import _Msg as DriverMsg

TopicPart = tuple[str, int]
SOURCE = "input"


class _Msg(DriverMsg):
    """A consumed record, as the TopologyTestDriver's, that also says it is not an error."""

    __slots__ = ()

    def error(self) -> None:
        return None


def message(topic: str, partition: int, offset: int, key: str, value: str) -> _Msg:
    return _Msg(topic, partition, offset, offset, key.encode(), value.encode())


@dataclass
class FakeConsumer:
    """Partition logs by offset (gaps: transaction markers), positions, pauses (paused partitions
    are kept paused across assign(), as librdkafka does)."""

    logs: dict[TopicPart, dict[int, _Msg]] = field(default_factory=dict)
    ends: dict[TopicPart, int] = field(default_factory=dict)
    positions: dict[TopicPart, int] = field(default_factory=dict)
    paused: set[TopicPart] = field(default_factory=set)
    consumed: int = 0

    def append(self, tp: TopicPart, key: str, value: str, src: int | None = None, gap: int = 0) -> None:
        off = self.ends.get(tp, 0)
        headers = None if src is None else [(HEADER, b"%d %s" % (src, SOURCE.encode()))]
        # CreateTime: the offset, so a test can tell it arrived
        self.logs.setdefault(tp, {})[off] = _Msg(tp[0], tp[1], off, off, key.encode(), value.encode(), headers)
        self.ends[tp] = off + 1 + gap

    def assign(self, tps: list[TopicPartition]) -> None:
        """As librdkafka: a partition the application paused stays paused across assignments."""
        self.positions = {(t.topic, t.partition): 0 if t.offset == OFFSET_BEGINNING else t.offset for t in tps}

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in self.positions]

    def pause(self, tps: list[TopicPartition]) -> None:
        self.paused |= {(t.topic, t.partition) for t in tps}

    def resume(self, tps: list[TopicPartition]) -> None:
        self.paused -= {(t.topic, t.partition) for t in tps}

    def seek(self, tp: TopicPartition) -> None:
        self.positions[(tp.topic, tp.partition)] = tp.offset

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(t.topic, t.partition, self.positions.get((t.topic, t.partition), -1001))
                for t in tps]

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float | None = None,
                              cached: bool = False) -> tuple[int, int]:
        return 0, self.ends.get((tp.topic, tp.partition), 0)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        out: list[Any] = []
        for tp, pos in self.positions.items():
            if tp in self.paused:
                continue
            end = self.ends.get(tp, 0)
            while pos < end and len(out) < num_messages:
                m = self.logs.get(tp, {}).get(pos)
                pos += 1
                if m is not None:
                    out.append(m)
            self.positions[tp] = pos
        self.consumed += 1
        return out

    def close(self) -> None:
        pass


@dataclass
class FakeBroker:
    """What reached the broker: records readable by read_committed consumers, aborted ones, the
    group's committed offsets; and the failures the next calls meet."""

    logs: dict[TopicPart, list[tuple[bytes | None, bytes | None]]] = field(default_factory=dict)
    aborted: list[tuple[str, bytes | None]] = field(default_factory=list)
    group_offsets: dict[TopicPart, int] = field(default_factory=dict)
    #: the group's answer to an offset commit (consumer) or to adding offsets to a transaction
    refuse_offsets: KafkaError | None = None
    #: the answer to commit_transaction
    refuse_transaction: KafkaError | None = None
    #: every delivery fails with this error
    delivery_error: KafkaError | None = None
    #: the broker is away: nothing is acknowledged
    away: bool = False
    #: a producer's flush and poll raise this, and produce a fatal error (how confluent-kafka
    #: reports a producer librdkafka failed for good, e.g. on an out-of-order sequence)
    producer_failure: BaseException | None = None
    #: adding offsets to a transaction blocks until this is set, whatever its timeout (librdkafka
    #: issues 5456 and 5511: the group coordinator it cached is gone)
    offsets_hang: threading.Event | None = None

    def committed_to(self, topic: str) -> dict[int, int]:
        """Records per partition of ``topic`` that readers see."""
        return {p: len(recs) for (t, p), recs in self.logs.items() if t == topic}

    def _deliver(self, records: list[tuple[str, int, bytes | None, bytes | None]]) -> None:
        for topic, partition, key, value in records:
            self.logs.setdefault((topic, partition), []).append((key, value))


class FakeGroupConsumer(FakeConsumer):
    """The main consumer: commits go to the broker's group offsets (or are refused)."""

    def __init__(self, broker: FakeBroker) -> None:
        super().__init__()
        self.broker = broker

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> list[TopicPartition]:
        if self.broker.refuse_offsets is not None:
            raise KafkaException(self.broker.refuse_offsets)
        self.broker.group_offsets.update({(tp.topic, tp.partition): tp.offset for tp in offsets})
        return offsets

    def committed(self, tps: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.broker.group_offsets.get((tp.topic, tp.partition), -1001))
                for tp in tps]

    def consumer_group_metadata(self) -> str:
        return "group-metadata"

    def memberid(self) -> str:
        return "member-1"


class FakeProducer:
    """Sends to a FakeBroker: at once when idempotent, at the transaction's commit when
    transactional. A failed delivery is reported through the collector's ``on_delivery``, as
    librdkafka does, and makes the open transaction abortable."""

    def __init__(self, conf: dict[str, Any], broker: FakeBroker) -> None:
        self.conf = conf
        self.broker = broker
        self.transactional_id: str | None = conf.get("transactional.id")
        self._on_delivery = conf["on_delivery"]
        self.queued: list[tuple[str, int, bytes | None, bytes | None]] = []
        self.in_txn: list[tuple[str, int, bytes | None, bytes | None]] = []
        self._txn_offsets: list[TopicPartition] = []
        self._txn_failed: KafkaError | None = None
        self.calls: list[str] = []
        self.purged = False

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None, partition: int = -1,
                callback: Any = None, on_delivery: Any = None, timestamp: int = 0, headers: Any = None) -> None:
        if self.broker.producer_failure is not None:
            raise KafkaException(KafkaError(KafkaError._FATAL, "failed", fatal=True))
        self.queued.append((topic, max(partition, 0), key, value))

    def poll(self, timeout: float = -1) -> int:
        if self.broker.producer_failure is not None:
            raise self.broker.producer_failure
        return 0

    def flush(self, timeout: float = -1) -> int:
        if self.broker.producer_failure is not None:
            raise self.broker.producer_failure
        if self.broker.away:
            time.sleep(min(max(timeout, 0.0), 0.01))
            return len(self.queued)
        queued, self.queued = self.queued, []
        err = self.broker.delivery_error
        if err is not None:
            for topic, partition, key, value in queued:
                self._on_delivery(err, _Msg(topic, partition, -1, 0, key, value))
            self._txn_failed = KafkaError(err.code(), err.str(), txn_requires_abort=True)
            return 0
        if self.transactional_id is None:
            self.broker._deliver(queued)
        else:
            self.in_txn.extend(queued)
        return 0

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        self.calls.append("purge")
        self.purged = True
        self.queued.clear()

    def init_transactions(self, timeout: float = -1) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def send_offsets_to_transaction(self, positions: list[TopicPartition], group_metadata: Any,
                                    timeout: float = -1) -> None:
        self.calls.append("offsets")
        if self.broker.offsets_hang is not None:
            self.broker.offsets_hang.wait()
        if self.broker.refuse_offsets is not None:
            raise KafkaException(self.broker.refuse_offsets)
        self._txn_offsets = positions

    def commit_transaction(self, timeout: float = -1) -> None:
        self.calls.append("commit")
        self.flush(timeout)
        if self.broker.refuse_transaction is not None:
            raise KafkaException(self.broker.refuse_transaction)
        if self._txn_failed is not None:
            raise KafkaException(self._txn_failed)
        if self.broker.away:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "away", retriable=True))
        self.broker._deliver(self.in_txn)
        self.broker.group_offsets.update({(tp.topic, tp.partition): tp.offset for tp in self._txn_offsets})
        self.in_txn, self._txn_offsets = [], []

    def abort_transaction(self, timeout: float = -1) -> None:
        self.calls.append("abort")
        self.broker.aborted.extend((t, v) for t, _, _, v in self.in_txn + self.queued)
        self.in_txn, self.queued, self._txn_offsets, self._txn_failed = [], [], [], None
