"""The group metadata a streams group member gives ``send_offsets_to_transaction`` (exactly_once_v2).

confluent-kafka's ``Consumer.consumer_group_metadata()`` returns librdkafka's serialized form as
bytes, and ``Producer.send_offsets_to_transaction`` takes it back: ``CGMDv2:``, the generation id
(int32, the machine's byte order), the group id and the member id (each NUL-terminated), then one
byte saying whether the group.instance.id is absent (1) or follows, NUL-terminated (0); layout read
from what confluent-kafka 2.16 returns (tests/unit/test_streams_group_txn_metadata.py pins it).

A stream thread's consumer is not in the group under ``group.protocol=streams`` (it is assigned by
hand), so its own metadata names no member: Kafka 4.4 accepts that in a transaction, but then does
not fence a zombie. This one carries the streams member's id and epoch as the generation, so the
coordinator checks them (``StreamsGroup.validateOffsetCommit``) as it does for Kafka Streams.
"""

from __future__ import annotations

import struct

MAGIC = b"CGMDv2:"


def group_metadata(group_id: str, member_id: str, epoch: int, instance_id: str | None = None) -> bytes:
    """librdkafka's serialized consumer group metadata for this member at ``epoch``."""
    tail = b"\x01" if instance_id is None else b"\x00" + instance_id.encode() + b"\x00"
    return MAGIC + struct.pack("=i", epoch) + group_id.encode() + b"\x00" + member_id.encode() + b"\x00" + tail
