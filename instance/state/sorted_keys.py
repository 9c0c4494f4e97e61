"""A sorted set of byte keys for the in-memory bytes store: ``add``/``discard`` in about
O(log n + block size), a range by ``bisect``. Window and session stores range-fetch on the hot
path, so the keys cannot be sorted on demand; one flat sorted list would ``memmove`` the whole
list on every new key (measured: a tumbling-window count fell from 20k to 4k records/s at 100k
keys). Blocks of at most ``_MAX`` keys keep both costs small (the idea of ``sortedcontainers``)."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator

_MAX = 1000


class SortedKeys:
    def __init__(self) -> None:
        self._blocks: list[list[bytes]] = []
        #: the last (largest) key of each block
        self._maxes: list[bytes] = []

    def __len__(self) -> int:
        return sum(map(len, self._blocks))

    def add(self, key: bytes) -> None:
        """Add a key not in the set (the caller knows: it keeps the values in a dict)."""
        blocks, maxes = self._blocks, self._maxes
        if not blocks:
            blocks.append([key])
            maxes.append(key)
            return
        i = bisect_left(maxes, key)
        if i == len(blocks):  # past the last block's end: append there
            i -= 1
            blocks[i].append(key)
            maxes[i] = key
        else:
            insort(blocks[i], key)
        block = blocks[i]
        if len(block) > 2 * _MAX:
            blocks[i:i + 1] = [block[:_MAX], block[_MAX:]]
            maxes[i:i + 1] = [block[_MAX - 1], block[-1]]

    def discard(self, key: bytes) -> None:
        maxes = self._maxes
        i = bisect_left(maxes, key)
        if i == len(maxes):
            return
        block = self._blocks[i]
        j = bisect_left(block, key)
        if j == len(block) or block[j] != key:
            return
        del block[j]
        if not block:
            del self._blocks[i]
            del maxes[i]
        elif j == len(block):
            maxes[i] = block[-1]

    def range(self, start: bytes | None, end: bytes | None) -> list[bytes]:
        """The keys in ``[start, end)`` (a copy: the caller may write while it iterates)."""
        blocks, maxes = self._blocks, self._maxes
        i = 0 if start is None else bisect_left(maxes, start)
        out: list[bytes] = []
        for block in blocks[i:]:
            lo = 0 if start is None else bisect_left(block, start)
            if end is not None and block[-1] >= end:
                out.extend(block[lo:bisect_left(block, end)])
                return out
            out.extend(block[lo:])
        return out

    def __iter__(self) -> Iterator[bytes]:
        for block in self._blocks:
            yield from block

    def clear(self) -> None:
        self._blocks.clear()
        self._maxes.clear()

