"""What a foreign-key join (KIP-213) writes to its internal topics and its subscription store:
subscriptions (left side -> right side, keyed by foreign key), responses (right side -> left side,
keyed by primary key) and the subscription store's (foreign key, primary key) keys.

Layouts are ours, not Java's (both ends are iqmesh): a version byte first, so a later layout can
be told apart during a rolling upgrade, as Kafka Streams' wrappers do.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any, NamedTuple

from instance.errors import SerializationException
from kernel.serdes import Serde

_LEN = struct.Struct(">i")
_VERSION = 0

# subscription instructions (Kafka Streams' ``SubscriptionWrapper.Instruction``)
#: unsubscribe; the new subscription (to another foreign key) answers for the row
DELETE_KEY_NO_PROPAGATE = 0
#: unsubscribe and answer with no foreign value (the left row is gone or has no foreign key)
DELETE_KEY_AND_PROPAGATE = 1
#: subscribe and answer even when the foreign key has no row (a previous result must go)
PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2
#: subscribe and answer only when the foreign key has a row
PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3
_DELETES = (DELETE_KEY_NO_PROPAGATE, DELETE_KEY_AND_PROPAGATE)


def value_hash(data: bytes | None) -> bytes | None:
    """The hash of a serialized left value: a response whose hash is not the current value's
    answers an older version of the row and is dropped (Kafka Streams uses Murmur3-128)."""
    return None if data is None else hashlib.blake2b(data, digest_size=16).digest()


class CombinedKey(NamedTuple):
    """A subscription store key: all subscriptions of one foreign key are one prefix."""

    foreign_key: Any
    primary_key: Any


class Subscription(NamedTuple):
    """A left row's (un)subscription to a foreign key."""

    hash: bytes | None
    instruction: int
    primary_key: Any
    primary_partition: int


class Response(NamedTuple):
    """The foreign value for one left row, with the hash of the left value it answers."""

    hash: bytes | None
    foreign_value: Any
    primary_partition: int


def _part(data: bytes, pos: int) -> tuple[bytes, int]:
    (n,) = _LEN.unpack_from(data, pos)
    pos += 4
    return data[pos:pos + n], pos + n


class CombinedKeySerde:
    """``len(fk) fk pk``: the foreign key's bytes, length first, are the prefix of every key of
    that foreign key and of no other. ``CombinedKey(fk, None)`` serializes to the prefix alone."""

    def __init__(self, foreign_key_serde: Serde, primary_key_serde: Serde) -> None:
        self.fk, self.pk = foreign_key_serde, primary_key_serde
        self.name = f"combined({foreign_key_serde.name},{primary_key_serde.name})"

    def prefix(self, foreign_key: Any) -> bytes:
        fb = self.fk.serialize(foreign_key)
        if fb is None:
            raise SerializationException("a subscription's foreign key must not serialize to null")
        return _LEN.pack(len(fb)) + fb

    def serialize(self, value: Any) -> bytes | None:
        if value is None:
            return None
        prefix = self.prefix(value.foreign_key)
        if value.primary_key is None:
            return prefix
        pb = self.pk.serialize(value.primary_key)
        return prefix + (pb or b"")

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        fb, pos = _part(data, 0)
        return CombinedKey(self.fk.deserialize(fb), self.pk.deserialize(data[pos:]))

    def parse(self, text: str) -> Any:
        raise SerializationException("a subscription key cannot be typed on a command line")


def _hash_bytes(h: bytes | None) -> bytes:
    return b"\x00" if h is None else b"\x01" + h


def _read_hash(data: bytes, pos: int) -> tuple[bytes | None, int]:
    if data[pos] == 0:
        return None, pos + 1
    return data[pos + 1:pos + 17], pos + 17


def _check_version(data: bytes, what: str) -> None:
    if not data or data[0] != _VERSION:
        raise SerializationException(f"not a {what} of a supported version (first byte {data[:1]!r})")


class SubscriptionSerde:
    """``version, hash, instruction, partition, primary key``."""

    def __init__(self, primary_key_serde: Serde) -> None:
        self.pk = primary_key_serde
        self.name = f"subscription({primary_key_serde.name})"

    def serialize(self, value: Any) -> bytes | None:
        if value is None:
            return None
        pb = self.pk.serialize(value.primary_key) or b""
        return (bytes((_VERSION,)) + _hash_bytes(value.hash) + bytes((value.instruction,))
                + _LEN.pack(value.primary_partition) + pb)

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        _check_version(data, "subscription")
        h, pos = _read_hash(data, 1)
        instruction = data[pos]
        (partition,) = _LEN.unpack_from(data, pos + 1)
        return Subscription(h, instruction, self.pk.deserialize(data[pos + 5:]), partition)

    def parse(self, text: str) -> Any:
        raise SerializationException("a subscription cannot be typed on a command line")


class ResponseSerde:
    """``version, hash, partition, flag, foreign value``."""

    def __init__(self, foreign_value_serde: Serde) -> None:
        self.fv = foreign_value_serde
        self.name = f"response({foreign_value_serde.name})"

    def serialize(self, value: Any) -> bytes | None:
        if value is None:
            return None
        vb = None if value.foreign_value is None else self.fv.serialize(value.foreign_value)
        body = b"\x00" if vb is None else b"\x01" + vb
        return bytes((_VERSION,)) + _hash_bytes(value.hash) + _LEN.pack(value.primary_partition) + body

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        _check_version(data, "subscription response")
        h, pos = _read_hash(data, 1)
        (partition,) = _LEN.unpack_from(data, pos)
        pos += 4
        fv = self.fv.deserialize(data[pos + 1:]) if data[pos] == 1 else None
        return Response(h, fv, partition)

    def parse(self, text: str) -> Any:
        raise SerializationException("a subscription response cannot be typed on a command line")


def is_delete(instruction: int) -> bool:
    return instruction in _DELETES
