"""The REST gateway for dashboards: aiohttp over the same routing path as gRPC clients (an instance
routes every query with router.client.query_router), plus a live dashboard page. ``iqmesh gateway``."""

from router.gateway.app import create_app, run_gateway
from router.gateway.context import GatewayConfig

__all__ = ["GatewayConfig", "create_app", "run_gateway"]
