"""The store layers, alone and as build_key_value_store composes them, over RocksDB and in memory:
what reaches the bytes store and the changelog, and what the flush listener sees (Change(new, old))."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from instance.errors import InvalidStateStoreException
from instance.serde import JsonSerde, LongSerde, StringSerde
from instance.state.bytes_store import BytesStore, InMemoryBytesStore, RocksDBBytesStore
from instance.state.caching import CachingKeyValueStore
from instance.state.change import Change
from instance.state.change_logging import ChangeLoggingKeyValueStore
from instance.state.kv_store import KeyValueStore
from instance.state.metered import MeteredKeyValueStore
from instance.state.spec import StoreSpec
from instance.state.store_builder import build_key_value_store
from instance.state.typed_store import MIN_BUFFER, with_timestamps
from instance.state.uncached import UncachedKeyValueStore

Batch = list[tuple[bytes, bytes | None, int]]


class SpyBytes:
    """A bytes store that records its calls (and what it held when ``before_write`` ran)."""

    def __init__(self, inner: BytesStore) -> None:
        self.inner = inner
        self.name = inner.name
        self.gets = 0
        self.writes: list[list[tuple[bytes, bytes | None]]] = []
        self.flushes = 0

    def get(self, key: bytes) -> bytes | None:
        self.gets += 1
        return self.inner.get(key)

    def write(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        items = list(items)
        self.writes.append(items)
        self.inner.write(items)

    def items(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        return self.inner.items(start, end)

    def approximate_num_entries(self) -> int:
        return self.inner.approximate_num_entries()

    def flush(self) -> None:
        self.flushes += 1
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()


@pytest.fixture(params=["rocksdb", "memory"])
def bytes_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SpyBytes]:
    inner: BytesStore = (RocksDBBytesStore("s", tmp_path / "rocksdb" / "s") if request.param == "rocksdb"
                         else InMemoryBytesStore("s"))
    spy = SpyBytes(inner)
    yield spy
    inner.close()


def _spec(caching: bool = True, logging: bool = True) -> StoreSpec:
    return StoreSpec("s", StringSerde(), LongSerde(), logging_enabled=logging, caching_enabled=caching)


class Recorder:
    """Changelog and listener in one: the batches sent, the changes forwarded."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.changes: list[tuple[Any, Change, int]] = []

    def send(self, batch: Batch) -> None:
        self.batches.append(list(batch))

    def listen(self, key: Any, change: Change, ts: int) -> None:
        self.changes.append((key, change, ts))


def _store(bytes_store: SpyBytes, caching: bool = True, logging: bool = True,
           cache: int = 1000) -> tuple[KeyValueStore, Recorder]:
    rec = Recorder()
    store = build_key_value_store(_spec(caching, logging), bytes_store, rec.send, cache)
    store.set_flush_listener(rec.listen)
    return store, rec


def _L(v: int) -> bytes:
    b = LongSerde().serialize(v)
    assert b is not None
    return b


# -- each layer alone ------------------------------------------------------------------------
def test_change_logging_writes_the_batch_below_then_logs_it_in_one_call(bytes_store: SpyBytes) -> None:
    rec = Recorder()
    layer = ChangeLoggingKeyValueStore(bytes_store, rec.send)
    batch = [(b"a", b"1", 5), (b"b", None, 6)]
    layer.write_batch(with_timestamps(batch), batch)
    # the store holds ValueAndTimestamp, the changelog the plain value with its timestamp apart
    assert bytes_store.writes == [[(b"a", (5).to_bytes(8, "big") + b"1"), (b"b", None)]]
    assert rec.batches == [batch]
    assert bytes_store.get(b"a") == (5).to_bytes(8, "big") + b"1" and bytes_store.get(b"b") is None


def test_caching_layer_alone_keeps_puts_until_flush(bytes_store: SpyBytes) -> None:
    layer = CachingKeyValueStore(_spec(), bytes_store, None, 1000)
    rec = Recorder()
    layer.set_flush_listener(rec.listen)
    layer.put("a", 1, 10)
    layer.put("a", 2, 11)
    assert layer.get("a") == 2  # read-your-writes
    assert bytes_store.writes == [] and rec.changes == []
    layer.flush_cache()
    assert bytes_store.writes == [[(b"a", _L(2))]]
    assert rec.changes == [("a", Change(2, None), 11)]
    layer.flush_cache()  # nothing dirty: nothing written, nothing forwarded
    assert len(bytes_store.writes) == 1 and len(rec.changes) == 1


