"""Under group.protocol=streams the query routing takes owners and standbys from the broker's
PartitionsByUserEndpoint map, liveness from the instances topic (runtime/streams_group/routing.py)."""

from __future__ import annotations

import time

from instance.runtime.states import State
from instance.runtime.streams_group.assignment import EndpointPartitions, PartitionsByEndpoint
from instance.runtime.streams_group.routing import GroupRoutedView, freshest
from kernel.metadata import HostInfo, InstanceInfo
from kernel.task_id import TaskId

A, B, C = HostInfo("a", 1), HostInfo("b", 1), HostInfo("c", 1)


def _info(iid: str, host: HostInfo, active: tuple[TaskId, ...] = (), age_ms: int = 0) -> InstanceInfo:
    return InstanceInfo(iid, str(host), State.RUNNING, active_tasks=active,
                        heartbeat_ms=int(time.time() * 1000) - age_ms)


def _view(heard: list[PartitionsByEndpoint]) -> GroupRoutedView:
    return GroupRoutedView(5000, lambda: freshest(heard), lambda t: ("in", t.partition))


def test_owner_and_standbys_come_from_the_map_not_from_what_instances_claim() -> None:
    heard = [PartitionsByEndpoint(3, (EndpointPartitions(A, frozenset({("in", 0)}), frozenset({("in", 1)})),
                                      EndpointPartitions(B, frozenset({("in", 1)}), frozenset({("in", 0)}))))]
    view = _view(heard)
    # b still claims task 0_0 in the instances topic: the broker's map says a holds it
    view.update(_info("ia", A))
    view.update(_info("ib", B, active=(TaskId(0, 0),)))
    view.update(_info("ic", C))
    md = view.key_query_metadata(0, 0)
    assert md.active_host == A and md.standby_hosts == (B,)
    assert view.key_query_metadata(0, 1).active_host == B
    # a task the map does not name yet: the instances topic answers
    assert view.owner(TaskId(0, 2)) is None
    view.update(_info("ic", C, active=(TaskId(0, 2),)))
    owner = view.owner(TaskId(0, 2))
    assert owner is not None and owner.instance_id == "ic"


def test_an_owner_whose_instance_is_not_alive_is_unavailable_and_the_newest_map_wins() -> None:
    old = PartitionsByEndpoint(1, (EndpointPartitions(A, frozenset({("in", 0)}), frozenset()),))
    new = PartitionsByEndpoint(2, (EndpointPartitions(B, frozenset({("in", 0)}), frozenset()),))
    view = _view([old, new])
    view.update(_info("ia", A))
    view.update(_info("ib", B, age_ms=60_000))  # its heartbeat is a minute old
    assert view.owner(TaskId(0, 0)) is None
    assert not view.key_query_metadata(0, 0).available
    view.update(_info("ib", B))
    assert view.key_query_metadata(0, 0).active_host == B
