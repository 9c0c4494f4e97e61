"""The member's transactional group metadata has librdkafka's own layout (confluent-kafka's
``consumer_group_metadata()`` of a consumer outside any group gives the same bytes)."""

from __future__ import annotations

from confluent_kafka import Consumer

from instance.runtime.streams_group.txn_metadata import group_metadata


def _librdkafka(settings: dict[str, str]) -> bytes:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9", "log_level": 0, **settings})
    try:
        got = consumer.consumer_group_metadata()
    finally:
        consumer.close()
    assert isinstance(got, bytes)
    return got


def test_same_bytes_as_librdkafka_without_and_with_an_instance_id() -> None:
    assert group_metadata("grp", "", -1) == _librdkafka({"group.id": "grp"})
    assert group_metadata("grp", "", -1, "inst") == _librdkafka({"group.id": "grp", "group.instance.id": "inst"})


def test_member_and_epoch_are_written() -> None:
    got = group_metadata("g", "m-1", 7)
    assert got.startswith(b"CGMDv2:") and b"g\x00m-1\x00" in got and got.endswith(b"\x01")
    assert got[7:11] in (b"\x07\x00\x00\x00", b"\x00\x00\x00\x07")
