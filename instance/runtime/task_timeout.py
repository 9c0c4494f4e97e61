"""``task.timeout.ms``: how long a commit may wait for a broker that does not answer.

Kafka Streams (KIP-572) retries a client call that timed out until the task made no progress for
``task.timeout.ms`` (default 5 minutes) before it gives up; a broker restart or a leader election
must not kill a stream thread. The commit path here does the same: a retriable failure of an
offset commit, of the transaction's calls or of the producer's flush is tried again until the
deadline, with one warning when the waiting starts and one when it ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

from instance.errors import StreamsException

log = logging.getLogger(__name__)

T = TypeVar("T")

#: what a broker that is away (restarting, electing a leader) answers with: worth waiting for
TRANSIENT = frozenset({
    KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE,
    KafkaError._WAIT_COORD, KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT_QUEUE,
    KafkaError.REQUEST_TIMED_OUT, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.CONCURRENT_TRANSACTIONS, KafkaError.NETWORK_EXCEPTION,
    # the client's metadata has no leader for a partition for a moment while a killed leader's
    # partitions are elected elsewhere (a 3-broker cluster): Kafka's InvalidMetadataException kind
    KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART,
})


class TaskTimeoutException(StreamsException):
    """The broker did not answer a commit within ``task.timeout.ms``."""


def kafka_error(e: BaseException) -> KafkaError | None:
    return e.args[0] if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError) else None


def is_transient(err: KafkaError | None, final: frozenset[int] = frozenset()) -> bool:
    """A failure that waiting cures (not one that needs an abort, a new producer or a rejoin, nor
    one of ``final``)."""
    if err is None or err.fatal() or err.txn_requires_abort() or err.code() in final:
        return False
    return err.code() in TRANSIENT or err.retriable()


def retrying(call: Callable[[], T], what: str, timeout_ms: int, name: str,
             final: frozenset[int] = frozenset()) -> T:
    """``call()`` until it succeeds or fails for good; a transient failure is tried again (after a
    short pause) until ``timeout_ms`` have passed since the first one."""
    deadline: float | None = None
    pause = 0.1
    while True:
        try:
            result = call()
        except KafkaException as e:
            err = kafka_error(e)
            if not is_transient(err, final):
                raise
            now = time.monotonic()
            if deadline is None:
                deadline = now + timeout_ms / 1000.0
                log.warning("%s: %s failed (%s); trying again for up to task.timeout.ms=%d ms",
                            name, what, err.name() if err else e, timeout_ms)
            elif now > deadline:
                raise TaskTimeoutException(
                    f"{what} failed for task.timeout.ms={timeout_ms} ms: {err}; is the broker "
                    "reachable? (raise task.timeout.ms to wait longer)") from e
            time.sleep(pause)
            pause = min(2.0, pause * 2)
            continue
        if deadline is not None:
            log.warning("%s: %s went through after %.1f s", name, what,
                        timeout_ms / 1000.0 - (deadline - time.monotonic()))
        return result
