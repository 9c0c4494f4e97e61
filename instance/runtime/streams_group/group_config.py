"""A streams group's own settings, as an operator sets them (``kafka-configs --entity-type groups
--alter``): under ``group.protocol=streams`` the broker, not the client, decides the number of
standbys (``streams.num.standby.replicas``), the session timeout and the heartbeat interval."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

#: the group setting that stands for Kafka Streams' ``num.standby.replicas`` under this protocol
NUM_STANDBY_REPLICAS = "streams.num.standby.replicas"


def set_group_config(bootstrap: str, group: str, settings: Mapping[str, str],
                     client_config: Mapping[str, Any] | None = None, timeout: float = 30.0) -> None:
    """Set ``settings`` on ``group`` (IncrementalAlterConfigs on a GROUP resource); raises the
    broker's refusal (KafkaException)."""
    admin = AdminClient({**(client_config or {}), "bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=timeout)


def standbys_on_the_group(bootstrap: str, group: str, properties: Mapping[str, str],
                          client_config: Mapping[str, Any] | None = None) -> bool:
    """Under ``group.protocol=streams``, the application's ``num.standby.replicas`` set on the
    group, where the broker reads it (what the load tools and tests do for the client setting the
    protocol ignores); True if set."""
    if properties.get("group.protocol") != "streams" or "num.standby.replicas" not in properties:
        return False
    set_group_config(bootstrap, group, {NUM_STANDBY_REPLICAS: properties["num.standby.replicas"]}, client_config)
    return True
