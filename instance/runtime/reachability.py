"""Is there a Kafka broker at ``bootstrap.servers``? Asked once at start, so a wrong address or a
broker that is not running is one clear error instead of a metadata failure deep in start-up."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from instance.errors import BrokerUnreachableException

#: seconds to wait for a first metadata answer (librdkafka retries the connection meanwhile)
REACH_TIMEOUT_S = 10.0
_UNREACHABLE = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                          KafkaError._RESOLVE})


def check_reachable(admin: AdminClient, bootstrap: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """Raise BrokerUnreachableException naming ``bootstrap`` if no broker answers within ``timeout``."""
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as e:
        err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
        if err is None or err.code() not in _UNREACHABLE:
            raise
        raise BrokerUnreachableException(
            f"no Kafka broker answered at {bootstrap} (bootstrap.servers) within {timeout:.0f}s: is it "
            f"running, and is the address right? The dev broker starts with `iqmesh broker start` "
            f"(it prints its address)") from None
