"""A blocking request/response connection to one broker, for the APIs librdkafka lacks.

It connects (TLS and SASL from the client's librdkafka settings, through kafka_wire/wire_auth.py),
asks ApiVersions which versions the broker speaks, and then sends requests one at a time, each
with its own correlation id, at the highest version both sides know. Single-threaded: the caller
owns the connection (a group member's heartbeat loop, a describe helper).
"""

from __future__ import annotations

import socket
import struct
import time
from importlib import metadata
from typing import TypeVar

from instance.kafka_wire.apis import API_VERSIONS, Api
from instance.kafka_wire.error_codes import ErrorCode
from instance.kafka_wire.errors import ApiNotOfferedError, BrokerConnectionError
from instance.kafka_wire.generated import api_versions_response
from instance.kafka_wire.generated.api_versions_request import ApiVersionsRequest
from instance.kafka_wire.headers import frame_request, open_response
from instance.kafka_wire.primitives import Reader, Writer
from instance.kafka_wire.wire_auth import PLAINTEXT, BrokerAuth, WireAuthError, authenticate

Req = TypeVar("Req")
Resp = TypeVar("Resp")

CLIENT_ID = "iqmesh-wire"


def _software_version() -> str:
    try:
        return metadata.version("iqmesh")
    except metadata.PackageNotFoundError:
        return "0"


class Connection:
    """One broker connection with negotiated API versions (``broker_versions``: key -> (min, max))."""

    def __init__(self, host: str, port: int, *, auth: BrokerAuth = PLAINTEXT, client_id: str = CLIENT_ID,
                 timeout: float = 10.0) -> None:
        self.where = f"{host}:{port}"
        self.client_id = client_id
        self.timeout = timeout
        self._next_id = 0
        self._deadline = time.monotonic() + timeout
        try:
            self._sock = auth.wrap(socket.create_connection((host, port), timeout=timeout), host)
        except (OSError, WireAuthError) as e:
            raise BrokerConnectionError(f"cannot connect to broker {self.where}: {e}") from e
        try:
            self.broker_versions = self._negotiate()
            authenticate(self.raw_call, auth, self.where)
        except WireAuthError as e:
            self.close()
            raise BrokerConnectionError(str(e)) from e
        except BaseException:
            self.close()
            raise

    # -- versions -------------------------------------------------------------------------------------
    def offered(self, api_key: int) -> tuple[int, int] | None:
        """The broker's version range of ``api_key``, or None when it does not offer it."""
        return self.broker_versions.get(api_key)

    def version_for(self, api: Api[Req, Resp]) -> int:
        """The highest version of ``api`` both the broker and our codecs speak."""
        offered = self.offered(api.key)
        if offered is not None:
            best = min(offered[1], api.versions[1])
            if best >= max(offered[0], api.versions[0]):
                return best
        raise ApiNotOfferedError(api.name, self.where, offered, api.versions)

    def _negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions at our highest version; a broker that does not know it answers (in v0) with
        UNSUPPORTED_VERSION and its own range, and is asked again in a version it knows."""
        version = API_VERSIONS.versions[1]
        request = ApiVersionsRequest(client_software_name="iqmesh", client_software_version=_software_version())
        for _ in range(2):
            w = Writer()
            API_VERSIONS.write_request(w, request, version)
            r = self._exchange(API_VERSIONS.key, version, API_VERSIONS.flexible(version), w.getvalue())
            if Reader(r.take(2)).int16() == ErrorCode.UNSUPPORTED_VERSION:
                r.pos -= 2
                answer = api_versions_response.read(r, 0)
                theirs = {k.api_key: k.max_version for k in answer.api_keys}.get(API_VERSIONS.key, 0)
                version = min(theirs, API_VERSIONS.versions[1])
                continue
            r.pos -= 2
            answer = API_VERSIONS.read_response(r, version)
            if answer.error_code:
                raise BrokerConnectionError(f"broker {self.where} refused ApiVersions v{version}: "
                                            f"error {answer.error_code}")
            return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        raise BrokerConnectionError(f"broker {self.where} accepts no ApiVersions version we speak")

    # -- requests ---------------------------------------------------------------------------------------
    def call(self, api: Api[Req, Resp], request: Req, version: int | None = None) -> Resp:
        """Send ``request`` (at ``version``, default the negotiated one) and return the response."""
        version = self.version_for(api) if version is None else version
        w = Writer()
        api.write_request(w, request, version)
        r = self._exchange(api.key, version, api.flexible(version), w.getvalue())
        return api.read_response(r, version)

    def raw_call(self, api_key: int, version: int, body: bytes) -> bytes:
        """A non-flexible request given as bytes, its response body as bytes (kafka_wire/wire_auth.py's
        ``Call``: SASL handshake and authentication)."""
        r = self._exchange(api_key, version, False, body)
        return r.take(r.remaining)

    def _exchange(self, api_key: int, version: int, flexible: bool, body: bytes) -> Reader:
        self._next_id += 1
        self._deadline = time.monotonic() + self.timeout
        frame = frame_request(api_key, version, self._next_id, self.client_id, flexible, body)
        try:
            self._sock.settimeout(self._left())
            self._sock.sendall(frame)
            (size,) = struct.unpack(">i", self._read(4))
            payload = self._read(size)
        except OSError as e:
            raise BrokerConnectionError(f"request {api_key} v{version} to broker {self.where} failed: {e}") from e
        return open_response(payload, api_key, flexible, self._next_id, self.where)

    def _left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise BrokerConnectionError(f"timed out after {self.timeout:.0f}s waiting for broker {self.where}")
        return left

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            self._sock.settimeout(self._left())
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise BrokerConnectionError(f"broker {self.where} closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port`` pairs of a ``bootstrap.servers`` value (``PLAINTEXT://`` prefixes allowed)."""
    found = []
    for entry in bootstrap.split(","):
        host, _, port = entry.strip().split("://")[-1].rpartition(":")
        if not port.isdigit():
            raise BrokerConnectionError(f"bootstrap entry {entry.strip()!r} is not host:port")
        found.append((host.strip("[]") or "127.0.0.1", int(port)))
    return found


def connect_any(bootstrap: str, *, auth: BrokerAuth = PLAINTEXT, client_id: str = CLIENT_ID,
                timeout: float = 10.0) -> Connection:
    """A connection to the first broker of ``bootstrap`` that answers."""
    errors = []
    for host, port in parse_bootstrap(bootstrap):
        try:
            return Connection(host, port, auth=auth, client_id=client_id, timeout=timeout)
        except BrokerConnectionError as e:
            errors.append(str(e))
    raise BrokerConnectionError("; ".join(errors))
