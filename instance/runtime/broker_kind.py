"""Which kind of broker this is, so the dev broker's workarounds run only where they are needed.

``iqmesh.membership.assist`` (runtime/membership.py) works around defects of the dev broker
(noida-db): it refuses commits once a rebalance starts, never evicts a dead member, never times
out a transaction. Apache Kafka has none of them, so with the default ``auto`` the runtime asks
the broker to describe itself: Apache Kafka (and services built on it) list hundreds of broker
settings, ``node.id`` or ``broker.id`` among them; the dev broker lists three. A broker that
refuses the question (a secured cluster without DescribeConfigs rights) is not the dev broker.
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

log = logging.getLogger(__name__)

AUTO, ON, OFF = "auto", "true", "false"
ASSIST_VALUES = (AUTO, ON, OFF)


def _broker_configs(admin: AdminClient, timeout: float) -> dict[str, Any] | None:
    """The first broker's settings (None: it has no nodes, or refused to describe them)."""
    try:
        cluster = admin.describe_cluster(request_timeout=timeout).result()
        if not cluster.nodes:
            return None
        resource = ConfigResource(ConfigResource.Type.BROKER, str(cluster.nodes[0].id))
        return dict(next(iter(admin.describe_configs([resource], request_timeout=timeout).values())).result())
    except KafkaException as e:  # refused (ACLs) or not supported
        log.info("the broker did not describe its configuration (%s)", e)
        return None


def describes_itself_as_kafka(admin: AdminClient, timeout: float = 10.0) -> bool:
    """True unless the broker answers DescribeConfigs without naming its own id (the dev broker);
    a broker that refuses the question is taken for Apache Kafka."""
    configs = _broker_configs(admin, timeout)
    return configs is None or "node.id" in configs or "broker.id" in configs


def rebalance_protocols(admin: AdminClient, timeout: float = 10.0) -> set[str] | None:
    """The group protocols the broker's coordinator enables (``group.coordinator.rebalance.protocols``;
    None: not told). Apache Kafka 3.9 offers the consumer protocol's API but leaves it off."""
    configs = _broker_configs(admin, timeout)
    entry = configs.get("group.coordinator.rebalance.protocols") if configs else None
    value = getattr(entry, "value", None)
    return None if value is None else {p.strip() for p in str(value).split(",") if p.strip()}


def membership_assist(setting: str, admin: AdminClient) -> bool:
    """Whether the dev-broker workarounds run: ``true``/``false`` as set, ``auto`` by the broker."""
    if setting != AUTO:
        return setting == ON
    on = not describes_itself_as_kafka(admin)
    log.info("iqmesh.membership.assist=auto: %s", "on (the dev broker)" if on else "off (Apache Kafka)")
    return on
