"""state.cleanup.delay.ms: unowned, unlocked, old task directories go; the rest stay."""

import os
import time
from pathlib import Path

from instance.state.checkpoint import TaskDirLock, read_checkpoint, write_checkpoint
from instance.state.cleanup import clean_unowned_task_dirs


def _task_dir(root: Path, name: str, age_s: float) -> Path:
    d = root / name
    (d / "rocksdb" / "counts").mkdir(parents=True)
    old = time.time() - age_s
    os.utime(d, (old, old))
    return d


def test_only_unowned_unlocked_old_directories_are_removed(tmp_path: Path) -> None:
    _task_dir(tmp_path, "0_0", 3600)           # unowned and old: removed
    _task_dir(tmp_path, "0_1", 3600)           # owned: kept
    _task_dir(tmp_path, "0_2", 1)              # too recent: kept
    locked = _task_dir(tmp_path, "1_0", 3600)  # locked by someone else: kept
    (tmp_path / "not-a-task").mkdir()          # not a task directory: kept
    lock = TaskDirLock(locked)
    lock.acquire()
    try:
        removed = clean_unowned_task_dirs(tmp_path, {"0_1"}, delay_ms=600_000)
    finally:
        lock.release()
    assert removed == ["0_0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0_1", "0_2", "1_0", "not-a-task"]


def test_checkpoint_round_trip_and_unreadable_checkpoint_means_restore_all(tmp_path: Path) -> None:
    offsets = {("app-counts-changelog", 3): 42, ("app-other-changelog", 3): 7}
    write_checkpoint(tmp_path, offsets)
    assert read_checkpoint(tmp_path) == offsets
    (tmp_path / ".checkpoint").write_text("{not json")
    assert read_checkpoint(tmp_path) == {}


def test_a_task_directory_cannot_be_locked_twice(tmp_path: Path) -> None:
    first, second = TaskDirLock(tmp_path), TaskDirLock(tmp_path)
    first.acquire()
    try:
        try:
            second.acquire()
            raise AssertionError("second lock acquired")
        except Exception as e:
            assert "locked" in str(e)
    finally:
        first.release()
    second.acquire()
    second.release()