def test_uncached_layer_alone_forwards_each_put_and_writes_behind(bytes_store: SpyBytes) -> None:
    layer = UncachedKeyValueStore(_spec(caching=False), bytes_store, None, 0)
    rec = Recorder()
    layer.set_flush_listener(rec.listen)
    layer.put("a", 1, 10)
    layer.put("a", 2, 11)
    assert rec.changes == [("a", Change(1, None), 10), ("a", Change(2, 1), 11)]
    assert bytes_store.writes == []
    assert layer.get("a") == 2
    layer.flush_cache()
    assert bytes_store.writes == [[(b"a", _L(2))]]


def test_metered_binds_the_typed_layer_and_counts_per_flush(bytes_store: SpyBytes) -> None:
    layer = CachingKeyValueStore(_spec(), bytes_store, None, 1000)
    store = MeteredKeyValueStore(_spec(), bytes_store, layer)
    assert store.get == layer.get and store.put == layer.put  # no wrapper call on the hot path
    assert store.name == "s" and store.inner is bytes_store
    for i in range(5):
        store.put(f"k{i}", i)
    store.put("k0", 9)
    store.flush_cache()
    store.flush()
    assert bytes_store.flushes == 1
    assert store.counters() == {"flushes": 1, "batches_written": 1, "records_written": 5}
    store.before_write = lambda: None
    assert layer.before_write is store.before_write


# -- composed: Change(new, old) ------------------------------------------------------------------
def test_old_value_is_what_the_previous_flush_forwarded(bytes_store: SpyBytes) -> None:
    store, rec = _store(bytes_store)
    store.put("w", 1, 1)
    store.flush_cache()
    assert rec.changes == [("w", Change(1, None), 1)]  # first put: no old value
    store.put("w", 2, 2)
    store.flush_cache()
    assert rec.changes[-1] == ("w", Change(2, 1), 2)  # put after a flush: old = last flushed
    store.put("w", 3, 3)
    store.put("w", 4, 4)
    store.delete("w", 5)
    store.put("w", 6, 6)
    store.flush_cache()
    assert rec.changes[-1] == ("w", Change(6, 2), 6)  # several puts: one forward, old = last flushed
    assert len(rec.changes) == 3
    store.delete("w", 7)
    store.flush_cache()
    assert rec.changes[-1] == ("w", Change(None, 6), 7)


def test_read_through_keeps_the_old_value_without_another_store_read(bytes_store: SpyBytes) -> None:
    bytes_store.write([(b"a", _L(41)), (b"b", _L(7))])
    store, rec = _store(bytes_store)
    assert store.get("a") == 41
    assert store.get("missing") is None
    reads = bytes_store.gets
    store.put("a", 42, 1)
    store.put("missing", 1, 1)
    assert store.get("a") == 42
    store.flush_cache()
    assert bytes_store.gets == reads  # the old values were known
    assert sorted(rec.changes) == [("a", Change(42, 41), 1), ("missing", Change(1, None), 1)]


def test_a_put_without_a_read_learns_its_old_value_from_below_at_flush(bytes_store: SpyBytes) -> None:
    bytes_store.write([(b"b", _L(7))])
    store, rec = _store(bytes_store)
    store.put("b", 8, 3)
    store.flush_cache()
    assert rec.changes == [("b", Change(8, 7), 3)]
    store.put("b", 9, 4)  # now known: no read
    reads = bytes_store.gets
    store.flush_cache()
    assert rec.changes[-1] == ("b", Change(9, 8), 4) and bytes_store.gets == reads


def test_changelog_gets_the_latest_value_per_key_once_per_flush(bytes_store: SpyBytes) -> None:
    store, rec = _store(bytes_store)
    for i in range(10):
        store.put("a", i, 100 + i)
    store.put("b", 1, 200)
    store.delete("b", 201)
    store.put("c", 5, 300)
    store.flush_cache()
    assert rec.batches == [[(b"a", _L(9), 109), (b"b", None, 201), (b"c", _L(5), 300)]]
    assert bytes_store.writes == [[(b, v) for b, v, _ in rec.batches[0]]]
    assert bytes_store.get(b"a") == _L(9) and bytes_store.get(b"b") is None


