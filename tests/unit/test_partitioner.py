"""murmur2 against the vectors published in Kafka's UtilsTest."""

import pytest

from router.partitioner import default_partition, murmur2, to_positive

VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("data,expected", list(VECTORS.items()))
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_default_partition_uses_to_positive_not_abs() -> None:
    h = murmur2(b"foobar")
    assert h < 0
    assert default_partition(b"foobar", 7) == (h & 0x7FFFFFFF) % 7
    assert to_positive(-1) == 0x7FFFFFFF


def test_default_partition_rejects_zero_partitions() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        default_partition(b"x", 0)
