"""Serdes with Java-compatible encodings (Kafka's StringSerde, IntegerSerde, LongSerde...)."""

from instance.serde.serdes import (
    BytesSerde,
    IntSerde,
    JsonSerde,
    LongSerde,
    Serde,
    StringSerde,
    serde_by_name,
)

__all__ = ["Serde", "BytesSerde", "StringSerde", "IntSerde", "LongSerde", "JsonSerde", "serde_by_name"]
