"""A Schema Registry serde's settings are checked when the application starts (a missing
``schema.registry.url`` or an unknown strategy stops the start naming it, instead of sending every
record to the deserialization handler), and ``SASL_INHERIT`` takes the Kafka clients' credentials,
``sasl.jaas.config`` included, as Kafka Streams' serdes do."""

from __future__ import annotations

from typing import Any

import pytest

from instance.errors import ConfigException
from instance.serde import StringSerde
from instance.serde.schema_registry import AvroSerde
from instance.testing import TopologyTestDriver
from instance.topology import StreamsBuilder, Topology

SCHEMA = """{"type": "record", "name": "E", "fields": [{"name": "word", "type": "string"}]}"""


def _app(serde: AvroSerde) -> Topology:
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    b.stream("events", value_serde=serde).map_values(lambda e: e["word"]).to("words")
    return b.build()


@pytest.mark.parametrize(("settings", "named"), [
    ({}, "schema.registry.url is not set"),
    ({"schema.registry.url": "http://127.0.0.1:1", "value.subject.name.strategy": "NoSuch"},
     "unknown subject name strategy"),
    ({"schema.registry.url": "http://127.0.0.1:1", "basic.auth.credentials.source": "USER_INFO"},
     "basic.auth.user.info"),
    ({"schema.registry.url": "http://127.0.0.1:1", "basic.auth.credentials.source": "SASL_INHERIT"},
     "sasl.username"),
])
def test_settings_that_cannot_work_stop_the_start(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigException, match=named) as e:
        TopologyTestDriver(_app(AvroSerde({}, topic="events", schema=SCHEMA)), settings)
    assert "topic events" in str(e.value)


def test_sasl_inherit_takes_the_clients_credentials() -> None:
    serde = AvroSerde({}, topic="events", schema=SCHEMA)
    TopologyTestDriver(_app(serde), {
        "schema.registry.url": "http://127.0.0.1:1", "basic.auth.credentials.source": "SASL_INHERIT",
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="bob" password="pw";'})
    assert serde.client()._rest_client.auth == ("bob", "pw")


def test_settings_of_the_serde_itself_need_none_from_the_application() -> None:
    serde = AvroSerde({"schema.registry.url": "http://127.0.0.1:1"}, topic="events", schema=SCHEMA)
    TopologyTestDriver(_app(serde), {})
    assert serde.client()._rest_client.base_urls == ["http://127.0.0.1:1"]
