"""The bottom layer of a store: ordered bytes → bytes, RocksDB (rocksdict) or in memory."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator
from itertools import islice, takewhile
from pathlib import Path
from typing import Protocol, cast

from rocksdict import DbClosedError, Options, Rdict, WriteBatch, WriteOptions

from instance.errors import InvalidStateStoreException
from instance.state.sorted_keys import SortedKeys

_ITER_CHUNK = 1000


class BytesStore(Protocol):
    """Raw storage; ``write`` applies a batch atomically (``None`` value = delete)."""

    name: str

    def get(self, key: bytes) -> bytes | None: ...

    def write(self, items: Iterable[tuple[bytes, bytes | None]]) -> None: ...

    def items(self, start: bytes | None = None,
              end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]: ...

    def approximate_num_entries(self) -> int: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class RocksDBBytesStore:
    """One RocksDB per task and store. The WAL is off, as in Kafka Streams: the changelog topic is
    the source of truth and memtables are flushed on commit."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        try:
            self._db = Rdict(str(path), opts)
        except Exception as e:  # rocksdict raises plain Exception
            raise InvalidStateStoreException(f"cannot open RocksDB store {name!r} at {path}: {e}") from e
        wo = WriteOptions()
        # the stub declares disable_wal as a method; at runtime it is a settable attribute
        wo.disable_wal = True  # type: ignore[method-assign, assignment]
        self._db.set_write_options(wo)
        self._get = self._db.get
        self._open = True

    def get(self, key: bytes) -> bytes | None:
        try:
            return self._get(key)  # type: ignore[no-any-return]
        except DbClosedError as e:  # a query racing a task migration: retryable, not INTERNAL
            raise InvalidStateStoreException(f"store {self.name} is closed (migrated?)") from e

    def write(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        wb = WriteBatch(raw_mode=True)
        put, delete = wb.put, wb.delete
        for k, v in items:
            if v is None:
                delete(k)
            else:
                put(k, v)
        self._db.write(wb)

    def items(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """In chunks, each read by an iterator dropped before the chunk is yielded: a RocksDB
        iterator alive across a yield (a scan page on a query thread) would keep the DB open past
        ``close()``, and the task's next owner on this instance could not open it."""
        while True:
            if not self._open:
                raise InvalidStateStoreException(f"store {self.name} is closed (migrated?)")
            try:
                # raw_mode: keys and values are bytes (the stub types them as any Rdict key/value)
                it = cast(Iterator[tuple[bytes, bytes]],
                          self._db.items(from_key=start) if start is not None else self._db.items())
                if end is None:
                    chunk = list(islice(it, _ITER_CHUNK))
                else:  # stop at the end: a short range (a window fetch) reads only itself
                    chunk = list(islice(takewhile(lambda kv: kv[0] < end, it), _ITER_CHUNK))
                del it
            except DbClosedError as e:
                raise InvalidStateStoreException(f"store {self.name} is closed (migrated?)") from e
            yield from chunk
            if len(chunk) < _ITER_CHUNK:
                return
            start = chunk[-1][0] + b"\x00"  # the next key after the last one read

    def approximate_num_entries(self) -> int:
        n = self._db.property_int_value("rocksdb.estimate-num-keys")
        return int(n or 0)

    def flush(self) -> None:
        if self._open:
            self._db.flush()

    def close(self) -> None:
        if self._open:
            self._open = False
            self._db.flush()
            self._db.close()

    def destroy(self) -> None:
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)


class InMemoryBytesStore:
    """A dict, and its keys kept sorted (``sorted_keys.py``): window and session stores
    range-fetch on the hot path."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._data: dict[bytes, bytes] = {}
        self._keys = SortedKeys()
        self.get: Callable[[bytes], bytes | None] = self._data.get  # the bound dict.get: no extra call

    def write(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        d, keys = self._data, self._keys
        for k, v in items:
            if v is None:
                if d.pop(k, None) is not None:
                    keys.discard(k)
            else:
                if k not in d:
                    keys.add(k)
                d[k] = v

    def items(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        data = self._data
        for k in self._keys.range(start, end):  # a copy: writes while a caller iterates are safe
            v = data.get(k)
            if v is not None:
                yield k, v

    def approximate_num_entries(self) -> int:
        return len(self._data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def destroy(self) -> None:
        self._data.clear()
        self._keys.clear()
