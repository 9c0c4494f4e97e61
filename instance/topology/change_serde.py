"""The value serde of a KTable's repartition topic: one record carries ``Change(new, old)``
(Kafka Streams' ``ChangedSerializer``), so the aggregate downstream can subtract the old value and
add the new one from a single record when the grouping key did not change (KAFKA-12446).

Layout (ours, not Java's): one flag byte (1: new present, 2: old present), then the new value's
length as 4 bytes big-endian and its bytes, then the old value's bytes.
"""

from __future__ import annotations

import struct
from typing import Any

from instance.errors import SerializationException
from instance.state.change import Change
from kernel.serdes import Serde

_LEN = struct.Struct(">i")


class ChangeSerde:
    """Serializes a :class:`Change` with an inner serde for both values."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self.name = f"change({inner.name})"

    def serialize(self, value: Any) -> bytes | None:
        if value is None:
            return None
        ser = self.inner.serialize
        nb = None if value.new_value is None else ser(value.new_value)
        ob = None if value.old_value is None else ser(value.old_value)
        flags = (1 if nb is not None else 0) | (2 if ob is not None else 0)
        new_part = b"" if nb is None else _LEN.pack(len(nb)) + nb
        return bytes((flags,)) + new_part + (ob or b"")

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if not data or data[0] > 3:
            raise SerializationException("not a serialized Change (bad flag byte)")
        flags, de = data[0], self.inner.deserialize
        new = old = None
        pos = 1
        if flags & 1:
            (n,) = _LEN.unpack_from(data, 1)
            new = de(data[5:5 + n])
            pos = 5 + n
        if flags & 2:
            old = de(data[pos:])
        return Change(new, old)

    def parse(self, text: str) -> Any:
        raise SerializationException("a Change cannot be typed on a command line")
