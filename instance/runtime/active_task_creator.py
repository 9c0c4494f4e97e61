"""ActiveTaskCreator: builds the active tasks of one stream thread (Kafka Streams' class of that
name): the task's state manager and stores, its sinks and changelogs wired to the thread's current
producer, the wait for an empty input (``max.task.idle.ms``) and the input it must process again
before its answers are current. The task comes back CREATED; the TaskManager starts its restore."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from instance.config import StreamsConfig
from instance.runtime.collector import RecordCollector
from instance.runtime.metrics import ThreadMetrics
from instance.runtime.state_manager import ProcessorStateManager
from instance.runtime.task import StreamTask
from instance.runtime.task_timeout import retrying
from instance.state.kv_store import ChangelogSend
from instance.state.source_offsets import HEADER as SOURCE_HEADER
from instance.topology.handlers import ErrorHandling
from instance.topology.timestamps import timestamp_extractor
from instance.topology.topology import Topology
from kernel.task_id import TaskId

TopicPart = tuple[str, int]


class ActiveTaskCreator:
    def __init__(self, name: str, config: StreamsConfig, topology: Topology, resolve: Callable[[str], str],
                 errors: ErrorHandling, metrics: ThreadMetrics, start_offsets: Mapping[TopicPart, int],
                 global_stores: Mapping[str, Any]) -> None:
        """``start_offsets``: the committed offset of each assigned partition (the TaskManager's,
        kept current by it): where fetching starts before a partition returned a record;
        ``global_stores``: the instance's (read-only for tasks)."""
        self.name = name
        self.config = config
        self.topology = topology
        self._resolve = resolve
        self.errors = errors
        self.metrics = metrics
        self._start_offsets = start_offsets
        self._internal = {resolve(t) for t in topology.internal_topics}
        self._extractor = timestamp_extractor(config.default_timestamp_extractor)
        n_stores = max(1, len(topology.stores))
        self._cache_entries = config.statestore_cache_max_bytes // (100 * n_stores)
        self.global_stores = global_stores

    def create(self, tid: TaskId, collector: RecordCollector, consumer: Consumer | None,
               committed: Mapping[TopicPart, int]) -> StreamTask:
        config = self.config
        state = ProcessorStateManager(tid, config.app_state_dir, config.application_id, active=True,
                                      eos=config.eos, lock_wait_s=5.0)  # the cleaner holds unowned dirs briefly
        task = StreamTask(tid, self.topology, self.topology.subtopologies()[tid.subtopology], config.application_id,
                          self._resolve, collector.send, partial(self._changelog_sender, collector), state,
                          self._cache_entries, config.in_memory_stores, self.errors, self.global_stores,
                          extractor=self._extractor, metrics=self.metrics.task_metrics(str(tid)))
        self._forget_reset_origins(task, committed)
        if consumer is None:
            return task
        if len(task.sources) > 1 and config.max_task_idle_ms >= 0:
            task.caught_up = partial(self._caught_up, consumer, partition=tid.partition)
            task.max_idle_ms = config.max_task_idle_ms
        try:
            task.catch_up_to.update(self._ahead_of_commit(task, consumer, committed))
        except BaseException:
            task.close()  # releases the task directory: nothing else holds the task yet
            raise
        return task

    def _forget_reset_origins(self, task: StreamTask, committed: Mapping[TopicPart, int]) -> None:
        """A checkpoint's origin high-water (instance/state/origins.py) was written after a commit
        of the task's input; an internal topic with no commit for the partition now was reset or
        recreated (``iqmesh reset`` keeping the local state): its origins start again from 0, which
        the old marks would skip, so they are dropped."""
        for topic in self._internal:
            if topic in task.sources and committed.get((topic, task.partition), 0) == 0:
                task.state.origins.topic(topic).clear()

    def _ahead_of_commit(self, task: StreamTask, consumer: Consumer, committed: Mapping[TopicPart, int]
                         ) -> dict[str, int]:
        """Input the previous owner may have processed (and answered queries from) beyond the
        commit: the task's answers are flagged stale until it has processed it again."""
        ahead: dict[str, int] = {}
        for t in task.sources:
            tp = TopicPartition(t, task.partition)
            end = retrying(partial(consumer.get_watermark_offsets, tp, timeout=10), "reading an end offset",
                           self.config.task_timeout_ms, self.name)[1]
            if end > committed.get((t, task.partition), 0):
                ahead[t] = end
        return ahead

    def _caught_up(self, consumer: Consumer, topic: str, partition: int) -> bool:
        """The input partition has no records on the broker beyond what was fetched (from the
        high watermark of the last fetch answer: unknown before the first)."""
        tp = TopicPartition(topic, partition)
        low, high = consumer.get_watermark_offsets(tp, cached=True)
        if high is None or high < 0:
            return False
        position = consumer.position([tp])[0].offset
        if position < 0:  # nothing returned yet: fetching starts at the commit (or the log start)
            position = max(self._start_offsets.get((topic, partition), 0), low)
        return position >= high

    def _changelog_sender(self, collector: RecordCollector, topic: str, partition: int,
                          task: StreamTask) -> ChangelogSend:
        """Logs a store's write batch. The changelog partition has one writer (this thread,
        idempotent), so the records take the next offsets in order: the store's position is
        counted, and a failed delivery fails the next commit (RecordCollector). At-least-once
        records carry the input offsets they reflect (instance/state/source_offsets.py)."""
        send = collector.send
        tp = (topic, partition)
        eos = self.config.eos
        logged = task.state.logged

        def send_batch(batch: list[tuple[bytes, bytes | None, int]]) -> None:
            if not batch:
                return
            mark = None if eos else task.source_mark()
            headers: list[tuple[str, str | bytes | None]] | None = \
                None if mark is None else [(SOURCE_HEADER, mark)]
            for kb, vb, ts in batch:
                send(topic, kb, vb, ts, partition, headers)
            logged(tp, len(batch))
        return send_batch
