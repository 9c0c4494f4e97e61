"""Timestamp extractors (``default.timestamp.extractor``): the time a record counts at.

Kafka Streams' built-ins, by their Java names or short ones: the record's own timestamp, failing
on a negative one (the default), skipping it, or using the partition time instead; or the wall
clock. A custom extractor is ``module:attribute``: a class (instantiated without arguments), an
object with ``extract(record, partition_time)``, or a plain function of those two arguments.

As in Kafka Streams, a record whose extracted timestamp is negative is skipped and counted as
dropped (only the default extractor fails first). The runtime reads the record timestamp
inline for the built-in record-timestamp extractors and calls ``extract`` only for a negative one,
so the default costs nothing per record; "partition time" is the task's stream time.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from instance.errors import StreamsException

log = logging.getLogger(__name__)

SETTING = "default.timestamp.extractor"


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """A deserialized input record as an extractor sees it (Kafka's ``ConsumerRecord``)."""

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


class TimestampExtractor(Protocol):
    def extract(self, record: ConsumedRecord, partition_time: int) -> int: ...


class RecordTimestampExtractor:
    """Base of the extractors that use the record's timestamp; ``on_invalid`` decides what a
    negative one becomes (negative again: the record is skipped)."""

    def extract(self, record: ConsumedRecord, partition_time: int) -> int:
        ts = record.timestamp
        return ts if ts >= 0 else self.on_invalid(record, partition_time)

    def on_invalid(self, record: ConsumedRecord, partition_time: int) -> int:
        raise NotImplementedError


class FailOnInvalidTimestamp(RecordTimestampExtractor):
    def on_invalid(self, record: ConsumedRecord, partition_time: int) -> int:
        raise StreamsException(
            f"input record topic={record.topic} partition={record.partition} offset={record.offset} has an "
            f"invalid (negative) timestamp {record.timestamp}, possibly written by an old producer; set "
            f"{SETTING}=log-and-skip-on-invalid-timestamp to skip such records, or "
            f"use-partition-time-on-invalid-timestamp to give them the partition's time")


class LogAndSkipOnInvalidTimestamp(RecordTimestampExtractor):
    def on_invalid(self, record: ConsumedRecord, partition_time: int) -> int:
        log.warning("skipping input record topic=%s partition=%d offset=%d: invalid (negative) timestamp %d",
                    record.topic, record.partition, record.offset, record.timestamp)
        return record.timestamp


class UsePartitionTimeOnInvalidTimestamp(RecordTimestampExtractor):
    def on_invalid(self, record: ConsumedRecord, partition_time: int) -> int:
        if partition_time < 0:
            raise StreamsException(
                f"input record topic={record.topic} partition={record.partition} offset={record.offset} has an "
                f"invalid (negative) timestamp and there is no partition time yet to use instead")
        return partition_time


class WallclockTimestampExtractor:
    def extract(self, record: ConsumedRecord, partition_time: int) -> int:
        return time.time_ns() // 1_000_000


class _FunctionExtractor:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def extract(self, record: ConsumedRecord, partition_time: int) -> int:
        return int(self.fn(record, partition_time))


_BUILTIN: dict[str, type] = {
    "fail-on-invalid-timestamp": FailOnInvalidTimestamp,
    "record-timestamp": FailOnInvalidTimestamp,
    "log-and-skip-on-invalid-timestamp": LogAndSkipOnInvalidTimestamp,
    "use-partition-time-on-invalid-timestamp": UsePartitionTimeOnInvalidTimestamp,
    "wall-clock": WallclockTimestampExtractor,
    "org.apache.kafka.streams.processor.FailOnInvalidTimestamp": FailOnInvalidTimestamp,
    "org.apache.kafka.streams.processor.LogAndSkipOnInvalidTimestamp": LogAndSkipOnInvalidTimestamp,
    "org.apache.kafka.streams.processor.UsePartitionTimeOnInvalidTimestamp": UsePartitionTimeOnInvalidTimestamp,
    "org.apache.kafka.streams.processor.WallclockTimestampExtractor": WallclockTimestampExtractor,
}


def timestamp_extractor(name: str) -> TimestampExtractor:
    """The extractor a ``default.timestamp.extractor`` value names (ValueError if none)."""
    from instance.topology.handlers import load_custom
    cls = _BUILTIN.get(name)
    if cls is not None:
        return cls()  # type: ignore[no-any-return]
    obj = load_custom(SETTING, name, sorted(n for n in _BUILTIN if not n.startswith("org.")))
    if isinstance(obj, type):
        obj = obj()
    if hasattr(obj, "extract"):
        return obj  # type: ignore[no-any-return]
    if callable(obj):
        return _FunctionExtractor(obj)
    raise ValueError(f"{SETTING}: {name} is neither an extractor nor a function")
