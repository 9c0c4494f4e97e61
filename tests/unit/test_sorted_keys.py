"""SortedKeys against a plain sorted list, through block splits and empty blocks."""

from __future__ import annotations

import random

from instance.state.sorted_keys import SortedKeys


def test_random_adds_discards_and_ranges_match_a_sorted_list() -> None:
    rnd = random.Random(3)
    keys = SortedKeys()
    ref: set[bytes] = set()
    for step in range(20_000):
        k = rnd.randrange(5_000).to_bytes(4, "big")
        if rnd.random() < 0.6:
            if k not in ref:
                keys.add(k)
                ref.add(k)
        else:
            keys.discard(k)
            ref.discard(k)
        if step % 997 == 0:
            a, b = sorted(rnd.randrange(5_000).to_bytes(4, "big") for _ in range(2))
            expected = sorted(ref)
            assert keys.range(None, None) == expected
            assert keys.range(a, b) == [x for x in expected if a <= x < b]
            assert keys.range(a, None) == [x for x in expected if a <= x]
            assert list(keys) == expected and len(keys) == len(ref)
