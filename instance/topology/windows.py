"""Window specifications of the DSL (Kafka Streams' ``TimeWindows``, ``SlidingWindows``,
``SessionWindows``, ``JoinWindows``) and the keys windowed results carry (``Windowed``).

All times are epoch milliseconds. Windows are half-open ``[start, end)`` except session windows,
whose ``end`` is the timestamp of their last record (inclusive), as in Kafka Streams.
"""

from __future__ import annotations

from dataclasses import dataclass

from instance.serde.windowed import SessionWindow, TimeWindow, Windowed

__all__ = ["TimeWindows", "SlidingWindows", "SessionWindows", "JoinWindows", "EmitStrategy", "TimeWindow",
           "SessionWindow", "Windowed"]


def _check_non_negative(name: str, ms: int) -> None:
    if ms < 0:
        raise ValueError(f"{name} must not be negative (got {ms})")


@dataclass(frozen=True)
class TimeWindows:
    """Tumbling (``advance_ms == size_ms``) or hopping windows of ``size_ms``."""

    size_ms: int
    advance_ms: int
    grace_ms: int

    @staticmethod
    def of_size_with_no_grace(size_ms: int) -> TimeWindows:
        return TimeWindows.of_size_and_grace(size_ms, 0)

    @staticmethod
    def of_size_and_grace(size_ms: int, grace_ms: int) -> TimeWindows:
        if size_ms <= 0:
            raise ValueError(f"window size must be positive (got {size_ms})")
        _check_non_negative("grace", grace_ms)
        return TimeWindows(size_ms, size_ms, grace_ms)

    def advance_by(self, advance_ms: int) -> TimeWindows:
        if advance_ms <= 0 or advance_ms > self.size_ms:
            raise ValueError(f"advance must be in (0, size={self.size_ms}] (got {advance_ms})")
        return TimeWindows(self.size_ms, advance_ms, self.grace_ms)

    def windows_for(self, timestamp: int) -> list[int]:
        """Start times of the windows ``timestamp`` falls in, oldest first (none starts below 0)."""
        size, adv = self.size_ms, self.advance_ms
        start = (max(0, timestamp - size + adv) // adv) * adv
        return list(range(start, timestamp + 1, adv))

    def grace_period_ms(self) -> int:
        return self.grace_ms


@dataclass(frozen=True)
class SlidingWindows:
    """Windows of ``time_difference_ms`` that slide with the records (KIP-450): a window is
    created where a record starts one or ends one; both ends inclusive."""

    time_difference_ms: int
    grace_ms: int

    @staticmethod
    def of_time_difference_and_grace(time_difference_ms: int, grace_ms: int) -> SlidingWindows:
        if time_difference_ms <= 0:
            raise ValueError(f"time difference must be positive (got {time_difference_ms})")
        _check_non_negative("grace", grace_ms)
        return SlidingWindows(time_difference_ms, grace_ms)

    @staticmethod
    def of_time_difference_with_no_grace(time_difference_ms: int) -> SlidingWindows:
        return SlidingWindows.of_time_difference_and_grace(time_difference_ms, 0)

    def grace_period_ms(self) -> int:
        return self.grace_ms


@dataclass(frozen=True)
class SessionWindows:
    """Sessions: records of a key less than ``gap_ms`` apart belong to one session."""

    gap_ms: int
    grace_ms: int

    @staticmethod
    def of_inactivity_gap_and_grace(gap_ms: int, grace_ms: int) -> SessionWindows:
        if gap_ms <= 0:
            raise ValueError(f"inactivity gap must be positive (got {gap_ms})")
        _check_non_negative("grace", grace_ms)
        return SessionWindows(gap_ms, grace_ms)

    @staticmethod
    def of_inactivity_gap_with_no_grace(gap_ms: int) -> SessionWindows:
        return SessionWindows.of_inactivity_gap_and_grace(gap_ms, 0)

    def inactivity_gap(self) -> int:
        return self.gap_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms


@dataclass(frozen=True)
class JoinWindows:
    """A stream-stream join matches records whose timestamps differ by at most ``before_ms``
    (other earlier) / ``after_ms`` (other later)."""

    before_ms: int
    after_ms: int
    grace_ms: int

    @staticmethod
    def of_time_difference_and_grace(time_difference_ms: int, grace_ms: int) -> JoinWindows:
        _check_non_negative("time difference", time_difference_ms)
        _check_non_negative("grace", grace_ms)
        return JoinWindows(time_difference_ms, time_difference_ms, grace_ms)

    @staticmethod
    def of_time_difference_without_grace(time_difference_ms: int) -> JoinWindows:
        return JoinWindows.of_time_difference_and_grace(time_difference_ms, 0)

    def before(self, ms: int) -> JoinWindows:
        if ms + self.after_ms < 0:
            raise ValueError("the window must not be empty (before + after >= 0)")
        return JoinWindows(ms, self.after_ms, self.grace_ms)

    def after(self, ms: int) -> JoinWindows:
        if self.before_ms + ms < 0:
            raise ValueError("the window must not be empty (before + after >= 0)")
        return JoinWindows(self.before_ms, ms, self.grace_ms)

    def size(self) -> int:
        return self.before_ms + self.after_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms


@dataclass(frozen=True)
class EmitStrategy:
    """When a windowed aggregation forwards (KIP-825): on every update, or once per window when it
    closes (stream time passed its end plus grace)."""

    on_close: bool

    @staticmethod
    def on_window_update() -> EmitStrategy:
        return EmitStrategy(False)

    @staticmethod
    def on_window_close() -> EmitStrategy:
        return EmitStrategy(True)
