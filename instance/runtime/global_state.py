"""The global stores of an instance (Kafka Streams' ``GlobalStateManagerImpl``): every
partition of a global store's topic is one of its "changelog" partitions, so the changelog reader
restores and follows them like a task's (instance/runtime/global_thread.py). Records are applied
as they are (a GlobalKTable), or through the store's processor (``Topology.add_global_store``)."""

from __future__ import annotations

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
from instance.topology.processor import ProcessorContext, RecordContext, node_callable
from instance.topology.topology import GlobalStore, Topology
from router.task_id import TaskId

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
        return node_callable(proc, self._record), kd, vd  # a Record processor through its adapter

    def restore(self, tp: TopicPart, records: Batch, next_offset: int) -> None:
        """Apply records of a global topic: as they are, or through the store's processor."""
        entry = self._processors.get(tp[0])
        if entry is None:
            super().restore(tp, [r for r in records if r[0] is not None], next_offset)
            return
        process, kd, vd = entry
        rc = self._record
        rc.topic, rc.partition = tp
        for kb, vb, ts in records:
            rc.timestamp = ts
            process(kd(kb), vd(vb))
        store = self._store_of[tp]
        store.flush_cache()
        self.changelog_offsets[tp] = next_offset

    def flush_and_checkpoint(self) -> None:
        """Flush the stores, then record the topic offsets they reflect (a checkpoint behind the
        stores is harmless: re-applying the records from the topic is idempotent)."""
        self.flush()
        self._write_checkpoint()
