"""What the answers tell: latencies in an HDR histogram (overall) and per second of the run,
errors by status, and staleness: answers flagged stale, answers that went back in time without
the flag (for keys whose values only grow, such as counts), the largest lag a stale answer
reported and how old the freshest value it missed was."""

from __future__ import annotations

import bisect
import collections
import math
import time
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

#: latencies are recorded in microseconds, from 1 µs to 10 minutes, 3 significant digits
LOWEST_US, HIGHEST_US, DIGITS = 1, 600_000_000, 3
PERCENTILES = (50.0, 90.0, 99.0, 99.9)


@dataclass(frozen=True)
class Answer:
    """One successful query, as the recorder needs it."""

    value: int | None
    stale: bool
    #: changelog records the serving replica was behind (-1 unknown)
    lag: int
    served_by: str = ""
    #: why a stale answer is stale: the serving replica's role and its instance's state
    replica: str = ""


@dataclass
class _Second:
    ok: int = 0
    errors: int = 0
    stale: int = 0
    latencies_ms: list[float] = field(default_factory=list)


class Recorder:
    """Fed by the drivers (one asyncio loop: no locking). ``monotonic_values``: a key's value
    never decreases (counts), so a fresh answer below an earlier fresh one is stale unflagged."""

    def __init__(self, monotonic_values: bool = True) -> None:
        self.monotonic_values = monotonic_values
        self.started_wall = time.time()
        self.hist = HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)
        self.ok = 0
        self.errors: collections.Counter[str] = collections.Counter()
        #: status -> the first error's details (what to look up in the logs)
        self.error_examples: dict[str, str] = {}
        self.stale_flagged = 0
        self.stale_unflagged = 0
        self.unflagged_examples: list[str] = []
        self.stale_examples: list[str] = []
        self.max_stale_lag = 0
        self.max_staleness_s = 0.0
        self.seconds: dict[int, _Second] = collections.defaultdict(_Second)
        #: when the schedule ended (:meth:`end`): the second it falls in is partial (see timeline)
        self.ended_wall: float | None = None
        #: key -> fresh (unflagged) values seen, increasing, and when each was first seen
        self._fresh: dict[str, tuple[list[int], list[float]]] = {}

    def _second(self, wall: float) -> _Second:
        return self.seconds[int(wall - self.started_wall)]

    def latency(self, seconds: float, wall: float) -> None:
        us = min(HIGHEST_US, max(LOWEST_US, round(seconds * 1e6)))
        self.hist.record_value(us)
        self._second(wall).latencies_ms.append(seconds * 1e3)

    def answered(self, key: str, answer: Answer, latency_s: float, wall: float | None = None) -> None:
        wall = time.time() if wall is None else wall
        self.latency(latency_s, wall)
        self.ok += 1
        sec = self._second(wall)
        sec.ok += 1
        value = answer.value if answer.value is not None else 0
        if answer.stale:
            self.stale_flagged += 1
            sec.stale += 1
            if len(self.stale_examples) < 5:
                self.stale_examples.append(f"{key!r} at +{wall - self.started_wall:.2f}s from {answer.served_by}"
                                           f" ({answer.replica}, lag {answer.lag})")
            self.max_stale_lag = max(self.max_stale_lag, answer.lag)
            self.max_staleness_s = max(self.max_staleness_s, self._age_of(key, value, wall))
            return
        if not self.monotonic_values:
            return
        values, times = self._fresh.setdefault(key, ([], []))
        if values and value < values[-1]:
            self.stale_unflagged += 1
            if len(self.unflagged_examples) < 5:
                self.unflagged_examples.append(f"{key!r}={value} after {values[-1]} (served by {answer.served_by})")
        elif not values or value > values[-1]:
            values.append(value)
            times.append(wall)

    def _age_of(self, key: str, value: int, wall: float) -> float:
        """How long a fresher value than ``value`` had been known (a lower bound of the answer's
        staleness: 0 when no fresher value was seen yet)."""
        values, times = self._fresh.get(key, ([], []))
        i = bisect.bisect_right(values, value)
        return max(0.0, wall - times[i]) if i < len(values) else 0.0

    def failed(self, status: str, latency_s: float, wall: float | None = None, detail: str = "") -> None:
        wall = time.time() if wall is None else wall
        self.latency(latency_s, wall)
        self.errors[status] += 1
        self.error_examples.setdefault(status, detail[:300])
        self._second(wall).errors += 1

    def end(self, wall: float | None = None) -> None:
        """The schedule ended (no request starts after ``wall``): the second it falls in and any
        after it are marked partial in the timeline."""
        self.ended_wall = time.time() if wall is None else wall

    # -- results ----------------------------------------------------------------------------------
    @property
    def total(self) -> int:
        return self.ok + sum(self.errors.values())

    def latency_ms(self) -> dict[str, float]:
        out = {f"p{p:g}": self.hist.get_value_at_percentile(p) / 1e3 for p in PERCENTILES}
        out["max"] = self.hist.get_max_value() / 1e3
        out["mean"] = self.hist.get_mean_value() / 1e3
        return {k: round(v, 3) for k, v in out.items()}

    def timeline(self) -> list[dict[str, Any]]:
        """One row per second of the run (``t``: its start): answers, errors, stale, p50/p99/max
        latency (ms); ``partial`` once :meth:`end` was called, for the second the schedule ended in
        and any after it (answers still arriving): they were covered only in part, so a plot leaves
        them out rather than draw a drop (the rows still add up to every request)."""
        whole = math.inf if self.ended_wall is None else math.floor(self.ended_wall - self.started_wall)
        rows = []
        for s in range(max(self.seconds, default=-1) + 1):
            sec = self.seconds.get(s, _Second())
            lat = sorted(sec.latencies_ms)
            rows.append({"t": s, "ok": sec.ok, "errors": sec.errors, "stale": sec.stale,
                         "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99), "max_ms": lat[-1] if lat else None,
                         "partial": s >= whole})
        return rows

    def summary(self) -> dict[str, Any]:
        total = self.total
        return {
            "started_wall": self.started_wall, "requests": total, "ok": self.ok,
            "failed": sum(self.errors.values()), "errors": dict(self.errors.most_common()),
            "error_examples": self.error_examples,
            "latency_ms": self.latency_ms() if total else {},
            "stale_flagged": self.stale_flagged,
            "stale_fraction": round(self.stale_flagged / self.ok, 5) if self.ok else 0.0,
            "stale_unflagged": self.stale_unflagged, "unflagged_examples": self.unflagged_examples,
            "stale_examples": self.stale_examples,
            "max_stale_lag_records": self.max_stale_lag, "max_staleness_s": round(self.max_staleness_s, 3),
        }


def _pct(sorted_values: list[float], p: float) -> float | None:
    if not sorted_values:
        return None
    i = min(len(sorted_values) - 1, max(0, math.ceil(p / 100 * len(sorted_values)) - 1))
    return round(sorted_values[i], 3)
