"""ProcessorStateManager: task directory lock, checkpoint validation / invalidation / writing, the
exactly-once rule, changelog positions."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from instance.errors import StreamsException
from instance.runtime.state_manager import ProcessorStateManager
from instance.state.checkpoint import read_checkpoint, write_checkpoint
from instance.state.kv_store import ChangelogSend
from instance.state.spec import StoreSpec
from kernel.serdes import StringSerde
from kernel.task_id import TaskId

APP = "app"
TID = TaskId(0, 3)
SPEC = StoreSpec("counts", StringSerde(), StringSerde())
TP = ("app-counts-changelog", 3)


def _open(state_dir: Path | None, *, active: bool = True, eos: bool = False, in_memory: bool = False,
          specs: tuple[StoreSpec, ...] = (SPEC,)) -> ProcessorStateManager:
    sm = ProcessorStateManager(TID, state_dir, APP, active=active, eos=eos)

    def changelog_for(spec: StoreSpec) -> ChangelogSend:
        tp = (spec.changelog_topic(APP), TID.partition)
        return lambda batch: sm.logged(tp, len(batch))
    sm.register_stores(specs, in_memory=in_memory, cache_max_entries=100, changelog_for=changelog_for)
    return sm


def _commit(sm: ProcessorStateManager) -> None:
    sm.flush()
    sm.checkpoint()


def test_fresh_task_locks_its_directory_and_starts_at_zero(tmp_path: Path) -> None:
    sm = _open(tmp_path)
    assert sm.changelog_partitions == [TP]
    assert sm.changelog_offsets == {TP: 0} and sm.checkpointed == {}
    with pytest.raises(StreamsException, match="locked"):
        _open(tmp_path)
    sm.close(checkpoint=False)
    _open(tmp_path).close(checkpoint=False)  # released


def test_clean_close_checkpoints_and_the_next_open_trusts_it(tmp_path: Path) -> None:
    sm = _open(tmp_path)
    sm.stores["counts"].put("a", "1")
    sm.stores["counts"].put("b", "2")
    _commit(sm)
    assert read_checkpoint(tmp_path / "0_3") == {TP: 2}
    sm.close(checkpoint=True)
    sm = _open(tmp_path)
    assert sm.checkpointed == {TP: 2} and sm.changelog_offsets == {TP: 2}
    assert sm.stores["counts"].get("a") == "1"
    sm.close(checkpoint=False)


def test_a_write_after_the_checkpoint_removes_it_and_a_crash_then_rebuilds(tmp_path: Path) -> None:
    sm = _open(tmp_path)
    sm.stores["counts"].put("a", "1")
    _commit(sm)
    assert sm.checkpoint_current
    sm.stores["counts"].put("a", "2")
    assert read_checkpoint(tmp_path / "0_3") == {TP: 1}  # still cached: nothing written yet
    sm.flush()  # the store now holds a write the checkpoint does not describe
    assert read_checkpoint(tmp_path / "0_3") == {} and not sm.checkpoint_current
    sm.close(checkpoint=False)  # a crash: no checkpoint
    sm = _open(tmp_path)
    assert sm.checkpointed == {} and sm.stores["counts"].get("a") is None  # wiped: restore everything
    sm.close(checkpoint=False)


def test_a_checkpoint_missing_a_store_is_not_trusted(tmp_path: Path) -> None:
    other = StoreSpec("other", StringSerde(), StringSerde())
    sm = _open(tmp_path, specs=(SPEC, other))
    sm.stores["counts"].put("a", "1")
    _commit(sm)
    sm.close(checkpoint=True)
    write_checkpoint(tmp_path / "0_3", {TP: 1})  # "other" missing
    sm = _open(tmp_path, specs=(SPEC, other))
    assert sm.checkpointed == {} and sm.stores["counts"].get("a") is None
    assert not (tmp_path / "0_3" / ".checkpoint").exists()
    sm.close(checkpoint=False)


def test_exactly_once_checkpoints_only_on_clean_close(tmp_path: Path) -> None:
    sm = _open(tmp_path, eos=True)
    sm.stores["counts"].put("a", "1")
    sm.flush()
    sm.transaction_committed()  # the commit marker takes one offset
    assert sm.changelog_offsets == {TP: 2}
    sm.checkpoint()
    assert read_checkpoint(tmp_path / "0_3") == {}
    sm.transaction_committed()  # nothing written in this transaction: no marker counted
    sm.close(checkpoint=True)
    assert read_checkpoint(tmp_path / "0_3") == {TP: 2}
    sm = _open(tmp_path, eos=True)
    # trusted (restore starts there), but removed while the task runs
    assert sm.checkpointed == {TP: 2} and read_checkpoint(tmp_path / "0_3") == {}
    sm.close(checkpoint=False)


def test_a_standby_checkpoints_under_exactly_once_and_never_writes_the_changelog(tmp_path: Path) -> None:
    sm = _open(tmp_path, active=False, eos=True)
    sm.restore(TP, [(b"a", b"1", 0), (b"b", b"2", 0)], 7)
    sm.advance(TP, 5)  # never backwards
    assert sm.changelog_offsets == {TP: 7}
    sm.advance(TP, 9)  # past a transaction marker
    _commit(sm)
    assert read_checkpoint(tmp_path / "0_3") == {TP: 9}
    sm.close(checkpoint=True)
    sm = _open(tmp_path, active=True)
    assert sm.checkpointed == {TP: 9} and sm.stores["counts"].get("b") == "2"
    sm.close(checkpoint=False)


def test_in_memory_stores_start_empty_whatever_the_checkpoint(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "0_3", {TP: 5})
    sm = _open(tmp_path, in_memory=True)
    assert sm.checkpointed == {} and sm.changelog_offsets == {TP: 0}
    sm.stores["counts"].put("a", "1")
    _commit(sm)
    sm.close(checkpoint=True)
    assert read_checkpoint(tmp_path / "0_3") == {TP: 5}  # an in-memory store's offset is never written


def test_no_directory_no_checkpoint() -> None:
    sm = _open(None)
    sm.stores["counts"].put("a", "1")
    _commit(sm)
    assert sm.changelog_offsets == {TP: 1}
    sm.close(checkpoint=True)


def test_a_task_without_stores_takes_no_lock(tmp_path: Path) -> None:
    sm = _open(tmp_path, specs=())
    assert sm.stores == {} and not (tmp_path / "0_3").exists()
    sm.close(checkpoint=True)


def test_position_counts_what_the_cache_holds_before_the_first_commit() -> None:
    """Issue 9 point 7: before the first commit the value is in the cache only; the position must
    already cover it (a token of "position 0" would let a standby at 0 answer older state)."""
    sm = _open(None)
    store = sm.stores["counts"]
    assert sm.position(TP) == 0
    store.put("a", "1")
    store.put("a", "2")  # the same key: one changelog record at the flush
    store.put("b", "1")
    assert sm.changelog_offsets[TP] == 0 and sm.position(TP) == 2
    _commit(sm)
    assert sm.changelog_offsets[TP] == 2 and sm.position(TP) == 2
    store.put("c", "1")
    assert sm.position(TP) == 3
    standby = ProcessorStateManager(TID, None, APP, active=False)
    standby.register_stores([SPEC], in_memory=True, cache_max_entries=0, changelog_for=lambda _: None)
    standby.restore(TP, [(b"a", b"2", 0)], 5)
    assert standby.position(TP) == 5  # a standby holds exactly what it restored


def test_a_query_reads_the_position_before_or_after_a_flush_never_within() -> None:
    """A query thread reading the position while a batch goes to the changelog (dirty keys swapped
    out, not counted yet) would see too little: it waits for the batch to be counted."""
    sm = ProcessorStateManager(TID, None, APP)
    read: list[int] = []
    reader = threading.Thread(target=lambda: read.append(sm.position(TP)))

    def changelog_for(spec: StoreSpec) -> ChangelogSend:
        def send(batch: list[tuple[bytes, bytes | None, int]]) -> None:
            reader.start()  # mid-flush: the dirty keys are swapped out, the changelog has not counted them
            reader.join(0.2)
            assert reader.is_alive() and not read, "the position was read in the middle of a flush"
            sm.logged(TP, len(batch))
        return send
    sm.register_stores([SPEC], in_memory=True, cache_max_entries=100, changelog_for=changelog_for)
    for k in "abc":
        sm.stores["counts"].put(k, "1")
    sm.flush()
    reader.join(10)
    assert read == [3] and sm.position(TP) == 3
