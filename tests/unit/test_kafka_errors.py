"""Kafka errors by code: a topic that exists is recognised whatever the message says."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from instance.kafka_errors import error_name, is_topic_exists


def test_topic_exists_is_recognised_by_its_code_not_its_text() -> None:
    exists = KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS, "some broker's own words"))
    assert is_topic_exists(exists) and error_name(exists) == "TOPIC_ALREADY_EXISTS"
    worded = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "topic already exists?"))
    assert not is_topic_exists(worded) and error_name(worded) == "TOPIC_AUTHORIZATION_FAILED"
    assert not is_topic_exists(RuntimeError("Topic 'x' already exists."))
    assert error_name(RuntimeError()) == "KAFKA_ERROR"
