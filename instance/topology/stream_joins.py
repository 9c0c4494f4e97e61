"""Stream-stream joins (Kafka Streams' ``KStreamImplJoin`` / ``KStreamKStreamJoin``).

Each side's records go into that side's window store (retaining duplicates, retention = window
size + grace), then look up the other side's store for records within the join window: ``before``
ms earlier to ``after`` ms later (mirrored for the right side). A match is forwarded at once with
the later of the two timestamps. Left and outer joins do not forward an unmatched record eagerly
(the spurious-result fix of KIP-633): it waits in a shared "outer" store until stream time (shared
by both sides of the join in one task) closes its window, and is forwarded then with ``None`` for
the missing side, unless a match arrived in the meantime. A record so late that its window has
already closed is forwarded unmatched at once.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from instance.errors import TopologyException
from instance.state.spec import StoreSpec
from instance.topology.graph import DslGraph
from instance.topology.processor import BaseProcessor, ProcessorContext
from instance.topology.processors import PassThroughProcessor
from instance.topology.refs import StreamRef
from instance.topology.topology import source_topics
from instance.topology.windows import JoinWindows
from kernel.serdes import Serde

Joiner = Callable[[Any, Any], Any]
_TS = struct.Struct(">q")
_LEN = struct.Struct(">I")
_MAX = 2**63 - 1


@dataclass(frozen=True)
class StreamJoined:
    """Serdes and store name prefix of a stream-stream join (Kafka Streams' ``StreamJoined``)."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    other_value_serde: Serde | None = None
    store_name: str | None = None

    @staticmethod
    def with_(key_serde: Serde | None = None, value_serde: Serde | None = None,
              other_value_serde: Serde | None = None) -> StreamJoined:
        return StreamJoined(key_serde, value_serde, other_value_serde)


# -- the outer store's key and value --------------------------------------------------------------

class OuterKeySerde:
    """``(timestamp, is_left, key)`` <-> Kafka Streams' ``TimestampedKeyAndJoinSide`` bytes: the
    8-byte timestamp, one byte (1: left), the key; so the store iterates oldest first."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self.name = f"timestamped-key-and-join-side<{inner.name}>"

    def serialize(self, k: Any) -> bytes:
        kb = self.inner.serialize(k[2]) or b""
        return _TS.pack(k[0]) + (b"\x01" if k[1] else b"\x00") + kb

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        return (_TS.unpack_from(data)[0], data[8] == 1, self.inner.deserialize(data[9:]))

    def parse(self, text: str) -> Any:
        raise ValueError(f"{self.name} keys cannot be typed on a command line")


class SideValuesSerde:
    """``(is_left, [values])`` of one outer-store key: the side byte, then each value's bytes
    (left or right serde) behind a 4-byte length."""

    def __init__(self, left: Serde, right: Serde) -> None:
        self.left, self.right = left, right
        self.name = f"left-or-right-values<{left.name},{right.name}>"

    def serialize(self, v: Any) -> bytes | None:
        if v is None:
            return None
        is_left, values = v
        ser = (self.left if is_left else self.right).serialize
        parts = [b"\x01" if is_left else b"\x00"]
        for x in values:
            xb = ser(x) or b""
            parts.append(_LEN.pack(len(xb)))
            parts.append(xb)
        return b"".join(parts)

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        is_left = data[0] == 1
        de = (self.left if is_left else self.right).deserialize
        values, i = [], 1
        while i < len(data):
            n = _LEN.unpack_from(data, i)[0]
            values.append(de(data[i + 4:i + 4 + n]))
            i += 4 + n
        return (is_left, values)

    def parse(self, text: str) -> Any:
        raise ValueError(f"{self.name} values cannot be typed on a command line")


# -- processors -------------------------------------------------------------------------------------

class TimeTracker:
    """Stream time shared by both sides of one join in one task, and the oldest timestamp the
    outer store may hold (``min_time``: skips scanning it while nothing there can have closed)."""

    __slots__ = ("stream_time", "min_time")

    def __init__(self) -> None:
        self.stream_time = -1
        self.min_time = _MAX


class SharedTimeTrackers:
    """One :class:`TimeTracker` per task for one join (both join processors of a task share it)."""

    def __init__(self) -> None:
        self._by_task: dict[str, TimeTracker] = {}

    def get(self, task_id: str) -> TimeTracker:
        return self._by_task.setdefault(task_id, TimeTracker())

    def remove(self, task_id: str) -> None:
        self._by_task.pop(task_id, None)


class JoinWindowProcessor(BaseProcessor):
    """``KSTREAM-WINDOWED``: buffer this side's record in its window store, then pass it on."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self._record = context.record

    def process(self, key: Any, value: Any) -> None:
        if key is not None:
            self.store.put(key, value, self._record.timestamp)
        self.forward(key, value)


@dataclass(frozen=True)
class _JoinSpec:
    windows: JoinWindows
    joiner: Joiner
    #: this side's unmatched records are results (left side of left/outer, right side of outer)
    outer: bool
    is_left: bool
    other_store: str
    outer_store: str | None
    trackers: SharedTimeTrackers


class StreamStreamJoinProcessor(BaseProcessor):
    """One side of the join: look up the other side's window store for each record."""

    def __init__(self, spec: _JoinSpec) -> None:
        self.spec = spec
        w = spec.windows
        # the window as seen from this side: the right side looks the other way
        self.before, self.after = (w.before_ms, w.after_ms) if spec.is_left else (w.after_ms, w.before_ms)
        self.grace = w.grace_ms
        self.is_left = spec.is_left
        self.dropped_records = 0

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self._ctx = context
        self._record = context.record
        self.other = context.get_state_store(self.spec.other_store)
        name = self.spec.outer_store
        self.outer_store = None if name is None else context.get_state_store(name)
        self.tracker = self.spec.trackers.get(context.task_id)

    def close(self) -> None:
        self.spec.trackers.remove(self._ctx.task_id)

    def _join(self, this: Any, other: Any) -> Any:
        return self.spec.joiner(this, other) if self.is_left else self.spec.joiner(other, this)

    def process(self, key: Any, value: Any) -> None:
        ts = self._record.timestamp
        tracker = self.tracker
        if ts > tracker.stream_time:
            tracker.stream_time = ts
        outer = self.spec.outer
        if key is None or value is None:
            if outer and key is None and value is not None:  # KIP-962: unmatched, at once
                self.forward(key, self._join(value, None))
            else:
                self.dropped_records += 1
            return
        store = self.outer_store
        if store is not None and ts == tracker.stream_time:
            self._emit_closed_unmatched(store)
        time_from = max(0, ts - self.before)
        time_to = max(0, ts + self.after)
        matches = self.other.fetch(key, time_from, time_to)
        fwd = self._ctx.forward
        for other_ts, other_value in matches:
            if store is not None:  # the other record is matched now: it no longer waits
                okey = (other_ts, not self.is_left, key)
                if store.get(okey) is not None:
                    store.put(okey, None, ts)
            fwd(key, self._join(value, other_value), max(ts, other_ts))
        if outer and not matches:
            if store is None or time_to < tracker.stream_time:
                self.forward(key, self._join(value, None))
            else:
                if ts < tracker.min_time:
                    tracker.min_time = ts
                okey = (ts, self.is_left, key)
                waiting = store.get(okey)
                store.put(okey, (self.is_left, (waiting[1] if waiting else []) + [value]), ts)

    def _emit_closed_unmatched(self, store: Any) -> None:
        """Forward the waiting unmatched records whose join window stream time has closed."""
        tracker = self.tracker
        w = self.spec.windows
        if tracker.min_time + self.after + self.grace >= tracker.stream_time:
            return  # nothing waiting can have closed yet
        tracker.min_time = _MAX
        left_open = right_open = False
        fwd = self._ctx.forward
        joiner = self.spec.joiner
        for okey, (is_left, values) in list(store.all()):
            ts, _, key = okey
            tracker.min_time = ts
            if left_open and right_open:
                break
            # a left record waits for right records up to ``after`` later, a right one ``before``
            look = w.after_ms if is_left else w.before_ms
            if ts + look + self.grace >= tracker.stream_time:
                if is_left:
                    left_open = True
                else:
                    right_open = True
                continue
            for v in values:
                fwd(key, joiner(v, None) if is_left else joiner(None, v), ts)
            store.put(okey, None, ts)


# -- building ---------------------------------------------------------------------------------------

def stream_stream_join(b: DslGraph, left: StreamRef, right: StreamRef, joiner: Joiner, windows: Any, kind: str,
                       stream_joined: StreamJoined | None = None) -> StreamRef:
    """``kind``: "inner", "left" or "outer"."""
    if not isinstance(windows, JoinWindows):
        raise TopologyException("a stream-stream join needs JoinWindows (e.g. "
                                "JoinWindows.of_time_difference_and_grace(diff_ms, grace_ms))")
    sj = stream_joined or StreamJoined()
    ks = sj.key_serde or left.key_serde or right.key_serde or b.default_key_serde
    lvs = sj.value_serde or left.value_serde or b.default_value_serde
    rvs = sj.other_value_serde or right.value_serde or b.default_value_serde
    # co-partitioning: a side whose key changed is repartitioned first
    lnode, rnode = left.node, right.node
    if left.repartition_required:
        lnode = b.insert_repartition(lnode, f"{left.node}-left", ks, lvs)
    if right.repartition_required:
        rnode = b.insert_repartition(rnode, f"{right.node}-right", ks, rvs)
    topo = b.topology
    topo.add_copartition_group(source_topics(topo, lnode) | source_topics(topo, rnode))

    left_outer, right_outer = kind in ("left", "outer"), kind == "outer"
    this_window, other_window = b.new_name("KSTREAM-WINDOWED-"), b.new_name("KSTREAM-WINDOWED-")
    join_this = b.new_name("KSTREAM-OUTERTHIS-" if right_outer else "KSTREAM-JOINTHIS-")
    join_other = b.new_name("KSTREAM-OUTEROTHER-" if left_outer else "KSTREAM-JOINOTHER-")
    merge = b.new_name("KSTREAM-MERGE-")
    prefix = sj.store_name
    this_store = f"{prefix}-this-join-store" if prefix else f"{join_this}-store"
    other_store = f"{prefix}-other-join-store" if prefix else f"{join_other}-store"
    shared_store = None
    if left_outer:
        shared_store = (f"{prefix}-outer-shared-join-store" if prefix else
                        f"{join_this.replace('OUTERTHIS', 'OUTERSHARED').replace('JOINTHIS', 'OUTERSHARED')}-store")

    size, retention = windows.size(), windows.size() + windows.grace_ms

    def window_spec(name: str, vs: Serde) -> StoreSpec:
        return StoreSpec(name, ks, vs, caching_enabled=False, kind="window", retention_ms=retention,
                         window_size_ms=size, retain_duplicates=True)

    trackers = SharedTimeTrackers()
    left_spec = _JoinSpec(windows, joiner, left_outer, True, other_store, shared_store, trackers)
    right_spec = _JoinSpec(windows, joiner, right_outer, False, this_store, shared_store, trackers)
    topo.add_processor(this_window, lambda: JoinWindowProcessor(this_store), lnode)
    topo.add_processor(other_window, lambda: JoinWindowProcessor(other_store), rnode)
    topo.add_processor(join_this, lambda: StreamStreamJoinProcessor(left_spec), this_window)
    topo.add_processor(join_other, lambda: StreamStreamJoinProcessor(right_spec), other_window)
    topo.add_processor(merge, PassThroughProcessor, join_this, join_other)
    topo.add_state_store(window_spec(this_store, lvs), this_window, join_other)
    topo.add_state_store(window_spec(other_store, rvs), other_window, join_this)
    if shared_store is not None:
        topo.add_state_store(StoreSpec(shared_store, OuterKeySerde(ks), SideValuesSerde(lvs, rvs),
                                       caching_enabled=False), join_this, join_other)
    return StreamRef(merge, ks, None)
