"""Whether a broker offers the streams group protocol: StreamsGroupHeartbeat (API key 88) in its
ApiVersions answer, as Apache Kafka 4.2 and later do (and the dev broker does not)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from instance.kafka_wire.apis import STREAMS_GROUP_HEARTBEAT
from instance.kafka_wire.connection import connect_any
from instance.kafka_wire.wire_auth import BrokerAuth


def offered_versions(bootstrap: str, client_config: Mapping[str, Any], timeout: float = 10.0) -> tuple[int, int] | None:
    """The StreamsGroupHeartbeat versions the first reachable broker of ``bootstrap`` offers, or None.
    ``client_config``: the instance's librdkafka settings (TLS, SASL). Raises BrokerConnectionError
    when no broker answers."""
    with connect_any(bootstrap, auth=BrokerAuth.from_client_config(client_config), timeout=timeout) as conn:
        return conn.offered(STREAMS_GROUP_HEARTBEAT.key)
