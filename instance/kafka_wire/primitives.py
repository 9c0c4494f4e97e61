"""The Kafka protocol's primitive encodings, which the generated codecs are written in.

Big-endian fixed-size integers; strings with an int16 length (-1: null), bytes and arrays with an
int32 length; in flexible versions their *compact* forms: an unsigned varint of length + 1 (0:
null); and, at the end of every struct of a flexible version, the tagged fields: a varint count,
then per field its tag, its size and its bytes, in increasing tag order.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable

from instance.kafka_wire.errors import UnsupportedVersionError, WireFormatError

_I8, _I16, _U16 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">H")
_I32, _U32, _I64, _F64 = struct.Struct(">i"), struct.Struct(">I"), struct.Struct(">q"), struct.Struct(">d")
ZERO_UUID = uuid.UUID(int=0)


def uvarint(n: int) -> bytes:
    """``n`` (>= 0) as an unsigned varint: 7 bits a byte, low bits first."""
    if n < 0:
        raise UnsupportedVersionError(f"an unsigned varint cannot hold {n}")
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class Writer:
    """Appends encodings to a buffer; :meth:`getvalue` returns what was written."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self._buf)

    def raw(self, data: bytes) -> None:
        self._buf += data

    def _pack(self, fmt: struct.Struct, value: int | float, what: str) -> None:
        try:
            self._buf += fmt.pack(value)
        except struct.error:
            raise UnsupportedVersionError(f"{value!r} does not fit a {what}") from None

    def int8(self, v: int) -> None:
        self._pack(_I8, v, "int8")

    def int16(self, v: int) -> None:
        self._pack(_I16, v, "int16")

    def uint16(self, v: int) -> None:
        self._pack(_U16, v, "uint16")

    def int32(self, v: int) -> None:
        self._pack(_I32, v, "int32")

    def uint32(self, v: int) -> None:
        self._pack(_U32, v, "uint32")

    def int64(self, v: int) -> None:
        self._pack(_I64, v, "int64")

    def float64(self, v: float) -> None:
        self._pack(_F64, v, "float64")

    def boolean(self, v: bool) -> None:
        self._buf.append(1 if v else 0)

    def uuid(self, v: uuid.UUID) -> None:
        self._buf += v.bytes

    def uvarint(self, n: int) -> None:
        self._buf += uvarint(n)

    def length(self, n: int | None, compact: bool, short: bool = False) -> None:
        """A length prefix (None: null): compact varint, else int16 (``short``, strings) or int32."""
        if compact:
            self.uvarint(0 if n is None else n + 1)
        elif short:
            self.int16(-1 if n is None else n)
        else:
            self.int32(-1 if n is None else n)

    def string(self, v: str, compact: bool) -> None:
        """A non-null string (a null goes through :meth:`length`; the codecs decide where it may)."""
        if v is None:
            raise UnsupportedVersionError("a null where a string is required")
        data = v.encode()
        if not compact and len(data) > 0x7FFF:
            raise UnsupportedVersionError(f"a string of {len(data)} bytes does not fit an int16 length")
        self.length(len(data), compact, short=True)
        self._buf += data

    def byte_array(self, v: bytes, compact: bool) -> None:
        """Non-null bytes (a null goes through :meth:`length`)."""
        if v is None:
            raise UnsupportedVersionError("a null where bytes are required")
        self.length(len(v), compact)
        self._buf += v

    def tagged_fields(self, fields: Iterable[tuple[int, bytes]]) -> None:
        """The tagged section: ``fields`` as (tag, encoded value), written in tag order."""
        ordered = sorted(fields)
        self.uvarint(len(ordered))
        for tag, data in ordered:
            self.uvarint(tag)
            self.uvarint(len(data))
            self._buf += data


class Reader:
    """Reads encodings from ``data`` in order; every read past the end is a WireFormatError."""

    __slots__ = ("_data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self._data = data
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self._data) - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self._data):
            raise WireFormatError(f"needed {n} bytes at offset {self.pos}, the message has {len(self._data)}")
        self.pos += n
        return self._data[self.pos - n:self.pos]

    def _unpack(self, fmt: struct.Struct) -> int:
        value: int = fmt.unpack(self.take(fmt.size))[0]
        return value

    def int8(self) -> int:
        return self._unpack(_I8)

    def int16(self) -> int:
        return self._unpack(_I16)

    def uint16(self) -> int:
        return self._unpack(_U16)

    def int32(self) -> int:
        return self._unpack(_I32)

    def uint32(self) -> int:
        return self._unpack(_U32)

    def int64(self) -> int:
        return self._unpack(_I64)

    def float64(self) -> float:
        value: float = _F64.unpack(self.take(8))[0]
        return value

    def boolean(self) -> bool:
        return self.take(1) != b"\x00"

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise WireFormatError(f"a varint at offset {self.pos} runs over 64 bits")

    def length(self, compact: bool, short: bool = False) -> int | None:
        """A length prefix; None for null."""
        if compact:
            n = self.uvarint() - 1
        else:
            n = self.int16() if short else self.int32()
        return None if n < 0 else n

    def required_string(self, compact: bool, where: str) -> str:
        value = self.string(compact)
        if value is None:
            raise null_read(where)
        return value

    def required_byte_array(self, compact: bool, where: str) -> bytes:
        value = self.byte_array(compact)
        if value is None:
            raise null_read(where)
        return value

    def required_array_length(self, compact: bool, where: str) -> int:
        n = self.array_length(compact)
        if n is None:
            raise null_read(where)
        return n

    def string(self, compact: bool) -> str | None:
        n = self.length(compact, short=True)
        if n is None:
            return None
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as e:
            raise WireFormatError(f"a string at offset {self.pos - n} is not UTF-8: {e}") from None

    def byte_array(self, compact: bool) -> bytes | None:
        n = self.length(compact)
        return None if n is None else self.take(n)

    def array_length(self, compact: bool) -> int | None:
        """An array's element count (None: null), refused when the message cannot hold that many."""
        n = self.length(compact)
        if n is not None and n > self.remaining:
            raise WireFormatError(f"an array of {n} elements at offset {self.pos} in {self.remaining} bytes left")
        return n

    def tagged_fields(self) -> list[tuple[int, bytes]]:
        """The tagged section as (tag, encoded value) pairs."""
        found = []
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found.append((tag, self.take(self.uvarint())))
        return found


def null_written(where: str, version: int) -> UnsupportedVersionError:
    """A null where ``version`` does not allow one."""
    return UnsupportedVersionError(f"{where} cannot be null in version {version}")


def null_read(where: str) -> WireFormatError:
    """A null decoded where the version does not allow one."""
    return WireFormatError(f"{where} was encoded as null, which its version does not allow")


def lost(where: str, version: int) -> UnsupportedVersionError:
    """A non-default value in a field that ``version`` lacks and that may not be dropped silently."""
    return UnsupportedVersionError(f"{where} holds a value that version {version} cannot carry")


def unsupported_version(message: str, version: int) -> UnsupportedVersionError:
    """A version outside the ones the message's spec defines."""
    return UnsupportedVersionError(f"{message} has no version {version}")
