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
changes the bytes store, and a read looks at the bytes store before it looks for an image: a read
that saw the new bytes then finds the image (images are dropped only after the commit, by
replacing the dict, never by removing keys from it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from instance.state.bytes_store import BytesStore

_NONE: Any = object()


class CommittedView:
    """A :class:`BytesStore` over ``inner`` that also answers reads as of the last commit
    (:attr:`committed`). Writes and plain reads are ``inner``'s."""

    def __init__(self, inner: BytesStore) -> None:
        self.name = inner.name
        self.inner = inner
        #: key -> its bytes at the last commit (None: absent), for the keys written since
        self._undo: dict[bytes, bytes | None] = {}
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
        undo, read = self._undo, self.inner.get
        for k, _ in rows:
            if k not in undo:
                undo[k] = read(k)
        self.inner.write(rows)

    @contextmanager
    def committed_writes(self) -> Iterator[None]:
        """Writes of records committed already (restore from the changelog) take no images: a
        restore would otherwise read the store once per record for nothing."""
        self._recording = False
        try:
            yield
        finally:
            self._recording = True

    def mark_committed(self) -> None:
        """The transaction that wrote everything below has committed."""
        if self._undo:
            self._undo = {}

    def committed_get(self, key: bytes) -> bytes | None:
        data = self.inner.get(key)  # first: see the module doc
        image = self._undo.get(key, _NONE)
        return data if image is _NONE else image

    def committed_items(self, start: bytes | None = None,
                        end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """``inner``'s entries in ``[start, end)`` with the images in place of what was written
        since the commit (an image None hides a key added since, an image of a key deleted since
        brings it back). The images are copied once at the start: a long scan that meets a key
        written after that reads it as written (a page of a scan is a moment, not the scan)."""
        undo = dict(self._undo)  # one C-level copy: the stream thread adds to the dict
        images = sorted((k, v) for k, v in undo.items()
                        if (start is None or k >= start) and (end is None or k < end))
        i, n = 0, len(images)
        for kb, vb in self.inner.items(start, end):
            while i < n and images[i][0] < kb:
                if images[i][1] is not None:
                    yield images[i]  # type: ignore[misc]  # checked: not None
                i += 1
            if i < n and images[i][0] == kb:
                if images[i][1] is not None:
                    yield images[i]  # type: ignore[misc]
                i += 1
            else:
                yield kb, vb
        for kv in images[i:]:
            if kv[1] is not None:
                yield kv  # type: ignore[misc]


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
