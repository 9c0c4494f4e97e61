"""The one follower of the instances topic, for the instance, the gateway and the snapshot job.

Every instance publishes its InstanceInfo (JSON) to ``<application.id>-iqmesh-instances``
(compacted, one partition, key = instance id, a null value = the instance was removed). Whoever
needs the cluster reads that topic whole, like a global table: the instance's metadata service and
the gateway follow it for ever (:meth:`InstancesFollower.catch_up` from their own loops, records
applied to a ClusterView by :class:`ViewWriter`), the snapshot job reads it once to its end
(:meth:`InstancesFollower.read_to_end`).

Idle, it sends no fetch at all (kernel/idle_fetch.py): its partition stays paused until a
ListOffsets answer shows the end offset moved, then it reads up to that end and pauses again.

Only confluent-kafka and kernel.metadata here, so all three users import it without the runtime.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from kernel.idle_fetch import IdleFetch, PauseAssignment
from kernel.metadata import ClusterView, InstanceInfo

log = logging.getLogger(__name__)

#: the instances topic's name after the application id (the one place it is spelled)
INSTANCES_TOPIC_SUFFIX = "-iqmesh-instances"
#: longest one catch-up reads before it returns (the owner's loop has other work)
CATCH_UP_BUDGET_S = 2.0
#: how long a ListOffsets request of a long-running follower may take
PROBE_TIMEOUT_S = 2.0

#: (instance id, InstanceInfo JSON or None when removed), in topic order
OnRecord = Callable[[str, bytes | None], None]


def instances_topic(application_id: str) -> str:
    return f"{application_id}{INSTANCES_TOPIC_SUFFIX}"


@dataclass(frozen=True)
class ViewWriter:
    """Applies instances-topic records to a ClusterView; ``own_id``'s records are skipped (the
    instance knows its own state better than its last publication), but not its removal."""

    view: ClusterView
    own_id: str = ""

    def __call__(self, instance_id: str, value: bytes | None) -> None:
        if value is None:
            self.view.remove(instance_id)
        elif instance_id != self.own_id:
            try:
                self.view.update(InstanceInfo.from_json(value))
            except Exception:  # noqa: BLE001 - a malformed record is skipped, the others still count
                log.warning("ignoring malformed instance metadata for %s", instance_id)


class InstancesFollower:
    """A group-less consumer of the instances topic's one partition, read from its start.

    ``consumer_config``: the caller's librdkafka settings (bootstrap, security, group.id, ...).
    ``loaded`` is set once the topic has been read to an end offset: the view knows everyone.
    Not thread-safe: one owner calls :meth:`catch_up` (or :meth:`read_to_end`) and :meth:`close`.
    """

    def __init__(self, consumer_config: Mapping[str, Any], application_id: str, on_record: OnRecord,
                 consumer: Any = None, on_current: Callable[[int], None] | None = None) -> None:
        self.topic = instances_topic(application_id)
        self.position = 0  # the next offset to read
        self.loaded = threading.Event()
        self._on_record = on_record
        self._on_current = on_current
        self._tp = TopicPartition(self.topic, 0)
        self._high = 0
        self._probe_timeout = PROBE_TIMEOUT_S
        self._consumer = consumer if consumer is not None else Consumer(dict(consumer_config))
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        # pause_s 0: the end offset is probed at every catch-up; the owner's loop sets the pace
        self._idle = IdleFetch(PauseAssignment(self._consumer), 0.0, moved=self._moved)
        self._idle.pause()

    def catch_up(self, stopping: threading.Event | None = None, budget_s: float = CATCH_UP_BUDGET_S) -> bool:
        """Read what was written since the last call, for at most ``budget_s``; True when at the
        end offset. Raises KafkaException when the end offset cannot be read (broker away, no topic).
        At the end offset, ``on_current`` hears the wall-clock time (ms) the end offset was asked
        at: every record written before it has been read."""
        asked_ms = int(time.time() * 1000)  # the end offset is asked now (pause_s 0: at every call)
        if self._idle.may_fetch():
            try:
                deadline = time.monotonic() + budget_s
                while self.position < self._high and time.monotonic() < deadline \
                        and not (stopping is not None and stopping.is_set()):
                    self._read(strict=False)
            finally:
                self._idle.pause()
        if self.position >= self._high:
            self.loaded.set()
            if self._on_current is not None:
                self._on_current(asked_ms)
            return True
        return False

    def read_to_end(self, timeout: float) -> None:
        """Read once up to the end offset seen now (the snapshot job). Raises TimeoutError past
        ``timeout``, KafkaException for a failed read (a one-shot reader has no later turn)."""
        self._probe_timeout = timeout
        deadline = time.monotonic() + timeout
        if self._idle.may_fetch():
            try:
                while self.position < self._high:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"did not reach offset {self._high} within {timeout}s "
                                           f"(at {self.position})")
                    self._read(strict=True)
            finally:
                self._idle.pause()
        self.loaded.set()

    def close(self) -> None:
        self._consumer.close()

    def _moved(self) -> bool:
        low, high = self._consumer.get_watermark_offsets(self._tp, timeout=self._probe_timeout)
        self.position = max(self.position, int(low))  # below the log start there is nothing to read
        self._high = int(high)
        return self._high > self.position

    def _read(self, strict: bool) -> None:
        for m in self._consumer.consume(num_messages=1000, timeout=0.1):
            self._take(m, strict)

    def _take(self, m: Message, strict: bool) -> None:
        offset, err = m.offset(), m.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:  # past any transaction markers too
                self.position = max(self.position, offset or 0)
            elif strict:
                raise KafkaException(err)
            return  # transient: the consumer retries
        assert offset is not None  # set on every message without error
        self.position = offset + 1
        key = m.key()
        if key is not None:
            self._on_record(key.decode(), m.value())
