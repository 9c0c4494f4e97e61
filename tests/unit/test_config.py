"""StreamsConfig: Kafka Streams setting names, validation, defaults, properties files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from instance.config import StreamsConfig
from instance.errors import ConfigException
from instance.properties_file import load_properties_file

BASE = {"application.id": "my-app", "bootstrap.servers": "127.0.0.1:9092"}


def cfg(over: dict[str, Any] | None = None) -> StreamsConfig:
    return StreamsConfig.from_properties({**BASE, **(over or {})})


def test_minimal_config_and_defaults() -> None:
    c = StreamsConfig.from_properties(BASE)
    assert c.application_id == "my-app"
    assert c.bootstrap_servers == "127.0.0.1:9092"
    assert c.num_stream_threads == 1
    assert c.num_standby_replicas == 0
    assert c.processing_guarantee == "at_least_once"
    assert not c.eos
    assert c.statestore_cache_max_bytes == 10 * 1024 * 1024
    assert c.auto_offset_reset == "earliest"
    assert c.default_deserialization_exception_handler == "log-and-fail"
    assert c.extra == {}


def test_kafka_streams_names_are_read_and_coerced_from_strings() -> None:
    c = StreamsConfig.from_properties({
        **BASE,
        "application.server": "localhost:8080",
        "num.stream.threads": "4",
        "num.standby.replicas": 2,
        "processing.guarantee": "exactly_once_v2",
        "statestore.cache.max.bytes": "0",
        "commit.interval.ms": "250",
        "state.dir": "/var/lib/x",
        "auto.offset.reset": "latest",
        "default.deserialization.exception.handler": "log-and-continue",
        "iqmesh.in.memory.stores": "true",
        "max.poll.records": "10",
    })
    assert c.application_server == "localhost:8080"
    assert c.num_stream_threads == 4
    assert c.num_standby_replicas == 2
    assert c.eos
    assert c.statestore_cache_max_bytes == 0
    assert c.effective_commit_interval_ms == 250
    assert c.state_dir == "/var/lib/x"
    assert c.app_state_dir == Path("/var/lib/x/my-app")
    assert c.auto_offset_reset == "latest"
    assert c.default_deserialization_exception_handler == "log-and-continue"
    assert c.in_memory_stores is True
    assert c.max_poll_records == 10


@pytest.mark.parametrize("value,expected", [
    ("true", True), ("TRUE", True), ("1", True), ("yes", True), (True, True),
    ("false", False), ("0", False), ("no", False), (False, False),
])
def test_boolean_values(value: Any, expected: bool) -> None:
    assert cfg({"iqmesh.in.memory.stores": value}).in_memory_stores is expected


@pytest.mark.parametrize("name,value", [
    ("num.stream.threads", "abc"),
    ("num.stream.threads", "0"),
    ("num.stream.threads", "1.5"),
    ("num.standby.replicas", "-1"),
    ("commit.interval.ms", "soon"),
    ("statestore.cache.max.bytes", "10MB"),
    ("processing.guarantee", "exactly_once"),
    ("processing.guarantee", "at-most-once"),
    ("iqmesh.in.memory.stores", "maybe"),
    ("application.server", "no-port"),
    ("application.server", "host:port"),
    ("application.id", "bad id!"),
    ("application.id", ""),
    ("bootstrap.servers", ""),
    ("auto.offset.reset", "none"),
    ("default.deserialization.exception.handler", "ignore"),
    ("max.poll.records", "0"),
    ("poll.ms", "-5"),
    ("session.timeout.ms", "0"),
])
def test_bad_value_names_the_setting(name: str, value: str) -> None:
    with pytest.raises(ConfigException) as e:
        StreamsConfig.from_properties({**BASE, name: value})
    assert name in str(e.value)


def test_several_problems_are_reported_together() -> None:
    with pytest.raises(ConfigException) as e:
        StreamsConfig.from_properties({**BASE, "num.stream.threads": "0", "auto.offset.reset": "x"})
    assert "num.stream.threads" in str(e.value)
    assert "auto.offset.reset" in str(e.value)


@pytest.mark.parametrize("missing", ["application.id", "bootstrap.servers"])
def test_required_settings(missing: str) -> None:
    props = dict(BASE)
    del props[missing]
    with pytest.raises(ConfigException, match=missing):
        StreamsConfig.from_properties(props)


@pytest.mark.parametrize("name", ["foo.bar", "num.threads", "application_id", "consumer", "admins.x",
                                  "streams.consumer.x"])
def test_unknown_names_are_rejected(name: str) -> None:
    with pytest.raises(ConfigException) as e:
        StreamsConfig.from_properties({**BASE, name: "1"})
    assert name in str(e.value)
    assert "unknown" in str(e.value)


def test_consumer_and_producer_prefixes_pass_through() -> None:
    c = StreamsConfig.from_properties({
        **BASE,
        "consumer.fetch.min.bytes": 1024,
        "consumer.max.partition.fetch.bytes": "1048576",
        "producer.linger.ms": "5",
        "producer.compression.type": "lz4",
    })
    assert c.extra == {"consumer.fetch.min.bytes": "1024", "consumer.max.partition.fetch.bytes": "1048576",
                       "producer.linger.ms": "5", "producer.compression.type": "lz4"}
    main = c.client_config("main.consumer")
    assert main["fetch.min.bytes"] == "1024" and main["max.partition.fetch.bytes"] == "1048576"
    assert "linger.ms" not in main
    producer = c.client_config("producer")
    assert producer["linger.ms"] == "5" and producer["compression.type"] == "lz4"
    assert "fetch.min.bytes" not in producer
    props = c.to_properties()
    assert props["producer.linger.ms"] == "5"
    assert props["application.id"] == "my-app"


def test_consumers_fetch_again_soon_after_a_full_queue_unless_told_otherwise() -> None:
    """librdkafka's 1 s fetch.queue.backoff.ms starves a thread that drains its queue faster."""
    c = cfg({**BASE, "restore.consumer.fetch.queue.backoff.ms": "100"})
    assert c.client_config("main.consumer")["fetch.queue.backoff.ms"] == 10
    assert c.client_config("global.consumer")["fetch.queue.backoff.ms"] == 10
    assert c.client_config("restore.consumer")["fetch.queue.backoff.ms"] == "100"
    assert "fetch.queue.backoff.ms" not in c.client_config("producer")
    assert "fetch.queue.backoff.ms" not in c.client_config("admin")


