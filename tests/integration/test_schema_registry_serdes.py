"""The Schema Registry serdes' settings against a real registry (Apicurio, no broker needed):
the Confluent wire format, auto.register.schemas, use.latest.version, subject name strategies,
JSON Schema, Protobuf, and what confluent-kafka's own deserializer makes of iqmesh's bytes."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import struct
import sys
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from instance.config import StreamsConfig
from instance.errors import ConfigException
from instance.local.schema_registry import RegistryHandle
from instance.serde import StringSerde
from instance.serde.schema_registry import (
    AvroSerde,
    JsonSchemaSerde,
    ProtobufSerde,
    registry_client,
    subject_name_strategy,
)
from instance.testing import TopologyTestDriver
from instance.topology import Materialized, StreamsBuilder

pytestmark = pytest.mark.integration

SCHEMA = """{"type": "record", "name": "WordEvent", "namespace": "iqmesh.test",
 "fields": [{"name": "word", "type": "string"}, {"name": "n", "type": "long"}]}"""


def _subjects(registry: RegistryHandle) -> list[str]:
    with urllib.request.urlopen(f"{registry.url}/subjects", timeout=10) as r:
        return list(json.loads(r.read()))


def _latest_id(registry: RegistryHandle, subject: str) -> int:
    with urllib.request.urlopen(f"{registry.url}/subjects/{subject}/versions/latest", timeout=10) as r:
        return int(json.loads(r.read())["id"])


def test_wire_format_is_magic_byte_schema_id_payload(registry: RegistryHandle, unique: str) -> None:
    serde = AvroSerde({"schema.registry.url": registry.url}, topic=f"t-{unique}", schema=SCHEMA)
    data = serde.serialize({"word": "hi", "n": 3})
    assert data is not None
    assert data[0] == 0
    assert struct.unpack(">i", data[1:5])[0] == _latest_id(registry, f"t-{unique}-value")
    assert data[5:] == b"\x04hi\x06"  # Avro binary: length-prefixed string, zig-zag long
    # a serde with no schema of its own reads it (the writer's schema, fetched by id); its settings
    # may come from Kafka Streams' configure(properties)
    reader = AvroSerde({}, topic=f"t-{unique}")
    reader.configure({"schema.registry.url": registry.url, "application.id": "ignored"})
    assert reader.deserialize(data) == {"word": "hi", "n": 3}
    assert reader.deserialize(None) is None and serde.serialize(None) is None
    # and so does confluent-kafka's own deserializer
    de = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    assert de(data, SerializationContext(f"t-{unique}", MessageField.VALUE)) == {"word": "hi", "n": 3}


def test_auto_register_off_refuses_an_unregistered_subject(registry: RegistryHandle, unique: str) -> None:
    serde = AvroSerde({"schema.registry.url": registry.url, "auto.register.schemas": "false"},
                      topic=f"noreg-{unique}", schema=SCHEMA)
    with pytest.raises(SchemaRegistryError):
        serde.serialize({"word": "x", "n": 1})
    assert f"noreg-{unique}-value" not in _subjects(registry)


def test_use_latest_version_writes_with_the_subjects_latest_schema(registry: RegistryHandle, unique: str) -> None:
    topic = f"latest-{unique}"
    AvroSerde({"schema.registry.url": registry.url}, topic=topic, schema=SCHEMA).serialize({"word": "a", "n": 1})
    serde = AvroSerde({"schema.registry.url": registry.url, "use.latest.version": "true",
                       "auto.register.schemas": "false"}, topic=topic)
    data = serde.serialize({"word": "b", "n": 2})
    assert data is not None and struct.unpack(">i", data[1:5])[0] == _latest_id(registry, f"{topic}-value")
    assert serde.deserialize(data) == {"word": "b", "n": 2}


@pytest.mark.parametrize("strategy, subject", [
    ("io.confluent.kafka.serializers.subject.RecordNameStrategy", "iqmesh.test.WordEvent"),
    ("TopicRecordNameStrategy", "{topic}-iqmesh.test.WordEvent"),
])
def test_subject_name_strategies(registry: RegistryHandle, unique: str, strategy: str, subject: str) -> None:
    topic = f"strat-{unique}"
    serde = AvroSerde({"schema.registry.url": registry.url, "value.subject.name.strategy": strategy},
                      topic=topic, schema=SCHEMA)
    data = serde.serialize({"word": "s", "n": 5})
    assert data is not None
    assert struct.unpack(">i", data[1:5])[0] == _latest_id(registry, subject.format(topic=topic))
    assert f"{topic}-value" not in _subjects(registry)


def test_unknown_strategy_and_auth_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown subject name strategy"):
        subject_name_strategy("NoSuchStrategy")
    with pytest.raises(ValueError, match="basic.auth.user.info"):
        registry_client({"schema.registry.url": "http://127.0.0.1:1", "basic.auth.credentials.source": "USER_INFO"})
    with pytest.raises(ValueError, match="sasl.username"):
        registry_client({"schema.registry.url": "http://127.0.0.1:1",
                         "basic.auth.credentials.source": "SASL_INHERIT"})
    with pytest.raises(ValueError, match="schema.registry.url"):
        registry_client({})


def test_user_info_is_sent_as_basic_auth(registry: RegistryHandle) -> None:
    """USER_INFO and SASL_INHERIT give the client the credentials (Apicurio here runs without
    auth, so the request succeeds either way: what is checked is the client's configuration)."""
    client = registry_client({"schema.registry.url": registry.url, "basic.auth.credentials.source": "USER_INFO",
                              "basic.auth.user.info": "alice:secret"})
    assert client._rest_client.auth == ("alice", "secret")
    client = registry_client({"schema.registry.url": registry.url, "basic.auth.credentials.source": "SASL_INHERIT",
                              "sasl.username": "bob", "sasl.password": "pw"})
    assert client._rest_client.auth == ("bob", "pw")
    assert isinstance(client.get_subjects(), list)


def test_json_schema_serde_round_trip(registry: RegistryHandle, unique: str) -> None:
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Word",
                         "type": "object", "properties": {"word": {"type": "string"}, "n": {"type": "integer"}},
                         "required": ["word", "n"]})
    serde = JsonSchemaSerde({"schema.registry.url": registry.url}, topic=f"js-{unique}", schema=schema)
    data = serde.serialize({"word": "j", "n": 7})
    assert data is not None and data[0] == 0
    assert struct.unpack(">i", data[1:5])[0] == _latest_id(registry, f"js-{unique}-value")
    assert json.loads(data[5:]) == {"word": "j", "n": 7}
    reader = JsonSchemaSerde({"schema.registry.url": registry.url}, topic=f"js-{unique}")
    assert reader.deserialize(data) == {"word": "j", "n": 7}
    with pytest.raises(Exception, match="(?i)valid|required"):
        serde.serialize({"word": "missing n"})