def test_caching_off_forwards_every_put_with_its_old_value_and_batches_writes(bytes_store: SpyBytes) -> None:
    bytes_store.write([(b"s", _L(100))])
    store, rec = _store(bytes_store, caching=False)
    store.put("a", 1, 1)
    store.put("a", 2, 2)
    store.put("s", 101, 3)          # old from the bytes store
    assert store.delete("a", 4) == 2
    store.put("a", 3, 5)            # old from the pending buffer: the delete
    assert rec.changes == [("a", Change(1, None), 1), ("a", Change(2, 1), 2), ("s", Change(101, 100), 3),
                           ("a", Change(None, 2), 4), ("a", Change(3, None), 5)]
    assert len(bytes_store.writes) == 1 and rec.batches == []  # only the seed above
    assert store.get("a") == 3 and store.get("s") == 101  # read-your-writes
    store.flush_cache()
    assert rec.batches == [[(b"a", _L(3), 5), (b"s", _L(101), 3)]]
    assert len(rec.changes) == 5  # nothing forwarded again at flush


def test_caching_off_writes_a_batch_when_the_buffer_is_full(bytes_store: SpyBytes) -> None:
    store, rec = _store(bytes_store, caching=False, cache=0)
    for i in range(MIN_BUFFER + 1):
        store.put(f"k{i:05d}", i, i)
    assert len(rec.batches) == 1 and len(rec.batches[0]) == MIN_BUFFER + 1
    assert len(rec.changes) == MIN_BUFFER + 1


def test_caching_on_flushes_when_the_cache_is_full(bytes_store: SpyBytes) -> None:
    store, rec = _store(bytes_store, cache=1)  # at least MIN_BUFFER entries
    for i in range(MIN_BUFFER + 1):
        store.put(f"k{i:05d}", i, i)
    assert len(rec.batches) == 1 and len(rec.changes) == MIN_BUFFER + 1


def test_reads_beyond_the_bound_evict_clean_entries_only(bytes_store: SpyBytes) -> None:
    bytes_store.write([(f"k{i:05d}".encode(), _L(i)) for i in range(3 * MIN_BUFFER)])
    store, rec = _store(bytes_store, cache=1)
    store.put("dirty", 1, 1)
    for i in range(3 * MIN_BUFFER):
        assert store.get(f"k{i:05d}") == i
    assert store.get("dirty") == 1 and rec.changes == []  # still pending, not forwarded
    store.put("k00000", -1, 2)
    store.flush_cache()
    assert sorted(rec.changes) == [("dirty", Change(1, None), 1), ("k00000", Change(-1, 0), 2)]


@pytest.mark.parametrize("caching,logging", [(True, True), (True, False), (False, True), (False, False)])
def test_before_write_runs_before_each_batch_reaches_the_bytes_store(
        bytes_store: SpyBytes, caching: bool, logging: bool) -> None:
    store, rec = _store(bytes_store, caching=caching, logging=logging)
    seen: list[tuple[int, int]] = []
    store.before_write = lambda: seen.append((len(bytes_store.writes), len(rec.batches)))
    writes = len(bytes_store.writes)
    store.put("x", 1, 1)
    assert seen == []
    store.flush_cache()
    assert seen == [(writes, 0)]  # before the bytes store and the changelog got the batch
    assert len(bytes_store.writes) == writes + 1
    assert len(rec.batches) == (1 if logging else 0)
    store.flush_cache()
    assert len(seen) == 1  # nothing to write: not called


def test_restore_bypasses_cache_and_changelog_and_drops_cached_entries(bytes_store: SpyBytes) -> None:
    store, rec = _store(bytes_store)
    hook: list[int] = []
    store.before_write = lambda: hook.append(1)
    store.put("a", 1, 1)
    store.put("b", 2, 1)
    store.flush_cache()
    assert store.get("a") == 1
    store.put("b", 3, 2)  # dirty, then restored over
    store.restore_batch([(b"a", _L(10), 0), (b"b", None, 0), (b"c", _L(30), 0)])
    assert store.get("a") == 10 and store.get("b") is None and store.get("c") == 30
    assert len(rec.batches) == 1 and hook == [1]  # restore: no changelog, no hook
    store.flush_cache()
    assert len(rec.changes) == 2  # the restored-over put is not forwarded
    store.put("a", 11, 3)
    store.flush_cache()
    assert rec.changes[-1] == ("a", Change(11, 10), 3)


