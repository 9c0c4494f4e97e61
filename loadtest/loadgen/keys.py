"""Which key each request asks for: uniform over the key set, or Zipf-distributed (a few keys
hot, as real lookups are) with exponent ``s`` over the keys in the order given."""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass


class KeyError_(ValueError):
    """A key distribution that cannot be built (no keys, a bad exponent)."""


@dataclass
class KeyChooser:
    keys: Sequence[str]
    #: Zipf exponent; 0 means uniform
    zipf_s: float = 0.0
    seed: int = 1

    def __post_init__(self) -> None:
        if not self.keys:
            raise KeyError_("at least one key is needed")
        if self.zipf_s < 0:
            raise KeyError_(f"the Zipf exponent must be >= 0 (0: uniform), not {self.zipf_s}")
        self._rnd = random.Random(self.seed)
        weights = [1.0 / (rank ** self.zipf_s) for rank in range(1, len(self.keys) + 1)]
        self._cdf = list(itertools.accumulate(weights))

    def next(self) -> str:
        if self.zipf_s == 0:
            return self.keys[self._rnd.randrange(len(self.keys))]
        x = self._rnd.random() * self._cdf[-1]
        return self.keys[min(bisect.bisect_right(self._cdf, x), len(self.keys) - 1)]
