"""Kafka's default partitioner, byte-identical to the Java client.

The router must compute the same partition the producer that wrote a topic computed, and every
producer inside the runtime is configured with librdkafka's ``murmur2_random`` (the Java-compatible
one), so routing and writing agree.

Every query key is hashed, so speed matters: the C implementation of the ``murmurhash2`` package
(MurmurHash2 with Kafka's seed gives exactly Kafka's values, checked against Kafka's own test
vectors in tests/unit/test_partitioner.py) is several times faster on short keys and hundreds of
times on large ones than :func:`murmur2_reference`, the pure-Python transcription kept as the reference and the
fallback where the package is missing. ``python -m kernel.partitioner`` prints the figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Protocol

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2_reference(data: bytes) -> int:
    """Kafka's ``Utils.murmur2(data)`` in pure Python: a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length // 4
    for i in range(n4):
        j = i * 4
        k = data[j] | (data[j + 1] << 8) | (data[j + 2] << 16) | (data[j + 3] << 24)
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


def _unsigned_hash() -> Callable[[bytes], int]:
    """murmur2 as an unsigned 32-bit int: the compiled one if the package is there."""
    try:
        from murmurhash2 import murmurhash2 as c_murmur2
    except ImportError:
        return lambda data: murmur2_reference(data) & _MASK
    return partial(c_murmur2, seed=_SEED)


_murmur2_unsigned = _unsigned_hash()


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2(data)``: a signed 32-bit int (compiled when available)."""
    h = _murmur2_unsigned(data)
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return n & 0x7FFFFFFF


def default_partition(key_bytes: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (_murmur2_unsigned(key_bytes) & 0x7FFFFFFF) % num_partitions  # toPositive(murmur2(key))


def _measure() -> None:
    """Figures for the module doc: microseconds per key of the two implementations."""
    for label, size, n in (("16-byte keys", 16, 200_000), ("1 MB key", 1 << 20, 3)):
        data = bytes(range(256)) * (size // 256) if size >= 256 else b"k" * size
        for name, fn in (("murmur2", murmur2), ("reference", murmur2_reference)):
            t = time.perf_counter()
            for _ in range(n):
                fn(data)
            print(f"{label:>12} {name:>9}: {(time.perf_counter() - t) / n * 1e6:10.2f} us per key")


if __name__ == "__main__":
    _measure()


class Partitioner(Protocol):
    """Maps serialized key bytes to a partition; pluggable for topics written by other clients."""

    def __call__(self, key_bytes: bytes, num_partitions: int) -> int: ...


#: librdkafka ``partitioner`` setting that matches :func:`default_partition`.
LIBRDKAFKA_PARTITIONER = "murmur2_random"
