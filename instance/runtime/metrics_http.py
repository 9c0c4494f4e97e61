"""An instance's own Prometheus endpoint: ``GET /metrics`` on ``iqmesh.metrics.port``.

A Kafka Streams application is scraped per instance (the JMX exporter's HTTP port beside each
JVM), so this is one too: Prometheus finds every pod and keeps scraping an instance while others
are down, which the gateway's aggregate cannot promise. It listens where the query server does
(``iqmesh.listen.host``), serves TLS with the query server's certificate and asks for its bearer
token (Prometheus' ``authorization`` scrape setting). A daemon thread of the standard library's
HTTP server: nothing on the processing path.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from instance.runtime.metrics import Metrics
from kernel.metrics_text import CONTENT_TYPE, Sample, render
from kernel.ports import check_port_free
from kernel.security import Security, bearer

log = logging.getLogger(__name__)


def samples(metrics: Metrics) -> list[Sample]:
    return [Sample(m.name, m.group, m.tags, v, m.description) for m, v in metrics.items()]


class MetricsServer:
    """``start()`` binds ``host:port`` (0: any free port, see ``port``), ``stop()`` closes it."""

    def __init__(self, metrics: Callable[[], Metrics], host: str, port: int, security: Security) -> None:
        self._metrics = metrics
        self._security = security
        check_port_free(host, port)
        self._httpd = ThreadingHTTPServer((host, port), self._handler())
        self._httpd.daemon_threads = True
        ctx = security.server_ssl_context()
        if ctx is not None:
            self._httpd.socket = ctx.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="metrics-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                if self.path.split("?", 1)[0] != "/metrics":
                    self._reply(404, b"not found: this endpoint serves /metrics only\n", "text/plain")
                    return
                if not server._security.token_matches(bearer(self.headers.get("Authorization", ""))):
                    self._reply(401, b"UNAUTHENTICATED: send Authorization: Bearer <iqmesh.auth.token>\n",
                                "text/plain")
                    return
                try:
                    body = render(samples(server._metrics())).encode()
                except Exception:  # a scrape must not take the instance down
                    log.exception("rendering the metrics failed")
                    self._reply(500, b"rendering the metrics failed\n", "text/plain")
                    return
                self._reply(200, body, CONTENT_TYPE)

            def _reply(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's signature
                pass  # scrapes every few seconds: not worth a log line each

        return Handler
