"""The processors of windowed aggregations (Kafka Streams' ``KStreamWindowAggregate``,
``KStreamSessionWindowAggregate``, ``KStreamSlidingWindowAggregate``).

Each keeps its own observed stream time (the largest timestamp it has seen, as Kafka Streams'
window processors do), so a window closes on stream time, never on wall-clock time: a record whose
window ended more than the grace period before stream time is dropped and counted
(``dropped_records``). Results reach children as ``(Windowed(key, window), aggregate)``: on every
update through the store's cache (``EmitStrategy.on_window_update``), or once per window when
stream time closes it (``on_window_close``).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from instance.serde.windowed import SessionWindow, TimeWindow, Windowed
from instance.state.change import Change
from instance.topology.processor import BaseProcessor, ProcessorContext
from instance.topology.processors import OldValues
from instance.topology.windows import SessionWindows, SlidingWindows, TimeWindows

Initializer = Callable[[], Any]
Aggregator = Callable[[Any, Any, Any], Any]
Merger = Callable[[Any, Any, Any], Any]


class _Closing:
    """Windows that may still close, by end: emit-on-close pops those stream time closed
    instead of scanning the store on every record. Filled from the store on first use (after a
    restart it holds what was restored), then fed by every put; a window a put replaced or a
    merge removed is checked against the store when it pops."""

    def __init__(self, key_bytes: Callable[[Any], bytes | None]) -> None:
        self._kb = key_bytes
        self._heap: list[tuple[int, int, bytes | None, int, Any]] | None = None
        self._seq = itertools.count()

    def add(self, key: Any, start: int, end: int) -> None:
        if self._heap is not None:
            heapq.heappush(self._heap, (end, start, self._kb(key), next(self._seq), key))

    def closed(self, lower: int, close_time: int, stored: Callable[[], Iterable[tuple[Any, int, int]]]
               ) -> Iterator[tuple[Any, int, int]]:
        """``(key, start, end)`` of each window with ``lower <= end < close_time``, once, by end,
        start, key bytes (Kafka Streams' time-first store order); ``stored()`` lists the store's
        windows the first time."""
        heap = self._heap
        if heap is None:
            seq, kb = self._seq, self._kb
            heap = self._heap = [(end, start, kb(key), next(seq), key) for key, start, end in stored()]
            heapq.heapify(heap)
        last = None
        while heap and heap[0][0] < close_time:
            entry = heapq.heappop(heap)
            if entry[0] < lower or entry[:3] == last:  # emitted before, or put more than once
                continue
            last = entry[:3]
            yield entry[4], entry[1], entry[0]


class _WindowedAggregateProcessor(BaseProcessor):
    """Store access, stream time, drop counting, and forwarding from the store's flush listener."""

    store_name: str
    emit_on_close: bool
    #: the result table's flag (set by the DSL with ``with_old_values``)
    old_values: OldValues | None = None

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self._record = context.record
        self.observed_stream_time = -1
        self.dropped_records = 0
        self._last_emit_close = -1
        self._closing = _Closing(self.store.spec.key_serde.serialize)
        self._fwd = context.forward
        self.store.set_flush_listener(None if self.emit_on_close else self._on_change)

    def _window(self, typed_key: Any) -> Any:
        raise NotImplementedError

    def _on_change(self, typed_key: Any, change: Change, timestamp: int) -> None:
        # Change(None, None) too (a reduce of a None value into a new window): Kafka Streams
        # forwards it from an uncached store; a caching store drops it when it flushes. The old
        # value only when downstream asked for it (the table's OldValues flag)
        new, old = change
        unwrap = self._unwrap
        flag = self.old_values
        self._fwd(Windowed(typed_key[0], self._window(typed_key)),
                  Change(unwrap(new), unwrap(old) if flag is not None and flag.enabled else None), timestamp)

    @staticmethod
    def _unwrap(stored: Any) -> Any:
        return stored


class _TimestampedWindowProcessor(_WindowedAggregateProcessor):
    """Time and sliding windows: a timestamped window store, windows ``[start, start + size)``."""

    size_ms: int

    def _window(self, typed_key: Any) -> Any:
        start = typed_key[1]
        return TimeWindow(start, start + self.size_ms)

    @staticmethod
    def _unwrap(stored: Any) -> Any:
        return None if stored is None else stored[0]


class TimeWindowAggregateProcessor(_TimestampedWindowProcessor):
    """Tumbling and hopping windows: each record updates every window it falls in."""

    def __init__(self, store_name: str, windows: TimeWindows, initializer: Initializer,
                 aggregator: Aggregator, emit_on_close: bool) -> None:
        self.store_name = store_name
        self.windows = windows
        self.size_ms = windows.size_ms
        self.initializer = initializer
        self.aggregator = aggregator
        self.emit_on_close = emit_on_close
        #: start of the newest window forwarded on close (none yet: one advance before 0)
        self._newest_emitted = -windows.advance_ms

    def process(self, key: Any, value: Any) -> None:
        # a None value is aggregated (the aggregator gets it), as Kafka Streams' time-window
        # aggregation does; only a None key is dropped (sliding windows drop both)
        if key is None:
            self.dropped_records += 1
            return
        ts = self._record.timestamp
        if ts > self.observed_stream_time:
            self.observed_stream_time = ts
        close_time = self.observed_stream_time - self.windows.grace_ms
        store, size = self.store, self.size_ms
        cached = store.spec.caching_enabled
        for start in self.windows.windows_for(ts):
            if start + size <= close_time:
                self.dropped_records += 1
                continue
            # a window retention passed but not yet closed for this processor (a cogroup's other
            # streams moved the shared store's time on): Kafka Streams' caching store still
            # serves it from its cache, its uncached store does not
            old = store.fetch_timestamped(key, start, cached)
            if old is None:
                agg, new_ts = self.initializer(), ts
            else:
                agg, new_ts = old[0], max(ts, old[1])
            store.put(key, self.aggregator(key, value, agg), start, new_ts)
        if self.emit_on_close:
            self._emit_newly_closed(close_time)

    def _emit_newly_closed(self, close_time: int) -> None:
        """Windows ``[start, end)`` close when ``end <= close_time``; starts are multiples of the
        advance, so the store is read only when stream time closed a window not emitted yet
        (Kafka Streams' ``shouldRangeFetch``), once per advance, not once per record."""
        upper = close_time - self.size_ms
        if upper < 0:
            return
        adv = self.windows.advance_ms
        newest_closed = upper // adv * adv
        if newest_closed <= self._newest_emitted:
            return
        fwd = self._fwd
        # a window that expired before stream time closed it (stream time jumped past its end,
        # grace and retention at once) is not forwarded from an uncached store, as in Kafka
        # Streams; its caching store still serves it from the cache (docs/architecture.md)
        cached = self.store.spec.caching_enabled
        for windowed, vt in self.store.fetch_all_timestamped(self._newest_emitted + adv, newest_closed,
                                                             clamp=not cached):
            fwd(windowed, Change(vt[0], None), vt[1])
        self._newest_emitted = newest_closed


class SessionWindowAggregateProcessor(_WindowedAggregateProcessor):
    """Sessions: a record opens a session or extends (and merges) those within the gap."""

    def __init__(self, store_name: str, windows: SessionWindows, initializer: Initializer,
                 aggregator: Aggregator, merger: Merger, emit_on_close: bool) -> None:
        self.store_name = store_name
        self.windows = windows
        self.initializer = initializer
        self.aggregator = aggregator
        self.merger = merger
        self.emit_on_close = emit_on_close


    def _window(self, typed_key: Any) -> Any:
        return SessionWindow(typed_key[1], typed_key[2])

    def process(self, key: Any, value: Any) -> None:
        if key is None:  # a None value is aggregated, as Kafka Streams' session aggregation does
            self.dropped_records += 1
            return
        ts = self._record.timestamp
        if ts > self.observed_stream_time:
            self.observed_stream_time = ts
        gap = self.windows.gap_ms
        # a session can still grow until stream time passes its end by the gap, then the grace
        close_time = self.observed_stream_time - gap - self.windows.grace_ms
        store = self.store
        merged = store.find_sessions(key, ts - gap, ts + gap)
        agg = self.initializer()
        start = end = ts
        for session, session_agg in merged:
            agg = self.merger(key, agg, session_agg)
            start = min(start, session.window.start)
            end = max(end, session.window.end)
        if end < close_time:
            self.dropped_records += 1
            return
        if (start, end) != (ts, ts):  # merged: the old sessions go (tombstones downstream)
            for session, _ in merged:
                store.remove(session)
        agg = self.aggregator(key, value, agg)
        store.put(Windowed(key, SessionWindow(start, end)), agg)
        if self.emit_on_close:
            self._closing.add(key, start, end)
            self._emit_closed(close_time)

    def _emit_closed(self, close_time: int) -> None:
        """Sessions whose end passed ``close_time`` since the last emit, by end, key, start
        (a session merged away meanwhile is no longer in the store: skipped)."""
        if self._last_emit_close >= 0 and self._last_emit_close >= close_time:
            return
        fwd, fetch = self._fwd, self.store.fetch_session

        def stored() -> Iterator[tuple[Any, int, int]]:
            return ((s.key, s.window.start, s.window.end) for s, _ in self.store.all())
        for key, start, end in self._closing.closed(self._last_emit_close, close_time, stored):
            agg = fetch(key, start, end)
            if agg is not None:
                fwd(Windowed(key, SessionWindow(start, end)), Change(agg, None), end)
        self._last_emit_close = close_time


class SlidingWindowAggregateProcessor(_TimestampedWindowProcessor):
    """Sliding windows (KIP-450), as Kafka Streams builds them: each record has a left window
    ``[t - diff, t]`` and, when a later record exists within ``diff``, a right window
    ``[t + 1, t + 1 + diff]``; only windows holding records exist. Both ends are inclusive; the
    windows are stored by start (``TimeWindow(start, start + diff)``)."""

    def __init__(self, store_name: str, windows: SlidingWindows, initializer: Initializer,
                 aggregator: Aggregator, emit_on_close: bool) -> None:
        self.store_name = store_name
        self.windows = windows
        self.size_ms = windows.time_difference_ms
        self.initializer = initializer
        self.aggregator = aggregator
        self.emit_on_close = emit_on_close

    def process(self, key: Any, value: Any) -> None:
        if key is None or value is None:
            self.dropped_records += 1
            return
        ts = self._record.timestamp
        if ts > self.observed_stream_time:
            self.observed_stream_time = ts
        close_time = self.observed_stream_time - self.windows.grace_ms
        diff = self.size_ms
        if ts + 1 + diff <= close_time:  # even its right window has closed
            self.dropped_records += 1
        elif ts < diff:
            self._process_early(key, value, ts, close_time)
        else:
            self._process(key, value, ts, close_time)
        if self.emit_on_close:
            self._emit_closed(close_time)

    def _emit_closed(self, close_time: int) -> None:
        """``on_window_close``: forward every window stream time closed since the last emit
        (windows ``[start, end]`` close when ``end < close_time``), with the timestamp of its
        latest record."""
        if self._last_emit_close >= 0 and self._last_emit_close >= close_time:
            return
        diff = self.size_ms
        if close_time - diff - 1 < 0:  # no window has closed yet
            return
        fwd, fetch = self._fwd, self.store.fetch_timestamped

        def stored() -> Iterator[tuple[Any, int, int]]:
            return ((w.key, w.window.start, w.window.start + diff)
                    for w, _ in self.store.fetch_all_timestamped(0, 2**63 - 1))
        for key, start, _ in self._closing.closed(self._last_emit_close, close_time, stored):
            vt = fetch(key, start)  # expired before it closed: not emitted, cached or not (as Kafka Streams)
            if vt is not None:
                fwd(Windowed(key, TimeWindow(start, start + diff)), Change(vt[0], None), vt[1])
        self._last_emit_close = close_time

    def _process(self, key: Any, value: Any, ts: int, close_time: int) -> None:
        diff = self.size_ms
        starts: set[int] = set()
        left_agg = right_agg = None
        left_exists = right_exists = False
        previous_ts: int | None = None
        # newest window first, as Kafka Streams does over a store that iterates backwards (its
        # updates are forwarded in this order)
        for start, vt in reversed(self.store.fetch_timestamped_range(key, max(0, ts - 2 * diff), ts + 1)):
            starts.add(start)
            end = start + diff
            if start == ts + 1:
                right_exists = True
            elif end > ts:
                if right_agg is None:
                    right_agg = vt
                self._update(key, value, start, vt, close_time, ts)
            elif end == ts:
                left_exists = True
                self._update(key, value, start, vt, close_time, ts)
                if vt[1] >= ts:  # a record at this time already made every window there is
                    return
                previous_ts = vt[1]
            else:
                left_agg, previous_ts = vt, vt[1]
                break
        if previous_ts is not None and previous_ts + 1 not in starts and previous_ts + 1 + diff >= ts:
            # the previous record's right window now holds this record
            self._update(key, value, previous_ts + 1, (self.initializer(), ts), close_time, ts)
        if not left_exists:
            if previous_ts is not None and ts - diff <= previous_ts:
                assert left_agg is not None
                base = (left_agg[0], ts)
            else:
                base = (self.initializer(), ts)
            self._update(key, value, ts - diff, base, close_time, ts)
        if not right_exists and right_agg is not None and right_agg[1] > ts:
            self._create_right(key, ts, right_agg)

    def _process_early(self, key: Any, value: Any, ts: int, close_time: int) -> None:
        """A record before ``diff``: its left window would start below 0, so the records there
        share the window ``[0, diff]``."""
        starts: set[int] = set()
        combined = right_agg = None
        right_exists = False
        previous_ts: int | None = None
        for start, vt in self.store.fetch_timestamped_range(key, 0, ts + 1):
            starts.add(start)
            if start == 0:
                combined = vt
                if vt[1] < ts:
                    previous_ts = vt[1]
            elif start <= ts:
                right_agg = vt
                self._update(key, value, start, vt, close_time, ts)
            else:  # start == ts + 1
                right_exists = True
        if right_agg is None and combined is not None and combined[1] > ts:
            right_agg = combined
        if not right_exists and right_agg is not None and right_agg[1] > ts:
            self._create_right(key, ts, right_agg)
        if previous_ts is not None and previous_ts + 1 not in starts:
            self._update(key, value, previous_ts + 1, (self.initializer(), ts), close_time, ts)
        self._update(key, value, 0, combined if combined is not None else (self.initializer(), ts),
                     close_time, ts)

    def _update(self, key: Any, value: Any, start: int, vt: Any, close_time: int, ts: int) -> None:
        """Add the record to the window at ``start`` (aggregate and timestamp ``vt``)."""
        if start + self.size_ms < close_time:
            self.dropped_records += 1
            return
        old_agg, old_ts = vt
        new_ts = ts if old_agg is None else max(ts, old_ts)
        self.store.put(key, self.aggregator(key, value, old_agg), start, new_ts)
        if self.emit_on_close:
            self._closing.add(key, start, start + self.size_ms)

    def _create_right(self, key: Any, ts: int, right_agg: Any) -> None:
        """This record's right window: the later records' aggregate, without this record."""
        self.store.put(key, right_agg[0], ts + 1, right_agg[1])
        if self.emit_on_close:
            self._closing.add(key, ts + 1, ts + 1 + self.size_ms)
