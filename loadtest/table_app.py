"""The query benchmark's application: the input topic as a table (string key -> long value) in
the queryable store ``kv``. Topic from ``QBENCH_INPUT_TOPIC``."""

import os

from instance.serde import LongSerde, StringSerde
from instance.topology import StreamsBuilder, Topology

INPUT_TOPIC = os.environ.get("QBENCH_INPUT_TOPIC", "qbench-input")
STORE = "kv"


def build() -> Topology:
    builder = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=LongSerde())
    builder.table(INPUT_TOPIC, STORE)
    return builder.build()