def test_range_and_all_overlay_the_cache_on_the_store(bytes_store: SpyBytes) -> None:
    for caching in (True, False):
        store, _ = _store(bytes_store, caching=caching)
        bytes_store.write([(k.encode(), _L(v)) for k, v in [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("f", 6)]])
        store.get("d")  # a clean cached entry
        store.put("b", 20, 1)
        store.delete("c", 1)  # a cached None hides the stored key
        store.put("e", 5, 1)
        expected_all = [("a", 1), ("b", 20), ("d", 4), ("e", 5), ("f", 6)]
        assert list(store.all()) == expected_all
        assert list(store.range("b", "e")) == [("b", 20), ("d", 4), ("e", 5)]  # inclusive end
        assert list(store.range("bb", "c")) == []
        assert list(store.range("e", None)) == [("e", 5), ("f", 6)]
        store.flush_cache()
        assert list(store.all()) == expected_all
        bytes_store.write([(k.encode(), None) for k, _ in expected_all])


def test_query_get_reads_pending_values_and_never_fills_the_cache(bytes_store: SpyBytes) -> None:
    bytes_store.write([(b"a", _L(1))])
    store, _ = _store(bytes_store)
    store.put("p", 5)
    assert store.query_get("p") == 5
    assert store.query_get("a") == 1 and store.query_get("a") == 1
    assert bytes_store.gets == 2


def test_a_closed_store_refuses_queries(bytes_store: SpyBytes) -> None:
    store, _ = _store(bytes_store)
    store.put("a", 1)
    assert store.is_open
    store.close()
    assert not store.is_open
    for q in (lambda: store.query_get("a"), lambda: store.all(), lambda: store.range("a", "b"),
              store.approximate_num_entries):
        with pytest.raises(InvalidStateStoreException):
            q()


def test_none_key_is_refused(bytes_store: SpyBytes) -> None:
    for caching in (True, False):
        store, _ = _store(bytes_store, caching=caching)
        with pytest.raises(ValueError):
            store.put(None, 1)


def test_put_if_absent_and_approximate_num_entries(bytes_store: SpyBytes) -> None:
    store, rec = _store(bytes_store)
    assert store.put_if_absent("a", 1, 1) is None
    assert store.put_if_absent("a", 2, 2) == 1
    assert store.approximate_num_entries() >= 1
    store.flush_cache()
    assert rec.changes == [("a", Change(1, None), 1)]


# -- the builder -----------------------------------------------------------------------------------
@pytest.mark.parametrize("caching,logging,changelog,cache,layer,logged", [
    (True, True, True, 100, CachingKeyValueStore, True),
    (True, True, True, 0, UncachedKeyValueStore, True),
    (False, True, True, 100, UncachedKeyValueStore, True),
    (True, False, True, 100, CachingKeyValueStore, False),
    (True, True, False, 100, CachingKeyValueStore, False),
])
def test_builder_composes_the_layers_the_spec_asks_for(
        caching: bool, logging: bool, changelog: bool, cache: int, layer: type, logged: bool) -> None:
    rec = Recorder()
    inner = SpyBytes(InMemoryBytesStore("s"))
    store = build_key_value_store(_spec(caching, logging), inner, rec.send if changelog else None, cache)
    assert isinstance(store._store, layer)
    store.put("k", 1, 1)
    store.flush()
    assert inner.get(b"k") == _L(1) and inner.flushes == 1
    assert rec.batches == ([[(b"k", _L(1), 1)]] if logged else [])


def test_typed_values_are_serialized_once_per_flush() -> None:
    calls = []

    class CountingJson(JsonSerde):
        def serialize(self, value: Any) -> bytes | None:
            calls.append(value)
            return super().serialize(value)

    spec = StoreSpec("j", StringSerde(), CountingJson())
    store = build_key_value_store(spec, InMemoryBytesStore("j"), None, 100)
    for i in range(50):
        store.put("k", {"n": i})
    assert calls == []
    store.flush_cache()
    assert calls == [{"n": 49}]


