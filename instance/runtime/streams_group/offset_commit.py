"""Offsets committed by a streams group member, with its member id and epoch (OffsetCommit v9).

A Kafka 4.4 group coordinator takes an OffsetCommit for a streams group that has members only from
one of them, in version 9 or later, at its current epoch (the group coordinator's
``StreamsGroup.validateOffsetCommit``). librdkafka's commit from a consumer that is not in a group
(``assign()``) sends no member id and generation -1, which such a group refuses with
UNKNOWN_MEMBER_ID (tests/conformance/test_streams_group_offsets.py): the stream threads commit here,
through kafka_wire's generated codec, instead.

Failures are raised as confluent-kafka's ``KafkaException`` with Kafka's error code, so the commit
protocol (runtime/task_committer.py) handles them as it handles librdkafka's: STALE_MEMBER_EPOCH,
UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH mean the group moved on; a coordinator that moved or a
broken connection is transient (retried by the caller).
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from instance.kafka_wire.apis import OFFSET_COMMIT
from instance.kafka_wire.connection import Connection
from instance.kafka_wire.coordinator import connect_coordinator
from instance.kafka_wire.error_codes import COORDINATOR_MOVED, ErrorCode, error_name
from instance.kafka_wire.errors import BrokerConnectionError
from instance.kafka_wire.generated import offset_commit_request as oc
from instance.kafka_wire.wire_auth import PLAINTEXT, BrokerAuth

#: (member id, member epoch, group.instance.id) of the member committing, read at each commit
MemberIds = Callable[[], tuple[str, int, str | None]]


def commit_request(group_id: str, member: tuple[str, int, str | None],
                   offsets: list[TopicPartition]) -> oc.OffsetCommitRequest:
    """The request committing ``offsets`` (leader epochs unknown: -1) for ``member``."""
    by_topic: dict[str, list[oc.OffsetCommitRequestPartition]] = {}
    for tp in sorted(offsets, key=lambda t: (t.topic, t.partition)):
        by_topic.setdefault(tp.topic, []).append(oc.OffsetCommitRequestPartition(
            partition_index=tp.partition, committed_offset=tp.offset, committed_metadata=""))
    member_id, epoch, instance_id = member
    return oc.OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=epoch, member_id=member_id,
                                  group_instance_id=instance_id,
                                  topics=tuple(oc.OffsetCommitRequestTopic(name=t, partitions=tuple(ps))
                                               for t, ps in by_topic.items()))


class MemberOffsetCommitter:
    """Commits offsets for one member over its own connection to the group's coordinator."""

    def __init__(self, bootstrap: str, group_id: str, member: MemberIds, *, auth: BrokerAuth = PLAINTEXT,
                 client_id: str = "iqmesh-offsets", timeout: float = 30.0) -> None:
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.member = member
        self.auth = auth
        self.client_id = client_id
        self.timeout = timeout
        self._conn: Connection | None = None

    def commit(self, offsets: list[TopicPartition]) -> None:
        """Commit ``offsets``; raises KafkaException with the first error the broker answered."""
        if not offsets:
            return
        request = commit_request(self.group_id, self.member(), offsets)
        try:
            if self._conn is None:
                self._conn = connect_coordinator(self.bootstrap, self.group_id, auth=self.auth,
                                                 client_id=self.client_id, timeout=self.timeout)
            answer = self._conn.call(OFFSET_COMMIT, request)
        except BrokerConnectionError as e:
            self.close()
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, f"committing offsets: {e}", retriable=True)) from e
        for topic in answer.topics:
            for p in topic.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise KafkaException(self._error(p.error_code, f"{topic.name}[{p.partition_index}]"))

    def _error(self, code: int, where: str) -> KafkaError:
        moved = code in COORDINATOR_MOVED
        if moved:
            self.close()
        return KafkaError(code, f"offset commit of {where} for group {self.group_id!r}: {error_name(code)}",
                          retriable=moved)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
