"""The broker side of a reset's offsets and topics, through confluent-kafka's AdminClient: the
partitions of topics, their earliest / latest offsets (and the first at a time), the group's
committed offsets, commits, and topic deletion (waited for until the metadata no longer lists
them, so an instance started right after creates them anew instead of finding them half gone)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from instance.kafka_errors import error_name, kafka_error
from instance.reset.errors import ResetError
from instance.reset.positions import Bounds, TopicPart
from instance.runtime.internal_topics import existing_topics

#: seconds a broker has to answer one admin request
ADMIN_TIMEOUT_S = 30.0
#: seconds deleted topics have to leave the metadata
DELETE_TIMEOUT_S = 60.0


def topics(admin: AdminClient) -> dict[str, int]:
    """Every topic and its partition count."""
    return existing_topics(admin, timeout=ADMIN_TIMEOUT_S)


def partitions(counts: Mapping[str, int], names: Iterable[str]) -> list[TopicPart]:
    return [(t, p) for t in sorted(set(names)) for p in range(counts[t])]


def _offsets(admin: AdminClient, tps: list[TopicPart], spec: OffsetSpec, what: str) -> dict[TopicPart, int]:
    if not tps:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in tps}, request_timeout=ADMIN_TIMEOUT_S)
    out: dict[TopicPart, int] = {}
    for tp, fut in futures.items():
        try:
            out[(tp.topic, tp.partition)] = fut.result().offset
        except KafkaException as e:
            raise ResetError(error_name(e), f"listing the {what} offset of {tp.topic}[{tp.partition}] failed: "
                             f"{_text(e)}; nothing was changed") from None
    return out


def log_bounds(admin: AdminClient, tps: list[TopicPart], committed: Mapping[TopicPart, int],
               at_time: int | None = None) -> dict[TopicPart, Bounds]:
    """The :class:`Bounds` of each partition; ``at_time`` (epoch ms): also the first offset at or
    after that time (ListOffsets by timestamp)."""
    earliest = _offsets(admin, tps, OffsetSpec.earliest(), "earliest")
    latest = _offsets(admin, tps, OffsetSpec.latest(), "latest")
    timed = _offsets(admin, tps, OffsetSpec.for_timestamp(at_time), "timed") if at_time is not None else {}
    return {tp: Bounds(earliest[tp], latest[tp], committed.get(tp),
                       timed[tp] if timed.get(tp, -1) >= 0 else None) for tp in tps}


def committed_offsets(admin: AdminClient, group: str) -> dict[TopicPart, int]:
    """The group's committed offsets (every partition it has one for; none for a group that does
    not exist)."""
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                            request_timeout=ADMIN_TIMEOUT_S)[group]
    try:
        listed = fut.result()
    except KafkaException as e:
        err = kafka_error(e)
        if err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
            return {}
        raise ResetError(error_name(e), f"reading the committed offsets of group {group!r} failed: {_text(e)}; "
                         "nothing was changed") from None
    return {(tp.topic, tp.partition): tp.offset for tp in listed.topic_partitions or []
            if tp.error is None and tp.offset >= 0}


def commit(admin: AdminClient, group: str, offsets: Mapping[TopicPart, int], what: str, done: str) -> None:
    """Commit ``offsets`` for ``group`` (which must have no members); ``what`` names them and
    ``done`` what the reset did before, for the error line."""
    if not offsets:
        return
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
    try:
        answered = admin.alter_consumer_group_offsets([request], request_timeout=ADMIN_TIMEOUT_S)[group].result()
    except KafkaException as e:
        raise ResetError(error_name(e), f"committing the {what} of group {group!r} failed: {_text(e)}; {done}") \
            from None
    for tp in answered.topic_partitions or []:
        if tp.error is not None:
            raise ResetError(tp.error.name(), f"committing the {what} of group {group!r} failed for "
                             f"{tp.topic}[{tp.partition}]: {tp.error.str()}; {done}")


def delete_topics(admin: AdminClient, names: list[str], done: str) -> None:
    """Delete ``names`` and wait until the metadata no longer lists them (a topic gone already is
    no error)."""
    if not names:
        return
    for topic, fut in admin.delete_topics(names, operation_timeout=ADMIN_TIMEOUT_S,
                                          request_timeout=ADMIN_TIMEOUT_S).items():
        try:
            fut.result()
        except KafkaException as e:
            err = kafka_error(e)
            if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise ResetError(error_name(e), f"deleting internal topic {topic!r} failed: {_text(e)}; {done}") from None
    deadline = time.monotonic() + DELETE_TIMEOUT_S
    while True:
        left = sorted(set(names) & set(topics(admin)))
        if not left:
            return
        if time.monotonic() > deadline:
            raise ResetError("TOPIC_DELETION_PENDING", f"internal topics {left} are still listed "
                             f"{DELETE_TIMEOUT_S:.0f}s after their deletion; {done}")
        time.sleep(0.2)


def _text(e: KafkaException) -> str:
    err = kafka_error(e)
    return err.str() if err is not None else str(e)

