"""The thread that keeps an instance's global stores current (Kafka Streams'
``GlobalStreamThread``; the stores: instance/runtime/global_state.py).

A global store's changelog is its source topic, every partition. So the same
:class:`StoreChangelogReader` that restores tasks and feeds standbys does the work: at start-up
it *restores* the stores from their checkpoint (or the beginning) to the topics' end offsets —
``KafkaStreams.start`` blocks until then, so no task processes before its global tables are
loaded — and then *follows* the topics like a standby. Records are applied as they are (a
GlobalKTable), or through the store's processor (``Topology.add_global_store`` with one).
Stream threads only read global stores (``query_get``: no cache to go stale).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from instance.config import StreamsConfig
from instance.errors import ProductionException, StreamsException
from instance.runtime.changelog_reader import StoreChangelogReader
from instance.runtime.global_state import GLOBAL_ID, GlobalStateManager
from instance.state.kv_store import KeyValueStore
from instance.topology.handlers import ErrorHandling
from instance.topology.topology import Topology

log = logging.getLogger(__name__)


class _GlobalOwner:
    """What the changelog reader registers (its ChangelogOwner protocol)."""

    def __init__(self, state: GlobalStateManager) -> None:
        self.id = GLOBAL_ID
        self.state = state
        self.sources: Collection[str] = ()


class GlobalStreamThread(threading.Thread):
    """Bootstraps the global stores (:meth:`bootstrap`, called by ``KafkaStreams.start``), then
    follows their topics until :meth:`shutdown`."""

    def __init__(self, config: StreamsConfig, topology: Topology, admin: AdminClient,
                 on_error: Callable[[BaseException], None] | None = None) -> None:
        super().__init__(name=f"{config.instance_id}-GlobalStreamThread", daemon=True)
        self.config = config
        md = admin.list_topics(timeout=10)
        partitions = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}
        #: the deserialization handler for the global topics (and what it skipped)
        self.errors = ErrorHandling(config.to_properties(), send=self._send_dead_letter)
        self._producer: Producer | None = None
        self.state = GlobalStateManager(topology, partitions, config.app_state_dir, config.application_id,
                                        self.errors, config.in_memory_stores)
        self._owner = _GlobalOwner(self.state)
        conf = config.client_config("global.consumer", **{
            "group.id": f"{config.application_id}-global", "client.id": f"{config.instance_id}-global",
            "isolation.level": "read_committed" if config.eos else "read_uncommitted"})
        self.reader = StoreChangelogReader(conf, committed=None, task_timeout_ms=config.task_timeout_ms)
        self._stopping = threading.Event()
        self._on_error = on_error
        #: records applied since start (bootstrap included)
        self.applied = 0

    @property
    def stores(self) -> dict[str, KeyValueStore]:
        return self.state.stores

    def progress(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(position, end offset) of every global topic partition (safe from query threads)."""
        return self.reader.progress(self._owner)

    def _send_dead_letter(self, topic: str, key: bytes | None, value: bytes | None, ts: int, partition: int,
                          headers: Any) -> None:
        """Dead-letter records of the global topics (a producer made on the first one)."""
        if self._producer is None:
            self._producer = Producer(self.config.client_config(
                "producer", **{"client.id": f"{self.config.instance_id}-global-dlq"}))
        kwargs: dict[str, Any] = {"key": key, "value": value, "timestamp": ts, "headers": headers}
        if partition >= 0:
            kwargs["partition"] = partition
        try:
            self._producer.produce(topic, **kwargs)
        except (KafkaException, BufferError) as e:
            raise ProductionException(f"could not write a dead-letter record to {topic}: {e}") from e
        self._producer.flush(10)

    def bootstrap(self, timeout_s: float = 300.0) -> None:
        """Load every global store to its topic's current end offsets; raises on timeout."""
        deadline = time.monotonic() + timeout_s
        if self.reader.register_restoring(self._owner):
            while not self.reader.restore():
                if time.monotonic() > deadline:
                    raise StreamsException(f"global stores not loaded within {timeout_s:.0f} s")
        self.state.flush_and_checkpoint()
        self.reader.register_standby(self._owner)

    def run(self) -> None:
        interval = max(self.config.effective_commit_interval_ms, 100) / 1000.0
        next_flush = time.monotonic() + interval
        try:
            while not self._stopping.is_set():
                n = self.reader.update_standbys()
                self.applied += n
                now = time.monotonic()
                if now >= next_flush:
                    self.state.flush_and_checkpoint()
                    next_flush = now + interval
                if n == 0:
                    self._stopping.wait(0.02)  # the reader pauses its idle partitions meanwhile
        except BaseException as e:  # the client decides what a dead global thread means
            log.exception("global stream thread died")
            if self._on_error is not None:
                self._on_error(e)

    def shutdown(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(timeout)
        try:
            self.state.flush()
        finally:
            if self._producer is not None:
                self._producer.flush(10)
            self.reader.close()
            self.state.close(checkpoint=True)
