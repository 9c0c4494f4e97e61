"""Window and session stores over the key-value layers: key schema, fetch ranges, duplicates,
retention, the cache overlay, and restore from the changelog (real RocksDB, through the state
manager's restore path, as the changelog reader and standbys apply it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from instance.runtime.state_manager import ProcessorStateManager
from instance.serde import LongSerde, StringSerde
from instance.serde.windowed import SessionWindow, TimeWindow, Windowed
from instance.state.bytes_store import InMemoryBytesStore, RocksDBBytesStore
from instance.state.change import Change
from instance.state.session_store import SessionStore
from instance.state.spec import StoreSpec
from instance.state.store_builder import build_session_store, build_window_store
from instance.state.window_store import WindowStore
from kernel.task_id import TaskId

S, L = StringSerde(), LongSerde()
Batch = list[tuple[bytes, bytes | None, int]]


def _window_spec(name: str = "w", retention: int = 1000, dups: bool = False, caching: bool = True,
                 timestamped: bool = False) -> StoreSpec:
    return StoreSpec(name, S, L, caching_enabled=caching, kind="window", retention_ms=retention,
                     window_size_ms=10, retain_duplicates=dups, timestamped=timestamped)


def _window(spec: StoreSpec, log: list[Batch] | None = None, cache: int = 100) -> WindowStore:
    return build_window_store(spec, InMemoryBytesStore(spec.name),
                              None if log is None else log.append, cache)


def test_window_fetch_by_key_and_time_range_with_pending_and_flushed_writes() -> None:
    log: list[Batch] = []
    w = _window(_window_spec(), log)
    w.put("a", 1, 0)
    w.put("a", 2, 10)
    w.put("ab", 99, 10)  # a longer key sharing the prefix is not "a"
    w.put("b", 3, 10)
    assert w.fetch("a", 0, 10) == [(0, 1), (10, 2)]  # all still in the cache
    w.flush()
    w.put("a", 3, 20)
    w.put("a", None, 0)  # delete, pending
    assert w.fetch("a", 0, 100) == [(10, 2), (20, 3)]
    assert w.fetch("a", 10) == 2 and w.fetch("a", 0) is None
    assert w.backward_fetch("a", 0, 100) == [(20, 3), (10, 2)]
    w.flush()
    assert w.fetch("a", 0, 100) == [(10, 2), (20, 3)]
    assert w.fetch_all(10, 10) == [(Windowed("a", TimeWindow(10, 20)), 2),
                                   (Windowed("ab", TimeWindow(10, 20)), 99),
                                   (Windowed("b", TimeWindow(10, 20)), 3)]
    # the changelog carries Kafka Streams' window store keys: [key][8-byte start][4-byte seq]
    keys = [kb for batch in log for kb, _, _ in batch]
    assert b"a" + (10).to_bytes(8, "big") + (0).to_bytes(4, "big") in keys


def test_retained_duplicates_keep_every_put_in_order() -> None:
    w = _window(_window_spec(dups=True))
    for v in (5, 6, 7):
        w.put("k", v, 100)
    w.put("k", None, 100)  # a no-op with duplicates, as in Kafka Streams
    assert w.fetch("k", 0, 200) == [(100, 5), (100, 6), (100, 7)]
    w.flush()
    assert w.fetch("k", 100, 100) == [(100, 5), (100, 6), (100, 7)]


def test_retention_drops_expired_puts_and_hides_expired_windows() -> None:
    # retention 1000 -> segments of 60 s (Kafka Streams' minimum)
    w = _window(_window_spec(retention=1000))
    w.put("k", 1, 0)
    w.put("k", 2, 500)
    w.flush()
    w.put("k", 3, 1200)  # stream time 1200: windows starting at or before 200 are expired
    assert w.fetch("k", 0, 2000) == [(500, 2), (1200, 3)]
    assert w.fetch("k", 0) is None
    w.put("k", 4, 100)  # its segment is still there: kept below, but hidden from reads
    assert w.expired_puts == 0
    assert w.fetch("k", 0, 2000) == [(500, 2), (1200, 3)]


def test_whole_segments_are_dropped_below_and_unlogged() -> None:
    log: list[Batch] = []
    w = _window(_window_spec(retention=120_000), log)  # segments of 60 s
    w.put("k", 1, 1_000)
    w.put("k", 2, 61_000)
    w.flush()
    assert w.inner.segments == {0, 1}
    logged = sum(len(b) for b in log)
    w.put("k", 3, 200_000)  # min live = (200000 - 120000) // 60000 = segment 1
    w.flush()
    assert w.inner.segments == {1, 3}
    assert sum(len(b) for b in log) == logged + 1  # only the new put: the drop is not logged
    assert w.fetch("k", 0, 300_000) == [(200_000, 3)]  # 61000 is past retention, hidden
    w.put("k", 4, 59_000)  # its segment is gone: dropped
    assert w.expired_puts == 1 and w.inner.segments == {1, 3}


def test_timestamped_window_store_keeps_value_and_timestamp() -> None:
    w = _window(_window_spec(timestamped=True))
    seen: list[tuple[object, Change, int]] = []
    w.set_flush_listener(lambda k, c, ts: seen.append((k, c, ts)))
    w.put("k", 7, 0, 5)
    assert w.fetch_timestamped("k", 0) == (7, 5)
    assert w.fetch("k", 0) == 7 and w.fetch("k", 0, 10) == [(0, 7)]
    w.flush_cache()
    assert seen == [(("k", 0, 0), Change((7, 5), None), 5)]


def test_session_store_find_sessions_and_remove() -> None:
    spec = StoreSpec("s", S, L, kind="session", retention_ms=10_000)
    st: SessionStore = build_session_store(spec, InMemoryBytesStore("s"), None, 100)
    st.put(Windowed("a", SessionWindow(0, 10)), 2)
    st.put(Windowed("a", SessionWindow(20, 30)), 3)
    st.put(Windowed("b", SessionWindow(5, 5)), 1)
    st.flush()
    st.put(Windowed("a", SessionWindow(40, 40)), 1)
    # sessions of "a" that end at/after 8 and start at/before 25
    assert st.find_sessions("a", 8, 25) == [(Windowed("a", SessionWindow(0, 10)), 2),
                                           (Windowed("a", SessionWindow(20, 30)), 3)]
    assert [s.window for s, _ in st.fetch("a")] == [(0, 10), (20, 30), (40, 40)]
    st.remove(Windowed("a", SessionWindow(20, 30)))
    assert st.find_sessions("a", 0, 100) == [(Windowed("a", SessionWindow(0, 10)), 2),
                                            (Windowed("a", SessionWindow(40, 40)), 1)]
    assert st.fetch_session("b", 5, 5) == 1
    assert [s for s, _ in st.all()] == [Windowed("b", SessionWindow(5, 5)),
                                        Windowed("a", SessionWindow(0, 10)),
                                        Windowed("a", SessionWindow(40, 40))]


@pytest.mark.parametrize("kind", ["window", "session"])
def test_restore_from_the_changelog_into_rocksdb_through_the_state_manager(tmp_path: Path, kind: str) -> None:
    """The active store logs; a new task (new state dir, no checkpoint) restores those changelog
    records through ProcessorStateManager.restore and answers the same fetches; windows the
    restored stream time expired stay dropped."""
    app, tid = "app", TaskId(0, 0)
    spec = (_window_spec("w", retention=120_000, dups=False, timestamped=True) if kind == "window"
            else StoreSpec("w", S, L, kind="session", retention_ms=120_000))
    changelog: Batch = []

    def open_sm(state_dir: Path, active: bool) -> ProcessorStateManager:
        sm = ProcessorStateManager(tid, state_dir, app, active=active)
        sm.register_stores([spec], in_memory=False, cache_max_entries=100,
                           changelog_for=lambda s: changelog.extend)
        return sm

    sm = open_sm(tmp_path / "one", True)
    store = sm.stores["w"]
    assert isinstance(store.inner.inner, RocksDBBytesStore)
    for i, t in enumerate([1_000, 2_000, 61_000, 140_000, 250_000]):
        if kind == "window":
            store.put(f"k{i % 2}", i, t, t + 1)
        else:
            store.put(Windowed(f"k{i % 2}", SessionWindow(t, t + 5)), i)
    sm.flush()
    expected = store.all()
    sm.close(checkpoint=True)
    assert len(expected) == 2  # 250000 - 120000: only 140000 and 250000 are live

    sm2 = open_sm(tmp_path / "two", False)  # a standby / a restoring task: no cache, no logging
    tp = (spec.changelog_topic(app), 0)
    sm2.restore(tp, changelog[:3], 3)
    sm2.restore(tp, changelog[3:], len(changelog))
    restored = sm2.stores["w"]
    assert restored.all() == expected
    assert restored.inner.segments == {2, 4}  # segments 0 and 1 dropped by the restored stream time
    assert sm2.changelog_offsets[tp] == len(changelog)
    sm2.close(checkpoint=True)
    # and a reopen of the RocksDB finds its segments again
    sm3 = open_sm(tmp_path / "two", False)
    assert sm3.stores["w"].all() == expected
    sm3.close(checkpoint=False)
