"""One partition's page of a scan, read from a replica of the store.

Stores are typed (``range(start, end)`` takes keys, inclusive, in key-byte order), while scans
are bounded in bytes (a page token's key, a prefix, a raw bound). A byte bound becomes a typed
bound that is no narrower (or none at all, when no key serializes to something usable), and
every entry is checked against the byte bounds, so the answer is exact whatever the serde.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from instance.state.queryable import QueryableStore
from kernel.scan_query import ScanKind, ScanQuery, key_after
from kernel.serdes import Serde

E = TypeVar("E")
_NO_KEY = object()


def read_page(store: QueryableStore, key_serde: Serde, query: ScanQuery, after: bytes | None, partition: int,
              limit: int, partition_of: Callable[[bytes], int],
              entry: Callable[[bytes, Any, Any, int], E]) -> tuple[list[E], bool]:
    """At most ``limit`` entries of ``query`` after ``after`` in key-byte order, and whether the
    partition holds more; ``entry(key_bytes, key, value, partition)`` builds each (value None: a
    MULTI_GET key not found). ``partition_of`` (MULTI_GET) picks the keys this partition holds."""
    ks = key_serde.serialize
    out: list[E] = []
    if query.kind is ScanKind.MULTI_GET:
        for kb in query.keys_after(after):
            if partition_of(kb) != partition:
                continue
            if len(out) == limit:
                return out, True
            key = key_serde.deserialize(kb)
            out.append(entry(kb, key, store.query_get(key), partition))
        return out, False

    lo, hi = query.interval(after)
    if hi is not None and lo >= hi:
        return out, False
    start = _floor(key_serde, lo) if lo else None
    end = _ceiling(key_serde, hi) if hi is not None else None
    for key, value in store.query_range(None if start is _NO_KEY else start, None if end is _NO_KEY else end):
        sk: bytes = ks(key)  # type: ignore[assignment]  # a stored key is never None
        if sk < lo:
            continue
        if hi is not None and sk >= hi:
            break
        if len(out) == limit:
            return out, True
        out.append(entry(sk, key, value, partition))
    return out, False


def _typed(serde: Serde, data: bytes) -> tuple[Any, bytes] | None:
    """The key ``data`` deserializes to and that key's own bytes (None: not a key of this serde)."""
    try:
        key = serde.deserialize(data)
        kb = serde.serialize(key)
    except Exception:
        return None
    return None if kb is None else (key, kb)


def _floor(serde: Serde, lo: bytes) -> Any:
    """A key whose bytes are at most ``lo`` and as close as cheaply found (``_NO_KEY``: start
    from the first key). A page token's bound is a returned key plus 0x00, so that key works."""
    for candidate in (lo, lo[:-1] if lo.endswith(b"\x00") else None):
        if candidate is None:
            continue
        t = _typed(serde, candidate)
        if t is not None and t[1] <= lo:
            return t[0]
    return _NO_KEY


def _ceiling(serde: Serde, hi: bytes) -> Any:
    """A key ``k`` with ``range(..., k)`` covering every key below ``hi`` (``_NO_KEY``: to the
    last key). An inclusive end is stored as its key plus 0x00, so that key is exact."""
    for candidate in (hi[:-1] if hi.endswith(b"\x00") else None, hi):
        if candidate is None:
            continue
        t = _typed(serde, candidate)
        if t is not None and key_after(t[1]) >= hi:
            return t[0]
    return _NO_KEY
