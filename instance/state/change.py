"""What a store's flush listener receives: Kafka Streams' ``Change<V>`` (newValue, oldValue).

A NamedTuple rather than a frozen dataclass: with caching off one is built per put, and a
NamedTuple is built in about half the time (tuples are immutable without ``__setattr__`` guards).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Change(NamedTuple):
    """A key's new value and its previous one as downstream saw it (``None``: absent/deleted)."""

    new_value: Any
    old_value: Any


class ValueAndTimestamp(NamedTuple):
    """A timestamped store's value with the timestamp of its latest update (Kafka Streams'
    ``ValueAndTimestamp``)."""

    value: Any
    timestamp: int
