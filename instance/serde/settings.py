"""The application settings that belong to its serdes, not to the runtime or the Kafka clients.

Kafka Streams hands its whole configuration to every serde's ``configure``; a Schema Registry serde
picks ``schema.registry.url`` and its friends out of it. iqmesh accepts those names in the
application's settings (``StreamsConfig.serde_settings``), keeps them away from librdkafka (which
refuses names it does not know) and passes them to every serde of the topology that has
``configure`` (``Topology.configure_serdes``) before the first record.
"""

from __future__ import annotations

__all__ = ["is_serde_setting"]

#: Confluent's serializer settings, as Kafka Streams applications set them
_NAMES = frozenset({
    "auto.register.schemas", "use.latest.version", "use.latest.with.metadata", "normalize.schemas",
    "key.subject.name.strategy", "value.subject.name.strategy",
    "basic.auth.credentials.source", "basic.auth.user.info",
    "specific.avro.reader", "avro.use.logical.type.converters",
})
_PREFIXES = ("schema.registry.",)


def is_serde_setting(name: str) -> bool:
    """A name ``StreamsConfig`` keeps for the serdes instead of refusing it."""
    return name in _NAMES or name.startswith(_PREFIXES)
