"""The Processor API's punctuation vocabulary: what ``ProcessorContext.schedule`` takes and gives.

Kafka Streams' ``PunctuationType``, ``Cancellable`` and ``Punctuator``; the runtime's queues that
fire them live in instance/runtime/punctuation.py.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol

__all__ = ["Cancellable", "PunctuationType", "Punctuator"]

Punctuator = Callable[[int], None]


class PunctuationType(enum.Enum):
    """Kafka Streams' ``PunctuationType``."""

    STREAM_TIME = 0
    WALL_CLOCK_TIME = 1


class Cancellable(Protocol):
    def cancel(self) -> None: ...
