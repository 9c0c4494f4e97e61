"""Queries of an active task under exactly-once read what the last commit left (KIP-892's
read-committed queries): the undo images of ``CommittedView``, and the state manager that drops them
once the transaction has committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from instance.runtime.state_manager import ProcessorStateManager
from instance.serde.windowed import SessionWindow, Windowed
from instance.state.bytes_store import BytesStore, InMemoryBytesStore, RocksDBBytesStore
from instance.state.committed_view import CommittedView
from instance.state.kv_store import ChangelogSend
from instance.state.spec import StoreSpec
from kernel.serdes import StringSerde
from kernel.task_id import TaskId

APP = "app"
TID = TaskId(0, 1)
TP = ("app-counts-changelog", 1)


@pytest.fixture(params=["memory", "rocksdb"])
def bytes_store(request: pytest.FixtureRequest, tmp_path: Path) -> BytesStore:
    if request.param == "memory":
        return InMemoryBytesStore("s")
    return RocksDBBytesStore("s", tmp_path / "s")


def test_reads_see_the_last_commit_until_the_next(bytes_store: BytesStore) -> None:
    view = CommittedView(bytes_store)
    view.write([(b"a", b"1"), (b"c", b"3"), (b"d", b"4")])
    view.mark_committed()
    view.write([(b"a", b"10"), (b"b", b"2"), (b"c", None)])  # changed, added, deleted
    view.write([(b"a", b"11")])  # a second write keeps the first image
    assert view.get(b"a") == b"11" and list(view.items()) == [(b"a", b"11"), (b"b", b"2"), (b"d", b"4")]
    c = view.committed
    assert [c.get(k) for k in (b"a", b"b", b"c", b"d")] == [b"1", None, b"3", b"4"]
    assert list(c.items()) == [(b"a", b"1"), (b"c", b"3"), (b"d", b"4")]
    assert list(c.items(b"b", b"d")) == [(b"c", b"3")]
    assert list(c.items(b"a\x00", None)) == [(b"c", b"3"), (b"d", b"4")]
    view.mark_committed()
    assert [c.get(k) for k in (b"a", b"b", b"c")] == [b"11", b"2", None]
    assert list(c.items()) == [(b"a", b"11"), (b"b", b"2"), (b"d", b"4")]
    with pytest.raises(TypeError, match="read-only"):
        c.write([(b"a", b"x")])


def _open(state_dir: Path, *, eos: bool, caching: bool = True) -> ProcessorStateManager:
    sm = ProcessorStateManager(TID, state_dir, APP, active=True, eos=eos)

    def changelog_for(spec: StoreSpec) -> ChangelogSend:
        return lambda batch: sm.logged(TP, len(batch))
    spec = StoreSpec("counts", StringSerde(), StringSerde(), caching_enabled=caching)
    sm.register_stores([spec], in_memory=False, cache_max_entries=100, changelog_for=changelog_for)
    return sm


@pytest.mark.parametrize("caching", [True, False])
def test_exactly_once_queries_read_committed_values_at_committed_positions(tmp_path: Path, caching: bool) -> None:
    sm = _open(tmp_path, eos=True, caching=caching)
    store = sm.stores["counts"]
    store.put("a", "1")
    store.put("b", "1")
    sm.flush()  # commit step one: in the bytes store and the changelog, the transaction still open
    store.put("a", "2")  # and in the cache of the next transaction
    assert store.get("a") == "2"  # processing reads its own writes
    assert store.query_get("a") is None and list(store.query_range(None, None)) == []
    assert sm.position(TP) == 0
    sm.transaction_committed()  # the marker takes offset 2
    assert store.query_get("a") == "1" and store.query_get("b") == "1"
    assert list(store.query_range("a", "z")) == [("a", "1"), ("b", "1")]
    assert sm.position(TP) == 3
    store.delete("b")
    sm.flush()
    assert store.query_get("a") == "1" and store.query_get("b") == "1"  # not committed yet
    sm.transaction_committed()
    assert store.query_get("a") == "2" and store.query_get("b") is None
    assert list(store.query_range(None, None)) == [("a", "2")] and sm.position(TP) == 6
    sm.close(checkpoint=False)


def test_at_least_once_queries_read_what_the_task_holds(tmp_path: Path) -> None:
    sm = _open(tmp_path, eos=False)
    store = sm.stores["counts"]
    store.put("a", "1")
    assert store.query_get("a") == "1" and list(store.query_range(None, None)) == [("a", "1")]
    assert sm.position(TP) == 1  # the cached put counts: it takes the next changelog offset
    sm.close(checkpoint=False)


def test_restored_records_are_committed(tmp_path: Path) -> None:
    sm = _open(tmp_path, eos=True)
    sm.restore(TP, [(b"a", b"5", 0), (b"b", b"7", 0)], 3)  # two records and a commit marker
    store = sm.stores["counts"]
    assert store.query_get("a") == "5" and sm.position(TP) == 3
    assert store.committed_view is not None and not store.committed_view._undo  # no images taken
    sm.close(checkpoint=False)


def test_exactly_once_window_and_session_queries_read_committed_windows() -> None:
    sm = ProcessorStateManager(TID, None, APP, active=True, eos=True)
    s = StringSerde()
    specs = [StoreSpec("w", s, s, kind="window", retention_ms=60_000, window_size_ms=10),
             StoreSpec("sess", s, s, kind="session", retention_ms=60_000)]
    sm.register_stores(specs, in_memory=True, cache_max_entries=100,
                       changelog_for=lambda spec: lambda batch: sm.logged((spec.name, 1), len(batch)))
    w, sess = sm.stores["w"], sm.stores["sess"]
    w.put("k", "1", 0)
    sess.put(Windowed("k", SessionWindow(0, 5)), "s1")
    sm.flush()
    w.put("k", "2", 10)  # pending in the cache
    assert w.fetch("k", 0, 100) == [(0, "1"), (10, "2")]  # processors read their own writes
    assert w.for_query().fetch("k", 0, 100) == [] and w.for_query().fetch("k", 0) is None
    assert sess.for_query().fetch("k") == []
    sm.transaction_committed()
    assert w.for_query().fetch("k", 0, 100) == [(0, "1")] and w.for_query().fetch("k", 0) == "1"
    assert [(x.window.start, x.window.end, v) for x, v in sess.for_query().fetch("k")] == [(0, 5, "s1")]
    sm.flush()
    sm.transaction_committed()
    assert w.for_query().fetch("k", 0, 100) == [(0, "1"), (10, "2")]


def test_a_scan_across_chunks_stays_committed_while_the_task_writes(bytes_store: BytesStore) -> None:
    """A scan reads the store in chunks; writes between two chunks (updates, additions, and
    deletions of committed keys) do not reach it."""
    view = CommittedView(bytes_store)
    keys = [b"k%05d" % i for i in range(2500)]
    view.write([(k, b"c") for k in keys])
    view.mark_committed()
    scan = view.committed.items()
    first = [next(scan) for _ in range(10)]  # the first chunk is read
    view.write([(keys[1500], b"new"), (keys[2100], None), (b"k01500x", b"added")])
    view.write([(keys[2200], None)])
    view.write([(keys[2200], b"again")])  # deleted and put back within the transaction
    rest = list(scan)
    assert first + rest == [(k, b"c") for k in keys]
    assert list(view.committed.items(keys[2099], keys[2101])) == [(keys[2099], b"c"), (keys[2100], b"c")]
    view.mark_committed()
    after = dict(view.committed.items())
    assert after[keys[1500]] == b"new" and keys[2100] not in after and after[b"k01500x"] == b"added"


def test_restore_and_retention_take_no_images(tmp_path: Path) -> None:
    sm = ProcessorStateManager(TID, tmp_path, APP, active=True, eos=True)
    spec = StoreSpec("w", StringSerde(), StringSerde(), kind="window", retention_ms=60_000, window_size_ms=10)
    sm.register_stores([spec], in_memory=False, cache_max_entries=100,
                       changelog_for=lambda s: lambda batch: sm.logged(("w", 1), len(batch)))
    w = sm.stores["w"]
    view = w.committed_view
    assert view is not None
    w.put("k", "1", 0)
    sm.flush()
    sm.transaction_committed()
    w.put("k", "2", 10)
    sm.flush()
    assert view._undo  # a processed write keeps its image until the commit
    sm.transaction_committed()
    w.put("k", "3", 10 * 60_000)  # stream time moves on: the first segments expire
    assert not view._undo  # the retention's deletes took none (the put is still in the cache)
    assert w.for_query().fetch("k", 0, 100) == []  # expired by stream time
    sm.close(checkpoint=False)
