"""Counts words carried in Avro records (Schema Registry, Confluent wire format).

Input ``AVRO_INPUT_TOPIC``: null keys, values ``WordEvent {word, user}`` written by any Avro
producer (the Java peer in tests/integration/avro_peer). Stores: ``counts`` (word -> long) and
``latest`` (user -> that user's latest WordEvent, kept as Avro, shown decoded in query answers).
Every event is written again, its word upper-cased, as Avro to ``AVRO_OUTPUT_TOPIC``.
The registry is the application's ``schema.registry.url`` setting, which the runtime hands to the
serdes (``configure``), as Kafka Streams does.
"""

import os

from instance.serde import StringSerde
from instance.serde.schema_registry import AvroSerde
from instance.topology import Materialized, StreamsBuilder, Topology

INPUT_TOPIC = os.environ.get("AVRO_INPUT_TOPIC", "word-events")
OUTPUT_TOPIC = os.environ.get("AVRO_OUTPUT_TOPIC", "word-events-upper")
SCHEMA = """{"type": "record", "name": "WordEvent", "namespace": "iqmesh.test",
 "fields": [{"name": "word", "type": "string"}, {"name": "user", "type": "string"}]}"""


def build() -> Topology:
    config: dict[str, str] = {}  # schema.registry.url comes from the application's settings
    # one serde per topic it writes (TopicNameStrategy: the subject is <topic>-value); the input's
    # serde also serves the internal topics and the store, writing under the input's subject
    events_serde = AvroSerde(config, topic=INPUT_TOPIC, schema=SCHEMA)
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    events = b.stream(INPUT_TOPIC, value_serde=events_serde)
    events.map_values(lambda e: e["word"]).group_by(lambda _k, word: word).count("counts")
    (events.group_by(lambda _k, e: e["user"], value_serde=events_serde)
           .reduce(lambda _old, new: new, Materialized.as_("latest").with_value_serde(events_serde)))
    (events.map_values(lambda e: {"word": e["word"].upper(), "user": e["user"]})
           .to(OUTPUT_TOPIC, value_serde=AvroSerde(config, topic=OUTPUT_TOPIC, schema=SCHEMA)))
    return b.build()
