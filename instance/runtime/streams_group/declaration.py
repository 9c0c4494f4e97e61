"""iqmesh's topology as a streams group member declares it in its first heartbeat.

One entry per sub-topology (id: iqmesh's sub-topology number as text, as Kafka Streams numbers
them): its external source topics, the repartition topics it reads (with a partition count where
the application fixed one, else 0: the broker derives it from the writers, as Kafka Streams does)
and writes, and its stores' changelogs (partition count 0: the broker makes them as many as the
sub-topology's tasks). Internal topics carry iqmesh's own topic settings (compacted changelogs,
deleting repartition topics), so topics the broker creates are the ones iqmesh would create.

Co-partition groups: iqmesh's joined topics, and, because a task here reads the same partition
number of every source topic of its sub-topology (the invariant the classic protocol's ``range``
assignment gave), all source topics of a sub-topology that reads more than one: the broker then
checks them (status INCORRECTLY_PARTITIONED_TOPICS) and gives a repartition topic among them the
group's partition count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from instance.kafka_wire.generated import streams_group_heartbeat_request as hb
from instance.runtime.internal_topics import changelog_config, internal_name
from instance.topology.topology import Topology
from kernel.task_id import TaskId

#: the topology epoch iqmesh declares: one topology per application.id (no in-place upgrades yet)
TOPOLOGY_EPOCH = 0
REPARTITION_CONFIG = {"cleanup.policy": "delete"}


@dataclass(frozen=True)
class SubtopologySources:
    """The topics whose partition ``p`` task ``<id>_p`` reads (repartition topics included)."""

    subtopology: int
    topics: tuple[str, ...]


@dataclass(frozen=True)
class Declaration:
    """The declared topology and, per sub-topology, the topics its tasks read."""

    topology: hb.Topology
    sources: tuple[SubtopologySources, ...]

    def partitions_of(self, task: TaskId) -> frozenset[tuple[str, int]]:
        """(topic, partition) pairs task ``task`` reads."""
        for s in self.sources:
            if s.subtopology == task.subtopology:
                return frozenset((t, task.partition) for t in s.topics)
        return frozenset()


def _configs(settings: Mapping[str, str]) -> tuple[hb.KeyValue, ...]:
    return tuple(hb.KeyValue(k, v) for k, v in sorted(settings.items()))


def declare(topology: Topology, application_id: str, replication_factor: int = 0) -> Declaration:
    """The declaration of ``topology`` for ``application_id``; ``replication_factor`` of the internal
    topics (0 or -1: the broker's default)."""
    resolve = internal_name(application_id, topology)
    internal = topology.internal_topics
    rf = max(replication_factor, 0)
    subs, sources = [], []
    for st in topology.subtopologies():
        external = tuple(dict.fromkeys(t for t in st.source_topics if t not in internal))
        repartition_in = tuple(dict.fromkeys(t for t in st.source_topics if t in internal))
        repartition_sources = tuple(
            hb.TopicInfo(resolve(t), internal[t].num_partitions or 0, rf, _configs(REPARTITION_CONFIG))
            for t in repartition_in)
        changelogs = tuple(
            hb.TopicInfo(topology.stores[s].changelog_topic(application_id), 0, rf,
                         _configs(changelog_config(topology.stores[s])))
            for s in st.stores if topology.stores[s].logging_enabled)
        groups = [g for g in topology.copartition_groups if set(g) <= set(st.source_topics)]
        if len(external) + len(repartition_in) > 1 and set(st.source_topics) not in groups:
            groups.append(set(st.source_topics))
        copartition = tuple(
            hb.CopartitionGroup(source_topics=tuple(i for i, t in enumerate(external) if t in g),
                                repartition_source_topics=tuple(i for i, t in enumerate(repartition_in) if t in g))
            for g in groups)
        sinks = tuple(dict.fromkeys(resolve(t) for t in st.sink_topics if t in internal))
        subs.append(hb.Subtopology(subtopology_id=str(st.id), source_topics=external,
                                   state_changelog_topics=changelogs, repartition_sink_topics=sinks,
                                   repartition_source_topics=repartition_sources, copartition_groups=copartition))
        sources.append(SubtopologySources(st.id, external + tuple(resolve(t) for t in repartition_in)))
    return Declaration(hb.Topology(epoch=TOPOLOGY_EPOCH, subtopologies=tuple(subs)), tuple(sources))
