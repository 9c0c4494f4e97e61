"""The kubelet's probes over plain HTTP on ``iqmesh.health.port``: ``GET /startupz``, ``/readyz`` and
``/livez`` answer 200 when the instance's gRPC health service says SERVING, else 503, with the
status name as the body.

Kubernetes' ``grpc:`` probe cannot dial a query server that serves TLS only, and an ``exec`` probe
(``python -m iqmesh.health_probe``) starts an interpreter per check. This port is the cheap
way for every setup: it reads, in-process, the very health service the query server publishes (and
``health_probe`` asks over gRPC), so the three can never disagree: startup and readiness are the
whole server's status (SERVING only while RUNNING), liveness is ``iqmesh.liveness`` (NOT_SERVING in
ERROR or with a stuck stream thread). A hung (stopped) process does not answer at all, which a
probe counts as a failure too. Nothing here is secret (no token; state names only), so the port is
plaintext, meant for the kubelet: the manifests' NetworkPolicy opens it to no pod.

The server is the standard library's ``socketserver`` with a handler of a few lines (no asyncio
loop, no ``http.server``): one short-lived thread per probe, nothing on the processing path.
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2

from instance.server.servicer import LIVENESS
from kernel.ports import check_port_free

log = logging.getLogger(__name__)

#: kubelet probe -> the health service it asks (grpc.health.v1; "" is the whole server: readiness)
PROBE_SERVICES: dict[str, str] = {"startup": "", "readiness": "", "liveness": LIVENESS}
#: path on the health port -> the probe it answers
PATHS: dict[str, str] = {"/startupz": "startup", "/readyz": "readiness", "/livez": "liveness"}
#: what a probe passes on, wherever it asks (here, or ``health_probe`` over gRPC)
SERVING = "SERVING"
#: a probe that does not send its request within this long is dropped
REQUEST_TIMEOUT_S = 5.0
_MAX_LINE = 8192
_MAX_HEADERS = 100
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def passes(status: str) -> bool:
    """Whether a probe that got the health status ``status`` (a ServingStatus name, or the gRPC
    code name of a failed check) succeeds."""
    return status == SERVING


class _InProcess:
    """The one part of a ``grpc.ServicerContext`` that ``HealthServicer.Check`` uses: the code it
    sets for a service it does not know."""

    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code


def status_of(servicer: health.HealthServicer, service: str) -> str:
    """What a gRPC health Check of ``service`` answers, asked in-process: SERVING, NOT_SERVING, ...
    or NOT_FOUND for an unknown service (as ``iqmesh.health_probe.check`` reports them)."""
    context = _InProcess()
    reply = servicer.Check(health_pb2.HealthCheckRequest(service=service), context)
    if context.code is not None:
        return str(context.code.name)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], servicer: health.HealthServicer) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.servicer = servicer
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("health probe from %s failed", client_address, exc_info=True)


class _Handler(socketserver.StreamRequestHandler):
    timeout = REQUEST_TIMEOUT_S
    server: _Server

    def handle(self) -> None:
        try:
            line = self.rfile.readline(_MAX_LINE + 1)
            parts = line.decode("latin-1").split()
            if len(line) > _MAX_LINE or len(parts) != 3 or not parts[2].startswith("HTTP/"):
                self._reply(400, "bad request: send GET /startupz, /readyz or /livez\n", head=False)
                return
            self._skip_headers()
            method, path = parts[0], parts[1].split("?", 1)[0]
            if path not in PATHS:
                self._reply(404, f"not found: this port answers {', '.join(PATHS)}\n", head=method == "HEAD")
            elif method not in ("GET", "HEAD"):
                self._reply(405, "method not allowed: GET or HEAD\n", head=False, extra="Allow: GET, HEAD\r\n")
            else:
                status = status_of(self.server.servicer, PROBE_SERVICES[PATHS[path]])
                self._reply(200 if passes(status) else 503, status + "\n", head=method == "HEAD")
        except OSError:  # a probe that gave up (timed out, reset): nobody to answer
            return

    def _skip_headers(self) -> None:
        for _ in range(_MAX_HEADERS):
            if self.rfile.readline(_MAX_LINE + 1) in (b"\r\n", b"\n", b""):
                return

    def _reply(self, code: int, body: str, head: bool, extra: str = "") -> None:
        data = body.encode()
        self.wfile.write((f"HTTP/1.1 {code} {_REASONS[code]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                          f"Content-Length: {len(data)}\r\nCache-Control: no-store\r\n{extra}"
                          "Connection: close\r\n\r\n").encode("latin-1") + (b"" if head else data))


class HealthServer:
    """Binds ``host:port`` at construction (a port in use is :class:`PortInUseError`; 0: any free
    port, see ``port``), answers from ``servicer`` once started, until :meth:`stop`."""

    def __init__(self, servicer: health.HealthServicer, host: str, port: int) -> None:
        check_port_free(host, port)
        self._server = _Server((host.strip("[]"), port), servicer)
        self._thread = threading.Thread(target=self._server.serve_forever, name="health-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


def start_health_server(servicer: health.HealthServicer, host: str, port: int) -> HealthServer | None:
    """The health port of an instance, serving (None when ``port`` is 0: ``iqmesh.health.port`` unset)."""
    return HealthServer(servicer, host, port).start() if port else None
