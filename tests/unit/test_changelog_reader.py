"""StoreChangelogReader against an in-process consumer double: restoring to the end offset, the
at-least-once filter, standbys (follow, idle pause, hold back / release), restore priority."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instance.runtime import changelog_reader
from instance.runtime.changelog_reader import StoreChangelogReader
from instance.runtime.holds import HOLDS_ENV, Hold
from instance.runtime.state_manager import ProcessorStateManager
from instance.state.checkpoint import write_checkpoint
from instance.state.spec import StoreSpec
from kernel.serdes import StringSerde
from kernel.task_id import TaskId
from tests.unit.kafka_fakes import FakeConsumer

APP = "app"
SPEC = StoreSpec("counts", StringSerde(), StringSerde())
SOURCE = "input"
TopicPart = tuple[str, int]


@dataclass(eq=False)
class Owner:
    id: TaskId
    state: ProcessorStateManager
    sources: list[str] = field(default_factory=lambda: [SOURCE])


class Listener:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_restore_start(self, topic: str, partition: int, store: str, start: int, end: int) -> None:
        self.events.append(("start", partition, store, start, end))

    def on_batch_restored(self, topic: str, partition: int, store: str, batch_end: int, n: int) -> None:
        self.events.append(("batch", partition, batch_end, n))

    def on_restore_end(self, topic: str, partition: int, store: str, total: int) -> None:
        self.events.append(("end", partition, total))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def _owner(partition: int, active: bool, state_dir: Path | None = None) -> Owner:
    tid = TaskId(0, partition)
    state = ProcessorStateManager(tid, state_dir, APP, active=active)
    state.register_stores([SPEC], in_memory=state_dir is None, cache_max_entries=0, changelog_for=lambda spec: None)
    return Owner(tid, state)


def _tp(partition: int) -> TopicPart:
    return (SPEC.changelog_topic(APP), partition)


def _value(owner: Owner, key: str) -> Any:
    return owner.state.stores["counts"].get(key)


def test_restore_reads_to_the_end_offset_then_reports_the_owner_done() -> None:
    c = FakeConsumer()
    for i in range(5):
        c.append(_tp(0), f"k{i}", str(i), gap=1 if i == 4 else 0)  # a commit marker at the end
    listener = Listener()
    reader = StoreChangelogReader({}, listener, consumer=c)
    owner = _owner(0, active=True)
    assert reader.register_restoring(owner)
    assert reader.active and reader.is_restoring(owner)
    assert reader.restore(max_records=2) == []
    assert reader.progress(owner) == {_tp(0): (2, 6)}
    assert reader.restore(max_records=2) == []
    assert reader.restore(max_records=2) == []  # offset 4 read; the marker is still ahead
    assert reader.restore(max_records=2) == [owner]  # empty: the consumer's position passes the marker
    assert not reader.active and reader.progress(owner) == {}
    assert owner.state.changelog_offsets == {_tp(0): 6} and _value(owner, "k4") == "4"
    assert listener.events[0] == ("start", 0, "counts", 0, 6)
    assert listener.events[-1] == ("end", 0, 5)


def test_with_a_checkpoint_only_the_delta_is_restored(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "0_0", {_tp(0): 3})
    c = FakeConsumer()
    for i in range(5):
        c.append(_tp(0), f"k{i}", str(i))
    listener = Listener()
    reader = StoreChangelogReader({}, listener, consumer=c)
    owner = _owner(0, active=True, state_dir=tmp_path)
    assert reader.register_restoring(owner)
    assert reader.restore() == [owner]
    assert listener.events == [("start", 0, "counts", 3, 5), ("batch", 0, 4, 2), ("end", 0, 2)]
    assert _value(owner, "k1") is None and _value(owner, "k4") == "4"
    owner.state.close(checkpoint=False)

    write_checkpoint(tmp_path / "0_0", {_tp(0): 5})
    owner = _owner(0, active=True, state_dir=tmp_path)
    assert not reader.register_restoring(owner)  # nothing to read: it counts on from the end
    assert not reader.active and owner.state.changelog_offsets == {_tp(0): 5}
    owner.state.close(checkpoint=False)


def test_restore_leaves_out_records_the_committed_input_offsets_do_not_cover() -> None:
    c = FakeConsumer()
    c.append(_tp(0), "a", "1", src=10)
    c.append(_tp(0), "a", "2", src=19)
    c.append(_tp(0), "b", "1", src=20)  # processed, never committed (committed offset 20)
    reader = StoreChangelogReader({}, consumer=c)
    owner = _owner(0, active=True)
    reader.register_restoring(owner, marks={SOURCE: 20})
    assert reader.restore() == [owner]
    assert _value(owner, "a") == "2" and _value(owner, "b") is None
    assert owner.state.changelog_offsets == {_tp(0): 3}


def test_a_standby_follows_and_pauses_when_caught_up(monkeypatch: Any) -> None:
    clock = Clock()
    monkeypatch.setattr(changelog_reader, "time", clock)
    c = FakeConsumer()
    c.append(_tp(1), "a", "1", gap=1)
    reader = StoreChangelogReader({}, consumer=c)
    owner = _owner(1, active=False)
    reader.register_standby(owner)
    assert reader.update_standbys() == 1
    assert owner.state.changelog_offsets == {_tp(1): 1} and _value(owner, "a") == "1"
    assert reader.update_standbys() == 0  # within the window: no pause yet
    assert not c.paused
    clock.now += 1
    reader.update_standbys()
    assert c.paused == {_tp(1)}  # caught up: idle
    assert owner.state.changelog_offsets == {_tp(1): 2}  # past the marker
    c.append(_tp(1), "b", "1")
    assert reader.update_standbys() == 0 and _value(owner, "b") is None
    clock.now += 0.3
    assert reader.update_standbys() == 1 and _value(owner, "b") == "1"
    assert reader.progress(owner) == {_tp(1): (3, 3)}


def test_a_standby_holds_back_what_no_commit_covers(monkeypatch: Any) -> None:
    clock = Clock()
    monkeypatch.setattr(changelog_reader, "time", clock)
    committed = {(SOURCE, 1): 0}
    asked: list[list[TopicPart]] = []

    def lookup(tps: list[TopicPart]) -> dict[TopicPart, int]:
        asked.append(tps)
        return {tp: committed[tp] for tp in tps}
    c = FakeConsumer()
    c.append(_tp(1), "a", "1", src=4)
    c.append(_tp(1), "a", "2", src=9)
    reader = StoreChangelogReader({}, committed=lookup, consumer=c)
    owner = _owner(1, active=False)
    reader.register_standby(owner)
    assert reader.update_standbys() == 0  # nothing known committed yet: held at offset 0
    assert c.paused == {_tp(1)} and owner.state.changelog_offsets == {_tp(1): 0}
    committed[(SOURCE, 1)] = 5
    assert reader.update_standbys() == 1  # fresh offsets: the first record is covered
    assert asked == [[(SOURCE, 1)]]
    assert _value(owner, "a") == "1" and owner.state.changelog_offsets == {_tp(1): 1}
    assert _tp(1) in c.paused  # held at the second
    committed[(SOURCE, 1)] = 10
    assert reader.update_standbys() == 0  # committed offsets are re-read every half second
    clock.now += 0.5
    assert reader.update_standbys() == 1 and _value(owner, "a") == "2"
    assert owner.state.changelog_offsets == {_tp(1): 2}


def test_restoring_pauses_the_standbys_until_it_is_done() -> None:
    c = FakeConsumer()
    c.append(_tp(0), "a", "1")
    c.append(_tp(1), "s", "1")
    reader = StoreChangelogReader({}, consumer=c)
    standby = _owner(1, active=False)
    reader.register_standby(standby)
    active = _owner(0, active=True)
    reader.register_restoring(active)
    assert c.paused == {_tp(1)}
    assert reader.update_standbys() == 0 and c.consumed == 0  # the restore goes first
    assert reader.restore() == [active]
    assert not c.paused and _value(standby, "s") is None
    assert reader.update_standbys() == 1 and _value(standby, "s") == "1"


def test_a_paused_standby_partition_restores_when_its_task_becomes_active(monkeypatch: Any) -> None:
    clock = Clock()
    monkeypatch.setattr(changelog_reader, "time", clock)
    c = FakeConsumer()
    c.append(_tp(0), "a", "1", src=4)
    reader = StoreChangelogReader({}, committed=lambda tps: dict.fromkeys(tps, 0), consumer=c)
    standby = _owner(0, active=False)
    reader.register_standby(standby)
    reader.update_standbys()
    assert c.paused == {_tp(0)}  # held: no commit covers it
    reader.unregister(standby)
    active = _owner(0, active=True)
    assert reader.register_restoring(active, marks={SOURCE: 5})
    assert reader.restore() == [active] and _value(active, "a") == "1"


def test_unregister_forgets_the_owner_and_reassigns() -> None:
    c = FakeConsumer()
    c.append(_tp(0), "a", "1")
    c.append(_tp(1), "s", "1")
    reader = StoreChangelogReader({}, consumer=c)
    standby = _owner(1, active=False)
    reader.register_standby(standby)
    active = _owner(0, active=True)
    reader.register_restoring(active)
    reader.unregister(active)
    assert not reader.active and set(c.positions) == {_tp(1)} and not c.paused
    reader.close()
    reader.unregister(standby)  # after close: only forgotten
    assert reader.progress(standby) == {}


def test_held_restores_and_standbys_apply_nothing_until_released(monkeypatch: Any, tmp_path: Path) -> None:
    """Hold.RESTORE / Hold.STANDBY (runtime/holds.py): the step is skipped while the hold's file
    exists, and taken again once it is gone; a held standby still sees its end offset move."""
    monkeypatch.setenv(HOLDS_ENV, str(tmp_path))
    c = FakeConsumer()
    for i in range(3):
        c.append(_tp(0), f"k{i}", str(i))
    c.append(_tp(1), "a", "1")
    reader = StoreChangelogReader({}, consumer=c)
    restoring, standby = _owner(0, active=True), _owner(1, active=False)
    (tmp_path / Hold.RESTORE.value).touch()
    assert reader.register_restoring(restoring)
    for _ in range(3):
        assert reader.restore(timeout=0) == []
    assert reader.progress(restoring) == {_tp(0): (0, 3)} and _value(restoring, "k0") is None
    (tmp_path / Hold.RESTORE.value).unlink()
    assert reader.restore(timeout=0) == [restoring] and _value(restoring, "k2") == "2"

    (tmp_path / Hold.STANDBY.value).touch()
    reader.register_standby(standby)
    assert reader.update_standbys() == 0 and _value(standby, "a") is None
    c.append(_tp(1), "b", "2")
    reader.update_standbys()
    assert reader.progress(standby) == {_tp(1): (0, 2)}  # lag 2, nothing applied
    (tmp_path / Hold.STANDBY.value).unlink()
    assert reader.update_standbys() == 2 and _value(standby, "b") == "2"
