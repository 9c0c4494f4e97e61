"""RecordCollector: the one producer of a stream thread (sinks, repartition topics, changelogs).

The producer batches with ``linger.ms`` and partitions keyed records with librdkafka's
``murmur2_random``, byte-identical to Kafka's Java default partitioner, so the router's partition
for a key is the partition the record was written to.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Producer

from instance.errors import ProductionException, StreamsException
from instance.runtime.task_timeout import TaskTimeoutException, is_transient, kafka_error

Headers = list[tuple[str, str | bytes | None]]
log = logging.getLogger(__name__)

#: fatal producer errors that a new producer does not cure: the thread fails
AUTHORIZATION_ERRORS = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                                  KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
#: a record refused for the producer's state, not its own: the producer is lost (a delivery report
#: carries the record's error, not the producer's fatal flag), never the production handler's call
PRODUCER_STATE_ERRORS = frozenset({
    KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, KafkaError.UNKNOWN_PRODUCER_ID, KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.INVALID_PRODUCER_ID_MAPPING, KafkaError._GAPLESS_GUARANTEE, KafkaError._FATAL,
    KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
    # librdkafka purges what a fatally failed producer still held; those reports may come first
    KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})


class ProducerLostException(StreamsException):
    """The producer cannot go on (fenced, or a fatal error such as an out-of-order sequence after
    a broker lost its producer state): the records it did not write are lost with it, so the tasks
    are closed dirty and the thread goes on with a new producer (Kafka Streams' TaskMigrated)."""

#: the (single) broker went away: every connection down, or one lost or refused
_BROKER_GONE = frozenset({KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT})
#: errors after which the producer cannot go on: never offered to the production handler
_FATAL = AUTHORIZATION_ERRORS | PRODUCER_STATE_ERRORS


class ProducerClient(Protocol):
    """The producer calls the runtime makes (confluent-kafka's ``Producer``): the seam where a test
    puts a producer of its own. ``conf`` carries the collector's ``on_delivery`` and ``error_cb``."""

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None, partition: int = -1,
                callback: Any = None, on_delivery: Any = None, timestamp: int = 0,
                headers: Headers | None = None) -> None: ...

    def poll(self, timeout: float = -1) -> int: ...

    def flush(self, timeout: float = -1) -> int: ...

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None: ...

    def init_transactions(self, timeout: float = -1) -> None: ...

    def begin_transaction(self) -> None: ...

    def send_offsets_to_transaction(self, positions: list[Any], group_metadata: Any, timeout: float = -1) -> None: ...

    def commit_transaction(self, timeout: float = -1) -> None: ...

    def abort_transaction(self, timeout: float = -1) -> None: ...


