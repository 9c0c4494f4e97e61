"""TLS and SASL for the admin requests framed by hand (runtime/group_admin.py), from the same
librdkafka settings every other client of the instance gets (instance/kafka_clients.py).

A secured cluster (SASL_SSL with SCRAM, as users run) refuses a bare socket; without this the
remove-members operation, which confluent-kafka lacks, worked on PLAINTEXT listeners only.
Supported: ``security.protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; ``sasl.mechanism`` PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512 (RFC 5802, no channel binding, as Kafka's SCRAM); PEM files for TLS.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from instance.errors import StreamsException

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class WireAuthError(StreamsException):
    """TLS or SASL with a broker failed, or the settings ask for what is not supported here."""


@dataclass(frozen=True)
class BrokerAuth:
    """How to reach a broker: the librdkafka names of :meth:`from_client_config`."""

    protocol: str = "PLAINTEXT"
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = None
    check_hostname: bool = True
    mechanism: str = "PLAIN"
    username: str = ""
    password: str = ""

    @staticmethod
    def from_client_config(config: Mapping[str, Any]) -> BrokerAuth:
        protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise WireAuthError(f"security.protocol={protocol} is not supported by the admin requests")
        mechanism = str(config.get("sasl.mechanism", config.get("sasl.mechanisms", "PLAIN"))).upper()
        if protocol.startswith("SASL") and mechanism not in ("PLAIN", *_SCRAM_HASHES):
            raise WireAuthError(f"sasl.mechanism={mechanism} is not supported by the admin requests "
                                "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
        return BrokerAuth(
            protocol=protocol, ca_file=config.get("ssl.ca.location"),
            cert_file=config.get("ssl.certificate.location"), key_file=config.get("ssl.key.location"),
            key_password=config.get("ssl.key.password"),
            check_hostname=str(config.get("ssl.endpoint.identification.algorithm", "https")).lower() != "none",
            mechanism=mechanism, username=str(config.get("sasl.username", "")),
            password=str(config.get("sasl.password", "")))

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL")

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """``sock`` under TLS when the protocol asks for it (the certificate checked as librdkafka does)."""
        if not self.tls:
            return sock
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file)
            ctx.check_hostname = self.check_hostname
            if self.cert_file:
                ctx.load_cert_chain(self.cert_file, self.key_file, self.key_password)
            return ctx.wrap_socket(sock, server_hostname=host)
        except (ssl.SSLError, OSError) as e:
            sock.close()
            raise WireAuthError(f"TLS with broker {host} failed: {e} (check ssl.ca.location, ssl.certificate.location, "
                                f"ssl.key.location)") from e


PLAINTEXT = BrokerAuth()

#: sends one request (api key, version, body) and returns the response body
Call = Callable[[int, int, bytes], bytes]


def _bytes(b: bytes) -> bytes:
    return len(b).to_bytes(4, "big", signed=True) + b


def _read_string(body: bytes, pos: int) -> tuple[str | None, int]:
    n = int.from_bytes(body[pos:pos + 2], "big", signed=True)
    if n < 0:
        return None, pos + 2
    return body[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def authenticate(call: Call, auth: BrokerAuth, where: str) -> None:
    """SaslHandshake v1, then SaslAuthenticate v1 rounds for the mechanism (Kafka's KIP-152 flow)."""
    if not auth.sasl:
        return
    body = call(SASL_HANDSHAKE, 1, len(auth.mechanism).to_bytes(2, "big") + auth.mechanism.encode())
    error = int.from_bytes(body[:2], "big", signed=True)
    if error:
        raise WireAuthError(f"broker {where} does not accept sasl.mechanism={auth.mechanism} (error {error})")

    def step(token: bytes) -> bytes:
        reply = call(SASL_AUTHENTICATE, 1, _bytes(token))
        code = int.from_bytes(reply[:2], "big", signed=True)
        message, pos = _read_string(reply, 2)
        if code:
            raise WireAuthError(f"broker {where} refused our credentials (sasl.username/sasl.password): "
                                f"{message or code}")
        n = int.from_bytes(reply[pos:pos + 4], "big", signed=True)
        return reply[pos + 4:pos + 4 + max(n, 0)]

    if auth.mechanism == "PLAIN":
        step(b"\0" + auth.username.encode() + b"\0" + auth.password.encode())
    else:
        scram(step, _SCRAM_HASHES[auth.mechanism], auth.username, auth.password, where)


def scram(step: Callable[[bytes], bytes], hash_name: str, username: str, password: str, where: str) -> None:
    """The client side of SCRAM (RFC 5802): two rounds, the server's signature checked."""
    nonce = base64.b64encode(secrets.token_bytes(24)).decode()
    bare = f"n={username.replace('=', '=3D').replace(',', '=2C')},r={nonce}"
    server_first = step(f"n,,{bare}".encode()).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
    if not fields.get("r", "").startswith(nonce) or "s" not in fields or "i" not in fields:
        raise WireAuthError(f"broker {where} sent an unusable SCRAM challenge")
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    final_bare = f"c=biws,r={fields['r']}"
    message = f"{bare},{server_first},{final_bare}".encode()
    signature = hmac.new(hashlib.new(hash_name, client_key).digest(), message, hash_name).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    server_final = step(f"{final_bare},p={proof}".encode()).decode()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    expected = base64.b64encode(hmac.new(server_key, message, hash_name).digest()).decode()
    if not hmac.compare_digest(server_final, f"v={expected}"):
        raise WireAuthError(f"broker {where} did not prove it knows our SCRAM credentials")
