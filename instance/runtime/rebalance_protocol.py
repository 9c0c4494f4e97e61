"""Which group protocol the stream threads' consumers speak: ``classic``, ``consumer`` (KIP-848) or
``streams`` (KIP-1071).

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

``group.protocol=streams`` is Kafka Streams' own protocol (Apache Kafka 4.2+): the broker assigns
tasks, not partitions (runtime/streams_group/): each stream thread is a member, its consumer assigned
by hand (runtime/streams_group/thread_member.py). Refused at start-up in one line on a broker that
does not offer StreamsGroupHeartbeat, naming the release needed. Never a silent fall-back to another
protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AdminClient

from instance.errors import ConfigException
from instance.group_protocol import CLASSIC, CONSUMER, REMOTE_ASSIGNOR, STREAMS
from instance.runtime.broker_kind import describes_itself_as_kafka, rebalance_protocols
from instance.runtime.streams_group.broker_check import offered_versions

#: Apache Kafka's default ``group.consumer.session.timeout.ms`` (also its minimum by default)
BROKER_SESSION_TIMEOUT_MS = 45_000
#: consumer settings the classic protocol needs and the consumer protocol refuses (broker-side)
_CLASSIC_ONLY = ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms")


def main_consumer_settings(protocol: str, classic: dict[str, Any]) -> dict[str, Any]:
    """The stream thread's consumer settings for ``protocol``, from its classic-protocol settings."""
    if protocol in (CLASSIC, STREAMS):  # a streams member's consumer never joins: assigned by hand
        return classic
    settings = {k: v for k, v in classic.items() if k not in _CLASSIC_ONLY}
    settings["group.protocol"] = CONSUMER
    settings["group.remote.assignor"] = REMOTE_ASSIGNOR
    return settings


def check_broker(protocol: str, admin: AdminClient, membership_assist: str, bootstrap: str = "",
                 client_config: Mapping[str, Any] | None = None) -> None:
    """Refuse the consumer protocol where it cannot work: on the dev broker (it never assigns); the
    streams protocol on a broker without it (see the module docstring); either with the dev
    broker's membership workarounds forced on (they drive classic rebalances). ``bootstrap`` and
    ``client_config`` (TLS, SASL) reach the broker for the streams protocol's ApiVersions check."""
    if protocol == CLASSIC:
        return
    if protocol == STREAMS:
        check_streams(bootstrap, client_config or {})
    elif not describes_itself_as_kafka(admin):
        raise ConfigException("group.protocol=consumer needs Apache Kafka 4.x: this broker (the dev broker?) "
                              "never assigns partitions under it; use group.protocol=classic")
    else:
        enabled = rebalance_protocols(admin)
        if enabled is not None and CONSUMER not in enabled:
            raise ConfigException(f"group.protocol=consumer needs Apache Kafka 4.0 or later: this broker's "
                                  f"group.coordinator.rebalance.protocols is {','.join(sorted(enabled))}, so it "
                                  f"would never assign partitions; use group.protocol=classic")
    if membership_assist == "true":
        raise ConfigException("iqmesh.membership.assist=true works around the dev broker's classic "
                              f"rebalances; with group.protocol={protocol} set it to auto or false")


def check_streams(bootstrap: str, client_config: Mapping[str, Any]) -> None:
    """``group.protocol=streams``: refused in one line on a broker that does not offer it."""
    if offered_versions(bootstrap, client_config) is None:
        raise ConfigException("group.protocol=streams needs Apache Kafka 4.2 or later: this broker does not offer "
                              "StreamsGroupHeartbeat; use group.protocol=classic")
