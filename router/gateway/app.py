"""The gateway application: routes, middlewares, and the background work (discovery, snapshots)
tied to the application's life."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from kernel.event_loop import new_event_loop
from kernel.ports import check_port_free
from kernel.security import AUTH_TOKEN, TLS_CERT_FILE, TLS_KEY_FILE, is_loopback
from router.gateway import api, dashboard, events, openapi, ops, protocol_errors
from router.gateway.auth import auth_middleware
from router.gateway.context import GATEWAY, Gateway, GatewayConfig
from router.gateway.errors import error_middleware
from router.gateway.metrics import metrics_middleware

log = logging.getLogger(__name__)

#: a request line as long as a 1 MiB key percent-encoded (3 bytes per byte) and the rest of the URL
#: (aiohttp's default, 8190 bytes, refused keys over ~2-8 KB)
MAX_REQUEST_LINE = 3 * 2**20 + 64 * 2**10
#: a POST lookup's body: a 1 MiB key written as JSON escapes (up to 6 bytes per character of it)
MAX_BODY = 6 * 2**20 + 64 * 2**10


def create_app(config: GatewayConfig) -> web.Application:
    protocol_errors.install(MAX_REQUEST_LINE)
    gw = Gateway.of(config)
    app = web.Application(middlewares=[metrics_middleware(gw.metrics), error_middleware,
                                       auth_middleware(config.security)],
                          handler_args={"max_line_size": MAX_REQUEST_LINE}, client_max_size=MAX_BODY)
    app[GATEWAY] = gw
    api.add_routes(app)
    app.router.add_get("/v1/events", events.events)
    ops.add_routes(app)
    openapi.add_routes(app)
    dashboard.add_routes(app)
    app.cleanup_ctx.append(_background)
    app.on_shutdown.append(_closing)
    return app


async def _background(app: web.Application) -> AsyncIterator[None]:
    gw = app[GATEWAY]
    gw.discovery.start()
    tasks = [asyncio.create_task(gw.poller.run(), name="gateway-snapshots"),
             asyncio.create_task(gw.topology.run(), name="gateway-topology")]
    yield
    for task in tasks:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await asyncio.get_running_loop().run_in_executor(None, gw.discovery.stop)
    await gw.backend.close()


async def _closing(app: web.Application) -> None:
    """End the SSE streams so shutdown does not wait for them."""
    gw = app[GATEWAY]
    gw.closing = True
    async with gw.poller.changed:
        gw.poller.changed.notify_all()


def run_gateway(config: GatewayConfig, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve until SIGINT/SIGTERM (HTTPS when the security settings give a certificate)."""
    security = config.security
    scheme = "https" if security.server_tls else "http"
    if not is_loopback(host) and not security.protected:
        log.warning("the gateway listens on %s:%s without TLS or a token: anyone who can reach it can read every "
                    "store. Set %s and %s (and %s), or --host 127.0.0.1", host, port, TLS_CERT_FILE, TLS_KEY_FILE,
                    AUTH_TOKEN)
    check_port_free(host, port)  # before saying where it serves

    def serving(_: str) -> None:  # called once the port is bound
        print(f"iqmesh gateway on {scheme}://{host}:{port}/ (API /v1, OpenAPI /openapi.json, dashboard /)",
              flush=True)

    web.run_app(create_app(config), host=host, port=port, print=serving, shutdown_timeout=5,
                ssl_context=security.server_ssl_context(), loop=new_event_loop())
