"""What every handler of one gateway shares, and how a handler finds it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aiohttp import web

from kernel.security import NO_SECURITY, Security
from router.gateway.backend import Backend
from router.gateway.discovery import Discovery, TopicDiscovery
from router.gateway.metrics import GatewayMetrics
from router.gateway.snapshot import SnapshotPoller
from router.gateway.topology import TopologyPoller


@dataclass(frozen=True)
class GatewayConfig:
    """``seeds`` (host:port of instances) or ``bootstrap`` + ``application_id`` (read the instances
    topic); ``timeout``: seconds per gRPC call; ``poll_interval``: seconds between snapshots."""

    seeds: tuple[str, ...] = ()
    bootstrap: str = ""
    application_id: str = ""
    timeout: float = 10.0
    poll_interval: float = 1.0
    security: Security = NO_SECURITY
    #: Kafka client settings as a properties file gives them (security.protocol, sasl.*, ssl.*,
    #: consumer.* ...): the instances-topic reader's, built by kernel/kafka_clients.py as the
    #: instances build theirs
    kafka: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.seeds and not (self.bootstrap and self.application_id):
            raise ValueError("the gateway needs --seeds, or --bootstrap with --application-id")

    def discovery(self) -> Discovery:
        if self.bootstrap and self.application_id:
            return TopicDiscovery(self.bootstrap, self.application_id, self.kafka)
        return Discovery(list(self.seeds))


@dataclass
class Gateway:
    config: GatewayConfig
    discovery: Discovery
    backend: Backend
    metrics: GatewayMetrics
    poller: SnapshotPoller
    topology: TopologyPoller
    #: set when the application shuts down: long-lived streams (SSE) end
    closing: bool = field(default=False)

    @staticmethod
    def of(config: GatewayConfig) -> Gateway:
        discovery = config.discovery()
        backend = Backend(discovery, config.timeout, security=config.security)
        metrics = GatewayMetrics()
        topology = TopologyPoller(backend, max(2.0, 2 * config.poll_interval))
        poller = SnapshotPoller(backend, metrics, config.poll_interval, on_alive=discovery.learn, topology=topology)
        return Gateway(config, discovery, backend, metrics, poller, topology)


GATEWAY = web.AppKey("gateway", Gateway)


def gateway_of(request: web.Request) -> Gateway:
    return request.app[GATEWAY]
