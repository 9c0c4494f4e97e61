"""``.checkpoint`` (changelog offsets a task's stores reflect) and ``.lock`` of a task directory.

The checkpoint is written after each at-least-once commit and on clean close (under
exactly_once_v2 only on clean close, and deleted while the task runs, so a crash leaves none and
the state is rebuilt). A task with a checkpoint restores only the changelog records after it.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import IO

from instance.errors import StreamsException
from instance.state import origins

CHECKPOINT = ".checkpoint"
LOCK = ".lock"


def read_checkpoint(task_dir: Path) -> dict[tuple[str, int], int]:
    """Offsets by (changelog topic, partition); empty if absent or unreadable (then: restore all)."""
    path = task_dir / CHECKPOINT
    try:
        raw = json.loads(path.read_text())
        return {(e["topic"], int(e["partition"])): int(e["offset"]) for e in raw["offsets"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def read_origins(task_dir: Path) -> dict[str, dict[bytes, bytes]]:
    """The origin high-water the checkpoint's stores reflect (instance/state/origins.py); empty if
    none or unreadable (then the checkpoint is not used either: see ProcessorStateManager)."""
    try:
        raw = json.loads((task_dir / CHECKPOINT).read_text())
        return origins.decode(raw.get("origins", {}))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def write_checkpoint(task_dir: Path, offsets: dict[tuple[str, int], int],
                     marks: dict[str, dict[bytes, bytes]] | None = None) -> None:
    """Atomically replace the checkpoint (write a temp file, fsync, rename); ``marks``: the origin
    high-water of the stores (instance/state/origins.py)."""
    task_dir.mkdir(parents=True, exist_ok=True)
    tmp = task_dir / (CHECKPOINT + ".tmp")
    body: dict[str, object] = {"version": 1, "offsets": [{"topic": t, "partition": p, "offset": o}
                                                          for (t, p), o in sorted(offsets.items())]}
    if marks:
        body["origins"] = origins.encode(marks)
    with open(tmp, "w") as f:
        json.dump(body, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, task_dir / CHECKPOINT)


def delete_checkpoint(task_dir: Path) -> None:
    try:
        (task_dir / CHECKPOINT).unlink()
    except FileNotFoundError:
        pass


class TaskDirLock:
    """An exclusive ``flock`` on ``<task_dir>/.lock``: two threads or processes never open one task
    directory (the second gets a StreamsException naming the directory)."""

    def __init__(self, task_dir: Path) -> None:
        self.task_dir = task_dir
        self._f: IO[str] | None = None

    def acquire(self, wait_s: float = 0.0) -> None:
        """Take the lock, retrying for ``wait_s`` (the cleaner holds unowned dirs briefly)."""
        self.task_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + wait_s
        f = open(self.task_dir / LOCK, "a+")  # noqa: SIM115 - held until release()
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    f.close()
                    raise StreamsException(
                        f"task directory {self.task_dir} is locked by another thread or process; "
                        f"is another instance using the same state.dir?") from None
                time.sleep(0.05)
        self._f = f

    def release(self) -> None:
        if self._f is not None:
            fcntl.flock(self._f.fileno(), fcntl.LOCK_UN)
            self._f.close()
            self._f = None