def test_rocksdb_items_cross_chunks_and_stop_at_close(tmp_path: Path) -> None:
    """Iteration reads in chunks (no RocksDB iterator alive across a yield): every key once, in
    order, bounds respected; a store closed mid-scan raises InvalidStateStoreException."""
    db = RocksDBBytesStore("s", tmp_path / "db")
    keys = [b"k%05d" % i for i in range(2500)]
    db.write((k, b"v") for k in keys)
    assert [k for k, _ in db.items()] == keys
    assert [k for k, _ in db.items(b"k00999", b"k02001")] == keys[999:2001]
    scan = db.items()
    assert [next(scan)[0] for _ in range(1000)] == keys[:1000]
    db.close()
    with pytest.raises(InvalidStateStoreException):
        list(scan)
    with pytest.raises(InvalidStateStoreException):
        db.get(b"k00001")


def test_forward_with_a_timestamp_leaves_the_current_record_timestamp() -> None:
    """A cache flush forwards inside a processor's get/put with each entry's own timestamp; the
    record being processed keeps its timestamp for what the processor does next."""
    from instance.topology.processor import ProcessorContext, RecordContext

    rc = RecordContext()
    rc.timestamp = 5000
    seen: list[tuple[Any, int]] = []
    ctx = ProcessorContext("0_0", "n", rc, [lambda k, v: seen.append((k, rc.timestamp))], {}, "app", None)
    ctx.forward("flushed", 1, 699)
    assert seen == [("flushed", 699)]
    assert rc.timestamp == 5000


# -- timestamped stores (every KTable's) ------------------------------------------------------------
@pytest.mark.parametrize("caching", [True, False])
def test_timestamped_store_keeps_each_keys_latest_timestamp_through_flush_eviction_and_restore(
        bytes_store: SpyBytes, caching: bool) -> None:
    """The bytes store holds ValueAndTimestamp, the changelog the plain value with the timestamp
    apart; a store restored from that changelog knows the same timestamps."""
    spec = StoreSpec("s", StringSerde(), LongSerde(), caching_enabled=caching, timestamped=True)
    rec = Recorder()
    store = build_key_value_store(spec, bytes_store, rec.send, MIN_BUFFER)
    store.put("a", 1, 10)
    store.put("b", 2, 20)
    assert store.get_with_timestamp("a") == (1, 10) and store.timestamp_of("b") == 20  # dirty
    store.flush()
    assert rec.batches == [[(b"a", _L(1), 10), (b"b", _L(2), 20)]]
    assert bytes_store.get(b"a") == (10).to_bytes(8, "big") + _L(1)
    assert store.get("a") == 1 and [v for _, v in store.all()] == [1, 2]  # queries see plain values
    store.put("a", 3, 15)
    store.flush()
    for i in range(3 * MIN_BUFFER):  # push the clean entries out of the cache
        store.put(f"x{i}", i, 1)
    store.flush()
    assert store.get_with_timestamp("a") == (3, 15) and store.get_with_timestamp("nope") is None
    assert store.timestamp_of("nope") == -1

    restored = build_key_value_store(spec, InMemoryBytesStore("r"), None, 0)
    for batch in rec.batches:
        restored.restore_batch(batch)
    assert restored.get_with_timestamp("a") == (3, 15) and restored.get_with_timestamp("b") == (2, 20)
    assert restored.query_get("x7") == 7


def test_caching_store_ignores_deletes_of_absent_keys(bytes_store: SpyBytes) -> None:
    """Kafka Streams' CachingKeyValueStore: a delete of a key neither in the cache nor below is
    neither written nor forwarded; a key put and deleted within one flush forwards nothing."""
    store, rec = _store(bytes_store, caching=True)
    store.put("gone", None, 1)
    store.put("brief", 1, 2)
    store.put("brief", None, 3)
    store.put("kept", 5, 4)
    store.flush()
    assert [(k, c) for k, c, _ in rec.changes] == [("kept", Change(5, None))]
    assert (b"gone", None, 1) not in rec.batches[0]
