"""Schema Registry serdes: Avro, JSON Schema and Protobuf in the Confluent wire format.

Built on confluent-kafka's Schema Registry client and serializers (the ``avro``, ``protobuf`` and
``schemaregistry`` extras). A record is magic byte 0, the schema id (4 bytes, big-endian) and the
payload (Protobuf: the message indexes, then the payload), as Java's ``KafkaAvroSerializer``,
``KafkaJsonSchemaSerializer`` and ``KafkaProtobufSerializer`` write it. Values are Python
dicts (an Avro record decodes to a dict; ``serialize`` takes one), so query answers show them as
JSON objects.

Settings are Kafka Streams' (``schema.registry.url``, ``basic.auth.credentials.source``,
``basic.auth.user.info``, ``auto.register.schemas``, ``use.latest.version``,
``key.subject.name.strategy`` / ``value.subject.name.strategy`` by Java class name or short name).
A serde is bound to the topic whose subject it writes under (``TopicNameStrategy``: ``<topic>-value``);
Kafka Streams passes the topic on each call, iqmesh's serdes take it once.

A record whose schema cannot be fetched (unknown id, registry down) raises from ``deserialize``,
so it goes to the deserialization exception handler with its topic, partition and offset, as any
record that does not deserialize.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.serialization import MessageField, SerializationContext

__all__ = ["AvroSerde", "JsonSchemaSerde", "ProtobufSerde", "avro_decoder", "registry_client", "strip_frame",
           "subject_name_strategy"]

_STRATEGIES: dict[str, Callable[..., Any]] = {
    "TopicNameStrategy": topic_subject_name_strategy,
    "TopicRecordNameStrategy": topic_record_subject_name_strategy,
    "RecordNameStrategy": record_subject_name_strategy,
}
_TRUE = {"true", "1", "yes"}


def _flag(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in _TRUE


def subject_name_strategy(name: str) -> Callable[..., Any]:
    """A Java strategy class name (``io.confluent.kafka.serializers.subject.TopicNameStrategy``) or
    its short name, as confluent-kafka's function."""
    short = name.rsplit(".", 1)[-1]
    try:
        return _STRATEGIES[short]
    except KeyError:
        raise ValueError(f"unknown subject name strategy {name!r}; known: {', '.join(_STRATEGIES)}") from None


def registry_client(config: Mapping[str, Any]) -> SchemaRegistryClient:
    """A client from Kafka Streams' settings. ``basic.auth.credentials.source``: ``USER_INFO``
    (``basic.auth.user.info`` = ``user:password``), ``URL`` (the user info in the URL) or
    ``SASL_INHERIT`` (the Kafka client's ``sasl.username`` / ``sasl.password``)."""
    url = config.get("schema.registry.url")
    if not url:
        raise ValueError("schema.registry.url is not set")
    conf: dict[str, Any] = {"url": str(url).split(",")[0].strip()}
    source = str(config.get("basic.auth.credentials.source", "URL")).upper()
    user_info = config.get("basic.auth.user.info") or config.get("schema.registry.basic.auth.user.info")
    if source == "USER_INFO":
        if not user_info:
            raise ValueError("basic.auth.credentials.source=USER_INFO needs basic.auth.user.info")
        conf["basic.auth.user.info"] = str(user_info)
    elif source == "SASL_INHERIT":
        user, password = config.get("sasl.username"), config.get("sasl.password")
        if not user or password is None:
            raise ValueError("basic.auth.credentials.source=SASL_INHERIT needs sasl.username and sasl.password")
        conf["basic.auth.user.info"] = f"{user}:{password}"
    elif source != "URL":
        raise ValueError(f"basic.auth.credentials.source={source}: expected URL, USER_INFO or SASL_INHERIT")
    for key, ours in (("schema.registry.ssl.truststore.location", "ssl.ca.location"),
                      ("schema.registry.ssl.ca.location", "ssl.ca.location")):
        if config.get(key):
            conf[ours] = config[key]
    return SchemaRegistryClient(conf)


