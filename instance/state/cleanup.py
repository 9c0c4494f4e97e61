"""Removal of task directories this instance no longer owns (``state.cleanup.delay.ms``)."""

from __future__ import annotations

import logging
import re
import shutil
import time
from collections.abc import Collection
from pathlib import Path

from instance.errors import StreamsException
from instance.state.checkpoint import TaskDirLock

log = logging.getLogger(__name__)

_TASK_DIR = re.compile(r"^\d+_\d+$")


def clean_unowned_task_dirs(app_state_dir: Path, owned: Collection[str], delay_ms: int,
                            now: float | None = None) -> list[str]:
    """Delete task directories that no thread holds (active or standby), that nobody has locked,
    and that were last modified more than ``delay_ms`` ago. Returns the task ids removed."""
    removed: list[str] = []
    if not app_state_dir.is_dir():
        return removed
    now = time.time() if now is None else now
    for d in sorted(app_state_dir.iterdir()):
        if not d.is_dir() or not _TASK_DIR.match(d.name) or d.name in owned:
            continue
        if (now - d.stat().st_mtime) * 1000 < delay_ms:
            continue
        lock = TaskDirLock(d)
        try:
            lock.acquire()
        except StreamsException:
            continue  # in use by another thread or process
        try:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
        finally:
            lock.release()
    if removed:
        log.info("removed unowned task directories %s", removed)
    return removed
