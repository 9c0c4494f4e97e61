from __future__ import annotations

import pytest

from kernel.assignment import range_assignee, successor


def _blocks(n: int, m: int) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in range(m)]
    for p in range(n):
        out[range_assignee(p, n, m)].append(p)
    return out


def test_range_gives_contiguous_blocks_first_members_one_extra() -> None:
    assert _blocks(6, 3) == [[0, 1], [2, 3], [4, 5]]
    assert _blocks(6, 4) == [[0, 1], [2, 3], [4], [5]]
    assert _blocks(7, 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert _blocks(2, 3) == [[0], [1], []]


def test_successor_is_computed_without_the_leaving_members() -> None:
    members = ["a-1", "b-1", "c-1"]
    # with a-1 gone, b-1 and c-1 split 6 partitions 3/3
    assert [successor(p, 6, members, {"a-1"}) for p in range(6)] == ["b-1"] * 3 + ["c-1"] * 3
    assert successor(0, 6, members, set(members)) is None


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        range_assignee(6, 6, 3)
    with pytest.raises(ValueError):
        range_assignee(0, 6, 0)
