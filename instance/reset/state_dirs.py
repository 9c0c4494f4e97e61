"""The local state of an application (Kafka Streams' ``KafkaStreams.cleanUp()``): the directory
``<state.dir>/<application.id>`` an instance keeps its task directories and global stores in,
removed whole so that the next start restores nothing the reset took away.

A task directory an instance has open is locked (``flock`` on its ``.lock``,
instance/state/checkpoint.py): such a directory is refused before the reset changes anything, as
``cleanUp()`` refuses on a running instance.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from instance.errors import StreamsException
from instance.reset.errors import ResetError
from instance.state.checkpoint import LOCK, TaskDirLock


@dataclass(frozen=True)
class AppStateDir:
    """``<state.dir>/<application.id>`` and whether there was one when the reset looked."""

    path: Path
    existed: bool

    @staticmethod
    def of(state_dir: Path, application_id: str) -> AppStateDir:
        path = state_dir / application_id
        return AppStateDir(path, path.is_dir())

    def _locked_dirs(self) -> list[Path]:
        """The directories an instance locks (task directories, ``global``): those with a lock file."""
        if not self.path.is_dir():
            return []
        return sorted(d for d in self.path.iterdir() if d.is_dir() and (d / LOCK).exists())

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the lock of every directory an instance may have open; ResetError naming the first
        one an instance holds (nothing was changed)."""
        with ExitStack() as held:
            for d in self._locked_dirs():
                lock = TaskDirLock(d)
                try:
                    lock.acquire()
                except StreamsException:
                    raise ResetError("STATE_DIR_LOCKED", (
                        f"{d} is locked by a running instance: stop the instances using {self.path.parent} "
                        "before resetting; nothing was changed")) from None
                held.callback(lock.release)
            yield

    def check(self) -> None:
        """Refuse (ResetError) if a running instance holds a directory of it."""
        with self.locked():
            pass

    def remove(self) -> None:
        """Remove the directory whole (with every lock held while it goes)."""
        if not self.path.is_dir():
            return
        with self.locked():
            shutil.rmtree(self.path)
