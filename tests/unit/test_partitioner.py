"""murmur2 against the vectors published in Kafka's UtilsTest: the compiled implementation the
partitioner uses and the pure-Python reference, which must also agree with each other everywhere."""

import random

import pytest

from kernel import partitioner
from kernel.partitioner import default_partition, murmur2, murmur2_reference, to_positive

VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("impl", [murmur2, murmur2_reference], ids=["murmur2", "reference"])
@pytest.mark.parametrize("data,expected", list(VECTORS.items()))
def test_murmur2_matches_java(impl: object, data: bytes, expected: int) -> None:
    assert impl(data) == expected  # type: ignore[operator]


def test_the_partitioner_uses_the_compiled_hash() -> None:
    """murmurhash2 is a dependency: without it every query key pays the pure-Python hash."""
    from murmurhash2 import murmurhash2 as c_murmur2

    assert partitioner._murmur2_unsigned.func is c_murmur2  # type: ignore[attr-defined]


def test_compiled_and_reference_agree_on_every_length_and_byte() -> None:
    rnd = random.Random(5)
    samples = [bytes(rnd.getrandbits(8) for _ in range(n)) for n in range(0, 70) for _ in range(5)]
    samples += [bytes([b]) * n for b in (0, 0x7F, 0x80, 0xFF) for n in range(1, 9)]
    for data in samples:
        assert murmur2(data) == murmur2_reference(data), data
        assert default_partition(data, 7) == to_positive(murmur2_reference(data)) % 7


def test_default_partition_uses_to_positive_not_abs() -> None:
    h = murmur2(b"foobar")
    assert h < 0
    assert default_partition(b"foobar", 7) == (h & 0x7FFFFFFF) % 7
    assert to_positive(-1) == 0x7FFFFFFF


def test_default_partition_rejects_zero_partitions() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        default_partition(b"x", 0)
