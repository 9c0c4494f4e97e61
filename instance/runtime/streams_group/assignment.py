"""What the coordinator assigned, as frozen values: this member's tasks and, per endpoint, the
partitions every member serves (the routing table of interactive queries)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from instance.kafka_wire.generated import streams_group_heartbeat_request as hb
from instance.kafka_wire.generated import streams_group_heartbeat_response as hbr
from kernel.metadata import HostInfo
from kernel.task_id import TaskId


class TaskIdsEntry(Protocol):
    """The protocol's TaskIds struct (each message's module has its own)."""

    @property
    def subtopology_id(self) -> str: ...

    @property
    def partitions(self) -> Sequence[int]: ...


def task_ids(entries: Iterable[TaskIdsEntry]) -> frozenset[TaskId]:
    """The protocol's (sub-topology id, partitions) entries as task ids."""
    return frozenset(TaskId(int(e.subtopology_id), p) for e in entries for p in e.partitions)


def task_entries(tasks: Iterable[TaskId]) -> tuple[hb.TaskIds, ...]:
    """Task ids as the protocol lists them: per sub-topology (by id), its partitions in order."""
    by_sub: dict[int, list[int]] = {}
    for t in sorted(tasks):
        by_sub.setdefault(t.subtopology, []).append(t.partition)
    return tuple(hb.TaskIds(str(s), tuple(ps)) for s, ps in sorted(by_sub.items()))


@dataclass(frozen=True)
class Assignment:
    """This member's tasks: active (processed), standby (followed) and warm-up (restored until caught
    up, then handed over as active)."""

    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()

    @property
    def empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def __str__(self) -> str:
        def ids(ts: frozenset[TaskId]) -> str:
            return ",".join(map(str, sorted(ts))) or "-"

        return f"active {ids(self.active)} standby {ids(self.standby)} warm-up {ids(self.warmup)}"


EMPTY = Assignment()


@dataclass(frozen=True)
class EndpointPartitions:
    """The partitions the members at one ``application.server`` endpoint serve; standby includes
    warm-up, as the broker reports it."""

    endpoint: HostInfo
    active: frozenset[tuple[str, int]]
    standby: frozenset[tuple[str, int]]


@dataclass(frozen=True)
class PartitionsByEndpoint:
    """The broker's ``PartitionsByUserEndpoint`` for one endpoint epoch: one entry per endpoint
    (the broker lists one per member; a process with several stream threads is one endpoint)."""

    epoch: int
    entries: tuple[EndpointPartitions, ...] = ()

    @property
    def endpoints(self) -> frozenset[HostInfo]:
        return frozenset(e.endpoint for e in self.entries)

    def of(self, endpoint: HostInfo) -> EndpointPartitions | None:
        return next((e for e in self.entries if e.endpoint == endpoint), None)

    def active_owner(self, topic: str, partition: int) -> HostInfo | None:
        """The endpoint whose members process ``topic``-``partition``, if any does."""
        return next((e.endpoint for e in self.entries if (topic, partition) in e.active), None)

    @staticmethod
    def from_response(epoch: int, entries: Iterable[hbr.EndpointToPartitions]) -> PartitionsByEndpoint:
        active: dict[HostInfo, set[tuple[str, int]]] = {}
        standby: dict[HostInfo, set[tuple[str, int]]] = {}
        for e in entries:
            host = HostInfo(e.user_endpoint.host, e.user_endpoint.port)
            active.setdefault(host, set()).update((tp.topic, p) for tp in e.active_partitions for p in tp.partitions)
            standby.setdefault(host, set()).update((tp.topic, p) for tp in e.standby_partitions for p in tp.partitions)
        return PartitionsByEndpoint(epoch, tuple(
            EndpointPartitions(h, frozenset(active[h]), frozenset(standby[h]))
            for h in sorted(active, key=lambda h: (h.host, h.port))))