def strip_frame(data: bytes) -> bytes:
    """The payload of a Confluent-framed record (magic byte 0 and a 4-byte schema id before it);
    ValueError if ``data`` is not one."""
    if len(data) < 5 or data[0] != 0:
        raise ValueError("not in the Confluent wire format (magic byte 0, schema id, payload)")
    return data[5:]


def avro_decoder(config: Mapping[str, Any]) -> Callable[[bytes], Any]:
    """Any Confluent-framed Avro record as Python data, read with its writer's schema (fetched by
    the id in the frame): for readers that know no topic or reader schema (the snapshot job)."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    de = AvroDeserializer(registry_client(config))
    ctx = SerializationContext("", MessageField.VALUE)
    return lambda data: de(data, ctx)


class _RegistrySerde:
    """What the Avro, JSON Schema and Protobuf serdes share: settings, a client made on first use,
    one confluent-kafka serializer and one deserializer, made on first use too."""

    name = "schema-registry"

    def __init__(self, config: Mapping[str, Any], *, topic: str, schema: str | None = None,
                 is_key: bool = False, client: SchemaRegistryClient | None = None) -> None:
        self._config = dict(config)
        self._topic = topic
        self._schema = schema
        self._ctx = SerializationContext(topic, MessageField.KEY if is_key else MessageField.VALUE)
        self._is_key = is_key
        self._client = client
        self._lock = threading.Lock()
        self._ser: Callable[[Any, SerializationContext], bytes | None] | None = None
        self._de: Callable[[bytes, SerializationContext], Any] | None = None

    def configure(self, properties: Mapping[str, Any]) -> None:
        """Kafka Streams' ``Serde.configure``: the application's settings, under the serde's own;
        before the first ``serialize`` / ``deserialize``. Settings that cannot work (no
        ``schema.registry.url``, credentials missing, an unknown strategy) raise ValueError here,
        at start-up, not at the first record (where each record would go to the handler)."""
        self._config = {**properties, **self._config}
        try:
            self.client()  # no request yet: the settings only
            self._serializer_conf()
        except ValueError as e:
            raise ValueError(f"the {self.name} serde of topic {self._topic}: {e}") from None

    def _serializer_conf(self) -> dict[str, Any]:
        side = "key" if self._is_key else "value"
        conf: dict[str, Any] = {
            "auto.register.schemas": _flag(self._config.get("auto.register.schemas", True)),
            "use.latest.version": _flag(self._config.get("use.latest.version", False)),
        }
        strategy = self._config.get(f"{side}.subject.name.strategy")
        if strategy:
            conf["subject.name.strategy"] = subject_name_strategy(str(strategy))
        return conf

    def _deserializer_conf(self) -> dict[str, Any]:
        conf = self._serializer_conf()
        del conf["auto.register.schemas"]
        return conf

    def client(self) -> SchemaRegistryClient:
        if self._client is None:
            self._client = registry_client(self._config)
        return self._client

    def _make_serializer(self) -> Callable[[Any, SerializationContext], bytes | None]:
        raise NotImplementedError

    def _make_deserializer(self) -> Callable[[bytes, SerializationContext], Any]:
        raise NotImplementedError

    def serialize(self, value: Any) -> bytes | None:
        if value is None:
            return None
        ser = self._ser
        if ser is None:
            with self._lock:
                ser = self._ser = self._ser or self._make_serializer()
        return ser(value, self._ctx)

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        de = self._de
        if de is None:
            with self._lock:
                de = self._de = self._de or self._make_deserializer()
        return de(data, self._ctx)

    def parse(self, text: str) -> Any:
        return json.loads(text)


class AvroSerde(_RegistrySerde):
    """Kafka Streams' ``GenericAvroSerde``: Avro records as dicts; with ``record_type`` (a
    dataclass whose fields are the record's), its ``SpecificAvroSerde``: records as instances of
    it. ``schema`` (the Avro schema as JSON text) is what ``serialize`` writes with; without it,
    only ``use.latest.version=true`` can serialize (the subject's latest schema). ``deserialize``
    reads with the writer's schema."""

    name = "avro"

    def __init__(self, config: Mapping[str, Any], *, topic: str, schema: str | None = None,
                 is_key: bool = False, client: SchemaRegistryClient | None = None,
                 record_type: type | None = None) -> None:
        super().__init__(config, topic=topic, schema=schema, is_key=is_key, client=client)
        if record_type is not None and not dataclasses.is_dataclass(record_type):
            raise TypeError(f"record_type must be a dataclass, not {record_type!r}")
        self._record_type = record_type

    def _make_serializer(self) -> Callable[[Any, SerializationContext], bytes | None]:
        from confluent_kafka.schema_registry.avro import AvroSerializer

        def to_dict(value: Any, _ctx: SerializationContext | None) -> Any:
            is_record = dataclasses.is_dataclass(value) and not isinstance(value, type)
            return dataclasses.asdict(value) if is_record else value  # type: ignore[arg-type]
        return AvroSerializer(self.client(), self._schema, to_dict=to_dict, conf=self._serializer_conf())

    def _make_deserializer(self) -> Callable[[bytes, SerializationContext], Any]:
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        record_type = self._record_type
        if record_type is None:
            return AvroDeserializer(self.client(), conf=self._deserializer_conf())
        return AvroDeserializer(self.client(), conf=self._deserializer_conf(),
                                from_dict=lambda d, _ctx: record_type(**d))


class JsonSchemaSerde(_RegistrySerde):
    """Kafka Streams' ``KafkaJsonSchemaSerde``: JSON values checked against a JSON Schema."""

    name = "json-schema"

    def _make_serializer(self) -> Callable[[Any, SerializationContext], bytes | None]:
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        return JSONSerializer(self._schema, self.client(), conf=self._serializer_conf())

    def _make_deserializer(self) -> Callable[[bytes, SerializationContext], Any]:
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer

        return JSONDeserializer(self._schema, schema_registry_client=self.client(),
                                conf=self._deserializer_conf())


class ProtobufSerde(_RegistrySerde):
    """Kafka Streams' ``KafkaProtobufSerde`` for one generated message class. ``serialize`` takes a
    message or a dict (field names as in the .proto); ``deserialize`` gives a dict (protobuf's JSON
    mapping with the .proto's field names and every field present: 64-bit integers as strings), or
    the message itself with ``as_dict=False``."""

    name = "protobuf"

    def __init__(self, config: Mapping[str, Any], *, topic: str, message_type: type,
                 is_key: bool = False, client: SchemaRegistryClient | None = None, as_dict: bool = True) -> None:
        super().__init__(config, topic=topic, is_key=is_key, client=client)
        self._message_type = message_type
        self._as_dict = as_dict

    def _make_serializer(self) -> Callable[[Any, SerializationContext], bytes | None]:
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from google.protobuf.json_format import ParseDict

        conf = {**self._serializer_conf(), "use.deprecated.format": False}
        ser = ProtobufSerializer(self._message_type, self.client(), conf=conf)  # type: ignore[arg-type]
        message_type = self._message_type

        def serialize(value: Any, ctx: SerializationContext) -> bytes | None:
            if isinstance(value, dict):
                value = ParseDict(value, message_type())
            return ser(value, ctx)
        return serialize

    def _make_deserializer(self) -> Callable[[bytes, SerializationContext], Any]:
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
        from google.protobuf.json_format import MessageToDict

        conf = {**self._deserializer_conf(), "use.deprecated.format": False}
        de = ProtobufDeserializer(self._message_type, conf=conf,  # type: ignore[arg-type]
                                  schema_registry_client=self.client())
        if not self._as_dict:
            return de

        def deserialize(data: bytes, ctx: SerializationContext) -> Any:
            msg = de(data, ctx)
            return None if msg is None else MessageToDict(msg, preserving_proto_field_name=True,
                                                          always_print_fields_with_no_presence=True)
        return deserialize
