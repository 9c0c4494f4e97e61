"""Punctuation in the real runtime (a KafkaStreams client on the dev broker): wall-clock
punctuation fires from the stream thread's loop with no input arriving, stream-time punctuation
follows the records' timestamps as in Kafka Streams, and neither ever overlaps ``process``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from instance.local.cluster import ensure_topic
from instance.runtime.kafka_streams import KafkaStreams
from instance.runtime.states import State
from instance.serde import StringSerde
from instance.topology import ContextualProcessor, ProcessorContext, PunctuationType, Record, Topology

pytestmark = pytest.mark.integration

S = StringSerde()


class _Ticker(ContextualProcessor):
    """Forwards ("wall", n) every 200 ms of wall-clock time and ("stream", t) every 1000 ms of
    stream time; notes any overlap of process and punctuate, and the threads they ran on."""

    def __init__(self, seen: dict[str, list[object]]) -> None:
        self.seen = seen
        self.busy = False
        self.ticks = 0

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        context.schedule(200, PunctuationType.WALL_CLOCK_TIME, self.wall)
        context.schedule(1000, PunctuationType.STREAM_TIME, self.stream)

    def _enter(self) -> None:
        if self.busy:
            self.seen["overlaps"].append(time.monotonic())
        self.busy = True
        self.seen["threads"].append(threading.get_ident())

    def wall(self, now: int) -> None:
        self._enter()
        self.ticks += 1
        self.context().forward(Record("wall", str(self.ticks), now))
        self.busy = False

    def stream(self, ts: int) -> None:
        self._enter()
        self.context().forward(Record("stream", str(ts), ts))
        self.busy = False

    def process(self, record: Record) -> None:
        self._enter()
        time.sleep(0.001)  # widen the window an overlap would need
        self.busy = False


def _read(bootstrap: str, topic: str, until: object, timeout: float) -> list[tuple[str, str, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{time.time_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out: list[tuple[str, str, int]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not until(out):  # type: ignore[operator]
            for m in c.consume(100, timeout=0.3):
                if m.error() is None:
                    out.append((m.key().decode(), m.value().decode(), m.timestamp()[1]))
    finally:
        c.close()
    return out


def test_wall_clock_and_stream_time_punctuation_on_the_stream_thread(bootstrap: str, tmp_path: Path,
                                                                       unique: str) -> None:
    src, out = f"punct-in-{unique}", f"punct-out-{unique}"
    ensure_topic(bootstrap, src, 1)
    ensure_topic(bootstrap, out, 1)
    seen: dict[str, list[object]] = {"overlaps": [], "threads": []}
    t = Topology()
    t.add_source("source", src, key_serde=S, value_serde=S)
    t.add_processor("ticker", lambda: _Ticker(seen), "source")
    t.add_sink("sink", out, "ticker", key_serde=S, value_serde=S)
    streams = KafkaStreams(t, {"application.id": f"punct-{unique}", "bootstrap.servers": bootstrap,
                               "state.dir": str(tmp_path), "commit.interval.ms": "200"})
    streams.start()
    try:
        assert streams.wait_for_state({State.RUNNING}, 90), streams.state
        # no input yet: wall-clock punctuation alone
        got = _read(bootstrap, out, lambda rs: sum(k == "wall" for k, _, _ in rs) >= 3, 30)
        assert [v for k, v, _ in got if k == "wall"][:3] == ["1", "2", "3"]
        assert not any(k == "stream" for k, _, _ in got)
        p = Producer({"bootstrap.servers": bootstrap})
        # recent timestamps: the dev broker drops records older than the topic's retention (7 days)
        # at once, which for 1970 timestamps is all of them
        base = (int(time.time() * 1000) - 3_600_000) // 1000 * 1000
        for ts in (1000, 1500, 2600, 1200, 5000):
            p.produce(src, b"v", b"k", timestamp=base + ts)
        assert p.flush(30) == 0
        got = _read(bootstrap, out, lambda rs: sum(k == "stream" for k, _, _ in rs) >= 3, 30)
    finally:
        streams.close()
    stream = [(str(int(v) - base), ts - base) for k, v, ts in got if k == "stream"]
    # as Kafka Streams: first at the first record's time, then on each advance past a multiple of
    # 1000; the out-of-order 1200 does not move stream time back
    assert stream == [("1000", 1000), ("2600", 2600), ("5000", 5000)]
    assert seen["overlaps"] == []
    assert len(set(seen["threads"])) == 1  # process and both punctuations: one stream thread
