"""Transport security shared by the instances' gRPC servers, the forwarding hop, the clients and
the REST gateway: TLS from PEM files and an optional bearer token.

One :class:`Security` serves both ends. A server uses ``cert_file``/``key_file`` and checks
``token``; a client (an instance forwarding, the Python clients, the gateway asking instances)
dials with TLS when ``tls`` is on, trusting ``ca_file`` (the system's roots when empty), and sends
``token``. The gRPC health service needs no token (probes cannot send one).
"""

from __future__ import annotations

import hmac
import ipaddress
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

#: setting names (the same in every properties file, for instances and the gateway)
TLS_CERT_FILE = "iqmesh.tls.cert.file"
TLS_KEY_FILE = "iqmesh.tls.key.file"
TLS_CA_FILE = "iqmesh.tls.ca.file"
AUTH_TOKEN = "iqmesh.auth.token"
SETTINGS = (TLS_CERT_FILE, TLS_KEY_FILE, TLS_CA_FILE, AUTH_TOKEN)

#: calls that need no token: health checks (a kubelet's gRPC probe cannot send one)
OPEN_METHODS_PREFIX = "/grpc.health.v1.Health/"
AUTHORIZATION = "authorization"
#: How a channel finds a peer that came back at a new address (a pod replaced by its StatefulSet).
#: gRPC's defaults re-resolve a name at most every 30 s, give a connect 20 s and back off up to
#: 120 s between attempts: a replaced pod stayed unreachable to its peers and clients for tens of
#: seconds after it was Ready, and queries that its standby could not answer either timed out.
CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.dns_min_time_between_resolutions_ms", 1000),
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 3000),  # also the shortest connect timeout
    ("grpc.max_reconnect_backoff_ms", 3000),
)

@dataclass(frozen=True)
class Security:
    """``cert_file``/``key_file``: this server's certificate chain and private key (PEM; TLS is on
    when set); ``ca_file``: the CA bundle a client verifies servers with; ``token``: the bearer
    token servers require and clients send (empty: none); ``client_tls``: clients dial with TLS
    even without a CA file (None: when ``cert_file`` or ``ca_file`` is set)."""

    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    token: str = ""
    client_tls: bool | None = None

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))

    def problems(self) -> list[str]:
        out: list[str] = []
        if bool(self.cert_file) != bool(self.key_file):
            out.append(f"{TLS_CERT_FILE} and {TLS_KEY_FILE} go together: set both (PEM files) or neither")
        for name, path, what, marker in ((TLS_CERT_FILE, self.cert_file, "certificate", "-----BEGIN CERTIFICATE-----"),
                                         (TLS_KEY_FILE, self.key_file, "private key", "PRIVATE KEY-----"),
                                         (TLS_CA_FILE, self.ca_file, "certificate", "-----BEGIN CERTIFICATE-----")):
            if path:
                out += _check_pem(name, path, what, marker)
        if self.token and (self.token != self.token.strip() or any(c.isspace() or ord(c) < 33 for c in self.token)):
            out.append(f"{AUTH_TOKEN} must be printable characters without spaces")
        return out

    @staticmethod
    def from_properties(props: Mapping[str, Any]) -> Security:
        """From the ``iqmesh.tls.*``/``iqmesh.auth.token`` settings of ``props`` (others ignored)."""
        return Security(str(props.get(TLS_CERT_FILE, "") or ""), str(props.get(TLS_KEY_FILE, "") or ""),
                        str(props.get(TLS_CA_FILE, "") or ""), str(props.get(AUTH_TOKEN, "") or ""))

    @property
    def server_tls(self) -> bool:
        return bool(self.cert_file)

    @property
    def dial_tls(self) -> bool:
        return self.client_tls if self.client_tls is not None else bool(self.cert_file or self.ca_file)

    @property
    def protected(self) -> bool:
        """Whether a server with these settings refuses strangers (TLS or a token)."""
        return self.server_tls or bool(self.token)

    # -- gRPC ------------------------------------------------------------------------------------
    def server_credentials(self) -> grpc.ServerCredentials:
        pair = (Path(self.key_file).read_bytes(), Path(self.cert_file).read_bytes())
        return grpc.ssl_server_credentials([pair])

    def channel_credentials(self) -> grpc.ChannelCredentials:
        roots = Path(self.ca_file).read_bytes() if self.ca_file else None
        return grpc.ssl_channel_credentials(root_certificates=roots)

    def call_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((AUTHORIZATION, f"Bearer {self.token}"),) if self.token else ()

    def server_interceptors(self) -> list[grpc.ServerInterceptor]:
        return [TokenInterceptor(self.token)] if self.token else []

    def channel(self, endpoint: str) -> grpc.Channel:
        """A channel to ``endpoint`` that dials with TLS as configured (the token goes with each
        call: :meth:`call_metadata`, added by kernel.channels)."""
        if self.dial_tls:
            return grpc.secure_channel(endpoint, self.channel_credentials(), options=CHANNEL_OPTIONS)
        return grpc.insecure_channel(endpoint, options=CHANNEL_OPTIONS)

    def aio_channel(self, endpoint: str) -> grpc.aio.Channel:
        if self.dial_tls:
            return grpc.aio.secure_channel(endpoint, self.channel_credentials(), options=CHANNEL_OPTIONS)
        return grpc.aio.insecure_channel(endpoint, options=CHANNEL_OPTIONS)

    # -- HTTP ------------------------------------------------------------------------------------
    def server_ssl_context(self) -> ssl.SSLContext | None:
        if not self.server_tls:
            return None
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def token_matches(self, presented: str) -> bool:
        """Constant-time comparison with the configured token (True when none is configured)."""
        return not self.token or hmac.compare_digest(presented.encode(), self.token.encode())


