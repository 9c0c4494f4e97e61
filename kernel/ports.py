"""Whether a server's port is free before it binds, so a port in use stops the start with one line
(gRPC's own failure to bind is only a log line of its core and an exception without the cause)."""

from __future__ import annotations

import errno
import socket


class PortInUseError(OSError):
    """Another process listens on the address a server was told to bind."""

    def __init__(self, address: str) -> None:
        super().__init__(errno.EADDRINUSE, f"cannot listen on {address}: the port is in use (another instance "
                         "or program listens there; choose another port)")

    def __str__(self) -> str:
        return str(self.strerror)


def check_port_free(host: str, port: int) -> None:
    """Raise :class:`PortInUseError` if something listens on ``host:port`` (port 0: any free one,
    nothing to check). Binds as servers do (SO_REUSEADDR, no SO_REUSEPORT), then lets go."""
    if port == 0:
        return
    bind_host = host.strip("[]")
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    if bind_host in ("", "0.0.0.0", "::"):
        bind_host = "::" if family == socket.AF_INET6 else "0.0.0.0"
    try:
        infos = socket.getaddrinfo(bind_host, port, family if bind_host != "localhost" else socket.AF_UNSPEC,
                                   socket.SOCK_STREAM)
    except socket.gaierror:
        return  # gRPC reports an address it cannot resolve itself
    for fam, kind, proto, _, addr in infos[:1]:
        with socket.socket(fam, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    raise PortInUseError(f"{host}:{port}") from None
                raise
