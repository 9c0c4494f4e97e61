"""loadtest.loadgen's parts without a service: key distributions, what the recorder makes of
answers (staleness flagged and unflagged), open-loop latency counted from the intended start
(a stall is not hidden), closed-loop concurrency, bad specs, and the plot file."""

from __future__ import annotations

import asyncio
import collections
import time
from pathlib import Path

import pytest

from loadtest.loadgen.drive import LoadSpec, LoadSpecError, run_load
from loadtest.loadgen.keys import KeyChooser, KeyError_
from loadtest.loadgen.plot import plot
from loadtest.loadgen.recorder import Answer, Recorder
from loadtest.loadgen.targets import QueryFailed


def test_zipf_makes_the_first_keys_hot_and_uniform_does_not() -> None:
    keys = [f"k{i}" for i in range(100)]
    z, u = KeyChooser(keys, 1.2, seed=3), KeyChooser(keys, 0.0, seed=3)
    zipf = collections.Counter(z.next() for _ in range(20_000))
    uniform = collections.Counter(u.next() for _ in range(20_000))
    assert zipf["k0"] > 5 * zipf["k9"] > 0
    assert zipf["k0"] / 20_000 > 0.2
    assert max(uniform.values()) < 2 * min(uniform.values())
    with pytest.raises(KeyError_):
        KeyChooser([], 1.0)
    with pytest.raises(KeyError_):
        KeyChooser(keys, -1.0)


def test_recorder_counts_flagged_and_unflagged_stale_answers() -> None:
    rec = Recorder()
    t = rec.started_wall
    rec.answered("a", Answer(5, False, 0), 0.001, t + 0.1)
    rec.answered("a", Answer(9, False, 0), 0.001, t + 1.2)
    rec.answered("a", Answer(5, True, 4), 0.002, t + 3.2)  # flagged, 2 s older than the value 9
    rec.answered("a", Answer(7, False, 0), 0.003, t + 3.5)  # went back without the flag
    rec.failed("UNAVAILABLE REBALANCING", 0.5, t + 3.6)
    s = rec.summary()
    assert (s["requests"], s["ok"], s["failed"]) == (5, 4, 1)
    assert s["errors"] == {"UNAVAILABLE REBALANCING": 1}
    assert (s["stale_flagged"], s["stale_unflagged"], s["max_stale_lag_records"]) == (1, 1, 4)
    assert s["max_staleness_s"] == pytest.approx(2.0, abs=0.01)
    assert s["latency_ms"]["max"] == pytest.approx(500, rel=0.01)
    rows = rec.timeline()
    assert [r["ok"] for r in rows] == [1, 1, 0, 2]
    assert rows[3]["errors"] == 1 and rows[3]["stale"] == 1


class SlowOnce:
    """Answers in 1 ms, except the first request after ``stall_at`` s, which takes ``stall`` s."""

    def __init__(self, stall_at: float, stall: float) -> None:
        self.t0 = time.monotonic()
        self.stall_at, self.stall = stall_at, stall
        self.stalled = False
        self.in_flight = self.max_in_flight = 0

    async def get(self, key: str) -> Answer:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if not self.stalled and time.monotonic() - self.t0 > self.stall_at:
                self.stalled = True
                await asyncio.sleep(self.stall)
            else:
                await asyncio.sleep(0.001)
            if key == "bad":
                raise QueryFailed("NOT_FOUND")
            return Answer(1, False, 0)
        finally:
            self.in_flight -= 1

    async def close(self) -> None:
        pass


def test_open_loop_counts_latency_from_the_intended_start() -> None:
    """One in-flight slot and a 0.5 s stall: the requests due during the stall wait for the slot,
    and their latency includes that wait (what users would have seen), so p99 is near 0.5 s, not 1 ms."""
    target = SlowOnce(stall_at=0.3, stall=0.5)
    rec = asyncio.run(run_load(target, LoadSpec("open", rate=100, duration_s=1.5, max_in_flight=1),
                               KeyChooser(["a"]), Recorder()))
    lat = rec.latency_ms()
    assert 130 <= rec.total <= 151  # the schedule is kept: about rate x duration requests
    assert target.max_in_flight == 1
    assert lat["max"] >= 450
    # about 50 requests were due during the stall; each waited part of it
    assert lat["p90"] >= 100, lat


def test_closed_loop_keeps_n_requests_in_flight_and_counts_errors_by_status() -> None:
    target = SlowOnce(stall_at=99, stall=0)
    rec = asyncio.run(run_load(target, LoadSpec("closed", workers=4, duration_s=0.5),
                               KeyChooser(["a", "bad"], seed=2), Recorder()))
    assert target.max_in_flight == 4
    assert rec.ok > 20 and rec.errors["NOT_FOUND"] > 20


def test_bad_specs_are_refused() -> None:
    for kwargs in ({"mode": "both"}, {"mode": "open", "rate": 0}, {"mode": "closed", "workers": 0},
                   {"mode": "open", "duration_s": -1}):
        with pytest.raises(LoadSpecError):
            LoadSpec(**kwargs)  # type: ignore[arg-type]


def test_plot_writes_a_small_png(tmp_path: Path) -> None:
    rec = Recorder()
    for i in range(50):
        rec.answered("a", Answer(i, i % 7 == 0, 1), 0.001 * (i % 5 + 1), rec.started_wall + i / 10)
    path = plot(rec.timeline(), [{"t": 2.0, "event": "kill", "pod": "iqmesh-2"}], tmp_path / "p.png", "t")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 150_000