def header_value(details: grpc.HandlerCallDetails, name: str) -> str:
    """The call's metadata value ``name`` as text ("" when absent): what server interceptors read."""
    value = next((v for k, v in details.invocation_metadata or () if k == name), "")
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def bearer(header: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` value ("" when it is not one)."""
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_pem(name: str, path: str, what: str, marker: str) -> list[str]:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        return [f"{name}: cannot read {path!r} ({e.strerror or e})"]
    if marker not in text:
        return [f"{name}: {path!r} is not a PEM file holding a {what} (no {marker!r} line)"]
    return []


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuses calls without ``authorization: Bearer <token>`` with UNAUTHENTICATED (health
    checks pass)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
                          details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        if details.method.startswith(OPEN_METHODS_PREFIX):
            return continuation(details)
        token = bearer(header_value(details, AUTHORIZATION))
        if token and hmac.compare_digest(token.encode(), self._token):
            return continuation(details)
        message = ("a bearer token is required (metadata 'authorization: Bearer <token>')" if not token
                   else "the bearer token is not the one this instance expects")
        handler = continuation(details)
        return refusing_handler(handler, grpc.StatusCode.UNAUTHENTICATED, message)


def refusing_handler(handler: grpc.RpcMethodHandler | None, code: grpc.StatusCode, message: str,
                     trailing_metadata: tuple[tuple[str, str | bytes], ...] = ()) -> grpc.RpcMethodHandler:
    """A handler of the same shape as ``handler`` that ends the call with ``code`` (and the
    typed details ``trailing_metadata`` carries, if any)."""

    def deny(request: Any, context: grpc.ServicerContext) -> Any:
        if trailing_metadata:
            context.set_trailing_metadata(trailing_metadata)
        context.abort(code, message)

    if handler is not None and handler.response_streaming:
        if handler.request_streaming:
            return grpc.stream_stream_rpc_method_handler(deny)
        return grpc.unary_stream_rpc_method_handler(deny)
    if handler is not None and handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(deny)
    return grpc.unary_unary_rpc_method_handler(deny)


NO_SECURITY = Security()
