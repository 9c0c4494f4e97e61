"""The idle-fetch pause (kernel/idle_fetch.py) as a policy: a switch that records stop/start and
a clock the test moves, so every transition is checked without a broker."""

from __future__ import annotations

from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

from kernel.idle_fetch import IdleFetch, PauseAssignment


@dataclass
class Switch:
    calls: list[str] = field(default_factory=list)

    def stop(self) -> None:
        self.calls.append("stop")

    def start(self) -> None:
        self.calls.append("start")


@dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_pause_lasts_pause_s_then_fetching_starts_with_a_window() -> None:
    switch, clock = Switch(), Clock()
    idle = IdleFetch(switch, pause_s=0.2, window_s=0.1, clock=clock)
    assert idle.may_fetch() and idle.quiet  # never fetched: quiet at once
    idle.pause()
    assert idle.paused and switch.calls == ["stop"]
    clock.now += 0.19
    assert not idle.may_fetch() and switch.calls == ["stop"]
    clock.now += 0.01
    assert idle.may_fetch() and not idle.paused and switch.calls == ["stop", "start"]
    assert not idle.quiet  # the fetch window
    clock.now += 0.05
    idle.fetched(3)  # records: the window starts again
    clock.now += 0.09
    assert not idle.quiet
    clock.now += 0.01
    idle.fetched(0)
    assert idle.quiet


def test_moved_keeps_the_pause_until_something_was_written() -> None:
    switch, clock = Switch(), Clock()
    written = [False]
    asked: list[float] = []

    def moved() -> bool:
        asked.append(clock.now)
        return written[0]

    idle = IdleFetch(switch, pause_s=0.0, moved=moved, clock=clock)
    idle.pause()
    assert not idle.may_fetch() and not idle.may_fetch()
    assert len(asked) == 2 and switch.calls == ["stop"]  # no fetch: asked each time, still paused
    written[0] = True
    assert idle.may_fetch() and switch.calls == ["stop", "start"]
    assert idle.may_fetch() and len(asked) == 3  # fetching: not asked again


def test_reset_ends_a_pause_without_starting_the_switch() -> None:
    switch, clock = Switch(), Clock()
    idle = IdleFetch(switch, pause_s=10.0, window_s=0.1, clock=clock)
    idle.pause()
    idle.reset()  # the owner assigned its partitions again: it fetches already
    assert idle.may_fetch() and switch.calls == ["stop"] and not idle.quiet


def test_hold_stops_waits_and_starts() -> None:
    switch = Switch()
    idle = IdleFetch(switch, pause_s=0.02)
    waited: list[float] = []

    def wait(s: float) -> None:
        switch.calls.append("wait")
        waited.append(s)

    idle.hold(wait)
    assert switch.calls == ["stop", "wait", "start"] and waited == [0.02]


def _tp(name: str) -> TopicPartition:
    return TopicPartition(name, 0)


@dataclass
class Consumer:
    assigned: list[str] = field(default_factory=lambda: ["a", "b", "c"])
    paused: set[str] = field(default_factory=set)

    def assignment(self) -> list[TopicPartition]:
        return [_tp(t) for t in self.assigned]

    def pause(self, parts: list[TopicPartition], /) -> None:
        self.paused |= {tp.topic for tp in parts}

    def resume(self, parts: list[TopicPartition], /) -> None:
        self.paused -= {tp.topic for tp in parts}


def test_pause_assignment_resumes_only_what_may_be_resumed() -> None:
    c = Consumer()
    held = PauseAssignment(c, lambda: [_tp("a"), _tp("c")])
    held.stop()
    assert c.paused == {"a", "b", "c"}
    held.start()
    assert c.paused == {"b"}
    everything = PauseAssignment(c)
    everything.stop()
    everything.start()
    assert not c.paused
