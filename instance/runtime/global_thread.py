"""The global stores of an instance and the thread that keeps them current (Kafka Streams'
``GlobalStateManagerImpl`` and ``GlobalStreamThread``).

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
import shutil
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from instance.config import StreamsConfig
from instance.errors import StreamsException
from instance.runtime.changelog_reader import StoreChangelogReader
from instance.runtime.state_manager import ProcessorStateManager
from instance.state.bytes_store import BytesStore, InMemoryBytesStore, RocksDBBytesStore
from instance.state.checkpoint import TaskDirLock, read_checkpoint
from instance.state.kv_store import KeyValueStore
from instance.state.store_builder import build_key_value_store
from instance.topology.processor import ProcessorContext, RecordContext
from instance.topology.topology import GlobalStore, Topology
from router.task_id import TaskId

log = logging.getLogger(__name__)

TopicPart = tuple[str, int]
#: the id the changelog reader knows the global stores by (no sub-topology has it)
GLOBAL_ID = TaskId(2**31 - 1, 0)


class GlobalStateManager(ProcessorStateManager):
    """Every global store of the instance, in ``<state_dir>/global`` (None: in memory). Each
    partition of a store's topic is one of its "changelog" partitions."""

    def __init__(self, topology: Topology, partitions: dict[str, int], state_dir: Path | None,
                 application_id: str, in_memory: bool = False) -> None:
        super().__init__(GLOBAL_ID, None, application_id, active=False)  # opens nothing itself
        self.task_dir = None if state_dir is None else state_dir / "global"
        self._processors: dict[str, Any] = {}
        self._record = RecordContext()
        try:
            self._open_global(topology, partitions, in_memory)
        except BaseException:
            self._close_stores()
            self._release()
            raise

    def _open_global(self, topology: Topology, partitions: dict[str, int], in_memory: bool) -> None:
        checkpoint: dict[TopicPart, int] = {}
        if self.task_dir is not None:
            self._lock = TaskDirLock(self.task_dir)
            self._lock.acquire(wait_s=5.0)
            checkpoint = read_checkpoint(self.task_dir)
        for g in topology.global_stores.values():
            n = partitions.get(g.topic)
            if n is None:
                raise StreamsException(f"topic {g.topic!r} of global store {g.spec.name!r} does not exist; "
                                       f"create it before starting the application")
            tps = [(g.topic, p) for p in range(n)]
            persistent = self.task_dir is not None and not (in_memory or g.spec.in_memory)
            inner: BytesStore
            if persistent:
                assert self.task_dir is not None
                path = self.task_dir / "rocksdb" / g.spec.name
                if not all(tp in checkpoint for tp in tps):
                    shutil.rmtree(path, ignore_errors=True)  # no checkpoint: load it whole again
                inner = RocksDBBytesStore(g.spec.name, path)
                self._persistent.update(tps)
                self.checkpointed.update({tp: checkpoint[tp] for tp in tps if tp in checkpoint})
            else:
                inner = InMemoryBytesStore(g.spec.name)
            store = build_key_value_store(g.spec, inner, None, 0)
            self.stores[g.spec.name] = store
            for tp in tps:
                self._store_of[tp] = store
                self.changelog_offsets[tp] = self.checkpointed.get(tp, 0)
            if g.processor is not None:
                self._processors[g.topic] = self._init_processor(g, store)

    def _init_processor(self, g: GlobalStore, store: KeyValueStore) -> Any:
        assert g.processor is not None
        proc = g.processor()
        proc.init(ProcessorContext("global", g.processor_name, self._record, [], {g.spec.name: store},
                                   self.application_id))
        kd, vd = g.key_serde.deserialize, g.value_serde.deserialize
        return proc, kd, vd

    def restore(self, tp: TopicPart, records: list[tuple[bytes, bytes | None]], next_offset: int) -> None:
        """Apply records of a global topic: as they are, or through the store's processor."""
        entry = self._processors.get(tp[0])
        if entry is None:
            super().restore(tp, [r for r in records if r[0] is not None], next_offset)
            return
        proc, kd, vd = entry
        rc = self._record
        rc.topic, rc.partition = tp
        for kb, vb in records:
            proc.process(kd(kb), vd(vb))
        store = self._store_of[tp]
        store.flush_cache()
        self.changelog_offsets[tp] = next_offset

    def flush_and_checkpoint(self) -> None:
        """Flush the stores, then record the topic offsets they reflect (a checkpoint behind the
        stores is harmless: re-applying the records from the topic is idempotent)."""
        self.flush()
        self._write_checkpoint()


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
        self.state = GlobalStateManager(topology, partitions, config.app_state_dir, config.application_id,
                                        config.in_memory_stores)
        self._owner = _GlobalOwner(self.state)
        conf = {"bootstrap.servers": config.bootstrap_servers, "group.id": f"{config.application_id}-global",
                "client.id": f"{config.instance_id}-global",
                "isolation.level": "read_committed" if config.eos else "read_uncommitted"}
        self.reader = StoreChangelogReader(conf, committed=None)
        self._stopping = threading.Event()
        self._on_error = on_error
        #: records applied since start (bootstrap included)
        self.applied = 0

    @property
    def stores(self) -> dict[str, KeyValueStore]:
        return self.state.stores

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
            self.reader.close()
            self.state.close(checkpoint=True)
