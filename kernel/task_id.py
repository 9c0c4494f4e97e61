"""The task id shared by the runtime, the cluster view and the router."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernel.echo import echo

_TASK_ID = re.compile(r"(\d+)_(\d+)", re.ASCII)


@dataclass(frozen=True, order=True)
class TaskId:
    """``<sub-topology>_<partition>``, as Kafka Streams prints it; the string form is also how
    :class:`~kernel.metadata.InstanceInfo` lists tasks on the wire."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"

    @staticmethod
    def parse(text: str) -> TaskId:
        """Inverse of ``str()``; raises ValueError for anything but ``<digits>_<digits>``."""
        m = _TASK_ID.fullmatch(text) if isinstance(text, str) else None
        if m is None:
            raise ValueError(f"task id {echo(text)} is not of the form <subtopology>_<partition>, e.g. '0_3'")
        return TaskId(int(m.group(1)), int(m.group(2)))
