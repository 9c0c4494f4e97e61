"""Kafka Streams' ``Consumed``, ``Produced`` and ``Grouped`` in snake_case, so a Java topology
ports line by line: ``builder.stream("in", Consumed.with_(S, S))``, ``stream.to("out",
Produced.with_(S, L))``, ``stream.group_by_key(Grouped.with_(S, S))``. Each is immutable; every
``with_*`` returns a copy. The DSL's keyword arguments (``key_serde=``...) keep working beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from instance.errors import TopologyException
from kernel.serdes import Serde


class _CallableExtractor:
    """A plain ``fn(record, partition_time) -> timestamp`` as a timestamp extractor."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def extract(self, record: Any, partition_time: int) -> int:
        return int(self.fn(record, partition_time))


def _extractor(ex: Any) -> Any:
    if ex is None or hasattr(ex, "extract"):
        return ex
    if callable(ex):
        return _CallableExtractor(ex)
    raise TopologyException(f"a timestamp extractor needs extract(record, partition_time) or to be "
                            f"callable, got {type(ex).__name__}")


@dataclass(frozen=True)
class Consumed:
    """How a source reads its topic: serdes, a timestamp extractor of its own, the source node's
    name (Kafka Streams' ``Consumed``; offset reset policies are not supported)."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    timestamp_extractor: Any = None
    name: str | None = None

    @staticmethod
    def with_(key_serde: Serde | None = None, value_serde: Serde | None = None,
              timestamp_extractor: Any = None) -> Consumed:
        return Consumed(key_serde, value_serde, _extractor(timestamp_extractor))

    @staticmethod
    def as_(name: str) -> Consumed:
        return Consumed(name=name)

    def with_key_serde(self, serde: Serde) -> Consumed:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde) -> Consumed:
        return replace(self, value_serde=serde)

    def with_timestamp_extractor(self, extractor: Any) -> Consumed:
        return replace(self, timestamp_extractor=_extractor(extractor))

    def with_name(self, name: str) -> Consumed:
        return replace(self, name=name)


@dataclass(frozen=True)
class Produced:
    """How a sink writes its topic: serdes and the sink node's name (Kafka Streams'
    ``Produced``; custom stream partitioners are not supported: records go by key)."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    name: str | None = None

    @staticmethod
    def with_(key_serde: Serde | None = None, value_serde: Serde | None = None) -> Produced:
        return Produced(key_serde, value_serde)

    @staticmethod
    def key_serde_of(serde: Serde) -> Produced:
        """Kafka Streams' static ``Produced.keySerde(serde)``."""
        return Produced(key_serde=serde)

    @staticmethod
    def value_serde_of(serde: Serde) -> Produced:
        """Kafka Streams' static ``Produced.valueSerde(serde)``."""
        return Produced(value_serde=serde)

    @staticmethod
    def as_(name: str) -> Produced:
        return Produced(name=name)

    def with_key_serde(self, serde: Serde) -> Produced:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde) -> Produced:
        return replace(self, value_serde=serde)

    def with_name(self, name: str) -> Produced:
        return replace(self, name=name)


@dataclass(frozen=True)
class Grouped:
    """Serdes of a grouping and the name of its repartition topic (``<application.id>-<name>-
    repartition`` instead of one named after the store), as Kafka Streams' ``Grouped``."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    name: str | None = None

    @staticmethod
    def with_(key_serde: Serde | None = None, value_serde: Serde | None = None,
              name: str | None = None) -> Grouped:
        return Grouped(key_serde, value_serde, name)

    @staticmethod
    def as_(name: str) -> Grouped:
        return Grouped(name=name)

    @staticmethod
    def key_serde_of(serde: Serde) -> Grouped:
        """Kafka Streams' static ``Grouped.keySerde(serde)``."""
        return Grouped(key_serde=serde)

    @staticmethod
    def value_serde_of(serde: Serde) -> Grouped:
        """Kafka Streams' static ``Grouped.valueSerde(serde)``."""
        return Grouped(value_serde=serde)

    def with_key_serde(self, serde: Serde) -> Grouped:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde) -> Grouped:
        return replace(self, value_serde=serde)

    def with_name(self, name: str) -> Grouped:
        return replace(self, name=name)


def serdes_of(option: Any, key_serde: Any, value_serde: Any, kind: type) -> tuple[Any, Any, Any]:
    """``(option, key_serde, value_serde)`` where a DSL call's ``key_serde`` slot may hold a
    ``Consumed`` / ``Produced`` / ``Grouped`` (Java's positional form); an option given both ways
    is refused."""
    if isinstance(key_serde, kind):
        if option is not None:
            raise TopologyException(f"{kind.__name__} given twice")
        option, key_serde = key_serde, None
    if option is not None and not isinstance(option, kind):
        raise TopologyException(f"expected {kind.__name__}, got {type(option).__name__}")
    return option, key_serde, value_serde
