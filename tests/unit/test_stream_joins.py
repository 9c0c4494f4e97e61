"""Stream-stream joins through the TopologyTestDriver, with the cases and expected outputs of Kafka
Streams' KStreamKStreamJoinTest, KStreamKStreamLeftJoinTest and KStreamKStreamOuterJoinTest
(the 3.x semantics: unmatched results only when the window closes)."""

from __future__ import annotations

from typing import Any

import pytest

from instance.errors import TopologyException
from instance.serde import IntSerde, StringSerde
from instance.testing import TopologyTestDriver
from instance.topology import BaseProcessor, StreamsBuilder
from instance.topology.stream_joins import StreamJoined
from instance.topology.windows import JoinWindows

INT, S = IntSerde(), StringSerde()
Out = list[tuple[Any, Any, int]]


class _Capture(BaseProcessor):
    def __init__(self, out: Out) -> None:
        self.out = out

    def process(self, key: Any, value: Any) -> None:
        self.out.append((key, value, self.context.timestamp))


def _joiner(left: Any, right: Any) -> str:
    """Kafka's MockValueJoiner.TOSTRING_JOINER, with Java's "null"."""
    return f"{'null' if left is None else left}+{'null' if right is None else right}"


class _Join:
    def __init__(self, kind: str, windows: JoinWindows) -> None:
        b = StreamsBuilder(INT, S)
        self.out: Out = []
        s1, s2 = b.stream("topic1"), b.stream("topic2")
        joined = getattr(s1, {"inner": "join", "left": "left_join", "outer": "outer_join"}[kind])(
            s2, _joiner, windows, StreamJoined.with_(INT, S, S))
        joined.process(lambda: _Capture(self.out))
        self.topology = b.build()
        self.driver = TopologyTestDriver(self.topology)
        self.t1 = self.driver.create_input_topic("topic1", INT, S)
        self.t2 = self.driver.create_input_topic("topic2", INT, S)

    def take(self) -> Out:
        out, self.out[:] = list(self.out), []
        return out


def test_inner_join_window_bounds() -> None:
    """testWindowing of KStreamKStreamJoinTest (the upper bound part): 100 ms both ways."""
    j = _Join("inner", JoinWindows.of_time_difference_and_grace(100, 0))
    keys = [0, 1, 2, 3]
    for k in keys[:2]:
        j.t1.pipe_input(k, f"A{k}", 0)
    assert j.take() == []
    for k in keys:
        j.t2.pipe_input(k, f"a{k}", 0)
    assert j.take() == [(0, "A0+a0", 0), (1, "A1+a1", 0)]
    for i, k in enumerate(keys):
        j.t2.pipe_input(k, f"b{k}", 1000 + i)
    assert j.take() == []
    for k in keys:
        j.t1.pipe_input(k, f"B{k}", 1100)
    assert j.take() == [(0, "B0+b0", 1100), (1, "B1+b1", 1100), (2, "B2+b2", 1100), (3, "B3+b3", 1100)]
    for n, letter in enumerate("CDEF", start=1):
        for k in keys:
            j.t1.pipe_input(k, f"{letter}{k}", 1100 + n)
        assert j.take() == [(k, f"{letter}{k}+b{k}", 1100 + n) for k in keys if k >= n]
    # the other direction, and the later timestamp on matches
    j.t2.pipe_input(3, "c3", 1150)
    assert [v for _, v, _ in j.take()] == ["B3+c3", "C3+c3", "D3+c3", "E3+c3", "F3+c3"]
    assert j.topology.copartition_groups == [{"topic1", "topic2"}]
    j.driver.close()


def test_left_join_emits_unmatched_duplicates_only_when_the_window_closes() -> None:
    """KStreamKStreamLeftJoinTest.testLeftJoinDuplicates (100 ms, grace 10)."""
    j = _Join("left", JoinWindows.of_time_difference_and_grace(100, 10))
    j.t1.pipe_input(0, "A0", 0)
    j.t1.pipe_input(0, "A0-0", 0)
    j.t2.pipe_input(1, "a0", 111)
    j.t2.pipe_input(2, "dummy", 500)
    assert j.take() == [(0, "A0+null", 0), (0, "A0-0+null", 0)]
    j.t1.pipe_input(2, "A2", 1000)
    j.t1.pipe_input(2, "A2-0", 1000)
    j.t2.pipe_input(2, "a2", 1001)
    assert j.take() == [(2, "A2+a2", 1001), (2, "A2-0+a2", 1001)]
    j.t2.pipe_input(3, "a3", 315)  # joined ones are not emitted again
    assert j.take() == []
    j.driver.close()


@pytest.mark.parametrize("bump_side", [1, 2])
def test_left_join_expired_unmatched_records_are_emitted_by_either_processor(bump_side: int) -> None:
    """testLeftExpiredNonJoinedRecordsAreEmittedByThe{Left,Right}Processor (100 ms, no grace)."""
    j = _Join("left", JoinWindows.of_time_difference_and_grace(100, 0))
    j.t1.pipe_input(0, "A0", 1)
    j.t1.pipe_input(1, "A1", 2)
    j.t1.pipe_input(0, "A0-0", 3)
    assert j.take() == []
    j.t2.pipe_input(1, "a1", 3)
    assert j.take() == [(1, "A1+a1", 3)]
    bump, other = (j.t1, j.t2) if bump_side == 1 else (j.t2, j.t1)
    bump.pipe_input(2, "dummy", 401)
    assert j.take() == [(0, "A0+null", 1), (0, "A0-0+null", 3)]
    other.pipe_input(2, "dummy", 401 if bump_side == 1 else 402)
    assert j.take() == [(2, "dummy+dummy", 401 if bump_side == 1 else 402)]
    j.driver.close()


