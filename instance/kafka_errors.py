"""Kafka errors recognised by their code (``KafkaError``), never by their message text, which
differs between brokers and librdkafka versions."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException


def kafka_error(e: BaseException) -> KafkaError | None:
    """The KafkaError a confluent-kafka exception carries (None: not one)."""
    err = e.args[0] if isinstance(e, KafkaException) and e.args else None
    return err if isinstance(err, KafkaError) else None


def error_name(e: BaseException, default: str = "KAFKA_ERROR") -> str:
    """The error code's name (``TOPIC_ALREADY_EXISTS``...), ``default`` when ``e`` carries none."""
    err = kafka_error(e)
    return err.name() if err is not None else default


def is_topic_exists(e: BaseException) -> bool:
    """A topic creation failed only because the topic is there already."""
    err = kafka_error(e)
    return err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS
