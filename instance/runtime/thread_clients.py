"""The settings of a stream thread's Kafka clients, each built from ``StreamsConfig`` in one function.

The main consumer (the group member), the changelog reader's consumer and the producer: what
iqmesh sets for each, layered by ``StreamsConfig.client_config`` under the user's prefixed settings
(kernel/kafka_clients.py), as Kafka Streams' ``StreamsConfig.getMainConsumerConfigs`` and friends.
The stream thread's factory (runtime/stream_thread.py) takes them from here.
"""

from __future__ import annotations

from typing import Any

from instance.config import StreamsConfig
from instance.runtime import rebalance_protocol
from instance.runtime.departure import static_member_id
from kernel.partitioner import LIBRDKAFKA_PARTITIONER


def _isolation(config: StreamsConfig) -> str:
    return "read_committed" if config.eos else "read_uncommitted"


def main_consumer_config(config: StreamsConfig, client_id: str, index: int) -> dict[str, Any]:
    """The group consumer of stream thread ``index`` (``client_id``), for the group protocol set."""
    ours: dict[str, Any] = {
        "group.id": config.application_id,
        "client.id": client_id,
        "partition.assignment.strategy": "range",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": config.auto_offset_reset,
        "session.timeout.ms": config.session_timeout_ms,
        # also the rebalance timeout: how long a rebalance waits for members that do not rejoin
        "max.poll.interval.ms": max(config.max_poll_interval_ms, config.session_timeout_ms),
        # members learn of a rebalance at their next heartbeat: keep it short
        "heartbeat.interval.ms": max(100, config.session_timeout_ms // 10),
        "isolation.level": _isolation(config),
        "queued.max.messages.kbytes": 65536,
    }
    if config.group_instance_id:
        # static membership is opt-in, as in Kafka Streams: a static member does not leave the
        # group on close, so its partitions wait for it (session.timeout.ms) instead of moving
        ours["group.instance.id"] = static_member_id(config.group_instance_id, index)
    return rebalance_protocol.main_consumer_settings(config.group_protocol,
                                                     config.client_config("main.consumer", **ours))


def restore_consumer_config(config: StreamsConfig, client_id: str) -> dict[str, Any]:
    """The changelog reader's consumer (restores and standbys; assigned, never subscribed)."""
    return config.client_config("restore.consumer", **{"group.id": f"{config.application_id}-restore",
                                                       "client.id": f"{client_id}-restore",
                                                       "isolation.level": _isolation(config)})


def producer_config(config: StreamsConfig, client_id: str, transactional_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "client.id": client_id,
        "partitioner": LIBRDKAFKA_PARTITIONER,
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "enable.idempotence": True,
        "acks": "all",
    }
    if not transactional_id:
        # at-least-once: a record waits for a restarting broker as long as the commit that
        # flushes it does (task.timeout.ms); under exactly-once librdkafka bounds it by
        # transaction.timeout.ms and the transaction aborts
        conf["message.timeout.ms"] = 0
    if transactional_id:
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = 10_000  # Kafka Streams' default: a dead producer's transaction
        # blocks read_committed readers at most this long (on brokers that abort it; see membership.py)
    return config.client_config("producer", **conf)
