"""The ``range`` assignor as a pure function, to predict where a task goes when its owner leaves.

The group assigns with the client-side ``range`` strategy: per topic, members sorted by member id
(by ``group.instance.id`` when static), each taking a contiguous block of partitions, the first
``partitions % members`` one extra. Knowing that, standbys are placed on the member that will
receive the task if its active owner leaves, so a takeover restores only the delta.
"""

from __future__ import annotations

from collections.abc import Sequence


def range_assignee(partition: int, num_partitions: int, num_members: int) -> int:
    """Index (in sorted member order) of the member ``range`` gives ``partition``."""
    if num_members <= 0 or not 0 <= partition < num_partitions:
        raise ValueError(f"no assignee for partition {partition} of {num_partitions} among {num_members}")
    per, extra = divmod(num_partitions, num_members)
    # the first `extra` members own per+1 partitions each
    big = extra * (per + 1)
    if partition < big:
        return partition // (per + 1)
    return extra + (partition - big) // per


def successor(partition: int, num_partitions: int, members: Sequence[str], leaving: set[str]) -> str | None:
    """The member that owns ``partition`` after ``leaving`` left (None if no one stays)."""
    stay = sorted(m for m in members if m not in leaving)
    if not stay:
        return None
    return stay[range_assignee(partition, num_partitions, len(stay))]
