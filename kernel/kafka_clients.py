"""Every Kafka client's settings from one place, with Kafka Streams' prefixes.

Kafka Streams passes a client setting given without a prefix (``security.protocol``,
``sasl.mechanism``...) to every client it creates; ``consumer.`` applies to every consumer,
``main.consumer.``, ``restore.consumer.`` and ``global.consumer.`` to one of them (winning over
``consumer.``), ``producer.`` to producers and ``admin.`` to the admin client. The same rules hold
here, for the clients Kafka Streams has and for iqmesh's own: the instance-metadata publisher and
reader, the watch consumer (both consumers and producers of the ``consumer.``/``producer.`` kind).

Settings are librdkafka's. Two Java ones are translated because a Kafka Streams properties file
carries them: ``sasl.jaas.config`` with a PLAIN or SCRAM login module becomes ``sasl.username`` /
``sasl.password``; Java key and trust stores have no librdkafka equivalent and are refused with
the PEM setting to use instead (:class:`ClientSettingsError`; ``StreamsConfig`` raises it as its
ConfigException).

In the shared kernel, so every side builds its clients here: the instance, the CLI, the snapshot
job, and the gateway's reader of the instances topic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from kernel.kafka_log import client_logging

ClientKind = Literal["main.consumer", "restore.consumer", "global.consumer", "producer", "admin"]

#: prefixes a properties file may give (unprefixed client settings are recognised by COMMON)
PREFIXES = ("main.consumer.", "restore.consumer.", "global.consumer.", "consumer.", "producer.", "admin.")
#: unprefixed settings that go to every client: connection, security and authentication
COMMON = ("security.protocol", "sasl.", "ssl.", "ssl_", "socket.", "reconnect.", "client.dns.lookup",
          "broker.address.family", "metadata.max.age.ms", "topic.metadata.refresh.interval.ms",
          "enable.ssl.certificate.verification", "oauthbearer.")

_JAAS = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAVA_ONLY = {
    "ssl.truststore.location": "ssl.ca.location (a PEM CA file)",
    "ssl.truststore.password": "ssl.ca.location (a PEM CA file)",
    "ssl.truststore.type": "ssl.ca.location (a PEM CA file)",
    "ssl.keystore.location": "ssl.certificate.location and ssl.key.location (PEM files)",
    "ssl.keystore.type": "ssl.certificate.location and ssl.key.location (PEM files)",
}


class ClientSettingsError(ValueError):
    """A client setting that cannot be used as given (a Java-only one, a JAAS login without
    credentials)."""


def is_client_setting(name: str) -> bool:
    """A name ``StreamsConfig`` hands to the clients instead of refusing it."""
    return name.startswith(PREFIXES) or name.startswith(COMMON)


def _translate(settings: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in settings.items():
        if name in _JAVA_ONLY:
            raise ClientSettingsError(f"{name} is a Java client setting librdkafka does not have; use "
                                  f"{_JAVA_ONLY[name]} instead")
        if name == "sasl.jaas.config":
            found = dict(_JAAS.findall(value))
            if "username" not in found or "password" not in found:
                raise ClientSettingsError("sasl.jaas.config: expected a PLAIN or SCRAM login module with "
                                      'username="..." and password="..."; or set sasl.username and '
                                      "sasl.password")
            out["sasl.username"], out["sasl.password"] = found["username"], found["password"]
            continue
        out[name] = value
    return out


def client_settings(extra: Mapping[str, str], kind: ClientKind) -> dict[str, str]:
    """The user's settings for one client: unprefixed, then ``consumer.``, then the specific prefix."""
    layers: list[str] = [""]
    if kind.endswith("consumer"):
        layers.append("consumer.")
    layers.append(kind + ".")
    out: dict[str, str] = {}
    for prefix in layers:
        for name, value in extra.items():
            if prefix:
                if name.startswith(prefix):
                    out[name[len(prefix):]] = value
            elif not name.startswith(PREFIXES):
                out[name] = value
    return _translate(out)


#: every consumer's: how long librdkafka waits before fetching a partition again once its prefetch
#: queue was over ``queued.min.messages`` / ``queued.max.messages.kbytes``. Its default, 1000 ms,
#: leaves a stream thread that empties the queue faster than that waiting for records, as a Java
#: consumer (which fetches again as soon as its buffer drains) never does: with 10 ms a 2M-record
#: count runs 2-2.7x faster with the record cache on, 1.3-1.5x stateless (docs/benchmarks.md)
CONSUMER_DEFAULTS: Mapping[str, Any] = {"fetch.queue.backoff.ms": 10}


def client_config(bootstrap: str, extra: Mapping[str, str], kind: ClientKind, **ours: Any) -> dict[str, Any]:
    """A client's configuration: ``bootstrap.servers``, the log routing, the consumers' defaults,
    what the runtime needs (``ours``) and, over it, what the user set for this kind of client."""
    defaults = CONSUMER_DEFAULTS if kind.endswith("consumer") else {}
    return {"bootstrap.servers": bootstrap, **client_logging(), **defaults, **ours, **client_settings(extra, kind)}


def produce_when_room(producer: Any, topic: str, value: bytes | None, key: bytes | None, **kwargs: Any) -> None:
    """``producer.produce(...)``, serving delivery reports while its queue is full (BufferError)
    instead of failing: what every bulk producer of ours (CLI, local clusters, benchmarks) needs."""
    while True:
        try:
            producer.produce(topic, value, key, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)
