"""Partition counts of every topic the topology touches, and creation of internal topics.

Repartition topics take the partition count of the sub-topology that writes them (the maximum of
its source topics) unless given; changelogs have one partition per task. Because tasks come from a
``range`` assignment, all source topics of one sub-topology must have the same partition count:
that is the co-partitioning check, done before the client joins the group.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient, NewTopic

from instance.errors import StreamsException, TopologyException
from instance.kafka_errors import is_topic_exists
from instance.state.spec import StoreSpec
from instance.topology.topology import Topology


@dataclass(frozen=True)
class TopicLayout:
    """Resolved topic names and partition counts; tasks per sub-topology."""

    partitions: dict[str, int]          # resolved topic name -> partitions
    tasks_per_subtopology: dict[int, int]
    changelogs: dict[str, str]          # store name -> changelog topic


def internal_name(app_id: str, topology: Topology) -> Callable[[str], str]:
    internal = set(topology.internal_topics)
    return lambda t: f"{app_id}-{t}" if t in internal else t


def plan(topology: Topology, app_id: str, existing: dict[str, int]) -> tuple[TopicLayout, list[NewTopic]]:
    """Work out every partition count from the existing topics; return the topics to create."""
    resolve = internal_name(app_id, topology)
    subs = topology.subtopologies()
    counts: dict[str, int] = {}
    for st in subs:
        for t in st.source_topics:
            if t not in topology.internal_topics:
                if t not in existing:
                    raise StreamsException(
                        f"source topic {t!r} does not exist; create it before starting the application: "
                        f"`iqmesh topic create {t} --partitions N --bootstrap HOST:PORT`")
                counts[t] = existing[t]
    for t, spec in topology.internal_topics.items():
        if spec.num_partitions:
            counts[t] = spec.num_partitions
    # a repartition topic joined with other topics takes their partition count (Kafka Streams'
    # CopartitionedTopicsEnforcer), not its writer's
    for group in topology.copartition_groups:
        known = [counts[t] for t in group if t in counts]
        if known:
            for t in group:
                if t in topology.internal_topics and t not in counts:
                    counts[t] = max(known)
    # repartition topics with no explicit count: iterate until every count is known
    for _ in range(len(subs) + 1):
        changed = False
        for st in subs:
            known = [counts[t] for t in st.source_topics if t in counts]
            if len(known) != len(st.source_topics):
                continue
            n = max(known)
            for t in st.sink_topics:
                if t in topology.internal_topics and t not in counts:
                    counts[t] = n
                    changed = True
        if not changed:
            break
    tasks: dict[int, int] = {}
    for st in subs:
        missing = [t for t in st.source_topics if t not in counts]
        if missing:
            raise TopologyException(f"cannot determine partitions of {missing}")
        ns = {t: counts[t] for t in st.source_topics}
        if len(set(ns.values())) > 1:
            raise TopologyException(
                f"sub-topology {st.id} reads topics that are not co-partitioned: {ns}; give all of them "
                f"the same number of partitions (or repartition() one of them)")
        tasks[st.id] = next(iter(ns.values()))
    for group in topology.copartition_groups:
        ns = {t: counts[t] for t in group}
        if len(set(ns.values())) > 1:
            raise TopologyException(f"topics joined together must be co-partitioned, got {ns}")
    to_create: list[NewTopic] = []
    partitions = {resolve(t): n for t, n in counts.items()}
    changelogs: dict[str, str] = {}
    for st in subs:
        for store in st.stores:
            store_spec = topology.stores[store]
            if store_spec.logging_enabled:
                cl = store_spec.changelog_topic(app_id)
                changelogs[store] = cl
                partitions[cl] = tasks[st.id]
    for t in topology.internal_topics:
        rt = resolve(t)
        if rt not in existing:
            to_create.append(NewTopic(rt, num_partitions=partitions[rt], replication_factor=1,
                                      config={"cleanup.policy": "delete"}))
    for store, cl in changelogs.items():
        if cl not in existing:
            to_create.append(NewTopic(cl, num_partitions=partitions[cl], replication_factor=1,
                                      config=changelog_config(topology.stores[store])))
    for t, n in partitions.items():
        if t in existing and existing[t] != n:
            raise TopologyException(
                f"internal topic {t} has {existing[t]} partitions but the topology needs {n}; "
                f"delete it (or use a new application.id)")
    return TopicLayout(partitions, tasks, changelogs), to_create


def changelog_config(spec: StoreSpec) -> dict[str, str]:
    """Compacted; a window or session store's changelog also deletes what retention expired
    (plus a day, Kafka Streams' ``windowstore.changelog.additional.retention.ms``)."""
    if not spec.windowed:
        return {"cleanup.policy": "compact"}
    return {"cleanup.policy": "compact,delete", "retention.ms": str(spec.retention_ms + 86_400_000)}


def existing_topics(admin: AdminClient, timeout: float = 10.0) -> dict[str, int]:
    md = admin.list_topics(timeout=timeout)
    return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}


def prepare(admin: AdminClient, topology: Topology, app_id: str, replication_factor: int = 1,
            timeout: float = 30.0) -> TopicLayout:
    """Plan, create what is missing, and wait until the broker reports every topic."""
    layout, to_create = plan(topology, app_id, existing_topics(admin))
    if to_create:
        for nt in to_create:
            nt.replication_factor = replication_factor
        for topic, fut in admin.create_topics(to_create, operation_timeout=timeout).items():
            try:
                fut.result()
            except Exception as e:
                if not is_topic_exists(e):
                    raise StreamsException(f"cannot create internal topic {topic}: {e}") from e
    deadline = time.monotonic() + timeout
    while True:
        have = existing_topics(admin)
        if all(have.get(t) == n for t, n in layout.partitions.items()):
            return layout
        if time.monotonic() > deadline:
            missing = {t: n for t, n in layout.partitions.items() if have.get(t) != n}
            raise StreamsException(f"topics not ready after {timeout}s: {missing}")
        time.sleep(0.1)
