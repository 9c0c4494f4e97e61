"""Source offsets on changelog records: which input a store update came from.

Under at-least-once a crash leaves changelog records written after the last offset commit; the
next owner processes those input records again. Kafka Streams restores them anyway and counts
them twice. Here every changelog record carries a header with the input offsets its task had
reached when it was written (``<offset> <topic>``, comma-separated for several source topics;
the idea is Quix Streams'). Restore skips a record the committed offsets do not cover, so a
store after a crash matches its committed input exactly; a standby holds such records back until
a commit covers them.

Why one mark per write suffices with the record cache: a commit flushes every cache first, so
the entries of one flush all come from input after the previous commit and at or before the mark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

HEADER = "iqmesh.src"


def encode(positions: Iterable[tuple[str, int]]) -> bytes:
    """``positions``: (source topic, offset of the last record processed from it)."""
    return b",".join(b"%d %s" % (offset, topic.encode()) for topic, offset in positions)


def covered(headers: list[tuple[str, bytes]] | None, committed: Mapping[str, int]) -> bool:
    """True unless a source-offset header names an offset at or past the committed one."""
    if not headers:
        return True
    for name, value in headers:
        if name != HEADER or value is None:
            continue
        for part in value.split(b","):
            offset, _, topic = part.partition(b" ")
            mark = committed.get(topic.decode())
            if mark is not None and int(offset) >= mark:
                return False
    return True
