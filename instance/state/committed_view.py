"""What an active task under exactly-once has committed, for interactive queries (KIP-892's
READ_COMMITTED isolation for queries).

Under exactly-once the stores hold writes the open transaction has not committed: the cache, and
the bytes store once the cache flushes or evicts. A query that reads them and is answered before a
crash reports a value the transaction then aborts, and the next owner, restored from committed
changelog records, answers an older one without any stale flag. So queries of such a task read
this view instead: the bytes store as of the last commit.

:class:`CommittedView` sits between the typed layer and the bytes store. The first write of a key
after a commit records the bytes the key had (its *undo image*, None: absent); a committed read
prefers the undo image over the bytes store; :meth:`CommittedView.mark_committed` drops the images
once the transaction has committed. It costs one read of the bytes store per key per commit
interval, and the images of the keys written in that interval.

Concurrency: the stream thread writes, query threads read. A write records the image before it
changes the bytes store, and a key read looks at the bytes store before it looks for an image: a
read that saw the new bytes then finds the image (images are dropped only after the commit, by
replacing the dict, never by removing keys from it). A scan reads a chunk of the store and merges
it with the images under the lock a write batch holds, so a key deleted since the commit (gone
from the store, its image kept) is found too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import islice
from typing import Any

from instance.state.bytes_store import BytesStore
from instance.state.sorted_keys import SortedKeys

_NONE: Any = object()
#: entries a scan reads under the lock at a time (the writer waits at most that long)
_CHUNK = 1000


class CommittedView:
    """A :class:`BytesStore` over ``inner`` that also answers reads as of the last commit
    (:attr:`committed`). Writes and plain reads are ``inner``'s."""

    def __init__(self, inner: BytesStore) -> None:
        self.name = inner.name
        self.inner = inner
        #: key -> its bytes at the last commit (None: absent), for the keys written since
        self._undo: dict[bytes, bytes | None] = {}
        #: the keys of ``_undo`` that existed at the commit: appended by writes, sorted into
        #: ``_existed_sorted`` by the scans that need them (under ``_lock``)
        self._existed: list[bytes] = []
        self._existed_sorted = SortedKeys()
        self._sorted_upto = 0
        #: held by a write batch (images, then the bytes store) and by a scan reading one chunk,
        #: so a chunk and the images it is merged with are of the same moment
        self._lock = threading.Lock()
        self._recording = True
        self.get = inner.get
        self.items = inner.items
        self.approximate_num_entries = inner.approximate_num_entries
        self.flush = inner.flush
        self.close = inner.close
        self.committed = CommittedReads(self)

    def write(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        if not self._recording:
            self.inner.write(items)
            return
        rows = items if isinstance(items, list) else list(items)
        with self._lock:
            undo, read, existed = self._undo, self.inner.get, self._existed
            for k, _ in rows:
                if k not in undo:
                    image = undo[k] = read(k)
                    if image is not None:
                        existed.append(k)
            self.inner.write(rows)

    @contextmanager
    def unrecorded(self) -> Iterator[None]:
        """Writes that take no images: records committed already (a restore, which would
        otherwise read the store once per record for nothing), and retention dropping expired
        segments (not transactional, as in Kafka Streams)."""
        self._recording = False
        try:
            yield
        finally:
            self._recording = True

    def mark_committed(self) -> None:
        """The transaction that wrote everything below has committed."""
        if self._undo:
            with self._lock:
                self._undo, self._existed, self._existed_sorted, self._sorted_upto = {}, [], SortedKeys(), 0

    def committed_get(self, key: bytes) -> bytes | None:
        data = self.inner.get(key)  # first: see the module doc
        image = self._undo.get(key, _NONE)
        return data if image is _NONE else image

    def committed_items(self, start: bytes | None = None,
                        end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """``inner``'s entries in ``[start, end)`` with the images in place of what was written
        since the commit (an image None hides a key added since; the image of a key deleted
        since brings it back). Read in chunks, each merged with the images of its moment: a long
        scan is exact key by key, not one snapshot (nor is a scan of a store that commits)."""
        lo = start
        while True:
            with self._lock:
                chunk = list(islice(self.inner.items(lo, end), _CHUNK))
                more = len(chunk) == _CHUNK
                hi = chunk[-1][0] + b"\x00" if more else end
                out = self._merged(chunk, self._existed_in(lo, hi))
            yield from out
            if not more:
                return
            lo = hi

    def _existed_in(self, lo: bytes | None, hi: bytes | None) -> list[bytes]:
        """The keys in ``[lo, hi)`` that existed at the commit and were written since (under
        ``_lock``): the ones a deletion may have taken out of the bytes store."""
        existed, sorted_keys = self._existed, self._existed_sorted
        for k in existed[self._sorted_upto:]:
            sorted_keys.add(k)
        self._sorted_upto = len(existed)
        return sorted_keys.range(lo, hi)

    def _merged(self, chunk: list[tuple[bytes, bytes]], existed: list[bytes]) -> list[tuple[bytes, bytes]]:
        undo = self._undo
        out: list[tuple[bytes, bytes]] = []
        i, n = 0, len(existed)
        for kb, vb in chunk:
            while i < n and existed[i] < kb:  # gone from the store since the commit
                out.append((existed[i], undo[existed[i]]))  # type: ignore[arg-type]  # existed: not None
                i += 1
            if i < n and existed[i] == kb:
                i += 1
            image = undo.get(kb, _NONE)
            if image is _NONE:
                out.append((kb, vb))
            elif image is not None:
                out.append((kb, image))
        out += ((k, undo[k]) for k in existed[i:])  # type: ignore[misc]
        return out


class CommittedReads:
    """The read side of a :class:`CommittedView` as a read-only :class:`BytesStore`, for the
    typed layer that answers queries."""

    def __init__(self, view: CommittedView) -> None:
        self.name = view.name
        self.get = view.committed_get
        self.items = view.committed_items
        self.approximate_num_entries = view.inner.approximate_num_entries

    def write(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        raise TypeError(f"store {self.name}: the committed view is read-only")

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
