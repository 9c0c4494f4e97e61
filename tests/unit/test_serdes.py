"""Serdes encode like Kafka's Java serializers (LongSerializer, IntegerSerializer, ...)."""

from __future__ import annotations

import random
import struct

import pytest

from instance.serde import (
    BytesSerde,
    IntSerde,
    JsonSerde,
    LongSerde,
    Serde,
    StringSerde,
    serde_by_name,
)

ALL = [BytesSerde(), StringSerde(), IntSerde(), LongSerde(), JsonSerde()]


@pytest.mark.parametrize("value,encoded", [
    (0, b"\x00" * 8),
    (1, b"\x00" * 7 + b"\x01"),
    (-1, b"\xff" * 8),
    (256, b"\x00" * 6 + b"\x01\x00"),
    (-2, b"\xff" * 7 + b"\xfe"),
    (2**63 - 1, b"\x7f" + b"\xff" * 7),
    (-(2**63), b"\x80" + b"\x00" * 7),
    (0x0102030405060708, bytes(range(1, 9))),
])
def test_long_is_8_byte_big_endian_twos_complement(value: int, encoded: bytes) -> None:
    s = LongSerde()
    assert s.serialize(value) == encoded
    assert s.deserialize(encoded) == value


@pytest.mark.parametrize("value,encoded", [
    (0, b"\x00" * 4),
    (1, b"\x00\x00\x00\x01"),
    (-1, b"\xff" * 4),
    (2**31 - 1, b"\x7f\xff\xff\xff"),
    (-(2**31), b"\x80\x00\x00\x00"),
    (0x01020304, b"\x01\x02\x03\x04"),
])
def test_int_is_4_byte_big_endian_twos_complement(value: int, encoded: bytes) -> None:
    s = IntSerde()
    assert s.serialize(value) == encoded
    assert s.deserialize(encoded) == value


def test_long_and_int_agree_with_int_to_bytes_on_random_values() -> None:
    rnd = random.Random(42)
    ls, is_ = LongSerde(), IntSerde()
    for _ in range(2000):
        v = rnd.randint(-(2**63), 2**63 - 1)
        assert ls.serialize(v) == v.to_bytes(8, "big", signed=True)
        assert ls.deserialize(ls.serialize(v)) == v
        w = rnd.randint(-(2**31), 2**31 - 1)
        assert is_.serialize(w) == w.to_bytes(4, "big", signed=True)
        assert is_.deserialize(is_.serialize(w)) == w


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00" * 4, b"\x00" * 7, b"\x00" * 9, b"\x00" * 16])
def test_long_wrong_length_raises(data: bytes) -> None:
    with pytest.raises(ValueError, match="8 bytes"):
        LongSerde().deserialize(data)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00" * 3, b"\x00" * 5, b"\x00" * 8])
def test_int_wrong_length_raises(data: bytes) -> None:
    with pytest.raises(ValueError, match="4 bytes"):
        IntSerde().deserialize(data)


@pytest.mark.parametrize("serde,value", [(LongSerde(), 2**63), (LongSerde(), -(2**63) - 1),
                                         (IntSerde(), 2**31), (IntSerde(), -(2**31) - 1)])
def test_out_of_range_integers_raise(serde: Serde, value: int) -> None:
    with pytest.raises(struct.error):
        serde.serialize(value)


def test_string_is_utf8() -> None:
    s = StringSerde()
    for text in ["", "hello", "héllo wörld", "日本語", "emoji \U0001f600", "a\x00b"]:
        assert s.serialize(text) == text.encode("utf-8")
        assert s.deserialize(text.encode("utf-8")) == text
    assert s.serialize("é") == b"\xc3\xa9"
    assert s.serialize("") == b""  # the empty string is not null
    assert s.deserialize(b"") == ""


def test_json_is_compact_utf8() -> None:
    s = JsonSerde()
    assert s.serialize({"a": 1, "b": [1, 2, {"c": None}]}) == b'{"a":1,"b":[1,2,{"c":null}]}'
    assert s.serialize("é") == '"é"'.encode()
    assert s.serialize([]) == b"[]"
    assert s.serialize(0) == b"0"
    assert s.serialize(True) == b"true"
    value = {"name": "wörd", "n": 3, "xs": [1.5, "x", False], "nested": {"k": []}}
    assert s.deserialize(s.serialize(value)) == value
    assert s.deserialize(b'{ "a" : 1 }') == {"a": 1}


def test_bytes_passes_through() -> None:
    s = BytesSerde()
    assert s.serialize(b"\x00\xff") == b"\x00\xff"
    assert s.serialize(bytearray(b"ab")) == b"ab"
    assert s.deserialize(b"xy") == b"xy"


@pytest.mark.parametrize("serde", ALL, ids=lambda s: s.name)
def test_none_maps_to_none(serde: Serde) -> None:
    assert serde.serialize(None) is None
    assert serde.deserialize(None) is None


@pytest.mark.parametrize("serde", ALL, ids=lambda s: s.name)
def test_serdes_satisfy_the_protocol(serde: Serde) -> None:
    assert isinstance(serde, Serde)


@pytest.mark.parametrize("name,cls,text,value", [
    ("bytes", BytesSerde, "ab", b"ab"),
    ("string", StringSerde, "ab", "ab"),
    ("str", StringSerde, "ab", "ab"),
    ("int", IntSerde, "-5", -5),
    ("integer", IntSerde, "7", 7),
    ("long", LongSerde, "123", 123),
    ("LONG", LongSerde, "1", 1),
    ("json", JsonSerde, '{"a": [1]}', {"a": [1]}),
])
def test_serde_by_name_and_parse(name: str, cls: type, text: str, value: object) -> None:
    s = serde_by_name(name)
    assert isinstance(s, cls)
    assert s.parse(text) == value


def test_serde_by_name_unknown() -> None:
    with pytest.raises(ValueError, match="unknown serde 'avro'"):
        serde_by_name("avro")
