"""Which group protocol the stream threads' consumers speak: ``classic`` or ``consumer`` (KIP-848).

``group.protocol=classic`` (the default, as in Kafka Streams) is the eager join/sync protocol with
the client-side ``range`` assignor: every rebalance revokes every partition, commits and closes
every task. ``group.protocol=consumer`` is Apache Kafka 4.x's broker-driven protocol: the broker
computes the assignment (we ask for its ``range`` assignor, which keeps partitions of the same
number of co-partitioned topics together, as a task needs) and moves partitions incrementally, so
a member that keeps its tasks keeps processing while others join or leave.

The consumer protocol moves the group's timing to the broker: ``session.timeout.ms`` and the
heartbeat interval are broker (or group) settings there (``group.consumer.session.timeout.ms``,
45 s by default), so a crashed instance's tasks move after the broker's timeout, not ours. The dev
broker (noida-db) accepts the protocol's requests but never assigns anything, so it is refused
there at start-up (``tests/conformance`` pins both behaviours).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AdminClient

from instance.errors import ConfigException
from instance.runtime.broker_kind import describes_itself_as_kafka

CLASSIC, CONSUMER = "classic", "consumer"
PROTOCOLS = (CLASSIC, CONSUMER)
#: the only broker-side assignor that keeps a task's co-partitioned input partitions together
REMOTE_ASSIGNOR = "range"
#: Apache Kafka's default ``group.consumer.session.timeout.ms`` (also its minimum by default)
BROKER_SESSION_TIMEOUT_MS = 45_000
#: consumer settings the classic protocol needs and the consumer protocol refuses (broker-side)
_CLASSIC_ONLY = ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms")


def problems(protocol: str, extra: Mapping[str, str]) -> list[str]:
    """What is wrong with the group protocol settings (checked with the rest of the configuration)."""
    found = []
    if protocol not in PROTOCOLS:
        hint = " (Kafka Streams' own 'streams' protocol, KIP-1071, has no librdkafka client)" \
            if protocol == "streams" else ""
        found.append(f"group.protocol must be {CLASSIC} or {CONSUMER}, got {protocol!r}{hint}")
    for name, value in extra.items():
        if name.split(".")[-2:] == ["group", "protocol"]:
            found.append(f"{name}: set group.protocol instead (every stream thread's consumer uses it)")
        elif name.endswith("group.remote.assignor") and value.strip().lower() != REMOTE_ASSIGNOR:
            found.append(f"{name}={value}: only the broker's {REMOTE_ASSIGNOR} assignor keeps a task's "
                         "co-partitioned input partitions on one member; remove the setting")
    return found


def main_consumer_settings(protocol: str, classic: dict[str, Any]) -> dict[str, Any]:
    """The stream thread's consumer settings for ``protocol``, from its classic-protocol settings."""
    if protocol == CLASSIC:
        return classic
    settings = {k: v for k, v in classic.items() if k not in _CLASSIC_ONLY}
    settings["group.protocol"] = CONSUMER
    settings["group.remote.assignor"] = REMOTE_ASSIGNOR
    return settings


def check_broker(protocol: str, admin: AdminClient, membership_assist: str) -> None:
    """Refuse the consumer protocol where it cannot work: on the dev broker (it never assigns), or
    with the dev broker's membership workarounds forced on (they drive classic rebalances)."""
    if protocol != CONSUMER:
        return
    if not describes_itself_as_kafka(admin):
        raise ConfigException("group.protocol=consumer needs Apache Kafka 4.x: this broker (the dev broker?) "
                              "never assigns partitions under it; use group.protocol=classic")
    if membership_assist == "true":
        raise ConfigException("iqmesh.membership.assist=true works around the dev broker's classic "
                              "rebalances; with group.protocol=consumer set it to auto or false")
