"""Is there a Kafka broker at ``bootstrap.servers``, and does it let us in? Asked once at start, so
a wrong address, a broker that is not running or wrong credentials are one clear error instead of
a metadata failure deep in start-up."""

from __future__ import annotations

import os
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from instance.errors import BrokerUnreachableException, ConfigException
from instance.runtime.task_timeout import kafka_error
from kernel.kafka_log import KAFKA_LOGGER
from kernel.probe import Listener, listener_at

#: seconds to wait for a first metadata answer (librdkafka retries the connection meanwhile)
REACH_TIMEOUT_S = 10.0
_UNREACHABLE = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                          KafkaError._RESOLVE})
_REFUSED = {
    KafkaError._AUTHENTICATION: "the Kafka cluster at {b} refused our credentials ({e}): check sasl.username "
                                "and sasl.password (or sasl.jaas.config), sasl.mechanism and security.protocol",
    KafkaError.SASL_AUTHENTICATION_FAILED: "the Kafka cluster at {b} refused our credentials ({e}): check "
                                           "sasl.username and sasl.password (or sasl.jaas.config) and sasl.mechanism",
    KafkaError._SSL: "the TLS handshake with the Kafka cluster at {b} failed ({e}): check ssl.ca.location and "
                     "security.protocol",
}


class ConnectionErrors:
    """An ``error_cb`` that keeps the first authentication or TLS failure a client reported (librdkafka
    reports them there and answers the request itself with a transport error)."""

    def __init__(self) -> None:
        self.first: KafkaError | None = None

    def __call__(self, err: KafkaError) -> None:
        if self.first is None and err.code() in _REFUSED:
            self.first = err


def admin_client(conf: dict[str, Any]) -> tuple[AdminClient, ConnectionErrors]:
    """The first client of a start-up: settings librdkafka refuses (a CA file that is not there, a
    value out of range) are a ConfigException naming them."""
    errors = ConnectionErrors()
    try:
        return AdminClient({**conf, "error_cb": errors}), errors  # type: ignore[dict-item]
    except KafkaException as e:
        err = kafka_error(e)
        if err is None or err.code() != KafkaError._INVALID_ARG:
            raise
        raise refused_settings(conf, err) from None


def reached_admin(conf: dict[str, Any], bootstrap: str) -> AdminClient:
    """An admin client of ``conf`` that has reached the brokers at ``bootstrap``: refused settings,
    credentials or certificate, or another ``security.protocol``, are a ConfigException; no
    answer is BrokerUnreachableException (:func:`check_reachable`)."""
    admin, errors = admin_client(conf)
    check_reachable(admin, bootstrap, errors=errors, protocol=conf.get("security.protocol", "PLAINTEXT"))
    return admin


def refused_settings(conf: dict[str, Any], err: KafkaError) -> ConfigException:
    """What to say of client settings librdkafka refused to create a client with."""
    missing = [f"{k}={v}" for k, v in conf.items()
               if k.endswith(".location") and isinstance(v, str) and v and not os.path.exists(v)]
    if missing:
        return ConfigException(f"{missing[0]}: no such file (give the path of a PEM file)")
    return ConfigException(f"the Kafka client settings are refused: {err.str()}")


def check_reachable(admin: AdminClient, bootstrap: str, timeout: float = REACH_TIMEOUT_S,
                    errors: ConnectionErrors | None = None, protocol: str = "PLAINTEXT") -> None:
    """Raise BrokerUnreachableException naming ``bootstrap`` if no broker answers within ``timeout``,
    ConfigException naming the settings to check if it refuses our credentials or certificate, or
    if a broker listens there but speaks another ``security.protocol`` than ``protocol``."""
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as e:
        err = kafka_error(e)
        # error callbacks run only when the client is polled; its queued connection-refused log
        # lines are not wanted beside the one line this raises
        KAFKA_LOGGER.disabled, was = True, KAFKA_LOGGER.disabled
        try:
            admin.poll(0)
        finally:
            KAFKA_LOGGER.disabled = was
        refused = errors.first if errors is not None else None
        if refused is not None:
            raise ConfigException(_REFUSED[refused.code()].format(b=bootstrap, e=refused.str())) from None
        if err is None or err.code() not in _UNREACHABLE:
            raise
        mismatch = _security_mismatch(bootstrap, protocol)
        if mismatch is not None:
            raise ConfigException(mismatch) from None
        raise BrokerUnreachableException(
            f"no Kafka broker answered at {bootstrap} (bootstrap.servers) within {timeout:.0f}s: is it "
            f"running, and is the address right? The dev broker starts with `iqmesh broker start` "
            f"(it prints its address)") from None


def _security_mismatch(bootstrap: str, protocol: str) -> str | None:
    """What to say when something listens at a bootstrap address yet no Kafka answer came: the
    broker speaks TLS and we do not, or the other way round (asked of the socket, not read from
    librdkafka's log text). None: nothing listens, or the probe tells nothing."""
    tls = protocol.upper() in ("SSL", "SASL_SSL")
    for server in bootstrap.split(","):
        listener = listener_at(server.strip())
        if listener is Listener.TLS and not tls:
            return (f"the Kafka broker at {server.strip()} speaks TLS and security.protocol is {protocol}: set "
                    "security.protocol=SSL (or SASL_SSL with sasl.mechanism, sasl.username, sasl.password) and "
                    "ssl.ca.location, e.g. with --config-file the broker's client.properties")
        if listener is Listener.PLAINTEXT and tls:
            return (f"the Kafka broker at {server.strip()} does not speak TLS and security.protocol is {protocol}: "
                    "set security.protocol=PLAINTEXT (or SASL_PLAINTEXT)")
    return None