PROTOS = Path(__file__).resolve().parent / "protos"


def _compiled_proto(out: Path) -> ModuleType:
    """word_event.proto compiled with grpcio-tools' protoc and imported."""
    from grpc_tools import protoc

    assert protoc.main(["protoc", f"-I{PROTOS}", f"--python_out={out}", str(PROTOS / "word_event.proto")]) == 0
    spec = importlib.util.spec_from_file_location("word_event_pb2", out / "word_event_pb2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["word_event_pb2"] = module
    spec.loader.exec_module(module)
    return module


def test_protobuf_serde_round_trip(registry: RegistryHandle, unique: str, tmp_path: Path) -> None:
    pb = _compiled_proto(tmp_path)
    topic = f"pb-{unique}"
    serde = ProtobufSerde({"schema.registry.url": registry.url}, topic=topic, message_type=pb.WordEvent)
    data = serde.serialize({"word": "p", "user": "eve", "n": 4})
    assert data is not None and data[0] == 0
    assert struct.unpack(">i", data[1:5])[0] == _latest_id(registry, f"{topic}-value")
    assert data[5] == 0  # the message indexes: the file's first message
    assert pb.WordEvent.FromString(data[6:]) == pb.WordEvent(word="p", user="eve", n=4)
    with urllib.request.urlopen(f"{registry.url}/subjects/{topic}-value/versions/latest", timeout=10) as r:
        assert json.loads(r.read()).get("schemaType") == "PROTOBUF"
    assert serde.deserialize(data) == {"word": "p", "user": "eve", "n": 4}
    assert serde.serialize(pb.WordEvent(word="q")) is not None


@dataclasses.dataclass(frozen=True)
class WordEvent:
    word: str
    n: int


def test_the_applications_settings_reach_the_serdes_and_records_map_to_a_dataclass(
        registry: RegistryHandle, unique: str) -> None:
    """As Kafka Streams configures serdes from its configuration: the serdes below carry no
    registry URL of their own, the application's ``schema.registry.url`` reaches them (the store's
    serde too, wrapped by the store's layers), and a ``record_type`` gives dataclasses."""
    topic, out = f"in-{unique}", f"out-{unique}"
    events = AvroSerde({}, topic=topic, schema=SCHEMA, record_type=WordEvent)
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    stream = b.stream(topic, value_serde=events)
    stream.group_by(lambda _k, e: e.word, value_serde=events).reduce(
        lambda old, new: WordEvent(new.word, old.n + new.n), Materialized.as_("totals").with_value_serde(events))
    stream.map_values(lambda e: WordEvent(e.word.upper(), e.n)).to(
        out, value_serde=AvroSerde({}, topic=out, schema=SCHEMA))
    writer = AvroSerde({"schema.registry.url": registry.url}, topic=topic, schema=SCHEMA)
    driver = TopologyTestDriver(b.build(), {"schema.registry.url": registry.url})
    source = driver.create_input_topic(topic, StringSerde(), writer)
    for word, n in (("a", 1), ("b", 5), ("a", 2)):
        source.pipe_input(None, {"word": word, "n": n})
    assert driver.get_key_value_store("totals").get("a") == WordEvent("a", 3)
    reader = AvroSerde({"schema.registry.url": registry.url}, topic=out)
    output = driver.create_output_topic(out, StringSerde(), reader)
    assert [v for _k, v in output.read_key_values_to_list()] == [
        {"word": "A", "n": 1}, {"word": "B", "n": 5}, {"word": "A", "n": 2}]
    assert f"{out}-value" in _subjects(registry)


def test_serde_settings_are_the_applications_and_never_reach_the_kafka_clients() -> None:
    config = StreamsConfig.from_properties({"application.id": "a", "bootstrap.servers": "b:1",
                                            "schema.registry.url": "http://r:8081",
                                            "basic.auth.credentials.source": "USER_INFO",
                                            "auto.register.schemas": "false"})
    assert config.serde_settings == {"schema.registry.url": "http://r:8081",
                                     "basic.auth.credentials.source": "USER_INFO",
                                     "auto.register.schemas": "false"}
    assert not any(k.startswith(("schema.", "basic.", "auto.")) for k in config.client_config("producer"))
    with pytest.raises(ConfigException, match="unknown setting.*schem.registry.url"):
        StreamsConfig.from_properties({"application.id": "a", "bootstrap.servers": "b:1",
                                       "schem.registry.url": "x"})
