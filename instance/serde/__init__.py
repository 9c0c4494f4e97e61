"""Serdes with Java-compatible encodings (Kafka's StringSerde, IntegerSerde, LongSerde...).

The built-in serdes live in the shared core (:mod:`kernel.serdes`), because the routing client
serializes query keys with them as the instances do, as Kafka's serializers live in kafka-clients
rather than in Kafka Streams. They are re-exported here, the names applications import
(``from instance.serde import StringSerde``); the windowed and change serdes are the runtime's own.
"""

from kernel.serdes import (
    BytesSerde,
    IntSerde,
    JsonSerde,
    LongSerde,
    Serde,
    StringSerde,
    serde_by_name,
)

__all__ = ["Serde", "BytesSerde", "StringSerde", "IntSerde", "LongSerde", "JsonSerde", "serde_by_name"]
