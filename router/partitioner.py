"""Kafka's default partitioner, byte-identical to the Java client.

The router must compute the same partition the producer that wrote a topic computed, and every
producer inside the runtime is configured with librdkafka's ``murmur2_random`` (the Java-compatible
one), so routing and writing agree.
"""

from __future__ import annotations

import struct
from typing import Protocol

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Return Kafka's ``Utils.murmur2(data)``: a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length // 4
    # the little-endian 4-byte words in one call (routing hashes a key per query)
    for k in struct.unpack_from(f"<{n4}I", data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    tail = n4 * 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return n & 0x7FFFFFFF


def default_partition(key_bytes: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key_bytes)) % num_partitions


class Partitioner(Protocol):
    """Maps serialized key bytes to a partition; pluggable for topics written by other clients."""

    def __call__(self, key_bytes: bytes, num_partitions: int) -> int: ...


#: librdkafka ``partitioner`` setting that matches :func:`default_partition`.
LIBRDKAFKA_PARTITIONER = "murmur2_random"