def test_left_join_never_emits_unmatched_right_records() -> None:
    """testRightNonJoinedRecordsAreNeverEmittedByTheLeftProcessor."""
    j = _Join("left", JoinWindows.of_time_difference_and_grace(100, 0))
    j.t2.pipe_input(0, "A0", 1)
    j.t2.pipe_input(1, "A1", 2)
    j.t2.pipe_input(0, "A0-0", 3)
    j.t1.pipe_input(1, "a1", 3)
    assert j.take() == [(1, "a1+A1", 3)]
    j.t1.pipe_input(2, "dummy", 401)
    assert j.take() == []
    j.t2.pipe_input(2, "dummy", 402)
    assert j.take() == [(2, "dummy+dummy", 402)]
    j.driver.close()


def test_outer_join_duplicates_both_sides() -> None:
    """KStreamKStreamOuterJoinTest.testOuterJoinDuplicates (100 ms, grace 10)."""
    j = _Join("outer", JoinWindows.of_time_difference_and_grace(100, 10))
    j.t1.pipe_input(0, "A0", 0)
    j.t1.pipe_input(0, "A0-0", 0)
    j.t2.pipe_input(1, "a1", 0)
    j.t2.pipe_input(1, "a1-0", 0)
    j.t2.pipe_input(1, "a0", 111)
    j.t2.pipe_input(3, "dummy", 211)
    assert j.take() == [(1, "null+a1", 0), (1, "null+a1-0", 0), (0, "A0+null", 0), (0, "A0-0+null", 0)]
    j.t1.pipe_input(2, "A2", 200)
    j.t1.pipe_input(2, "A2-0", 200)
    j.t2.pipe_input(2, "a2", 201)
    j.t2.pipe_input(2, "a2-0", 201)
    assert j.take() == [(2, "A2+a2", 201), (2, "A2-0+a2", 201), (2, "A2+a2-0", 201), (2, "A2-0+a2-0", 201)]
    j.t2.pipe_input(3, "dummy", 1500)
    assert j.take() == [(1, "null+a0", 111), (3, "null+dummy", 211)]
    j.driver.close()


@pytest.mark.parametrize("bump_side", [1, 2])
def test_outer_join_expired_unmatched_right_records(bump_side: int) -> None:
    """testRightExpiredNonJoinedRecordsAreEmittedByThe{Left,Right}Processor."""
    j = _Join("outer", JoinWindows.of_time_difference_without_grace(100))
    j.t2.pipe_input(0, "A0", 1)
    j.t2.pipe_input(1, "A1", 2)
    j.t2.pipe_input(0, "A0-0", 3)
    j.t1.pipe_input(1, "a1", 3)
    assert j.take() == [(1, "a1+A1", 3)]
    bump, other = (j.t1, j.t2) if bump_side == 1 else (j.t2, j.t1)
    bump.pipe_input(2, "dummy", 401)
    assert j.take() == [(0, "null+A0", 1), (0, "null+A0-0", 3)]
    other.pipe_input(2, "dummy", 402)
    assert j.take() == [(2, "dummy+dummy", 402)]
    j.driver.close()


def test_a_record_whose_window_already_closed_is_emitted_unmatched_at_once() -> None:
    j = _Join("left", JoinWindows.of_time_difference_without_grace(10))
    j.t1.pipe_input(0, "late-base", 1000)
    j.t1.pipe_input(1, "L", 5)  # 5 + 10 < stream time 1000: no match can come any more
    assert j.take() == [(1, "L+null", 5)]
    j.driver.close()


def test_join_after_a_key_change_repartitions_and_co_partitions() -> None:
    b = StreamsBuilder(S, S)
    out: Out = []
    left = b.stream("orders").select_key(lambda k, v: v.split(":")[0])
    right = b.stream("payments")
    left.join(right, lambda o, p: f"{o}|{p}", JoinWindows.of_time_difference_without_grace(1000)
              ).process(lambda: _Capture(out))
    topo = b.build()
    assert any(t.endswith("-left-repartition") for t in topo.internal_topics)
    assert len(topo.subtopologies()) == 2
    [group] = topo.copartition_groups
    assert "payments" in group and any(t.endswith("-left-repartition") for t in group)
    with TopologyTestDriver(topo) as d:
        d.create_input_topic("payments", S, S).pipe_input("c1", "paid", 10)
        d.create_input_topic("orders", S, S).pipe_input("o-7", "c1:book", 20)
        assert out == [("c1", "c1:book|paid", 20)]


def test_join_needs_join_windows_and_a_stream() -> None:
    b = StreamsBuilder(S, S)
    s1, s2 = b.stream("a"), b.stream("b")
    with pytest.raises(TopologyException, match="JoinWindows"):
        s1.join(s2, _joiner)
    with pytest.raises(TopologyException, match="KStream"):
        s1.join("b", _joiner, JoinWindows.of_time_difference_without_grace(1))
    with pytest.raises(ValueError, match="empty"):
        JoinWindows.of_time_difference_without_grace(5).before(-10)
