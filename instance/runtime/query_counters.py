"""Query counters of one instance, cheap enough for every Get.

Each gRPC worker thread counts into a slot of its own (plain attribute increments, no lock, no
lost update between threads); :meth:`QueryCounters.totals` sums the slots when the instance
publishes its metadata. That read races with the increments, which is fine for a counter: it
is at most one query behind.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Mapping

from kernel.metadata import InstanceCounters


class QuerySlot:
    """One thread's counts (see :class:`kernel.metadata.InstanceCounters` for their meaning)."""

    __slots__ = ("gets_local", "gets_routed", "gets_forwarded", "get_seconds", "scans", "scan_entries",
                 "errors")

    def __init__(self) -> None:
        self.gets_local = 0
        self.gets_routed = 0
        self.gets_forwarded = 0
        self.get_seconds = 0.0
        self.scans = 0
        self.scan_entries = 0
        self.errors: defaultdict[str, int] = defaultdict(int)


class _ThreadSlot(threading.local):
    """The calling thread's slot as ``.slot``: made and registered the first time a thread reads
    it (``threading.local`` runs ``__init__`` once per thread), a plain attribute read after."""

    def __init__(self, register: Callable[[QuerySlot], None]) -> None:
        self.slot = QuerySlot()
        register(self.slot)


class QueryCounters:
    """``counters.local.slot.gets_local += 1`` from any thread; ``totals()`` from the publisher."""

    def __init__(self) -> None:
        self._slots: list[QuerySlot] = []
        self._lock = threading.Lock()  # taken once per thread, when its slot is made
        self.local = _ThreadSlot(self._register)

    def _register(self, slot: QuerySlot) -> None:
        with self._lock:
            self._slots.append(slot)

    def totals(self, records_processed: int, dropped_records: Mapping[str, int],
               dirty_closes: int = 0) -> InstanceCounters:
        """The sums over every thread's slot, with the stream threads' ``records_processed``,
        ``dropped_records`` (by reason) and ``dirty_closes``."""
        with self._lock:
            slots = list(self._slots)
        errors: defaultdict[str, int] = defaultdict(int)
        for s in slots:
            for code, n in list(s.errors.items()):
                errors[code] += n
        return InstanceCounters(
            records_processed=records_processed,
            gets_local=sum(s.gets_local for s in slots),
            gets_routed=sum(s.gets_routed for s in slots),
            gets_forwarded=sum(s.gets_forwarded for s in slots),
            get_seconds=round(sum(s.get_seconds for s in slots), 6),
            scans=sum(s.scans for s in slots),
            scan_entries=sum(s.scan_entries for s in slots),
            query_errors=tuple(sorted(errors.items())),
            dropped_records=tuple(sorted((k, n) for k, n in dropped_records.items() if n)),
            dirty_closes=dirty_closes,
        )