class RecordCollector:
    """Sends serialized records; remembers the first failed delivery (or fatal producer error)
    and raises it at the next flush, so a commit never covers a record that was not written.
    Delivery reports come for failures only: a success costs no Python call.

    A record the producer refuses at once (e.g. larger than ``message.max.bytes``) raises
    :class:`ProductionException` from ``send``, where the caller knows the input record; a
    failed delivery report goes to ``on_delivery_error`` (the production exception handler,
    which returns to continue or raises to fail), except for changelog records and fatal
    errors, which always fail."""

    def __init__(self, conf: dict[str, Any],
                 new_producer: Callable[[dict[str, Any]], ProducerClient] = Producer,
                 abandon_when_brokers_down: bool = False) -> None:
        #: a broker that restarts may forget this producer's transaction (the dev broker does:
        #: runtime/membership.py), so once every broker is down the producer must not send again
        self.abandon_when_brokers_down = abandon_when_brokers_down
        #: every broker went away while ``abandon_when_brokers_down``: nothing is sent from then on
        self.abandoned = False
        producer = new_producer({**conf, "delivery.report.only.error": True,
                                 "on_delivery": self._on_delivery, "error_cb": self.error_cb})
        self.producer = producer
        self._produce = producer.produce
        self._poll = producer.poll
        self._error: KafkaError | None = None
        self._where = ""
        self._lock = threading.Lock()
        self.on_delivery_error: Callable[[KafkaError, Any], None] | None = None
        self.transaction_timeout_ms = int(conf.get("transaction.timeout.ms", 60_000))
        self.transactional_id: str | None = conf.get("transactional.id")
        #: the producer must not write again (fenced, failed, or its transaction aborted)
        self.discarded = False

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             partition: int = -1, headers: Headers | None = None) -> None:
        try:  # positional: confluent-kafka parses keywords at a third of the call's cost
            self._produce(topic, value, key, partition, None, None, timestamp, headers)
        except BufferError:
            self._send_after_room(topic, key, value, timestamp, partition, headers)
        except (KafkaException, SystemError) as e:
            self._send_refused(e, topic, partition)

    def _send_after_room(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
                         partition: int, headers: Headers | None) -> None:
        while True:
            self.poll(0.05)
            try:
                self._produce(topic, value, key, partition, None, None, timestamp, headers)
                return
            except BufferError:
                continue
            except (KafkaException, SystemError) as e:
                self._send_refused(e, topic, partition)
                return

    def _send_refused(self, e: KafkaException | SystemError, topic: str, partition: int) -> None:
        """A record refused at once: the record's fault (raised for the caller, who knows the input
        record), or the producer's (it failed for good: the record is dropped with the rest of the
        uncommitted ones, and the next flush raises :class:`ProducerLostException`)."""
        err = kafka_error(e)
        if isinstance(e, SystemError):
            self._fail(_failed_for_good(e), "the producer")
        elif err is not None and (err.fatal() or err.code() in _FATAL):
            self._fail(err, "the producer")
        else:
            raise _refused(e, topic, partition) from e

    def _fail(self, err: KafkaError, where: str) -> None:
        with self._lock:
            if self._error is None:
                self._error, self._where = err, where

    def error_cb(self, err: KafkaError) -> None:
        if err.fatal():
            self._fail(err, "the producer")
        elif err.code() in _BROKER_GONE and self.abandon_when_brokers_down:
            self._abandon(err)

    def _abandon(self, err: KafkaError) -> None:
        """Drop what the producer holds and every later record, before a restarted broker could
        take them (librdkafka reconnects on its own); the next commit starts over."""
        if self.abandoned:
            return
        self.abandoned = True
        self._produce = _drop
        self._fail(err, "the producer (the broker went away)")
        with contextlib.suppress(KafkaException, SystemError):
            self.producer.purge(blocking=False)

    def raise_if_abandoned(self) -> None:
        """Before a commit: a producer that lived through an outage commits nothing."""
        if self.abandoned:
            raise ProducerLostException("the broker went away while the transaction was open; a restarted "
                                        "broker may have forgotten it (runtime/membership.py)")

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            return
        handler = self.on_delivery_error
        # a record the broker could not take *for now* (its topic unknown for a moment after a
        # restart, a leader away) is not the production handler's call: the tasks start over from
        # the last commit (Kafka Streams' TaskCorrupted for a retriable send error)
        if handler is not None and not err.fatal() and err.code() not in _FATAL and not is_transient(err) \
                and not msg.topic().endswith("-changelog"):  # a lost changelog record corrupts state
            try:
                handler(err, msg)
                return
            except Exception as e:  # the handler said FAIL: raised at the next flush
                self._fail(err, f"{msg.topic()}[{msg.partition()}] ({e})")
                return
        self._fail(err, f"{msg.topic()}[{msg.partition()}]")

    def flush(self, timeout_ms: int = 60_000, name: str = "") -> None:
        """Wait until every record sent is acknowledged (``task.timeout.ms`` at most: a broker that
        is restarting is waited for), then raise the first failed delivery, if any."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        waited = False
        while remaining := self._flush(min(5.0, max(0.0, deadline - time.monotonic()))):
            if self._error is not None:
                break  # a failed record: no use waiting for the rest
            if time.monotonic() >= deadline:
                raise TaskTimeoutException(f"{remaining} records were not acknowledged within "
                                           f"task.timeout.ms={timeout_ms} ms; is the broker reachable?")
            if not waited:
                waited = True
                log.warning("%s: %d records not acknowledged yet; waiting for the broker for up to "
                            "task.timeout.ms=%d ms", name, remaining, timeout_ms)
        self.check()

    def _flush(self, timeout: float) -> int:
        try:
            return int(self.producer.flush(timeout))
        except (KafkaException, SystemError) as e:
            # a fatal error is raised from flush (confluent-kafka may wrap it in a SystemError
            # when the error callback runs with it pending)
            err = kafka_error(e) or kafka_error(e.__cause__ or e.__context__ or e)
            # a SystemError with nothing behind it: confluent-kafka's flush after librdkafka
            # failed the producer fatally (an out-of-order sequence once a restarted broker
            # forgot the producer's state): the producer is lost all the same
            self._fail(err or _failed_for_good(e), "the producer")
            return 1

    def check(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            lost = (err.code() in PRODUCER_STATE_ERRORS or is_transient(err)
                    or (err.fatal() and err.code() not in AUTHORIZATION_ERRORS))
            raise (ProducerLostException if lost else StreamsException)(
                f"a record could not be written to {self._where}: {err.name()}: {err.str()}") \
                from KafkaException(err)

    def poll(self, timeout: float = 0.0) -> None:
        try:
            self._poll(timeout)
        except (KafkaException, SystemError) as e:  # as in _flush: raised at the next flush
            self._fail(kafka_error(e) or _failed_for_good(e), "the producer")

    def discard(self) -> None:
        """Drop what the producer still holds: a changelog record delivered after the next
        owner's would corrupt every restore from then on (runtime/membership.py says more)."""
        self.discarded = True
        with contextlib.suppress(KafkaException, SystemError):  # a producer that failed fatally raises
            self.producer.purge()
            self.producer.flush(0)


def _drop(topic: str, value: bytes | None = None, key: bytes | None = None, partition: int = -1,
          callback: Any = None, on_delivery: Any = None, timestamp: int = 0, headers: Headers | None = None) -> None:
    """What an abandoned collector sends: nothing (its transaction is never committed)."""


def _failed_for_good(e: BaseException) -> KafkaError:
    return KafkaError(KafkaError._FATAL, f"the producer failed ({type(e).__name__}: {e})", fatal=True)


def _refused(e: KafkaException | SystemError, topic: str, partition: int) -> ProductionException:
    err = kafka_error(e)
    what = f"{err.name()}: {err.str()}" if err is not None else str(e)
    where = f"{topic}[{partition}]" if partition >= 0 else topic
    return ProductionException(f"the producer refused a record for {where}: {what}")
