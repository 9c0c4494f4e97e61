"""Serde protocol and the built-in serdes.

A serde is resolved once when the topology is built; the hot path calls its bound
``serialize``/``deserialize`` directly. ``None`` always maps to ``None`` (a Kafka null / tombstone).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import struct
from typing import Any, Protocol, runtime_checkable

import orjson

_orjson_dumps, _orjson_loads, _NON_STR_KEYS = orjson.dumps, orjson.loads, orjson.OPT_NON_STR_KEYS


@runtime_checkable
class Serde(Protocol):
    """Turns Python values into bytes and back. ``parse`` reads a value typed on a command line."""

    name: str

    def serialize(self, value: Any) -> bytes | None: ...

    def deserialize(self, data: bytes | None) -> Any: ...

    def parse(self, text: str) -> Any: ...


class BytesSerde:
    name = "bytes"

    def serialize(self, value: Any) -> bytes | None:
        return None if value is None else bytes(value)

    def deserialize(self, data: bytes | None) -> Any:
        return data

    def parse(self, text: str) -> Any:
        return text.encode()


class StringSerde:
    name = "string"

    def serialize(self, value: Any) -> bytes | None:
        return None if value is None else value.encode()

    def deserialize(self, data: bytes | None) -> Any:
        return None if data is None else data.decode()

    def parse(self, text: str) -> Any:
        return text


class _FixedIntSerde:
    name = "int"
    #: the byte format (also what the snapshot job's vectorised decoder reads: analytics/snapshot/columns.py)
    wire = struct.Struct(">i")

    def __init__(self) -> None:
        self._pack = self.wire.pack
        self._unpack = self.wire.unpack

    def serialize(self, value: Any) -> bytes | None:
        return None if value is None else self._pack(value)

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) != self.wire.size:
            raise ValueError(f"{self.name} serde expects {self.wire.size} bytes, got {len(data)}")
        return self._unpack(data)[0]

    def parse(self, text: str) -> Any:
        return int(text)


class IntSerde(_FixedIntSerde):
    """Kafka's IntegerSerde: 4-byte big-endian two's complement."""

    name = "int"
    wire = struct.Struct(">i")


class LongSerde(_FixedIntSerde):
    """Kafka's LongSerde: 8-byte big-endian two's complement."""

    name = "long"
    wire = struct.Struct(">q")


class JsonSerde:
    """Compact UTF-8 JSON (orjson: the same bytes as ``json.dumps(separators=(",", ":"),
    ensure_ascii=False)`` for the usual types, several times faster)."""

    name = "json"

    def serialize(self, value: Any) -> bytes | None:
        # positional: a keyword option (through functools.partial) cost almost as much as dumping a small value
        return None if value is None else _orjson_dumps(value, None, _NON_STR_KEYS)

    def deserialize(self, data: bytes | None) -> Any:
        return None if data is None else _orjson_loads(data)

    def parse(self, text: str) -> Any:
        return json.loads(text)


def json_default(value: Any) -> Any:
    """JSON for what has no JSON type, wherever a decoded value is shown as JSON (query replies,
    the snapshot): a dataclass (a record decoded into one) as its fields, bytes as base64,
    anything else (decimals, datetimes) as its text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    return str(value)


_JSON = json.JSONEncoder(separators=(",", ":"), default=json_default)


def value_to_json(value: Any) -> str:
    """A decoded value as the JSON text query replies carry (``value_json``, ``key_json``); bytes
    become a base64 string since JSON has no bytes. Beside the serdes: every reply's value is
    serialized and shown here, so a Get's reply is built in one module."""
    if type(value) is int:  # the commonest value (counts), not bool
        return str(value)
    if isinstance(value, bytes | bytearray):
        return json.dumps(base64.b64encode(value).decode())
    return _JSON.encode(value)


_BY_NAME: dict[str, type] = {
    "bytes": BytesSerde, "string": StringSerde, "str": StringSerde, "int": IntSerde,
    "integer": IntSerde, "long": LongSerde, "json": JsonSerde,
}


def serde_by_name(name: str) -> Serde:
    try:
        return _BY_NAME[name.lower()]()  # type: ignore[no-any-return]
    except KeyError:
        raise ValueError(f"unknown serde {name!r}; known: {', '.join(sorted(_BY_NAME))}") from None
