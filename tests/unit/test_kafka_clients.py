"""Every Kafka client's settings from one place, with Kafka Streams' prefixes (kernel/kafka_clients.py)."""

from __future__ import annotations

import pytest

from instance.config import StreamsConfig
from instance.errors import ConfigException
from instance.runtime.rebalance_protocol import CLASSIC, CONSUMER, main_consumer_settings

BASE = {"application.id": "app", "bootstrap.servers": "b:9092"}
SECURED = {
    **BASE,
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                        'username="alice" password="s3\\"cret";',
    "ssl.ca.location": "/etc/ca.pem",
    "consumer.fetch.min.bytes": "10",
    "main.consumer.fetch.min.bytes": "20",
    "restore.consumer.max.poll.interval.ms": "60000",
    "global.consumer.client.rack": "r1",
    "producer.linger.ms": "7",
    "admin.request.timeout.ms": "3000",
}


def test_unprefixed_security_settings_reach_every_client() -> None:
    c = StreamsConfig.from_properties(SECURED)
    for kind in ("main.consumer", "restore.consumer", "global.consumer", "producer", "admin"):
        conf = c.client_config(kind)  # type: ignore[arg-type]
        assert conf["security.protocol"] == "SASL_SSL", kind
        assert conf["sasl.mechanism"] == "SCRAM-SHA-512"
        assert (conf["sasl.username"], conf["sasl.password"]) == ("alice", 's3\\"cret')
        assert "sasl.jaas.config" not in conf
        assert conf["ssl.ca.location"] == "/etc/ca.pem"
        assert conf["bootstrap.servers"] == "b:9092"


def test_the_specific_prefix_wins_over_consumer_and_each_reaches_only_its_client() -> None:
    c = StreamsConfig.from_properties(SECURED)
    assert c.client_config("main.consumer")["fetch.min.bytes"] == "20"
    assert c.client_config("restore.consumer")["fetch.min.bytes"] == "10"
    assert c.client_config("global.consumer")["fetch.min.bytes"] == "10"
    assert c.client_config("restore.consumer")["max.poll.interval.ms"] == "60000"
    assert "max.poll.interval.ms" not in c.client_config("main.consumer")
    assert c.client_config("global.consumer")["client.rack"] == "r1"
    assert "client.rack" not in c.client_config("restore.consumer")
    producer, admin = c.client_config("producer"), c.client_config("admin")
    assert producer["linger.ms"] == "7" and "fetch.min.bytes" not in producer
    assert admin["request.timeout.ms"] == "3000" and "linger.ms" not in admin


def test_the_user_setting_wins_over_the_runtime_default() -> None:
    c = StreamsConfig.from_properties({**BASE, "main.consumer.queued.max.messages.kbytes": "1024"})
    assert c.client_config("main.consumer", **{"queued.max.messages.kbytes": 65536})["queued.max.messages.kbytes"] \
        == "1024"


@pytest.mark.parametrize(("name", "hint"), [("ssl.truststore.location", "ssl.ca.location"),
                                            ("consumer.ssl.keystore.location", "ssl.certificate.location")])
def test_java_stores_are_refused_with_the_setting_to_use(name: str, hint: str) -> None:
    c = StreamsConfig.from_properties({**BASE, name: "/x.jks"})
    with pytest.raises(ConfigException, match=hint):
        c.client_config("main.consumer")


def test_a_jaas_config_without_credentials_is_a_clear_error() -> None:
    c = StreamsConfig.from_properties({**BASE, "sasl.jaas.config": "com.example.Module required;"})
    with pytest.raises(ConfigException, match="sasl.username"):
        c.client_config("admin")


def test_a_misspelt_setting_is_still_refused() -> None:
    with pytest.raises(ConfigException, match="unknown setting"):
        StreamsConfig.from_properties({**BASE, "num.stream.thread": "2"})


@pytest.mark.parametrize("name", ["consumer.group.protocol", "main.consumer.group.protocol"])
def test_the_group_protocol_is_one_setting_for_every_stream_thread(name: str) -> None:
    with pytest.raises(ConfigException, match="set group.protocol instead"):
        StreamsConfig.from_properties({**BASE, name: "consumer"})


def test_the_consumer_protocol_drops_the_settings_the_broker_owns() -> None:
    c = StreamsConfig.from_properties({**BASE, "group.protocol": "Consumer"})
    assert c.group_protocol == CONSUMER
    classic = c.client_config("main.consumer",
                              **{"session.timeout.ms": 10_000, "partition.assignment.strategy": "range"})
    settings = main_consumer_settings(c.group_protocol, classic)
    assert settings["group.protocol"] == "consumer" and settings["group.remote.assignor"] == "range"
    assert "session.timeout.ms" not in settings and "partition.assignment.strategy" not in settings
    assert main_consumer_settings(CLASSIC, classic) == classic


@pytest.mark.parametrize(("props", "message"), [
    ({"group.protocol": "eager"}, "classic, consumer or streams"),
    ({"group.protocol": "consumer", "main.consumer.group.remote.assignor": "uniform"}, "co-partitioned"),
])
def test_group_protocols_that_cannot_run_a_topology_are_refused(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigException, match=message):
        StreamsConfig.from_properties({**BASE, **props})
