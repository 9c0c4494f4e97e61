"""What a scan asks for, in serialized keys.

One description shared by the instance that scatters, the hop it forwards to and the page token
(its fingerprint ties a token to the query that issued it). Keys are compared as bytes, the order
of the stores (RocksDB's default comparator), so every replica and the merge agree on one order.
"""

from __future__ import annotations

import enum
import hashlib
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass


class ScanKind(enum.StrEnum):
    MULTI_GET = "MULTI_GET"
    RANGE = "RANGE"
    PREFIX = "PREFIX"
    ALL = "ALL"


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key above every key that starts with ``prefix`` (None: there is none)."""
    p = prefix.rstrip(b"\xff")
    return p[:-1] + bytes([p[-1] + 1]) if p else None


def key_after(key: bytes) -> bytes:
    """The smallest key greater than ``key``: an exclusive lower bound made inclusive."""
    return key + b"\x00"


@dataclass(frozen=True)
class ScanQuery:
    """``start``/``end``: inclusive bounds of a RANGE (None: unbounded); ``prefix`` of a PREFIX
    scan; ``keys`` of a MULTI_GET, sorted and unique (see :meth:`multi_get`)."""

    store: str
    kind: ScanKind
    start: bytes | None = None
    end: bytes | None = None
    prefix: bytes = b""
    keys: tuple[bytes, ...] = ()

    @staticmethod
    def multi_get(store: str, keys: Iterable[bytes]) -> ScanQuery:
        return ScanQuery(store, ScanKind.MULTI_GET, keys=tuple(sorted(set(keys))))

    def interval(self, after: bytes | None = None) -> tuple[bytes, bytes | None]:
        """``[lo, hi)`` of the keys this query may still return after ``after`` (hi None: no
        upper bound); empty when ``lo >= hi``. For MULTI_GET the bounds of its keys."""
        lo: bytes
        hi: bytes | None
        if self.kind is ScanKind.RANGE:
            lo, hi = self.start or b"", None if self.end is None else key_after(self.end)
        elif self.kind is ScanKind.PREFIX:
            lo, hi = self.prefix, prefix_end(self.prefix)
        elif self.kind is ScanKind.MULTI_GET:
            lo, hi = (self.keys[0], key_after(self.keys[-1])) if self.keys else (b"", b"")
        else:
            lo, hi = b"", None
        if after is not None:
            lo = max(lo, key_after(after))
        return lo, hi

    def keys_after(self, after: bytes | None) -> tuple[bytes, ...]:
        """MULTI_GET: the keys still to answer after ``after``."""
        return self.keys if after is None else self.keys[bisect_right(self.keys, after):]

    def with_keys(self, keys: Iterable[bytes]) -> ScanQuery:
        """This MULTI_GET for some of its keys (what one partition's hop is asked)."""
        return ScanQuery.multi_get(self.store, keys)

    def fingerprint(self) -> str:
        """A short digest of the query (not of its page): a page token carries it, so a token is
        refused by any other query."""
        h = hashlib.sha256()
        for part in (self.kind.value.encode(), self.store.encode(), _opt(self.start), _opt(self.end),
                     self.prefix, len(self.keys).to_bytes(8, "big"), *self.keys):
            h.update(len(part).to_bytes(8, "big"))
            h.update(part)
        return h.hexdigest()[:16]


def _opt(b: bytes | None) -> bytes:
    """None and b"" must differ in the fingerprint: an unbounded range is not one from b""."""
    return b"\x00" if b is None else b"\x01" + b