def test_to_properties_round_trips() -> None:
    c = cfg({"num.stream.threads": "3", "processing.guarantee": "exactly_once_v2",
               "consumer.x": "y"})
    assert StreamsConfig.from_properties(c.to_properties()) == c


def test_commit_interval_defaults_depend_on_the_guarantee() -> None:
    assert cfg().commit_interval_ms is None  # not set
    assert cfg().effective_commit_interval_ms == 30_000
    assert cfg({"processing.guarantee": "at_least_once"}).effective_commit_interval_ms == 30_000
    assert cfg({"processing.guarantee": "exactly_once_v2"}).effective_commit_interval_ms == 100
    # an explicit value wins under both guarantees, including 0
    for g in ("at_least_once", "exactly_once_v2"):
        for ms in (0, 1000):
            c = cfg({"processing.guarantee": g, "commit.interval.ms": str(ms)})
            assert c.effective_commit_interval_ms == ms


def test_config_is_immutable() -> None:
    c = cfg()
    with pytest.raises(AttributeError):
        c.application_id = "other"  # type: ignore[misc]


def test_load_properties_file(tmp_path: Path) -> None:
    p = tmp_path / "streams.properties"
    p.write_text(
        "# a comment\n"
        "! another comment\n"
        "\n"
        "application.id = wordcount\n"
        "bootstrap.servers=broker1:9092,broker2:9092\n"
        "   num.stream.threads=2   \n"
        "state.dir: /tmp/state\n"
        "consumer.session.timeout.ms=45000\n"
        "application.server=host:7070\n"
    )
    props = load_properties_file(p)
    assert props == {
        "application.id": "wordcount",
        "bootstrap.servers": "broker1:9092,broker2:9092",
        "num.stream.threads": "2",
        "state.dir": "/tmp/state",
        "consumer.session.timeout.ms": "45000",
        "application.server": "host:7070",
    }
    c = StreamsConfig.from_properties(props)
    assert c.application_id == "wordcount"
    assert c.num_stream_threads == 2
    assert c.application_server == "host:7070"
    assert c.client_config("restore.consumer")["session.timeout.ms"] == "45000"
    assert load_properties_file(str(p)) == props


def test_load_properties_file_bad_line_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.properties"
    p.write_text("application.id=x\njust-a-word\n")
    with pytest.raises(ConfigException) as e:
        load_properties_file(p)
    assert f"{p}:2" in str(e.value)


def test_load_properties_file_empty_value(tmp_path: Path) -> None:
    p = tmp_path / "e.properties"
    p.write_text("application.server=\n")
    assert load_properties_file(p) == {"application.server": ""}


@pytest.mark.parametrize("name,value", [
    ("commit.interval.ms", "-1"),
    ("statestore.cache.max.bytes", "-1"),
    ("iqmesh.idle.backoff.ms", "-1"),
    ("state.cleanup.delay.ms", "-5"),
    ("task.timeout.ms", "0"),
    ("max.task.idle.ms", "-2"),
    ("metrics.num.samples", "1"),
    ("iqmesh.metrics.port", "65536"),
    ("iqmesh.metrics.port", "-1"),
    ("replication.factor", "0"),
    ("replication.factor", "-2"),
    ("application.server", "127.0.0.1:70000"),
    ("application.server", "127.0.0.1:0"),
])
def test_a_number_out_of_its_range_names_the_setting_and_the_range(name: str, value: str) -> None:
    with pytest.raises(ConfigException) as e:
        StreamsConfig.from_properties({**BASE, name: value})
    assert name in str(e.value) and value in str(e.value)


def test_the_ends_of_the_ranges_are_accepted() -> None:
    c = cfg({"commit.interval.ms": "0", "replication.factor": "-1", "max.task.idle.ms": "-1",
             "iqmesh.metrics.port": "65535", "application.server": "h:65535"})
    assert (c.effective_commit_interval_ms, c.replication_factor, c.max_task_idle_ms) == (0, -1, -1)
