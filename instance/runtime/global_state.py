"""The global stores of an instance (Kafka Streams' ``GlobalStateManagerImpl``): every
partition of a global store's topic is one of its "changelog" partitions, so the changelog reader
restores and follows them like a task's (instance/runtime/global_thread.py). Records are applied
as they are (a GlobalKTable), or through the store's processor (``Topology.add_global_store``).
Either way each record is deserialized first, and one that does not deserialize goes to
``default.deserialization.exception.handler`` with its topic, partition and offset, as Kafka
Streams' global update task does: skipped (log-and-continue, dead-letter topic) or fatal
(log-and-fail, the default) instead of landing in the store to break every reader later."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

from instance.errors import StreamsException
from instance.runtime.state_manager import ProcessorStateManager
from instance.state.bytes_store import BytesStore, InMemoryBytesStore, RocksDBBytesStore
from instance.state.change_logging import Batch
from instance.state.checkpoint import TaskDirLock, read_checkpoint
from instance.state.kv_store import KeyValueStore
from instance.state.store_builder import build_key_value_store
from instance.topology.handlers import ErrorHandling
from instance.topology.processor import ProcessorContext, RecordContext, node_callable
from instance.topology.topology import GlobalStore, Topology
from kernel.task_id import TaskId

TopicPart = tuple[str, int]
#: the id the changelog reader knows the global stores by (no sub-topology has it)
GLOBAL_ID = TaskId(2**31 - 1, 0)


class GlobalStateManager(ProcessorStateManager):
    """Every global store of the instance, in ``<state_dir>/global`` (None: in memory). Each
    partition of a store's topic is one of its "changelog" partitions."""

    def __init__(self, topology: Topology, partitions: dict[str, int], state_dir: Path | None,
                 application_id: str, errors: ErrorHandling, in_memory: bool = False) -> None:
        super().__init__(GLOBAL_ID, None, application_id, active=False)  # opens nothing itself
        self.task_dir = None if state_dir is None else state_dir / "global"
        self.errors = errors
        self._processors: dict[str, Any] = {}
        #: per topic: (key deserializer, value deserializer)
        self._serdes: dict[str, tuple[Any, Any]] = {}
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
            self._serdes[g.topic] = (g.key_serde.deserialize, g.value_serde.deserialize)
            for tp in tps:
                self._store_of[tp] = store
                self.changelog_offsets[tp] = self.checkpointed.get(tp, 0)
            store.bind_position(functools.partial(self.topic_position, tuple(tps)))
            if g.processor is not None:
                self._processors[g.topic] = self._init_processor(g, store)

    def topic_position(self, tps: tuple[TopicPart, ...]) -> int:
        """A global store's position: the sum over its topic's partitions of the next offset applied."""
        offsets = self.changelog_offsets
        return sum(offsets.get(tp, 0) for tp in tps)

    def _init_processor(self, g: GlobalStore, store: KeyValueStore) -> Any:
        assert g.processor is not None
        proc = g.processor()
        proc.init(ProcessorContext("global", g.processor_name, self._record, [], {g.spec.name: store},
                                   self.application_id))
        return node_callable(proc, self._record)  # a Record processor through its adapter

    def apply(self, tp: TopicPart, msgs: list[Any], next_offset: int) -> None:
        """Apply messages of a global topic: deserialized (the handler gets those that do not),
        then stored as they are, or passed to the store's processor. A record with no key is not
        stored (it could never be looked up)."""
        process = self._processors.get(tp[0])
        kd, vd = self._serdes[tp[0]]
        rc = self._record
        rc.topic, rc.partition = tp
        rows: Batch = []
        for m in msgs:
            kb, vb = m.key(), m.value()
            rc.offset, rc.msg, rc.timestamp, rc.headers = m.offset(), m, m.timestamp()[1], None
            try:
                k, v = kd(kb), vd(vb)
            except Exception as e:
                self.errors.deserialization_error("global", rc, e)  # raises unless skipped
                continue
            if process is not None:
                process(k, v)
            elif kb is not None:
                rows.append((kb, vb, rc.timestamp))
        rc.msg = None
        if process is None:
            self.restore(tp, rows, next_offset)
            return
        self._store_of[tp].flush_cache()
        self.changelog_offsets[tp] = next_offset

    def flush_and_checkpoint(self) -> None:
        """Flush the stores, then record the topic offsets they reflect (a checkpoint behind the
        stores is harmless: re-applying the records from the topic is idempotent)."""
        self.flush()
        self._write_checkpoint()
