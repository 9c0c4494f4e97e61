"""StandbyTaskCreator: builds the standby tasks of one stream thread (Kafka Streams' class of that
name): the task's state manager and stores, registered with the thread's changelog reader."""

from __future__ import annotations

from collections.abc import Callable

from instance.config import StreamsConfig
from instance.runtime.changelog_reader import StoreChangelogReader
from instance.runtime.metrics import ThreadMetrics
from instance.runtime.standby import StandbyTask
from instance.runtime.state_manager import ProcessorStateManager
from instance.topology.topology import Topology
from kernel.task_id import TaskId


class StandbyTaskCreator:
    def __init__(self, config: StreamsConfig, topology: Topology, resolve: Callable[[str], str],
                 reader: StoreChangelogReader, metrics: ThreadMetrics) -> None:
        self.config = config
        self.topology = topology
        self._resolve = resolve
        self._reader = reader
        self.metrics = metrics

    def create(self, tid: TaskId) -> StandbyTask:
        """Raises StreamsException while the task directory is still locked by its old owner here."""
        config = self.config
        st = self.topology.subtopologies()[tid.subtopology]
        state = ProcessorStateManager(tid, config.app_state_dir, config.application_id, active=False, eos=config.eos)
        return StandbyTask(tid, [self.topology.stores[s] for s in st.stores], state,
                           [self._resolve(t) for t in st.source_topics], config.in_memory_stores, self._reader,
                           self.metrics.task_metrics(str(tid), standby=True))
