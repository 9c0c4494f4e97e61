"""The instances-topic follower (kernel/instances_follower.py) against a consumer double at its
``consumer`` seam: it reads only when the end offset moved, applies records in order (removals,
the instance's own record skipped, malformed ones skipped), reads once to the end (the snapshot)
past transaction markers, and fails a one-shot read that cannot finish."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kernel.instance_state import State
from kernel.instances_follower import InstancesFollower, ViewWriter, instances_topic
from kernel.metadata import ClusterView, InstanceInfo

APP = "app"


@dataclass
class _Msg:
    _offset: int
    _key: bytes | None
    _value: bytes | None
    _error: KafkaError | None = None

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> KafkaError | None:
        return self._error


@dataclass
class FakeConsumer:
    """One partition: a log, its end offset (may be above the last record: markers), pause state."""

    log: list[_Msg] = field(default_factory=list)
    end: int = 0
    eof: bool = False
    paused: bool = False
    next_offset: int = 0
    consumes: int = 0
    probes: int = 0
    closed: bool = False
    broker_away: bool = False
    assigned: list[TopicPartition] = field(default_factory=list)

    def write(self, key: str, value: bytes | None) -> None:
        self.log.append(_Msg(self.end, key.encode(), value))
        self.end += 1

    def assign(self, parts: list[TopicPartition]) -> None:
        self.assigned = parts

    def assignment(self) -> list[TopicPartition]:
        return self.assigned

    def pause(self, parts: list[TopicPartition]) -> None:
        self.paused = True

    def resume(self, parts: list[TopicPartition]) -> None:
        self.paused = False

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        assert tp.topic == instances_topic(APP)
        self.probes += 1
        if self.broker_away:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get watermark offsets"))
        return 0, self.end

    def consume(self, num_messages: int, timeout: float) -> list[_Msg]:
        assert not self.paused, "fetched while paused"
        self.consumes += 1
        out = [m for m in self.log if m.offset() >= self.next_offset][:num_messages]
        if out:
            self.next_offset = out[-1].offset() + 1
        elif self.eof and self.next_offset < self.end:
            self.next_offset = self.end  # only markers left: the end-of-partition event
            return [_Msg(self.end, None, None, KafkaError(KafkaError._PARTITION_EOF))]
        return out

    def close(self) -> None:
        self.closed = True


def _info(iid: str, state: State = State.RUNNING) -> bytes:
    return InstanceInfo(iid, f"{iid}:1", state).to_json()


def _follower(c: FakeConsumer, own: str = "") -> tuple[InstancesFollower, ClusterView]:
    view = ClusterView()
    return InstancesFollower({}, APP, ViewWriter(view, own_id=own), consumer=c), view


def test_it_reads_only_when_the_end_offset_moved() -> None:
    c = FakeConsumer()
    f, view = _follower(c)
    assert c.paused and not f.loaded.is_set()
    assert f.catch_up() and f.loaded.is_set() and c.consumes == 0  # empty topic: caught up, no fetch
    c.write("a", _info("a"))
    c.write("b", _info("b"))
    assert f.catch_up() and c.paused and f.position == 2
    assert {i.instance_id for i in view.instances()} == {"a", "b"}
    fetched = c.consumes
    for _ in range(3):
        assert f.catch_up()
    assert c.consumes == fetched and c.probes == 5  # idle: one end-offset probe per turn, no fetch


def test_heartbeats_age_from_the_last_read_to_the_end_not_from_now() -> None:
    """A reader that cannot read for a while (its broker slow, its process starved) does not know
    the others stopped publishing: they stay alive for it until it has read to the end again."""
    c = FakeConsumer()
    view = ClusterView(liveness_ms=3000)
    f = InstancesFollower({}, APP, ViewWriter(view), consumer=c, on_current=view.mark_current)
    t0 = int(time.time() * 1000)
    c.write("a", InstanceInfo("a", "a:1", State.RUNNING, heartbeat_ms=t0).to_json())
    c.write("gone", InstanceInfo("gone", "g:1", State.RUNNING, heartbeat_ms=t0 - 10_000).to_json())
    assert f.catch_up()
    a, gone = sorted(view.instances(), key=lambda i: i.instance_id)
    later = t0 + 60_000  # a minute on, nothing read since
    assert view.is_alive(a, later) and view.heartbeat_age_ms(a, later) < 3000
    assert not view.is_alive(gone, later)  # its heartbeat was old already when the view was current
    c.broker_away = True
    with pytest.raises(KafkaException):
        f.catch_up()
    assert view.is_alive(a, later)
    c.broker_away = False
    before = int(time.time() * 1000)
    assert f.catch_up()  # read to the end again: current as of when the end offset was asked
    assert view.current_at_ms is not None and before <= view.current_at_ms <= int(time.time() * 1000)
    view.mark_current(later)  # read to the end a minute on, and "a" published nothing since t0
    assert not view.is_alive(a, later) and view.heartbeat_age_ms(a, later + 5000) == 60_000
    view.mark_current(t0)  # an older mark changes nothing
    assert view.current_at_ms == later
    unfollowed = ClusterView(liveness_ms=3000)  # nobody marks it current: ages are taken now
    unfollowed.update(a)
    assert not unfollowed.is_alive(a, later) and unfollowed.is_alive(a, t0 + 1000)


def test_removals_own_record_and_malformed_records() -> None:
    c = FakeConsumer()
    f, view = _follower(c, own="me")
    view.update(InstanceInfo("me", "me:1", State.RUNNING))
    c.write("me", _info("me", State.REBALANCING))  # an older publication of its own: skipped
    c.write("a", _info("a"))
    c.write("b", b"{not json")
    c.write("a", None)
    assert f.catch_up()
    assert [(i.instance_id, i.state) for i in view.instances()] == [("me", State.RUNNING)]
    c.write("me", None)  # removed as dead by a peer: it goes, its own or not
    assert f.catch_up() and view.instances() == []


def test_a_one_shot_read_reaches_the_end_past_markers() -> None:
    c = FakeConsumer(eof=True)
    seen: list[tuple[str, bytes | None]] = []
    f = InstancesFollower({}, APP, lambda iid, v: seen.append((iid, v)), consumer=c)
    c.write("a", _info("a"))
    c.end += 2  # a transaction's markers: no record there
    f.read_to_end(timeout=5)
    assert [k for k, _ in seen] == ["a"] and f.position == 3 and f.loaded.is_set() and c.paused


def test_a_one_shot_read_that_cannot_finish_fails() -> None:
    c = FakeConsumer()
    f = InstancesFollower({}, APP, lambda iid, v: None, consumer=c)
    c.end = 5  # nothing readable below it, and no end-of-partition event
    with pytest.raises(TimeoutError, match="did not reach offset 5"):
        f.read_to_end(timeout=0.3)
    c2 = FakeConsumer()
    c2.log.append(_Msg(0, None, None, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
    c2.end = 1
    f2 = InstancesFollower({}, APP, lambda iid, v: None, consumer=c2)
    with pytest.raises(KafkaException):
        f2.read_to_end(timeout=5)


def test_a_long_running_follower_skips_errors_and_gives_up_after_its_budget() -> None:
    c = FakeConsumer()
    f, _ = _follower(c)
    c.log.append(_Msg(0, None, None, KafkaError(KafkaError._TRANSPORT)))
    c.end = 1
    assert not f.catch_up(budget_s=0.3)  # the consumer retries; so does the next turn
    assert c.paused and not f.loaded.is_set()


def test_close_closes_the_consumer() -> None:
    c = FakeConsumer()
    f, _ = _follower(c)
    f.close()
    assert c.closed
